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
        names.contains(&"Ir").then(|| Events {
            ir: get("Ir"),
            i1mr: get("I1mr"),
            d1mr: get("D1mr"),
            d1mw: get("D1mw"),
            ilmr: get("ILmr"),
            dlmr: get("DLmr"),
            dlmw: get("DLmw"),
            bcm: get("Bcm"),
            bim: get("Bim"),
        })
    }

    /// Estimated cycles ([`ESTIMATE_FORMULA`]).
    pub fn estimated_cycles(&self) -> u64 {
        self.ir
            + L1_MISS_CYCLES * (self.i1mr + self.d1mr + self.d1mw)
            + LL_MISS_CYCLES * (self.ilmr + self.dlmr + self.dlmw)
            + MISPREDICT_CYCLES * (self.bcm + self.bim)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
