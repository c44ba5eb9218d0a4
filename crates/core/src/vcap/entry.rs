//! One `VCAP_SERVICES` entry from one binding Secret, as the CAP Operator builds it
//! (upstream `internal/controller/deployment.go`, VCAP_SERVICES assembly), with two deliberate differences:
//! - a `.metadata` container property that is not a JSON object is an error for that Secret
//!   (upstream panics on it), and
//! - a Secret with neither `.metadata` nor `credentials` (servicebinding.io flat key/value)
//!   is accepted: every data key becomes a credential (upstream refuses such Secrets).

use std::collections::BTreeMap;

use super::gojson::{self, GoJsonError, GoMap, GoValue};
use crate::api::ServiceInfo;

/// Secret data as bytes, keyed by data key (what `Secret.data` holds after base64 decoding).
pub type SecretData = BTreeMap<String, Vec<u8>>;

const METADATA_KEY: &str = ".metadata";
const CREDENTIALS_KEY: &str = "credentials";

/// Why a binding Secret cannot become a `VCAP_SERVICES` entry. Messages follow upstream's wording
/// and never contain credential values (only keys and JSON positions).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EntryError {
    #[error("could not parse {part} from secret {secret}: {source}")]
    Parse {
        part: &'static str,
        secret: String,
        #[source]
        source: GoJsonError,
    },
    #[error("could not parse metadata from secret {secret}: {message}")]
    Metadata { secret: String, message: String },
    #[error("secret {secret}: {part} property {property:?} is a container but its value is not a JSON object")]
    ContainerNotObject { part: &'static str, secret: String, property: String },
    #[error("secret {secret}: credentials are not a JSON object after applying the metadata properties")]
    CredentialsNotObject { secret: String },
    #[error("secret {secret} has no data: neither .metadata, credentials nor key/value pairs")]
    Empty { secret: String },
}

impl EntryError {
    /// True when the Secret's content is malformed (as opposed to simply empty).
    pub fn is_invalid(&self) -> bool {
        !matches!(self, Self::Empty { .. })
    }
}

/// Which layout a binding Secret uses; shown in the console next to the Secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecretLayout {
    /// `.metadata` describes the keys (sap-btp-service-operator).
    Metadata,
    /// One `credentials` key holding a JSON object.
    Credentials,
    /// servicebinding.io: every data key is a credential.
    KeyValue,
}

pub fn layout(data: &SecretData) -> SecretLayout {
    if data.contains_key(METADATA_KEY) {
        SecretLayout::Metadata
    } else if data.contains_key(CREDENTIALS_KEY) {
        SecretLayout::Credentials
    } else {
        SecretLayout::KeyValue
    }
}

/// Build the entry for `service` from the data of its binding Secret.
pub fn build_entry(service: &ServiceInfo, data: &SecretData) -> Result<GoMap, EntryError> {
    match layout(data) {
        SecretLayout::Metadata => {
            let metadata = parse_metadata(service, &data[METADATA_KEY])?;
            entry_from_metadata(service, data, &metadata)
        }
        SecretLayout::Credentials => {
            let credentials = gojson::decode(&data[CREDENTIALS_KEY]).map_err(|source| EntryError::Parse {
                part: "credentials",
                secret: service.secret.clone(),
                source,
            })?;
            // Go decodes into map[string]any: an object or null; anything else is an error.
            match credentials {
                GoValue::Object(_) | GoValue::Null => Ok(credentials_entry(service, credentials)),
                other => Err(EntryError::Parse {
                    part: "credentials",
                    secret: service.secret.clone(),
                    source: GoJsonError {
                        message: format!(
                            "cannot unmarshal {} into Go value of type map[string]interface {{}}",
                            go_type_name(&other)
                        ),
                        offset: 0,
                    },
                }),
            }
        }
        SecretLayout::KeyValue => {
            if data.is_empty() {
                return Err(EntryError::Empty { secret: service.secret.clone() });
            }
            let credentials = data.iter().map(|(key, value)| (key.clone(), flat_value(value))).collect();
            Ok(credentials_entry(service, GoValue::Object(credentials)))
        }
    }
}

/// A flat key/value credential: embedded as JSON when it is a JSON object or array, else text.
fn flat_value(bytes: &[u8]) -> GoValue {
    match gojson::decode(bytes) {
        Ok(value @ (GoValue::Object(_) | GoValue::Array(_))) => value,
        _ => GoValue::String(bytes.to_vec()),
    }
}

/// The entry of the `credentials` path: exactly these five keys.
fn credentials_entry(service: &ServiceInfo, credentials: GoValue) -> GoMap {
    let mut entry = GoMap::new();
    entry.insert("credentials".into(), credentials);
    entry.insert("instance_name".into(), GoValue::from(service.name.as_str()));
    entry.insert("label".into(), GoValue::from(service.class.as_str()));
    entry.insert("name".into(), GoValue::from(service.name.as_str()));
    // The app router finds xsuaa by tag, so the class is a tag.
    entry.insert("tags".into(), GoValue::Array(vec![GoValue::from(service.class.as_str())]));
    entry
}

#[derive(Clone, Debug, Default, PartialEq)]
struct Metadata {
    metadata_properties: Vec<Property>,
    credential_properties: Vec<Property>,
}

#[derive(Clone, Debug, Default, PartialEq)]
struct Property {
    name: String,
    source_name: String,
    format: String,
    container: bool,
}

impl Property {
    fn key(&self) -> &str {
        if self.source_name.is_empty() { &self.name } else { &self.source_name }
    }
}

/// Decode `.metadata` like Go's `json.Unmarshal` into the upstream struct: keys match
/// case-insensitively, unknown keys are ignored, `null` leaves a field at its zero value, and a
/// value of the wrong type is an error.
fn parse_metadata(service: &ServiceInfo, bytes: &[u8]) -> Result<Metadata, EntryError> {
    let metadata_error = |message: String| EntryError::Metadata { secret: service.secret.clone(), message };
    let value = gojson::decode(bytes).map_err(|source| EntryError::Parse {
        part: "metadata",
        secret: service.secret.clone(),
        source,
    })?;
    let mut metadata = Metadata::default();
    let object = match value {
        GoValue::Null => return Ok(metadata),
        GoValue::Object(object) => object,
        other => return Err(metadata_error(format!("expected an object, found {}", go_type_name(&other)))),
    };
    for (key, value) in &object {
        let target = if key.eq_ignore_ascii_case("metaDataProperties") {
            &mut metadata.metadata_properties
        } else if key.eq_ignore_ascii_case("credentialProperties") {
            &mut metadata.credential_properties
        } else {
            continue;
        };
        *target = match value {
            GoValue::Null => Vec::new(),
            GoValue::Array(items) => items
                .iter()
                .map(|item| parse_property(item).map_err(|message| metadata_error(format!("{key}: {message}"))))
                .collect::<Result<_, _>>()?,
            other => return Err(metadata_error(format!("{key}: expected an array, found {}", go_type_name(other)))),
        };
    }
    Ok(metadata)
}

fn parse_property(value: &GoValue) -> Result<Property, String> {
    let mut property = Property::default();
    let object = match value {
        GoValue::Null => return Ok(property),
        GoValue::Object(object) => object,
        other => return Err(format!("expected a property object, found {}", go_type_name(other))),
    };
    for (key, value) in object {
        let field = key.to_ascii_lowercase();
        match (field.as_str(), value) {
            (_, GoValue::Null) => {}
            ("name", GoValue::String(text)) => property.name = String::from_utf8_lossy(text).into_owned(),
            ("sourcename", GoValue::String(text)) => {
                property.source_name = String::from_utf8_lossy(text).into_owned();
            }
            ("format", GoValue::String(text)) => property.format = String::from_utf8_lossy(text).into_owned(),
            ("container", GoValue::Bool(flag)) => property.container = *flag,
            ("name" | "sourcename" | "format" | "container", other) => {
                return Err(format!("property field {key} has the wrong type ({})", go_type_name(other)));
            }
            _ => {}
        }
    }
    Ok(property)
}

/// What moving one property did to its target map.
enum Moved {
    /// The value was stored under the property's name.
    Stored,
    /// A JSON container property: its object replaces the whole target.
    Replaced(GoMap),
    /// The format is neither `text` nor `json`: ignored, as upstream does.
    Ignored,
}

fn move_property(
    part: &'static str,
    service: &ServiceInfo,
    property: &Property,
    data: &SecretData,
    target: &mut GoMap,
) -> Result<Moved, EntryError> {
    let source = data.get(property.key());
    match property.format.as_str() {
        "text" => {
            // Go: string(data[key]); a missing key gives "".
            let bytes = source.cloned().unwrap_or_default();
            target.insert(property.name.clone(), GoValue::String(bytes));
            Ok(Moved::Stored)
        }
        "json" => {
            let value = gojson::decode(source.map(Vec::as_slice).unwrap_or_default())
                .map_err(|source| EntryError::Parse { part, secret: service.secret.clone(), source })?;
            if property.container {
                match value {
                    GoValue::Object(object) => Ok(Moved::Replaced(object)),
                    _ => Err(EntryError::ContainerNotObject {
                        part,
                        secret: service.secret.clone(),
                        property: property.name.clone(),
                    }),
                }
            } else {
                target.insert(property.name.clone(), value);
                Ok(Moved::Stored)
            }
        }
        _ => Ok(Moved::Ignored),
    }
}

fn entry_from_metadata(service: &ServiceInfo, data: &SecretData, metadata: &Metadata) -> Result<GoMap, EntryError> {
    let mut entry = GoMap::new();
    entry.insert("credentials".into(), GoValue::Object(GoMap::new()));
    for property in &metadata.metadata_properties {
        if let Moved::Replaced(object) = move_property("metadata", service, property, data, &mut entry)? {
            // Degenerate but upstream: a container metadata property replaces the whole entry.
            entry = object;
        }
    }
    if !metadata.credential_properties.is_empty() {
        let mut credentials = match entry.remove("credentials") {
            Some(GoValue::Object(credentials)) => credentials,
            _ => {
                return Err(EntryError::CredentialsNotObject { secret: service.secret.clone() });
            }
        };
        for property in &metadata.credential_properties {
            if let Moved::Replaced(object) = move_property("credentials", service, property, data, &mut credentials)? {
                credentials = object;
            }
            // A container ends the credential properties, whatever its format.
            if property.container {
                break;
            }
        }
        entry.insert("credentials".into(), GoValue::Object(credentials));
    }
    if !entry.contains_key("label") {
        entry.insert("label".into(), GoValue::from(service.class.as_str()));
    }
    let name = entry.get("instance_name").cloned().unwrap_or_else(|| GoValue::from(service.name.as_str()));
    entry.insert("name".into(), name);
    Ok(entry)
}

fn go_type_name(value: &GoValue) -> &'static str {
    match value {
        GoValue::Null => "null",
        GoValue::Bool(_) => "bool",
        GoValue::Number(_) => "number",
        GoValue::String(_) => "string",
        GoValue::Array(_) => "array",
        GoValue::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(name: &str, class: &str) -> ServiceInfo {
        ServiceInfo {
            name: name.into(),
            secret: format!("{name}-bind"),
            class: class.into(),
            subscription_dependency: None,
        }
    }

    fn data(pairs: &[(&str, &str)]) -> SecretData {
        pairs.iter().map(|(key, value)| ((*key).to_string(), value.as_bytes().to_vec())).collect()
    }

    fn entry_json(service: &ServiceInfo, data: &SecretData) -> String {
        GoValue::Object(build_entry(service, data).expect("entry")).to_go_json()
    }

    const BTP_METADATA: &str = r#"{"metaDataProperties":[{"name":"instance_name","format":"text"},{"name":"instance_guid","format":"text"},{"name":"plan","format":"text"},{"name":"label","format":"text"},{"name":"type","format":"text"},{"name":"tags","format":"json"}],"credentialProperties":[{"name":"clientid","format":"text"},{"name":"clientsecret","format":"text"},{"name":"uaa","format":"json"}]}"#;

    #[test]
    fn metadata_path_moves_text_and_json_properties() {
        let secret = data(&[
            (".metadata", BTP_METADATA),
            ("instance_name", "my-uaa"),
            ("instance_guid", "1234"),
            ("plan", "application"),
            ("label", "xsuaa"),
            ("type", "xsuaa"),
            ("tags", r#"["xsuaa","auth"]"#),
            ("clientid", "sb-app"),
            ("clientsecret", "s3cret"),
            ("uaa", r#"{"url":"https://x","xsappname":"app!b1"}"#),
            ("unlisted", "ignored"),
        ]);
        assert_eq!(
            entry_json(&service("app-uaa", "xsuaa"), &secret),
            r#"{"credentials":{"clientid":"sb-app","clientsecret":"s3cret","uaa":{"url":"https://x","xsappname":"app!b1"}},"instance_guid":"1234","instance_name":"my-uaa","label":"xsuaa","name":"my-uaa","plan":"application","tags":["xsuaa","auth"],"type":"xsuaa"}"#
        );
    }

    #[test]
    fn metadata_keys_match_case_insensitively() {
        let metadata = r#"{"METADATAPROPERTIES":[{"NAME":"plan","Format":"text"}],"credentialproperties":[{"name":"k","FORMAT":"text"}]}"#;
        let secret = data(&[(".metadata", metadata), ("plan", "lite"), ("k", "v")]);
        assert_eq!(
            entry_json(&service("svc", "dest"), &secret),
            r#"{"credentials":{"k":"v"},"label":"dest","name":"svc","plan":"lite"}"#
        );
    }

    #[test]
    fn source_name_selects_the_data_key() {
        let metadata = r#"{"credentialProperties":[{"name":"password","sourceName":"pw","format":"text"}]}"#;
        let secret = data(&[(".metadata", metadata), ("pw", "x"), ("password", "wrong")]);
        assert_eq!(
            entry_json(&service("svc", "db"), &secret),
            r#"{"credentials":{"password":"x"},"label":"db","name":"svc"}"#
        );
    }

    #[test]
    fn missing_text_key_gives_empty_string_and_missing_json_key_is_an_error() {
        let metadata = r#"{"credentialProperties":[{"name":"a","format":"text"}]}"#;
        assert_eq!(
            entry_json(&service("svc", "c"), &data(&[(".metadata", metadata)])),
            r#"{"credentials":{"a":""},"label":"c","name":"svc"}"#
        );
        let metadata = r#"{"credentialProperties":[{"name":"a","format":"json"}]}"#;
        let error = build_entry(&service("svc", "c"), &data(&[(".metadata", metadata)])).expect_err("missing json");
        assert_eq!(
            error.to_string(),
            "could not parse credentials from secret svc-bind: unexpected end of JSON input (at byte 0)"
        );
    }

    #[test]
    fn unknown_format_is_ignored() {
        let metadata = r#"{"credentialProperties":[{"name":"a","format":"binary"},{"name":"b"}]}"#;
        let secret = data(&[(".metadata", metadata), ("a", "1"), ("b", "2")]);
        assert_eq!(entry_json(&service("svc", "c"), &secret), r#"{"credentials":{},"label":"c","name":"svc"}"#);
    }

    #[test]
    fn credential_container_replaces_credentials_and_stops() {
        let metadata = r#"{"credentialProperties":[{"name":"early","format":"text"},{"name":"all","format":"json","container":true},{"name":"late","format":"text"}]}"#;
        let secret = data(&[(".metadata", metadata), ("early", "e"), ("all", r#"{"x":1,"y":"z"}"#), ("late", "l")]);
        assert_eq!(
            entry_json(&service("svc", "c"), &secret),
            r#"{"credentials":{"x":1,"y":"z"},"label":"c","name":"svc"}"#
        );
    }

    #[test]
    fn text_container_stores_a_string_and_stops() {
        let metadata = r#"{"credentialProperties":[{"name":"all","format":"text","container":true},{"name":"late","format":"text"}]}"#;
        let secret = data(&[(".metadata", metadata), ("all", "raw"), ("late", "l")]);
        assert_eq!(
            entry_json(&service("svc", "c"), &secret),
            r#"{"credentials":{"all":"raw"},"label":"c","name":"svc"}"#
        );
    }

    #[test]
    fn metadata_container_replaces_the_whole_entry() {
        let metadata = r#"{"metaDataProperties":[{"name":"plan","format":"text"},{"name":"meta","format":"json","container":true},{"name":"after","format":"text"}]}"#;
        let secret = data(&[(".metadata", metadata), ("plan", "p"), ("meta", r#"{"label":"custom"}"#), ("after", "a")]);
        // `plan` and `credentials` are lost with the replaced entry; `label` from the container stays.
        assert_eq!(entry_json(&service("svc", "c"), &secret), r#"{"after":"a","label":"custom","name":"svc"}"#);
    }

    #[test]
    fn container_that_is_not_an_object_is_an_error_not_a_panic() {
        for (value, part) in [("[1,2]", "credentials"), ("null", "credentials"), ("\"text\"", "credentials")] {
            let metadata = r#"{"credentialProperties":[{"name":"all","format":"json","container":true}]}"#;
            let error = build_entry(&service("svc", "c"), &data(&[(".metadata", metadata), ("all", value)]))
                .expect_err("not an object");
            assert!(matches!(error, EntryError::ContainerNotObject { part: p, .. } if p == part), "{error}");
        }
        let metadata = r#"{"metaDataProperties":[{"name":"m","format":"json","container":true}]}"#;
        let error =
            build_entry(&service("svc", "c"), &data(&[(".metadata", metadata), ("m", "7")])).expect_err("number");
        assert!(error.to_string().contains("metadata property \"m\" is a container"), "{error}");
    }

    #[test]
    fn credentials_replaced_by_metadata_container_without_object_is_an_error() {
        let metadata = r#"{"metaDataProperties":[{"name":"m","format":"json","container":true}],"credentialProperties":[{"name":"k","format":"text"}]}"#;
        let error = build_entry(
            &service("svc", "c"),
            &data(&[(".metadata", metadata), ("m", r#"{"credentials":"str"}"#), ("k", "v")]),
        )
        .expect_err("credentials not an object");
        assert_eq!(error, EntryError::CredentialsNotObject { secret: "svc-bind".into() });
    }

    #[test]
    fn label_defaults_to_class_and_name_follows_instance_name_of_any_type() {
        let metadata = r#"{"metaDataProperties":[{"name":"instance_name","format":"json"}]}"#;
        let secret = data(&[(".metadata", metadata), ("instance_name", "null")]);
        assert_eq!(
            entry_json(&service("svc", "xsuaa"), &secret),
            r#"{"credentials":{},"instance_name":null,"label":"xsuaa","name":null}"#
        );
    }

    #[test]
    fn broken_metadata_names_the_secret_and_never_the_values() {
        let secret = data(&[(".metadata", "{not json"), ("password", "hunter2")]);
        let error = build_entry(&service("svc", "c"), &secret).expect_err("broken");
        let text = error.to_string();
        assert!(text.starts_with("could not parse metadata from secret svc-bind:"), "{text}");
        assert!(!text.contains("hunter2"));
        let error = build_entry(&service("svc", "c"), &data(&[(".metadata", "[]")])).expect_err("array");
        assert!(error.to_string().contains("expected an object"), "{error}");
        let error =
            build_entry(&service("svc", "c"), &data(&[(".metadata", r#"{"credentialProperties":[{"name":5}]}"#)]))
                .expect_err("wrong type");
        assert!(error.to_string().contains("wrong type"), "{error}");
    }

    #[test]
    fn null_metadata_and_null_properties_are_zero_values() {
        assert_eq!(
            entry_json(&service("svc", "c"), &data(&[(".metadata", "null")])),
            r#"{"credentials":{},"label":"c","name":"svc"}"#
        );
        let metadata = r#"{"credentialProperties":[null, {"name":null,"format":"text"}]}"#;
        assert_eq!(
            entry_json(&service("svc", "c"), &data(&[(".metadata", metadata)])),
            r#"{"credentials":{"":""},"label":"c","name":"svc"}"#
        );
    }

    #[test]
    fn credentials_path_builds_the_fixed_entry() {
        let secret = data(&[
            ("credentials", r#"{"url":"https://d","clientid":"c","nested":{"b":2.50,"a":1.0}}"#),
            ("other", "x"),
        ]);
        assert_eq!(
            entry_json(&service("dest", "destination"), &secret),
            r#"{"credentials":{"clientid":"c","nested":{"a":1,"b":2.5},"url":"https://d"},"instance_name":"dest","label":"destination","name":"dest","tags":["destination"]}"#
        );
    }

    #[test]
    fn credentials_path_accepts_null_and_refuses_non_objects() {
        assert_eq!(
            entry_json(&service("s", "c"), &data(&[("credentials", "null")])),
            r#"{"credentials":null,"instance_name":"s","label":"c","name":"s","tags":["c"]}"#
        );
        for bad in ["[1]", "\"s\"", "12", "{", ""] {
            let error = build_entry(&service("s", "c"), &data(&[("credentials", bad)])).expect_err(bad);
            assert!(error.to_string().starts_with("could not parse credentials from secret s-bind"), "{error}");
        }
    }

    #[test]
    fn flat_key_value_secret_becomes_credentials() {
        let secret = data(&[
            ("type", "postgresql"),
            ("uri", "postgres://h"),
            ("port", "5432"),
            ("user", r#"{"name":"a"}"#),
            ("hosts", r#"["a","b"]"#),
            ("flag", "true"),
        ]);
        assert_eq!(
            entry_json(&service("db", "postgresql-db"), &secret),
            r#"{"credentials":{"flag":"true","hosts":["a","b"],"port":"5432","type":"postgresql","uri":"postgres://h","user":{"name":"a"}},"instance_name":"db","label":"postgresql-db","name":"db","tags":["postgresql-db"]}"#
        );
    }

    #[test]
    fn empty_secret_is_an_error() {
        let error = build_entry(&service("s", "c"), &SecretData::new()).expect_err("empty");
        assert!(!error.is_invalid());
        assert!(error.to_string().contains("has no data"));
    }

    #[test]
    fn binary_values_are_kept_as_go_strings() {
        let mut secret = data(&[(".metadata", r#"{"credentialProperties":[{"name":"key","format":"text"}]}"#)]);
        secret.insert("key".into(), vec![0xff, 0x00, b'<']);
        assert_eq!(
            entry_json(&service("s", "c"), &secret),
            r#"{"credentials":{"key":"\ufffd\u0000\u003c"},"label":"c","name":"s"}"#
        );
    }

    #[test]
    fn layout_is_detected() {
        assert_eq!(layout(&data(&[(".metadata", "{}"), ("credentials", "{}")])), SecretLayout::Metadata);
        assert_eq!(layout(&data(&[("credentials", "{}")])), SecretLayout::Credentials);
        assert_eq!(layout(&data(&[("a", "b")])), SecretLayout::KeyValue);
    }
}
