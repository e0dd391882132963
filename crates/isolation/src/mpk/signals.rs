//! Faults inside a domain: one process-wide handler for the signals a memory error or an abort
//! raises, and for the watchdog's time-out signal. A signal on a thread that is inside a domain
//! is recorded and the thread resumes at the trampoline's rewind; any other goes to the handler
//! that was installed before (Rust's stack-overflow handler, or the default action).

use super::trampoline::{isolation_mpk_rewind, isolation_mpk_state};
use crate::signal_stack::FAULT_SIGNALS as FAULTS;
use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

// The handler the kernel calls. The kernel writes a signal's frame with the interrupted code's
// rights and enters a handler with key 0 alone, so the alternate signal stack carries a key
// every domain may write (the signal key), and these first instructions grant it before
// anything touches that stack; then on to `on_signal`.
std::arch::global_asm!(
    r#"
    .text
    .p2align 4
    .globl isolation_mpk_signal_entry
    .hidden isolation_mpk_signal_entry
    .type isolation_mpk_signal_entry,@function
isolation_mpk_signal_entry:
    mov r10, rdx
    xor ecx, ecx
    xor edx, edx
    rdpkru
    and eax, dword ptr [rip + {mask}]
    xor ecx, ecx
    xor edx, edx
    wrpkru
    mov rdx, r10
    jmp {handler}
    "#,
    mask = sym SIGNAL_STACK_RIGHTS,
    handler = sym on_signal,
);

extern "C" {
    fn isolation_mpk_signal_entry();
}

/// The watchdog's signal to a thread whose call ran out of time.
pub(crate) fn timeout_signal() -> i32 {
    libc::SIGRTMAX() - 2
}

static PREVIOUS: [OnceLock<libc::sigaction>; 7] = [const { OnceLock::new() }; 7];
static INSTALLED: OnceLock<Result<u32, String>> = OnceLock::new();

/// PKRU mask the signal entry applies: clears the signal key's disable bits.
// SAFETY: no other object defines this symbol (the signal entry in trampoline.rs reads it).
#[no_mangle]
pub(crate) static SIGNAL_STACK_RIGHTS: AtomicU32 = AtomicU32::new(u32::MAX);

/// At exit, the thread that runs the loaded objects' destructors (the libraries' in every
/// domain namespace too) needs the rights to their data, whichever thread called the domains.
extern "C" fn open_all_keys() {
    // SAFETY: grants this thread every key; it only goes on to run destructors and exit.
    unsafe { crate::pku::write(0) };
}

/// The signal key: every domain may write memory under it, and so may the handler.
pub(crate) fn signal_key() -> u32 {
    match INSTALLED.get() {
        Some(Ok(key)) => *key,
        _ => 0,
    }
}

fn signals() -> [i32; 7] {
    let mut all = [0; 7];
    all[..6].copy_from_slice(&FAULTS);
    all[6] = timeout_signal();
    all
}

/// Allocates the signal key and installs the handler, once per process.
pub(crate) fn install() -> Result<(), String> {
    INSTALLED
        .get_or_init(|| {
            let key = crate::pku::alloc().map_err(|e| format!("allocating the signal key: {e}"))?;
            SIGNAL_STACK_RIGHTS.store(!crate::pku::bits(key), Ordering::SeqCst);
            // SAFETY: registers a function without arguments that only writes PKRU.
            if unsafe { libc::atexit(open_all_keys) } != 0 {
                return Err("atexit failed".into());
            }
            for (i, signal) in signals().into_iter().enumerate() {
                // SAFETY: sigaction structs are plain data; zeroed is a valid empty one.
                let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
                action.sa_sigaction = isolation_mpk_signal_entry as *const () as usize;
                action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
                // SAFETY: as above.
                let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
                // SAFETY: valid pointers to sigaction structs; the handler is async-signal-safe.
                if unsafe { libc::sigaction(signal, &action, &mut old) } != 0 {
                    return Err(format!("sigaction({signal}): {}", std::io::Error::last_os_error()));
                }
                let _ = PREVIOUS[i].set(old);
            }
            Ok(key)
        })
        .clone()
        .map(|_| ())
}

thread_local! {
    static PREPARED: Cell<bool> = const { Cell::new(false) };
}

/// Makes this thread ready to enter domains, once: an alternate signal stack under the signal
/// key, and no restartable-sequence area (rseq(2)) for the kernel to write. The kernel updates
/// that area, which glibc keeps in the thread's control block (key 0), whenever the thread
/// returns from a preemption or gets a signal, with the thread's rights of the moment: inside
/// a domain that write fails and the kernel kills the process. glibc falls back to the system
/// call for `sched_getcpu`, its only use of the area here.
pub(crate) fn prepare_thread() -> Result<(), String> {
    if PREPARED.with(Cell::get) {
        return Ok(());
    }
    unregister_rseq()?;
    crate::signal_stack::install_alternate_stack(Some(signal_key()))?;
    PREPARED.with(|c| c.set(true));
    Ok(())
}

const RSEQ_FLAG_UNREGISTER: i32 = 1;
const RSEQ_SIGNATURE: u32 = 0x5305_3053;
const RSEQ_CPU_ID_REGISTRATION_FAILED: i32 = -2;

fn unregister_rseq() -> Result<(), String> {
    // SAFETY: looks up two data symbols glibc exports (2.35 and later); absent means no rseq.
    let (size, offset) = unsafe {
        let size = libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_size".as_ptr()) as *const u32;
        let offset = libc::dlsym(libc::RTLD_DEFAULT, c"__rseq_offset".as_ptr()) as *const isize;
        if size.is_null() || offset.is_null() || *size == 0 {
            return Ok(());
        }
        (*size, *offset)
    };
    let thread_pointer: usize;
    // SAFETY: reads the thread pointer (fs:0 holds its own address on x86-64).
    unsafe {
        std::arch::asm!("mov {}, qword ptr fs:0", out(reg) thread_pointer, options(nostack, readonly, preserves_flags))
    };
    let area = thread_pointer.wrapping_add_signed(offset);
    // SAFETY: cpu_id (offset 4 of struct rseq) in this thread's own area. Negative: glibc did
    // not register it (or a thread that created this one had it unregistered), nothing to do.
    if unsafe { ((area + 4) as *const i32).read_volatile() } < 0 {
        return Ok(());
    }
    let rseq_len = size.max(32);
    // SAFETY: unregisters this thread's area with the length and signature glibc registered.
    let rc = unsafe { libc::syscall(libc::SYS_rseq, area, rseq_len, RSEQ_FLAG_UNREGISTER, RSEQ_SIGNATURE) };
    if rc != 0 {
        return Err(format!("unregistering the thread's rseq area: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: cpu_id in this thread's own area: glibc falls back to the system call while it is
    // negative, and threads this one creates inherit "not registered" from this value.
    unsafe { ((area + 4) as *mut i32).write_volatile(RSEQ_CPU_ID_REGISTRATION_FAILED) };
    Ok(())
}

/// The offset of `si_pkey` in a SIGSEGV's siginfo (after si_addr and si_addr_lsb).
const SI_PKEY_OFFSET: usize = 32;
const SEGV_PKUERR: i32 = 4;

pub(crate) extern "C" fn on_signal(signal: i32, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // SAFETY: this thread's TLS block, readable and writable with the rights the kernel gives
    // a handler (key 0).
    let state = unsafe { &mut *isolation_mpk_state() };
    if state.active != 0 {
        state.active = 0;
        state.fault_signal = signal;
        // SAFETY: the kernel passes a valid siginfo and ucontext to an SA_SIGINFO handler.
        unsafe {
            state.fault_code = (*info).si_code;
            state.fault_address = (*info).si_addr() as u64;
            state.fault_pkey = if signal == libc::SIGSEGV && (*info).si_code == SEGV_PKUERR {
                *((info as *const u8).add(SI_PKEY_OFFSET) as *const u32)
            } else {
                u32::MAX
            };
            let uc = context as *mut libc::ucontext_t;
            (*uc).uc_mcontext.gregs[libc::REG_RIP as usize] = isolation_mpk_rewind as *const () as usize as i64;
        }
        return;
    }
    if signal == timeout_signal() {
        return; // the call it was meant for has ended
    }
    chain(signal, info, context);
}

/// Hands a signal that is not a domain's to whoever had it before.
fn chain(signal: i32, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    let index = signals().iter().position(|&s| s == signal);
    let previous = index.and_then(|i| PREVIOUS[i].get());
    match previous {
        Some(old) if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN => {
            if old.sa_flags & libc::SA_SIGINFO != 0 {
                // SAFETY: the previous handler was installed for exactly these arguments.
                let handler: extern "C" fn(i32, *mut libc::siginfo_t, *mut libc::c_void) =
                    unsafe { std::mem::transmute(old.sa_sigaction) };
                handler(signal, info, context);
            } else {
                // SAFETY: a plain handler, installed for one argument.
                let handler: extern "C" fn(i32) = unsafe { std::mem::transmute(old.sa_sigaction) };
                handler(signal);
            }
        }
        _ => {
            // The default action: reset it and return, so the faulting instruction (or abort's
            // second raise) ends the process as it would have without us.
            // SAFETY: plain data, then a valid sigaction call.
            unsafe {
                let mut default: libc::sigaction = std::mem::zeroed();
                default.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(signal, &default, std::ptr::null_mut());
            }
        }
    }
}
