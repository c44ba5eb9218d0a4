//! Change windows: when capdeck may start restarting Deployments (docs/WINDOWS.md).
//!
//! Weekly ranges in an IANA time zone, separated by `;`:
//!
//! ```text
//! Mon-Fri 22:00-05:00 Europe/Berlin; Sat-Sun 00:00-24:00 Europe/Berlin
//! ```
//!
//! Why this form and not cron plus a duration: it is how change calendars and Kured
//! (`--reboot-days`, `--start-time`, `--end-time`, `--time-zone`) already say it, a range that
//! crosses midnight reads as one, and every field names itself; a cron line needs a second field
//! for the length and hides the end.
//!
//! A range opens on each listed day at its start, in its zone's wall-clock time, and closes at its
//! end: the same day when the end is later, else the next day (`24:00` is the end of the day).
//! Each boundary is the first instant whose wall clock reads that time or later: a start in an hour
//! the clocks skip opens when they jump, a start in an hour that repeats opens at its first pass.
//! Overlapping and touching ranges are one opening. The time zone database is jiff's bundled one.

use std::fmt;

use jiff::civil::{Date, DateTime, Time, Weekday};
use jiff::tz::{AmbiguousOffset, TimeZone};
use jiff::{Span, Timestamp};

/// On a CAPApplication or a Namespace: its change windows (the application's wins).
pub const ANNOTATION_CHANGE_WINDOWS: &str = "capdeck.dev/change-windows";

/// A range as written may be quoted back in an error, never longer than this.
const QUOTE_LIMIT: usize = 80;
const MINUTES_PER_DAY: u16 = 24 * 60;
const DAYS: [(&str, &str, Weekday); 7] = [
    ("mon", "monday", Weekday::Monday),
    ("tue", "tuesday", Weekday::Tuesday),
    ("wed", "wednesday", Weekday::Wednesday),
    ("thu", "thursday", Weekday::Thursday),
    ("fri", "friday", Weekday::Friday),
    ("sat", "saturday", Weekday::Saturday),
    ("sun", "sunday", Weekday::Sunday),
];

/// Parsed change windows: one or more weekly ranges.
#[derive(Clone, Debug)]
pub struct ChangeWindows {
    text: String,
    ranges: Vec<WeeklyRange>,
}

/// The same text makes the same windows (the ranges are parsed from it).
impl PartialEq for ChangeWindows {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

#[derive(Clone, Debug)]
struct WeeklyRange {
    /// Indexed by `Weekday::to_monday_zero_offset`.
    days: [bool; 7],
    /// Minutes after midnight, 0..1440.
    start: u16,
    /// Minutes after midnight, 1..=1440; at or before `start` means the next day.
    end: u16,
    zone: TimeZone,
}

/// Where the windows stand at an instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowState {
    /// Inside an opening; `closes` is `None` when the windows never close (every hour of the week).
    Open { closes: Option<Timestamp> },
    /// Outside; the next opening starts at `opens`.
    Closed { opens: Timestamp },
}

/// One opening: from `opens` (inclusive) to `closes` (exclusive).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Opening {
    pub opens: Timestamp,
    pub closes: Timestamp,
}

/// Why a window text cannot be used: which range, what is wrong, and what is expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowError {
    /// 1-based index of the range, 0 for the text as a whole.
    pub range: usize,
    pub quoted: String,
    pub problem: String,
}

impl fmt::Display for WindowError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.range == 0 {
            write!(f, "{}", self.problem)
        } else {
            write!(f, "range {} ({:?}): {}", self.range, self.quoted, self.problem)
        }
    }
}

impl std::error::Error for WindowError {}

const EXPECTED: &str = "expected DAYS HH:MM-HH:MM ZONE, e.g. \"Mon-Fri 22:00-05:00 Europe/Berlin\"";

impl ChangeWindows {
    pub fn parse(text: &str) -> Result<Self, WindowError> {
        let mut ranges = Vec::new();
        for (index, part) in text.split(';').enumerate() {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let error = |problem: String| WindowError { range: index + 1, quoted: quote(part), problem };
            ranges.push(parse_range(part).map_err(error)?);
        }
        if ranges.is_empty() {
            return Err(WindowError {
                range: 0,
                quoted: String::new(),
                problem: format!("no range given; {EXPECTED}"),
            });
        }
        Ok(Self { text: text.trim().to_string(), ranges })
    }

    /// The text as written (trimmed).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether the windows are open at `at`, and until when or from when.
    pub fn state_at(&self, at: Timestamp) -> WindowState {
        Self::state_among(&self.openings_around(at), at)
    }

    /// `state_at`, from the openings around `at` already worked out.
    fn state_among(openings: &[Opening], at: Timestamp) -> WindowState {
        let week = Span::new().hours(7 * 24);
        for opening in openings {
            if opening.opens <= at && at < opening.closes {
                // An opening a week long or more is every hour of the week, whatever comes next.
                let endless = at.checked_add(week).is_ok_and(|week_on| opening.closes >= week_on);
                return WindowState::Open { closes: (!endless).then_some(opening.closes) };
            }
            if opening.opens > at {
                return WindowState::Closed { opens: opening.opens };
            }
        }
        // Unreachable for a parsed value (every range has a day), but never a panic: say open.
        WindowState::Open { closes: None }
    }

    /// The next `count` openings that have not closed at `at` (the current one first, if open).
    /// None when the windows never close (`state_at` says so).
    pub fn next_openings(&self, at: Timestamp, count: usize) -> Vec<Opening> {
        let openings = self.openings_around(at);
        if Self::state_among(&openings, at) == (WindowState::Open { closes: None }) {
            return Vec::new();
        }
        openings.into_iter().filter(|opening| opening.closes > at).take(count).collect()
    }

    /// Every opening from two days before `at` to sixteen after, merged and in order.
    fn openings_around(&self, at: Timestamp) -> Vec<Opening> {
        let mut all: Vec<Opening> = self.ranges.iter().flat_map(|range| range.occurrences(at)).collect();
        all.sort_by_key(|opening| opening.opens);
        let mut merged: Vec<Opening> = Vec::with_capacity(all.len());
        for opening in all {
            match merged.last_mut() {
                Some(last) if opening.opens <= last.closes => last.closes = last.closes.max(opening.closes),
                _ => merged.push(opening),
            }
        }
        merged
    }
}

impl WeeklyRange {
    fn occurrences(&self, at: Timestamp) -> Vec<Opening> {
        let today = at.to_zoned(self.zone.clone()).date();
        (-2..=16)
            .filter_map(|offset| today.checked_add(Span::new().days(offset)).ok())
            .filter(|day| self.days[usize::from(day.weekday().to_monday_zero_offset().unsigned_abs())])
            .filter_map(|day| {
                let opens = self.instant(day, self.start)?;
                let end_day = if self.end <= self.start { day.tomorrow().ok()? } else { day };
                let closes = self.instant(end_day, self.end)?;
                (closes > opens).then_some(Opening { opens, closes })
            })
            .collect()
    }

    /// The first instant whose wall clock on `day` reads `minutes` or later (1440: the next midnight).
    fn instant(&self, day: Date, minutes: u16) -> Option<Timestamp> {
        let (day, minutes) = if minutes >= MINUTES_PER_DAY { (day.tomorrow().ok()?, 0) } else { (day, minutes) };
        let time = Time::new(i8::try_from(minutes / 60).ok()?, i8::try_from(minutes % 60).ok()?, 0, 0).ok()?;
        first_instant_at_or_after(&self.zone, DateTime::from_parts(day, time))
    }
}

fn first_instant_at_or_after(zone: &TimeZone, civil: DateTime) -> Option<Timestamp> {
    let ambiguous = zone.to_ambiguous_timestamp(civil);
    match ambiguous.offset() {
        AmbiguousOffset::Unambiguous { .. } | AmbiguousOffset::Fold { .. } => ambiguous.earlier().ok(),
        // The wall clock never reads `civil`: the first instant after it is the jump itself.
        AmbiguousOffset::Gap { .. } => {
            let after_the_jump = ambiguous.later().ok()?;
            zone.preceding(after_the_jump).next().map(|transition| transition.timestamp())
        }
    }
}

fn parse_range(part: &str) -> Result<WeeklyRange, String> {
    let words: Vec<&str> = part.split_whitespace().collect();
    let [days, times, zone] = words[..] else {
        return Err(match words.len() {
            2 => format!("no time zone; add an IANA name such as Europe/Berlin or UTC ({EXPECTED})"),
            n if n > 3 => format!("{n} words; separate ranges with ';' ({EXPECTED})"),
            _ => format!("{} words; {EXPECTED}", words.len()),
        });
    };
    let days = parse_days(days)?;
    let (start, end) = parse_times(times)?;
    if start == end {
        return Err(format!("{times} ends when it starts; write 00:00-24:00 for a whole day"));
    }
    let zone = TimeZone::get(zone)
        .map_err(|_| format!("{:?} is not an IANA time zone (e.g. Europe/Berlin, Asia/Kolkata, UTC)", quote(zone)))?;
    Ok(WeeklyRange { days, start, end, zone })
}

fn parse_days(text: &str) -> Result<[bool; 7], String> {
    let mut days = [false; 7];
    for item in text.split(',') {
        let (first, last) = match item.split_once('-') {
            Some((first, last)) => (weekday(first)?, weekday(last)?),
            None => (weekday(item)?, weekday(item)?),
        };
        // Mon-Fri, and wrapping ranges such as Fri-Mon.
        let mut day = first;
        loop {
            days[usize::from(day.unsigned_abs())] = true;
            if day == last {
                break;
            }
            day = (day + 1) % 7;
        }
    }
    Ok(days)
}

fn weekday(text: &str) -> Result<i8, String> {
    let lower = text.to_ascii_lowercase();
    DAYS.iter()
        .find(|(short, long, _)| lower == *short || lower == *long)
        .map(|(_, _, day)| day.to_monday_zero_offset())
        .ok_or_else(|| {
            format!(
                "{:?} is not a day (Mon, Tue, Wed, Thu, Fri, Sat, Sun; ranges as Mon-Fri, lists as Mon,Wed)",
                quote(text)
            )
        })
}

fn parse_times(text: &str) -> Result<(u16, u16), String> {
    let Some((start, end)) = text.split_once('-') else {
        return Err(format!("{:?} is not a time range such as 22:00-05:00", quote(text)));
    };
    let start = minutes(start, false)?;
    let end = minutes(end, true)?;
    Ok((start, end))
}

fn minutes(text: &str, may_be_end_of_day: bool) -> Result<u16, String> {
    let bad = || format!("{:?} is not a time of day HH:MM (00:00 to 23:59, or 24:00 as an end)", quote(text));
    let (hours, mins) = text.split_once(':').ok_or_else(bad)?;
    if hours.len() != 2 || mins.len() != 2 {
        return Err(bad());
    }
    let hours: u16 = hours.parse().map_err(|_| bad())?;
    let mins: u16 = mins.parse().map_err(|_| bad())?;
    match (hours, mins) {
        (24, 0) if may_be_end_of_day => Ok(MINUTES_PER_DAY),
        (0..=23, 0..=59) => Ok(hours * 60 + mins),
        _ => Err(bad()),
    }
}

fn quote(text: &str) -> String {
    if text.chars().count() <= QUOTE_LIMIT {
        text.to_string()
    } else {
        format!("{}…", text.chars().take(QUOTE_LIMIT).collect::<String>())
    }
}

/// Where the change windows that apply to an application come from: the most specific wins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WindowSource {
    /// The `capdeck.dev/change-windows` annotation of the CAPApplication `namespace/name`.
    Application { namespace: String, name: String },
    /// The annotation of the Namespace.
    Namespace { name: String },
    /// The engine's `--change-windows` flag.
    Cluster,
}

impl fmt::Display for WindowSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Application { namespace, name } => {
                write!(f, "annotation {ANNOTATION_CHANGE_WINDOWS} of CAPApplication {namespace}/{name}")
            }
            Self::Namespace { name } => write!(f, "annotation {ANNOTATION_CHANGE_WINDOWS} of Namespace {name}"),
            Self::Cluster => write!(f, "the engine's --change-windows"),
        }
    }
}

/// The change windows in force for one application, or why they cannot be read.
#[derive(Clone, Debug)]
pub struct AppliedWindows {
    pub source: WindowSource,
    pub windows: Result<ChangeWindows, WindowError>,
}

impl AppliedWindows {
    /// The application's annotation, else its namespace's, else the cluster's; `None` when no
    /// level sets any (the batch may roll at any hour). A blank annotation is no windows at that
    /// level, so a namespace can lift the cluster's windows only by setting its own.
    pub fn resolve(
        application: (&str, &str, Option<&str>),
        namespace_annotation: Option<&str>,
        cluster: Option<&ChangeWindows>,
    ) -> Option<Self> {
        let (namespace, name, app_annotation) = application;
        if let Some(text) = app_annotation.filter(|t| !t.trim().is_empty()) {
            let source = WindowSource::Application { namespace: namespace.to_string(), name: name.to_string() };
            return Some(Self { source, windows: ChangeWindows::parse(text) });
        }
        if let Some(text) = namespace_annotation.filter(|t| !t.trim().is_empty()) {
            let source = WindowSource::Namespace { name: namespace.to_string() };
            return Some(Self { source, windows: ChangeWindows::parse(text) });
        }
        cluster.map(|windows| Self { source: WindowSource::Cluster, windows: Ok(windows.clone()) })
    }

    /// `TEXT from SOURCE`, the cluster level named `cluster` (the engine names its flag, a reader
    /// the cluster's windows); `None` when the windows cannot be read.
    pub fn describe(&self, cluster: &str) -> Option<String> {
        let windows = self.windows.as_ref().ok()?;
        let from = match &self.source {
            WindowSource::Cluster => cluster.to_string(),
            other => other.to_string(),
        };
        Some(format!("{} from {from}", windows.text()))
    }

    /// Why a batch of this application is held: the annotation, the object, the problem and the fix.
    pub fn unreadable(&self) -> Option<String> {
        let error = self.windows.as_ref().err()?;
        let fix = match &self.source {
            WindowSource::Application { namespace, name } => {
                format!(
                    "kubectl annotate capapplication -n {namespace} {name} --overwrite {ANNOTATION_CHANGE_WINDOWS}='Mon-Fri 22:00-05:00 Europe/Berlin'"
                )
            }
            WindowSource::Namespace { name } => {
                format!(
                    "kubectl annotate namespace {name} --overwrite {ANNOTATION_CHANGE_WINDOWS}='Mon-Fri 22:00-05:00 Europe/Berlin'"
                )
            }
            WindowSource::Cluster => "correct --change-windows".to_string(),
        };
        Some(format!("the {} cannot be read: {error}; nothing rolls until it is fixed: {fix}", self.source))
    }
}

/// What the windows and a freeze say about starting a rollout at `now`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowGate {
    /// Inside a window (or none applies) and not frozen: roll.
    Open,
    /// Outside a window: wait until `opens`, which is early enough for the old credentials.
    OutsideWindow { opens: Timestamp },
    /// Frozen until `until`; the rollout may start at `starts` (the first opening after it).
    Frozen { until: Timestamp, starts: Timestamp },
    /// Waiting until `starts` would leave less than the expected rollout before the old
    /// credentials may be revoked at `revocation`: a person decides now.
    DeadlineFirst { starts: Timestamp, revocation: Timestamp, frozen: bool },
}

/// The gate in front of a rollout: the freeze first (nothing starts before its end), then the
/// windows (the first opening at or after that), then the deadline: when the start this gives is
/// later than the old credentials' revocation less the expected rollout, waiting is not safe.
pub fn window_gate(
    now: Timestamp,
    windows: Option<&ChangeWindows>,
    frozen_until: Option<Timestamp>,
    revocation: Option<Timestamp>,
    expected_rollout: std::time::Duration,
) -> WindowGate {
    let frozen_until = frozen_until.filter(|until| *until > now);
    let earliest = frozen_until.unwrap_or(now);
    let starts = match windows.map(|w| w.state_at(earliest)) {
        Some(WindowState::Closed { opens }) => opens,
        Some(WindowState::Open { .. }) | None => earliest,
    };
    if starts <= now {
        return WindowGate::Open;
    }
    let margin = jiff::SignedDuration::try_from(expected_rollout).unwrap_or(jiff::SignedDuration::MAX);
    // The latest safe start is the revocation less the margin (none when that underflows).
    if let Some(revocation) = revocation
        && revocation.checked_sub(margin).is_ok_and(|latest| starts > latest)
    {
        return WindowGate::DeadlineFirst { starts, revocation, frozen: frozen_until.is_some() };
    }
    match frozen_until {
        Some(until) => WindowGate::Frozen { until, starts },
        None => WindowGate::OutsideWindow { opens: starts },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().expect("an RFC 3339 instant")
    }

    fn windows(text: &str) -> ChangeWindows {
        ChangeWindows::parse(text).expect("parses")
    }

    fn openings(text: &str, from: &str, count: usize) -> Vec<(String, String)> {
        windows(text)
            .next_openings(at(from), count)
            .into_iter()
            .map(|o| (o.opens.to_string(), o.closes.to_string()))
            .collect()
    }

    /// Openings as RFC 3339 (opens, closes) pairs.
    type Openings = Vec<(String, String)>;

    fn pair(opens: &str, closes: &str) -> (String, String) {
        (opens.to_string(), closes.to_string())
    }

    #[test]
    fn next_openings_across_dst_half_hour_zones_midnight_overlaps_and_whole_days() {
        let table: [(&str, &str, &str, Openings); 9] = [
            (
                "Berlin, last Sunday of March: 01:00 CET to 04:00 CEST is two hours",
                "Sun 01:00-04:00 Europe/Berlin",
                "2026-03-28T12:00:00Z",
                vec![pair("2026-03-29T00:00:00Z", "2026-03-29T02:00:00Z")],
            ),
            (
                "Berlin, last Sunday of March: a start in the skipped hour opens at the jump (03:00 CEST)",
                "Sun 02:30-03:30 Europe/Berlin",
                "2026-03-28T12:00:00Z",
                vec![
                    pair("2026-03-29T01:00:00Z", "2026-03-29T01:30:00Z"),
                    pair("2026-04-05T00:30:00Z", "2026-04-05T01:30:00Z"),
                ],
            ),
            (
                "Berlin, last Sunday of October: 01:00 CEST to 04:00 CET is four hours",
                "Sun 01:00-04:00 Europe/Berlin",
                "2026-10-24T12:00:00Z",
                vec![pair("2026-10-24T23:00:00Z", "2026-10-25T03:00:00Z")],
            ),
            (
                "Berlin, last Sunday of October: a start in the repeated hour opens at its first pass",
                "Sun 02:30-03:30 Europe/Berlin",
                "2026-10-24T12:00:00Z",
                vec![pair("2026-10-25T00:30:00Z", "2026-10-25T02:30:00Z")],
            ),
            (
                "Asia/Kolkata is UTC+05:30",
                "Mon 09:00-10:00 Asia/Kolkata",
                "2026-11-22T00:00:00Z",
                vec![pair("2026-11-23T03:30:00Z", "2026-11-23T04:30:00Z")],
            ),
            (
                "Lord Howe moves by 30 minutes on the first Sunday of October (+10:30 to +11:00)",
                "Sat-Sun 12:00-13:00 Australia/Lord_Howe",
                "2026-10-02T00:00:00Z",
                vec![
                    pair("2026-10-03T01:30:00Z", "2026-10-03T02:30:00Z"),
                    pair("2026-10-04T01:00:00Z", "2026-10-04T02:00:00Z"),
                ],
            ),
            (
                "a range that crosses midnight ends the next day",
                "Fri 22:00-05:00 UTC",
                "2026-11-25T00:00:00Z",
                vec![pair("2026-11-27T22:00:00Z", "2026-11-28T05:00:00Z")],
            ),
            (
                "overlapping and touching ranges are one opening",
                "Mon 20:00-23:00 UTC; Mon 22:00-24:00 UTC; Tue 00:00-02:00 UTC",
                "2026-11-23T00:00:00Z",
                vec![
                    pair("2026-11-23T20:00:00Z", "2026-11-24T02:00:00Z"),
                    pair("2026-11-30T20:00:00Z", "2026-12-01T02:00:00Z"),
                ],
            ),
            (
                "00:00-24:00 on consecutive days is one opening; an open window is listed first",
                "Sat-Sun 00:00-24:00 Europe/Berlin; Mon-Fri 22:00-05:00 Europe/Berlin",
                "2026-11-28T12:00:00Z",
                vec![
                    pair("2026-11-27T21:00:00Z", "2026-11-29T23:00:00Z"),
                    pair("2026-11-30T21:00:00Z", "2026-12-01T04:00:00Z"),
                ],
            ),
        ];
        for (why, text, from, expected) in table {
            assert_eq!(openings(text, from, expected.len()), expected, "{why}");
        }
    }

    #[test]
    fn state_says_open_until_or_closed_until() {
        let berlin = windows("Mon-Fri 22:00-05:00 Europe/Berlin");
        assert_eq!(
            berlin.state_at(at("2026-11-25T12:00:00Z")),
            WindowState::Closed { opens: at("2026-11-25T21:00:00Z") }
        );
        assert_eq!(
            berlin.state_at(at("2026-11-25T21:00:00Z")),
            WindowState::Open { closes: Some(at("2026-11-26T04:00:00Z")) },
            "the opening instant is inside"
        );
        assert_eq!(
            berlin.state_at(at("2026-11-26T04:00:00Z")),
            WindowState::Closed { opens: at("2026-11-26T21:00:00Z") },
            "the closing instant is outside"
        );
        // Friday night's range runs into Saturday; then nothing until Monday night.
        assert_eq!(
            berlin.state_at(at("2026-11-28T06:00:00Z")),
            WindowState::Closed { opens: at("2026-11-30T21:00:00Z") }
        );
        assert_eq!(
            windows("Mon-Sun 00:00-24:00 UTC").state_at(at("2026-11-25T12:00:00Z")),
            WindowState::Open { closes: None }
        );
        assert_eq!(
            windows("Sun-Sat 00:00-24:00 Asia/Kolkata").state_at(at("2026-11-25T12:00:00Z")),
            WindowState::Open { closes: None }
        );
    }

    #[test]
    fn days_take_names_ranges_lists_and_wrap_around() {
        let fri_to_mon = windows("Fri-Mon 10:00-11:00 UTC");
        let days: Vec<String> = fri_to_mon
            .next_openings(at("2026-11-23T12:00:00Z"), 4)
            .iter()
            .map(|o| format!("{:?}", o.opens.to_zoned(TimeZone::UTC).weekday()))
            .collect();
        assert_eq!(days, ["Friday", "Saturday", "Sunday", "Monday"]);
        let listed = windows("monday,WED,Friday 10:00-11:00 UTC");
        assert_eq!(listed.next_openings(at("2026-11-23T00:00:00Z"), 3).len(), 3);
        assert_eq!(listed.next_openings(at("2026-11-23T00:00:00Z"), 3)[1].opens, at("2026-11-25T10:00:00Z"));
    }

    #[test]
    fn bad_windows_say_which_range_what_is_wrong_and_what_is_expected() {
        let table = [
            ("", "no range given; expected DAYS HH:MM-HH:MM ZONE, e.g. \"Mon-Fri 22:00-05:00 Europe/Berlin\""),
            (" ; ", "no range given; expected DAYS HH:MM-HH:MM ZONE, e.g. \"Mon-Fri 22:00-05:00 Europe/Berlin\""),
            (
                "Mon-Fir 22:00-05:00 UTC",
                "range 1 (\"Mon-Fir 22:00-05:00 UTC\"): \"Fir\" is not a day (Mon, Tue, Wed, Thu, Fri, Sat, Sun; ranges as Mon-Fri, lists as Mon,Wed)",
            ),
            (
                "Mon 22:00-05:00 UTC; Tue 25:00-26:00 UTC",
                "range 2 (\"Tue 25:00-26:00 UTC\"): \"25:00\" is not a time of day HH:MM (00:00 to 23:59, or 24:00 as an end)",
            ),
            (
                "Mon 24:00-05:00 UTC",
                "range 1 (\"Mon 24:00-05:00 UTC\"): \"24:00\" is not a time of day HH:MM (00:00 to 23:59, or 24:00 as an end)",
            ),
            (
                "Mon 9:00-10:00 UTC",
                "range 1 (\"Mon 9:00-10:00 UTC\"): \"9:00\" is not a time of day HH:MM (00:00 to 23:59, or 24:00 as an end)",
            ),
            ("Mon 22:00 UTC", "range 1 (\"Mon 22:00 UTC\"): \"22:00\" is not a time range such as 22:00-05:00"),
            (
                "Mon 10:00-10:00 UTC",
                "range 1 (\"Mon 10:00-10:00 UTC\"): 10:00-10:00 ends when it starts; write 00:00-24:00 for a whole day",
            ),
            (
                "Mon 22:00-05:00",
                "range 1 (\"Mon 22:00-05:00\"): no time zone; add an IANA name such as Europe/Berlin or UTC (expected DAYS HH:MM-HH:MM ZONE, e.g. \"Mon-Fri 22:00-05:00 Europe/Berlin\")",
            ),
            (
                "Mon 22:00-05:00 Europe/Berlín",
                "range 1 (\"Mon 22:00-05:00 Europe/Berlín\"): \"Europe/Berlín\" is not an IANA time zone (e.g. Europe/Berlin, Asia/Kolkata, UTC)",
            ),
            (
                "every night at ten",
                "range 1 (\"every night at ten\"): 4 words; separate ranges with ';' (expected DAYS HH:MM-HH:MM ZONE, e.g. \"Mon-Fri 22:00-05:00 Europe/Berlin\")",
            ),
        ];
        for (text, expected) in table {
            match ChangeWindows::parse(text) {
                Ok(parsed) => panic!("{text:?} parsed as {parsed:?}"),
                Err(error) => assert_eq!(error.to_string(), expected, "{text:?}"),
            }
        }
        let long = format!("Mon 22:00-05:00 {}", "X".repeat(500));
        let said = ChangeWindows::parse(&long).expect_err("unknown zone").to_string();
        assert!(said.chars().count() < 300, "a long value is quoted shortened: {said}");
    }

    #[test]
    fn the_gate_waits_for_a_window_or_a_freeze_unless_the_old_credentials_die_first() {
        use std::time::Duration;
        let nights = windows("Mon-Fri 22:00-05:00 UTC");
        let now = at("2026-11-25T12:00:00Z");
        let opens = at("2026-11-25T22:00:00Z");
        let hour = Duration::from_secs(3600);
        let in_hours = |h: i64| now.checked_add(jiff::SignedDuration::from_hours(h)).expect("time");
        let table = [
            ("no windows, no freeze", None, None, None, WindowGate::Open),
            ("inside a window", Some(windows("Mon-Sun 00:00-24:00 UTC")), None, None, WindowGate::Open),
            ("outside, no known revocation", Some(nights.clone()), None, None, WindowGate::OutsideWindow { opens }),
            (
                "outside, revocation after the opening plus the rollout",
                Some(nights.clone()),
                None,
                Some(in_hours(11)),
                WindowGate::OutsideWindow { opens },
            ),
            (
                "outside, revocation before the opening plus the rollout",
                Some(nights.clone()),
                None,
                Some(in_hours(10)),
                WindowGate::DeadlineFirst { starts: opens, revocation: in_hours(10), frozen: false },
            ),
            (
                "frozen, no windows: starts when the freeze ends",
                None,
                Some(in_hours(3)),
                None,
                WindowGate::Frozen { until: in_hours(3), starts: in_hours(3) },
            ),
            (
                "frozen past tonight's opening: starts inside it, at the freeze's end",
                Some(nights.clone()),
                Some(in_hours(12)),
                None,
                WindowGate::Frozen { until: in_hours(12), starts: in_hours(12) },
            ),
            (
                "frozen into the day: starts at the next night's opening",
                Some(nights.clone()),
                Some(in_hours(20)),
                None,
                WindowGate::Frozen { until: in_hours(20), starts: at("2026-11-26T22:00:00Z") },
            ),
            (
                "a freeze that outlives the old credentials",
                None,
                Some(in_hours(5)),
                Some(in_hours(5)),
                WindowGate::DeadlineFirst { starts: in_hours(5), revocation: in_hours(5), frozen: true },
            ),
            ("a freeze that ended", None, Some(in_hours(-1)), Some(in_hours(1)), WindowGate::Open),
        ];
        for (why, windows, frozen, revocation, expected) in table {
            assert_eq!(window_gate(now, windows.as_ref(), frozen, revocation, hour), expected, "{why}");
        }
    }

    #[test]
    fn the_most_specific_level_wins_and_an_unreadable_one_says_where_and_how_to_fix_it() {
        let cluster = windows("Sat 00:00-24:00 UTC");
        let app = ("shop", "bookshop", Some("Mon 22:00-23:00 UTC"));
        let applied = AppliedWindows::resolve(app, Some("Tue 22:00-23:00 UTC"), Some(&cluster)).expect("applies");
        assert_eq!(applied.source, WindowSource::Application { namespace: "shop".into(), name: "bookshop".into() });
        let applied =
            AppliedWindows::resolve(("shop", "bookshop", Some(" ")), Some("Tue 22:00-23:00 UTC"), Some(&cluster))
                .expect("applies");
        assert_eq!(applied.source, WindowSource::Namespace { name: "shop".into() });
        assert_eq!(applied.windows.as_ref().map(ChangeWindows::text).ok(), Some("Tue 22:00-23:00 UTC"));
        let applied = AppliedWindows::resolve(("shop", "bookshop", None), None, Some(&cluster)).expect("applies");
        assert_eq!(applied.source, WindowSource::Cluster);
        assert!(applied.unreadable().is_none());
        assert!(AppliedWindows::resolve(("shop", "bookshop", None), None, None).is_none());
        let broken = AppliedWindows::resolve(("shop", "bookshop", Some("Mon 25:00-26:00 UTC")), None, Some(&cluster))
            .expect("applies");
        assert_eq!(
            broken.unreadable().as_deref(),
            Some(
                "the annotation capdeck.dev/change-windows of CAPApplication shop/bookshop cannot be read: range 1 \
                 (\"Mon 25:00-26:00 UTC\"): \"25:00\" is not a time of day HH:MM (00:00 to 23:59, or 24:00 as an end); \
                 nothing rolls until it is fixed: kubectl annotate capapplication -n shop bookshop --overwrite \
                 capdeck.dev/change-windows='Mon-Fri 22:00-05:00 Europe/Berlin'"
            )
        );
    }
}
