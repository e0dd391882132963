//! A device named on the command line is opened, and the process confined, before `main`:
//! none of the program's own code runs as root or unconfined. Each test runs its program in a
//! child (this binary again, an ignored helper test) against a pretend function on tmpfs,
//! which `SAFENIC_DEVICES_AS_REAL` makes `platform` take as real; the address is among the
//! child's arguments, as a driver's ports are.

use invariants::ConstIndex;
use platform::before_main::AS_REAL_ENV;
use platform::dma::{DmaLayout, DmaRegion};
use platform::fs::ScratchDir;
use platform::i82599::{Function, LegacyRing, BAR0_LEN};
use platform::{MappedRegion, PciFunction};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// RXDCTL(0) and its enable bit [DS 8.2.3.8.6].
const RXDCTL0: usize = 0x01028;
const ENABLE: u32 = 1 << 25;
/// In PCI domain 0xfe, which hosts do not number their functions in: no real function shares it.
const ADDRESS: &str = "00fe:00:00.0";
/// A second pretend function, never named on a command line: a simulated device.
const OTHER: &str = "00fe:00:01.0";

/// A pretend 82599 under `scratch`: ids, class, configuration space and BAR0, whose registers
/// hold what is written (so a queue's enable reads back at once).
fn pretend_function(scratch: &ScratchDir, class: &str) -> PathBuf {
    pretend_82599(&scratch.path().join(ADDRESS), class);
    pretend_82599(&scratch.path().join(OTHER), class);
    scratch.path().to_path_buf()
}

fn pretend_82599(dir: &Path, class: &str) {
    std::fs::create_dir_all(dir).unwrap();
    for (name, text) in [("class", class), ("vendor", "0x8086\n"), ("device", "0x10fb\n")] {
        std::fs::write(dir.join(name), text).unwrap();
    }
    std::fs::write(dir.join("config"), vec![0u8; 256]).unwrap();
    std::fs::write(dir.join("resource0"), vec![0u8; BAR0_LEN]).unwrap();
}

/// Runs `helper` of this binary in a child, `named` or not on its command line, with `root`
/// taken as real and `env` set; its stdout, after checking that it passed.
fn run_helper(helper: &str, root: &Path, named: bool, env: &[(&str, &str)]) -> String {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command.args(["--ignored", "--exact", helper, "--nocapture", "--test-threads=1"]);
    if named {
        // A second filter that matches no test: the helper still runs.
        command.arg(ADDRESS);
    }
    let out =
        command.env(AS_REAL_ENV, root).env("BEFORE_MAIN_TEST_ROOT", root).envs(env.iter().copied()).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let errors = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && text.contains("helper done"), "{helper} failed:\n{text}{errors}");
    text
}

fn test_root() -> PathBuf {
    PathBuf::from(std::env::var("BEFORE_MAIN_TEST_ROOT").expect("run by its test"))
}

/// Run in a child by the test below: everything here is the program's own code, which runs
/// after `main`. It checks what it is, tries what root could, drives its device, and exits
/// without Drop with the queue enabled.
#[test]
#[ignore = "helper: run by a_named_device_is_opened_and_the_process_confined_before_main"]
fn helper_named_device() {
    let root = test_root();
    assert!(platform::before_main::confined_before_main());
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    for field in ["Uid:", "CapEff:"] {
        println!("{}", status.lines().find(|l| l.starts_with(field)).unwrap());
    }
    if std::fs::OpenOptions::new().write(true).open("/proc/self/mem").is_ok() {
        println!("opened /proc/self/mem for writing");
    }
    let function = Function::open(&root, ADDRESS).unwrap();
    match Function::open(&root, ADDRESS) {
        Ok(_) => println!("opened twice"),
        Err(e) => println!("second open: {e}"),
    }
    // The outside review's attack: a heap object's physical address as a ring's base, by every
    // way safe code has to the registers.
    let boxed = Box::new([0u8; 4096]);
    let heap = platform::pagemap::Pagemap::own().unwrap().translate(boxed.as_ptr() as usize).unwrap().unwrap_or(1);
    let r = function.registers();
    for offset in [0x01000, 0x01004, 0x01008, 0x01014, 0x06000, 0x06004, 0x06038, 0x0603C, 0x02410, 0x0D000] {
        if r.write(platform::i82599::reg(offset), heap as u32).is_ok() {
            println!("wrote {offset:#x}");
        }
    }
    let bar = std::fs::OpenOptions::new().read(true).write(true).open(root.join(ADDRESS).join("resource0"));
    match bar.and_then(|f| MappedRegion::map_file(&f, 0, BAR0_LEN, false)) {
        Ok(_) => println!("mapped the BAR again"),
        Err(e) => println!("second mapping: {e}"),
    }
    // A simulated device beside the real one would be a DMA engine into this process.
    if PciFunction::open(&root, OTHER).is_ok() {
        println!("opened a simulated device");
    }
    // A queue on DMA memory: the keeper, forked before main with the BAR, holds the memory
    // and is told how to stop the queue.
    let mut layout = DmaLayout::new();
    let (ring, buffers) = (layout.descriptor_ring(8).unwrap(), layout.buffers(1).unwrap());
    let region = DmaRegion::allocate(&layout).unwrap();
    let buffer = region.buffer(buffers, 0).unwrap().addr;
    let ring = LegacyRing::<8>::new(&region, ring, |_| buffer).unwrap();
    let queue = function.registers().enable_rx(ConstIndex::new(0), ring, true).unwrap();
    std::mem::forget(queue);
    let keeper = platform::keeper::keeper_pid().unwrap();
    println!("keeper {keeper}");
    let target = rustix::process::Pid::from_raw(keeper as i32).unwrap();
    if rustix::process::kill_process(target, rustix::process::Signal::KILL).is_ok() {
        println!("killed the keeper");
    }
    println!("helper done");
    std::process::exit(0);
}

#[test]
fn a_named_device_is_opened_and_the_process_confined_before_main() {
    let scratch = ScratchDir::new("platform-test", "before-main").unwrap();
    let root = pretend_function(&scratch, "0x020000\n");
    let file = std::fs::OpenOptions::new().read(true).write(true).open(root.join(ADDRESS).join("resource0")).unwrap();
    let view = MappedRegion::map_file(&file, 0, BAR0_LEN, false).unwrap();
    let text = run_helper("helper_named_device", &root, true, &[]);
    let unprivileged = platform::confine::UNPRIVILEGED;
    assert!(text.contains(&format!("Uid:\t{unprivileged}\t{unprivileged}\t{unprivileged}")), "{text}");
    assert!(text.contains("CapEff:\t0000000000000000"), "{text}");
    for refused in [
        "opened /proc/self/mem",
        "opened twice",
        "killed the keeper",
        "wrote 0x",
        "mapped the BAR again",
        "opened a simulated device",
    ] {
        assert!(!text.contains(refused), "the program {refused}:\n{text}");
    }
    assert!(text.contains("second open: PCI function 00fe:00:00.0 is not open to this process"), "{text}");
    // The program exited without Drop: its keeper, forked before main, stops the queue.
    let start = Instant::now();
    assert!(text.contains("keeper "), "{text}");
    while view.read_u32(RXDCTL0) & ENABLE != 0 {
        assert!(start.elapsed() < Duration::from_secs(60), "the keeper did not stop the queue within a minute");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Run in a child by the test below, which names no device: the program runs as it was
/// started, and opens the pretend function itself, as any program opens nicsim's.
#[test]
#[ignore = "helper: run by a_program_that_names_no_device_is_left_as_it_was"]
fn helper_named_nothing() {
    assert!(!platform::before_main::confined_before_main());
    assert!(!platform::confine::is_confined() && !platform::confine::gave_up_root());
    Function::open(&test_root(), ADDRESS).unwrap();
    assert!(platform::keeper::keeper_pid().is_none());
    println!("helper done");
}

#[test]
fn a_program_that_names_no_device_is_left_as_it_was() {
    let scratch = ScratchDir::new("platform-test", "before-main-none").unwrap();
    let root = pretend_function(&scratch, "0x020000\n");
    run_helper("helper_named_nothing", &root, false, &[]);
}

/// Run in a child by the tests below, each of which names a function the program may not be
/// given: nothing was opened or confined before main, and opening it fails as the test expects.
#[test]
#[ignore = "helper: run by the tests that name a function that is not opened"]
fn helper_named_a_function_not_opened() {
    assert!(!platform::before_main::confined_before_main());
    let e = PciFunction::open(&test_root(), ADDRESS).unwrap_err().to_string();
    println!("{e}");
    let expected = std::env::var("BEFORE_MAIN_TEST_REFUSAL").expect("run by its test");
    assert!(e.contains(&expected), "{e}");
    println!("helper done");
}

/// Names the function under `root` and checks that it is refused with `refusal`.
fn expect_not_opened(root: &Path, refusal: &str) {
    run_helper("helper_named_a_function_not_opened", root, true, &[("BEFORE_MAIN_TEST_REFUSAL", refusal)]);
}

#[test]
fn a_named_function_that_is_no_network_controller_is_not_opened() {
    let scratch = ScratchDir::new("platform-test", "before-main-disk").unwrap();
    let root = pretend_function(&scratch, "0x010802\n");
    expect_not_opened(&root, "is not a network controller (class 010802)");
}

#[test]
fn a_named_port_that_a_kernel_driver_holds_is_not_opened() {
    let scratch = ScratchDir::new("platform-test", "before-main-bound").unwrap();
    let root = pretend_function(&scratch, "0x020000\n");
    std::fs::create_dir(root.join("ixgbe")).unwrap();
    std::os::unix::fs::symlink(root.join("ixgbe"), root.join(ADDRESS).join("driver")).unwrap();
    expect_not_opened(&root, "is bound to the kernel driver `ixgbe`");
}

/// A pretend function whose `resource0` leads to sysfs would give the program a real device
/// without the claim on its `config`.
#[test]
fn a_pretend_function_with_a_file_on_sysfs_is_not_opened() {
    let scratch = ScratchDir::new("platform-test", "before-main-leads").unwrap();
    let root = pretend_function(&scratch, "0x020000\n");
    let resource0 = root.join(ADDRESS).join("resource0");
    std::fs::remove_file(&resource0).unwrap();
    std::os::unix::fs::symlink(SYSFS_FILE, &resource0).unwrap();
    expect_not_opened(&root, "resource0 is on sysfs, unlike the rest of the function");
}

/// A file on sysfs that root may open for writing; opening it writes nothing.
const SYSFS_FILE: &str = "/sys/class/net/lo/mtu";

/// A real device's files reached from elsewhere are refused like the device itself: a
/// function directory that is a sysfs directory, a `config` on sysfs, and a `resource0` that is
/// no regular file (a link to `/dev/mem` would make physical memory the registers; here
/// `/dev/null`). None of them is written.
#[test]
fn a_real_device_reached_through_another_path_is_refused() {
    let scratch = ScratchDir::new("platform-test", "before-main-paths").unwrap();
    let s = scratch.path();
    let refused = |root: &Path| {
        let e = Function::open(root, ADDRESS).map(drop).unwrap_err().to_string();
        assert!(e.contains("not open to this process") || e.contains("not a BAR"), "{}: {e}", root.display());
    };
    let sysfs_dir = s.join("directory");
    std::fs::create_dir(&sysfs_dir).unwrap();
    std::os::unix::fs::symlink("/sys/kernel/mm", sysfs_dir.join(ADDRESS)).unwrap();
    refused(&sysfs_dir);

    let function = |name: &str, config: Option<&str>, resource0: Option<&str>| {
        let dir = s.join(name).join(ADDRESS);
        pretend_82599(&dir, "0x020000\n");
        if let Some(target) = config {
            std::fs::remove_file(dir.join("config")).unwrap();
            std::os::unix::fs::symlink(target, dir.join("config")).unwrap();
        }
        if let Some(target) = resource0 {
            std::fs::remove_file(dir.join("resource0")).unwrap();
            std::os::unix::fs::symlink(target, dir.join("resource0")).unwrap();
        }
        s.join(name)
    };
    refused(&function("config", Some(SYSFS_FILE), None));
    refused(&function("bar", None, Some(SYSFS_FILE)));
    refused(&function("device", None, Some("/dev/null")));
    // The same directory with files of its own is a pretend device like nicsim's.
    let own = function("own", None, None);
    Function::open(&own, ADDRESS).unwrap();
}
