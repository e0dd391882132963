//! The API's promises in every backend: results and output come back, an input too large is
//! refused without running, a domain moves between threads, and the unisolated backend gives
//! the same answers.

use isolation::cases::broken;
use isolation::{Backend, BackendChoice, Domain, Io, ViolationKind};

fn backends() -> Vec<Backend> {
    let mut all = vec![Backend::Process, Backend::Unisolated];
    if isolation::pku::mpk_here() {
        all.push(Backend::Mpk);
    }
    all
}

fn domain(backend: Backend) -> Domain {
    let config = broken::config().backend(BackendChoice::Require(backend)).io_bytes(4096, 4096);
    Domain::new(config).unwrap_or_else(|e| panic!("a {backend} domain: {e}"))
}

/// Reverses the input into the output; returns the first argument plus the length.
fn reverse(args: &[u32; 2], io: &mut Io<'_>) -> u64 {
    let n = io.input().len();
    let input = io.input().to_vec();
    for (o, i) in io.output().iter_mut().zip(input.iter().rev()) {
        *o = *i;
    }
    io.set_output_len(n);
    args[0] as u64 + n as u64
}

/// The same without allocating (a Rust allocation inside an MPK domain would write the
/// process's heap, which the domain may not).
fn reverse_in_place(args: &[u32; 2], io: &mut Io<'_>) -> u64 {
    let n = io.input().len().min(io.output().len());
    for i in 0..n {
        let b = io.input()[n - 1 - i];
        io.output()[i] = b;
    }
    io.set_output_len(n);
    args[0] as u64 + n as u64
}

#[test]
fn results_and_output_come_back() {
    for backend in backends() {
        let mut d = domain(backend);
        assert_eq!(d.backend(), backend);
        let f = if backend == Backend::Mpk { reverse_in_place } else { reverse };
        let reply = d.call(&[40, 0], b"abc", f).expect("call");
        assert_eq!((reply.value, reply.output), (43, &b"cba"[..]), "{backend}");
        // Zero-copy input: filled in place.
        d.input_area()[..2].copy_from_slice(b"xy");
        let reply = d.call_prepared(&[1, 0], 2, f).expect("call");
        assert_eq!((reply.value, reply.output), (3, &b"yx"[..]), "{backend}");
    }
}

#[test]
fn an_input_too_large_is_refused_without_running() {
    for backend in backends() {
        let mut d = domain(backend);
        let v = d.call(&0u64, &[0u8; 4097], broken::sum).expect_err("too large");
        assert_eq!(v.kind, ViolationKind::InputTooLarge { len: 4097, capacity: 4096 });
        assert_eq!(d.generation(), 0, "{backend}: nothing to discard");
        assert_eq!(d.call(&0u64, &[7u8; 4096], broken::sum).expect("fits").value, 7 * 4096);
    }
}

#[test]
fn a_domain_moves_between_threads() {
    for backend in backends() {
        let mut d = domain(backend);
        assert_eq!(d.call(&0u64, &[1], broken::sum).expect("here").value, 1);
        let mut d = std::thread::spawn(move || {
            assert_eq!(d.call(&0u64, &[2, 3], broken::sum).expect("there").value, 5);
            d
        })
        .join()
        .expect("thread");
        assert_eq!(d.call(&0u64, &[4], broken::sum).expect("back").value, 4);
    }
}

#[test]
fn a_rust_allocation_inside_an_mpk_domain_is_a_violation() {
    if !isolation::pku::mpk_here() {
        return;
    }
    let mut d = domain(Backend::Mpk);
    let v = d.call(&[0, 0], b"abc", reverse).expect_err("the process's heap is read-only inside");
    assert!(matches!(v.kind, ViolationKind::Fault { signal: libc::SIGSEGV, pkey: Some(0), .. }), "{v}");
    assert_eq!(d.call(&[0, 0], b"abc", reverse_in_place).expect("after").output, b"cba");
}

/// In the caller's own process (the unisolated backend, `Direct`), a case's function calls
/// nothing of a library it was not made for, and the broken library's misbehaving functions
/// nothing at all: each would otherwise corrupt the caller from safe code (here, a write at
/// 0x1000 and a call through a pointer of the wrong signature).
#[test]
fn unprotected_calls_reach_only_what_a_case_was_made_for() {
    use isolation::cases::snappy;
    let mut d = domain(Backend::Unisolated);
    assert_eq!(d.call(&0x1000u64, b"", broken::wild_write).unwrap().value, broken::REFUSED);
    assert_eq!(d.call(&0u64, b"abc", snappy::compress).unwrap().value, snappy::FAILED);
    assert_eq!(d.call(&0u64, b"\x01\x02", broken::sum).unwrap().value, 3, "what the case was made for runs");
    let direct = isolation::Direct::new(isolation::Library::broken(), &broken::SYMBOLS).unwrap();
    let mut out = [0u8; 64];
    assert_eq!(direct.call(&0u64, b"abc", &mut out, snappy::compress).0, snappy::FAILED);
    assert_eq!(direct.call(&0u64, b"", &mut out, broken::null_call).0, broken::REFUSED);
    // The same symbols in another order are another case.
    let mut swapped = broken::SYMBOLS;
    swapped.swap(0, 2);
    let direct = isolation::Direct::new(isolation::Library::broken(), &swapped).unwrap();
    assert_eq!(direct.call(&0u64, b"abc", &mut out, broken::sum).0, broken::REFUSED);
}
