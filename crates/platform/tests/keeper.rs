//! The keeper, against a pretend device: a PCI function directory on tmpfs whose `resource0`
//! the driver maps as its BAR and the test maps too, and which confirms a stop at once (a bit
//! reads back as written). What the keeper does with a device that confirms nothing is tested
//! in `keeper`'s unit tests. Each test runs its driver in a child (this binary again, an
//! ignored helper test): a process has one keeper, which knows the BARs mapped before it
//! started, and confining or ending a process is for good.

use platform::fs::ScratchDir;
use platform::keeper::{Keeper, StopPlan};
use platform::{MappedRegion, PciFunction};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const PLAN: StopPlan =
    StopPlan { control: 0x28, enable: 1 << 25, ctrl: 0x0, master_disable: 1 << 2, status: 0x8, master_enable: 1 << 19 };
const ADDRESS: &str = "0000:00:00.0";

/// A pretend PCI function under `scratch`: a configuration space and a 4 KiB BAR0.
fn pretend_function(scratch: &ScratchDir) -> std::path::PathBuf {
    let dir = scratch.path().join(ADDRESS);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config"), vec![0u8; 256]).unwrap();
    std::fs::write(dir.join("resource0"), vec![0u8; 4096]).unwrap();
    scratch.path().to_path_buf()
}

/// The test's own view of the BAR, which claims nothing.
fn observe(root: &Path) -> MappedRegion {
    let file = std::fs::OpenOptions::new().read(true).write(true).open(root.join(ADDRESS).join("resource0")).unwrap();
    MappedRegion::map_file(&file, 0, 4096, false).unwrap()
}

/// A queue's memory: a file beside the function, and its mapping.
fn queue_memory(root: &Path) -> (std::fs::File, MappedRegion) {
    let path = root.join(format!("memory-{}", std::process::id()));
    let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(&path).unwrap();
    file.set_len(4096).unwrap();
    std::fs::remove_file(&path).unwrap();
    let region = MappedRegion::map_file(&file, 0, 4096, false).unwrap();
    (file, region)
}

/// What a helper drives: the pretend function at `KEEPER_TEST_ROOT` claimed, its BAR mapped,
/// and a queue's memory.
struct Driver {
    root: std::path::PathBuf,
    _function: PciFunction,
    bar: MappedRegion,
    file: std::fs::File,
    _memory: MappedRegion,
}

fn helper_driver() -> Driver {
    let root = std::path::PathBuf::from(std::env::var("KEEPER_TEST_ROOT").expect("run by its test"));
    let function = PciFunction::open(&root, ADDRESS).unwrap();
    let bar = function.map_bar0(4096).unwrap();
    let (file, memory) = queue_memory(&root);
    Driver { root, _function: function, bar, file, _memory: memory }
}

/// Whether process `pid` has ended (gone, or a zombie nobody reaped yet).
fn ended(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| s.contains(") Z "))
}

/// Whether process `pid` maps a file with inode `ino`.
fn maps_inode(pid: u32, ino: u64) -> bool {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    maps.lines().any(|l| l.split_whitespace().nth(4) == Some(&ino.to_string()))
}

/// Waits up to a minute (an event the keeper makes in microseconds) for `done`.
fn eventually(what: &str, done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < Duration::from_secs(60), "{what} did not happen within a minute");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Runs `helper` of this binary in a child with the pretend function at `root`; its stdout.
fn run_helper(helper: &str, root: &Path) -> String {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", helper, "--nocapture", "--test-threads=1"])
        .env("KEEPER_TEST_ROOT", root)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let errors = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && text.contains("keeper "), "{helper} failed:\n{text}{errors}");
    text
}

/// The number after `word ` in the helper's output.
fn reported(text: &str, word: &str) -> u32 {
    text.lines().find_map(|l| l.rsplit_once(&format!("{word} "))?.1.trim().parse().ok()).unwrap()
}

/// Run in a child by the test below.
#[test]
#[ignore = "helper: run by the_keeper_holds_a_queue_memory_until_it_reads_the_queue_stopped"]
fn helper_stop_a_queue() {
    let Driver { bar, file, .. } = &helper_driver();
    let ino = file.metadata().unwrap().ino();
    bar.write_u32(PLAN.control, PLAN.enable);
    let keeper = Keeper::start(bar, PLAN, file).unwrap();
    let pid = keeper.pid();
    println!("keeper {pid}");
    assert!(maps_inode(pid, ino), "the keeper maps the queue's memory");
    bar.write_u32(PLAN.control, 0); // what the queue's Drop does, and the device confirms
    keeper.stopped();
    assert!(!maps_inode(pid, ino), "the memory is let go once the keeper read the queue stopped");
    assert!(!ended(pid), "the keeper stays for the process's next queues");
}

#[test]
fn the_keeper_holds_a_queue_memory_until_it_reads_the_queue_stopped() {
    let scratch = ScratchDir::new("platform-test", "keeper-stopped").unwrap();
    let root = pretend_function(&scratch);
    let view = observe(&root);
    let pid = reported(&run_helper("helper_stop_a_queue", &root), "keeper");
    eventually("the keeper's end after its driver's", || ended(pid));
    assert_eq!(view.read_u32(PLAN.control), 0);
    assert_eq!(view.read_u32(PLAN.ctrl), 0, "no master disable");
}

/// Run in a child by the test below.
#[test]
#[ignore = "helper: run by a_release_of_a_running_queue_stops_it_before_the_memory_goes"]
fn helper_release_a_running_queue() {
    let Driver { bar, file, .. } = &helper_driver();
    let ino = file.metadata().unwrap().ino();
    bar.write_u32(PLAN.control, PLAN.enable | 1);
    let keeper = Keeper::start(bar, PLAN, file).unwrap();
    let pid = keeper.pid();
    println!("keeper {pid}");
    drop(keeper);
    assert_eq!(bar.read_u32(PLAN.control), 1, "the keeper cleared the enable bit, and only it");
    assert!(!maps_inode(pid, ino), "then let the memory go");
}

#[test]
fn a_release_of_a_running_queue_stops_it_before_the_memory_goes() {
    // A queue dropped without the device's confirmation, or a release sent by anyone who
    // copied the keeper's socket: the keeper does not take the driver's word for it.
    let scratch = ScratchDir::new("platform-test", "keeper-running").unwrap();
    let root = pretend_function(&scratch);
    let pid = reported(&run_helper("helper_release_a_running_queue", &root), "keeper");
    eventually("the keeper's end after its driver's", || ended(pid));
}

/// Run in a child by the test below: enables the queue, hands it to the keeper and ends with
/// `process::exit`, which runs no destructor.
#[test]
#[ignore = "helper: run by a_driver_that_exits_without_drop_has_its_queue_stopped"]
fn helper_exit_with_the_queue_enabled() {
    let Driver { bar, file, .. } = &helper_driver();
    bar.write_u32(PLAN.control, PLAN.enable);
    let keeper = Keeper::start(bar, PLAN, file).unwrap();
    println!("keeper {}", keeper.pid());
    std::process::exit(0);
}

#[test]
fn a_driver_that_exits_without_drop_has_its_queue_stopped() {
    let scratch = ScratchDir::new("platform-test", "keeper-exit").unwrap();
    let root = pretend_function(&scratch);
    let view = observe(&root);
    let pid = reported(&run_helper("helper_exit_with_the_queue_enabled", &root), "keeper");
    eventually("the queue's stop", || view.read_u32(PLAN.control) & PLAN.enable == 0);
    eventually("the keeper's end", || ended(pid));
    assert_eq!(view.read_u32(PLAN.ctrl), 0, "the queue stopped, so no master disable");
}

/// Run in a child by the test below: a confined driver with a queue, no longer root, that
/// tries, with safe code and the programs it may start, to write root's files, to end or
/// limit its keeper, then to make it let the memory go with a forged release, and exits
/// without Drop.
#[test]
#[ignore = "helper: run by a_confined_driver_is_not_root_and_cannot_end_its_keeper"]
fn helper_attack_the_keeper() {
    platform::keeper::keep_every_queue();
    let Driver { root, bar, file, .. } = &helper_driver();
    platform::confine::confine_process().unwrap();
    bar.write_u32(PLAN.control, PLAN.enable);
    let keeper = Keeper::start(bar, PLAN, file).unwrap();
    let pid = keeper.pid();
    println!("keeper {pid}");
    // The driver is root no more: a file of root's that a root service would act on (here a
    // directory the test made) is out of its reach, and so are its capabilities.
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    for field in ["Uid:", "CapEff:"] {
        println!("{}", status.lines().find(|l| l.starts_with(field)).unwrap());
    }
    if std::fs::write(root.join("root-only").join("crontab"), "* * * * * root true\n").is_ok() {
        println!("wrote root's file");
    }
    // DMA memory allocated after giving up root still has its physical addresses, and a file
    // to hand the keeper.
    match platform::DmaMemory::allocate(platform::hugepage::HUGEPAGE, platform::DmaBacking::HugetlbfsFile(None)) {
        Ok(m) if m.phys(0) != 0 && m.file().is_some() => println!("dma after the first queue"),
        other => println!("no dma after the first queue: {:?}", other.err()),
    }
    let target = rustix::process::Pid::from_raw(pid as i32).unwrap();
    for signal in [rustix::process::Signal::KILL, rustix::process::Signal::STOP] {
        if rustix::process::kill_process(target, signal).is_ok() {
            println!("signalled {}", signal.as_raw());
        }
    }
    let shell = Command::new("sh").args(["-c", &format!("kill -KILL {pid} || exit 0; echo killed")]).output().unwrap();
    print!("{}", String::from_utf8_lossy(&shell.stdout));
    let no_cpu = rustix::process::Rlimit { current: Some(0), maximum: Some(0) };
    if rustix::process::prlimit(Some(target), rustix::process::Resource::Cpu, no_cpu).is_ok() {
        println!("limited");
    }
    // Copy every descriptor of the process, and on each socket, send the release of every
    // queue id the keeper might use, as the driver would once a queue stopped.
    let me = rustix::process::pidfd_open(rustix::process::getpid(), rustix::process::PidfdFlags::empty()).unwrap();
    for fd in 0..256 {
        let Ok(copy) = rustix::process::pidfd_getfd(&me, fd, rustix::process::PidfdGetfdFlags::empty()) else {
            continue;
        };
        if rustix::fs::fstat(&copy).is_ok_and(|st| st.st_mode & libc_sock_type() == libc_sock_type()) {
            for id in 0..8u64 {
                let mut message = [0u8; 64];
                message[..8].copy_from_slice(&2u64.to_ne_bytes());
                message[8..16].copy_from_slice(&id.to_ne_bytes());
                let _ = rustix::net::send(&copy, &message, rustix::net::SendFlags::NOSIGNAL);
            }
        }
    }
    std::thread::sleep(Duration::from_millis(100));
    println!("enable after forged releases {}", bar.read_u32(PLAN.control) & PLAN.enable);
    println!("attacks done");
    std::process::exit(0);
}

/// S_IFSOCK: the file type of a socket.
const fn libc_sock_type() -> u32 {
    0o140000
}

#[test]
fn a_confined_driver_is_not_root_and_cannot_end_its_keeper() {
    let scratch = ScratchDir::new("platform-test", "keeper-attack").unwrap();
    let root = pretend_function(&scratch);
    std::fs::create_dir(root.join("root-only")).unwrap();
    let view = observe(&root);
    let text = run_helper("helper_attack_the_keeper", &root);
    assert!(text.contains("attacks done"), "the helper did not finish its attacks:\n{text}");
    for refused in ["signalled", "killed", "limited"] {
        assert!(!text.contains(refused), "the driver {refused} its keeper:\n{text}");
    }
    let unprivileged = platform::confine::UNPRIVILEGED;
    assert!(text.contains(&format!("Uid:\t{unprivileged}\t{unprivileged}\t{unprivileged}")), "{text}");
    assert!(text.contains("CapEff:\t0000000000000000"), "{text}");
    assert!(!text.contains("wrote root's file"), "{text}");
    assert!(text.contains("dma after the first queue"), "{text}");
    // A forged release does not make the keeper let a running queue's memory go: it stops
    // the queue first.
    assert_eq!(reported(&text, "forged releases"), 0, "the keeper let the memory of a running queue go");
    let pid = reported(&text, "keeper");
    eventually("the queue's stop by the keeper", || view.read_u32(PLAN.control) & PLAN.enable == 0);
    eventually("the keeper's end", || ended(pid));
}
