//! The wire side's unit tests.

use super::frame::fold_checksum;
use super::*;

#[test]
fn line_rate_matches_the_datasheet_figures() {
    assert_eq!(line_rate_pps(60, 10.0).round() as u64, 14_880_952);
    assert_eq!(line_rate_pps(1514, 10.0).round() as u64, 812_744);
}

#[test]
fn crc32_known_vector() {
    assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
}

#[test]
fn wire_clock_never_exceeds_line_rate() {
    let mut w = WireClock::new(10.0);
    let mut now = 0u64;
    let mut sent = 0u64;
    // Offer frames continuously for one simulated millisecond.
    while now < 1_000_000_000 {
        if w.ready(now) {
            w.send(now, 60);
            sent += 1;
        } else {
            now += 1000;
        }
    }
    let expected = line_rate_pps(60, 10.0) / 1000.0;
    let slack = (LOOKAHEAD_PS / 67_200) as f64 + 2.0; // frames scheduled ahead of "now"
    assert!((sent as f64) <= expected + slack, "{sent} > {expected}");
    assert!((sent as f64) >= expected - 2.0, "{sent} < {expected}");
}

#[test]
fn generator_bursts_keep_to_the_rate_and_the_count() {
    // At line rate, in bursts of up to 64 polled every microsecond for one simulated
    // millisecond (a poll sees about 15 frames due, so the burst limit does not bind).
    let mut g = Generator::new(0);
    g.start(TrafficSpec::default(), [0x02, 0, 0, 0, 0, 1], 10.0, 0);
    let mut wire = WireClock::new(10.0);
    let mut sent = 0usize;
    let mut last_end = 0;
    for now in (0..1_000_000_000u64).step_by(1_000_000) {
        sent += g.burst(now, &mut wire, 64, &mut |_, end| {
            assert!(end > last_end, "frames leave one after another");
            last_end = end;
        });
    }
    let expected = line_rate_pps(60, 10.0) / 1000.0;
    let slack = (LOOKAHEAD_PS / 67_200) as f64 + 2.0;
    assert!((sent as f64) <= expected + slack, "{sent} > {expected}");
    assert!((sent as f64) >= expected - slack, "{sent} < {expected}");
    // At a lower rate with a count: the count ends it, whatever the burst size.
    let spec = TrafficSpec { rate_pps: Some(1e6), count: Some(100), ..Default::default() };
    g.start(spec, [0x02, 0, 0, 0, 0, 1], 10.0, 2_000_000_000);
    let mut wire = WireClock::new(10.0);
    let mut n = 0;
    for now in (2_000_000_000..3_000_000_000u64).step_by(10_000_000) {
        let got = g.burst(now, &mut wire, 64, &mut |_, _| {});
        assert!(got <= 11, "1 Mpps is 10 frames per 10 µs (+1 looking ahead), not {got}");
        n += got;
    }
    assert_eq!(n, 100);
    assert!(!g.active());
}

#[test]
fn a_late_engine_is_counted_as_skipped_frames() {
    // Polled every microsecond for 1 ms at line rate, with two stalls: 10 µs (within
    // BURST_PS: caught up, nothing skipped) and 100 µs (80 µs of it forgotten).
    let mut g = Generator::new(0);
    g.start(TrafficSpec::default(), [0x02, 0, 0, 0, 0, 1], 10.0, 0);
    let mut wire = WireClock::new(10.0);
    let mut sent = 0;
    let mut now = 0;
    while now < 1_000_000_000u64 {
        sent += g.burst(now, &mut wire, 4096, &mut |_, _| {});
        now += match now {
            200_000_000 => 10_000_000,
            500_000_000 => 100_000_000,
            _ => 1_000_000,
        };
        if now == 210_000_000 {
            assert_eq!(g.skipped, 0, "a 10 µs stall is caught up");
        }
    }
    // The generator had scheduled up to LOOKAHEAD_PS ahead before the stall.
    let forgotten = (100_000_000 - BURST_PS - LOOKAHEAD_PS) as f64 / 67_200.0;
    assert!((g.skipped as f64 - forgotten).abs() <= 2.0, "{} skipped, {forgotten} expected", g.skipped);
    // What was sent and what was skipped add up to the line rate.
    let expected = line_rate_pps(60, 10.0) / 1000.0;
    let slack = (LOOKAHEAD_PS / 67_200) as f64 + 2.0;
    let owed = (sent + g.skipped as usize) as f64;
    assert!((owed - expected).abs() <= slack, "{sent} sent + {} skipped, {expected} owed", g.skipped);
    g.reset_counters();
    assert_eq!(g.skipped, 0);
}

#[test]
fn a_timed_run_offers_and_skips_exactly_what_its_rate_owes() {
    // 1 Mpps for 1 ms: 1000 frames owed. The engine looks at 0 µs, then stalls until late in
    // the run (most of the stall forgotten, the last BURST_PS caught up), then comes back
    // after the end: what fell due between its last look and the end was never generated.
    let spec = TrafficSpec { rate_pps: Some(1e6), duration_ms: Some(1), ..Default::default() };
    for last_look in [900_000_000u64, 999_000_000] {
        let mut g = Generator::new(0);
        g.start(spec.clone(), [0x02, 0, 0, 0, 0, 1], 10.0, 0);
        let mut wire = WireClock::new(10.0);
        let mut sent = 0;
        for now in [0, last_look, 1_500_000_000] {
            sent += g.burst(now, &mut wire, 4096, &mut |_, _| {});
        }
        assert!(!g.active());
        assert_eq!(sent as u64 + g.skipped, 1000, "{sent} sent, {} skipped", g.skipped);
    }
}

#[test]
fn generator_frames_are_valid_ipv4_udp_and_parse_back() {
    let mut g = Generator::new(3);
    let spec = TrafficSpec { size: 64, flows: 4, count: Some(5), ..Default::default() };
    g.start(spec, [0x02, 0, 0, 0, 0, 1], 10.0, 0);
    let mut wire = WireClock::new(10.0);
    let mut got = Vec::new();
    let mut now = 0;
    while got.len() < 6 && now < 10_000_000 {
        g.burst(now, &mut wire, 1, &mut |f: &[u8], _| got.push(f.to_vec()));
        now += 10_000;
    }
    assert_eq!(got.len(), 5, "count is honoured");
    for (i, f) in got.iter().enumerate() {
        assert_eq!(f.len(), 64);
        assert_eq!(
            fold_checksum(f[14..34].chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum()),
            0,
            "IP checksum"
        );
        let (stream, seq, _) = parse_payload(f).unwrap();
        assert_eq!((stream, seq), (3, i as u64));
    }
    assert_ne!(got[0][26..30], got[1][26..30], "flows vary the source address");
    assert_eq!(got[0][26..30], got[4][26..30], "4 flows repeat");
}

#[test]
fn size_sweeps_cycle_every_length_and_counts_restart() {
    let mut g = Generator::new(0);
    let spec = TrafficSpec { size: 60, size_max: Some(63), count: Some(6), ..Default::default() };
    assert!(TrafficSpec { size: 100, size_max: Some(99), ..Default::default() }.validate(10.0).is_err());
    g.start(spec.clone(), [0x02, 0, 0, 0, 0, 1], 10.0, 0);
    let mut wire = WireClock::new(10.0);
    let mut got = Vec::new();
    for now in (0..10_000_000).step_by(10_000) {
        g.burst(now, &mut wire, 1, &mut |f: &[u8], _| got.push(f.to_vec()));
    }
    let lengths: Vec<usize> = got.iter().map(|f| f.len()).collect();
    assert_eq!(lengths, [60, 61, 62, 63, 60, 61]);
    for f in &got {
        let sum: u32 = f[14..34].chunks(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum();
        assert_eq!(fold_checksum(sum), 0, "IP checksum of a {}-byte frame", f.len());
        assert_eq!(usize::from(u16::from_be_bytes([f[16], f[17]])), f.len() - 14, "IP total length");
    }
    // A new start counts afresh; sequence numbers continue.
    g.start(spec, [0x02, 0, 0, 0, 0, 1], 10.0, 20_000_000);
    let mut more = Vec::new();
    for now in (20_000_000..30_000_000).step_by(10_000) {
        g.burst(now, &mut wire, 1, &mut |f: &[u8], _| more.push(parse_payload(f).unwrap().1));
    }
    assert_eq!(more, [6, 7, 8, 9, 10, 11]);
}

#[test]
fn sink_counts_loss_and_reordering() {
    let mut s = Sink::new();
    let f = |seq: u64| {
        let mut t = build_template(60, [0; 6], 1);
        t[PAYLOAD..PAYLOAD + 8].copy_from_slice(&seq.to_le_bytes());
        t
    };
    for seq in [0, 1, 3, 2, 6] {
        s.consume(&f(seq), 5_000_000);
    }
    let st = &s.streams[1];
    assert_eq!((st.received, st.reordered, st.lost), (5, 1, 2)); // 4 and 5 missing
    s.consume(&[0u8; 60], 0);
    assert_eq!(s.foreign, 1);
}

#[test]
fn sink_tells_reordering_within_a_flow_from_flows_interleaved() {
    let mut s = Sink::new();
    // Two flows (source ports 1024 and 1025); sequence numbers alternate between them.
    let f = |seq: u64| {
        let mut t = build_template(60, [0; 6], 2);
        t[34..36].copy_from_slice(&(1024 + (seq % 2) as u16).to_be_bytes());
        t[PAYLOAD..PAYLOAD + 8].copy_from_slice(&seq.to_le_bytes());
        t
    };
    // Flow 1 (odd) runs ahead of flow 0 (even), as two queues do: each flow in order.
    for seq in [1, 3, 5, 0, 2, 4] {
        s.consume(&f(seq), 5_000_000);
    }
    let st = &s.streams[2];
    assert_eq!((st.received, st.lost, st.flow_reordered), (6, 0, 0));
    assert!(st.reordered > 0, "out of global order");
    // Then flow 0 goes backwards.
    s.consume(&f(2), 5_000_000);
    assert_eq!(s.streams[2].flow_reordered, 1);
}
