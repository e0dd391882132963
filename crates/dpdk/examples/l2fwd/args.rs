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
}

const USAGE: &str = "-p PORTMASK [-P] [-q NQ] [-T PERIOD] [--[no-]mac-updating]";

/// Parses the arguments after EAL's (the program's name first), or says what is wrong.
pub fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options { portmask: 0, queues_per_lcore: 1, stats_period: 10, mac_updating: true, promiscuous: false };
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
