//! What RSS does with the generator's flows [DS 7.1.2.8]: the queue each flow of nicsim's
//! generator reaches under the redirection table the drivers program (entry i names queue
//! i mod N), by the Toeplitz hash computed bit by bit as its definition reads, not by the
//! per-byte tables nicsim's device model uses.

/// The Toeplitz hash, bit by bit as its definition reads [DS 7.1.2.8.2] (nicsim's reference
/// for its own per-byte tables).
pub use nicsim::port::toeplitz_by_bits as toeplitz;

/// The hash input of flow `flow` (below 65 536) of nicsim's generator for stream `stream`:
/// UDP from 10.<stream>.x.y (x.y the flow), port 1024 + flow, to 10.255.<stream>.1, port 20051.
pub fn generated_flow(stream: u8, flow: u32) -> [u8; 12] {
    let [_, _, x, y] = flow.to_be_bytes();
    let [p0, p1] = (1024 + (flow % 60000) as u16).to_be_bytes();
    let [d0, d1] = nicsim::wire::NICSIM_UDP_PORT.to_be_bytes();
    [10, stream, x, y, 10, 255, stream, 1, p0, p1, d0, d1]
}

/// The RX queue flow `flow` of stream `stream` reaches with `key` and `queues` queues.
pub fn queue_of(key: &[u8], stream: u8, flow: u32, queues: usize) -> usize {
    (toeplitz(key, &generated_flow(stream, flow)) & 0x7F) as usize % queues
}

/// Frames per queue when each of `flows` flows of `stream` sends `frames_each`.
pub fn per_queue(key: &[u8], stream: u8, flows: u32, queues: usize, frames_each: u64) -> Vec<u64> {
    let mut counts = vec![0u64; queues];
    for flow in 0..flows {
        counts[queue_of(key, stream, flow, queues)] += frames_each;
    }
    counts
}

/// How unevenly `flows` flows spread over `queues` queues: the busiest queue's share over an
/// even share (1.0 is perfectly even).
pub fn imbalance(key: &[u8], stream: u8, flows: u32, queues: usize) -> f64 {
    let counts = per_queue(key, stream, flows, queues, 1);
    let busiest = counts.iter().copied().max().unwrap_or(0) as f64;
    busiest * queues as f64 / f64::from(flows)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::queues::KEY;

    #[test]
    fn the_hash_matches_the_verification_suite() {
        // 66.9.149.187:2794 -> 161.142.100.80:1766, the suite's first line.
        let input = [66, 9, 149, 187, 161, 142, 100, 80, 0x0a, 0xea, 0x06, 0xe6];
        assert_eq!(toeplitz(&KEY, &input), 0x51cc_c178);
        assert_eq!(toeplitz(&KEY, &input[..8]), 0x323e_8fc2);
    }

    #[test]
    fn flows_are_spread_and_counted_once() {
        let counts = per_queue(&KEY, 0, 1024, 16, 3);
        assert_eq!(counts.iter().sum::<u64>(), 3 * 1024);
        assert!(imbalance(&KEY, 0, 1024, 16) >= 1.0);
        assert_eq!(imbalance(&KEY, 0, 64, 1), 1.0);
    }
}
