//! Memory protection keys (Intel SDM Vol. 3A §4.6.2; pkeys(7)): whether this host has them,
//! and the few operations the MPK backend needs.

use std::sync::OnceLock;

/// Whether the CPU has PKU and the kernel enabled it (CPUID.(EAX=7,ECX=0):ECX bit 4, OSPKE)
/// and a key can be allocated. Where OSPKE is clear, RDPKRU and WRPKRU raise #UD.
pub fn available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        if !ospke() {
            return false;
        }
        match alloc() {
            Ok(key) => {
                free(key);
                true
            }
            Err(_) => false,
        }
    })
}

/// For tests: whether the MPK backend can be tested here. Where it cannot, says so on stderr
/// (`make test-mpk` runs the tests in a guest that has PKU), or panics if
/// `SAFENIC_ISOLATION_REQUIRE_MPK` is set (as it is in that guest), so that a missing key
/// never passes for a tested backend.
pub fn mpk_here() -> bool {
    if available() {
        return true;
    }
    if std::env::var_os("SAFENIC_ISOLATION_REQUIRE_MPK").is_some() {
        panic!("SAFENIC_ISOLATION_REQUIRE_MPK is set but this host has no usable protection keys");
    }
    eprintln!("no PKU on this host: the MPK backend's tests run in a guest that has it (make test-mpk)");
    false
}

fn ospke() -> bool {
    // Leaf 7 is read only if leaf 0 reports it.
    let max = std::arch::x86_64::__cpuid(0).eax;
    max >= 7 && std::arch::x86_64::__cpuid_count(7, 0).ecx & (1 << 4) != 0
}

/// A new key, with full rights for the calling thread.
pub(crate) fn alloc() -> Result<u32, std::io::Error> {
    // SAFETY: pkey_alloc(flags 0, rights 0) takes no pointers.
    let key = unsafe { libc::syscall(libc::SYS_pkey_alloc, 0usize, 0usize) };
    if key < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(key as u32)
}

pub(crate) fn free(key: u32) {
    // SAFETY: pkey_free takes no pointers; the key is not in use by any mapping any more.
    unsafe { libc::syscall(libc::SYS_pkey_free, key as usize) };
}

/// Tags `[address, address + len)` with `key` and sets its protection to `prot`.
pub(crate) fn protect(address: usize, len: usize, prot: i32, key: u32) -> Result<(), std::io::Error> {
    // SAFETY: changes only the protection of pages the caller owns (a domain's mappings).
    let rc = unsafe { libc::syscall(libc::SYS_pkey_mprotect, address, len, prot as usize, key as usize) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The calling thread's PKRU. Only where [`available`] is true.
pub fn read() -> u32 {
    let pkru: u32;
    // SAFETY: RDPKRU reads a register (ECX must be 0); the caller checked that the OS enabled it.
    unsafe {
        std::arch::asm!("rdpkru", in("ecx") 0u32, out("eax") pkru, out("edx") _, options(nomem, nostack, preserves_flags))
    };
    pkru
}

/// Sets the calling thread's PKRU.
///
/// # Safety
/// `pkru` must leave the calling code access to everything it goes on to touch: its stack,
/// its heap, its thread-local storage.
pub(crate) unsafe fn write(pkru: u32) {
    // SAFETY: the caller's contract; WRPKRU needs ECX = EDX = 0.
    unsafe {
        std::arch::asm!("wrpkru", in("eax") pkru, in("ecx") 0u32, in("edx") 0u32, options(nostack, preserves_flags))
    };
}

/// Access-disable and write-disable bits of `key` in PKRU.
pub(crate) fn bits(key: u32) -> u32 {
    3 << (2 * key)
}

/// The rights inside a domain with `key`: its own key and the signal key (where the kernel
/// writes a signal's frame) read-write, key 0 (the rest of the process) read-only, every other
/// key no access.
pub(crate) fn domain_rights(key: u32, signal_key: u32) -> u32 {
    !bits(key) & !bits(signal_key) & !1
}
