//! A command run under ptrace(2), for `nicsim exec` to serve a mapped BAR's accesses one by one
//! as a hypervisor serves MMIO: the tracer sees the chosen system calls (a seccomp filter
//! stops only those, so the rest of the command runs at full speed), may rewrite their
//! arguments, and sees every fault, with the registers to complete the faulting instruction.
//!
//! This module only moves registers and stops; what to do with them is the caller's.
//!
//! # Soundness
//! The tracee is a child process: its registers and stops are values moved through the kernel,
//! and tracing reaches no memory of this process (the kernel refuses to trace a thread of one's
//! own process, and the confinement refuses `ptrace` altogether).

use std::collections::HashSet;
use std::io;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// The general-purpose registers in the x86 encoding's order (rax, rcx, rdx, rbx, rsp, rbp,
/// rsi, rdi, r8–r15), and the instruction pointer.
#[derive(Clone, Copy)]
pub struct Registers {
    pub gp: [u64; 16],
    pub rip: u64,
    /// RFLAGS.
    pub flags: u64,
    /// The system call number at a system-call stop (orig_rax).
    pub syscall: u64,
    raw: libc::user_regs_struct,
}

impl Registers {
    /// A system call's arguments at its entry, in the kernel's order (rdi, rsi, rdx, r10, r8, r9).
    pub fn syscall_args(&self) -> [u64; 6] {
        let g = &self.gp;
        [g[7], g[6], g[2], g[10], g[8], g[9]]
    }

    /// Sets argument `n` of a system call stopped at its entry.
    pub fn set_syscall_arg(&mut self, n: usize, value: u64) {
        let reg = [7, 6, 2, 10, 8, 9][n];
        self.gp[reg] = value;
    }

    fn from_raw(r: libc::user_regs_struct) -> Registers {
        Registers {
            gp: [
                r.rax, r.rcx, r.rdx, r.rbx, r.rsp, r.rbp, r.rsi, r.rdi, r.r8, r.r9, r.r10, r.r11, r.r12, r.r13, r.r14,
                r.r15,
            ],
            rip: r.rip,
            flags: r.eflags,
            syscall: r.orig_rax,
            raw: r,
        }
    }

    fn to_raw(self) -> libc::user_regs_struct {
        let mut r = self.raw;
        let g = self.gp;
        (r.rax, r.rcx, r.rdx, r.rbx, r.rsp, r.rbp, r.rsi, r.rdi) = (g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7]);
        (r.r8, r.r9, r.r10, r.r11, r.r12, r.r13, r.r14, r.r15) = (g[8], g[9], g[10], g[11], g[12], g[13], g[14], g[15]);
        r.rip = self.rip;
        r.eflags = self.flags;
        r.orig_rax = self.syscall;
        r
    }
}

/// Why a traced thread stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// At the entry of one of the traced system calls; its arguments may still be changed.
    SyscallEntry { tid: u32 },
    /// At the exit of a system call after [`Traced::resume_to_syscall_exit`]; `ret` is its result.
    SyscallExit { tid: u32, ret: i64 },
    /// A SIGSEGV about to be delivered, for an access at `addr`.
    Fault { tid: u32, addr: u64 },
    /// Another signal about to be delivered.
    Signal { tid: u32, signal: i32 },
    /// A stop of the tracing itself (a new thread or process, an exec): resume it.
    Event { tid: u32 },
    /// A traced thread or process ended; `code` is its exit code, or 128 + the signal.
    Exited { tid: u32, code: i32 },
    /// The wait was interrupted by a signal to this process.
    Interrupted,
}

/// A command started under ptrace; every thread and child it creates is traced too, and all
/// are killed if the tracer exits.
pub struct Traced {
    pub pid: u32,
    /// Threads that have stopped at least once.
    seen: HashSet<u32>,
}

const BPF_LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const BPF_JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const BPF_RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;

/// A seccomp program that stops the tracer at `syscalls` and allows everything else
/// (seccomp_data: nr at offset 0, arch at 4).
fn filter(syscalls: &[i64]) -> Vec<libc::sock_filter> {
    let insn = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let n = syscalls.len() as u8;
    let mut prog =
        vec![insn(BPF_LD_W_ABS, 0, 0, 4), insn(BPF_JEQ_K, 0, n + 1, AUDIT_ARCH_X86_64), insn(BPF_LD_W_ABS, 0, 0, 0)];
    for (i, &nr) in syscalls.iter().enumerate() {
        // Equal: jump over the remaining tests and the ALLOW to the TRACE at the end.
        prog.push(insn(BPF_JEQ_K, n - i as u8, 0, nr as u32));
    }
    prog.push(insn(BPF_RET_K, 0, 0, libc::SECCOMP_RET_ALLOW));
    prog.push(insn(BPF_RET_K, 0, 0, libc::SECCOMP_RET_TRACE));
    prog
}

fn check(r: libc::c_long) -> io::Result<libc::c_long> {
    if r == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

impl Traced {
    /// Starts `command` traced, stopping the tracer at every call of `syscalls` (x86-64 numbers)
    /// by any of its threads. Call [`Traced::next_stop`] from the thread that called this.
    pub fn spawn(command: &mut Command, syscalls: &[i64]) -> io::Result<Traced> {
        let prog = filter(syscalls);
        // SAFETY: the closure runs in the forked child before exec and makes only system calls
        // (ptrace, prctl), async-signal-safe; `prog` was built before the fork and outlives the
        // call, and `fprog` points at it with its length.
        unsafe {
            command.pre_exec(move || {
                check(libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0))?;
                let fprog = libc::sock_fprog { len: prog.len() as u16, filter: prog.as_ptr() as *mut _ };
                check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) as libc::c_long)?;
                check(libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &fprog as *const _ as usize, 0, 0)
                    as libc::c_long)?;
                Ok(())
            });
        }
        let child = command.spawn()?;
        let pid = child.id();
        // The exec stops the child with SIGTRAP (PTRACE_TRACEME without options yet).
        let mut status = 0;
        // SAFETY: waitpid writes one int to `status`, which lives across the call.
        check(unsafe { libc::waitpid(pid as i32, &mut status, libc::__WALL) } as libc::c_long)?;
        if !libc::WIFSTOPPED(status) {
            return Err(io::Error::other(format!("{:?} ended before it ran", command.get_program())));
        }
        let options = libc::PTRACE_O_TRACESECCOMP
            | libc::PTRACE_O_TRACECLONE
            | libc::PTRACE_O_TRACEFORK
            | libc::PTRACE_O_TRACEVFORK
            | libc::PTRACE_O_TRACEEXEC
            | libc::PTRACE_O_TRACESYSGOOD
            | libc::PTRACE_O_EXITKILL;
        // SAFETY: PTRACE_SETOPTIONS on our stopped tracee takes the options as its data.
        check(unsafe { libc::ptrace(libc::PTRACE_SETOPTIONS, pid, 0, options as usize) })?;
        let traced = Traced { pid, seen: HashSet::from([pid]) };
        traced.resume(pid, 0)?;
        Ok(traced)
    }

    /// Waits for the next stop of any traced thread.
    pub fn next_stop(&mut self) -> io::Result<Stop> {
        let mut status = 0;
        // SAFETY: waitpid writes one int to `status`, which lives across the call.
        let tid = unsafe { libc::waitpid(-1, &mut status, libc::__WALL) };
        if tid == -1 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted { Ok(Stop::Interrupted) } else { Err(e) };
        }
        let tid = tid as u32;
        if libc::WIFEXITED(status) {
            self.seen.remove(&tid);
            return Ok(Stop::Exited { tid, code: libc::WEXITSTATUS(status) });
        }
        if libc::WIFSIGNALED(status) {
            self.seen.remove(&tid);
            return Ok(Stop::Exited { tid, code: 128 + libc::WTERMSIG(status) });
        }
        let signal = libc::WSTOPSIG(status);
        let event = status >> 16;
        if signal == libc::SIGTRAP | 0x80 {
            return Ok(Stop::SyscallExit { tid, ret: self.registers(tid)?.gp[0] as i64 });
        }
        if signal == libc::SIGTRAP && event == libc::PTRACE_EVENT_SECCOMP {
            return Ok(Stop::SyscallEntry { tid });
        }
        // A new thread or process first stops with SIGSTOP, before or after its creator's event.
        if event != 0 || (signal == libc::SIGSTOP && self.seen.insert(tid)) {
            return Ok(Stop::Event { tid });
        }
        if signal == libc::SIGSEGV {
            // SAFETY: siginfo_t is plain data valid when zeroed; PTRACE_GETSIGINFO fills it.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: `info` is a siginfo_t that lives across the call, as the request needs.
            check(unsafe { libc::ptrace(libc::PTRACE_GETSIGINFO, tid, 0, &mut info as *mut _ as usize) })?;
            // SAFETY: the signal is SIGSEGV, whose siginfo carries si_addr.
            return Ok(Stop::Fault { tid, addr: unsafe { info.si_addr() } as u64 });
        }
        Ok(Stop::Signal { tid, signal })
    }

    /// Resumes thread `tid`, delivering `signal` (0 for none).
    pub fn resume(&self, tid: u32, signal: i32) -> io::Result<()> {
        // SAFETY: PTRACE_CONT on a stopped tracee; the data is the signal to deliver.
        check(unsafe { libc::ptrace(libc::PTRACE_CONT, tid, 0, signal as usize) }).map(drop)
    }

    /// Resumes thread `tid`, stopped at a system call's entry, until that call's exit.
    pub fn resume_to_syscall_exit(&self, tid: u32) -> io::Result<()> {
        // SAFETY: PTRACE_SYSCALL on a stopped tracee, delivering no signal.
        check(unsafe { libc::ptrace(libc::PTRACE_SYSCALL, tid, 0, 0) }).map(drop)
    }

    /// Has thread `tid`, stopped at a system call's exit ([`Stop::SyscallExit`]), make system
    /// call `nr` with `args` before it goes on, and returns that call's result; the thread is
    /// then stopped with its registers as they were, and resumed by the caller as before. The
    /// call runs in the traced process, on its own memory, as if its code had made it.
    pub fn inject_syscall(&self, tid: u32, nr: i64, args: [u64; 6]) -> io::Result<i64> {
        let saved = self.registers(tid)?;
        let mut regs = saved;
        // At a system call's exit the thread is past its 2-byte `syscall` instruction: back
        // onto it, with the call's number and arguments in their registers.
        regs.rip = saved.rip.wrapping_sub(2);
        regs.gp[0] = nr as u64;
        regs.syscall = nr as u64;
        for (n, a) in args.into_iter().enumerate() {
            regs.set_syscall_arg(n, a);
        }
        self.set_registers(tid, &regs)?;
        // Its entry, then its exit; a call the seccomp filter traces stops in between too.
        let mut syscall_stops = 0;
        while syscall_stops < 2 {
            if self.to_next_stop(tid)? {
                syscall_stops += 1;
            }
        }
        let ret = self.registers(tid)?.gp[0] as i64;
        self.set_registers(tid, &saved)?;
        Ok(ret)
    }

    /// Resumes thread `tid` until its next stop inside a system call: true at its entry or
    /// exit, false at the seccomp filter's stop.
    fn to_next_stop(&self, tid: u32) -> io::Result<bool> {
        self.resume_to_syscall_exit(tid)?;
        let mut status = 0;
        // SAFETY: waitpid writes one int to `status`, which lives across the call.
        check(unsafe { libc::waitpid(tid as i32, &mut status, libc::__WALL) } as libc::c_long)?;
        let stopped = libc::WIFSTOPPED(status);
        if stopped && libc::WSTOPSIG(status) == libc::SIGTRAP | 0x80 {
            return Ok(true);
        }
        if stopped && libc::WSTOPSIG(status) == libc::SIGTRAP && status >> 16 == libc::PTRACE_EVENT_SECCOMP {
            return Ok(false);
        }
        Err(io::Error::other(format!(
            "thread {tid} stopped otherwise (status {status:#x}) during an injected system call"
        )))
    }

    /// The registers of stopped thread `tid`.
    pub fn registers(&self, tid: u32) -> io::Result<Registers> {
        // SAFETY: user_regs_struct is plain data valid when zeroed.
        let mut raw: libc::user_regs_struct = unsafe { std::mem::zeroed() };
        // SAFETY: PTRACE_GETREGS writes one user_regs_struct to `raw`, which lives across it.
        check(unsafe { libc::ptrace(libc::PTRACE_GETREGS, tid, 0, &mut raw as *mut _ as usize) })?;
        Ok(Registers::from_raw(raw))
    }

    /// Sets the registers of stopped thread `tid`.
    pub fn set_registers(&self, tid: u32, regs: &Registers) -> io::Result<()> {
        let raw = regs.to_raw();
        // SAFETY: PTRACE_SETREGS reads one user_regs_struct from `raw`, which lives across it.
        check(unsafe { libc::ptrace(libc::PTRACE_SETREGS, tid, 0, &raw as *const _ as usize) }).map(drop)
    }

    /// Sends `signal` to the traced command.
    pub fn kill(&self, signal: i32) -> io::Result<()> {
        // SAFETY: kill(2) with a pid we started and a signal number; no memory is passed.
        check(unsafe { libc::kill(self.pid as i32, signal) } as libc::c_long).map(drop)
    }
}

/// The x86-64 Linux numbers a tracer works with: system calls, signals, errors, flags.
pub mod linux {
    pub use libc::{
        SYS_ioctl, SYS_mmap, SYS_munmap, SYS_openat, SYS_pread64, SYS_pwrite64, AT_FDCWD, EBUSY, EEXIST, EFAULT,
        EINVAL, ENOMEM, ENOTTY, ESRCH, MAP_ANONYMOUS, MAP_FIXED, MAP_FIXED_NOREPLACE, MAP_PRIVATE, MAP_SHARED,
        O_CLOEXEC, O_RDWR, PROT_NONE, SIGKILL, SIGSEGV, SIGSTOP, SIGTERM, SIGTSTP, SIGTTIN, SIGTTOU,
    };
}
