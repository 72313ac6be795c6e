//! The report: a measurement's statistics ([`Stats`]), the rows of the table (names, labels and units as
//! `docs/performance.md` quotes them), and the table and notes as `gpu-bench` prints them.

use std::time::Duration;

/// One measurement: seconds per sample.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Stats {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub samples: usize,
}

impl Stats {
    pub fn of(mut samples: Vec<f64>) -> Self {
        assert!(!samples.is_empty(), "a measurement needs samples");
        samples.sort_by(f64::total_cmp);
        let n = samples.len();
        let median = if n % 2 == 1 { samples[n / 2] } else { (samples[n / 2 - 1] + samples[n / 2]) / 2.0 };
        Stats { median, min: samples[0], max: samples[n - 1], samples: n }
    }
}

/// One row of the report.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Row {
    pub name: String,
    pub what: String,
    pub unit: &'static str,
    pub ours: Stats,
    pub baseline: Option<Stats>,
    pub baseline_what: String,
    /// ours / baseline (medians), where a baseline exists.
    pub ratio: Option<f64>,
    pub goal: String,
    pub note: String,
}

/// Seconds of each sample.
pub fn seconds(samples: impl IntoIterator<Item = Duration>) -> Vec<f64> {
    samples.into_iter().map(|d| d.as_secs_f64()).collect()
}

/// A row of the report: `ours` against `baseline` (its statistics and what it is), if any, and the goal.
pub fn row(
    name: &str,
    what: &str,
    unit: &'static str,
    ours: Stats,
    baseline: Option<(Stats, &str)>,
    goal: &str,
) -> Row {
    let ratio = baseline.as_ref().map(|(b, _)| ours.median / b.median);
    Row {
        name: name.to_owned(),
        what: what.to_owned(),
        unit,
        baseline_what: baseline.as_ref().map(|(_, w)| w.to_string()).unwrap_or_default(),
        baseline: baseline.map(|(b, _)| b),
        ours,
        ratio,
        goal: goal.to_owned(),
        note: String::new(),
    }
}

fn scaled(value: f64, unit: &str) -> f64 {
    match unit {
        "µs" => value * 1e6,
        "ms" => value * 1e3,
        _ => value,
    }
}

fn format_stats(stats: &Stats, unit: &str) -> String {
    format!("{:.2} [{:.2}, {:.2}]", scaled(stats.median, unit), scaled(stats.min, unit), scaled(stats.max, unit))
}

/// Prints the table of `rows`, then a note for each row with a baseline or a note.
pub fn print_table(rows: &[Row]) {
    println!();
    println!("| benchmark | measured | unit | ours: median [min, max] | baseline: median [min, max] | ratio | goal |");
    println!("|---|---|---|---|---|---|---|");
    for row in rows {
        let baseline = row.baseline.as_ref().map_or("—".to_owned(), |b| format_stats(b, row.unit));
        let ratio = row.ratio.map_or("—".to_owned(), |r| format!("{r:.2}×"));
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            row.name,
            row.what,
            row.unit,
            format_stats(&row.ours, row.unit),
            baseline,
            ratio,
            row.goal
        );
    }
    for row in rows.iter().filter(|r| !r.baseline_what.is_empty() || !r.note.is_empty()) {
        let parts: Vec<String> = [
            (!row.baseline_what.is_empty()).then(|| format!("baseline = {}", row.baseline_what)),
            (!row.note.is_empty()).then(|| row.note.clone()),
        ]
        .into_iter()
        .flatten()
        .collect();
        println!("- {} ({}): {}", row.name, row.what, parts.join("; "));
    }
}
