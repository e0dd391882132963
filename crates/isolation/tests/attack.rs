//! A library whose own code attacks the process that loads it (csrc/attack.c): its
//! initialiser opens the caller's `/proc/<pid>/mem` and writes a `String` of the caller's,
//! reads it, signals and traces the caller, writes a file and starts a thread to try again
//! later. The outside review's library did this in the process backend's helper before its
//! allowlist applied, and the caller printed the attacker's text. Now the helper is confined
//! before the library's code runs, and no backend loads an untrusted library into the caller.
//! The caller runs in a child (this binary again), so that the test reads what the library
//! said on the helper's stderr.

use isolation::{Backend, BackendChoice, Config, Direct, Domain, Io, Library};
use std::process::Command;

fn attack_library() -> Library {
    Library::embedded("safenic-attack", include_bytes!(concat!(env!("OUT_DIR"), "/libsafenic_attack.so")))
}

fn seven(_: &u64, _: &mut Io<'_>) -> u64 {
    7
}

/// Run in a child by the test below: the caller.
#[test]
#[ignore = "helper: run by a_library_s_initialiser_cannot_reach_its_caller"]
fn helper_load_the_attacking_library() {
    let secret = String::from("untouched");
    let target = format!("{}:{:x}", std::process::id(), secret.as_ptr() as usize);
    // Read by the library's initialiser in the helper, which inherits the environment.
    std::env::set_var("SAFENIC_ATTACK_TARGET", target);
    let config = Config::new(attack_library(), &["attack_answer"]);
    let mut domain = Domain::new(config.clone()).expect("the process backend loads any library, confined");
    println!("backend: {}", domain.backend());
    match domain.call(&0u64, b"", seven) {
        Ok(reply) => println!("call: {}", reply.value),
        Err(violation) => println!("call: {violation}"),
    }
    // The thread the initialiser would have started tries again after 100 ms.
    std::thread::sleep(std::time::Duration::from_millis(300));
    println!("string: {secret}");
    for backend in [Backend::Mpk, Backend::Unisolated] {
        if let Err(e) = Domain::new(config.clone().backend(BackendChoice::Require(backend))) {
            println!("{backend}: {e}");
        }
    }
    if let Err(e) = Direct::new(attack_library(), &["attack_answer"]) {
        println!("direct: {e}");
    }
    println!("helper done");
}

#[test]
fn a_library_s_initialiser_cannot_reach_its_caller() {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "helper_load_the_attacking_library", "--nocapture", "--test-threads=1"])
        .output()
        .unwrap();
    let (text, said) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && text.contains("helper done"), "the caller failed:\n{text}{said}");
    let attacks: Vec<&str> = said.lines().filter(|l| l.starts_with("ATTACK")).collect();
    assert!(attacks.is_empty(), "the library reached its caller:\n{}", attacks.join("\n"));
    // The initialiser ran, and found each way closed.
    for refused in ["opened the caller's memory for writing", "opened the caller's memory for reading"] {
        assert!(said.contains(&format!("refused initialiser: {refused}")), "{refused}:\n{said}");
    }
    assert!(said.contains("refused initialiser: started a thread"), "{said}");
    assert!(text.contains("backend: process") && text.contains("call: 7"), "{text}");
    assert!(text.contains("string: untouched"), "{text}");
    for place in ["mpk", "unisolated", "direct"] {
        let line = text.lines().find(|l| l.starts_with(&format!("{place}: "))).unwrap_or("");
        assert!(line.contains("is not trusted to run in this process"), "{place} did not refuse the library:\n{text}");
    }
}
