//! `capdeck windows`: check change windows offline and list their next openings, so an SRE can
//! try an annotation before writing it (docs/WINDOWS.md).

use std::fmt::Write as _;
use std::process::ExitCode;

use jiff::Timestamp;

use crate::api::change_window::{ChangeWindows, WindowState};
use crate::cli::{WindowsArgs, WindowsFormat};

pub fn run(args: &WindowsArgs) -> anyhow::Result<ExitCode> {
    let windows = ChangeWindows::parse(&args.windows.join(" "))
        .map_err(|error| anyhow::anyhow!("these change windows cannot be used: {error} (see docs/WINDOWS.md)"))?;
    // Whole seconds: the table shows the instant it judged at.
    let now = args.at.map_or_else(|| Timestamp::from_second(Timestamp::now().as_second()), Ok)?;
    let text = match args.output {
        WindowsFormat::Table => table(&windows, now, usize::from(args.next)),
        WindowsFormat::Json => crate::output::json(&document(&windows, now, usize::from(args.next))),
    };
    crate::output::print(&text)?;
    Ok(ExitCode::SUCCESS)
}

fn state_text(state: WindowState, now: Timestamp) -> String {
    let until = |at: Timestamp| exact_length(at.as_second() - now.as_second());
    match state {
        WindowState::Open { closes: Some(closes) } => format!("open; closes in {} ({closes})", until(closes)),
        WindowState::Open { closes: None } => "open; never closes (every hour of the week)".to_string(),
        WindowState::Closed { opens } => format!("closed; opens in {} ({opens})", until(opens)),
    }
}

fn table(windows: &ChangeWindows, now: Timestamp, next: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "WINDOWS  {}", windows.text());
    let _ = writeln!(out, "AT       {now}");
    let _ = writeln!(out, "NOW      {}", state_text(windows.state_at(now), now));
    let openings = windows.next_openings(now, next);
    if openings.is_empty() {
        return out;
    }
    let _ = writeln!(out, "\n{:<22}{:<22}LENGTH", "OPENS", "CLOSES");
    for opening in openings {
        let length = exact_length(opening.closes.as_second() - opening.opens.as_second());
        let _ = writeln!(out, "{:<22}{:<22}{length}", opening.opens.to_string(), opening.closes.to_string());
    }
    out
}

/// `2h`, `2h30m`, `45m`, `57h`: a window's length to the minute (kubectl's age format rounds).
fn exact_length(seconds: i64) -> String {
    let (hours, minutes) = (seconds / 3600, seconds % 3600 / 60);
    match (hours, minutes) {
        (0, 0) => "under a minute".to_string(),
        (0, m) => format!("{m}m"),
        (h, 0) => format!("{h}h"),
        (h, m) => format!("{h}h{m}m"),
    }
}

fn document(windows: &ChangeWindows, now: Timestamp, next: usize) -> serde_json::Value {
    let (open, closes, opens) = match windows.state_at(now) {
        WindowState::Open { closes } => (true, closes.map(|t| t.to_string()), None),
        WindowState::Closed { opens } => (false, None, Some(opens.to_string())),
    };
    let openings: Vec<serde_json::Value> = windows
        .next_openings(now, next)
        .into_iter()
        .map(|o| serde_json::json!({"opens": o.opens.to_string(), "closes": o.closes.to_string()}))
        .collect();
    serde_json::json!({
        "windows": windows.text(),
        "at": now.to_string(),
        "open": open,
        "closes": closes,
        "opens": opens,
        "openings": openings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_says_now_and_the_next_openings_with_their_length() {
        let windows = ChangeWindows::parse("Sun 01:00-04:00 Europe/Berlin").expect("parses");
        let at: Timestamp = "2026-03-28T12:00:00Z".parse().expect("time");
        assert_eq!(
            table(&windows, at, 2),
            "WINDOWS  Sun 01:00-04:00 Europe/Berlin\n\
             AT       2026-03-28T12:00:00Z\n\
             NOW      closed; opens in 12h (2026-03-29T00:00:00Z)\n\
             \n\
             OPENS                 CLOSES                LENGTH\n\
             2026-03-29T00:00:00Z  2026-03-29T02:00:00Z  2h\n\
             2026-04-04T23:00:00Z  2026-04-05T02:00:00Z  3h\n"
        );
        let json = document(&windows, "2026-03-29T01:00:00Z".parse().expect("time"), 1);
        assert_eq!(json["open"], true);
        assert_eq!(json["closes"], "2026-03-29T02:00:00Z");
        assert_eq!(json["openings"][0]["opens"], "2026-03-29T00:00:00Z");
        assert_eq!(
            [exact_length(30), exact_length(45 * 60), exact_length(9000), exact_length(57 * 3600)],
            ["under a minute", "45m", "2h30m", "57h"]
        );
    }
}
