//! The keeper's side: the forked child's life. It may not allocate or take a lock (the driver
//! that forked it may have had other threads), so it makes only system calls, on fixed buffers.

use super::{
    decode, StopPlan, CONFIRM, FULL, HELD, MALFORMED, MEMORY, MESSAGE, NOT_A_BAR, NOT_STOPPED, NO_PLAN, RELEASE, SLOTS,
    START, UNMAPPABLE,
};
use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
use std::io::IoSliceMut;
use std::mem::MaybeUninit;
use std::os::fd::{OwnedFd, RawFd};

/// What the keeper holds: the queues it was told of, and every DMA region of the driver.
pub(super) struct Slots {
    queues: Vec<Queue>,
    memory: Vec<Option<KeptMemory>>,
}

/// A queue the keeper may have to stop.
#[derive(Clone, Copy)]
struct Queue {
    id: u64,
    bar: usize,
    plan: StopPlan,
    active: bool,
}

impl Queue {
    const FREE: Queue = Queue { id: 0, bar: 0, plan: NO_PLAN, active: false };
}

impl Slots {
    /// The keeper's tables, made by the driver before the fork (the child may not allocate,
    /// and tables on its stack could overflow a small thread stack).
    pub(super) fn new() -> Slots {
        Slots { queues: vec![Queue::FREE; SLOTS], memory: (0..SLOTS).map(|_| None).collect() }
    }

    /// Stops every queue still active: whether the device confirmed every stop.
    fn stop_all(&mut self) -> bool {
        let mut all = true;
        for q in self.queues.iter_mut().filter(|q| q.active) {
            if stop_queue(&InheritedBar { base: q.bar as *mut u8 }, q.plan) {
                *q = Queue::FREE;
            } else {
                all = false;
            }
        }
        all
    }
}

/// The keeper's life, in the forked child: only async-signal-safe calls, no allocation.
pub(super) fn keep_queues(socket: RawFd, gaps: &[(u32, u32)], bars: &[(usize, usize)], slots: &mut Slots) -> ! {
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
    unmap_inherited(bars);
    // SAFETY: `socket` stays open (it is not in any gap) and is not closed by anything else here.
    let socket = unsafe { std::os::fd::BorrowedFd::borrow_raw(socket) };
    loop {
        let mut message = [0u8; MESSAGE];
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let received =
            rustix::net::recvmsg(socket, &mut [IoSliceMut::new(&mut message)], &mut control, RecvFlags::CMSG_CLOEXEC);
        let bytes = match received {
            Err(rustix::io::Errno::INTR) => continue,
            Ok(r) if r.bytes > 0 => r.bytes,
            _ => break, // end of file: the driver is gone, however it went
        };
        let mut fd = None;
        for m in control.drain() {
            if let RecvAncillaryMessage::ScmRights(fds) = m {
                for f in fds {
                    fd.get_or_insert(f);
                }
            }
        }
        let reply = if bytes == MESSAGE { handle(slots, bars, &message, fd) } else { MALFORMED };
        let _ = rustix::net::send(socket, &[reply], rustix::net::SendFlags::NOSIGNAL);
    }
    if !slots.stop_all() {
        // The device may still write what is kept: hold it for as long as this lives.
        loop {
            let _ = rustix::thread::nanosleep(&rustix::time::Timespec { tv_sec: 3600, tv_nsec: 0 });
        }
    }
    // SAFETY: _exit ends the process without running anything of the parent's image.
    unsafe { libc::_exit(0) }
}

/// Unmaps, in the keeper, every shared mapping it inherited but the BARs: what the driver
/// had mapped is the driver's to free, and the keeper holds only what it is handed. One pass
/// reads `/proc/self/maps` without allocating and unmaps what it found, until a pass finds
/// nothing (at most 64 passes of 64 mappings).
fn unmap_inherited(bars: &[(usize, usize)]) {
    for _ in 0..64 {
        let mut found = [(0usize, 0usize); 64];
        let n = shared_mappings_but(bars, &mut found);
        if n == 0 {
            return;
        }
        for &(start, end) in &found[..n] {
            // SAFETY: the keeper never uses the driver's mappings it inherited (only the BARs,
            // which are kept, and its own private memory), so nothing refers into them.
            let _ = unsafe { rustix::mm::munmap(start as *mut std::ffi::c_void, end - start) };
        }
    }
}

/// Fills `found` with shared mappings of this process that are not among `bars` (as many as
/// fit); how many.
fn shared_mappings_but(bars: &[(usize, usize)], found: &mut [(usize, usize)]) -> usize {
    use rustix::fs::{Mode, OFlags};
    let Ok(maps) = rustix::fs::open(c"/proc/self/maps", OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()) else {
        return 0;
    };
    let (mut n, mut line, mut len, mut chunk) = (0, [0u8; 128], 0, [0u8; 4096]);
    while let Ok(got @ 1..) = rustix::io::read(&maps, &mut chunk) {
        for &byte in &chunk[..got] {
            if byte != b'\n' {
                // The start of a line is all that is read: "start-end perms".
                if len < line.len() {
                    line[len] = byte;
                    len += 1;
                }
                continue;
            }
            if let Some(range) = shared_range(&line[..len]) {
                if n < found.len() && !bars.iter().any(|&(base, _)| base == range.0) {
                    found[n] = range;
                    n += 1;
                }
            }
            len = 0;
        }
    }
    n
}

/// The address range of a line of `/proc/<pid>/maps` (`start-end perms …`) if it is shared.
fn shared_range(line: &[u8]) -> Option<(usize, usize)> {
    let mut fields = line.split(|&b| b == b' ');
    let (range, perms) = (fields.next()?, fields.next()?);
    if perms.get(3) != Some(&b's') {
        return None;
    }
    let dash = range.iter().position(|&b| b == b'-')?;
    let hex = |digits: &[u8]| {
        digits.iter().try_fold(0usize, |acc, &d| acc.checked_mul(16)?.checked_add((d as char).to_digit(16)? as usize))
    };
    Some((hex(&range[..dash])?, hex(&range[dash + 1..])?))
}

/// One message to the keeper: its reply.
fn handle(slots: &mut Slots, bars: &[(usize, usize)], message: &[u8; MESSAGE], fd: Option<OwnedFd>) -> u8 {
    let (kind, id, bar, plan) = decode(message);
    match kind {
        START => {
            let fits = |at: usize| {
                at % 4 == 0 && bars.iter().any(|&(b, len)| b == bar && at.checked_add(4).is_some_and(|e| e <= len))
            };
            if ![plan.control, plan.ctrl, plan.status].into_iter().all(fits) {
                return NOT_A_BAR;
            }
            let Some(free) = slots.queues.iter_mut().find(|q| !q.active) else { return FULL };
            *free = Queue { id, bar, plan, active: true };
            HELD
        }
        MEMORY => {
            let Some(free) = slots.memory.iter_mut().find(|m| m.is_none()) else { return FULL };
            let Some(memory) = fd.and_then(KeptMemory::map) else { return UNMAPPABLE };
            *free = Some(memory);
            HELD
        }
        RELEASE => {
            let Some(q) = slots.queues.iter_mut().find(|q| q.active && q.id == id) else { return HELD };
            if stop_queue(&InheritedBar { base: q.bar as *mut u8 }, q.plan) {
                *q = Queue::FREE;
                HELD
            } else {
                NOT_STOPPED
            }
        }
        _ => MALFORMED,
    }
}

/// A DMA region as the keeper holds it: its own shared mapping of the file, which keeps the
/// pages allocated, and shows that a process still maps them (nicsim looks for that).
struct KeptMemory {
    // INVARIANT: a mapping of `len` bytes at `addr` that this value made and alone unmaps.
    addr: *mut std::ffi::c_void,
    len: usize,
}

impl KeptMemory {
    fn map(file: OwnedFd) -> Option<KeptMemory> {
        let len = rustix::fs::fstat(&file).ok()?.st_size as usize;
        if len == 0 {
            return None;
        }
        use rustix::mm::{MapFlags, ProtFlags};
        // System calls, not libc's functions, which a sanitizer would intercept with locks.
        // SAFETY: a fresh shared mapping at an address the kernel chooses overlaps nothing;
        // the keeper never reads or writes it.
        let addr = unsafe {
            rustix::mm::mmap(std::ptr::null_mut(), len, ProtFlags::READ | ProtFlags::WRITE, MapFlags::SHARED, &file, 0)
        };
        addr.ok().map(|addr| KeptMemory { addr, len })
    }
}

impl Drop for KeptMemory {
    fn drop(&mut self) {
        // SAFETY: see the invariant.
        let _ = unsafe { rustix::mm::munmap(self.addr, self.len) };
    }
}

/// A device's registers, by byte offset in its BAR.
trait Registers {
    fn read(&self, offset: usize) -> u32;
    fn write(&self, offset: usize, value: u32);
}

/// Clears the queue's enable bit and waits for the device to confirm; else masters-disables
/// the function and waits for that. Whether the device confirmed either, or is gone: a removed
/// device reads all-ones, which its status register never does while present (reserved bits
/// read 0 [DS 8.2.3.1.2]), and DMAs nothing more.
fn stop_queue(registers: &impl Registers, plan: StopPlan) -> bool {
    if registers.read(plan.status) == u32::MAX {
        return true;
    }
    let control = registers.read(plan.control);
    if control & plan.enable == 0 {
        return true; // stopped already: nothing is written
    }
    registers.write(plan.control, control & !plan.enable);
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
    // INVARIANT: the first byte of a BAR mapping that the keeper inherited (one of those
    // `crate::pci::mapped_bars` listed when it was forked) and never unmaps; `handle` checked
    // that every offset of the plan is a 4-aligned register inside it, and only those offsets
    // are accessed.
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
    use crate::MappedRegion;
    use std::cell::RefCell;
    use std::collections::BTreeMap;

    #[test]
    fn the_keeper_takes_only_registers_of_the_bars_it_inherited() {
        let mut slots = Slots::new();
        let bars = [(0x1000_0000, 0x2_0000)];
        let message = |kind, bar, control| super::super::encode(kind, 7, bar, StopPlan { control, ..PLAN });
        let mut ask = |kind, bar, control| handle(&mut slots, &bars, &message(kind, bar, control), None);
        assert_eq!(ask(START, 0x2000_0000, 0x28), NOT_A_BAR, "another mapping");
        assert_eq!(ask(START, 0x1000_0000, 0x2_0000), NOT_A_BAR, "past the BAR's end");
        assert_eq!(ask(START, 0x1000_0000, 0x2a), NOT_A_BAR, "not a register's offset");
        assert_eq!(ask(MEMORY, 0, 0), UNMAPPABLE, "no memory came with it");
        assert_eq!(ask(RELEASE, 0, 0), HELD, "nothing held: nothing to stop");
        assert_eq!(ask(9, 0, 0), MALFORMED);
    }

    #[test]
    fn the_keeper_finds_the_shared_mappings_it_inherited() {
        let line = |l: &str| shared_range(l.as_bytes());
        assert_eq!(
            line("7f12a000-7f12c000 rw-s 00000000 00:2d 1234 /dev/hugepages/dma-1-0 (deleted)"),
            Some((0x7f12a000, 0x7f12c000))
        );
        assert_eq!(line("55d0e000-55d10000 r--p 00000000 08:01 99 /usr/bin/x"), None, "private");
        assert_eq!(line("7ffd000-7ffe000 rw-p 00000000 00:00 0 [stack]"), None);
        assert_eq!(line("zz-7ffe000 rw-s"), None, "not hexadecimal");
        let mut found = [(0, 0); 8];
        let own = MappedRegion::anonymous(4096).unwrap();
        let (start, end) = (own.virt_addr(), own.virt_addr() + 4096);
        let n = shared_mappings_but(&[], &mut found);
        assert!(found[..n].contains(&(start, end)), "{:x?} lacks {start:x}-{end:x}", &found[..n]);
        let n = shared_mappings_but(&[(start, 4096)], &mut found);
        assert!(!found[..n].contains(&(start, end)), "a BAR is kept");
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

    #[test]
    fn a_removed_device_has_nothing_to_stop() {
        let device = Device::new(&[PLAN.control, PLAN.status]);
        device.values.borrow_mut().insert(PLAN.status, u32::MAX);
        assert!(stop_queue(&device, PLAN), "all-ones: the device is gone, and so is its DMA");
        assert!(device.written.borrow().is_empty());
    }
}
