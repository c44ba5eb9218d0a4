//! Property tests: the Go-compatible codec never panics, always writes valid JSON, and what it
//! writes decodes back to the same value (with Go's U+FFFD replacement for invalid UTF-8).

use capdeck::vcap::gojson::{self, GoMap, GoValue};
use proptest::prelude::*;

fn go_value() -> impl Strategy<Value = GoValue> {
    let leaf = prop_oneof![
        Just(GoValue::Null),
        any::<bool>().prop_map(GoValue::Bool),
        any::<f64>().prop_filter("JSON has no NaN or infinity", |f| f.is_finite()).prop_map(GoValue::Number),
        proptest::collection::vec(any::<u8>(), 0..24).prop_map(GoValue::String),
        "\\PC{0,12}".prop_map(|s: String| GoValue::String(s.into_bytes())),
        prop_oneof![Just("<>&"), Just("\u{2028}\u{2029}"), Just("\u{0}\u{8}\u{c}\u{1f}\u{7f}")]
            .prop_map(|s| GoValue::String(s.as_bytes().to_vec())),
    ];
    leaf.prop_recursive(5, 64, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(GoValue::Array),
            proptest::collection::btree_map("\\PC{0,6}", inner, 0..6)
                .prop_map(|m| GoValue::Object(m.into_iter().collect::<GoMap>())),
        ]
    })
}

/// What Go's decoder makes of a value's strings: each byte of invalid UTF-8 becomes U+FFFD.
fn as_go_decodes_it(value: &GoValue) -> GoValue {
    match value {
        GoValue::String(bytes) => {
            let mut out = Vec::new();
            let mut index = 0;
            while index < bytes.len() {
                let (ch, size) = gojson::decode_rune(&bytes[index..]);
                let mut buf = [0u8; 4];
                out.extend_from_slice(ch.unwrap_or('\u{fffd}').encode_utf8(&mut buf).as_bytes());
                index += size;
            }
            GoValue::String(out)
        }
        GoValue::Array(items) => GoValue::Array(items.iter().map(as_go_decodes_it).collect()),
        GoValue::Object(map) => GoValue::Object(map.iter().map(|(k, v)| (k.clone(), as_go_decodes_it(v))).collect()),
        other => other.clone(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn encoder_output_is_valid_json(value in go_value()) {
        let text = value.to_go_json();
        prop_assert!(serde_json::from_str::<serde_json::Value>(&text).is_ok(), "invalid JSON: {text}");
        prop_assert!(!text.contains(['\n', '\u{2028}', '\u{2029}', '<', '>', '&']), "unescaped character in {text}");
    }

    #[test]
    fn encoded_values_round_trip(value in go_value()) {
        let text = value.to_go_json();
        let decoded = gojson::decode(text.as_bytes()).expect("own output decodes");
        let normalized = as_go_decodes_it(&value);
        prop_assert_eq!(&decoded, &normalized);
        // Re-encoding is stable once strings are valid UTF-8 (Go writes raw U+FFFD then).
        prop_assert_eq!(decoded.to_go_json(), normalized.to_go_json());
        if normalized == value {
            prop_assert_eq!(decoded.to_go_json(), text);
        }
    }

    #[test]
    fn decoder_never_panics_on_arbitrary_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        if let Ok(value) = gojson::decode(&bytes) {
            let text = value.to_go_json();
            prop_assert!(serde_json::from_str::<serde_json::Value>(&text).is_ok());
        }
    }

    #[test]
    fn decoder_agrees_with_serde_json_on_validity_of_utf8_text(text in "[\\[\\]{}\",:0-9a-z.eE+\\- ]{0,40}") {
        // For valid UTF-8, both parsers must accept and refuse the same inputs.
        let ours = gojson::decode(text.as_bytes()).is_ok();
        let theirs = serde_json::from_str::<serde_json::Value>(&text).is_ok();
        // serde_json accepts numbers beyond float64 (e.g. 1e400 as infinity is refused by Go).
        if !(theirs && !ours && text.contains(['e', 'E'])) {
            prop_assert_eq!(ours, theirs, "{}", text);
        }
    }
}
