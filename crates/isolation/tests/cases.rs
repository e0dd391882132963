//! The case studies in every backend: snappy and libpng give the same bytes called directly,
//! in an MPK domain and in a helper process; malformed PNGs and corrupt snappy streams from a
//! small fuzz corpus never harm the caller. On a host without PKU the MPK half runs in a guest
//! (`make test-mpk`).

use isolation::cases::{png as libpng, sample, snappy};
use isolation::{Backend, BackendChoice, Config, Direct, Domain};

fn backends() -> Vec<Backend> {
    let mut all = vec![Backend::Process];
    if isolation::pku::mpk_here() {
        all.push(Backend::Mpk);
    }
    all
}

fn domain(config: Config, backend: Backend) -> Domain {
    let config = config.backend(BackendChoice::Require(backend)).io_bytes(4 << 20, 4 << 20);
    Domain::new(config).unwrap_or_else(|e| panic!("a {backend} domain: {e}"))
}

#[test]
fn snappy_round_trips_alike_in_every_backend() {
    let direct =
        Direct::new(snappy::LIBRARY, &snappy::SYMBOLS).expect("libsnappy (scripts/setup installs libsnappy-dev)");
    for backend in backends() {
        let mut d = domain(snappy::config(), backend);
        for len in [0usize, 1, 256, 4096, 65536, 1 << 20] {
            let input = sample(len, len as u64);
            let mut expected = vec![0u8; 2 * len + 64];
            let (n, filled) = direct.call(&0u64, &input, &mut expected, snappy::compress);
            assert_ne!(n, snappy::FAILED);
            expected.truncate(filled);
            let compressed = d.call(&0u64, &input, snappy::compress).expect("compress");
            assert_eq!(compressed.output, &expected[..], "{backend}: compressing {len} bytes");
            let compressed = compressed.output.to_vec();
            let back = d.call(&0u64, &compressed, snappy::uncompress).expect("uncompress");
            assert_eq!(back.value, len as u64);
            assert_eq!(back.output, &input[..], "{backend}: round trip of {len} bytes");
        }
        // Corrupt streams: snappy refuses them or decodes something; the domain stays usable.
        let good = d.call(&0u64, &sample(10_000, 7), snappy::compress).expect("compress").output.to_vec();
        for (i, corrupt) in mutants(&good, 200, 11).iter().enumerate() {
            if let Err(v) = d.call(&0u64, corrupt, snappy::uncompress) {
                eprintln!("{backend}: corrupt stream {i}: {v}");
            }
        }
        assert_eq!(d.call(&0u64, &good, snappy::uncompress).expect("uncompress").value, 10_000);
    }
}

/// A PNG of `side`×`side` RGBA pixels with noise, so that its size follows its area.
fn png_image(side: u32, seed: u64) -> Vec<u8> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, side, side);
    encoder.set_color(png::ColorType::Rgba);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().expect("header");
    let pixels = sample((side * side * 4) as usize, seed);
    writer.write_image_data(&pixels).expect("pixels");
    writer.finish().expect("finish");
    out
}

#[test]
fn libpng_decodes_alike_in_every_backend() {
    let direct = Direct::new(libpng::LIBRARY, &libpng::SYMBOLS).expect("libpng16 (scripts/setup installs libpng-dev)");
    for backend in backends() {
        let mut d = domain(libpng::config(), backend);
        for side in [1u32, 37, 128, 310] {
            let file = png_image(side, side as u64);
            let mut expected = vec![0u8; (side * side * 4) as usize];
            let (decoded, filled) = direct.call(&0u64, &file, &mut expected, libpng::decode);
            assert_eq!((decoded.status, decoded.width, filled), (0, side, expected.len()));
            let reply = d.call(&0u64, &file, libpng::decode).expect("decode");
            assert_eq!(reply.value, decoded, "{backend}: {side}×{side}");
            assert_eq!(reply.output, &expected[..], "{backend}: pixels of {side}×{side}");
        }
    }
}

const CANARY: u64 = 0x5afe_5afe_5afe_5afe;

#[test]
fn malformed_pngs_never_harm_the_caller() {
    let seeds = [png_image(1, 1), png_image(16, 2), png_image(64, 3)];
    let corpus: Vec<Vec<u8>> = seeds.iter().enumerate().flat_map(|(i, s)| mutants(s, 150, 100 + i as u64)).collect();
    let canaries: Vec<[u64; 16]> = vec![[CANARY; 16]; 256];
    for backend in backends() {
        let mut d = domain(libpng::config(), backend);
        let (mut decoded, mut refused, mut violations) = (0, 0, 0);
        for file in &corpus {
            match d.call(&0u64, file, libpng::decode) {
                Ok(r) if r.value.status == 0 => decoded += 1,
                Ok(_) => refused += 1,
                Err(v) => {
                    violations += 1;
                    eprintln!("{backend}: {v}");
                }
            }
            assert!(canaries.iter().flatten().all(|&w| w == CANARY), "{backend}: a canary was overwritten");
        }
        eprintln!(
            "{backend}: {} malformed PNGs: {decoded} decoded, {refused} refused, {violations} violations",
            corpus.len()
        );
        let reply = d.call(&0u64, &seeds[2], libpng::decode).expect("a valid PNG after the corpus");
        assert_eq!((reply.value.status, reply.value.width), (0, 64));
    }
}

/// `count` deterministic corruptions of `file`: flipped bytes, truncations, and header fields
/// (PNG's IHDR size, chunk lengths) set to extreme values with the CRC left wrong or made right.
fn mutants(file: &[u8], count: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    (0..count)
        .map(|i| {
            let mut m = file.to_vec();
            match i % 4 {
                0 => {
                    for _ in 0..1 + next() % 8 {
                        let at = (next() as usize) % m.len().max(1);
                        if let Some(b) = m.get_mut(at) {
                            *b ^= 1 << (next() % 8);
                        }
                    }
                }
                1 => m.truncate((next() as usize) % m.len().max(1)),
                2 if m.len() >= 33 => {
                    // IHDR's width or height (bytes 16..24), then its CRC fixed.
                    let field = 16 + 4 * (next() as usize % 2);
                    let value = [0u32, 1, 0x7fff_ffff, 0xffff_ffff, 1 << 20][next() as usize % 5];
                    m[field..field + 4].copy_from_slice(&value.to_be_bytes());
                    let crc = crc32(&m[12..29]);
                    m[29..33].copy_from_slice(&crc.to_be_bytes());
                }
                _ => {
                    let at = (next() as usize) % m.len().saturating_sub(4).max(1);
                    let value = [0u32, 0x7fff_ffff, 0xffff_fff0][next() as usize % 3];
                    if at + 4 <= m.len() {
                        m[at..at + 4].copy_from_slice(&value.to_be_bytes());
                    }
                }
            }
            m
        })
        .collect()
}

fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xffff_ffffu32;
    for &b in bytes {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0xedb8_8320 } else { crc >> 1 };
        }
    }
    !crc
}
