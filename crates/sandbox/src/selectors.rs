//! Label selectors (full syntax) and field selectors (`=`, `==`, `!=` on dotted paths).

use serde_json::Value;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelSelector(Vec<Requirement>);

/// Split on commas that are not inside parentheses.
fn split_terms(text: &str) -> Vec<&str> {
    let mut terms = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (index, ch) in text.char_indices() {
        match ch {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                terms.push(&text[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    terms.push(&text[start..]);
    terms.into_iter().map(str::trim).filter(|term| !term.is_empty()).collect()
}

fn valid_key(key: &str) -> bool {
    !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
}

impl LabelSelector {
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut requirements = Vec::new();
        for term in split_terms(text) {
            let requirement = if let Some(key) = term.strip_prefix('!') {
                Requirement::NotExists(key.trim().to_string())
            } else if let Some(open) = term.find('(') {
                let close = term
                    .rfind(')')
                    .filter(|close| *close > open)
                    .ok_or_else(|| format!("unclosed parenthesis in {term:?}"))?;
                let head = term[..open].trim();
                let values: Vec<String> =
                    term[open + 1..close].split(',').map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).collect();
                if let Some(key) = head.strip_suffix("notin") {
                    Requirement::NotIn(key.trim().to_string(), values)
                } else if let Some(key) = head.strip_suffix("in") {
                    Requirement::In(key.trim().to_string(), values)
                } else {
                    return Err(format!("expected 'in' or 'notin' in {term:?}"));
                }
            } else if let Some((key, value)) = term.split_once("!=") {
                Requirement::NotEquals(key.trim().to_string(), value.trim().to_string())
            } else if let Some((key, value)) = term.split_once("==").or_else(|| term.split_once('=')) {
                Requirement::Equals(key.trim().to_string(), value.trim().to_string())
            } else {
                Requirement::Exists(term.to_string())
            };
            let key = match &requirement {
                Requirement::Equals(key, _)
                | Requirement::NotEquals(key, _)
                | Requirement::In(key, _)
                | Requirement::NotIn(key, _)
                | Requirement::Exists(key)
                | Requirement::NotExists(key) => key,
            };
            if !valid_key(key) {
                return Err(format!("invalid label key {key:?}"));
            }
            requirements.push(requirement);
        }
        Ok(Self(requirements))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn matches(&self, object: &Value) -> bool {
        let labels = object.pointer("/metadata/labels");
        let label = |key: &str| labels.and_then(|labels| labels.get(key)).and_then(Value::as_str);
        self.0.iter().all(|requirement| match requirement {
            Requirement::Equals(key, value) => label(key) == Some(value.as_str()),
            Requirement::NotEquals(key, value) => label(key) != Some(value.as_str()),
            Requirement::In(key, values) => label(key).is_some_and(|actual| values.iter().any(|v| v == actual)),
            Requirement::NotIn(key, values) => label(key).is_none_or(|actual| values.iter().all(|v| v != actual)),
            Requirement::Exists(key) => label(key).is_some(),
            Requirement::NotExists(key) => label(key).is_none(),
        })
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut terms = Vec::new();
        for term in split_terms(text) {
            let (path, equal, value) = if let Some((path, value)) = term.split_once("!=") {
                (path, false, value)
            } else if let Some((path, value)) = term.split_once("==").or_else(|| term.split_once('=')) {
                (path, true, value)
            } else {
                return Err(format!("invalid field selector term {term:?}: expected field=value"));
            };
            terms.push((path.trim().to_string(), equal, value.trim().to_string()));
        }
        Ok(Self(terms))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The one name `metadata.name=NAME` selects, if it does: the list reads that key alone, as
    /// kube-apiserver does.
    pub fn exact_name(&self) -> Option<&str> {
        self.0.iter().find(|(path, equal, _)| *equal && path == "metadata.name").map(|(_, _, name)| name.as_str())
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(path, equal, expected)| {
            let pointer = format!("/{}", path.replace('.', "/"));
            let actual = match object.pointer(&pointer) {
                Some(Value::String(text)) => text.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            (actual == *expected) == *equal
        })
    }
}

/// Both selectors of a list or watch request.
#[derive(Clone, Debug, Default)]
pub struct Selectors {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Selectors {
    pub fn matches(&self, object: &Value) -> bool {
        self.labels.matches(object) && self.fields.matches(object)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn object() -> Value {
        json!({"metadata": {"name": "a", "namespace": "ns", "labels": {"app": "cap", "tier": "web"}}, "type": "Opaque", "spec": {"replicas": 3}})
    }

    #[test]
    fn label_selector_syntax() {
        let cases = [
            ("app=cap", true),
            ("app==cap", true),
            ("app!=cap", false),
            ("app in (cap, other)", true),
            ("app notin (cap)", false),
            ("tier,app=cap", true),
            ("!tier", false),
            ("missing", false),
            ("!missing", true),
            ("app=cap,tier in (db)", false),
            ("missing notin (x)", true),
            ("", true),
        ];
        for (selector, expected) in cases {
            assert_eq!(LabelSelector::parse(selector).expect(selector).matches(&object()), expected, "{selector}");
        }
        assert!(LabelSelector::parse("app in (a").is_err());
        assert!(LabelSelector::parse("bad key=x").is_err());
    }

    #[test]
    fn field_selector_on_dotted_paths() {
        let cases = [
            ("metadata.name=a", true),
            ("metadata.name!=a", false),
            ("metadata.namespace==ns,type=Opaque", true),
            ("spec.replicas=3", true),
            ("spec.missing=", true),
            ("type=kubernetes.io/tls", false),
        ];
        for (selector, expected) in cases {
            assert_eq!(FieldSelector::parse(selector).expect(selector).matches(&object()), expected, "{selector}");
        }
        assert!(FieldSelector::parse("nonsense").is_err());
    }
}
