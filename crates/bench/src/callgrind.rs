//! What callgrind counted in the forwarding loop, and a cycle estimate from it: this machine
//! has no cycle counters, and valgrind's counts do not depend on how busy the host is.

/// Weights of the cycle estimate, in cycles per event: KCachegrind's default "cycle
/// estimation" (an L1 miss about 10 cycles, a last-level miss about 100, a mispredicted branch
/// about 10). A last-level miss is an L1 miss too, so it costs 110 in all.
pub const L1_MISS_CYCLES: u64 = 10;
pub const LL_MISS_CYCLES: u64 = 100;
pub const MISPREDICT_CYCLES: u64 = 10;

/// The formula, for reports.
pub const ESTIMATE_FORMULA: &str = "Ir + 10 × (I1mr + D1mr + D1mw) + 100 × (ILmr + DLmr + DLmw) + 10 × (Bcm + Bim)";

/// The event totals of a callgrind output file (run with `--cache-sim=yes --branch-sim=yes`;
/// without them the cache and branch events read as 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Events {
    /// Instructions executed.
    pub ir: u64,
    /// First-level instruction, data-read and data-write misses.
    pub i1mr: u64,
    pub d1mr: u64,
    pub d1mw: u64,
    /// Last-level instruction, data-read and data-write misses.
    pub ilmr: u64,
    pub dlmr: u64,
    pub dlmw: u64,
    /// Mispredicted conditional and indirect branches.
    pub bcm: u64,
    pub bim: u64,
}

impl Events {
    /// The `events:` line and the last `totals:` (or `summary:`) line of a callgrind output
    /// file; `None` if either is missing or they disagree in length.
    pub fn parse(text: &str) -> Option<Events> {
        let names: Vec<&str> = text.lines().find_map(|l| l.strip_prefix("events:"))?.split_whitespace().collect();
        let totals =
            text.lines().rev().find_map(|l| l.strip_prefix("totals:").or_else(|| l.strip_prefix("summary:")))?;
        let values: Vec<u64> = totals.split_whitespace().map(str::parse).collect::<Result<_, _>>().ok()?;
        if values.is_empty() || values.len() > names.len() {
            return None;
        }
        // Trailing zero events may be left off a totals line.
        let get = |name: &str| names.iter().position(|n| *n == name).and_then(|i| values.get(i)).copied().unwrap_or(0);
        names.contains(&"Ir").then(|| Events::by_name(get))
    }

    /// The events of the instructions whose addresses lie in `ranges` (`[start, end)`), calls
    /// made from them included with their callees: what `--toggle-collect` on those functions
    /// would count, for code that has no symbol (a JIT's). Needs a profile written with
    /// `--dump-instr=yes`; `None` if it has no instruction positions.
    pub fn in_ranges(text: &str, ranges: &[(u64, u64)]) -> Option<Events> {
        let positions: Vec<&str> =
            text.lines().find_map(|l| l.strip_prefix("positions:"))?.split_whitespace().collect();
        if positions.first() != Some(&"instr") {
            return None;
        }
        let names: Vec<&str> = text.lines().find_map(|l| l.strip_prefix("events:"))?.split_whitespace().collect();
        let mut sums = vec![0u64; names.len()];
        let mut address = 0u64;
        for line in text.lines() {
            let first = line.as_bytes().first().copied().unwrap_or(b' ');
            if !(first.is_ascii_digit() || first == b'+' || first == b'-' || first == b'*') {
                continue;
            }
            let mut words = line.split_whitespace();
            address = match words.next()? {
                "*" => address,
                w if w.starts_with('+') => address.wrapping_add(w[1..].parse().ok()?),
                w if w.starts_with('-') => address.wrapping_sub(w[1..].parse().ok()?),
                w => u64::from_str_radix(w.trim_start_matches("0x"), 16).ok()?,
            };
            // The other positions (the source line), then the costs.
            let costs = words.skip(positions.len() - 1);
            if ranges.iter().any(|&(start, end)| (start..end).contains(&address)) {
                for (sum, cost) in sums.iter_mut().zip(costs) {
                    *sum += cost.parse::<u64>().ok()?;
                }
            }
        }
        let get = |name: &str| names.iter().position(|n| *n == name).map_or(0, |i| sums[i]);
        Some(Events::by_name(get))
    }

    /// The events `get` reads by their callgrind names.
    pub fn by_name(get: impl Fn(&str) -> u64) -> Events {
        Events {
            ir: get("Ir"),
            i1mr: get("I1mr"),
            d1mr: get("D1mr"),
            d1mw: get("D1mw"),
            ilmr: get("ILmr"),
            dlmr: get("DLmr"),
            dlmw: get("DLmw"),
            bcm: get("Bcm"),
            bim: get("Bim"),
        }
    }

    /// Estimated cycles ([`ESTIMATE_FORMULA`]).
    pub fn estimated_cycles(&self) -> u64 {
        self.ir
            + L1_MISS_CYCLES * (self.i1mr + self.d1mr + self.d1mw)
            + LL_MISS_CYCLES * (self.ilmr + self.dlmr + self.dlmw)
            + MISPREDICT_CYCLES * (self.bcm + self.bim)
    }
}

/// The address ranges (`[start, end)`) of the functions of a perf map (`/tmp/perf-<pid>.map`:
/// lines of `START SIZE NAME`, in hex) whose name contains `needle`.
pub fn perf_map_ranges(map: &str, needle: &str) -> Vec<(u64, u64)> {
    map.lines()
        .filter_map(|l| {
            let mut words = l.splitn(3, ' ');
            let start = u64::from_str_radix(words.next()?, 16).ok()?;
            let size = u64::from_str_radix(words.next()?, 16).ok()?;
            words.next()?.contains(needle).then_some((start, start + size))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_in_ranges_follow_compressed_positions_and_count_calls_inclusively() {
        // Two instructions in the range, a call from it (its inclusive cost on the `*` line),
        // and one instruction outside; positions absolute, relative and repeated.
        let text = "positions: instr line\nevents: Ir Dr\nfn=(1) 0x1000\n0x1000 0 5 1\n+4 0 5\n\
                    cfn=(2) 0x2000\ncalls=5 0x2000 0\n* 0 100 7\nfn=(2)\n0x2000 0 90\n-8 0 3\n";
        let e = Events::in_ranges(text, &[(0x1000, 0x1008)]).unwrap();
        assert_eq!((e.ir, e.i1mr), (5 + 5 + 100, 0));
        let outside = Events::in_ranges(text, &[(0x2000, 0x2001)]).unwrap();
        assert_eq!(outside.ir, 90);
        assert_eq!(Events::in_ranges(text, &[(0x1ff8, 0x1ff9)]).unwrap().ir, 3);
        assert!(Events::in_ranges("positions: line\nevents: Ir\n", &[]).is_none());
    }

    #[test]
    fn perf_map_ranges_find_a_method_by_name() {
        let map = "5C2A1700 93 void [safenic-csharp] Safenic.Driver.Fwd::forward_restricted(class Agent)[Optimized]\n\
                   5C2A1870 B6 instance uint32 [safenic-csharp] Safenic.Driver.Agent::Run(!!1&)[Optimized]\n";
        assert_eq!(perf_map_ranges(map, "::forward_restricted("), [(0x5C2A1700, 0x5C2A1793)]);
        assert!(perf_map_ranges(map, "::forward_const(").is_empty());
    }

    #[test]
    fn events_are_read_by_name_from_the_last_totals_line() {
        let text = "version: 1\nevents: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw Bc Bcm Bi Bim\nfn=foo\n\
                    1 10\nsummary: 1 2 3 4 5 6 7 8 9 10 11 12 13\ntotals: 1000 200 100 3 20 10 1 2 0 50 5 4 1\n";
        let e = Events::parse(text).unwrap();
        assert_eq!(e, Events { ir: 1000, i1mr: 3, d1mr: 20, d1mw: 10, ilmr: 1, dlmr: 2, dlmw: 0, bcm: 5, bim: 1 });
        assert_eq!(e.estimated_cycles(), 1000 + 10 * 33 + 100 * 3 + 10 * 6);
    }

    #[test]
    fn instructions_alone_estimate_as_themselves_and_garbage_is_refused() {
        let e = Events::parse("events: Ir\ntotals: 1234\n").unwrap();
        assert_eq!((e.ir, e.estimated_cycles()), (1234, 1234));
        assert_eq!(Events::parse("events: Ir\n"), None);
        assert_eq!(Events::parse("totals: 12\n"), None);
        assert_eq!(Events::parse("events: Ir\ntotals: 12 x\n"), None);
        assert_eq!(Events::parse("events: Ir\ntotals: 1 2\n"), None);
    }
}
