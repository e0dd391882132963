//! The kernel side of [`crate::confine`]: a Landlock ruleset (Linux 5.13+) applied to every
//! thread of the process, and a seccomp filter beside it.
//!
//! Landlock restricts only the thread that asks and the threads and processes it starts later.
//! Threads that already run are reached with a real-time signal whose handler restricts the
//! thread it runs on (what libpsx does for `setuid`); each acknowledges by thread id, and the
//! caller goes on until every thread listed in `/proc/self/task` has.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Access rights from linux/landlock.h.
pub const WRITE_FILE: u64 = 1 << 1;
pub const MAKE_CHAR: u64 = 1 << 6;
pub const MAKE_BLOCK: u64 = 1 << 11;
pub const TRUNCATE: u64 = 1 << 14;
/// Every right that writes, makes or removes something, as far as Landlock ABI `abi` knows
/// them: write a file (1), remove a directory or file (4, 5), make a device node, directory,
/// file, socket, FIFO or link (6-12), rename across directories (13, ABI 2), truncate (14,
/// ABI 3), ioctl on a device (15, ABI 5).
pub fn writing_rights(abi: i64) -> u64 {
    let mut rights = WRITE_FILE | (0x1FF << 4);
    for (since, right) in [(2, 1 << 13), (3, TRUNCATE), (5, 1 << 15)] {
        if abi >= since {
            rights |= right;
        }
    }
    rights
}
/// Scopes (ABI 6): no connection to an abstract Unix socket made outside the domain, and no
/// signal to a process outside it.
pub const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
pub const SCOPE_SIGNAL: u64 = 1 << 1;
const CREATE_RULESET_VERSION: u32 = 1;
const CREATE_RULESET_ERRATA: u32 = 1 << 1;
/// Erratum 2: threads of one process may signal each other whatever their domains, which
/// [`restrict_every_thread`] needs under [`SCOPE_SIGNAL`].
pub const ERRATUM_THREADS_SIGNAL: i64 = 1 << 1;
const RULE_PATH_BENEATH: u32 = 1;

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// The Landlock ABI version of the running kernel, or why there is none.
pub fn abi_version() -> io::Result<i64> {
    query(CREATE_RULESET_VERSION)
}

/// The Landlock errata the running kernel has fixed, as a bit mask (erratum n is bit n - 1).
pub fn errata() -> io::Result<i64> {
    query(CREATE_RULESET_ERRATA)
}

fn query(flag: u32) -> io::Result<i64> {
    // SAFETY: with the VERSION or ERRATA flag the kernel reads neither pointer nor size.
    let v = unsafe { libc::syscall(libc::SYS_landlock_create_ruleset, std::ptr::null::<RulesetAttr>(), 0usize, flag) };
    if v < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(v)
}

/// A ruleset being built: the rights it handles are denied except beneath the paths added.
pub struct Ruleset {
    fd: OwnedFd,
}

impl Ruleset {
    /// Handles the file-system rights `handled` and the `scoped` scopes (0: none, so that
    /// kernels before ABI 6 accept it).
    pub fn new(handled: u64, scoped: u64) -> io::Result<Ruleset> {
        let attr = RulesetAttr { handled_access_fs: handled, handled_access_net: 0, scoped };
        let size = if scoped == 0 { size_of::<u64>() } else { size_of::<RulesetAttr>() };
        // SAFETY: `attr` is a valid landlock_ruleset_attr, of which `size` bytes are passed;
        // the kernel copies them before returning.
        let fd = unsafe { libc::syscall(libc::SYS_landlock_create_ruleset, &attr as *const RulesetAttr, size, 0u32) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: the kernel returned a new file descriptor that nothing else owns.
        Ok(Ruleset { fd: unsafe { OwnedFd::from_raw_fd(fd as i32) } })
    }

    /// Allows `access` beneath the file or directory `beneath` (opened with O_PATH).
    pub fn allow(&self, beneath: &OwnedFd, access: u64) -> io::Result<()> {
        let attr = PathBeneathAttr { allowed_access: access, parent_fd: beneath.as_raw_fd() };
        // SAFETY: `attr` is a packed landlock_path_beneath_attr the kernel copies; both file
        // descriptors are open for the duration of the call.
        let r = unsafe {
            libc::syscall(
                libc::SYS_landlock_add_rule,
                self.fd.as_raw_fd(),
                RULE_PATH_BENEATH,
                &attr as *const PathBeneathAttr,
                0u32,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// The ruleset every thread applies; -1 while none is being applied.
static RULESET_FD: AtomicI32 = AtomicI32::new(-1);
/// Thread ids that applied it, written by the signal handler.
static DONE: [AtomicI32; 1024] = [const { AtomicI32::new(0) }; 1024];
static DONE_COUNT: AtomicUsize = AtomicUsize::new(0);
static FAILED: AtomicUsize = AtomicUsize::new(0);

/// BPF words of a seccomp filter (linux/filter.h, linux/seccomp.h).
const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_JGE_K: u16 = 0x35;
const BPF_JSET_K: u16 = 0x45;
const BPF_RET_K: u16 = 0x06;
const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
const SECCOMP_RET_ERRNO_EPERM: u32 = 0x0005_0000 | libc::EPERM as u32;
#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;
/// x32 system calls on x86-64 set this bit of the number; refused like any unknown ABI.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

const fn insn(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// Refuses `ptrace` and `process_vm_writev`, the two ways besides a file to write another
/// process's memory, so a program started after the confinement cannot write the driver's;
/// `prlimit64` on any process but the caller (pid 0), so that none can lower the limits of
/// the driver's keeper (a CPU time limit ends it with SIGKILL); `fallocate` with any mode but
/// keep-size, since punching a hole in a mapped hugetlb file frees its pages, which the seals
/// on DMA memory cannot refuse while it is mapped writable (`crate::dma`); and `io_uring_setup`,
/// whose requests would run those calls past this filter.
static FILTER: [libc::sock_filter; 17] = [
    insn(BPF_LD_W_ABS, 0, 0, 4), // seccomp_data.arch
    insn(BPF_JEQ_K, 1, 0, AUDIT_ARCH),
    insn(BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO_EPERM),
    insn(BPF_LD_W_ABS, 0, 0, 0), // seccomp_data.nr
    insn(BPF_JGE_K, 11, 0, X32_SYSCALL_BIT),
    insn(BPF_JEQ_K, 10, 0, libc::SYS_ptrace as u32),
    insn(BPF_JEQ_K, 9, 0, libc::SYS_process_vm_writev as u32),
    insn(BPF_JEQ_K, 8, 0, libc::SYS_io_uring_setup as u32),
    insn(BPF_JEQ_K, 2, 0, libc::SYS_prlimit64 as u32),
    insn(BPF_JEQ_K, 3, 0, libc::SYS_fallocate as u32),
    insn(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
    insn(BPF_LD_W_ABS, 0, 0, 16), // prlimit64: the low half of args[0], a pid_t
    insn(BPF_JEQ_K, 2, 3, 0),
    insn(BPF_LD_W_ABS, 0, 0, 24), // fallocate: the low half of args[1], the mode
    insn(BPF_JSET_K, 1, 0, !FALLOC_FL_KEEP_SIZE),
    insn(BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
    insn(BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO_EPERM),
];

/// `fallocate`'s mode that only reserves blocks, keeping the size: the one it may take.
const FALLOC_FL_KEEP_SIZE: u32 = 1;

/// Restricts the calling thread: no new privileges, the ruleset, the seccomp filter. Only
/// system calls, so it may run in a signal handler. Returns 0 or an errno.
fn restrict_this_thread(ruleset: i32) -> i32 {
    let prog = libc::sock_fprog { len: FILTER.len() as u16, filter: FILTER.as_ptr().cast_mut() };
    // SAFETY: prctl and the two system calls take integers and `prog`, which points to a
    // static filter of `len` instructions; none touches memory of ours afterwards.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
            || libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) != 0
            || libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, 0u32, &prog as *const _) != 0
        {
            return *libc::__errno_location();
        }
    }
    0
}

extern "C" fn on_restrict_signal(_: libc::c_int) {
    let fd = RULESET_FD.load(Ordering::SeqCst);
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    // Real-time signals queue: a thread signalled twice before it ran restricts itself once.
    if fd < 0 || done(tid) {
        return;
    }
    if restrict_this_thread(fd) != 0 {
        FAILED.fetch_add(1, Ordering::SeqCst);
        return;
    }
    let slot = DONE_COUNT.fetch_add(1, Ordering::SeqCst);
    if let Some(s) = DONE.get(slot) {
        s.store(tid, Ordering::SeqCst);
    }
}

fn done(tid: i32) -> bool {
    let n = DONE_COUNT.load(Ordering::SeqCst).min(DONE.len());
    DONE[..n].iter().any(|s| s.load(Ordering::SeqCst) == tid)
}

fn task_ids() -> io::Result<Vec<i32>> {
    Ok(std::fs::read_dir("/proc/self/task")?.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect())
}

/// Applies `ruleset` and the seccomp filter to the calling thread alone, for a process that has
/// no other (the threads it starts later inherit both).
pub fn restrict_single_thread(ruleset: Ruleset) -> io::Result<()> {
    match task_ids()?.len() {
        1 => {}
        n => return Err(io::Error::other(format!("{n} threads: only a process with one thread restricts itself so"))),
    }
    match restrict_this_thread(ruleset.fd.as_raw_fd()) {
        0 => Ok(()),
        code => Err(io::Error::from_raw_os_error(code)),
    }
}

/// Applies `ruleset` and the seccomp filter to every thread of the process. Must run once per
/// process (the caller keeps it so): a handler of its own signal is installed for good.
pub fn restrict_every_thread(ruleset: Ruleset) -> io::Result<()> {
    let me = {
        // SAFETY: gettid has no preconditions.
        unsafe { libc::gettid() }
    };
    let code = restrict_this_thread(ruleset.fd.as_raw_fd());
    if code != 0 {
        return Err(io::Error::from_raw_os_error(code));
    }
    let signal = libc::SIGRTMAX() - 1;
    // SAFETY: a zeroed sigaction is valid; the handler makes only system calls and atomic
    // stores, which are async-signal-safe; SA_RESTART keeps the threads' own calls going.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_restrict_signal as extern "C" fn(libc::c_int) as usize;
        sa.sa_flags = libc::SA_RESTART;
        if libc::sigaction(signal, &sa, std::ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    RULESET_FD.store(ruleset.fd.as_raw_fd(), Ordering::SeqCst);
    let result = signal_until_all_done(me, signal);
    RULESET_FD.store(-1, Ordering::SeqCst);
    result
}

/// Signals every thread that has not applied the ruleset, until none is left; a thread started
/// meanwhile by one not yet restricted is found on the next look.
fn signal_until_all_done(me: i32, signal: i32) -> io::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(5);
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    loop {
        if FAILED.load(Ordering::SeqCst) > 0 {
            return Err(io::Error::other("a thread could not apply the restriction"));
        }
        let waiting: Vec<i32> = task_ids()?.into_iter().filter(|&t| t != me && !done(t)).collect();
        if waiting.is_empty() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(io::Error::other(format!("threads {waiting:?} did not take the restriction within 5 s")));
        }
        for tid in waiting {
            // SAFETY: tgkill takes integers; a thread that ended meanwhile yields ESRCH.
            unsafe { libc::syscall(libc::SYS_tgkill, pid, tid, signal) };
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
