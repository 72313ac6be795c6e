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

/// The results of one run as Markdown: `heading` (the machine, the commit, the date and the command, once), the table
/// of `rows`, then a note for each row with a baseline or a note. `gpu-bench` prints it, and `cargo xtask bench
/// --write-docs` puts it in `docs/performance.md` as it is.
pub fn markdown(heading: &str, rows: &[Row]) -> String {
    let mut text = format!("{heading}\n\n");
    text.push_str(
        "| benchmark | measured | unit | ours: median [min, max] | baseline: median [min, max] | ratio | goal |\n",
    );
    text.push_str("|---|---|---|---|---|---|---|\n");
    for row in rows {
        let baseline = row.baseline.as_ref().map_or("—".to_owned(), |b| format_stats(b, row.unit));
        let ratio = row.ratio.map_or("—".to_owned(), |r| format!("{r:.2}×"));
        text.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            row.name,
            row.what,
            row.unit,
            format_stats(&row.ours, row.unit),
            baseline,
            ratio,
            row.goal
        ));
    }
    let noted: Vec<&Row> = rows.iter().filter(|r| !r.baseline_what.is_empty() || !r.note.is_empty()).collect();
    if !noted.is_empty() {
        text.push('\n');
    }
    for row in noted {
        let parts: Vec<String> = [
            (!row.baseline_what.is_empty()).then(|| format!("baseline = {}", row.baseline_what)),
            (!row.note.is_empty()).then(|| row.note.clone()),
        ]
        .into_iter()
        .flatten()
        .collect();
        text.push_str(&format!("- {} ({}): {}\n", row.name, row.what, parts.join("; ")));
    }
    text
}

/// The UTC date of `time` as `YYYY-MM-DD` (the civil calendar from days since 1970, as `date -u +%F` gives it).
pub fn utc_date(time: std::time::SystemTime) -> String {
    let days = time.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() / 86_400) as i64;
    // Howard Hinnant's `civil_from_days`: eras of 400 years from 0000-03-01.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z - era * 146_097;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 { month_index + 3 } else { month_index - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_the_civil_calendars() {
        let at = |seconds: u64| utc_date(std::time::UNIX_EPOCH + std::time::Duration::from_secs(seconds));
        assert_eq!(at(0), "1970-01-01");
        assert_eq!(at(951_782_400), "2000-02-29");
        assert_eq!(at(1_798_675_200), "2026-12-31");
        assert_eq!(at(1_798_761_599 + 1), "2027-01-01");
    }

    #[test]
    fn the_markdown_has_the_heading_once_then_the_table_and_notes() {
        let stats = Stats::of(vec![2e-6, 1e-6, 3e-6]);
        let mut with_note = row("b", "thing", "µs", stats.clone(), None, "none");
        with_note.note = "a note".into();
        let rows = [row("a", "thing", "µs", stats.clone(), Some((stats, "bare")), "≤ 2×"), with_note];
        assert_eq!(
            markdown("On a GPU.", &rows),
            "On a GPU.\n\n\
             | benchmark | measured | unit | ours: median [min, max] | baseline: median [min, max] | ratio | goal |\n\
             |---|---|---|---|---|---|---|\n\
             | a | thing | µs | 2.00 [1.00, 3.00] | 2.00 [1.00, 3.00] | 1.00× | ≤ 2× |\n\
             | b | thing | µs | 2.00 [1.00, 3.00] | — | — | none |\n\n\
             - a (thing): baseline = bare\n\
             - b (thing): a note\n"
        );
    }
}
