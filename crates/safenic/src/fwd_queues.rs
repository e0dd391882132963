//! Several queue pairs over several cores: which queue pairs a model sets up
//! (`--queues`, spread by RSS [DS 7.1.2.8]), which cores serve them (`--cores`), and the
//! threads that do, each with its own queue pairs and its own [`Meter`].
//!
//! A queue pair is both directions of one RSS queue: RX queue `q` of the first port to a TX
//! queue of the second, and RX queue `q` of the second to a TX queue of the first. RSS keeps
//! a flow on one queue, so each thread forwards its flows in order while the threads share
//! nothing but the devices' registers. The queues are `Send` and not `Sync`
//! (`ixgbe::queues`): handed to one thread, they are that thread's alone.

use crate::fwd::Meter;
use crate::fwd_options::Options;
use ixgbe::{DriverError, RssQueues, RSS_QUEUES};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// What `--queues` and `--cores` ask for.
#[derive(Debug, Clone)]
pub struct QueuePlan {
    pub queues: RssQueues,
    /// The CPU of each forwarding thread; `None`: one thread, the program's own, where
    /// `--cpu` put it (or anywhere).
    pub cores: Option<Vec<usize>>,
}

impl QueuePlan {
    /// Checks `--queues`, `--cores` and what they combine with; one line naming the fix.
    pub fn of(o: &Options) -> Result<QueuePlan, String> {
        let queues = RssQueues::new(o.queues).ok_or_else(|| {
            format!("--queues {}: give 1 to {RSS_QUEUES} queue pairs (RSS spreads over 16)", o.queues)
        })?;
        let cores = match &o.cores {
            None => None,
            Some(_) if o.cpu.is_some() => return Err("give --cpu or --cores, not both".into()),
            Some(list) => {
                if list.len() > queues.get() {
                    return Err(format!(
                        "--cores lists {} cores for {} queue pairs: give at most as many cores as --queues",
                        list.len(),
                        queues.get()
                    ));
                }
                let online = platform::sched::online_cpus();
                if let Some(c) = list.iter().find(|c| !online.contains(c)) {
                    return Err(format!("--cores: CPU {c} does not exist here (online: {online:?})"));
                }
                if (1..list.len()).any(|i| list[..i].contains(&list[i])) {
                    return Err("--cores: a CPU is listed twice: give each core once".into());
                }
                Some(list.clone())
            }
        };
        if queues.get() > 1 && o.filter.is_some() {
            return Err("--filter runs with one queue pair: leave out --queues".into());
        }
        if queues.get() * o.outputs > ixgbe::regs::MAX_QUEUES {
            return Err(format!(
                "--queues {} with --outputs {} needs {} TX queues per port; a port has {}: give fewer",
                queues.get(),
                o.outputs,
                queues.get() * o.outputs,
                ixgbe::regs::MAX_QUEUES
            ));
        }
        Ok(QueuePlan { queues, cores })
    }

    /// One queue pair on the program's own thread: the models as they were before RSS.
    pub fn single(&self) -> bool {
        self.queues.get() == 1 && self.cores.as_ref().is_none_or(|c| c.len() <= 1)
    }
}

/// What the threads of one run share: a stop for all (a device gone, a ring stuck, found by
/// one thread) and each thread's counts, for the progress line the first thread prints.
pub struct Shared {
    stop: AtomicBool,
    counts: Vec<[AtomicU64; 2]>,
}

impl Shared {
    fn new(threads: usize) -> Self {
        Shared { stop: AtomicBool::new(false), counts: (0..threads).map(|_| Default::default()).collect() }
    }

    /// Whether a thread asked every thread to stop.
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    pub fn stop_all(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Thread `thread`'s counts so far; every thread's added together.
    pub fn publish(&self, thread: usize, counts: [u64; 2]) -> [u64; 2] {
        if let Some(slot) = self.counts.get(thread) {
            slot[0].store(counts[0], Ordering::Relaxed);
            slot[1].store(counts[1], Ordering::Relaxed);
        }
        self.counts
            .iter()
            .fold([0, 0], |t, c| [t[0] + c[0].load(Ordering::Relaxed), t[1] + c[1].load(Ordering::Relaxed)])
    }
}

/// Runs `serve` over the queue pairs `pairs`: on the program's own thread if the plan is
/// [`QueuePlan::single`], else on one thread per core, pinned there, each with an even share
/// of the pairs and a meter of its own. Returns the packets forwarded in each direction; a
/// thread's device error or ring restart is passed on to `meter`.
pub fn serve_on_cores<P: Send>(
    plan: &QueuePlan,
    pairs: &mut [P],
    meter: &mut Meter<'_>,
    serve: impl Fn(&mut [P], &mut Meter<'_>) -> [u64; 2] + Sync,
) -> Result<[u64; 2], DriverError> {
    let Some(cores) = plan.cores.as_ref().filter(|_| !plan.single()) else {
        return Ok(serve(pairs, meter));
    };
    let shared = &Shared::new(cores.len());
    let shares = split_evenly(pairs, cores.len());
    let outcomes = std::thread::scope(|s| {
        let threads: Vec<_> = shares
            .into_iter()
            .zip(cores)
            .enumerate()
            .map(|(i, (share, &cpu))| {
                let mut m = meter.for_thread(i, shared);
                let serve = &serve;
                s.spawn(move || {
                    if let Err(e) = platform::sched::pin_current_thread(cpu) {
                        shared.stop_all();
                        return Err(DriverError::Invalid(format!("pinning a forwarding thread to CPU {cpu}: {e}")));
                    }
                    let counts = serve(share, &mut m);
                    Ok((counts, m))
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().unwrap_or_else(|_| Err(DriverError::Invalid(thread_panicked()))))
            .collect::<Vec<_>>()
    });
    let mut total = [0u64; 2];
    for outcome in outcomes {
        let (counts, m) = outcome?;
        total[0] += counts[0];
        total[1] += counts[1];
        meter.absorb(m);
    }
    Ok(total)
}

fn thread_panicked() -> String {
    "a forwarding thread panicked (a bug: please report it)".to_string()
}

/// `items` cut into `n` consecutive shares whose sizes differ by at most one.
fn split_evenly<P>(mut items: &mut [P], n: usize) -> Vec<&mut [P]> {
    let (each, more) = (items.len() / n, items.len() % n);
    (0..n)
        .map(|i| {
            let (share, rest) = std::mem::take(&mut items).split_at_mut(each + usize::from(i < more));
            items = rest;
            share
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_differ_by_at_most_one_and_cover_every_pair_once() {
        for (n, cores, sizes) in [(16, 2, vec![8, 8]), (5, 2, vec![3, 2]), (4, 4, vec![1, 1, 1, 1]), (3, 1, vec![3])] {
            let mut items: Vec<usize> = (0..n).collect();
            let shares = split_evenly(&mut items, cores);
            assert_eq!(shares.iter().map(|s| s.len()).collect::<Vec<_>>(), sizes);
            let all: Vec<usize> = shares.into_iter().flat_map(|s| s.iter().copied()).collect();
            assert_eq!(all, (0..n).collect::<Vec<_>>());
        }
    }
}
