//! The helper's system-call allowlists (seccomp(2), classic BPF programs), one per stage:
//!
//! - [`Stage::Load`], applied before the library's code first runs (its initialisers, when
//!   the loader maps it): what the loader needs to read and map a shared object, and nothing
//!   that writes a file, starts a thread or process, signals or traces another, or reaches the
//!   network. A refused call fails with `EPERM`, so an initialiser that tries one goes on
//!   without it.
//! - [`Stage::Serve`], applied once the library is loaded: what a C library needs to compute,
//!   allocate, wait on the shared futex and end. Anything else kills the helper with SIGSYS,
//!   which the caller sees as a violation.
//!
//! Both cover every thread of the helper (`SECCOMP_FILTER_FLAG_TSYNC`), and filters only add
//! up: the serving stage allows nothing the loading one refused.

/// Which allowlist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    Load,
    Serve,
}

/// Allowed without looking at arguments.
const ALLOWED: [i64; 16] = [
    libc::SYS_futex,
    libc::SYS_exit,
    libc::SYS_exit_group,
    libc::SYS_rt_sigreturn,
    libc::SYS_rt_sigprocmask,
    libc::SYS_rt_sigaction,
    libc::SYS_brk,
    libc::SYS_mmap,
    libc::SYS_munmap,
    libc::SYS_mremap,
    libc::SYS_madvise,
    libc::SYS_clock_gettime,
    libc::SYS_getpid,
    libc::SYS_gettid,
    libc::SYS_sched_yield,
    libc::SYS_getcpu,
];

/// What the loader needs besides, while the library is loaded: to open (read-only), read, map
/// and protect its files, and an alternate signal stack; and `seccomp`, for the serving
/// stage's filter, which can only restrict further.
const LOADING: [i64; 11] = [
    libc::SYS_seccomp,
    libc::SYS_read,
    libc::SYS_pread64,
    libc::SYS_close,
    libc::SYS_fstat,
    libc::SYS_newfstatat,
    libc::SYS_statx,
    libc::SYS_lseek,
    libc::SYS_mprotect,
    libc::SYS_getrandom,
    libc::SYS_sigaltstack,
];

/// The `openat` flags that write or make something: O_WRONLY, O_RDWR, O_CREAT, O_TRUNC,
/// O_APPEND and O_TMPFILE's own bit.
const WRITING_OPEN_FLAGS: u32 = 0o3 | 0o100 | 0o1000 | 0o2000 | 0o20000000;

const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;
const OFFSET_ARG0: u32 = 16;
const OFFSET_ARG2: u32 = 32;
const SECCOMP_FILTER_FLAG_TSYNC: u32 = 1;

fn statement(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt: 0, jf: 0, k }
}

fn jump_if_equal(k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16, jt, jf, k }
}

/// The program of `stage`: the architecture must be x86-64; `write` and `writev` only to
/// stderr (the stack protector's message), `tgkill` only to this process (abort's SIGABRT),
/// `openat` (while loading) only to read; the rest by number.
pub(crate) fn program(pid: u32, stage: Stage) -> Vec<libc::sock_filter> {
    let load = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    let ret = (libc::BPF_RET | libc::BPF_K) as u16;
    let allow = statement(ret, libc::SECCOMP_RET_ALLOW);
    let kill = statement(ret, libc::SECCOMP_RET_KILL_PROCESS);
    let deny = match stage {
        Stage::Load => statement(ret, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        Stage::Serve => kill,
    };
    let mut p =
        vec![statement(load, OFFSET_ARCH), jump_if_equal(AUDIT_ARCH_X86_64, 1, 0), kill, statement(load, OFFSET_NR)];
    let loading: &[i64] = if stage == Stage::Load { &LOADING } else { &[] };
    for &nr in ALLOWED.iter().chain(loading) {
        p.push(jump_if_equal(nr as u32, 0, 1));
        p.push(allow);
    }
    for (nr, arg0) in [(libc::SYS_write, 2u32), (libc::SYS_writev, 2), (libc::SYS_tgkill, pid)] {
        // nr matches: load the argument's low word, compare, and reload the number after.
        p.push(jump_if_equal(nr as u32, 0, 4));
        p.push(statement(load, OFFSET_ARG0));
        p.push(jump_if_equal(arg0, 0, 1));
        p.push(allow);
        p.push(deny);
    }
    if stage == Stage::Load {
        let jump_if_set = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
        p.push(jump_if_equal(libc::SYS_openat as u32, 0, 4));
        p.push(statement(load, OFFSET_ARG2));
        p.push(libc::sock_filter { code: jump_if_set, jt: 1, jf: 0, k: WRITING_OPEN_FLAGS });
        p.push(allow);
        p.push(deny);
    }
    p.push(deny);
    p
}

/// Applies [`program`] of `stage` to every thread of the process, for good.
pub(crate) fn apply(stage: Stage) -> Result<(), String> {
    // SAFETY: getpid takes no arguments.
    let pid = unsafe { libc::getpid() } as u32;
    let filter = program(pid, stage);
    let fprog = libc::sock_fprog { len: filter.len() as u16, filter: filter.as_ptr() as *mut libc::sock_filter };
    // SAFETY: prctl with integer arguments; required before an unprivileged seccomp filter,
    // and set for good by the first stage (the loading filter refuses prctl).
    if stage == Stage::Load && unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(format!("PR_SET_NO_NEW_PRIVS: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: `fprog` points to `filter`, alive during the call (the kernel copies it).
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            SECCOMP_FILTER_FLAG_TSYNC,
            &fprog as *const libc::sock_fprog,
        )
    };
    if rc != 0 {
        return Err(format!("seccomp: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}
