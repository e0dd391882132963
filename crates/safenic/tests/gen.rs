//! `safenic gen` finishes what it started: it waits until the device has sent every frame it
//! queued before its memory goes, and reports frames sent, not frames queued. Needs root and
//! hugepages (`make test` provides them).

use crate::common;

use common::{Sim, A, SAFENIC};
use std::process::Command;
use std::time::Duration;

fn gen(sim: &Sim, args: &[&str]) -> std::process::Output {
    Command::new(SAFENIC).args(["gen", A, "--sysfs", &sim.devices()]).args(args).output().unwrap()
}

#[test]
fn gen_sends_every_frame_it_counts_before_it_exits() {
    let sim = Sim::start("gen");
    let out = gen(&sim, &["--count", "100000", "--size", "64"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout} {}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("100000 packets of 64 bytes sent"), "{stdout}");
    // What the port sent, at the moment gen exited, with nothing left to send.
    let s = sim.stats();
    let p = &s.ports[0];
    assert_eq!((p.device.gptc, p.sink_packets, p.in_flight.tx_ring), (100_000, 100_000, 0));
    // Nothing happens after the driver has gone: no DMA into memory that no longer exists.
    std::thread::sleep(Duration::from_millis(1500));
    let s = sim.stats();
    assert_eq!((s.ports[0].device.gptc, s.ports[0].dma_faults), (100_000, 0), "{:?}", s.ports[0].faults);
}

#[test]
fn gen_says_what_it_could_not_send_when_the_link_partner_holds_the_port() {
    let sim = Sim::start("gen-paused");
    // The link partner pauses the port (the driver sets MFLCN.RFCE, so the port obeys).
    sim.pause_tx(0, true).unwrap();
    let out = gen(&sim, &["--count", "1000", "--seconds", "1"]);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success(), "it could not finish: {stdout}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("still queued") && stderr.contains("pausing"), "{stderr}");
    // Until nicsim sees MFLCN.RFCE a few frames may leave; the report says exactly how many.
    let number_before = |text: &str, words: &str| -> u64 {
        let at = text.find(words).unwrap_or_else(|| panic!("`{words}` in {text}"));
        text[..at].split_whitespace().last().and_then(|n| n.parse().ok()).unwrap_or_else(|| panic!("{text}"))
    };
    let s = sim.stats();
    assert_eq!(
        number_before(&stdout, " packets of 60 bytes sent"),
        s.ports[0].device.gptc,
        "sent, not queued: {stdout}"
    );
    assert!(number_before(&stderr, " packets were still queued") > 0, "{stderr}");
}
