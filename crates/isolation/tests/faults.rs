//! The deliberately broken library (csrc/broken.c) in each backend: every memory error it
//! commits comes back as a violation, the caller's memory is intact afterwards (canaries
//! beside the objects the library is pointed at, a checksum over the caller's heap objects),
//! and the next call succeeds. On a host without PKU the MPK half runs in a guest that has it
//! (`make test-mpk`).

use isolation::cases::broken;
use isolation::{Backend, BackendChoice, Domain, Violation, ViolationKind};
use std::time::Duration;

const CANARY: u64 = 0x5afe_5afe_5afe_5afe;

/// Objects on the caller's heap, to be checked after each violation. Each canary is its own
/// allocation, as the objects a library is pointed at are.
#[allow(clippy::vec_box)]
struct CallerHeap {
    canaries: Vec<Box<[u64; 8]>>,
    objects: Vec<Vec<u8>>,
    checksum: u64,
}

impl CallerHeap {
    fn new() -> CallerHeap {
        let canaries = (0..64).map(|_| Box::new([CANARY; 8])).collect();
        let objects: Vec<Vec<u8>> = (0..64).map(|i| (0..1000).map(|j| (i * 31 + j * 7) as u8).collect()).collect();
        let checksum = checksum(&objects);
        CallerHeap { canaries, objects, checksum }
    }

    fn assert_intact(&self, after: &str) {
        for (i, c) in self.canaries.iter().enumerate() {
            assert!(c.iter().all(|&w| w == CANARY), "canary {i} overwritten after {after}: {c:x?}");
        }
        assert_eq!(checksum(&self.objects), self.checksum, "the caller's heap objects changed after {after}");
    }

    fn target(&self) -> u64 {
        self.canaries[32].as_ptr() as u64
    }
}

fn checksum(objects: &[Vec<u8>]) -> u64 {
    objects.iter().flatten().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

fn domain(backend: Backend) -> Domain {
    let config = broken::config()
        .backend(BackendChoice::Require(backend))
        .heap_bytes(1 << 20)
        .timeout(Some(Duration::from_millis(300)));
    Domain::new(config).unwrap_or_else(|e| panic!("a {backend} domain: {e}"))
}

/// The call that must work after every violation.
fn assert_works(domain: &mut Domain, after: &str) {
    let reply =
        domain.call(&0u64, &[1, 2, 3, 250], broken::sum).unwrap_or_else(|v| panic!("the call after {after}: {v}"));
    assert_eq!(reply.value, 256, "the call after {after}");
}

fn assert_violation(result: Result<u64, Violation>, what: &str) -> Violation {
    match result {
        Err(v) => {
            eprintln!("{what}: {v}");
            v
        }
        Ok(value) => panic!("{what} returned {value} instead of a violation"),
    }
}

fn faults_are_contained(backend: Backend) {
    let heap = CallerHeap::new();
    let mut domain = domain(backend);
    assert_works(&mut domain, "start");
    let mut generation = 0;
    let mut next = |domain: &mut Domain, v: &Violation, what: &str| {
        generation += 1;
        assert_eq!(v.generation, generation, "{what}: generation");
        assert_eq!(domain.generation(), generation);
        assert_eq!(v.backend, backend);
        heap.assert_intact(what);
        assert_works(domain, what);
    };

    let v = assert_violation(domain.call(&(8u64 << 20), &[], broken::heap_overflow).map(|r| r.value), "heap overflow");
    assert!(matches!(v.kind, ViolationKind::Fault { signal: libc::SIGSEGV, .. }), "heap overflow: {v}");
    next(&mut domain, &v, "heap overflow");

    let v = assert_violation(domain.call(&heap.target(), &[], broken::wild_write).map(|r| r.value), "wild write");
    match (backend, &v.kind) {
        (Backend::Mpk, ViolationKind::Fault { signal: libc::SIGSEGV, pkey: Some(_), .. }) => {}
        (Backend::Process, ViolationKind::Fault { signal: libc::SIGSEGV, address, .. }) => {
            assert_eq!(*address as u64, heap.target())
        }
        _ => panic!("wild write: {v}"),
    }
    next(&mut domain, &v, "wild write");

    let v = assert_violation(domain.call(&64u64, &[], broken::stack_smash).map(|r| r.value), "stack smash");
    assert!(matches!(v.kind, ViolationKind::Fault { signal: libc::SIGABRT | libc::SIGSEGV, .. }), "stack smash: {v}");
    next(&mut domain, &v, "stack smash");

    // The library keeps a pointer to an object of the caller, which the caller then frees and
    // whose memory it allocates again.
    let mut kept = Box::new([CANARY; 8]);
    domain.call(&(kept.as_mut_ptr() as u64), &[], broken::keep).expect("keep");
    drop(kept);
    let reused: Vec<Box<[u64; 8]>> = (0..16).map(|_| Box::new([CANARY; 8])).collect();
    let v = assert_violation(domain.call(&0u64, &[], broken::use_after_free).map(|r| r.value), "use after free");
    assert!(reused.iter().all(|c| c.iter().all(|&w| w == CANARY)), "use after free reached the caller's new objects");
    next(&mut domain, &v, "use after free");

    let v = assert_violation(domain.call(&0u64, &[], broken::null_call).map(|r| r.value), "null call");
    assert!(matches!(v.kind, ViolationKind::Fault { signal: libc::SIGSEGV, address: 0, .. }), "null call: {v}");
    next(&mut domain, &v, "null call");

    let v = assert_violation(domain.call(&0u64, &[], broken::spin).map(|r| r.value), "infinite loop");
    assert!(matches!(v.kind, ViolationKind::Timeout { .. }), "infinite loop: {v}");
    next(&mut domain, &v, "infinite loop");
}

/// The helper's system calls are an allowlist: opening a file kills it (SIGSYS), a violation
/// like any other. An MPK domain filters no system call (docs/isolation.md, threat model):
/// there `open` either succeeds or, as with glibc 2.34 and later, faults because the wrapper of
/// a cancellation point writes the thread's control block (key 0).
#[test]
fn a_system_call_outside_the_allowlist_is_a_violation_in_the_helper() {
    let mut d = domain(Backend::Process);
    let v = d.call(&0u64, &[], broken::open_file).expect_err("open is not on the allowlist");
    assert_eq!(v.kind, ViolationKind::Died { signal: Some(libc::SIGSYS), status: None }, "{v}");
    assert_works(&mut d, "a forbidden system call");
    if isolation::pku::mpk_here() {
        let mut d = domain(Backend::Mpk);
        match d.call(&0u64, &[], broken::open_file) {
            Ok(reply) => assert!(reply.value as i64 >= 0, "open in an MPK domain: {}", reply.value as i64),
            Err(v) => {
                assert!(matches!(v.kind, ViolationKind::Fault { pkey: Some(0), .. }), "open in an MPK domain: {v}")
            }
        }
        assert_works(&mut d, "a system call in an MPK domain");
    }
}

#[test]
fn process_backend_contains_every_fault() {
    faults_are_contained(Backend::Process);
}

#[test]
fn mpk_backend_contains_every_fault() {
    if !isolation::pku::mpk_here() {
        return;
    }
    faults_are_contained(Backend::Mpk);
}
