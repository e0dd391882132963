//! `safenic fwd --filter PORT`: a packet filter written in C (crates/isolation's
//! csrc/filter.c) called once per burst inside an isolation domain (docs/isolation.md). Each
//! frame's first 64 bytes go into the domain's input area, its verdicts come back in the
//! output area, and the frames it drops go back to the pool. A fault in the filter costs the
//! burst (dropped whole: fail closed) and is counted; the domain is re-created for the next.

use isolation::cases::filter::{self, STRIDE};
use isolation::Domain;
use ixgbe::queues::{Batch, BufferPool};

pub struct Filter {
    domain: Domain,
    blocked_port: u16,
    /// Frames the filter dropped.
    pub filtered: u64,
    /// Bursts lost to a violation in the filter.
    pub violations: u64,
}

impl Filter {
    /// The filter in a domain of the backend the host allows (MPK with PKU, a helper process
    /// elsewhere; `SAFENIC_ISOLATION_BACKEND` chooses).
    /// For bursts of at most `burst` frames.
    pub fn new(blocked_port: u16, burst: usize) -> Result<Filter, String> {
        let domain = Domain::new(filter::config(burst)).map_err(|e| format!("--filter: {e}"))?;
        Ok(Filter { domain, blocked_port, filtered: 0, violations: 0 })
    }

    /// The line a driver prints before its summary.
    pub fn summary(&self) -> String {
        format!(
            "safenic fwd filter ({} domain): {} filtered, {} bursts lost to violations",
            self.domain.backend(),
            self.filtered,
            self.violations
        )
    }

    /// Keeps in `batch` the frames from index `first` on that the filter forwards (those
    /// before it, already filtered, stay); the others go back to `pool`.
    pub fn apply<'a, const B: usize>(&mut self, batch: &mut Batch<'a, B>, pool: &mut BufferPool<'a>, first: usize) {
        let count = batch.len().saturating_sub(first);
        if count == 0 {
            return;
        }
        let area = self.domain.input_area();
        for (b, header) in batch.iter_mut().skip(first).zip(area.chunks_exact_mut(STRIDE)) {
            let bytes: [u8; STRIDE] = b.data().read_bytes::<0, STRIDE>();
            let len = b.length.get().min(STRIDE);
            header[..len].copy_from_slice(&bytes[..len]);
            header[len..].fill(0);
        }
        let mut verdicts = [0u8; B];
        match self.domain.call_prepared(&[count as u32, self.blocked_port as u32], count * STRIDE, filter::burst) {
            Ok(reply) => {
                let n = reply.output.len().min(B);
                verdicts[..n].copy_from_slice(&reply.output[..n]);
            }
            Err(_) => self.violations += 1,
        }
        let before = batch.len();
        batch.retain(pool, |i| i < first || verdicts.get(i - first) == Some(&1));
        self.filtered += (before - batch.len()) as u64;
    }
}
