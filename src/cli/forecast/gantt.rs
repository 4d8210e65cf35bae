//! The forecast as a Gantt chart (`forecast -o svg`, SPEC 4.7), drawn with plotters' SVG
//! backend: one row per node (in the order of the text timeline), time across in UTC, each
//! node's expected hold as a bar and its late extension (p90) as a pale one; the budgets'
//! maintenance windows shaded green and their blackouts grey over every row; now, the expected
//! and the late completion as vertical lines; nodes that never start, or cannot be foreseen
//! without a basis, say so in their row.

use crate::gates::{EdgeKind, GateEdge};
use crate::planner::forecast::{Forecast, NodeForecast, NodeState};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use plotters::coord::Shift;
use plotters::coord::ranged1d::SegmentValue;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Why the chart could not be drawn (plotters' drawing error).
#[derive(Debug, thiserror::Error)]
#[error("drawing the Gantt chart: {0}")]
pub struct GanttError(String);

fn failed(e: impl std::fmt::Display) -> GanttError {
    GanttError(e.to_string())
}

const WIDTH: u32 = 1400;
/// Rows up to this many are 20 px high; more share this many pixels (at least 4 px each).
const TALL_ROWS: usize = 60;
const ROWS_PX: usize = 1200;

const EXPECTED: RGBColor = RGBColor(31, 119, 180);
const WINDOW: RGBColor = RGBColor(214, 240, 214);
const BLACKOUT: RGBColor = RGBColor(150, 150, 150);
const NOW: RGBColor = RGBColor(214, 39, 40);
const NEVER: RGBColor = RGBColor(180, 30, 30);
const LATE_LINE: RGBColor = RGBColor(90, 90, 90);
const LATE_ALPHA: f64 = 0.3;
const BLACKOUT_ALPHA: f64 = 0.45;
/// The legend's line under the chart.
const LEGEND_PX: usize = 30;

type Row = SegmentValue<i32>;

fn secs(t: Timestamp) -> i64 {
    t.as_second()
}

/// Tick steps of the time axis, in hours; the first that gives at most [`TICKS`] ticks is
/// taken. Ticks fall on whole hours (UTC), a step of days on midnights, a week on Mondays.
const STEPS: [i64; 11] = [1, 2, 3, 6, 12, 24, 48, 72, 168, 336, 672];
const TICKS: i64 = 14;

/// The ticks of the time axis over `[from, to]` (Unix seconds), and whether they are days.
fn ticks(from: i64, to: i64) -> (Vec<i64>, bool) {
    let hours = (to - from) / 3600 + 1;
    let longest = STEPS[STEPS.len() - 1];
    let step = STEPS.into_iter().find(|s| hours / s <= TICKS).unwrap_or(longest * (hours / TICKS / longest + 1));
    // The Unix epoch was a Thursday: weeks are counted from the Monday after it.
    let offset = if step % 168 == 0 { 4 * 86_400 } else { 0 };
    let step_s = step * 3600;
    let first = ((from - offset).div_euclid(step_s) + 1) * step_s + offset;
    let ticks = (0..).map(|k| first + k * step_s).take_while(|t| *t <= to).collect();
    (ticks, step >= 24)
}

fn show(t: i64, days: bool) -> String {
    let t = Timestamp::from_second(t).unwrap_or(Timestamp::UNIX_EPOCH);
    t.strftime(if days { "%a %b %d" } else { "%a %H:%M" }).to_string()
}

/// Where a budget's windows (or blackouts) are on, from `from` to the end of what the edges
/// cover (`until`): from its state at the forecast's now and its edges (`on`/`off` kinds).
fn spans(
    edges: &[GateEdge],
    budget: &str,
    on_now: bool,
    kinds: (EdgeKind, EdgeKind),
    from: i64,
    until: i64,
) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    let mut since = on_now.then_some(from);
    for e in edges.iter().filter(|e| e.budget == budget) {
        if e.kind == kinds.0 {
            since.get_or_insert(secs(e.at));
        } else if e.kind == kinds.1 {
            out.push((since.take().unwrap_or(from), secs(e.at)));
        }
    }
    out.extend(since.map(|s| (s, until)));
    out
}

/// The instants the chart spans, padded: now, every start and release of both timelines and
/// the end of the timeline the edges cover.
fn range(f: &Forecast) -> (i64, i64) {
    let times = f.nodes.iter().flat_map(|n| [n.start, n.release, n.late_start, n.late_release]).flatten();
    let times: Vec<i64> = times.chain([f.computed_at, f.edges_until]).map(secs).collect();
    let from = times.iter().copied().min().unwrap_or_default();
    let to = times.iter().copied().max().unwrap_or_default().max(from + 3600);
    let pad = (to - from) / 50;
    (from - pad, to + pad)
}

/// What a row without a whole bar says, and from when.
fn note(n: &NodeForecast, now: i64) -> Option<(String, i64)> {
    match (n.state, n.start, n.release, &n.never) {
        (NodeState::Done, ..) => Some((" done".to_owned(), n.release.map_or(now, secs))),
        (_, Some(start), None, _) => Some((" starts; its release is not foreseen (no basis)".to_owned(), secs(start))),
        (_, None, _, Some(why)) => Some((format!(" never: {why}"), now)),
        (_, None, _, None) => Some((" waits for a release (no basis)".to_owned(), now)),
        (_, Some(_), Some(_), _) => None,
    }
}

/// The chart's title: the maintenance, its pace and its completion.
fn title(f: &Forecast) -> String {
    let day = |t: Timestamp| t.strftime("%a %Y-%m-%d %H:%MZ").to_string();
    let completion = match (f.completion_time, f.late_completion_time, &f.never) {
        (_, _, Some(never)) => format!("never: {} nodes cannot start within a year ({})", never.nodes, never.reason),
        (Some(done), Some(late), _) if late != done => format!("done {} (late {})", day(done), day(late)),
        (Some(done), _, _) => format!("done {}", day(done)),
        (None, _, _) => "completion not foreseen (no basis)".to_owned(),
    };
    let pace = f.nodes_at_once.map_or_else(|| "every node at once".to_owned(), |n| format!("{n} at a time"));
    format!("NodeMaintenance {}, {pace}: {completion}", f.maintenance)
}

/// The legend, one line under the chart: each colour and what it means, then the basis.
fn legend(area: &DrawingArea<SVGBackend<'_>, Shift>, f: &Forecast) -> Result<(), GanttError> {
    let font = ("sans-serif", 12).into_font().color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center));
    let keys = [
        (EXPECTED.to_rgba(), "expected (median)"),
        (EXPECTED.mix(LATE_ALPHA), "late (p90)"),
        (WINDOW.to_rgba(), "maintenance window"),
        (BLACKOUT.mix(BLACKOUT_ALPHA), "blackout"),
    ];
    let mut x = 20;
    for (color, label) in keys {
        area.draw(&Rectangle::new([(x, 8), (x + 16, 20)], color.filled())).map_err(failed)?;
        area.draw(&Text::new(label, (x + 22, 14), font.clone())).map_err(failed)?;
        x += 22 + 7 * i32::try_from(label.len()).unwrap_or(0) + 24;
    }
    let basis = format!("times in UTC; basis: {}; health and alert gates assumed open", f.basis);
    area.draw(&Text::new(basis, (x, 14), font)).map_err(failed)?;
    Ok(())
}

/// Draws `f` as an SVG Gantt chart; returns the SVG document.
///
/// # Errors
/// [`GanttError`] when plotters fails to draw (it writes into a string, so only on a bug).
pub fn render_svg(f: &Forecast) -> Result<String, GanttError> {
    let rows = f.nodes.len().max(1);
    let row_px = if rows <= TALL_ROWS { 20 } else { (ROWS_PX / rows).max(4) };
    let height = u32::try_from(130 + LEGEND_PX + row_px * rows).unwrap_or(u32::MAX);
    let (from, to) = range(f);
    let (ticks, days) = ticks(from, to);
    let row = |i: usize| i32::try_from(rows - 1 - i).unwrap_or(0);
    let names: Vec<&str> = f.nodes.iter().map(|n| n.node.as_str()).collect();
    let label_width = u32::try_from(names.iter().map(|n| n.len()).max().unwrap_or(4) * 9 + 24).unwrap_or(200);
    let stride = 14usize.div_ceil(row_px).max(1);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(failed)?;
        let (top, bottom) = root.split_vertically(height - u32::try_from(LEGEND_PX).unwrap_or(0));
        let mut chart = ChartBuilder::on(&top)
            .caption(title(f), ("sans-serif", 18))
            .margin(14)
            .x_label_area_size(30)
            .y_label_area_size(label_width)
            .build_cartesian_2d(
                (from..to).with_key_points(ticks),
                (0..i32::try_from(rows).unwrap_or(i32::MAX)).into_segmented(),
            )
            .map_err(failed)?;
        let x_label = |x: &i64| show(*x, days);
        let y_label = |y: &Row| match y {
            SegmentValue::CenterOf(r) => usize::try_from(*r)
                .ok()
                .and_then(|r| rows.checked_sub(r + 1))
                .filter(|i| i % stride == 0)
                .and_then(|i| names.get(i))
                .map_or_else(String::new, |n| (*n).to_owned()),
            _ => String::new(),
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .x_label_formatter(&x_label)
            .y_labels(rows)
            .y_label_formatter(&y_label)
            .set_tick_mark_size(LabelAreaPosition::Left, 0)
            .light_line_style(WHITE)
            .bold_line_style(BLACK.mix(0.12))
            .label_style(("sans-serif", 12))
            .draw()
            .map_err(failed)?;

        let band = |(a, b): (i64, i64), color: RGBAColor| {
            Rectangle::new([(a, SegmentValue::Exact(0)), (b, SegmentValue::Last)], color.filled())
        };
        let windows = f.budgets.iter().filter(|b| b.window_open.is_some()).flat_map(|b| {
            let kinds = (EdgeKind::WindowOpens, EdgeKind::WindowCloses);
            spans(&f.edges, &b.budget, b.window_open == Some(true), kinds, from, secs(f.edges_until))
        });
        chart.draw_series(windows.map(|s| band(s, WINDOW.to_rgba()))).map_err(failed)?;
        let blackouts = f.budgets.iter().flat_map(|b| {
            let kinds = (EdgeKind::BlackoutStarts, EdgeKind::BlackoutEnds);
            spans(&f.edges, &b.budget, b.blackout, kinds, from, secs(f.edges_until))
        });
        chart.draw_series(blackouts.map(|s| band(s, BLACKOUT.mix(BLACKOUT_ALPHA)))).map_err(failed)?;

        let margin = u32::try_from(row_px / 5).unwrap_or(0);
        let bar = |i: usize, a: Timestamp, b: Timestamp, color: RGBAColor| {
            let mut r = Rectangle::new(
                [(secs(a), SegmentValue::Exact(row(i))), (secs(b), SegmentValue::Exact(row(i) + 1))],
                color.filled(),
            );
            r.set_margin(margin, margin, 0, 0);
            r
        };
        // The late timeline behind the expected one: where they differ, the pale bar shows.
        let late = f
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| Some(bar(i, n.late_start?, n.late_release?, EXPECTED.mix(LATE_ALPHA))));
        chart.draw_series(late).map_err(failed)?;
        let expected =
            f.nodes.iter().enumerate().filter_map(|(i, n)| Some(bar(i, n.start?, n.release?, EXPECTED.to_rgba())));
        chart.draw_series(expected).map_err(failed)?;
        // A node that starts without a foreseen release: a mark where it starts.
        let mark = (to - from) / 200;
        let open = f.nodes.iter().enumerate().filter_map(|(i, n)| {
            let start = n.start.filter(|_| n.release.is_none())?;
            Some(bar(i, start, start.checked_add(SignedDuration::from_secs(mark)).ok()?, EXPECTED.to_rgba()))
        });
        chart.draw_series(open).map_err(failed)?;
        let now = secs(f.computed_at);
        let notes = f.nodes.iter().enumerate().filter_map(|(i, n)| {
            let (text, x) = note(n, now)?;
            let color = if n.never.is_some() { NEVER } else { BLACK };
            let style = ("sans-serif", 12).into_font().color(&color).pos(Pos::new(HPos::Left, VPos::Center));
            Some(Text::new(text, (x.max(from) + mark, SegmentValue::CenterOf(row(i))), style))
        });
        chart.draw_series(notes).map_err(failed)?;

        let line = |at: Timestamp, color: RGBColor, label: &str| {
            let x = secs(at);
            let ends = [(x, SegmentValue::Exact(0)), (x, SegmentValue::Last)];
            let path = DashedPathElement::new(ends, 6, 4, color.stroke_width(2));
            // Beside the line, on the side with room.
            let (side, label) = if x > from + (to - from) / 2 {
                (HPos::Right, format!("{label} "))
            } else {
                (HPos::Left, format!(" {label}"))
            };
            let style = ("sans-serif", 12).into_font().color(&color).pos(Pos::new(side, VPos::Top));
            (path, Text::new(label, (x, SegmentValue::Last), style))
        };
        let mut lines = vec![line(f.computed_at, NOW, "now")];
        lines.extend(f.completion_time.map(|t| line(t, BLACK, "expected")));
        let late = f.late_completion_time.filter(|t| Some(*t) != f.completion_time);
        lines.extend(late.map(|t| line(t, LATE_LINE, "late")));
        for (path, text) in lines {
            chart.draw_series([path]).map_err(failed)?;
            chart.draw_series([text]).map_err(failed)?;
        }
        legend(&bottom, f)?;
        root.present().map_err(failed)?;
    }
    Ok(svg)
}
