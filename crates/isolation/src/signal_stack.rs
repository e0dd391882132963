//! What both backends' fault handling shares: the signals a fault in a domain raises, and an
//! alternate signal stack for the handler, since a fault may leave the domain's stack unusable.

/// The signals a memory error, an abort (e.g. the stack protector's) or a bad instruction
/// raises.
pub(crate) const FAULT_SIGNALS: [i32; 6] =
    [libc::SIGSEGV, libc::SIGBUS, libc::SIGFPE, libc::SIGILL, libc::SIGTRAP, libc::SIGABRT];

/// Gives the calling thread a new 64 KiB alternate signal stack, under protection key `key` if
/// given, kept for the thread's lifetime.
pub(crate) fn install_alternate_stack(key: Option<u32>) -> Result<(), String> {
    let size = 64 * 1024;
    // SAFETY: a new anonymous mapping, never unmapped: a few pages per thread that needs one.
    let stack = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if stack == libc::MAP_FAILED {
        return Err(format!("mapping a signal stack: {}", std::io::Error::last_os_error()));
    }
    if let Some(key) = key {
        crate::pku::protect(stack as usize, size, libc::PROT_READ | libc::PROT_WRITE, key)
            .map_err(|e| format!("tagging the signal stack: {e}"))?;
    }
    let new = libc::stack_t { ss_sp: stack, ss_flags: 0, ss_size: size };
    // SAFETY: the stack is mapped and stays mapped.
    if unsafe { libc::sigaltstack(&new, std::ptr::null_mut()) } != 0 {
        return Err(format!("sigaltstack: {}", std::io::Error::last_os_error()));
    }
    Ok(())
}
