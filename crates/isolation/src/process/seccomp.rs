//! The helper's system-call allowlist (seccomp(2), a classic BPF program): what a C library
//! needs to compute, allocate, wait on the shared futex and end, and nothing that reaches the
//! file system, the network, other processes or new code. Anything else kills the helper with
//! SIGSYS, which the caller sees as a violation.

/// Allowed without looking at arguments.
const ALLOWED: [i64; 15] = [
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
];

const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;
const OFFSET_ARG0: u32 = 16;

fn statement(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt: 0, jf: 0, k }
}

fn jump_if_equal(k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16, jt, jf, k }
}

/// The program: the architecture must be x86-64; `write` and `writev` only to stderr (the
/// stack protector's message), `tgkill` only to this process (abort's SIGABRT); the rest by number.
pub(crate) fn program(pid: u32) -> Vec<libc::sock_filter> {
    let load = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
    let ret = (libc::BPF_RET | libc::BPF_K) as u16;
    let allow = statement(ret, libc::SECCOMP_RET_ALLOW);
    let kill = statement(ret, libc::SECCOMP_RET_KILL_PROCESS);
    let mut p =
        vec![statement(load, OFFSET_ARCH), jump_if_equal(AUDIT_ARCH_X86_64, 1, 0), kill, statement(load, OFFSET_NR)];
    for nr in ALLOWED {
        p.push(jump_if_equal(nr as u32, 0, 1));
        p.push(allow);
    }
    for (nr, arg0) in [(libc::SYS_write, 2u32), (libc::SYS_writev, 2), (libc::SYS_tgkill, pid)] {
        // nr matches: load the argument's low word, compare, and reload the number after.
        p.push(jump_if_equal(nr as u32, 0, 4));
        p.push(statement(load, OFFSET_ARG0));
        p.push(jump_if_equal(arg0, 0, 1));
        p.push(allow);
        p.push(kill);
    }
    p.push(kill);
    p
}

/// Applies [`program`] to the calling process, for good.
pub(crate) fn apply() -> Result<(), String> {
    // SAFETY: getpid takes no arguments.
    let pid = unsafe { libc::getpid() } as u32;
    let filter = program(pid);
    let fprog = libc::sock_fprog { len: filter.len() as u16, filter: filter.as_ptr() as *mut libc::sock_filter };
    // SAFETY: prctl with integer arguments; required before an unprivileged seccomp filter.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(format!("PR_SET_NO_NEW_PRIVS: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: `fprog` points to `filter`, alive during the call (the kernel copies it).
    let rc = unsafe {
        libc::syscall(libc::SYS_seccomp, libc::SECCOMP_SET_MODE_FILTER, 0u32, &fprog as *const libc::sock_fprog)
    };
    if rc != 0 {
        return Err(format!("seccomp: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}
