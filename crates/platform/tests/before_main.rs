//! A device named on the command line is opened, and the process confined, before `main`:
//! none of the program's own code runs as root or unconfined. Each test runs its program in a
//! child (this binary again, an ignored helper test) against a pretend function on tmpfs,
//! which `SAFENIC_DEVICES_AS_REAL` makes `platform` take as real; the address is among the
//! child's arguments, as a driver's ports are.

use platform::before_main::AS_REAL_ENV;
use platform::fs::ScratchDir;
use platform::keeper::{Keeper, StopPlan};
use platform::{MappedRegion, PciFunction};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const PLAN: StopPlan =
    StopPlan { control: 0x28, enable: 1 << 25, ctrl: 0x0, master_disable: 1 << 2, status: 0x8, master_enable: 1 << 19 };
/// In PCI domain 0xfe, which hosts do not number their functions in: no real function shares it.
const ADDRESS: &str = "00fe:00:00.0";

/// A pretend network controller under `scratch`: class, configuration space and a 4 KiB BAR0.
fn pretend_function(scratch: &ScratchDir, class: &str) -> PathBuf {
    let dir = scratch.path().join(ADDRESS);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("class"), class).unwrap();
    std::fs::write(dir.join("config"), vec![0u8; 256]).unwrap();
    std::fs::write(dir.join("resource0"), vec![0u8; 4096]).unwrap();
    scratch.path().to_path_buf()
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
    let function = PciFunction::open(&root, ADDRESS).unwrap();
    let bar = function.map_bar0(4096).unwrap();
    match PciFunction::open(&root, ADDRESS) {
        Ok(_) => println!("opened twice"),
        Err(e) => println!("second open: {e}"),
    }
    // The keeper was forked before main with the BAR: it takes a queue on it.
    let memory = std::fs::File::from(rustix::fs::memfd_create("queue", rustix::fs::MemfdFlags::CLOEXEC).unwrap());
    memory.set_len(4096).unwrap();
    bar.write_u32(PLAN.control, PLAN.enable);
    let keeper = Keeper::start(&bar, PLAN, &memory).unwrap();
    println!("keeper {}", keeper.pid());
    let target = rustix::process::Pid::from_raw(keeper.pid() as i32).unwrap();
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
    let view = MappedRegion::map_file(&file, 0, 4096, false).unwrap();
    let text = run_helper("helper_named_device", &root, true, &[]);
    let unprivileged = platform::confine::UNPRIVILEGED;
    assert!(text.contains(&format!("Uid:\t{unprivileged}\t{unprivileged}\t{unprivileged}")), "{text}");
    assert!(text.contains("CapEff:\t0000000000000000"), "{text}");
    for refused in ["opened /proc/self/mem", "opened twice", "killed the keeper"] {
        assert!(!text.contains(refused), "the program {refused}:\n{text}");
    }
    assert!(text.contains("second open: PCI function 00fe:00:00.0 is not open to this process"), "{text}");
    // The program exited without Drop: its keeper, forked before main, stops the queue.
    let start = Instant::now();
    while view.read_u32(PLAN.control) & PLAN.enable != 0 {
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
    let function = PciFunction::open(&test_root(), ADDRESS).unwrap();
    function.map_bar0(4096).unwrap();
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
        let e = PciFunction::open(root, ADDRESS).and_then(|f| f.map_bar0(4096).map(drop)).unwrap_err().to_string();
        assert!(e.contains("not open to this process") || e.contains("not a BAR"), "{}: {e}", root.display());
    };
    let sysfs_dir = s.join("directory");
    std::fs::create_dir(&sysfs_dir).unwrap();
    std::os::unix::fs::symlink("/sys/kernel/mm", sysfs_dir.join(ADDRESS)).unwrap();
    refused(&sysfs_dir);

    let function = |name: &str, config: Option<&str>, resource0: Option<&str>| {
        let dir = s.join(name).join(ADDRESS);
        std::fs::create_dir_all(&dir).unwrap();
        match config {
            Some(target) => std::os::unix::fs::symlink(target, dir.join("config")).unwrap(),
            None => std::fs::write(dir.join("config"), vec![0u8; 256]).unwrap(),
        }
        match resource0 {
            Some(target) => std::os::unix::fs::symlink(target, dir.join("resource0")).unwrap(),
            None => std::fs::write(dir.join("resource0"), vec![0u8; 4096]).unwrap(),
        }
        s.join(name)
    };
    refused(&function("config", Some(SYSFS_FILE), None));
    refused(&function("bar", None, Some(SYSFS_FILE)));
    refused(&function("device", None, Some("/dev/null")));
    // The same directory with files of its own is a pretend device like nicsim's.
    let own = function("own", None, None);
    PciFunction::open(&own, ADDRESS).unwrap().map_bar0(4096).unwrap();
}
