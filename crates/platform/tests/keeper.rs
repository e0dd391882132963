//! The keeper, against a pretend 82599: a PCI function directory on tmpfs whose `resource0`
//! the driver maps as its BAR and the test maps too, and which confirms a stop at once (a bit
//! reads back as written). What the keeper does with a device that confirms nothing is tested
//! in `keeper`'s unit tests. Each test runs its driver in a child (this binary again, an
//! ignored helper test): a process has one keeper, which knows the BARs mapped before it
//! started, and confining or ending a process is for good.

use invariants::ConstIndex;
use platform::dma::{DmaLayout, DmaRegion};
use platform::fs::ScratchDir;
use platform::i82599::{EnabledQueue, Function, LegacyRing, BAR0_LEN};
use platform::MappedRegion;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// RXDCTL(0) and its enable bit [DS 8.2.3.8.6], and CTRL [DS 8.2.3.1.1].
const RXDCTL0: usize = 0x01028;
const ENABLE: u32 = 1 << 25;
const CTRL: usize = 0;
const ADDRESS: &str = "0000:00:00.0";

/// A pretend 82599 under `scratch`: ids, configuration space and BAR0.
fn pretend_function(scratch: &ScratchDir) -> std::path::PathBuf {
    let dir = scratch.path().join(ADDRESS);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("vendor"), "0x8086\n").unwrap();
    std::fs::write(dir.join("device"), "0x10fb\n").unwrap();
    std::fs::write(dir.join("config"), vec![0u8; 256]).unwrap();
    std::fs::write(dir.join("resource0"), vec![0u8; BAR0_LEN]).unwrap();
    scratch.path().to_path_buf()
}

/// The test's own view of the BAR, which claims nothing.
fn observe(root: &Path) -> MappedRegion {
    let file = std::fs::OpenOptions::new().read(true).write(true).open(root.join(ADDRESS).join("resource0")).unwrap();
    MappedRegion::map_file(&file, 0, BAR0_LEN, false).unwrap()
}

/// What a helper drives: the pretend function at `KEEPER_TEST_ROOT`, and DMA memory for a
/// ring of 8 descriptors and a buffer, handed to the keeper when it is allocated.
struct Driver {
    root: std::path::PathBuf,
    function: Function,
    region: DmaRegion,
    ring: platform::dma::DescriptorArea,
    buffer: platform::dma::BuffersArea,
}

fn helper_driver() -> Driver {
    platform::keeper::keep_every_queue();
    let root = std::path::PathBuf::from(std::env::var("KEEPER_TEST_ROOT").expect("run by its test"));
    let function = Function::open(&root, ADDRESS).unwrap();
    let mut layout = DmaLayout::new();
    let (ring, buffer) = (layout.descriptor_ring(8).unwrap(), layout.buffers(1).unwrap());
    let region = DmaRegion::allocate(&layout).unwrap();
    Driver { root, function, region, ring, buffer }
}

impl Driver {
    /// Receive queue 0, enabled on the driver's ring: the keeper is told how to stop it.
    fn enable(&self) -> EnabledQueue<'_, 8> {
        let buffer = self.region.buffer(self.buffer, 0).unwrap().addr;
        let ring = LegacyRing::<8>::new(&self.region, self.ring, |_| buffer).unwrap();
        self.function.registers().enable_rx(ConstIndex::new(0), ring, true).unwrap()
    }
}

fn keeper() -> u32 {
    platform::keeper::keeper_pid().expect("a keeper once memory is allocated")
}

/// Whether process `pid` maps DMA memory (its sealed memfd).
fn maps_dma(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default().contains("safenic-dma")
}

/// Whether process `pid` has ended (gone, or a zombie nobody reaped yet).
fn ended(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| s.contains(") Z "))
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

/// Runs `helper` as [`run_helper`] does, and calls `look` with its output so far when it
/// stops at its [`checkpoint`]: the test looks at the keeper while the driver lives.
fn run_helper_with_checkpoint(helper: &str, root: &Path, look: impl FnOnce(&str)) -> String {
    use std::io::{BufRead, Read, Write};
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", helper, "--nocapture", "--test-threads=1"])
        .env("KEEPER_TEST_ROOT", root)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut text = String::new();
    while !text.ends_with("checkpoint\n") {
        if out.read_line(&mut text).unwrap() == 0 {
            let _ = child.wait();
            panic!("{helper} ended before its checkpoint:\n{text}");
        }
    }
    look(&text);
    child.stdin.take().unwrap().write_all(b"go on\n").unwrap();
    out.read_to_string(&mut text).unwrap();
    let status = child.wait().unwrap();
    assert!(status.success() && text.contains("keeper "), "{helper} failed:\n{text}");
    text
}

/// Where a helper waits for its test to look ([`run_helper_with_checkpoint`]).
fn checkpoint() {
    println!("checkpoint");
    std::io::stdin().read_line(&mut String::new()).unwrap();
}

/// The number after `word ` in the helper's output.
fn reported(text: &str, word: &str) -> u32 {
    text.lines().find_map(|l| l.rsplit_once(&format!("{word} "))?.1.trim().parse().ok()).unwrap()
}

/// Run in a child by the test below.
#[test]
#[ignore = "helper: run by the_keeper_holds_dma_memory_until_the_driver_is_gone"]
fn helper_stop_a_queue() {
    let driver = helper_driver();
    let pid = keeper();
    println!("keeper {pid}");
    assert!(maps_dma(pid), "the keeper maps DMA memory as soon as it is allocated");
    let queue = driver.enable();
    drop(queue); // the queue's Drop clears the enable bit, the device confirms, the keeper reads it
    checkpoint();
}

#[test]
fn the_keeper_holds_dma_memory_until_the_driver_is_gone() {
    let scratch = ScratchDir::new("platform-test", "keeper-stopped").unwrap();
    let root = pretend_function(&scratch);
    let view = observe(&root);
    let look = |text: &str| {
        let pid = reported(text, "keeper");
        assert!(maps_dma(pid), "the keeper holds the memory until the driver is gone");
        assert!(!ended(pid), "the keeper stays for the process's next queues");
    };
    let pid = reported(&run_helper_with_checkpoint("helper_stop_a_queue", &root, look), "keeper");
    eventually("the keeper's end after its driver's", || ended(pid));
    assert_eq!(view.read_u32(RXDCTL0) & ENABLE, 0);
    assert_eq!(view.read_u32(CTRL), 0, "no master disable");
}

/// Run in a child by the test below: enables the queue and ends with `process::exit`, which
/// runs no destructor.
#[test]
#[ignore = "helper: run by a_driver_that_exits_without_drop_has_its_queue_stopped"]
fn helper_exit_with_the_queue_enabled() {
    let driver = helper_driver();
    let queue = driver.enable();
    println!("keeper {}", keeper());
    std::mem::forget(queue);
    std::process::exit(0);
}

#[test]
fn a_driver_that_exits_without_drop_has_its_queue_stopped() {
    let scratch = ScratchDir::new("platform-test", "keeper-exit").unwrap();
    let root = pretend_function(&scratch);
    let view = observe(&root);
    let pid = reported(&run_helper("helper_exit_with_the_queue_enabled", &root), "keeper");
    eventually("the queue's stop", || view.read_u32(RXDCTL0) & ENABLE == 0);
    eventually("the keeper's end", || ended(pid));
    assert_eq!(view.read_u32(CTRL), 0, "the queue stopped, so no master disable");
}

/// Run in a child by the test below: a confined driver with a queue, no longer root, that
/// tries, with safe code and the programs it may start, to write root's files, to end or
/// limit its keeper, then to make it let the memory go with a forged release, and exits
/// without Drop.
#[test]
#[ignore = "helper: run by a_confined_driver_is_not_root_and_cannot_end_its_keeper"]
fn helper_attack_the_keeper() {
    let driver = helper_driver();
    platform::confine::confine_process().unwrap();
    let queue = driver.enable();
    let pid = keeper();
    println!("keeper {pid}");
    // The driver is root no more: a file of root's that a root service would act on (here a
    // directory the test made) is out of its reach, and so are its capabilities.
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    for field in ["Uid:", "CapEff:"] {
        println!("{}", status.lines().find(|l| l.starts_with(field)).unwrap());
    }
    if std::fs::write(driver.root.join("root-only").join("crontab"), "* * * * * root true\n").is_ok() {
        println!("wrote root's file");
    }
    // DMA memory allocated after giving up root still has its physical addresses (a ring is
    // made on it) and is handed to the keeper.
    let layout = {
        let mut l = DmaLayout::new();
        (l.descriptor_ring(8).unwrap(), l.buffers(1).unwrap(), l)
    };
    match DmaRegion::allocate(&layout.2) {
        Ok(r) if r.buffer(layout.1, 0).unwrap().addr.get() != 0 => println!("dma after the first queue"),
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
    println!(
        "enable after forged releases {}",
        driver.function.registers().read(platform::i82599::reg(RXDCTL0)) & ENABLE
    );
    checkpoint();
    std::mem::forget(queue);
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
    let look = |text: &str| assert!(maps_dma(reported(text, "keeper")), "the keeper let the memory go");
    let text = run_helper_with_checkpoint("helper_attack_the_keeper", &root, look);
    assert!(text.contains("attacks done"), "the helper did not finish its attacks:\n{text}");
    for refused in ["signalled", "killed", "limited"] {
        assert!(!text.contains(refused), "the driver {refused} its keeper:\n{text}");
    }
    let unprivileged = platform::confine::UNPRIVILEGED;
    assert!(text.contains(&format!("Uid:\t{unprivileged}\t{unprivileged}\t{unprivileged}")), "{text}");
    assert!(text.contains("CapEff:\t0000000000000000"), "{text}");
    assert!(!text.contains("wrote root's file"), "{text}");
    assert!(text.contains("dma after the first queue"), "{text}");
    // A forged release makes the keeper stop the queue, not let its memory go.
    assert_eq!(reported(&text, "enable after forged releases"), 0, "the keeper left the queue running");
    let pid = reported(&text, "keeper");
    eventually("the queue's stop by the keeper", || view.read_u32(RXDCTL0) & ENABLE == 0);
    eventually("the keeper's end", || ended(pid));
}
