//! A minimal structural-schema validation of custom resources against their CRD's
//! `openAPIV3Schema`, as kube-apiserver does on create and update: `properties` and `items` are
//! walked, strings checked against `maxLength` (in characters, as the apiserver counts runes) and
//! `pattern`. A value the update leaves as it was is not checked again (kube-apiserver's
//! validation ratcheting), so an object stored before a limit existed can still be written.

use serde_json::Value;

/// One refusal: the field path, the `causes[].reason` and the message (kube-apiserver's wording).
#[derive(Debug, PartialEq)]
pub struct Violation {
    pub field: String,
    pub reason: &'static str,
    pub message: String,
}

/// Validate `object` against the schema of `version` in `crd`; `old` is the stored object on an
/// update. Unknown schema keywords are ignored (the sandbox checks less than the apiserver, never
/// more).
pub fn validate(crd: &Value, version: &str, object: &Value, old: Option<&Value>) -> Vec<Violation> {
    let schema = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .and_then(|versions| versions.iter().find(|v| v.get("name").and_then(Value::as_str) == Some(version)))
        .and_then(|v| v.pointer("/schema/openAPIV3Schema"));
    let mut out = Vec::new();
    if let Some(schema) = schema {
        for part in ["spec", "status"] {
            if let (Some(sub), Some(value)) = (schema.pointer(&format!("/properties/{part}")), object.get(part)) {
                walk(sub, value, old.and_then(|old| old.get(part)), part.to_string(), &mut out);
            }
        }
    }
    out
}

/// Whether the schema of `version` in `crd` has CEL rules (`x-kubernetes-validations`) anywhere.
pub fn has_rules(crd: &Value, version: &str) -> bool {
    fn any_rules(value: &Value) -> bool {
        match value {
            Value::Object(map) => map.contains_key("x-kubernetes-validations") || map.values().any(any_rules),
            Value::Array(items) => items.iter().any(any_rules),
            _ => false,
        }
    }
    crd.pointer("/spec/versions")
        .and_then(Value::as_array)
        .and_then(|versions| versions.iter().find(|v| v.get("name").and_then(Value::as_str) == Some(version)))
        .and_then(|v| v.pointer("/schema/openAPIV3Schema"))
        .is_some_and(any_rules)
}

fn walk(schema: &Value, value: &Value, old: Option<&Value>, path: String, out: &mut Vec<Violation>) {
    if old == Some(value) {
        return; // ratcheting: unchanged values are not validated again
    }
    match value {
        Value::String(text) => check_string(schema, text, path, out),
        Value::Object(map) => {
            let Some(properties) = schema.get("properties").and_then(Value::as_object) else { return };
            for (key, child) in map {
                if let Some(sub) = properties.get(key) {
                    walk(sub, child, old.and_then(|o| o.get(key)), format!("{path}.{key}"), out);
                }
            }
        }
        Value::Array(items) => {
            let Some(sub) = schema.get("items") else { return };
            for (index, item) in items.iter().enumerate() {
                walk(sub, item, old.and_then(|o| o.get(index)), format!("{path}[{index}]"), out);
            }
        }
        _ => {}
    }
}

fn check_string(schema: &Value, text: &str, path: String, out: &mut Vec<Violation>) {
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64) {
        let length = text.chars().count() as u64;
        if length > max {
            out.push(Violation {
                message: format!("Too long: may not be more than {max} bytes"),
                field: path.clone(),
                reason: "FieldValueTooLong",
            });
            return;
        }
    }
    if let Some(pattern) = schema.get("pattern").and_then(Value::as_str)
        // A pattern the regex crate cannot compile is not enforced (less, never more).
        && let Ok(regex) = regex::Regex::new(pattern)
        && !regex.is_match(text)
    {
        out.push(Violation {
            message: format!("Invalid value: {}: {path} in body should match '{pattern}'", quoted(text)),
            field: path,
            reason: "FieldValueInvalid",
        });
    }
}

/// Go's `%q` of a value, as kube-apiserver prints it in a field error.
fn quoted(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\0' => out.push_str("\\x00"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd() -> Value {
        json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {"properties": {"spec": {
            "properties": {"hold": {"properties": {"reason": {"type": "string", "maxLength": 4, "pattern": "^[^\\x00]*$"}}},
                           "list": {"items": {"type": "string", "maxLength": 2}}}}}}}}]}})
    }

    #[test]
    fn max_length_counts_characters_and_patterns_refuse_nul() {
        let ok = json!({"spec": {"hold": {"reason": "éééé"}}});
        assert!(validate(&crd(), "v1", &ok, None).is_empty());
        let long = json!({"spec": {"hold": {"reason": "abcde"}, "list": ["ok", "bad"]}});
        let found = validate(&crd(), "v1", &long, None);
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].field, "spec.hold.reason");
        assert_eq!(found[1].field, "spec.list[1]");
        let nul = json!({"spec": {"hold": {"reason": "a\u{0}"}}});
        let found = validate(&crd(), "v1", &nul, None);
        assert_eq!(found[0].reason, "FieldValueInvalid");
        // Unchanged on an update: not checked again.
        assert!(validate(&crd(), "v1", &long, Some(&long)).is_empty());
    }
}
