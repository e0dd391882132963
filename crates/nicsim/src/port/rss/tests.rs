//! The Toeplitz hash against the datasheet's RSS verification suite [DS 7.1.2.8.3], which is
//! Microsoft's ("Verifying the RSS hash calculation"), and the queue choice on whole frames.

use super::*;
use std::net::{Ipv4Addr, Ipv6Addr};

/// The suite's key.
const KEY: [u8; KEY_LEN] = VERIFICATION_KEY;

/// (destination, destination port, source, source port, IP-only hash, with TCP ports).
const IPV4: [(&str, u16, &str, u16, u32, u32); 5] = [
    ("161.142.100.80", 1766, "66.9.149.187", 2794, 0x323e8fc2, 0x51ccc178),
    ("65.69.140.83", 4739, "199.92.111.2", 14230, 0xd718262a, 0xc626b0ea),
    ("12.22.207.184", 38024, "24.19.198.95", 12898, 0xd2d0a5de, 0x5c2b394a),
    ("209.142.163.6", 2217, "38.27.205.30", 48228, 0x82989176, 0xafc7327f),
    ("202.188.127.2", 1303, "153.39.163.191", 44251, 0x5d1809c5, 0x10e828a2),
];

const IPV6: [(&str, u16, &str, u16, u32, u32); 3] = [
    ("3ffe:2501:200:3::1", 1766, "3ffe:2501:200:1fff::7", 2794, 0x2cc18cd5, 0x40207d3d),
    ("ff02::1", 4739, "3ffe:501:8::260:97ff:fe40:efab", 14230, 0x0f0c461c, 0xdde51bbf),
    ("fe80::200:f8ff:fe21:67cf", 38024, "3ffe:1900:4545:3:200:f8ff:fe21:67cf", 44251, 0x4b61e985, 0x02d1feef),
];

#[test]
fn toeplitz_matches_the_verification_suite_for_ipv4() {
    let t = Toeplitz::new(&KEY);
    for (dst, dport, src, sport, ip, tcp) in IPV4 {
        let mut input = Vec::new();
        input.extend(src.parse::<Ipv4Addr>().unwrap().octets());
        input.extend(dst.parse::<Ipv4Addr>().unwrap().octets());
        assert_eq!(t.hash(&input), ip, "{src} -> {dst}");
        input.extend(sport.to_be_bytes());
        input.extend(dport.to_be_bytes());
        assert_eq!(t.hash(&input), tcp, "{src}:{sport} -> {dst}:{dport}");
    }
}

#[test]
fn toeplitz_matches_the_verification_suite_for_ipv6() {
    let t = Toeplitz::new(&KEY);
    for (dst, dport, src, sport, ip, tcp) in IPV6 {
        let mut input = Vec::new();
        input.extend(src.parse::<Ipv6Addr>().unwrap().octets());
        input.extend(dst.parse::<Ipv6Addr>().unwrap().octets());
        assert_eq!(t.hash(&input), ip, "{src} -> {dst}");
        input.extend(sport.to_be_bytes());
        input.extend(dport.to_be_bytes());
        assert_eq!(t.hash(&input), tcp, "{src}:{sport} -> {dst}:{dport}");
    }
}

/// Registers as a driver that enables RSS over `queues` queues writes them.
fn registers(fields: u32, queues: u8, pcsd: bool) -> impl Fn(u32) -> u32 {
    move |offset| match offset {
        MRQC => 1 | fields,
        RXCSUM if pcsd => RXCSUM_PCSD,
        o if (reta(0)..=reta(31)).contains(&o) => {
            let n = ((o - reta(0)) / 4) as u8;
            u32::from_le_bytes(std::array::from_fn(|k| (4 * n + k as u8) % queues))
        }
        o if (rssrk(0)..=rssrk(9)).contains(&o) => {
            let n = ((o - rssrk(0)) / 4) as usize;
            u32::from_le_bytes(KEY[4 * n..4 * n + 4].try_into().unwrap())
        }
        _ => 0,
    }
}

/// An Ethernet frame with an IPv4 header (protocol `proto`, fragment field `frag`) and ports.
fn ipv4_frame(src: &str, dst: &str, proto: u8, sport: u16, dport: u16, frag: u16) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[20..22].copy_from_slice(&frag.to_be_bytes());
    f[23] = proto;
    f[26..30].copy_from_slice(&src.parse::<Ipv4Addr>().unwrap().octets());
    f[30..34].copy_from_slice(&dst.parse::<Ipv4Addr>().unwrap().octets());
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f[36..38].copy_from_slice(&dport.to_be_bytes());
    f
}

#[test]
fn frames_go_to_the_queue_their_hash_selects_and_report_it() {
    let mut rss = Rss::default();
    rss.update(registers(FIELD_IPV4 | FIELD_IPV4_TCP | FIELD_IPV4_UDP, 4, true));
    assert!(rss.enabled());
    assert_eq!(rss.spread(), 4);
    for (dst, dport, src, sport, _, tcp) in IPV4 {
        let c = rss.classify(&ipv4_frame(src, dst, 6, sport, dport, 0));
        assert_eq!(c.queue, (tcp & 0x7F) % 4);
        assert_eq!(c.info >> 32, u64::from(tcp));
        assert_eq!(c.info & 0xF, RssType::Ipv4Tcp as u64);
        assert_eq!(c.info & 0xFFF0, u64::from(PKT_IPV4 | PKT_TCP));
    }
}

#[test]
fn fragments_and_disabled_l4_types_hash_the_addresses_only() {
    let mut rss = Rss::default();
    rss.update(registers(FIELD_IPV4 | FIELD_IPV4_TCP, 16, true));
    assert_eq!(rss.spread(), 16);
    let (dst, dport, src, sport, ip, _) = IPV4[0];
    // UDP hashing is off: the addresses only.
    let udp = rss.classify(&ipv4_frame(src, dst, 17, sport, dport, 0));
    assert_eq!((udp.info >> 32, udp.info & 0xF), (u64::from(ip), RssType::Ipv4 as u64));
    // A fragment of a TCP segment (MF set): the addresses only.
    let frag = rss.classify(&ipv4_frame(src, dst, 6, sport, dport, 0x2000));
    assert_eq!((frag.info >> 32, frag.queue), (u64::from(ip), ip & 0xF));
}

#[test]
fn frames_without_an_enabled_hash_type_go_to_queue_0() {
    let mut rss = Rss::default();
    // RETA(0) names queue 3: an unhashed frame still goes to queue 0.
    let shifted = |o: u32| if o == reta(0) { 0x0303_0303 } else { registers(FIELD_IPV4_TCP, 4, true)(o) };
    rss.update(shifted);
    let arp = {
        let mut f = vec![0u8; 60];
        f[12..14].copy_from_slice(&[0x08, 0x06]);
        f
    };
    assert_eq!(rss.classify(&arp), Classified::default());
    let (dst, dport, src, sport, ..) = IPV4[1];
    // UDP with only TCP over IPv4 enabled, and no IPv4 field: nothing hashed.
    assert_eq!(rss.classify(&ipv4_frame(src, dst, 17, sport, dport, 0)), Classified::default());
}

#[test]
fn without_pcsd_the_hash_is_not_reported_but_still_chooses() {
    let mut rss = Rss::default();
    rss.update(registers(FIELD_IPV4 | FIELD_IPV4_UDP, 8, false));
    let (dst, dport, src, sport, ..) = IPV4[2];
    let c = rss.classify(&ipv4_frame(src, dst, 17, sport, dport, 0));
    assert_eq!(c.info >> 32, 0);
    assert_eq!(c.info & 0xF, RssType::Ipv4Udp as u64);
}

#[test]
fn rss_off_in_mrqc_is_reported() {
    let mut rss = Rss::default();
    rss.update(registers(FIELD_IPV4, 8, true));
    assert_eq!(rss.spread(), 8);
    // MRQE 0: RSS off, whatever RETA names; every frame goes to one queue.
    rss.update(|o| if o == MRQC { FIELD_IPV4 } else { registers(FIELD_IPV4, 8, true)(o) });
    assert!(!rss.enabled());
    assert_eq!(rss.spread(), 1);
}

#[test]
fn the_tables_compute_the_hash_as_defined_for_any_input() {
    // A fixed pseudo-random sequence of keys and inputs of every length up to 36 bytes.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x as u8
    };
    for _ in 0..50 {
        let key: [u8; KEY_LEN] = std::array::from_fn(|_| next());
        let t = Toeplitz::new(&key);
        for len in 0..=36 {
            let input: Vec<u8> = (0..len).map(|_| next()).collect();
            assert_eq!(t.hash(&input), toeplitz_by_bits(&key, &input), "{key:02x?} {input:02x?}");
        }
    }
}
