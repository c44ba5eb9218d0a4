//! The Helm chart's pieces that must not drift from the rest of the repository (no helm needed;
//! helm itself checks the chart in `tests/real_cluster/chart.rs`):
//! - the RBAC rules, the admission policies and capdeck's CRDs are copies of `assets/`;
//! - every engine flag is a value (or refused for a stated reason);
//! - the README's values table is generated from `values.yaml`.
//!
//! Regenerate the copies and the table: `CAPDECK_UPDATE_ASSETS=1 cargo test --test sandbox chart::`.

use std::collections::BTreeSet;
use std::path::Path;

const CHART: &str = "charts/capdeck";

fn updating() -> bool {
    std::env::var_os("CAPDECK_UPDATE_ASSETS").is_some()
}

/// `assets/...` → `charts/capdeck/files/...`: what the chart's templates read with `.Files.Get`.
fn copies() -> Vec<(String, String)> {
    let mut pairs: Vec<(String, String)> = ["clusterrole.yaml", "role.yaml", "admissionpolicy.yaml"]
        .iter()
        .map(|file| (format!("assets/deploy/{file}"), format!("{CHART}/files/deploy/{file}")))
        .collect();
    for crd in capdeck::api::crds::all() {
        let file = capdeck::api::crds::file_name(&crd);
        if crd.spec.group == "capdeck.dev" {
            pairs.push((format!("assets/crds/{file}"), format!("{CHART}/files/crds/{file}")));
        }
    }
    pairs
}

#[test]
fn the_chart_carries_the_manifests_rules_policies_and_crds_verbatim() {
    let mut drift = Vec::new();
    for (source, copy) in copies() {
        let wanted = std::fs::read_to_string(&source).expect("asset");
        if updating() {
            std::fs::write(&copy, &wanted).expect("write the chart's copy");
        } else if std::fs::read_to_string(&copy).ok().as_deref() != Some(wanted.as_str()) {
            drift.push(copy);
        }
    }
    assert!(
        drift.is_empty(),
        "the chart's copies drifted from assets/ (run CAPDECK_UPDATE_ASSETS=1 cargo test --test sandbox chart::): {drift:?}"
    );
    // Nothing stale: every file there is a copy of something.
    let expected: BTreeSet<String> = copies().into_iter().map(|(_, copy)| copy).collect();
    for dir in ["files/deploy", "files/crds"] {
        for entry in std::fs::read_dir(Path::new(CHART).join(dir)).expect("dir") {
            let path = format!("{CHART}/{dir}/{}", entry.expect("entry").file_name().to_string_lossy());
            assert!(expected.contains(&path), "{path} is no copy of an asset: remove it");
        }
    }
}

/// Engine flags the chart does not offer as a value, and why.
const NOT_VALUES: &[(&str, &str)] = &[
    ("notify", "a URL never goes in values: `notify` takes Secret references (--notify-secret)"),
    ("lease-namespace", "the Lease lives in the release's namespace ($POD_NAMESPACE)"),
];

#[test]
fn every_engine_flag_is_a_chart_value() {
    let command = <capdeck::cli::EngineArgs as clap::Args>::augment_args(clap::Command::new("engine"));
    let helpers = std::fs::read_to_string(format!("{CHART}/templates/_helpers.tpl")).expect("helpers");
    let mut missing = Vec::new();
    for argument in command.get_arguments() {
        let Some(long) = argument.get_long() else { continue };
        if NOT_VALUES.iter().any(|(flag, _)| *flag == long) {
            continue;
        }
        if !helpers.contains(&format!("--{long}=")) {
            missing.push(long.to_string());
        }
    }
    assert!(missing.is_empty(), "engine flags the chart's Deployment does not pass (add a value): {missing:?}");
    for (flag, _) in NOT_VALUES {
        assert!(
            command.get_arguments().any(|argument| argument.get_long() == Some(flag)),
            "--{flag} is no engine flag any more: drop it from NOT_VALUES"
        );
    }
    // The scope flags live in ClusterTarget.
    assert!(helpers.contains("--namespace=") && helpers.contains("--all-namespaces"));
}

/// One row of the values table: the dotted key, its default as YAML-ish text, the description.
fn value_rows(values: &str) -> Vec<(String, String, String)> {
    let tree: serde_json::Value = serde_saphyr::from_str(values).expect("values.yaml parses");
    let mut rows = Vec::new();
    let mut path: Vec<(usize, String)> = Vec::new();
    let mut description: Option<String> = None;
    for line in values.lines() {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        if let Some(text) = trimmed.strip_prefix("# -- ") {
            description = Some(text.trim().to_string());
            continue;
        }
        if trimmed.starts_with('#') || trimmed.starts_with('-') || trimmed.is_empty() {
            continue;
        }
        let Some((key, _)) = trimmed.split_once(':') else { continue };
        while path.last().is_some_and(|(depth, _)| *depth >= indent) {
            path.pop();
        }
        path.push((indent, key.to_string()));
        if let Some(text) = description.take() {
            let keys: Vec<&str> = path.iter().map(|(_, key)| key.as_str()).collect();
            let value = keys.iter().try_fold(&tree, |node, key| node.get(key)).expect("described key exists");
            let default = match value {
                serde_json::Value::String(text) => format!("`{text:?}`"),
                other => format!("`{other}`"),
            };
            rows.push((keys.join("."), default, text));
        }
    }
    rows
}

fn values_table(values: &str) -> String {
    let mut table = String::from("| value | default | what |\n|---|---|---|\n");
    for (key, default, text) in value_rows(values) {
        table.push_str(&format!("| `{key}` | {} | {} |\n", default.replace('|', "\\|"), text.replace('|', "\\|")));
    }
    table
}

#[test]
fn the_chart_readme_values_table_is_generated_from_values_yaml() {
    let values = std::fs::read_to_string(format!("{CHART}/values.yaml")).expect("values");
    let readme_path = format!("{CHART}/README.md");
    let readme = std::fs::read_to_string(&readme_path).expect("the chart's README");
    let (start, end) = ("<!-- values:start -->\n", "<!-- values:end -->");
    let (head, rest) = readme.split_once(start).expect("README has <!-- values:start -->");
    let (_, tail) = rest.split_once(end).expect("README has <!-- values:end -->");
    let wanted = format!("{head}{start}{}{end}{tail}", values_table(&values));
    if updating() {
        std::fs::write(&readme_path, &wanted).expect("write README");
    } else {
        assert!(
            readme == wanted,
            "charts/capdeck/README.md's values table is stale (run CAPDECK_UPDATE_ASSETS=1 cargo test --test sandbox chart::)"
        );
    }
    // Every leaf value is documented, so the table is the whole list.
    let rows: BTreeSet<String> = value_rows(&values).into_iter().map(|(key, _, _)| key).collect();
    let tree: serde_json::Value = serde_saphyr::from_str(&values).expect("values.yaml parses");
    let mut undocumented = Vec::new();
    leaves(&tree, String::new(), &rows, &mut undocumented);
    assert!(undocumented.is_empty(), "values without a `# --` description: {undocumented:?}");
}

/// Keys of `tree` not covered by a documented key (itself or a documented parent).
fn leaves(tree: &serde_json::Value, prefix: String, rows: &BTreeSet<String>, out: &mut Vec<String>) {
    if rows.contains(&prefix) {
        return;
    }
    match tree {
        serde_json::Value::Object(map) if !map.is_empty() => {
            for (key, value) in map {
                let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
                leaves(value, path, rows, out);
            }
        }
        _ => out.push(prefix),
    }
}

#[test]
fn the_values_table_reads_nested_keys_and_defaults() {
    let values =
        "# -- top\na: 1\nb:\n  # -- nested\n  c: \"x\"\n  d:\n    # -- deeper\n    e: []\n# -- map\nf:\n  g: true\n";
    let rows = value_rows(values);
    assert_eq!(
        rows,
        vec![
            ("a".to_string(), "`1`".to_string(), "top".to_string()),
            ("b.c".to_string(), "`\"x\"`".to_string(), "nested".to_string()),
            ("b.d.e".to_string(), "`[]`".to_string(), "deeper".to_string()),
            ("f".to_string(), "`{\"g\":true}`".to_string(), "map".to_string()),
        ]
    );
}
