//! The libraries the project isolates, each with typed calls that work in any backend.

pub mod broken;
pub mod filter;
pub mod png;
pub mod snappy;

/// Bytes for the tests and the bench: text-like runs mixed with pseudo-random noise (snappy
/// compresses them about 2:1), the same for the same `len` and `seed`.
pub fn sample(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed;
    (0..len)
        .map(|i| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            if (x >> 60) < 10 {
                b'a' + (i % 23) as u8
            } else {
                (x >> 33) as u8
            }
        })
        .collect()
}
