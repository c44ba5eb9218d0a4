//! The Grafana dashboard `charts/capdeck/files/dashboards/capdeck.json` (docs/DASHBOARD.md):
//!
//! - `tools::promtool::dashboard_expressions_parse`: every PromQL expression in it (panel targets,
//!   also inside collapsed rows, and the templating queries), with Grafana's variables put in,
//!   is written as a recording rule and parsed by `promtool check rules`;
//! - `tools::dashboard::every_metric_is_documented`: every metric it reads is in docs/METRICS.md
//!   (and every metric there is on a panel), counters are read through `rate`/`increase`, the
//!   gauges every replica exports are taken `max` over replicas, and every panel has a title,
//!   the `${datasource}` variable and an id of its own.
//!
//! [`dashboard_metric_names`] gives the names the dashboard reads as `/metrics` exposes them, for
//! the story that scrapes a running daemon.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use libtest_mimic::Failed;
use regex::Regex;
use serde_json::Value;

use crate::ops_tools;

/// The dashboard's file in the repository.
pub fn path() -> PathBuf {
    ops_tools::chart_dir().join("files/dashboards/capdeck.json")
}

fn metrics_doc() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/METRICS.md")
}

fn load() -> Result<Value, String> {
    let path = path();
    let text = std::fs::read_to_string(&path).map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    serde_json::from_str(&text).map_err(|error| format!("{} is not valid JSON: {error}", path.display()))
}

/// Every panel, rows included, and the panels a collapsed row holds in its own `panels`.
fn panels(dashboard: &Value) -> Vec<&Value> {
    fn walk<'a>(list: &'a Value, out: &mut Vec<&'a Value>) {
        for panel in list.as_array().into_iter().flatten() {
            out.push(panel);
            if let Some(nested) = panel.get("panels") {
                walk(nested, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], &mut out);
    out
}

fn is_row(panel: &Value) -> bool {
    panel["type"] == "row"
}

fn title(panel: &Value) -> String {
    panel["title"].as_str().unwrap_or("(no title)").to_string()
}

/// One PromQL expression as the dashboard has it (Grafana variables not yet put in).
pub struct Expression {
    /// Which panel and target, or which variable, for messages.
    pub place: String,
    pub expr: String,
}

/// The PromQL in a Prometheus templating query: `label_values(EXPR, label)` and
/// `query_result(EXPR)` hold one; `label_values(label)`, `label_names()` and `metrics(regex)` none.
fn promql_of_variable_query(query: &str) -> Option<String> {
    let query = query.trim();
    if let Some(inner) = query.strip_prefix("query_result(").and_then(|rest| rest.strip_suffix(')')) {
        return Some(inner.trim().to_string());
    }
    let inner = query.strip_prefix("label_values(")?.strip_suffix(')')?;
    let (selector, _label) = inner.rsplit_once(',')?;
    Some(selector.trim().to_string())
}

/// The templating variables' names.
fn variables(dashboard: &Value) -> BTreeSet<String> {
    dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|variable| variable["name"].as_str().map(str::to_string))
        .collect()
}

/// Every PromQL expression of the dashboard: each panel target's `expr` and each Prometheus
/// query variable's PromQL.
pub fn expressions(dashboard: &Value) -> Result<Vec<Expression>, String> {
    let mut out = Vec::new();
    for panel in panels(dashboard) {
        for (index, target) in panel["targets"].as_array().into_iter().flatten().enumerate() {
            let place = format!("panel {:?} (id {}) target {}", title(panel), panel["id"], index + 1);
            match target["expr"].as_str() {
                Some(expr) if !expr.trim().is_empty() => out.push(Expression { place, expr: expr.to_string() }),
                _ => return Err(format!("{place} has no `expr`: every target of this dashboard is a PromQL query")),
            }
        }
    }
    for variable in dashboard["templating"]["list"].as_array().into_iter().flatten() {
        if variable["type"] != "query" {
            continue;
        }
        let name = variable["name"].as_str().unwrap_or("(no name)");
        let query = match &variable["query"] {
            Value::String(query) => query.as_str(),
            object => object["query"].as_str().unwrap_or_default(),
        };
        if let Some(expr) = promql_of_variable_query(query) {
            out.push(Expression { place: format!("variable ${name} ({query})"), expr });
        }
    }
    Ok(out)
}

/// `expr` with Grafana's variables put in, as Prometheus would receive it: the interval and range
/// variables become `5m` (or 300 seconds), each dashboard variable `.*`. A dashboard variable is
/// multi-valued, so it may only stand in a regex matcher (`=~"…"`, `!~"…"`); one anywhere else,
/// or a `$name` the dashboard does not define, is an error.
pub fn substitute(expr: &str, variables: &BTreeSet<String>) -> Result<String, String> {
    let builtin = Regex::new(r"\$\{?(__[A-Za-z_]+)\}?").map_err(|e| e.to_string())?;
    let mut unknown = None;
    let expr = builtin.replace_all(expr, |captures: &regex::Captures| {
        match &captures[1] {
            "__rate_interval" | "__interval" | "__range" => "5m",
            "__range_s" | "__interval_s" => "300",
            "__range_ms" | "__interval_ms" => "300000",
            other => {
                unknown = Some(other.to_string());
                ""
            }
        }
        .to_string()
    });
    if let Some(name) = unknown {
        return Err(format!("${name} is not a Grafana variable this check knows; add it to `substitute`"));
    }
    let matcher = Regex::new(r#"(=~|!~)(\s*)"((?:[^"\\]|\\.)*)""#).map_err(|e| e.to_string())?;
    let variable = Regex::new(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::[A-Za-z]+)?\}|\$([A-Za-z_][A-Za-z0-9_]*)")
        .map_err(|e| e.to_string())?;
    let mut undefined = BTreeSet::new();
    let expr = matcher.replace_all(&expr, |captures: &regex::Captures| {
        let value = variable.replace_all(&captures[3], |found: &regex::Captures| {
            let name = found.get(1).or(found.get(2)).map_or("", |m| m.as_str());
            if !variables.contains(name) {
                undefined.insert(name.to_string());
            }
            ".*"
        });
        format!("{}{}\"{value}\"", &captures[1], &captures[2])
    });
    if !undefined.is_empty() {
        return Err(format!(
            "uses {} which the dashboard's templating does not define (it has {})",
            undefined.iter().map(|name| format!("${name}")).collect::<Vec<_>>().join(", "),
            variables.iter().map(|name| format!("${name}")).collect::<Vec<_>>().join(", ")
        ));
    }
    if let Some(left) = variable.find(&expr) {
        return Err(format!(
            "uses {} outside a regex matcher: a multi-value variable must stand in `label=~\"${{…}}\"`",
            left.as_str()
        ));
    }
    Ok(expr.into_owned())
}

/// `expr` without its string literals (label values, regexes), so that names are only those of
/// metrics.
fn without_strings(expr: &str) -> String {
    let Ok(string) = Regex::new(r#""(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`"#) else {
        return expr.to_string();
    };
    string.replace_all(expr, "\"\"").into_owned()
}

fn capdeck_names(expr: &str) -> Vec<String> {
    let Ok(name) = Regex::new(r"\b(capdeck_[a-z_]+)\b") else {
        return Vec::new();
    };
    name.captures_iter(&without_strings(expr)).map(|c| c[1].to_string()).collect()
}

/// Every `capdeck_*` metric the dashboard reads, as `/metrics` exposes it
/// (`capdeck_rotations_total`, `capdeck_approval_wait_seconds_bucket`, `capdeck_leader`).
pub fn dashboard_metric_names() -> BTreeSet<String> {
    let dashboard = load().unwrap_or_else(|why| panic!("{why}"));
    let expressions = expressions(&dashboard).unwrap_or_else(|why| panic!("{why}"));
    expressions.iter().flat_map(|expression| capdeck_names(&expression.expr)).collect()
}

/// One metric row of docs/METRICS.md.
struct Documented {
    kind: String,
    labels: String,
}

/// docs/METRICS.md's table: metric name → type and labels.
fn documented() -> Result<BTreeMap<String, Documented>, String> {
    let path = metrics_doc();
    let text = std::fs::read_to_string(&path).map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    let row = Regex::new(r"^\|\s*`(capdeck_[a-z_]+)`\s*\|\s*([a-z]+)\s*\|([^|]*)\|").map_err(|e| e.to_string())?;
    let out: BTreeMap<_, _> = text
        .lines()
        .filter_map(|line| row.captures(line))
        .map(|c| (c[1].to_string(), Documented { kind: c[2].to_string(), labels: c[3].trim().to_string() }))
        .collect();
    if out.is_empty() {
        return Err(format!("{} has no `| `capdeck_…` | type | labels | what |` rows", path.display()));
    }
    Ok(out)
}

/// The documented metric an exposed name belongs to, or what is wrong with the name.
fn documented_as<'a>(name: &str, doc: &'a BTreeMap<String, Documented>) -> Result<(&'a str, &'a Documented), String> {
    if let Some((key, entry)) = doc.get_key_value(name) {
        return if entry.kind == "histogram" {
            Err(format!("{name} is a histogram: read {name}_bucket, {name}_sum or {name}_count"))
        } else {
            Ok((key, entry))
        };
    }
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some((key, entry)) = name.strip_suffix(suffix).and_then(|base| doc.get_key_value(base)) {
            return if entry.kind == "histogram" {
                Ok((key, entry))
            } else {
                Err(format!("{name}: {key} is a {}, it has no {suffix} series", entry.kind))
            };
        }
    }
    let hint = if doc.contains_key(&format!("{name}_total")) {
        format!(" (a counter is exposed as {name}_total)")
    } else {
        String::new()
    };
    Err(format!("{name} is not in docs/METRICS.md{hint}; document it there or fix the name"))
}

/// How many times `name` occurs in `expr` as a metric, and how many of those are right inside one
/// of `wrappers` (a regex ending just before the metric name).
fn occurrences(expr: &str, name: &str, wrapper: &str) -> Result<(usize, usize), String> {
    let expr = without_strings(expr);
    let name = regex::escape(name);
    let all = Regex::new(&format!(r"\b{name}\b")).map_err(|e| e.to_string())?;
    let wrapped = Regex::new(&format!(r"{wrapper}\s*{name}\b")).map_err(|e| e.to_string())?;
    Ok((all.find_iter(&expr).count(), wrapped.find_iter(&expr).count()))
}

/// Process-level gauges: each replica's own state, summed or counted over replicas. Every other
/// gauge is computed by every replica from the same objects and is taken `max` over replicas.
const PER_REPLICA: [&str; 3] = ["capdeck_leader", "capdeck_ready", "capdeck_build_info"];

/// The dashboard's shape: valid JSON, its uid and title, the `datasource` variable, and every
/// panel with a title, the `${datasource}` data source, an id of its own and a place on the grid
/// that no other panel takes.
fn check_shape(dashboard: &Value, problems: &mut Vec<String>) {
    if dashboard["uid"] != "capdeck" {
        problems.push(format!("uid is {}, not \"capdeck\"", dashboard["uid"]));
    }
    if dashboard["title"] != "capdeck" {
        problems.push(format!("title is {}, not \"capdeck\"", dashboard["title"]));
    }
    let templating = dashboard["templating"]["list"].as_array().cloned().unwrap_or_default();
    let datasource = templating.iter().find(|variable| variable["name"] == "datasource");
    match datasource {
        Some(variable) if variable["type"] == "datasource" && variable["query"] == "prometheus" => {}
        _ => problems.push("templating has no variable `datasource` of type datasource, query prometheus".into()),
    }
    for variable in templating.iter().filter(|variable| variable["type"] == "query") {
        if variable["datasource"]["uid"] != "${datasource}" {
            problems.push(format!("variable {} does not query ${{datasource}}", variable["name"]));
        }
    }
    let mut ids = BTreeMap::new();
    for panel in panels(dashboard) {
        let name = title(panel);
        if panel["title"].as_str().is_none_or(|title| title.trim().is_empty()) {
            problems.push(format!("a panel (id {}) has no title", panel["id"]));
        }
        match panel["id"].as_u64() {
            Some(id) => {
                if let Some(other) = ids.insert(id, name.clone()) {
                    problems.push(format!("panels {other:?} and {name:?} share the id {id}"));
                }
            }
            None => problems.push(format!("panel {name:?} has no numeric id")),
        }
        if is_row(panel) {
            continue;
        }
        if panel["datasource"]["uid"] != "${datasource}" {
            problems.push(format!("panel {name:?} has data source {}, not ${{datasource}}", panel["datasource"]));
        }
        let targets = panel["targets"].as_array().cloned().unwrap_or_default();
        if targets.is_empty() {
            problems.push(format!("panel {name:?} has no targets"));
        }
        for target in &targets {
            if !target["datasource"].is_null() && target["datasource"]["uid"] != "${datasource}" {
                problems.push(format!("a target of panel {name:?} has data source {}", target["datasource"]));
            }
        }
    }
    // The grid: top-level panels share one, a collapsed row's panels another.
    let mut grids: Vec<Vec<&Value>> = vec![dashboard["panels"].as_array().into_iter().flatten().collect()];
    for panel in panels(dashboard) {
        if let Some(nested) = panel["panels"].as_array().filter(|nested| !nested.is_empty()) {
            grids.push(nested.iter().collect());
        }
    }
    for grid in grids {
        let mut placed: Vec<(String, [u64; 4])> = Vec::new();
        for panel in grid {
            let g = &panel["gridPos"];
            let (Some(x), Some(y), Some(w), Some(h)) =
                (g["x"].as_u64(), g["y"].as_u64(), g["w"].as_u64(), g["h"].as_u64())
            else {
                problems.push(format!("panel {:?} has no gridPos x, y, w, h", title(panel)));
                continue;
            };
            if w == 0 || h == 0 || x + w > 24 {
                problems.push(format!("panel {:?} does not fit the 24-column grid: {g}", title(panel)));
            }
            for (other, [ox, oy, ow, oh]) in &placed {
                if x < ox + ow && *ox < x + w && y < oy + oh && *oy < y + h {
                    problems.push(format!("panels {other:?} and {:?} overlap on the grid", title(panel)));
                }
            }
            placed.push((title(panel), [x, y, w, h]));
        }
    }
}

/// `tools::dashboard::every_metric_is_documented`.
pub fn every_metric_is_documented() -> Result<(), Failed> {
    // The walk finds the panels a collapsed row holds.
    let collapsed = serde_json::json!({"panels": [
        {"type": "row", "id": 1, "title": "r", "collapsed": true,
         "panels": [{"id": 2, "title": "p", "targets": [{"expr": "capdeck_leader"}]}]}
    ]});
    let found = expressions(&collapsed)?;
    if found.len() != 1 || found[0].expr != "capdeck_leader" {
        return Err("the panel walk misses the panels inside a collapsed row".into());
    }

    let dashboard = load()?;
    let doc = documented()?;
    let mut problems = Vec::new();
    check_shape(&dashboard, &mut problems);
    let expressions = expressions(&dashboard)?;
    let mut read = BTreeSet::new();
    for expression in &expressions {
        for name in capdeck_names(&expression.expr) {
            match documented_as(&name, &doc) {
                Ok((base, _)) => {
                    read.insert(base.to_string());
                }
                Err(why) => problems.push(format!("{}: {why}", expression.place)),
            }
        }
        // How each metric is read.
        for name in capdeck_names(&expression.expr).into_iter().collect::<BTreeSet<_>>() {
            let Ok((base, entry)) = documented_as(&name, &doc) else { continue };
            let counter = entry.kind == "counter"
                || name.ends_with("_bucket")
                || name.ends_with("_count")
                || name.ends_with("_sum");
            let (wrapper, rule) = if counter {
                (r"\b(rate|increase)\(", "a counter is read through rate(…[…]) or increase(…[…])")
            } else if PER_REPLICA.contains(&base) {
                (r"\b(sum|count|max)(\s+by\s*\([^()]*\))?\s*\(", "a replica's own gauge is summed, counted or max'ed")
            } else {
                (
                    r"\bmax(\s+by\s*\([^()]*\))?\s*\(",
                    "every replica exports this gauge from the same objects: take max or max by (…) over replicas",
                )
            };
            let (all, wrapped) = occurrences(&expression.expr, &name, wrapper)?;
            if expression.place.starts_with("variable") {
                continue;
            }
            if wrapped != all {
                problems.push(format!("{}: {name}: {rule}: {}", expression.place, expression.expr));
            }
            if entry.labels.contains("namespace") && !expression.expr.contains("namespace=~\"$namespace\"") {
                problems.push(format!(
                    "{}: {name} has the application namespace; filter it with namespace=~\"$namespace\"",
                    expression.place
                ));
            }
        }
    }
    for name in doc.keys() {
        if !read.contains(name) {
            problems.push(format!("docs/METRICS.md lists {name} but no panel reads it"));
        }
    }
    let exposed = dashboard_metric_names();
    if exposed.is_empty() {
        problems.push("the dashboard reads no capdeck_ metric".into());
    }
    if problems.is_empty() {
        eprintln!(
            "{}: {} expressions, {} metric names, {} panels",
            path().display(),
            expressions.len(),
            exposed.len(),
            panels(&dashboard).len()
        );
        Ok(())
    } else {
        Err(format!("{}:\n  {}", path().display(), problems.join("\n  ")).into())
    }
}

/// `tools::promtool::dashboard_expressions_parse`: every expression, variables put in, as a
/// recording rule `dashboard:expr_N`, through `promtool check rules`.
pub fn dashboard_expressions_parse(promtool: &Path) -> Result<(), Failed> {
    let dashboard = load()?;
    let variables = variables(&dashboard);
    let expressions = expressions(&dashboard)?;
    if expressions.is_empty() {
        return Err(format!("{} has no PromQL expressions", path().display()).into());
    }
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    let mut index = Vec::new();
    for (n, expression) in expressions.iter().enumerate() {
        let promql = substitute(&expression.expr, &variables).map_err(|why| format!("{}: {why}", expression.place))?;
        // A JSON string is a YAML double-quoted scalar.
        let quoted = serde_json::to_string(&promql).map_err(|e| e.to_string())?;
        rules.push_str(&format!("      - record: dashboard:expr_{n}\n        expr: {quoted}\n"));
        index.push(format!("dashboard:expr_{n} = {}: {promql}", expression.place));
    }
    let dir = tempfile::Builder::new().prefix("capdeck-dashboard-").tempdir().map_err(|e| e.to_string())?;
    let file = dir.path().join("dashboard.rules.yaml");
    std::fs::write(&file, &rules).map_err(|error| format!("cannot write {}: {error}", file.display()))?;
    let file_arg = file.to_str().ok_or_else(|| format!("{} is not UTF-8", file.display()))?;
    let output = ops_tools::run(promtool, &["check", "rules", file_arg])
        .map_err(|why| format!("{why}\nthe rules:\n  {}", index.join("\n  ")))?;
    let expected = format!("SUCCESS: {} rules found", expressions.len());
    if !output.contains(&expected) {
        return Err(format!("promtool did not say {expected:?}:\n{output}").into());
    }
    eprintln!("{}: promtool parsed {} expressions", path().display(), expressions.len());
    Ok(())
}
