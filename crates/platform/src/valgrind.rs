//! Whether the process runs under valgrind, asked the way valgrind's own header does: a
//! sequence of instructions that changes nothing on a real CPU and that valgrind's
//! instruction decoder answers. Safe code cannot fake the answer (an environment variable or a
//! file name could be).
//!
//! # Soundness
//! The client request reads two registers and changes nothing on a real CPU.

/// valgrind's `VG_USERREQ__RUNNING_ON_VALGRIND` (valgrind.h).
#[cfg(target_arch = "x86_64")]
const RUNNING_ON_VALGRIND: u64 = 0x1001;

/// True when valgrind runs this process (the bench's instruction counts do).
pub fn running_on_valgrind() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let request: [u64; 6] = [RUNNING_ON_VALGRIND, 0, 0, 0, 0, 0];
        let mut answer: u64 = 0;
        // SAFETY: rotating rdi by 3, 13, 61 and 51 bits (128 in all) leaves it as it was, and
        // `xchg rbx, rbx` changes nothing: natively a no-op that leaves rdx (the answer) at 0.
        // Under valgrind the tool reads the six words at rax, which live across the asm, and
        // writes its answer to rdx; rdi is declared clobbered all the same.
        unsafe {
            std::arch::asm!(
                "rol rdi, 3", "rol rdi, 13", "rol rdi, 61", "rol rdi, 51", "xchg rbx, rbx",
                in("rax") request.as_ptr(),
                inout("rdx") answer,
                out("rdi") _,
                options(nostack, readonly),
            );
        }
        answer != 0
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_real_cpu_is_not_valgrind() {
        // Unit tests run natively (make sanitize runs them under ASan, not valgrind).
        assert!(!super::running_on_valgrind());
    }
}
