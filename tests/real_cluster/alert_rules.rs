//! The chart's alert rules (`charts/capdeck/files/alerts/`): promtool checks the rules file and
//! runs its unit tests (`tools::promtool::*`, ignored without promtool), and a pure check ties
//! every alert to its runbook section, to its unit tests and to the metrics docs/METRICS.md
//! specifies (`tools::alerts::*`, no tool needed).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::ops_tools;

/// Relative to the repository root, where `ops_tools::run` runs promtool.
pub const RULES: &str = "charts/capdeck/files/alerts/capdeck.rules.yaml";
pub const RULE_TESTS: &str = "charts/capdeck/files/alerts/capdeck.rules.test.yaml";
const RUNBOOK: &str = "docs/RUNBOOK.md";
const METRICS: &str = "docs/METRICS.md";
/// The chart replaces this prefix with its configurable runbook base.
const RUNBOOK_URL_PREFIX: &str = "https://github.com/capdeck/capdeck/blob/main/docs/RUNBOOK.md#";
const SEVERITIES: [&str; 2] = ["warning", "critical"];
const ANNOTATIONS: [&str; 3] = ["summary", "description", "runbook_url"];

#[derive(Deserialize)]
struct RuleFile {
    groups: Vec<RuleGroup>,
}

#[derive(Deserialize)]
struct RuleGroup {
    name: String,
    rules: Vec<Rule>,
}

#[derive(Deserialize)]
struct Rule {
    alert: Option<String>,
    record: Option<String>,
    expr: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    annotations: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct TestFile {
    rule_files: Vec<String>,
    tests: Vec<TestGroup>,
}

#[derive(Deserialize)]
struct TestGroup {
    name: Option<String>,
    #[serde(default)]
    alert_rule_test: Vec<AlertTest>,
}

#[derive(Deserialize)]
struct AlertTest {
    alertname: String,
    eval_time: String,
    #[serde(default)]
    exp_alerts: Vec<ExpectedAlert>,
}

#[derive(Deserialize)]
struct ExpectedAlert {
    #[serde(default)]
    exp_labels: BTreeMap<String, String>,
    #[serde(default)]
    exp_annotations: BTreeMap<String, String>,
}

fn repo(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn read(path: &str) -> Result<String, String> {
    std::fs::read_to_string(repo(path)).map_err(|error| format!("cannot read {path}: {error}"))
}

fn rules() -> Result<Vec<Rule>, String> {
    let file: RuleFile = serde_saphyr::from_str(&read(RULES)?)
        .map_err(|error| format!("{RULES} is not a Prometheus rules file: {error}"))?;
    let names: Vec<&str> = file.groups.iter().map(|group| group.name.as_str()).collect();
    if names != ["capdeck"] {
        return Err(format!("{RULES} must hold exactly one group `capdeck`, it holds {names:?}"));
    }
    Ok(file.groups.into_iter().flat_map(|group| group.rules).collect())
}

/// `promtool check rules`: the file parses, every expression and template is valid, no
/// duplicate rules; and promtool counts as many rules as the file holds.
pub fn promtool_check_rules(promtool: &Path) -> Result<(), String> {
    let expected = rules()?.len();
    let output = ops_tools::run(promtool, &["check", "rules", RULES])?;
    let found = format!("SUCCESS: {expected} rules found");
    if output.contains(&found) {
        Ok(())
    } else {
        Err(format!("promtool check rules {RULES} did not say `{found}`:\n{output}"))
    }
}

/// `promtool test rules`: every unit test of the rules passes.
pub fn promtool_test_rules(promtool: &Path) -> Result<(), String> {
    let output = ops_tools::run(promtool, &["test", "rules", RULE_TESTS])?;
    if output.contains("SUCCESS") {
        Ok(())
    } else {
        Err(format!("promtool test rules {RULE_TESTS} did not say SUCCESS:\n{output}"))
    }
}

/// GitHub's anchor of a Markdown heading: lower case, punctuation dropped, spaces as `-`.
fn github_anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Every alert has a severity, a summary, a description and a runbook_url that points at a
/// `## <AlertName>` heading of docs/RUNBOOK.md (and is listed in its table), and at least one
/// unit test where it fires (labels and annotations given) and one where it stays silent.
pub fn every_alert_has_a_runbook_section_and_a_unit_test() -> Result<(), String> {
    let rules = rules()?;
    let runbook = read(RUNBOOK)?;
    let tests: TestFile = serde_saphyr::from_str(&read(RULE_TESTS)?)
        .map_err(|error| format!("{RULE_TESTS} is not a promtool test file: {error}"))?;
    let mut problems = Vec::new();

    let headings: BTreeMap<String, String> = runbook
        .lines()
        .filter_map(|line| line.strip_prefix("## "))
        .map(|heading| (github_anchor(heading), heading.trim().to_string()))
        .collect();
    if tests.rule_files != ["capdeck.rules.yaml"] {
        problems.push(format!("{RULE_TESTS}: rule_files must be [capdeck.rules.yaml], it is {:?}", tests.rule_files));
    }

    let mut alerts = BTreeSet::new();
    for rule in &rules {
        let Some(name) = &rule.alert else {
            problems.push(format!("{RULES}: recording rule {:?} (only alerts belong here)", rule.record));
            continue;
        };
        if !alerts.insert(name.clone()) {
            problems.push(format!("{RULES}: alert {name} is defined twice"));
        }
        if !name.starts_with("Capdeck") {
            problems.push(format!("{RULES}: alert {name} is not named CapdeckXxx"));
        }
        match rule.labels.get("severity") {
            Some(severity) if SEVERITIES.contains(&severity.as_str()) => {}
            other => problems.push(format!("{RULES}: alert {name} has severity {other:?}, not one of {SEVERITIES:?}")),
        }
        let keys: Vec<&str> = rule.annotations.keys().map(String::as_str).collect();
        for key in ANNOTATIONS {
            if rule.annotations.get(key).is_none_or(|text| text.trim().is_empty()) {
                problems.push(format!("{RULES}: alert {name} has no annotation {key} (it has {keys:?})"));
            }
        }
        if let Some(url) = rule.annotations.get("runbook_url") {
            match url.strip_prefix(RUNBOOK_URL_PREFIX) {
                None => problems.push(format!("{RULES}: alert {name}: runbook_url {url} does not start with {RUNBOOK_URL_PREFIX}")),
                Some(anchor) => match headings.get(anchor) {
                    Some(heading) if heading == name => {}
                    Some(heading) => problems.push(format!(
                        "{RULES}: alert {name}: runbook_url #{anchor} is the section `## {heading}` of {RUNBOOK}, not `## {name}`"
                    )),
                    None => problems.push(format!(
                        "{RULES}: alert {name}: runbook_url #{anchor} matches no `## ` heading of {RUNBOOK}; add `## {name}`"
                    )),
                },
            }
        }
        if !runbook.contains(&format!("| [{name}](#{}) |", github_anchor(name))) {
            problems
                .push(format!("{RUNBOOK}: the table at the top has no row `| [{name}](#{}) | …`", github_anchor(name)));
        }
    }

    let mut firing = BTreeSet::new();
    let mut silent = BTreeSet::new();
    for group in &tests.tests {
        let group_name = group.name.as_deref().unwrap_or("(unnamed)");
        for case in &group.alert_rule_test {
            let name = &case.alertname;
            let place = format!("{RULE_TESTS}: test {group_name:?} at {}", case.eval_time);
            let Some(rule) = rules.iter().find(|rule| rule.alert.as_ref() == Some(name)) else {
                problems.push(format!("{place}: alert {name} is not in {RULES} (a silent case of it proves nothing)"));
                continue;
            };
            if case.exp_alerts.is_empty() {
                silent.insert(name.clone());
                continue;
            }
            let mut complete = true;
            for expected in &case.exp_alerts {
                if expected.exp_labels.get("severity") != rule.labels.get("severity") {
                    problems.push(format!("{place}: a firing {name} does not give its severity in exp_labels"));
                    complete = false;
                }
                let given: BTreeSet<&String> = expected.exp_annotations.keys().collect();
                let wanted: BTreeSet<&String> = rule.annotations.keys().collect();
                if given != wanted {
                    problems.push(format!(
                        "{place}: a firing {name} gives exp_annotations {given:?}, not all of its annotations {wanted:?}"
                    ));
                    complete = false;
                }
            }
            if complete {
                firing.insert(name.clone());
            }
        }
    }
    for name in &alerts {
        if !firing.contains(name) {
            problems.push(format!("{RULE_TESTS}: no case where {name} fires (with exp_labels and exp_annotations)"));
        }
        if !silent.contains(name) {
            problems.push(format!("{RULE_TESTS}: no case where {name} stays silent (exp_alerts: [])"));
        }
    }
    verdict(problems)
}

/// One row of docs/METRICS.md's table: the metric's labels and the whole row (its words name
/// the label values, e.g. `RolloutFailureGuard`).
struct Documented {
    labels: BTreeSet<String>,
    row: String,
}

fn documented_metrics(metrics_md: &str) -> BTreeMap<String, Documented> {
    let code = regex::Regex::new(r"`([a-z_]+)`").expect("a valid regex");
    let mut metrics = BTreeMap::new();
    for row in metrics_md.lines().filter(|line| line.starts_with("| `capdeck_")) {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        // "", metric, type, labels, what, ""
        let (Some(metric), Some(labels)) = (cells.get(1), cells.get(3)) else { continue };
        let name = metric.trim_matches('`').to_string();
        let labels = code.captures_iter(labels).map(|found| found[1].to_string()).collect();
        metrics.insert(name, Documented { labels, row: row.to_string() });
    }
    metrics
}

/// Every metric an expression uses is in docs/METRICS.md's table, every label it matches on or
/// aggregates by is one of that metric's documented labels, and every label value it matches
/// is named in that metric's row. The engine is written against the same document.
pub fn every_metric_and_label_in_the_rules_is_in_metrics_md() -> Result<(), String> {
    let rules = rules()?;
    let documented = documented_metrics(&read(METRICS)?);
    if documented.is_empty() {
        return Err(format!("{METRICS} has no table rows `| `capdeck_…` |`: has its table moved?"));
    }
    let metric = regex::Regex::new(r"\b(capdeck_[a-z_]+)\b").expect("a valid regex");
    let matcher = regex::Regex::new(r#"([a-z_]+)\s*(=~|!~|!=|=)\s*"([^"]*)""#).expect("a valid regex");
    let selector = regex::Regex::new(r"\{([^}]*)\}").expect("a valid regex");
    let grouping = regex::Regex::new(r"\b(?:by|without)\s*\(([^)]*)\)").expect("a valid regex");
    let mut problems = Vec::new();
    for rule in &rules {
        let name = rule.alert.as_deref().or(rule.record.as_deref()).unwrap_or("(unnamed)");
        let used: BTreeSet<&str> =
            metric.captures_iter(&rule.expr).map(|found| found.get(1).map_or("", |m| m.as_str())).collect();
        if used.is_empty() {
            problems.push(format!("{RULES}: alert {name} uses no capdeck_ metric: {}", rule.expr));
        }
        let mut labels = BTreeSet::new();
        let mut values = Vec::new();
        for found in selector.captures_iter(&rule.expr) {
            for pair in matcher.captures_iter(&found[1]) {
                labels.insert(pair[1].to_string());
                values.push((pair[1].to_string(), pair[3].to_string()));
            }
        }
        for found in grouping.captures_iter(&rule.expr) {
            labels.extend(found[1].split(',').map(str::trim).filter(|label| !label.is_empty()).map(String::from));
        }
        for used in used {
            let Some(doc) = documented.get(used) else {
                problems.push(format!("{RULES}: alert {name} uses {used}, which {METRICS} does not list"));
                continue;
            };
            for label in &labels {
                if !doc.labels.contains(label) {
                    problems.push(format!(
                        "{RULES}: alert {name} uses label {label} of {used}; {METRICS} gives it {:?}",
                        doc.labels
                    ));
                }
            }
            for (label, value) in &values {
                if !doc.row.contains(&format!("`{value}`")) {
                    problems.push(format!(
                        "{RULES}: alert {name} matches {label}=\"{value}\", a value {METRICS} does not name for {used}"
                    ));
                }
            }
        }
    }
    verdict(problems)
}

fn verdict(problems: Vec<String>) -> Result<(), String> {
    if problems.is_empty() { Ok(()) } else { Err(problems.join("\n")) }
}

/// The `capdeck …` commands docs/RUNBOOK.md tells people to run, split as a shell would (quotes
/// kept together), up to a pipe, `&&`, `&` or a comment.
fn runbook_commands(runbook: &str) -> Vec<Vec<String>> {
    let inline = regex::Regex::new(r"`(capdeck [^`]+)`").expect("a valid regex");
    let mut texts: Vec<String> = inline.captures_iter(runbook).map(|found| found[1].to_string()).collect();
    let mut fenced = false;
    for line in runbook.lines() {
        let line = line.trim();
        if line.starts_with("```") {
            fenced = !fenced;
        } else if fenced && line.starts_with("capdeck ") {
            texts.push(line.to_string());
        }
    }
    texts.iter().map(|text| shell_words(text)).collect()
}

fn shell_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote = None;
    let mut in_word = false;
    for c in text.chars() {
        match (quote, c) {
            (Some(open), c) if c == open => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    let end = words.iter().position(|word| ["|", "&&", "&", "#"].contains(&word.as_str())).unwrap_or(words.len());
    words.truncate(end);
    words
}

/// Every `capdeck …` command docs/RUNBOOK.md cites parses: this binary knows the subcommand and
/// every flag (run with `--help` appended, which clap answers only when the rest parses).
pub fn every_capdeck_command_in_the_runbook_parses() -> Result<(), String> {
    let commands = runbook_commands(&read(RUNBOOK)?);
    if commands.len() < 10 {
        return Err(format!("found only {} capdeck commands in {RUNBOOK}: is the extraction broken?", commands.len()));
    }
    let mut problems = Vec::new();
    for words in commands {
        // A placeholder (`NAMESPACE`, `NS/BATCH`) stands for a name: lower-cased it is one, so the
        // check is of the command line's shape, as a reader fills it in.
        let filled: Vec<String> = words[1..]
            .iter()
            .map(|word| {
                let placeholder = !word.starts_with('-')
                    && word.chars().any(|c| c.is_ascii_uppercase())
                    && !word.chars().any(|c| c.is_ascii_lowercase());
                if placeholder { word.to_lowercase() } else { word.clone() }
            })
            .collect();
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_capdeck"))
            .args(&filled)
            .arg("--help")
            .output()
            .map_err(|error| format!("cannot run {}: {error}", env!("CARGO_BIN_EXE_capdeck")))?;
        if !output.status.success() {
            problems.push(format!(
                "{RUNBOOK}: `{}` does not parse: {}",
                words.join(" "),
                String::from_utf8_lossy(&output.stderr).lines().next().unwrap_or_default()
            ));
        }
    }
    verdict(problems)
}
