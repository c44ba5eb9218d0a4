//! capdeck's Go-compatible JSON codec against outputs of Go's real `encoding/json`
//! (tests/fixtures/gojson/cases.json, produced by oracle.go with Go 1.23; see regenerate.sh).

use base64::Engine as _;
use capdeck::vcap::gojson::{self, GoValue};

#[derive(serde::Deserialize)]
struct Case {
    kind: String,
    input: String,
    output: Option<String>,
    error: bool,
}

#[test]
fn codec_matches_go_encoding_json_on_the_oracle_corpus() {
    let text = std::fs::read_to_string("tests/fixtures/gojson/cases.json").expect("corpus is checked in");
    let cases: Vec<Case> = serde_json::from_str(&text).expect("corpus is JSON");
    assert!(cases.len() > 1000, "corpus shrank to {}", cases.len());
    let mut failures = Vec::new();
    for case in &cases {
        let input = base64::engine::general_purpose::STANDARD.decode(&case.input).expect("base64");
        let ours = match case.kind.as_str() {
            "roundtrip" => gojson::decode(&input).map(|value| value.to_go_json()).ok(),
            "string" => Some(GoValue::String(input.clone()).to_go_json()),
            other => panic!("unknown case kind {other}"),
        };
        if ours != case.output || case.error != ours.is_none() {
            failures.push(format!(
                "{} {:?}: go={:?} capdeck={:?}",
                case.kind,
                String::from_utf8_lossy(&input),
                case.output,
                ours
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from Go:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
