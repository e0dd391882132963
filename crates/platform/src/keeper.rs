//! A process that outlives a driver to stop its queues' DMA before their memory can be freed.
//!
//! A queue's `Drop` disables it and waits for the device to confirm before its memory goes.
//! `process::exit`, `abort`, a crash or SIGKILL skip every destructor, and the kernel frees the
//! pages while the device may still write them. The keeper closes that gap: one child per
//! driver process, forked before the process is confined (`crate::confine`), so that nothing
//! the driver runs from then on can signal, trace or limit it. It inherits the claims and the
//! BAR mappings the driver had then. Every DMA region the driver allocates is handed to the
//! keeper as soon as it exists (a descriptor of its sealed file, which the keeper maps too, so
//! the pages stay allocated), and before a queue is enabled the keeper is told how to stop it
//! (a stop plan, made by the device's trusted model, `crate::i82599`). The keeper lets the
//! memory go only once the driver is gone, however it went, and it has read from the device
//! itself that every queue it was told of has stopped. A queue the driver says it stopped (a
//! message it does not trust: anyone with a copy of the socket could send it) it stops itself
//! if it still runs, and forgets. If the device confirms neither a queue's stop nor a master
//! disable, the keeper holds the memory for as long as it lives.
//!
//! # Soundness
//! The public items only read the keeper's state or make the process stricter
//! ([`keep_every_queue`]); what hands the keeper memory or a stop plan is crate-private, so no
//! caller can make it release memory early or write a register the device model did not name.

use crate::error::PlatformError;
use crate::mem::MappedRegion;
use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage};
use std::io::IoSlice;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

mod child;

/// How the keeper stops a queue: byte offsets in BAR0 and their bits.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StopPlan {
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

/// Whether queues of this process get a keeper: a real device was opened through sysfs, or
/// [`keep_every_queue`] was called. Behind VFIO the kernel stops a dead driver's device.
pub fn keeps_queues() -> bool {
    KEEP_EVERY_QUEUE.load(Ordering::SeqCst) || crate::pci::real_sysfs_device_opened()
}

/// How many queues, and how many DMA regions, one keeper holds at most (an 82599 has 128 RX
/// and 128 TX queues per port).
const SLOTS: usize = 1024;

/// The keeper's process and the driver's end of its socket.
struct KeeperProcess {
    pid: rustix::process::Pid,
    socket: OwnedFd,
    next_id: u64,
}

static KEEPER: Mutex<Option<KeeperProcess>> = Mutex::new(None);

fn keeper_process() -> MutexGuard<'static, Option<KeeperProcess>> {
    KEEPER.lock().unwrap_or_else(|e| e.into_inner())
}

/// Starts this process's keeper unless it runs already. The confinement calls it before it
/// restricts the process, so that the keeper is outside what the restriction lets the driver
/// reach; a process never confined gets its keeper at its first [`Keeper::start`].
pub(crate) fn start_keeper() -> Result<(), PlatformError> {
    let mut keeper = keeper_process();
    if keeper.is_none() {
        *keeper = Some(fork_keeper()?);
    }
    Ok(())
}

/// The keeper's process id, once it was started.
pub fn keeper_pid() -> Option<u32> {
    keeper_process().as_ref().map(|k| k.pid.as_raw_nonzero().get() as u32)
}

/// What the driver tells the keeper, as eight native-endian words.
const START: u64 = 1;
const RELEASE: u64 = 2;
const MEMORY: u64 = 3;
const MESSAGE: usize = 8 * 8;

/// The keeper's one-byte replies.
const HELD: u8 = 0;
const NOT_A_BAR: u8 = 1;
const FULL: u8 = 2;
const UNMAPPABLE: u8 = 3;
const NOT_STOPPED: u8 = 4;
const MALFORMED: u8 = 5;

fn encode(kind: u64, id: u64, bar: usize, plan: StopPlan) -> [u8; MESSAGE] {
    let words = [
        kind,
        id,
        bar as u64,
        plan.control as u64,
        u64::from(plan.enable),
        plan.ctrl as u64 | (plan.status as u64) << 32,
        u64::from(plan.master_disable),
        u64::from(plan.master_enable),
    ];
    let mut out = [0u8; MESSAGE];
    for (chunk, w) in out.chunks_exact_mut(8).zip(words) {
        chunk.copy_from_slice(&w.to_ne_bytes());
    }
    out
}

fn decode(bytes: &[u8; MESSAGE]) -> (u64, u64, usize, StopPlan) {
    let mut w = [0u64; 8];
    for (word, chunk) in w.iter_mut().zip(bytes.chunks_exact(8)) {
        let mut b = [0u8; 8];
        b.copy_from_slice(chunk);
        *word = u64::from_ne_bytes(b);
    }
    let plan = StopPlan {
        control: w[3] as usize,
        enable: w[4] as u32,
        ctrl: (w[5] & 0xFFFF_FFFF) as usize,
        status: (w[5] >> 32) as usize,
        master_disable: w[6] as u32,
        master_enable: w[7] as u32,
    };
    (w[0], w[1], w[2] as usize, plan)
}

/// One enabled queue in the keeper: dropping it (or [`Keeper::stopped`]) tells the keeper the
/// queue stopped, which it checks, stopping the queue itself if it still runs.
#[derive(Debug)]
pub(crate) struct Keeper {
    id: u64,
}

/// Runs `f` with this process's keeper, started first if it is not yet (which a process
/// confined without one cannot do).
fn with_keeper<R>(f: impl FnOnce(&mut KeeperProcess) -> Result<R, PlatformError>) -> Result<R, PlatformError> {
    let mut keeper = keeper_process();
    let k = match keeper.as_mut() {
        Some(k) => k,
        None if crate::confine::is_confined() => {
            return Err(PlatformError::io(
                "handing DMA memory to its keeper",
                std::io::Error::other(
                    "this process was confined without a keeper: call platform::keeper::keep_every_queue() before \
                     its first queue",
                ),
            ))
        }
        None => keeper.insert(fork_keeper()?),
    };
    f(k)
}

/// Hands the keeper `memory`, the sealed file behind a DMA region, which it maps and holds
/// until the driver is gone and every queue it was told of has stopped.
pub(crate) fn hold_memory(memory: &std::fs::File) -> Result<(), PlatformError> {
    let failed = |e: std::io::Error| PlatformError::io("handing DMA memory to its keeper", e);
    with_keeper(|k| match k.ask(&encode(MEMORY, 0, 0, NO_PLAN), Some(memory.as_fd())).map_err(failed)? {
        HELD => Ok(()),
        FULL => Err(failed(std::io::Error::other(format!("the keeper holds {SLOTS} regions already")))),
        other => Err(failed(std::io::Error::other(format!("the keeper refused the memory (reply {other})")))),
    })
}

impl Keeper {
    /// Tells the keeper how `plan` stops a queue through `bar`, the device's BAR0. Call it
    /// before the queue is enabled. Fails if the process was confined without a keeper, or the
    /// BAR was mapped after the keeper started (open every port before the first queue).
    pub(crate) fn start(bar: &MappedRegion, plan: StopPlan) -> Result<Keeper, PlatformError> {
        let failed = |e: std::io::Error| PlatformError::io("handing a queue to its keeper", e);
        for at in [plan.control, plan.ctrl, plan.status] {
            if !bar.contains(at, 4) || at % 4 != 0 || at > u32::MAX as usize {
                return Err(failed(std::io::Error::other(format!(
                    "register offset {at:#x} is not a register of the BAR"
                ))));
            }
        }
        with_keeper(|k| {
            let id = k.next_id;
            k.next_id += 1;
            match k.ask(&encode(START, id, bar.virt_addr(), plan), None).map_err(failed)? {
                HELD => Ok(Keeper { id }),
                NOT_A_BAR => Err(failed(std::io::Error::other(
                    "the BAR was mapped after the keeper started: open every port before the first queue",
                ))),
                FULL => Err(failed(std::io::Error::other(format!("the keeper holds {SLOTS} queues already")))),
                other => Err(failed(std::io::Error::other(format!("the keeper refused the queue (reply {other})")))),
            }
        })
    }

    /// The queue stopped and the device confirmed it: the keeper reads that too.
    pub(crate) fn stopped(self) {}
}

impl Drop for Keeper {
    /// Tells the keeper the queue stopped; it stops the queue first if it still runs (as if
    /// this process had ended), and keeps every memory if the device confirms no stop.
    fn drop(&mut self) {
        if let Some(k) = keeper_process().as_mut() {
            let _ = k.ask(&encode(RELEASE, self.id, 0, NO_PLAN), None);
        }
    }
}

const NO_PLAN: StopPlan = StopPlan { control: 0, enable: 0, ctrl: 0, master_disable: 0, status: 0, master_enable: 0 };

impl KeeperProcess {
    /// Sends one message (with a descriptor) and waits for the keeper's reply.
    fn ask(&mut self, message: &[u8; MESSAGE], fd: Option<std::os::fd::BorrowedFd<'_>>) -> std::io::Result<u8> {
        let fds;
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if let Some(fd) = fd {
            fds = [fd];
            control.push(SendAncillaryMessage::ScmRights(&fds));
        }
        rustix::net::sendmsg(&self.socket, &[IoSlice::new(message)], &mut control, rustix::net::SendFlags::NOSIGNAL)?;
        let mut reply = [0u8; 1];
        loop {
            match rustix::io::read(&self.socket, &mut reply) {
                Ok(1) => return Ok(reply[0]),
                Ok(_) => return Err(std::io::Error::other("the keeper is gone")),
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

/// Forks the keeper. Every descriptor but its socket and the claims is closed in it, and it
/// knows the BAR mappings it inherited: decided here, since the child may not allocate.
fn fork_keeper() -> Result<KeeperProcess, PlatformError> {
    let failed = |e: std::io::Error| PlatformError::io("starting the queues' keeper", e);
    let (socket, theirs) = rustix::net::socketpair(
        rustix::net::AddressFamily::UNIX,
        rustix::net::SocketType::SEQPACKET,
        rustix::net::SocketFlags::CLOEXEC,
        None,
    )
    .map_err(|e| failed(e.into()))?;
    let mut keep: Vec<RawFd> = crate::pci::claimed_descriptors();
    keep.push(theirs.as_raw_fd());
    keep.sort_unstable();
    let gaps = descriptor_gaps(&keep);
    let mut slots = child::Slots::new();
    // No BAR is unmapped, and nothing mapped in its place, between the look and the fork.
    let (pid, forked) = crate::mapped_once::frozen(|is_live| {
        let bars = crate::pci::mapped_bars(is_live);
        // SAFETY: fork duplicates this process; in the child only `keep_queues` runs, which
        // makes only async-signal-safe system calls and volatile accesses to the BAR mappings
        // the child inherited, allocates nothing, takes no lock, and never returns (it ends
        // with `_exit`), so no state of the parent's other threads is used there.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            child::keep_queues(theirs.as_raw_fd(), &gaps, &bars, &mut slots);
        }
        (pid, std::io::Error::last_os_error())
    });
    drop(theirs);
    let pid = rustix::process::Pid::from_raw(pid).filter(|_| pid > 0).ok_or_else(|| failed(forked))?;
    Ok(KeeperProcess { pid, socket, next_id: 0 })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_kept_descriptors_stay_open() {
        assert_eq!(descriptor_gaps(&[5]), [(0, 4), (6, u32::MAX)]);
        assert_eq!(descriptor_gaps(&[0, 1, 7]), [(2, 6), (8, u32::MAX)]);
        assert_eq!(descriptor_gaps(&[3, 4]), [(0, 2), (5, u32::MAX)]);
    }
}
