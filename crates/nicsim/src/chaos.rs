//! Fault injection: a device and a link partner that misbehave on purpose, reproducibly.
//!
//! A driver's inputs include everything the device writes into shared memory. nicsim can be
//! told (`nicsim fault`, [`crate::control::Request::Fault`]) to write hostile values there, to
//! stall, to reset or vanish under the driver, and to put broken frames on the wire. Every mode
//! that draws random numbers takes a seed, so a run can be replayed; every fault injected is
//! counted ([`Injected`]), and the latest are logged with their time ([`FaultEvent`]): each
//! stall, reset, removal and wire fault, and the start and end of each run of write-backs.
//!
//! What a mode may touch is what the datasheet lets a device write: descriptors of rings the
//! driver gave it and the head write-back slot it named. A hostile write never lands outside
//! the driver's memory, so a DMA fault recorded during a run is the driver's doing.

use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Faults of a port's device or wire, as asked for on the control socket.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Fault {
    /// `count` hostile write-backs, `rate` per second: RX descriptors with random status,
    /// error and length fields written anywhere in the ring (DD on descriptors the device does
    /// not own, out of order), TX head write-backs of any 32-bit value, DD on TX descriptors;
    /// on a virtio port, used elements for chains the device never finished.
    WriteBack { rate: f64, count: u64, seed: u64 },
    /// Every ring of the port stops for `ms` milliseconds, then resumes; frames arriving
    /// meanwhile wait in the packet buffer.
    Stall { ms: u64 },
    /// Surprise reset: every register back to its default mid-run, queues disabled.
    Reset,
    /// Surprise removal: BAR0 and configuration space read all-ones from now on.
    Remove,
    /// `count` of the frames the link partner sends get `what` done to them, each frame with
    /// `probability`.
    Wire { what: WireFault, probability: f64, count: u64, seed: u64 },
    /// `count` DMA accesses outside what the driver mapped for the device: random addresses,
    /// the driver's other memory (its own virtual addresses, which are IOVAs under DPDK's
    /// `--iova-mode=va`), and addresses it unmapped. Behind an IOMMU domain each is refused;
    /// none is ever performed.
    Dma { count: u64, seed: u64 },
    /// Ends the port's write-back and wire modes.
    Off,
}

/// What a wire fault does to a frame.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum WireFault {
    /// Cut below 64 bytes with FCS: the port counts it in RUC and drops it.
    Runt,
    /// Lengthened beyond 1518 bytes with FCS: ROC, dropped.
    Oversize,
    /// One byte flipped, FCS recomputed: the port cannot tell and passes it on.
    Corrupt,
    /// FCS wrong: CRCERRS, dropped.
    BadFcs,
    /// Sent twice.
    Duplicate,
    /// Sent after the frame behind it.
    Reorder,
}

impl Fault {
    /// Checks the numbers; the message says what is allowed.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            Fault::WriteBack { rate, count, .. } if !(rate.is_finite() && *rate >= 1.0 && *count >= 1) => {
                Err("a write-back fault needs a rate of at least 1 per second and a count of at least 1".into())
            }
            Fault::Stall { ms } if !(1..=60_000).contains(ms) => Err("a stall lasts 1 to 60000 ms".into()),
            Fault::Wire { probability, count, .. } if !(*probability > 0.0 && *probability <= 1.0 && *count >= 1) => {
                Err("a wire fault needs a probability above 0 and at most 1, and a count of at least 1".into())
            }
            Fault::Dma { count, .. } if !(1..=1_000_000).contains(count) => {
                Err("a DMA fault makes 1 to 1000000 accesses".into())
            }
            _ => Ok(()),
        }
    }
}

/// Faults injected into a port since start (or the last reset of the counters), by kind.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Injected {
    pub rx_write_backs: u64,
    pub head_write_backs: u64,
    pub tx_write_backs: u64,
    /// virtio used elements for chains the device never finished.
    #[serde(default)]
    pub used_write_backs: u64,
    pub stalls: u64,
    pub resets: u64,
    pub removals: u64,
    pub runts: u64,
    pub oversize: u64,
    pub corrupted: u64,
    pub bad_fcs: u64,
    pub duplicated: u64,
    pub reordered: u64,
}

impl Injected {
    /// Hostile write-backs of every kind.
    pub fn write_backs(&self) -> u64 {
        self.rx_write_backs + self.head_write_backs + self.tx_write_backs + self.used_write_backs
    }

    /// Counts one wire fault.
    fn count_wire(&mut self, what: WireFault) {
        *match what {
            WireFault::Runt => &mut self.runts,
            WireFault::Oversize => &mut self.oversize,
            WireFault::Corrupt => &mut self.corrupted,
            WireFault::BadFcs => &mut self.bad_fcs,
            WireFault::Duplicate => &mut self.duplicated,
            WireFault::Reorder => &mut self.reordered,
        } += 1;
    }
}

/// One logged fault: engine time and what happened.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct FaultEvent {
    pub at_ns: u64,
    pub what: String,
}

/// Logged faults kept per port (all are counted in [`Injected`]).
const LOG_KEPT: usize = 256;

/// A small reproducible generator (SplitMix64): the same seed gives the same faults.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// `true` with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
}

/// Hostile write-backs under way.
#[derive(Debug)]
pub struct WriteBackMode {
    rate: f64,
    count: u64,
    done: u64,
    since_ps: u64,
    pub rng: Rng,
}

impl WriteBackMode {
    /// How many write-backs are due at `now_ps`, at most `max`.
    pub fn due(&self, now_ps: u64, max: u64) -> u64 {
        let owed = (now_ps.saturating_sub(self.since_ps) as f64 / 1e12 * self.rate) as u64;
        owed.min(self.count).saturating_sub(self.done).min(max)
    }
}

/// Wire faults under way.
#[derive(Debug)]
pub struct WireMode {
    what: WireFault,
    probability: f64,
    left: u64,
    rng: Rng,
    /// A frame held back to be sent after the next one ([`WireFault::Reorder`]).
    held: Option<Vec<u8>>,
}

/// What reaches the port for one frame the link partner sent.
#[derive(Debug, PartialEq, Eq)]
pub enum Arrival {
    Frame(Vec<u8>),
    /// A frame whose FCS does not match.
    BadFcs(Vec<u8>),
}

/// The fault state of one port.
#[derive(Debug, Default)]
pub struct Chaos {
    pub write_back: Option<WriteBackMode>,
    pub wire: Option<WireMode>,
    pub injected: Injected,
    pub log: VecDeque<FaultEvent>,
}

impl Chaos {
    /// Records one fault in the log (the latest [`LOG_KEPT`] are kept).
    pub fn log(&mut self, now_ps: u64, what: String) {
        if self.log.len() == LOG_KEPT {
            self.log.pop_front();
        }
        self.log.push_back(FaultEvent { at_ns: now_ps / 1000, what });
    }

    pub fn start_write_backs(&mut self, rate: f64, count: u64, seed: u64, now_ps: u64) {
        self.write_back = Some(WriteBackMode { rate, count, done: 0, since_ps: now_ps, rng: Rng::new(seed) });
        self.log(now_ps, format!("hostile write-backs begin: {count} at {rate}/s, seed {seed}"));
    }

    /// Notes `n` write-backs done; ends the mode when all are.
    pub fn wrote_back(&mut self, n: u64, now_ps: u64) {
        let Some(m) = self.write_back.as_mut() else { return };
        m.done += n;
        if m.done >= m.count {
            self.write_back = None;
            self.log(now_ps, "hostile write-backs end".into());
        }
    }

    pub fn start_wire(&mut self, what: WireFault, probability: f64, count: u64, seed: u64, now_ps: u64) {
        self.wire = Some(WireMode { what, probability, left: count, rng: Rng::new(seed), held: None });
        self.log(now_ps, format!("wire faults begin: {count} {what:?} with probability {probability}, seed {seed}"));
    }

    /// What arrives at the port when the link partner sends `frame` (without FCS): the frame,
    /// a broken one, two, or none yet. Appends to `out`.
    pub fn arrive(&mut self, frame: &[u8], now_ps: u64, out: &mut Vec<Arrival>) {
        let Some(m) = self.wire.as_mut() else {
            out.push(Arrival::Frame(frame.to_vec()));
            return;
        };
        let held = m.held.take();
        let hit = m.left > 0 && m.rng.chance(m.probability);
        let mut f = frame.to_vec();
        if hit {
            m.left -= 1;
            let rng = &mut m.rng;
            match m.what {
                // Up to 59 bytes without FCS: a wire length below 64.
                WireFault::Runt => f.truncate(1 + rng.below(59) as usize),
                // 1515 to 2000 bytes without FCS: beyond 1518 with it, beyond any tag's allowance.
                WireFault::Oversize => f.resize(1515 + rng.below(486) as usize, 0xA5),
                WireFault::Corrupt => {
                    let at = rng.below(f.len() as u64) as usize;
                    f[at] ^= 1 + rng.below(255) as u8;
                }
                WireFault::BadFcs | WireFault::Duplicate | WireFault::Reorder => {}
            }
        }
        match (hit, m.what) {
            (true, WireFault::BadFcs) => out.push(Arrival::BadFcs(f)),
            (true, WireFault::Duplicate) => {
                out.push(Arrival::Frame(f.clone()));
                out.push(Arrival::Frame(f));
            }
            (true, WireFault::Reorder) if held.is_none() => m.held = Some(f),
            _ => out.push(Arrival::Frame(f)),
        }
        out.extend(held.map(Arrival::Frame));
        let (what, ended) = (m.what, m.left == 0 && m.held.is_none());
        if hit {
            self.injected.count_wire(what);
            self.log(now_ps, format!("wire: {what:?}"));
        }
        if ended {
            self.wire = None;
            self.log(now_ps, "wire faults end".into());
        }
    }

    /// Ends every mode; a frame held back for reordering is returned to be delivered.
    pub fn off(&mut self, now_ps: u64) -> Option<Vec<u8>> {
        self.write_back = None;
        let held = self.wire.take().and_then(|m| m.held);
        self.log(now_ps, "faults off".into());
        held
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arrivals(chaos: &mut Chaos, frames: u64) -> Vec<Arrival> {
        let mut out = Vec::new();
        for k in 0..frames {
            chaos.arrive(&[k as u8; 60], 0, &mut out);
        }
        out
    }

    #[test]
    fn the_same_seed_gives_the_same_faults() {
        let run = |seed| {
            let mut c = Chaos::default();
            c.start_wire(WireFault::Corrupt, 0.5, 1000, seed, 0);
            arrivals(&mut c, 100)
        };
        assert_eq!(run(7), run(7));
        assert_ne!(run(7), run(8));
    }

    #[test]
    fn each_wire_fault_does_what_it_says_and_is_counted() {
        let mut c = Chaos::default();
        c.start_wire(WireFault::Runt, 1.0, 3, 1, 0);
        let out = arrivals(&mut c, 5);
        let lens: Vec<usize> = out.iter().map(|a| if let Arrival::Frame(f) = a { f.len() } else { 0 }).collect();
        assert!(lens[..3].iter().all(|&l| (1..60).contains(&l)) && lens[3..] == [60, 60], "{lens:?}");
        assert_eq!(c.injected.runts, 3);
        assert!(c.wire.is_none(), "the mode ends after its count");

        c.start_wire(WireFault::Duplicate, 1.0, 2, 1, 0);
        assert_eq!(arrivals(&mut c, 3).len(), 5);
        c.start_wire(WireFault::BadFcs, 1.0, 1, 1, 0);
        assert!(matches!(arrivals(&mut c, 2)[..], [Arrival::BadFcs(_), Arrival::Frame(_)]));
        c.start_wire(WireFault::Oversize, 1.0, 1, 1, 0);
        assert!(matches!(&arrivals(&mut c, 1)[..], [Arrival::Frame(f)] if f.len() > 1514));
    }

    #[test]
    fn a_reordered_frame_arrives_after_the_next_one() {
        let mut c = Chaos::default();
        c.start_wire(WireFault::Reorder, 1.0, 1, 1, 0);
        let firsts: Vec<u8> = arrivals(&mut c, 3)
            .into_iter()
            .map(|a| match a {
                Arrival::Frame(f) => f[0],
                Arrival::BadFcs(_) => 99,
            })
            .collect();
        assert_eq!(firsts, [1, 0, 2]);
        assert_eq!(c.injected.reordered, 1);
        // Held back after the last frame the partner sends: it comes with `off`.
        c.start_wire(WireFault::Reorder, 1.0, 1, 1, 0);
        assert!(arrivals(&mut c, 1).is_empty());
        assert_eq!(c.off(0), Some(vec![0u8; 60]));
    }

    #[test]
    fn write_backs_are_paced_by_their_rate_and_end_at_their_count() {
        let mut c = Chaos::default();
        c.start_write_backs(1000.0, 5, 1, 0);
        let m = c.write_back.as_ref().unwrap();
        assert_eq!(m.due(1_000_000_000, 100), 1, "one per millisecond");
        assert_eq!(m.due(10_000_000_000, 100), 5, "never beyond the count");
        assert_eq!(m.due(10_000_000_000, 2), 2, "at most the batch");
        c.wrote_back(5, 0);
        assert!(c.write_back.is_none());
    }

    #[test]
    fn nonsense_numbers_are_refused() {
        assert!(Fault::WriteBack { rate: f64::NAN, count: 1, seed: 0 }.validate().is_err());
        assert!(Fault::Stall { ms: 0 }.validate().is_err());
        let wire = |probability| Fault::Wire { what: WireFault::Runt, probability, count: 1, seed: 0 };
        assert!(wire(1.5).validate().is_err() && wire(0.0).validate().is_err() && wire(0.5).validate().is_ok());
    }
}
