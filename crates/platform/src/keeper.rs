//! A process that outlives a driver to stop a queue's DMA before its memory can be freed.
//!
//! A queue's `Drop` disables it and waits for the device to confirm before its memory goes.
//! `process::exit`, `abort`, a crash or SIGKILL skip every destructor, and the kernel frees the
//! pages while the device may still write them. A [`Keeper`] closes that gap for one queue: a
//! child forked just before the queue is enabled, so that it maps what the driver maps (the
//! BAR, the queue's memory) and holds the device's claim. Told that the queue stopped
//! ([`Keeper::stopped`]), it exits at once. If the driver ends first, it clears the queue's
//! enable bit, waits for the device to confirm, falls back to a master disable, and only then
//! exits and lets the memory go; if the device confirms neither, it keeps the memory for as
//! long as it lives. Its end of a pipe tells it which: a byte means stopped, end-of-file means
//! the driver is gone, however it went.

use crate::error::PlatformError;
use crate::mem::MappedRegion;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How the keeper stops a queue: byte offsets in BAR0 and their bits.
#[derive(Debug, Clone, Copy)]
pub struct StopPlan {
    /// The queue's control register, and its enable bit: cleared, then read until it is 0.
    pub control: usize,
    pub enable: u32,
    /// The fallback for the whole function: `master_disable` set in `ctrl`, then `status` read
    /// until `master_enable` is 0.
    pub ctrl: usize,
    pub master_disable: u32,
    pub status: usize,
    pub master_enable: u32,
}

/// How long the device has to confirm each step.
const CONFIRM: Duration = Duration::from_secs(1);

static KEEP_EVERY_QUEUE: AtomicBool = AtomicBool::new(false);

/// Starts a keeper for every queue from now on, also on nicsim's devices (a real device always
/// gets them). One way only: nothing turns it off.
pub fn keep_every_queue() {
    KEEP_EVERY_QUEUE.store(true, Ordering::SeqCst);
}

/// Whether queues of this process get a keeper: a real device was opened, or
/// [`keep_every_queue`] was called.
pub fn keeps_queues() -> bool {
    KEEP_EVERY_QUEUE.load(Ordering::SeqCst) || crate::pci::real_device_opened()
}

/// The keeper of one enabled queue, a child process.
#[derive(Debug)]
pub struct Keeper {
    pid: rustix::process::Pid,
    /// The only writable end of the keeper's pipe: a byte, or its closing when this process
    /// ends, is the keeper's one message.
    release: Option<OwnedFd>,
}

impl Keeper {
    /// Forks the keeper of a queue that `plan` stops through `bar`, the device's BAR0. Call it
    /// after the queue's memory is mapped and before the queue is enabled.
    pub fn start(bar: &MappedRegion, plan: StopPlan) -> Result<Keeper, PlatformError> {
        for at in [plan.control, plan.ctrl, plan.status] {
            if !bar.contains(at, 4) || at % 4 != 0 {
                return Err(PlatformError::io(
                    "starting a queue's keeper",
                    std::io::Error::other(format!("register offset {at:#x} is not a register of the BAR")),
                ));
            }
        }
        let failed = |e: std::io::Error| PlatformError::io("starting a queue's keeper", e);
        let (listen, release) =
            rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(|e| failed(e.into()))?;
        // Every descriptor but these is closed in the keeper (the pipes of other keepers, the
        // driver's standard output): decided here, since the child may not allocate.
        let mut keep: Vec<RawFd> = crate::pci::claimed_descriptors();
        keep.push(listen.as_raw_fd());
        keep.sort_unstable();
        let gaps = descriptor_gaps(&keep);
        let registers = bar.as_ptr().as_ptr();
        // SAFETY: fork duplicates this process; in the child only `keep_queue` runs, which
        // makes only async-signal-safe system calls and volatile accesses to the BAR mapping
        // the child inherited, allocates nothing, takes no lock, and never returns (it ends
        // with `_exit`), so no state of the parent's other threads is used there.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            keep_queue(listen.as_raw_fd(), &gaps, registers, plan);
        }
        let forked = std::io::Error::last_os_error();
        drop(listen);
        let pid = rustix::process::Pid::from_raw(pid).filter(|_| pid > 0).ok_or_else(|| failed(forked))?;
        Ok(Keeper { pid, release: Some(release) })
    }

    /// The queue stopped and the device confirmed it: the keeper exits without touching the
    /// device, and is reaped.
    pub fn stopped(mut self) {
        if let Some(release) = self.release.take() {
            let _ = rustix::io::write(&release, b"s");
        }
        let _ = rustix::process::waitpid(Some(self.pid), rustix::process::WaitOptions::empty());
    }

    /// The keeper's process id.
    pub fn pid(&self) -> u32 {
        self.pid.as_raw_nonzero().get() as u32
    }
}

impl Drop for Keeper {
    /// Without [`Keeper::stopped`], the queue was not confirmed stopped: the keeper stops it
    /// now, as if this process had ended, and is reaped later if it can be.
    fn drop(&mut self) {
        drop(self.release.take());
        let _ = rustix::process::waitpid(Some(self.pid), rustix::process::WaitOptions::NOHANG);
    }
}

/// The ranges of descriptors to close so that only `keep` (sorted) stays open.
fn descriptor_gaps(keep: &[RawFd]) -> Vec<(u32, u32)> {
    let mut gaps = Vec::new();
    let mut from = 0u32;
    for &fd in keep {
        let fd = fd as u32;
        if fd > from {
            gaps.push((from, fd - 1));
        }
        from = fd + 1;
    }
    gaps.push((from, u32::MAX));
    gaps
}

/// The keeper's life, in the forked child: only async-signal-safe calls, no allocation.
fn keep_queue(listen: RawFd, gaps: &[(u32, u32)], registers: *mut u8, plan: StopPlan) -> ! {
    // Signals for the driver's process group or terminal are not for the keeper; it leaves
    // both, and ignores the rest that would end it early.
    let _ = rustix::process::setsid();
    for signal in
        [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT, libc::SIGPIPE, libc::SIGUSR1, libc::SIGUSR2]
    {
        // SAFETY: sigaction with SIG_IGN installs no handler code; the struct is zeroed (no
        // flags, empty mask), which sigaction accepts.
        unsafe {
            let mut ignore: libc::sigaction = std::mem::zeroed();
            ignore.sa_sigaction = libc::SIG_IGN;
            libc::sigaction(signal, &ignore, std::ptr::null_mut());
        }
    }
    for &(first, last) in gaps {
        // SAFETY: the descriptors closed belong to objects of the parent's memory image that
        // this child never uses again (it only exits from here).
        unsafe { libc::close_range(first, last, 0) };
    }
    // SAFETY: `listen` stays open (it is not in any gap) and is not closed by anything else here.
    let listen = unsafe { std::os::fd::BorrowedFd::borrow_raw(listen) };
    let mut byte = [0u8; 1];
    let released = loop {
        match rustix::io::read(listen, &mut byte) {
            Ok(1) => break true,
            Err(rustix::io::Errno::INTR) => continue,
            _ => break false,
        }
    };
    if !released && !stop_queue(&InheritedBar { base: registers }, plan) {
        // The device may still write the memory: keep it mapped for as long as this lives.
        loop {
            let _ = rustix::thread::nanosleep(&rustix::time::Timespec { tv_sec: 3600, tv_nsec: 0 });
        }
    }
    // SAFETY: _exit ends the process without running anything of the parent's image.
    unsafe { libc::_exit(0) }
}

/// A device's registers, by byte offset in its BAR.
trait Registers {
    fn read(&self, offset: usize) -> u32;
    fn write(&self, offset: usize, value: u32);
}

/// Clears the queue's enable bit and waits for the device to confirm; else masters-disables
/// the function and waits for that. Whether the device confirmed either.
fn stop_queue(registers: &impl Registers, plan: StopPlan) -> bool {
    registers.write(plan.control, registers.read(plan.control) & !plan.enable);
    if wait_until_clear(registers, plan.control, plan.enable) {
        return true;
    }
    registers.write(plan.ctrl, registers.read(plan.ctrl) | plan.master_disable);
    wait_until_clear(registers, plan.status, plan.master_enable)
}

fn wait_until_clear(registers: &impl Registers, offset: usize, bits: u32) -> bool {
    let now = || rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    let start = now();
    loop {
        if registers.read(offset) & bits == 0 {
            return true;
        }
        let t = now();
        let elapsed_ns = (t.tv_sec - start.tv_sec) * 1_000_000_000 + (t.tv_nsec - start.tv_nsec);
        if elapsed_ns > CONFIRM.as_nanos() as i64 {
            return false;
        }
        let _ = rustix::thread::nanosleep(&rustix::time::Timespec { tv_sec: 0, tv_nsec: 10_000 });
    }
}

/// The BAR as the keeper inherited it, little-endian 32-bit registers as on x86-64.
struct InheritedBar {
    // INVARIANT: the first byte of the BAR mapping, which the keeper inherited and never
    // unmaps; `Keeper::start` checked that every offset of the plan is a 4-aligned register
    // inside it, and only those offsets are accessed.
    base: *mut u8,
}

impl Registers for InheritedBar {
    fn read(&self, offset: usize) -> u32 {
        // SAFETY: see the invariant; any bits are a valid u32.
        u32::from_le(unsafe { self.base.add(offset).cast::<u32>().read_volatile() })
    }

    fn write(&self, offset: usize, value: u32) {
        // SAFETY: see the invariant; the mapping is shared and writable.
        unsafe { self.base.add(offset).cast::<u32>().write_volatile(value.to_le()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::collections::BTreeMap;

    #[test]
    fn only_the_kept_descriptors_stay_open() {
        assert_eq!(descriptor_gaps(&[5]), [(0, 4), (6, u32::MAX)]);
        assert_eq!(descriptor_gaps(&[0, 1, 7]), [(2, 6), (8, u32::MAX)]);
        assert_eq!(descriptor_gaps(&[3, 4]), [(0, 2), (5, u32::MAX)]);
    }

    const PLAN: StopPlan =
        StopPlan { control: 0x28, enable: 1 << 25, ctrl: 0, master_disable: 1 << 2, status: 8, master_enable: 1 << 19 };

    /// A device whose registers hold what is written, except those it is deaf to, and whose
    /// master-enable status clears on a master disable, unless it is deaf to that too.
    struct Device {
        values: RefCell<BTreeMap<usize, u32>>,
        deaf_to: Vec<usize>,
        written: RefCell<Vec<usize>>,
    }

    impl Device {
        fn new(deaf_to: &[usize]) -> Device {
            let values = BTreeMap::from([(PLAN.control, PLAN.enable | 1), (PLAN.status, PLAN.master_enable)]);
            Device { values: RefCell::new(values), deaf_to: deaf_to.to_vec(), written: RefCell::default() }
        }
    }

    impl Registers for Device {
        fn read(&self, offset: usize) -> u32 {
            self.values.borrow().get(&offset).copied().unwrap_or(0)
        }

        fn write(&self, offset: usize, value: u32) {
            self.written.borrow_mut().push(offset);
            if !self.deaf_to.contains(&offset) {
                self.values.borrow_mut().insert(offset, value);
            }
            if offset == PLAN.ctrl && value & PLAN.master_disable != 0 && !self.deaf_to.contains(&PLAN.status) {
                self.values.borrow_mut().insert(PLAN.status, 0);
            }
        }
    }

    #[test]
    fn a_queue_that_stops_needs_no_master_disable() {
        let device = Device::new(&[]);
        assert!(stop_queue(&device, PLAN));
        assert_eq!(device.read(PLAN.control), 1, "only the enable bit cleared");
        assert_eq!(*device.written.borrow(), [PLAN.control]);
    }

    #[test]
    fn a_queue_that_does_not_stop_gets_a_master_disable() {
        let device = Device::new(&[PLAN.control]);
        assert!(stop_queue(&device, PLAN), "the function's DMA stopped");
        assert_eq!(*device.written.borrow(), [PLAN.control, PLAN.ctrl]);
        assert_eq!(device.read(PLAN.ctrl), PLAN.master_disable);
        let device = Device::new(&[PLAN.control, PLAN.status]);
        assert!(!stop_queue(&device, PLAN), "a device that confirms nothing: the memory must be kept");
    }
}
