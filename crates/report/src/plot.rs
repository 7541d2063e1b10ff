//! Draws one figure as SVG with plotters: a lines figure as one line per series over its
//! min–max band, a bars figure as grouped bars with min–max whiskers, the paper's numbers in
//! black (dashed lines, markers) in the same plot, and a legend under it.
//!
//! Layout of the 900×520 picture: the title on top, the chart, then the legend in two
//! columns; plotters' own legend sits inside the plotting area, where it would cover points.

use crate::data::{FigureData, X};
use crate::format;
use crate::spec::Kind;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

pub const WIDTH: u32 = 900;
pub const HEIGHT: u32 = 520;

const FONT: &str = "sans-serif";
/// Plotters sizes are ~1.24× the CSS font size it writes: 16 is a 13 px label.
const LABEL: u32 = 16;
const DESC: u32 = 17;
/// Tableau's 10 colours: told apart on screen and in most colour blindness.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];
/// The paper's series: black and greys, so "theirs" reads apart from every colour of ours.
const PAPER: [RGBColor; 3] = [RGBColor(0, 0, 0), RGBColor(90, 90, 90), RGBColor(150, 150, 150)];
/// Bars: a category spans this many x units (integer coordinates keep plotters' category
/// labels exact, see `bars`), of which the bars fill `GROUP`.
const UNIT: i32 = 1000;
const GROUP: f64 = 0.8;

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

fn err(e: impl std::fmt::Display) -> String {
    format!("plot: {e}")
}

fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

fn paper_color(k: usize) -> RGBColor {
    PAPER[k % PAPER.len()]
}

/// The figure as an SVG document; call only when `d.has_plot()`.
pub fn svg(d: &FigureData) -> Result<String, String> {
    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let f = d.figure;
        let title = format!("{}: {}", f.label, f.title);
        let rest = root.titled(&title, (FONT, title_size(&title)).into_font().style(FontStyle::Bold)).map_err(err)?;
        let entries = legend_entries(d);
        let legend_h = (entries.len().div_ceil(2) as i32) * 22 + 8;
        let (chart, legend_area) = rest.split_vertically(rest.dim_in_pixel().1 as i32 - legend_h);
        match f.kind {
            Kind::Lines => lines(&chart, d)?,
            Kind::Bars => bars(&chart, d)?,
        }
        legend(&legend_area, &entries)?;
        root.present().map_err(err)?;
    }
    Ok(buf)
}

/// A title that fits the width: DejaVu Sans averages ~0.47 of a plotters size per character.
fn title_size(title: &str) -> u32 {
    let chars = title.chars().count().max(1) as f64;
    (860.0 / (0.47 * chars)).clamp(14.0, 24.0) as u32
}

/// The range an axis shows: the data with a margin; a linear value axis starts at zero when
/// the data are positive (a bar or a ratio cut off above zero overstates differences).
fn padded(lo: f64, hi: f64, log: bool, value_axis: bool) -> (f64, f64) {
    if log {
        let (lo, hi) = if lo == hi { (lo / 2.0, hi * 2.0) } else { (lo, hi) };
        return (lo / 1.25, hi * 1.25);
    }
    let lo = if value_axis && lo >= 0.0 { 0.0 } else { lo };
    let span = if hi > lo { hi - lo } else { hi.abs().max(1.0) };
    let lo = if value_axis && lo == 0.0 { 0.0 } else { lo - 0.05 * span };
    (lo, hi + 0.08 * span)
}

/// The lowest and highest of `values`, or None when there are none.
fn extent(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    values.fold(None, |acc, v| match acc {
        None => Some((v, v)),
        Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
    })
}

fn num(x: &X) -> f64 {
    match x {
        X::Num(v) => *v,
        X::Cat(_) => f64::NAN,
    }
}

fn lines(area: &Area, d: &FigureData) -> Result<(), String> {
    let f = d.figure;
    let ours = d.series.iter().flat_map(|s| s.points.iter());
    let theirs = d.paper.iter().flat_map(|p| p.points.iter());
    let (xlo, xhi) = extent(ours.clone().map(|p| num(&p.x)).chain(theirs.clone().map(|(x, _)| num(x)))).unwrap_or((0.0, 1.0));
    let (ylo, yhi) = extent(ours.flat_map(|p| [p.min, p.max, p.value]).chain(theirs.map(|(_, y)| *y))).unwrap_or((0.0, 1.0));
    // A log axis cannot show zero or less: such data get a linear axis rather than vanish.
    let xlog = f.x.log && xlo > 0.0;
    let ylog = f.y.log && ylo > 0.0;
    let (x0, x1) = padded(xlo, xhi, xlog, false);
    let (y0, y1) = padded(ylo, yhi, ylog, true);
    let (xl, yl) = ((x0..x1).log_scale().with_key_points(log_keys(x0, x1)), (y0..y1).log_scale().with_key_points(log_keys(y0, y1)));
    match (xlog, ylog) {
        (true, true) => lines_on(area, d, xl, yl),
        (true, false) => lines_on(area, d, xl, y0..y1),
        (false, true) => lines_on(area, d, x0..x1, yl),
        (false, false) => lines_on(area, d, x0..x1, y0..y1),
    }
}

/// Labelled values of a log axis from `lo` to `hi`: every power of ten, and 2 and 5 times
/// them when the axis spans few decades (plotters alone labels little more than the powers of
/// ten, which leaves a one-decade axis with one number).
fn log_keys(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo > 0.0 && hi > lo && hi.is_finite()) {
        return Vec::new(); // not a log axis (this is asked for both axes, used where log)
    }
    let decades = (hi / lo).log10();
    let steps: &[f64] = if decades <= 1.2 {
        &[1.0, 1.5, 2.0, 3.0, 5.0, 7.0]
    } else if decades <= 3.5 {
        &[1.0, 2.0, 5.0]
    } else {
        &[1.0]
    };
    let mut keys = Vec::new();
    let mut decade = 10f64.powf(lo.log10().floor());
    while decade <= hi {
        keys.extend(steps.iter().map(|s| s * decade).filter(|k| (lo..=hi).contains(k)));
        decade *= 10.0;
    }
    keys
}

/// The lines chart on any pair of axes (linear or log: plotters types them differently).
fn lines_on<XS, YS>(area: &Area, d: &FigureData, xs: XS, ys: YS) -> Result<(), String>
where
    XS: AsRangedCoord<Value = f64>,
    YS: AsRangedCoord<Value = f64>,
    XS::CoordDescType: ValueFormatter<f64>,
    YS::CoordDescType: ValueFormatter<f64>,
{
    let f = d.figure;
    let mut chart = ChartBuilder::on(area)
        .margin(10)
        .margin_right(28)
        .x_label_area_size(50)
        .y_label_area_size(76)
        .build_cartesian_2d(xs, ys)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(format::axis_label(&f.x.label, &f.x.unit))
        .y_desc(format::axis_label(&f.y.label, &f.y.unit))
        .x_label_formatter(&|v| format::tick(*v))
        .y_label_formatter(&|v| format::tick(*v))
        .label_style((FONT, LABEL))
        .axis_desc_style((FONT, DESC))
        .light_line_style(BLACK.mix(0.04))
        .bold_line_style(BLACK.mix(0.12))
        .draw()
        .map_err(err)?;

    for (i, s) in d.series.iter().enumerate() {
        let c = color(i);
        let pts: Vec<(f64, f64)> = s.points.iter().map(|p| (num(&p.x), p.value)).collect();
        // The band: max along the series, back along min; one point gets a whisker instead.
        if s.points.len() > 1 {
            let band: Vec<(f64, f64)> =
                s.points.iter().map(|p| (num(&p.x), p.max)).chain(s.points.iter().rev().map(|p| (num(&p.x), p.min))).collect();
            chart.draw_series(std::iter::once(Polygon::new(band, c.mix(0.18).filled()))).map_err(err)?;
        } else if let Some(p) = s.points.first() {
            let x = num(&p.x);
            chart.draw_series(std::iter::once(PathElement::new(vec![(x, p.min), (x, p.max)], c.stroke_width(2)))).map_err(err)?;
        }
        chart.draw_series(std::iter::once(PathElement::new(pts.clone(), c.stroke_width(2)))).map_err(err)?;
        chart.draw_series(pts.into_iter().map(|at| Circle::new(at, 3, c.filled()))).map_err(err)?;
    }
    let plot = chart.plotting_area();
    for (k, p) in d.paper.iter().enumerate() {
        let c = paper_color(k);
        let pts: Vec<(f64, f64)> = p.points.iter().map(|(x, y)| (num(x), *y)).collect();
        plot.draw(&DashedPathElement::new(pts.clone(), 9, 6, c.stroke_width(2))).map_err(err)?;
        for at in pts {
            marker(plot, k, at, c)?;
        }
    }
    Ok(())
}

/// Grouped bars. x runs over integers, `UNIT` per category, with one key point at each
/// category's centre: plotters formats integer axes itself and puts a label exactly there
/// (its f64 axes would put ticks at round numbers between categories).
fn bars(area: &Area, d: &FigureData) -> Result<(), String> {
    let f = d.figure;
    let cats = &d.categories;
    let n = cats.len().max(1) as i32;
    let ours = d.series.iter().flat_map(|s| s.points.iter());
    let theirs = d.paper.iter().flat_map(|p| p.points.iter().map(|(_, y)| *y));
    let (ylo, yhi) = extent(ours.flat_map(|p| [p.min, p.max, p.value]).chain(theirs)).unwrap_or((0.0, 1.0));
    // Bars grow from zero: a log value axis would have no zero, so bars are always linear.
    let (y0, y1) = padded(ylo.min(0.0), yhi, false, true);
    let keys: Vec<i32> = (0..n).map(|i| i * UNIT + UNIT / 2).collect();
    // Category names that would overlap side by side (about 7 px a character at this size)
    // are written upwards instead, in a taller label area.
    // Upright, a name takes at most MAX_UPRIGHT characters (longer ones end in "…"): the
    // label area comes out of the plot's height.
    const MAX_UPRIGHT: usize = 28;
    let longest = cats.iter().map(|c| c.chars().count()).max().unwrap_or(0);
    let room = (area.dim_in_pixel().0 as f64 - 120.0) / n as f64;
    let upright = longest as f64 * 7.0 > room;
    let label_area = if upright { longest.min(MAX_UPRIGHT) as u32 * 7 + 30 } else { 50 };
    let mut chart = ChartBuilder::on(area)
        .margin(10)
        .margin_right(28)
        .x_label_area_size(label_area)
        .y_label_area_size(76)
        .build_cartesian_2d((0..n * UNIT).with_key_points(keys), y0..y1)
        .map_err(err)?;
    // Upright names are drawn below (plotters centres its own axis labels on the tick, which
    // puts half of a turned name inside the plot).
    let category = |v: &i32| if upright { String::new() } else { cats.get((*v / UNIT) as usize).cloned().unwrap_or_default() };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_desc(format::axis_label(&f.x.label, &f.x.unit))
        .y_desc(format::axis_label(&f.y.label, &f.y.unit))
        .x_label_formatter(&category)
        .y_label_formatter(&|v| format::tick(*v))
        .label_style((FONT, LABEL))
        .axis_desc_style((FONT, DESC))
        .light_line_style(BLACK.mix(0.04))
        .bold_line_style(BLACK.mix(0.12))
        .draw()
        .map_err(err)?;

    if upright {
        let (bx, by) = area.get_base_pixel();
        let style = (FONT, LABEL).into_font().transform(FontTransform::Rotate270).color(&BLACK).pos(Pos::new(HPos::Right, VPos::Center));
        for (i, name) in cats.iter().enumerate() {
            let (px, py) = chart.backend_coord(&(i as i32 * UNIT + UNIT / 2, y0));
            let shown =
                if name.chars().count() > MAX_UPRIGHT { name.chars().take(MAX_UPRIGHT - 1).chain(['…']).collect() } else { name.clone() };
            area.draw(&Text::new(shown, (px - bx, py - by + 8), style.clone())).map_err(err)?;
        }
    }
    let slots = d.series.len().max(1) as f64;
    let slot = GROUP * UNIT as f64 / slots;
    let left = |cat: usize| cat as f64 * UNIT as f64 + (1.0 - GROUP) / 2.0 * UNIT as f64;
    // Value labels only where a bar is wide enough to carry one (~30 px).
    let slot_px = chart.plotting_area().dim_in_pixel().0 as f64 / n as f64 * GROUP / slots;
    let plot = chart.plotting_area();
    for (i, s) in d.series.iter().enumerate() {
        let c = color(i);
        for p in &s.points {
            let Some(cat) = cats.iter().position(|k| X::Cat(k.clone()) == p.x) else { continue };
            let x0 = left(cat) + i as f64 * slot;
            let (a, b) = ((x0 + 0.06 * slot) as i32, (x0 + 0.94 * slot) as i32);
            plot.draw(&Rectangle::new([(a, 0.0), (b, p.value)], c.filled())).map_err(err)?;
            let mid = (x0 + slot / 2.0) as i32;
            let cap = (slot * 0.18) as i32;
            let whisker = BLACK.mix(0.75).stroke_width(2);
            plot.draw(&PathElement::new(vec![(mid, p.min), (mid, p.max)], whisker)).map_err(err)?;
            for y in [p.min, p.max] {
                plot.draw(&PathElement::new(vec![(mid - cap, y), (mid + cap, y)], whisker)).map_err(err)?;
            }
            if slot_px >= 30.0 {
                let style = (FONT, 14).into_font().color(&BLACK).pos(Pos::new(HPos::Center, VPos::Bottom));
                plot.draw(&(EmptyElement::at((mid, p.max)) + Text::new(format::num(p.value), (0, -4), style))).map_err(err)?;
            }
        }
    }
    // The paper: a dashed line across the group at its value, a marker in the middle.
    for (k, p) in d.paper.iter().enumerate() {
        let c = paper_color(k);
        for (x, y) in &p.points {
            let Some(cat) = cats.iter().position(|k| X::Cat(k.clone()) == *x) else { continue };
            let (a, b) = (left(cat) as i32, (left(cat) + GROUP * UNIT as f64) as i32);
            plot.draw(&DashedPathElement::new(vec![(a, *y), (b, *y)], 7, 5, c.stroke_width(2))).map_err(err)?;
            marker(plot, k, (cat as i32 * UNIT + UNIT / 2, *y), c)?;
        }
    }
    Ok(())
}

/// The paper series' markers: a triangle, a cross, a ring, so two paper series differ even
/// in grey.
fn marker<CT>(area: &DrawingArea<SVGBackend<'_>, CT>, k: usize, at: CT::From, c: RGBColor) -> Result<(), String>
where
    CT: CoordTranslate,
{
    match k % 3 {
        0 => area.draw(&TriangleMarker::new(at, 8, c.filled())),
        1 => area.draw(&Cross::new(at, 6, c.stroke_width(3))),
        _ => area.draw(&Circle::new(at, 6, c.stroke_width(2))),
    }
    .map_err(err)
}

/// One line of the legend: ours (a colour) or the paper's (dashed, with its marker).
struct Entry {
    label: String,
    color: RGBColor,
    paper: Option<usize>,
    bar: bool,
}

fn legend_entries(d: &FigureData) -> Vec<Entry> {
    let bar = d.figure.kind == Kind::Bars;
    let ours = d.series.iter().enumerate().map(|(i, s)| Entry {
        label: if s.points.is_empty() { format!("{} (no rows)", s.label) } else { s.label.clone() },
        color: color(i),
        paper: None,
        bar,
    });
    let theirs = d.paper.iter().enumerate().map(|(k, p)| Entry { label: p.label.clone(), color: paper_color(k), paper: Some(k), bar });
    ours.chain(theirs).collect()
}

fn legend(area: &Area, entries: &[Entry]) -> Result<(), String> {
    let style = (FONT, LABEL).into_font().color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center));
    for (i, e) in entries.iter().enumerate() {
        let (x, y) = (86 + (i % 2) as i32 * 410, 12 + (i / 2) as i32 * 22);
        match e.paper {
            Some(k) => {
                area.draw(&DashedPathElement::new(vec![(x, y), (x + 30, y)], 7, 5, e.color.stroke_width(2))).map_err(err)?;
                marker(area, k, (x + 15, y), e.color)?;
            }
            None if e.bar => area.draw(&Rectangle::new([(x + 4, y - 7), (x + 26, y + 7)], e.color.filled())).map_err(err)?,
            None => {
                area.draw(&Rectangle::new([(x, y - 7), (x + 30, y + 7)], e.color.mix(0.18).filled())).map_err(err)?;
                area.draw(&PathElement::new(vec![(x, y), (x + 30, y)], e.color.stroke_width(2))).map_err(err)?;
                area.draw(&Circle::new((x + 15, y), 3, e.color.filled())).map_err(err)?;
            }
        }
        area.draw(&Text::new(e.label.clone(), (x + 40, y), style.clone())).map_err(err)?;
    }
    Ok(())
}
