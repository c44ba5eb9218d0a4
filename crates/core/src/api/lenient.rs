//! Decoding one object at a time, the way kube-apiserver accepts it.
//!
//! Anyone who may write one object of a kind can write a value that kube-apiserver accepts and a
//! careless decoder does not: a `managedFields[].time` or a Freeze's `until` in year 9999 (past
//! the range of k8s-openapi's `Time`), an integer past `i32`. Decoded as a whole list, one such
//! object fails the list, so a store never becomes ready and the engine stops everywhere.
//! [`Lenient`] decodes each object of a list or watch on its own:
//!
//! - A time past what capdeck can hold is read as the latest time it can hold (year 9999: it
//!   means "forever" to every reader, see [`is_forever`]); an integer past its field's range as the
//!   nearest value in range. Neither is an error: kube-apiserver accepted them.
//! - Anything else that does not decode makes the object [`Undecodable`]: its kind, namespace,
//!   name and the field, with what is wrong said without the value (a Secret's value is a
//!   credential). The caller skips it and names it; the other objects are unaffected.

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// An object of kind `K`, or why it could not be decoded.
#[derive(Clone, Debug)]
pub struct Lenient<K>(pub Result<K, Undecodable>);

/// An object the API returned that does not decode as its kind: named, with the field and what
/// is wrong with it, never its value.
#[derive(Clone, Debug, PartialEq)]
pub struct Undecodable {
    /// What little capdeck reads of any object: name, namespace, uid, resourceVersion, labels,
    /// owners (the watch resumes from the resourceVersion). Boxed: it is most of the size.
    pub metadata: Box<ObjectMeta>,
    /// Where the first field that did not decode is, as a path (`spec.until`,
    /// `status.conditions[0].lastTransitionTime`).
    pub field: String,
    /// What is wrong with it, without the value.
    pub problem: String,
}

impl Undecodable {
    pub fn namespace(&self) -> &str {
        self.metadata.namespace.as_deref().unwrap_or_default()
    }

    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// `field spec.until: expected a string`: what a person reads after the object's name.
    pub fn describe(&self) -> String {
        if self.field.is_empty() { self.problem.clone() } else { format!("field {}: {}", self.field, self.problem) }
    }
}

impl std::fmt::Display for Undecodable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let namespace = self.namespace();
        let at = if namespace.is_empty() { String::new() } else { format!("{namespace}/") };
        write!(f, "{at}{} does not decode ({})", self.name(), self.describe())
    }
}

impl<K> Lenient<K> {
    pub fn into_result(self) -> Result<K, Undecodable> {
        self.0
    }
}

impl<K: DeserializeOwned> Lenient<K> {
    /// Decode one object from its JSON.
    pub fn from_value(value: Value) -> Self {
        Self(decode(value))
    }
}

impl<'de, K: DeserializeOwned> Deserialize<'de> for Lenient<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Any JSON decodes as a `Value`; only what it holds may not fit `K`.
        Value::deserialize(deserializer).map(Self::from_value)
    }
}

/// Written as the object it holds (the answer to a write is decoded leniently too); an object
/// that did not decode cannot be written.
impl<K: serde::Serialize> serde::Serialize for Lenient<K> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.0 {
            Ok(object) => object.serialize(serializer),
            Err(undecodable) => Err(serde::ser::Error::custom(format!("cannot write an object that {undecodable}"))),
        }
    }
}

impl<K: kube::Resource> kube::Resource for Lenient<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn metadata_api() -> bool {
        K::metadata_api()
    }

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }

    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }

    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }

    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        self.0.as_ref().map_or_else(|undecodable| &*undecodable.metadata, K::meta)
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        self.0.as_mut().map_or_else(|undecodable| &mut *undecodable.metadata, K::meta_mut)
    }
}

/// The latest time capdeck holds (`jiff::Timestamp::MAX`, to the second): what a time past it
/// is read as.
pub const LATEST_TIME: &str = "9999-12-30T22:00:00Z";

/// Whether a time means "forever": in the year 9999, the last kube-apiserver accepts.
pub fn is_forever(at: Timestamp) -> bool {
    at.as_second() >= FOREVER_FROM_SECONDS
}

/// A time for people: `forever` for one in year 9999 (kube-apiserver's last), else RFC 3339.
pub fn time_text(at: Timestamp) -> String {
    if is_forever(at) { "forever".into() } else { at.to_string() }
}

/// 9999-01-01T00:00:00Z.
const FOREVER_FROM_SECONDS: i64 = 253_370_764_800;

/// How many out-of-range values one object may hold before it counts as undecodable (each is one
/// more decoding attempt).
const MAX_ADJUSTMENTS: usize = 64;

fn decode<K: DeserializeOwned>(mut value: Value) -> Result<K, Undecodable> {
    for _ in 0..=MAX_ADJUSTMENTS {
        let error = match serde_path_to_error::deserialize::<_, K>(&value) {
            Ok(object) => return Ok(object),
            Err(error) => error,
        };
        let message = error.inner().to_string();
        let found = slot(&mut value, error.path());
        let text = found.as_ref().is_some_and(|slot| slot.is_string());
        let adjusted = found.is_some_and(|slot| bring_into_range(slot, &message));
        if !adjusted {
            // A text that fails its own parser (a time, a quantity): the parser's words quote
            // or describe the value, so only this is said.
            let problem = if text && !message.starts_with("invalid type") && !message.starts_with("unknown variant") {
                "a text that does not parse as this field's type".to_string()
            } else {
                problem(&message)
            };
            return Err(Undecodable {
                metadata: Box::new(minimal_metadata(&value)),
                field: field_path(error.path()),
                problem,
            });
        }
    }
    Err(Undecodable {
        metadata: Box::new(minimal_metadata(&value)),
        field: String::new(),
        problem: format!("more than {MAX_ADJUSTMENTS} values out of range"),
    })
}

/// The value at `path` in `value`, if the path leads to one.
fn slot<'v>(value: &'v mut Value, path: &serde_path_to_error::Path) -> Option<&'v mut Value> {
    use serde_path_to_error::Segment;
    let mut at = value;
    for segment in path.iter() {
        at = match segment {
            Segment::Seq { index } => at.get_mut(*index)?,
            Segment::Map { key } => at.get_mut(key.as_str())?,
            Segment::Enum { .. } | Segment::Unknown => return None,
        };
    }
    Some(at)
}

/// Replace an out-of-range time or integer by the nearest value capdeck holds. False when the
/// value is wrong in another way.
fn bring_into_range(slot: &mut Value, message: &str) -> bool {
    match slot {
        // The path ends above the value (a flattened struct hides the rest of it): every time in
        // this part of the object that is past the range.
        Value::Object(_) | Value::Array(_) => clamp_times_within(slot),
        Value::String(text) => match time_in_range(text) {
            Some(time) => {
                *slot = Value::String(time);
                true
            }
            None => false,
        },
        Value::Number(number) => {
            let Some((min, max)) = integer_bounds(message) else { return false };
            let negative = number.as_i64().is_some_and(|n| n < 0) || number.as_f64().is_some_and(|n| n < 0.0);
            let clamped = if negative { min } else { max };
            // Only a value past the bounds is clamped: an integer in range that failed for another
            // reason (a fraction where an integer belongs) stays an error.
            let past = number.as_i64().map_or_else(
                || number.as_u64().is_none_or(|n| i128::from(n) > max),
                |n| i128::from(n) < min || i128::from(n) > max,
            );
            if !past || number.as_f64().is_some_and(|n| n.fract() != 0.0 && n.abs() < 1e18) {
                return false;
            }
            match serde_json::Number::from_i128(clamped) {
                Some(number) => {
                    *slot = Value::Number(number);
                    true
                }
                None => false,
            }
        }
        _ => false,
    }
}

/// Bring every time under `value` that is past capdeck's range to `LATEST_TIME`; true if one was.
fn clamp_times_within(value: &mut Value) -> bool {
    match value {
        Value::String(text) => match time_in_range(text) {
            Some(time) => {
                *value = Value::String(time);
                true
            }
            None => false,
        },
        // Every one, not only the first: no short-circuit.
        Value::Array(items) => items.iter_mut().map(clamp_times_within).filter(|clamped| *clamped).count() > 0,
        Value::Object(fields) => fields.values_mut().map(clamp_times_within).filter(|clamped| *clamped).count() > 0,
        _ => false,
    }
}

/// An RFC 3339 time kube-apiserver holds and jiff does not, as one jiff reads: a year of 9999
/// (or more: `9999-12-31T23:59:59-23:59` is stored as year 10000) past jiff's last instant is
/// `LATEST_TIME`; more than nine fractional digits (Go keeps them) are cut to nine. `None` for
/// any other text.
fn time_in_range(text: &str) -> Option<String> {
    let year_digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let rest = &text[year_digits..];
    let looks_like_time = year_digits >= 4
        && rest.len() >= 15
        && rest.as_bytes()[0] == b'-'
        && rest.as_bytes().get(6).is_some_and(|b| *b == b'T' || *b == b't');
    if !looks_like_time || text.parse::<Timestamp>().is_ok() {
        return None;
    }
    let year: u64 = text[..year_digits].parse().unwrap_or(u64::MAX);
    if year >= 9999 {
        return Some(LATEST_TIME.to_string());
    }
    // `…:59.123456789123Z`: the fraction past nanoseconds dropped.
    let dot = text.find('.')?;
    let digits = text[dot + 1..].bytes().take_while(u8::is_ascii_digit).count();
    if digits <= 9 {
        return None;
    }
    let cut = format!("{}{}", &text[..dot + 10], &text[dot + 1 + digits..]);
    cut.parse::<Timestamp>().is_ok().then_some(cut)
}

/// The bounds of the integer type a serde message says it expected (`…, expected i32`).
fn integer_bounds(message: &str) -> Option<(i128, i128)> {
    let expected = message.rsplit("expected ").next()?.trim();
    Some(match expected {
        "i8" => (i8::MIN.into(), i8::MAX.into()),
        "i16" => (i16::MIN.into(), i16::MAX.into()),
        "i32" => (i32::MIN.into(), i32::MAX.into()),
        "i64" | "isize" => (i64::MIN.into(), i64::MAX.into()),
        "u8" => (0, u8::MAX.into()),
        "u16" => (0, u16::MAX.into()),
        "u32" => (0, u32::MAX.into()),
        "u64" | "usize" => (0, u64::MAX.into()),
        _ => return None,
    })
}

/// A serde message with the value it quotes left out: `invalid type: string "hunter2", expected
/// i32` → `expected i32`. Field and variant names (the schema's words) are kept.
fn problem(message: &str) -> String {
    let message = message.split(" at line ").next().unwrap_or(message);
    if let Some(at) = message.find("expected ") {
        let what = if message.starts_with("invalid type") {
            "the wrong type"
        } else if message.starts_with("unknown variant") {
            "an unknown value"
        } else {
            "a value out of range"
        };
        return format!("{what}; {}", &message[at..]);
    }
    if message.starts_with("missing field") || message.starts_with("duplicate field") {
        return message.to_string();
    }
    "a value that does not decode".to_string()
}

fn field_path(path: &serde_path_to_error::Path) -> String {
    let text = path.to_string();
    if text == "." { String::new() } else { text }
}

/// Name, namespace, uid, resourceVersion, labels and owners of an object that does not decode
/// (each part only if it decodes itself).
fn minimal_metadata(value: &Value) -> ObjectMeta {
    let Some(metadata) = value.get("metadata") else { return ObjectMeta::default() };
    let text = |key: &str| metadata.get(key).and_then(Value::as_str).map(str::to_string);
    ObjectMeta {
        name: text("name"),
        namespace: text("namespace"),
        uid: text("uid"),
        resource_version: text("resourceVersion"),
        generation: metadata.get("generation").and_then(Value::as_i64),
        labels: metadata.get("labels").and_then(|labels| serde_json::from_value(labels.clone()).ok()),
        owner_references: metadata
            .get("ownerReferences")
            .and_then(|owners| serde_json::from_value::<Vec<OwnerReference>>(owners.clone()).ok()),
        ..ObjectMeta::default()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::Secret;
    use serde_json::json;

    use super::*;
    use crate::api::{DeploymentView, Freeze, RotationBatch};

    fn lenient<K: DeserializeOwned>(value: Value) -> Result<K, Undecodable> {
        Lenient::<K>::from_value(value).into_result()
    }

    #[test]
    fn a_managed_fields_time_in_year_9999_decodes_as_the_latest_time() {
        let secret: Secret = lenient(json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "s", "namespace": "other", "managedFields": [
                {"manager": "kubectl", "operation": "Update", "time": "9999-12-31T23:59:59Z"},
                {"manager": "kubectl", "operation": "Update", "time": "0001-01-01T00:00:00Z"}]},
            "data": {"password": "aHVudGVyMg=="}
        }))
        .expect("decodes");
        let fields = secret.metadata.managed_fields.expect("kept");
        assert_eq!(fields[0].time.as_ref().map(|t| t.0.to_string()), Some("9999-12-30T22:00:00Z".to_string()));
        assert_eq!(fields[1].time.as_ref().map(|t| t.0.to_string()), Some("0001-01-01T00:00:00Z".to_string()));
        assert!(is_forever(fields[0].time.as_ref().expect("time").0));
        assert!(!is_forever(fields[1].time.as_ref().expect("time").0));
    }

    #[test]
    fn a_freeze_until_year_9999_is_forever() {
        let freeze: Freeze = lenient(json!({
            "apiVersion": "capdeck.dev/v1alpha1", "kind": "Freeze",
            "metadata": {"name": "namespace", "namespace": "other"},
            "spec": {"scope": "Namespace", "frozen": {"by": "mallory", "at": "2026-11-27T10:00:00Z", "reason": "r"},
                     "until": "9999-12-31T23:59:59Z"}
        }))
        .expect("decodes");
        assert!(is_forever(freeze.spec.until.0));
        assert!(freeze.active_at("9999-01-01T00:00:00Z".parse().expect("time")));
    }

    #[test]
    fn micro_times_and_integers_past_their_range_are_brought_into_range() {
        let lease: Lease = lenient(json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l", "namespace": "n"},
            "spec": {"renewTime": "9999-12-31T23:59:59.999999Z", "leaseDurationSeconds": 99_999_999_999_i64}
        }))
        .expect("decodes");
        let spec = lease.spec.expect("spec");
        assert_eq!(spec.lease_duration_seconds, Some(i32::MAX));
        assert!(is_forever(spec.renew_time.expect("renew").0));
        let view: DeploymentView = lenient(json!({
            "metadata": {"name": "d", "namespace": "n"},
            "spec": {"replicas": -99_999_999_999_i64},
            "status": {"replicas": 1e30, "conditions": [{"type": "Progressing", "status": "True",
                       "lastUpdateTime": "9999-12-31T23:59:59Z", "lastTransitionTime": "9999-12-31T23:00:00Z"}]}
        }))
        .expect("decodes");
        assert_eq!(view.spec.and_then(|s| s.replicas), Some(i32::MIN));
        assert_eq!(view.status.and_then(|s| s.replicas), Some(i32::MAX));
    }

    #[test]
    fn what_does_not_decode_is_named_with_its_field_and_never_its_value() {
        let batch = lenient::<RotationBatch>(json!({
            "apiVersion": "capdeck.dev/v1alpha1", "kind": "RotationBatch",
            "metadata": {"name": "b", "namespace": "shop", "uid": "u", "resourceVersion": "7"},
            "spec": {"application": "hunter2-app", "secrets": [{"name": "s", "service": "uaa",
                     "rotatedAt": "2026-11-27T10:00:00Z", "dataHash": {"secret": "hunter2"}}],
                     "windowEnd": "2026-11-27T10:00:00Z"}
        }))
        .expect_err("a hash that is an object");
        assert_eq!(batch.field, "spec.secrets[0].dataHash");
        assert_eq!(batch.problem, "the wrong type; expected a string");
        assert_eq!(batch.metadata.resource_version.as_deref(), Some("7"), "the watch resumes from it");
        let text = batch.to_string();
        assert_eq!(text, "shop/b does not decode (field spec.secrets[0].dataHash: the wrong type; expected a string)");
        assert!(!text.contains("hunter2"));
        let time = lenient::<RotationBatch>(json!({
            "metadata": {"name": "b", "namespace": "shop"},
            "spec": {"application": "a", "windowEnd": "hunter2"}
        }))
        .expect_err("no time at all");
        assert_eq!(time.field, "spec.windowEnd");
        assert!(!time.to_string().contains("hunter2"), "{time}");
    }

    #[test]
    fn a_time_under_a_flattened_status_is_brought_into_range_too() {
        let app: crate::api::CAPApplication = lenient(json!({
            "apiVersion": "sme.sap.com/v1alpha1", "kind": "CAPApplication",
            "metadata": {"name": "a", "namespace": "n"},
            "spec": {"btpAppName": "a", "providerSubaccountId": "p", "btp": {"services": []}},
            "status": {"state": "Consistent", "lastFullReconciliationTime": "9999-12-31T23:59:59Z",
                       "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "9999-12-31T23:59:59Z"}]}
        }))
        .expect("decodes");
        let status = app.status.expect("status");
        assert!(status.last_full_reconciliation_time.is_some_and(|t| is_forever(t.0)));
    }

    #[test]
    fn times_kube_apiserver_holds_are_read_however_they_are_written() {
        for (written, read) in [
            ("9999-12-31T23:59:59Z", LATEST_TIME),
            ("10000-01-01T23:58:59Z", LATEST_TIME),
            ("2027-01-01T00:00:00.123456789123Z", "2027-01-01T00:00:00.123456789Z"),
            ("0001-01-01T00:00:00Z", "0001-01-01T00:00:00Z"),
        ] {
            let freeze: Freeze = lenient(json!({
                "metadata": {"name": "f", "namespace": "n"},
                "spec": {"scope": "Namespace", "frozen": {"by": "b", "at": "2026-11-27T10:00:00Z"}, "until": written}
            }))
            .unwrap_or_else(|e| panic!("{written}: {e}"));
            assert_eq!(freeze.spec.until.0, read.parse::<Timestamp>().expect("time"), "{written}");
        }
        let broken = lenient::<Freeze>(json!({
            "metadata": {"name": "f", "namespace": "n"},
            "spec": {"scope": "Namespace", "frozen": {"by": "b", "at": "2026-11-27T10:00:00Z"}, "until": "2026-13-45T99:00:00Z"}
        }))
        .expect_err("no such day");
        assert_eq!(broken.describe(), "field spec.until: a text that does not parse as this field's type");
    }

    #[test]
    fn a_number_in_range_of_the_wrong_shape_is_an_error_not_a_clamp() {
        let error = lenient::<DeploymentView>(json!({"metadata": {"name": "d"}, "spec": {"replicas": 2.5}}))
            .expect_err("a fraction");
        assert_eq!(error.field, "spec.replicas");
        assert!(!error.problem.contains("2.5"), "{}", error.problem);
    }

    #[test]
    fn a_list_decodes_object_by_object() {
        let list: kube::core::ObjectList<Lenient<Secret>> = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "SecretList", "metadata": {"resourceVersion": "9"},
            "items": [
                {"metadata": {"name": "ok", "namespace": "a"}},
                {"metadata": {"name": "bad", "namespace": "b", "creationTimestamp": "not a time"}},
            ]
        }))
        .expect("the list decodes");
        let names: Vec<_> = list
            .items
            .into_iter()
            .map(|item| item.0.map(|s| s.metadata.name.unwrap_or_default()).map_err(|e| e.field))
            .collect();
        assert_eq!(names, [Ok("ok".to_string()), Err("metadata.creationTimestamp".to_string())]);
    }
}
