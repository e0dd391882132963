//! l2fwd's own options, after EAL's and `--`, as DPDK's `examples/l2fwd` takes them.

/// What the application was asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Ports to forward between (`-p`, hexadecimal).
    pub portmask: u32,
    /// Receive queues (ports) per lcore (`-q`, 1 to 16).
    pub queues_per_lcore: usize,
    /// Seconds between statistics screens (`-T`, 0 for none).
    pub stats_period: u64,
    /// Rewrite the MAC addresses (`--mac-updating`, the default, or `--no-mac-updating`).
    pub mac_updating: bool,
    /// Receive every frame, whatever its destination (`-P`).
    pub promiscuous: bool,
    /// Which port forwards to which (`--portmap "(0,1)(2,3)"`); by default ports pair in order.
    pub portmap: Option<Vec<(u16, u16)>>,
    /// The crate that rewrites the Ethernet header (`--headers smoltcp|etherparse`, not an
    /// option of DPDK's l2fwd: the bench compares the two).
    pub headers: Headers,
}

/// A maintained crate that reads and writes the Ethernet header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Headers {
    /// `smoltcp::wire::EthernetFrame`: setters on the frame's bytes, in place.
    Smoltcp,
    /// `etherparse::Ethernet2Header`: parsed into a struct, changed, written back.
    Etherparse,
}

const USAGE: &str =
    "-p PORTMASK [-P] [-q NQ] [-T PERIOD] [--[no-]mac-updating] [--portmap (A,B)(C,D)] [--headers smoltcp|etherparse]";

/// Parses the arguments after EAL's (the program's name first), or says what is wrong.
pub fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        portmask: 0,
        queues_per_lcore: 1,
        stats_period: 10,
        mac_updating: true,
        promiscuous: false,
        portmap: None,
        headers: Headers::Smoltcp,
    };
    let mut it = args.iter().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().cloned().ok_or(format!("{name} needs a value: {USAGE}"));
        match arg.as_str() {
            "-p" => {
                let v = value("-p")?;
                let hex = v.trim_start_matches("0x").trim_start_matches("0X");
                o.portmask = u32::from_str_radix(hex, 16)
                    .ok()
                    .filter(|&m| m != 0)
                    .ok_or(format!("invalid portmask `{v}`: give a hexadecimal mask of ports, e.g. -p 0x3"))?;
            }
            "-q" => {
                let v = value("-q")?;
                o.queues_per_lcore = v
                    .parse()
                    .ok()
                    .filter(|q| (1..=16).contains(q))
                    .ok_or(format!("invalid queue number `{v}`: give 1 to 16 ports per lcore"))?;
            }
            "-T" => {
                let v = value("-T")?;
                o.stats_period = v
                    .parse()
                    .ok()
                    .filter(|&t| t <= 86400)
                    .ok_or(format!("invalid timer period `{v}`: give 0 to 86400 seconds"))?;
            }
            "-P" => o.promiscuous = true,
            "--headers" => {
                let v = value("--headers")?;
                o.headers = match v.as_str() {
                    "smoltcp" => Headers::Smoltcp,
                    "etherparse" => Headers::Etherparse,
                    _ => return Err(format!("unknown --headers `{v}`: give smoltcp or etherparse")),
                };
            }
            "--portmap" => o.portmap = Some(parse_portmap(&value("--portmap")?)?),
            other if other.starts_with("--portmap=") => o.portmap = Some(parse_portmap(&other["--portmap=".len()..])?),
            "--mac-updating" => o.mac_updating = true,
            "--no-mac-updating" => o.mac_updating = false,
            other => return Err(format!("unknown option `{other}`: {USAGE}")),
        }
    }
    if o.portmask == 0 {
        return Err(format!("no ports to forward between: {USAGE}"));
    }
    Ok(o)
}

/// The destination of each enabled port: ports are paired in order (the first with the second,
/// the third with the fourth…); an odd last one sends back out of itself.
pub fn pairs(enabled: &[u16]) -> Vec<(u16, u16)> {
    let mut pairs = Vec::new();
    for two in enabled.chunks(2) {
        match *two {
            [a, b] => pairs.extend([(a, b), (b, a)]),
            [a] => pairs.push((a, a)),
            _ => {}
        }
    }
    pairs
}

/// `(A,B)(C,D)…`: each pair forwards both ways; ports in decimal or `0x` hexadecimal.
fn parse_portmap(text: &str) -> Result<Vec<(u16, u16)>, String> {
    let bad = || format!("invalid --portmap `{text}`: give pairs of ports, e.g. (0,1)(2,3)");
    let port = |s: &str| {
        let s = s.trim();
        let n = match s.strip_prefix("0x") {
            Some(hex) => u16::from_str_radix(hex, 16).ok(),
            None => s.parse().ok(),
        };
        n.filter(|&p| p < 32)
    };
    let mut pairs = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let inner = rest.strip_prefix('(').and_then(|r| r.split_once(')')).ok_or_else(bad)?;
        let (a, b) = inner.0.split_once(',').ok_or_else(bad)?;
        pairs.push((port(a).ok_or_else(bad)?, port(b).ok_or_else(bad)?));
        rest = inner.1.trim_start();
    }
    if pairs.is_empty() {
        return Err(bad());
    }
    Ok(pairs)
}

/// The routes of `--portmap` (each pair both ways), checked as l2fwd checks them: every port
/// enabled in the portmask and probed, none in two pairs. Ports of the mask in no pair are not
/// used.
pub fn mapped(pairs: &[(u16, u16)], portmask: u32, probed: &[u16]) -> Result<Vec<(u16, u16)>, String> {
    let mut used = 0u32;
    let mut routes = Vec::new();
    for &(a, b) in pairs {
        for p in [a, b] {
            if portmask & (1 << p) == 0 {
                return Err(format!("--portmap: port {p} is not enabled in the portmask: add it to -p"));
            }
            if !probed.contains(&p) {
                return Err(format!("--portmap: port {p} does not exist: DPDK probed {probed:?}"));
            }
        }
        let mask = (1u32 << a) | (1 << b);
        if used & mask != 0 {
            return Err(format!("--portmap: a port of ({a},{b}) is in another pair too: give each port one pair"));
        }
        used |= mask;
        routes.push((a, b));
        if a != b {
            routes.push((b, a));
        }
    }
    routes.sort_unstable();
    Ok(routes)
}
