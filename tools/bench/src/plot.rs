//! The SVG plot: bandwidth and latency against message size, with the baselines as
//! horizontal lines. SVG only: text is left to the viewer, so no font library is needed.

use std::path::Path;

use anyhow::{Result, anyhow};
use plotters::prelude::*;

use super::report::{Report, size_text};

const OPS: [(&str, RGBColor); 3] = [
    ("write", RGBColor(0x1f, 0x77, 0xb4)),
    ("read", RGBColor(0xd6, 0x27, 0x28)),
    ("send", RGBColor(0x2c, 0xa0, 0x2c)),
];
const BASELINE: RGBColor = RGBColor(0x55, 0x55, 0x55);
const KERNEL: RGBColor = RGBColor(0xff, 0x7f, 0x0e);

fn err(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow!("drawing the plot: {e}")
}

fn x_label(x: &f64) -> String {
    if (x - x.round()).abs() < 1e-9 && *x >= 0.0 && *x < 40.0 {
        size_text(1usize << (x.round() as u32))
    } else {
        String::new()
    }
}

/// Draws `report`'s bandwidth and latency points into an SVG file at `path`. Returns
/// `false` (and draws nothing) when there is nothing to plot.
pub(crate) fn draw(report: &Report, path: &Path) -> Result<bool> {
    if report.bandwidth.is_empty() && report.latency.is_empty() {
        return Ok(false);
    }
    let sizes = report
        .bandwidth
        .iter()
        .map(|p| p.size)
        .chain(report.latency.iter().map(|p| p.size));
    let (lo, hi) = sizes.fold((usize::MAX, 0), |(lo, hi), s| (lo.min(s), hi.max(s)));
    let x_range = (lo as f64).log2() - 0.5..(hi as f64).log2() + 0.5;

    let root = SVGBackend::new(path, (1400, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (left, right) = root.split_horizontally(700);

    // Bandwidth.
    let raw = report
        .comparisons
        .iter()
        .find(|c| c.id == "write_bw_vs_xsk")
        .map(|c| c.baseline * 8.0 / 1e9);
    let top = report
        .bandwidth
        .iter()
        .map(|p| p.gbit_per_sec)
        .chain(raw)
        .fold(0.0f64, f64::max)
        .max(0.001)
        * 1.15;
    let mut chart = ChartBuilder::on(&left)
        .caption(
            format!(
                "Bandwidth, 1 QP, tx depth {} (path MTU {})",
                report.config.tx_depth, report.config.path_mtu
            ),
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(x_range.clone(), 0.0..top)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("message size")
        .y_desc("payload Gbit/s")
        .light_line_style(TRANSPARENT)
        .x_labels(12)
        .x_label_formatter(&x_label)
        .draw()
        .map_err(err)?;
    for (op, color) in OPS {
        let points: Vec<(f64, f64)> = report
            .bandwidth
            .iter()
            .filter(|p| p.op == op)
            .map(|p| ((p.size as f64).log2(), p.gbit_per_sec))
            .collect();
        if points.is_empty() {
            continue;
        }
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(op.to_uppercase())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        chart
            .draw_series(
                points
                    .into_iter()
                    .map(|p| Circle::new(p, 3, color.filled())),
            )
            .map_err(err)?;
    }
    if let Some(raw) = raw {
        chart
            .draw_series(LineSeries::new(
                vec![(x_range.start, raw), (x_range.end, raw)],
                BASELINE.stroke_width(1),
            ))
            .map_err(err)?
            .label("raw AF_XDP (frame bytes, MTU-sized frames)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BASELINE));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;

    // Latency (median), log scale.
    let xsk = report
        .baselines
        .xsk_pingpong
        .as_ref()
        .map(|p| p.median_us / 2.0);
    let udp = report
        .baselines
        .udp_pingpong
        .as_ref()
        .map(|p| p.median_us / 2.0);
    let values: Vec<f64> = report
        .latency
        .iter()
        .map(|p| p.median_us)
        .chain(xsk)
        .chain(udp)
        .filter(|v| *v > 0.0)
        .collect();
    let ymin = values.iter().copied().fold(f64::INFINITY, f64::min);
    let ymax = values.iter().copied().fold(0.0, f64::max);
    let (ymin, ymax) = if values.is_empty() {
        (1.0, 10.0)
    } else {
        (ymin / 1.5, ymax * 1.5)
    };
    let mut chart = ChartBuilder::on(&right)
        .caption(
            "Latency, median (WRITE/SEND: RTT/2; READ: RTT)",
            ("sans-serif", 20),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(x_range.clone(), (ymin..ymax).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("message size")
        .y_desc("µs")
        .light_line_style(TRANSPARENT)
        .x_labels(12)
        .x_label_formatter(&x_label)
        .y_label_formatter(&|v| {
            if *v >= 10.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.1}")
            }
        })
        .draw()
        .map_err(err)?;
    for (op, color) in OPS {
        let test = format!("{op}_lat");
        let points: Vec<(f64, f64)> = report
            .latency
            .iter()
            .filter(|p| p.test == test)
            .map(|p| ((p.size as f64).log2(), p.median_us))
            .collect();
        if points.is_empty() {
            continue;
        }
        chart
            .draw_series(LineSeries::new(points.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(op.to_uppercase())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        chart
            .draw_series(
                points
                    .into_iter()
                    .map(|p| Circle::new(p, 3, color.filled())),
            )
            .map_err(err)?;
    }
    for (value, name, color) in [
        (xsk, "raw AF_XDP ping-pong RTT/2", BASELINE),
        (udp, "kernel UDP ping-pong RTT/2", KERNEL),
    ] {
        if let Some(v) = value {
            chart
                .draw_series(LineSeries::new(
                    vec![(x_range.start, v), (x_range.end, v)],
                    color.stroke_width(1),
                ))
                .map_err(err)?
                .label(name)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(true)
}
