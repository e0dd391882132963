//! Entering and leaving an MPK domain: two PKRU writes per call. The entry saves the trusted
//! stack pointer in thread-local storage (key 0: the domain can read it but not write it),
//! switches to the domain's stack, writes the domain's rights and calls the entry; the exit
//! writes the trusted rights back from thread-local storage, checks that they were written,
//! and returns on the trusted stack. A fault inside the domain resumes at `rewind` instead
//! (signals.rs), which does the same with a non-zero result.

use std::arch::global_asm;

/// The thread's state for the MPK backend, at a fixed place in its static TLS block.
#[repr(C)]
pub(crate) struct ThreadState {
    pub saved_rsp: u64,
    pub trusted_pkru: u32,
    /// Non-zero while this thread runs inside a domain: set by the entry after it saved the
    /// stack pointer, cleared by the exit or by the signal handler.
    pub active: u32,
    pub stack_low: u64,
    pub stack_high: u64,
    pub fault_signal: i32,
    pub fault_code: i32,
    pub fault_address: u64,
    pub fault_pkey: u32,
    pub _reserved: u32,
}

const _: () = assert!(std::mem::size_of::<ThreadState>() <= 64);

global_asm!(
    r#"
    .section .tbss,"awT",@nobits
    .p2align 6
isolation_mpk_thread_state:
    .zero 64

    .text
    .p2align 4
    .globl isolation_mpk_state
    .hidden isolation_mpk_state
    .type isolation_mpk_state,@function
isolation_mpk_state:
    mov rax, qword ptr fs:0
    lea rax, [rax + isolation_mpk_thread_state@tpoff]
    ret

    .p2align 4
    .globl isolation_mpk_enter
    .hidden isolation_mpk_enter
    .type isolation_mpk_enter,@function
isolation_mpk_enter:
    push rbp
    push rbx
    push r12
    push r13
    push r14
    push r15
    sub rsp, 8
    mov qword ptr fs:[isolation_mpk_thread_state@tpoff], rsp
    mov dword ptr fs:[isolation_mpk_thread_state@tpoff + 12], 1
    mov r8d, ecx
    mov rsp, rdx
    mov eax, r8d
    xor ecx, ecx
    xor edx, edx
    wrpkru
    call rsi
    mov eax, dword ptr fs:[isolation_mpk_thread_state@tpoff + 8]
    xor ecx, ecx
    xor edx, edx
    wrpkru
    cmp eax, dword ptr fs:[isolation_mpk_thread_state@tpoff + 8]
    jne 3f
    mov dword ptr fs:[isolation_mpk_thread_state@tpoff + 12], 0
    xor r8d, r8d
    jmp 2f

    .globl isolation_mpk_rewind
    .hidden isolation_mpk_rewind
isolation_mpk_rewind:
    mov eax, dword ptr fs:[isolation_mpk_thread_state@tpoff + 8]
    xor ecx, ecx
    xor edx, edx
    wrpkru
    cmp eax, dword ptr fs:[isolation_mpk_thread_state@tpoff + 8]
    jne 3f
    mov r8d, 1
2:
    mov rsp, qword ptr fs:[isolation_mpk_thread_state@tpoff]
    add rsp, 8
    pop r15
    pop r14
    pop r13
    pop r12
    pop rbx
    pop rbp
    mov eax, r8d
    ret
3:
    ud2

    "#
);

extern "C" {
    /// This thread's [`ThreadState`].
    pub(crate) fn isolation_mpk_state() -> *mut ThreadState;
    /// Runs `entry(invocation)` on the stack below `stack_top` with PKRU = `pkru`; returns 0
    /// when it returned, 1 when a fault rewound it.
    pub(crate) fn isolation_mpk_enter(
        invocation: *const crate::frame::Invocation,
        entry: crate::frame::Entry,
        stack_top: usize,
        pkru: u32,
    ) -> u32;
    /// Where a signal handler sends a faulting domain (never called).
    pub(crate) fn isolation_mpk_rewind();
}
