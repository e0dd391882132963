//! The bench's figures, as SVG and PNG: latency against offered load per driver (in the style
//! of the paper's Figure 1), and instructions and estimated cycles per packet per driver and
//! model. Text in the PNGs is drawn with a font compiled into this program, so that no system
//! font is needed.

use bench::results::{Results, Row};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;
use std::sync::Once;

/// One colour per driver, in the order the results list them.
const COLOURS: [RGBColor; 6] = [
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x8c, 0x56, 0x4b),
];

const SIZE: (u32, u32) = (1200, 420);

/// Draws every figure into `dir` (`latency.*`, `instructions.*`); returns how many files.
pub fn draw(r: &Results, dir: &Path) -> Result<usize, String> {
    static FONT: Once = Once::new();
    FONT.call_once(|| {
        // The embedded font is a valid TrueType font; a failure here would only lose the text.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, epaint_default_fonts::UBUNTU_LIGHT);
    });
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let tall = (SIZE.0, SIZE.1 * 2);
    let latency = dir.join("latency");
    let instructions = dir.join("instructions");
    let failed = |what: &Path, e: String| format!("drawing {}: {e}", what.display());
    latency_figure(SVGBackend::new(&latency.with_extension("svg"), SIZE).into_drawing_area(), r)
        .map_err(|e| failed(&latency, e))?;
    png_of(&latency.with_extension("png"), SIZE, |root| latency_figure(root, r)).map_err(|e| failed(&latency, e))?;
    instructions_figure(SVGBackend::new(&instructions.with_extension("svg"), tall).into_drawing_area(), r)
        .map_err(|e| failed(&instructions, e))?;
    png_of(&instructions.with_extension("png"), tall, |root| instructions_figure(root, r))
        .map_err(|e| failed(&instructions, e))?;
    Ok(4)
}

/// Draws with `draw` into an RGB buffer of `size` and writes it to `path` as a PNG.
fn png_of(
    path: &Path,
    size: (u32, u32),
    draw: impl FnOnce(DrawingArea<BitMapBackend<'_>, Shift>) -> Result<(), String>,
) -> Result<(), String> {
    let mut pixels = vec![0u8; size.0 as usize * size.1 as usize * 3];
    draw(BitMapBackend::with_buffer(&mut pixels, size).into_drawing_area())?;
    let file = std::fs::File::create(path).map_err(|e| e.to_string())?;
    let mut encoder = png::Encoder::new(std::io::BufWriter::new(file), size.0, size.1);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().map_err(|e| e.to_string())?;
    writer.write_image_data(&pixels).map_err(|e| e.to_string())
}

/// The drivers and models in the order the results list them.
fn names(r: &Results) -> (Vec<String>, Vec<String>) {
    let (mut drivers, mut models) = (Vec::new(), Vec::new());
    for row in &r.rows {
        if !drivers.contains(&row.driver) {
            drivers.push(row.driver.clone());
        }
        if !models.contains(&row.model) {
            models.push(row.model.clone());
        }
    }
    (drivers, models)
}

fn rows_at_64<'r>(r: &'r Results, model: &'r str) -> impl Iterator<Item = &'r Row> {
    r.rows.iter().filter(move |row| row.frame_size == 64 && row.model == model)
}

/// Per model, p99 latency (µs, log scale) against the offered load (Mpps), one line per driver.
fn latency_figure<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, r: &Results) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    let (drivers, models) = names(r);
    // Axes fit the data: on a host whose stalls cap the zero-loss rate far below the line
    // rate, a line-rate axis would squeeze every curve against zero.
    let steps = || r.rows.iter().filter(|row| row.frame_size == 64).flat_map(|row| &row.latency);
    let fastest = steps().map(|s| s.rate_mpps.median).fold(0.01, f64::max);
    let worst = steps().map(|s| s.p99_ns.median / 1e3).fold(1.0, f64::max);
    let best = steps().map(|s| s.p99_ns.median / 1e3).fold(worst, f64::min);
    for (panel, model) in root.split_evenly((1, models.len())).iter().zip(&models) {
        let mut chart = ChartBuilder::on(panel)
            .caption(format!("{model}: p99 latency, 64-byte frames"), ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(55)
            .build_cartesian_2d(0.0..fastest * 1.1, (best / 2.0..worst * 2.0).log_scale())
            .map_err(e)?;
        chart.configure_mesh().x_desc("offered load, Mpps").y_desc("µs").light_line_style(WHITE).draw().map_err(e)?;
        for row in rows_at_64(r, model) {
            let colour = COLOURS[drivers.iter().position(|d| *d == row.driver).unwrap_or(0) % COLOURS.len()];
            let points: Vec<(f64, f64)> =
                row.latency.iter().map(|s| (s.rate_mpps.median, s.p99_ns.median / 1e3)).collect();
            chart
                .draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))
                .map_err(e)?
                .label(row.driver.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2)));
            chart.draw_series(points.into_iter().map(|p| Circle::new(p, 3, colour.filled()))).map_err(e)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .label_font(("sans-serif", 14))
            .draw()
            .map_err(e)?;
    }
    root.present().map_err(e)
}

/// One figure of a row.
type Metric = fn(&Row) -> f64;

/// Per model, a bar per driver: instructions per packet (top) and estimated cycles (bottom).
fn instructions_figure<DB: DrawingBackend>(root: DrawingArea<DB, Shift>, r: &Results) -> Result<(), String> {
    let e = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(e)?;
    let (drivers, models) = names(r);
    let metrics: [(&str, Metric); 2] = [
        ("instructions per packet", |row| row.instructions_per_packet.as_ref().map_or(0.0, |s| s.median)),
        ("estimated cycles per packet", |row| row.estimated_cycles_per_packet.as_ref().map_or(0.0, |s| s.median)),
    ];
    let panels = root.split_evenly((2, models.len()));
    for (k, (what, value)) in metrics.iter().enumerate() {
        let top = r.rows.iter().map(value).fold(1.0, f64::max) * 1.15;
        for (m, model) in models.iter().enumerate() {
            let mut chart = ChartBuilder::on(&panels[k * models.len() + m])
                .caption(format!("{model}: {what}"), ("sans-serif", 18))
                .margin(10)
                .x_label_area_size(30)
                .y_label_area_size(45)
                .build_cartesian_2d(-0.5..drivers.len() as f64 - 0.5, 0.0..top)
                .map_err(e)?;
            // Each bar is labelled with its driver and value, so the x axis needs no labels.
            chart.configure_mesh().disable_x_mesh().x_labels(0).light_line_style(WHITE).draw().map_err(e)?;
            for row in rows_at_64(r, model) {
                let i = drivers.iter().position(|d| *d == row.driver).unwrap_or(0);
                let (colour, x, v) = (COLOURS[i % COLOURS.len()], i as f64, value(row));
                chart
                    .draw_series([Rectangle::new([(x - 0.35, 0.0), (x + 0.35, v)], colour.mix(0.8).filled())])
                    .map_err(e)?;
                let label = format!("{} {v:.1}", row.driver);
                chart.draw_series([Text::new(label, (x - 0.35, v + top * 0.07), ("sans-serif", 14))]).map_err(e)?;
            }
        }
    }
    root.present().map_err(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bench::results::{LatencyStep, Spread};

    fn row(driver: &str, model: &str, instructions: f64) -> Row {
        let one = |v: f64| Spread::of(&[v]);
        Row {
            driver: driver.into(),
            model: model.into(),
            frame_size: 64,
            line_rate_mpps: 29.76,
            throughput_mpps: one(20.0),
            limited_by: vec!["driver".into()],
            forwarded_at_line_rate_mpps: one(25.0),
            latency: (1..=10)
                .map(|k| LatencyStep {
                    percent: k * 10,
                    rate_mpps: one(2.0 * f64::from(k)),
                    p50_ns: one(1000.0),
                    p99_ns: one(2000.0 + 100.0 * f64::from(k)),
                    p999_ns: one(5000.0),
                    max_ns: one(9000.0),
                    outside_host_stalls: None,
                })
                .collect(),
            instructions_per_packet: Some(one(instructions)),
            estimated_cycles_per_packet: Some(one(instructions * 1.2)),
            saturated: Some(true),
            searches: vec![],
            ndr_mpps: None,
            pdr_mpps: None,
            ndr_limited_by: vec![],
            pdr_limited_by: vec![],
            ndr_set_aside: vec![],
            pdr_set_aside: vec![],
        }
    }

    #[test]
    fn every_figure_is_written_as_svg_and_png_with_its_drivers_named() {
        let rows =
            ["restricted", "const"].iter().flat_map(|m| [row("rust", m, 41.4), row("c-clang", m, 42.3)]).collect();
        let r = Results {
            profile: "quick".into(),
            isa: "x86-64-v3".into(),
            host_cpu: "cpu".into(),
            repetitions: 1,
            trial_seconds: 0.1,
            resolution: 0.1,
            loss_tolerance: 0.0,
            frame_sizes: vec![64],
            callgrind_seconds: 1.0,
            cycle_estimate: String::new(),
            nicsim_ceiling_mpps: Spread::of(&[30.0]),
            host_stalls: Default::default(),
            rows,
            ratios: vec![],
        };
        let dir = std::env::temp_dir().join(format!("safenic-figures-{}", std::process::id()));
        assert_eq!(draw(&r, &dir).unwrap(), 4);
        for name in ["latency", "instructions"] {
            let svg = std::fs::read_to_string(dir.join(format!("{name}.svg"))).unwrap();
            assert!(svg.contains("rust") && svg.contains("c-clang") && svg.contains("restricted"), "{name}.svg");
            let png = std::fs::read(dir.join(format!("{name}.png"))).unwrap();
            assert!(png.starts_with(b"\x89PNG") && png.len() > 10_000, "{name}.png: {} bytes", png.len());
        }
        let bars = std::fs::read_to_string(dir.join("instructions.svg")).unwrap();
        assert!(bars.contains("41.4") && bars.contains("42.3"), "the bars carry their values");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
