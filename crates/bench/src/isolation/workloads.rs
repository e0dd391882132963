//! What the isolation bench calls: the empty call, buffers of three sizes, snappy at the sizes
//! of SDRaD-FFI's study and libpng decoding at its image sizes.

use isolation::cases::{broken, png as libpng, sample, snappy};
use isolation::{Config, Io, Library};

pub struct Workload {
    pub name: String,
    pub c_library: Library,
    pub symbols: &'static [&'static str],
    pub function: fn(&u64, &mut Io<'_>) -> u64,
    pub input: Vec<u8>,
    /// The domains read the input where the caller placed it once, in the domain's input area
    /// (`Domain::input_area`, no copy per call); otherwise each call copies it in (`Domain::call`).
    pub in_place: bool,
}

impl Workload {
    pub fn config(&self) -> Config {
        Config::new(self.c_library, self.symbols)
    }
}

/// Returns at once: the boundary's own cost.
fn empty(_: &u64, _: &mut Io<'_>) -> u64 {
    0
}

/// The library sums the input; the function copies it to the output: a buffer each way.
fn echo(_: &u64, io: &mut Io<'_>) -> u64 {
    let sum = broken::sum(&0, io);
    let n = io.input().len().min(io.output().len());
    for i in 0..n {
        let b = io.input()[i];
        io.output()[i] = b;
    }
    io.set_output_len(n);
    sum
}

fn decode(args: &u64, io: &mut Io<'_>) -> u64 {
    let d = libpng::decode(args, io);
    (d.status as u64) << 32 | d.width as u64
}

pub fn all() -> Vec<Workload> {
    let mut all = Vec::new();
    let broken_lib = |name: &str, function: fn(&u64, &mut Io<'_>) -> u64, input: Vec<u8>| Workload {
        name: name.to_string(),
        c_library: Library::broken(),
        symbols: &broken::SYMBOLS,
        function,
        input,
        in_place: false,
    };
    all.push(broken_lib("empty call", empty, Vec::new()));
    for bytes in [64usize, 1024, 64 * 1024] {
        all.push(broken_lib(&format!("buffer in and out, {}", size(bytes)), echo, sample(bytes, 1)));
    }
    for bytes in [256usize, 4096, 64 * 1024, 1 << 20] {
        let input = sample(bytes, 2);
        all.push(Workload {
            name: format!("snappy compress, {}", size(bytes)),
            c_library: snappy::LIBRARY,
            symbols: &snappy::SYMBOLS,
            function: snappy::compress,
            input: input.clone(),
            in_place: true,
        });
        all.push(Workload {
            name: format!("snappy uncompress, {}", size(bytes)),
            c_library: snappy::LIBRARY,
            symbols: &snappy::SYMBOLS,
            function: snappy::uncompress,
            input: compressed(&input),
            in_place: true,
        });
    }
    // Noise, so that each file's size follows its area: about 5.5 KB, 64 KB, 380 KB, 895 KB.
    for side in [37u32, 128, 310, 475] {
        let file = png_file(side);
        all.push(Workload {
            name: format!("libpng decode, {side}×{side} ({})", size(file.len())),
            c_library: libpng::LIBRARY,
            symbols: &libpng::SYMBOLS,
            function: decode,
            input: file,
            in_place: true,
        });
    }
    all
}

fn size(bytes: usize) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1024 && b % 1024 == 0 => format!("{} KiB", b >> 10),
        b if b >= 1000 => format!("{:.1} KB", b as f64 / 1000.0),
        b => format!("{b} B"),
    }
}

fn compressed(input: &[u8]) -> Vec<u8> {
    let direct =
        isolation::Direct::new(snappy::LIBRARY, &snappy::SYMBOLS).expect("libsnappy (scripts/setup installs it)");
    let mut out = vec![0u8; input.len() * 2 + 64];
    let (_, n) = direct.call(&0u64, input, &mut out, snappy::compress);
    out.truncate(n);
    out
}

fn png_file(side: u32) -> Vec<u8> {
    let mut out = Vec::new();
    let mut encoder = png::Encoder::new(&mut out, side, side);
    encoder.set_color(png::ColorType::Rgba);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().expect("a PNG header into memory");
    let pixels: Vec<u8> = sample((side * side * 4) as usize, side as u64).iter().map(|b| b.wrapping_mul(151)).collect();
    writer.write_image_data(&pixels).expect("pixels into memory");
    writer.finish().expect("a PNG into memory");
    out
}
