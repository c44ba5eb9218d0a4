//! Just enough protobuf to read what kubectl's imperative commands send that way:
//! `kubectl auth whoami` / `auth can-i` (reviews) and `kubectl create namespace|secret|configmap`.
//! The `k8s\0` envelope (runtime.Unknown) is decoded, then the few fields those kinds use.
//! Other protobuf bodies are refused with 415 (docs/SANDBOX.md).

use serde_json::{Value, json};

const MAGIC: &[u8] = b"k8s\0";

fn varint(bytes: &[u8], index: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*index)?;
        *index += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// The length-delimited fields of a message: (field number, bytes). Other wire types are skipped.
fn fields(bytes: &[u8]) -> Option<Vec<(u64, &[u8])>> {
    let mut out = Vec::new();
    let mut index = 0;
    while index < bytes.len() {
        let key = varint(bytes, &mut index)?;
        match key & 7 {
            0 => {
                varint(bytes, &mut index)?;
            }
            1 => index += 8,
            5 => index += 4,
            2 => {
                let length = usize::try_from(varint(bytes, &mut index)?).ok()?;
                let end = index.checked_add(length)?;
                out.push((key >> 3, bytes.get(index..end)?));
                index = end;
            }
            _ => return None,
        }
    }
    Some(out)
}

fn field<'a>(message: &[(u64, &'a [u8])], number: u64) -> Option<&'a [u8]> {
    message.iter().find(|(n, _)| *n == number).map(|(_, bytes)| *bytes)
}

fn text(message: &[(u64, &[u8])], number: u64) -> Option<String> {
    field(message, number).and_then(|bytes| std::str::from_utf8(bytes).ok()).map(str::to_string)
}

/// A protobuf `map<string, T>`: repeated entries {1 key, 2 value}.
fn map_entries<'a>(message: &[(u64, &'a [u8])], number: u64) -> Option<Vec<(String, &'a [u8])>> {
    let mut entries = Vec::new();
    for (_, entry) in message.iter().filter(|(n, _)| *n == number) {
        let entry = fields(entry)?;
        entries.push((text(&entry, 1)?, field(&entry, 2).unwrap_or_default()));
    }
    Some(entries)
}

fn string_map(message: &[(u64, &[u8])], number: u64) -> Option<Value> {
    let mut map = serde_json::Map::new();
    for (key, value) in map_entries(message, number)? {
        map.insert(key, Value::String(std::str::from_utf8(value).ok()?.to_string()));
    }
    Some(Value::Object(map))
}

/// ObjectMeta: 1 name, 2 generateName, 3 namespace, 11 labels, 12 annotations.
fn object_meta(bytes: &[u8]) -> Option<Value> {
    let meta = fields(bytes)?;
    let mut out = json!({});
    for (number, key) in [(1, "name"), (2, "generateName"), (3, "namespace")] {
        if let Some(value) = text(&meta, number).filter(|v| !v.is_empty()) {
            out[key] = Value::String(value);
        }
    }
    for (number, key) in [(11, "labels"), (12, "annotations")] {
        let map = string_map(&meta, number)?;
        if map.as_object().is_some_and(|m| !m.is_empty()) {
            out[key] = map;
        }
    }
    Some(out)
}

/// Decode a protobuf body kubectl sends to create an object of a kind we can read.
pub fn decode_object(body: &[u8]) -> Option<Value> {
    use base64::Engine as _;
    let envelope = fields(body.strip_prefix(MAGIC)?)?;
    let type_meta = fields(field(&envelope, 1)?)?;
    let api_version = text(&type_meta, 1)?;
    let kind = text(&type_meta, 2)?;
    let raw = fields(field(&envelope, 2).unwrap_or_default())?;
    let metadata = object_meta(field(&raw, 1).unwrap_or_default())?;
    let mut object = json!({"apiVersion": api_version, "kind": kind, "metadata": metadata});
    match kind.as_str() {
        "Namespace" => {}
        // Secret: 2 data map<string, bytes>, 3 type, 4 stringData.
        "Secret" => {
            let mut data = serde_json::Map::new();
            for (key, value) in map_entries(&raw, 2)? {
                data.insert(key, Value::String(base64::engine::general_purpose::STANDARD.encode(value)));
            }
            object["data"] = Value::Object(data);
            object["stringData"] = string_map(&raw, 4)?;
            if let Some(type_) = text(&raw, 3).filter(|t| !t.is_empty()) {
                object["type"] = Value::String(type_);
            }
        }
        // ConfigMap: 2 data map<string, string>, 3 binaryData map<string, bytes>.
        "ConfigMap" => {
            object["data"] = string_map(&raw, 2)?;
        }
        _ => return None,
    }
    Some(object)
}

/// The JSON form of a protobuf-encoded review, or `None` if this is not one we can read.
pub fn decode_review(body: &[u8]) -> Option<Value> {
    let envelope = fields(body.strip_prefix(MAGIC)?)?;
    // runtime.Unknown: 1 typeMeta {1 apiVersion, 2 kind}, 2 raw.
    let type_meta = fields(field(&envelope, 1)?)?;
    let kind = std::str::from_utf8(field(&type_meta, 2)?).ok()?;
    let raw = fields(field(&envelope, 2).unwrap_or_default())?;
    match kind {
        "SelfSubjectReview" => Some(json!({"kind": kind})),
        "SelfSubjectAccessReview" => {
            // spec = 2; spec.resourceAttributes = 1 {1 namespace, 2 verb, 3 group, 4 version, 5 resource, 6 subresource, 7 name}
            let spec = fields(field(&raw, 2)?)?;
            let attributes = fields(field(&spec, 1).unwrap_or_default())?;
            let text =
                |n| field(&attributes, n).and_then(|b| std::str::from_utf8(b).ok()).unwrap_or_default().to_string();
            Some(json!({"kind": kind, "spec": {"resourceAttributes": {
                "namespace": text(1), "verb": text(2), "group": text(3), "version": text(4),
                "resource": text(5), "subresource": text(6), "name": text(7),
            }}}))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(fields: &[(u64, Vec<u8>)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (number, bytes) in fields {
            out.push(u8::try_from((number << 3) | 2).expect("small field number"));
            out.push(u8::try_from(bytes.len()).expect("short field"));
            out.extend_from_slice(bytes);
        }
        out
    }

    #[test]
    fn reads_an_access_review() {
        let attributes = message(&[
            (1, b"cap-shop".to_vec()),
            (2, b"patch".to_vec()),
            (3, b"capdeck.dev".to_vec()),
            (5, b"rotationbatches".to_vec()),
        ]);
        let raw = message(&[(1, vec![]), (2, message(&[(1, attributes)]))]);
        let type_meta = message(&[(1, b"authorization.k8s.io/v1".to_vec()), (2, b"SelfSubjectAccessReview".to_vec())]);
        let mut body = MAGIC.to_vec();
        body.extend(message(&[(1, type_meta), (2, raw)]));
        let review = decode_review(&body).expect("decodes");
        assert_eq!(review["spec"]["resourceAttributes"]["verb"], "patch");
        assert_eq!(review["spec"]["resourceAttributes"]["resource"], "rotationbatches");
        assert_eq!(review["spec"]["resourceAttributes"]["namespace"], "cap-shop");
    }

    #[test]
    fn reads_a_secret_create() {
        let entry = message(&[(1, b"password".to_vec()), (2, b"hunter2".to_vec())]);
        let meta = message(&[(1, b"creds".to_vec()), (3, b"cap-shop".to_vec())]);
        let raw = message(&[(1, meta), (2, entry), (3, b"Opaque".to_vec())]);
        let type_meta = message(&[(1, b"v1".to_vec()), (2, b"Secret".to_vec())]);
        let mut body = MAGIC.to_vec();
        body.extend(message(&[(1, type_meta), (2, raw)]));
        let object = decode_object(&body).expect("decodes");
        assert_eq!(object["metadata"]["name"], "creds");
        assert_eq!(object["metadata"]["namespace"], "cap-shop");
        assert_eq!(object["data"]["password"], "aHVudGVyMg==");
        assert_eq!(object["type"], "Opaque");
    }

    #[test]
    fn garbage_is_not_a_review() {
        assert_eq!(decode_review(b"k8s\0\xff\xff\xff"), None);
        assert_eq!(decode_review(b"{}"), None);
    }
}

/// Protobuf writing, for the one document kubectl < 1.29 insists on in protobuf form.
fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(u8::try_from(value & 0x7f).unwrap_or(0) | 0x80);
        value >>= 7;
    }
    out.push(u8::try_from(value).unwrap_or(0));
}

fn put_bytes(out: &mut Vec<u8>, field: u64, bytes: &[u8]) {
    put_varint(out, (field << 3) | 2);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// A minimal OpenAPI v2 document (gnostic `openapi_v2.Document`): per resource a path whose
/// `patch` operation carries `x-kubernetes-group-version-kind` and a `fieldValidation` query
/// parameter. That is what kubectl 1.27/1.28 check before trusting the server with field
/// validation; without it their `apply` fails. No schemas are included.
pub fn openapi_v2(resources: &[(String, String, String, String)]) -> Vec<u8> {
    let mut paths = Vec::new();
    for (path, group, version, kind) in resources {
        // QueryParameterSubSchema {2 in, 4 name, 6 type} in NonBodyParameter(3) in Parameter(2) in ParametersItem(1).
        let mut query = Vec::new();
        put_bytes(&mut query, 2, b"query");
        put_bytes(&mut query, 4, b"fieldValidation");
        put_bytes(&mut query, 6, b"string");
        let mut non_body = Vec::new();
        put_bytes(&mut non_body, 3, &query);
        let mut parameter = Vec::new();
        put_bytes(&mut parameter, 2, &non_body);
        let mut item = Vec::new();
        put_bytes(&mut item, 1, &parameter);
        // NamedAny {1 name, 2 Any {2 yaml}}
        let yaml = format!("group: \"{group}\"\nkind: {kind}\nversion: {version}\n");
        let mut any = Vec::new();
        put_bytes(&mut any, 2, yaml.as_bytes());
        let mut extension = Vec::new();
        put_bytes(&mut extension, 1, b"x-kubernetes-group-version-kind");
        put_bytes(&mut extension, 2, &any);
        // Operation {8 parameters, 13 vendor_extension}
        let mut operation = Vec::new();
        put_bytes(&mut operation, 8, &item);
        put_bytes(&mut operation, 13, &extension);
        // PathItem {8 patch}; NamedPathItem {1 name, 2 value}
        let mut path_item = Vec::new();
        put_bytes(&mut path_item, 8, &operation);
        let mut named = Vec::new();
        put_bytes(&mut named, 1, path.as_bytes());
        put_bytes(&mut named, 2, &path_item);
        put_bytes(&mut paths, 1, &named);
    }
    // Document {1 swagger, 2 info {1 title, 2 version}, 8 paths}
    let mut info = Vec::new();
    put_bytes(&mut info, 1, b"Kubernetes (capdeck sandbox)");
    put_bytes(&mut info, 2, b"v1.33.0");
    let mut document = Vec::new();
    put_bytes(&mut document, 1, b"2.0");
    put_bytes(&mut document, 2, &info);
    put_bytes(&mut document, 8, &paths);
    document
}

#[cfg(test)]
mod openapi_tests {
    use super::*;

    #[test]
    fn openapi_v2_document_reads_back() {
        let document = openapi_v2(&[(
            "/api/v1/namespaces/{namespace}/configmaps/{name}".into(),
            String::new(),
            "v1".into(),
            "ConfigMap".into(),
        )]);
        let top = fields(&document).expect("document");
        assert_eq!(text(&top, 1).as_deref(), Some("2.0"));
        let paths = fields(field(&top, 8).expect("paths")).expect("paths");
        let named = fields(field(&paths, 1).expect("path")).expect("named");
        assert_eq!(text(&named, 1).as_deref(), Some("/api/v1/namespaces/{namespace}/configmaps/{name}"));
        let item = fields(field(&named, 2).expect("item")).expect("item");
        let operation = fields(field(&item, 8).expect("patch")).expect("operation");
        let extension = fields(field(&operation, 13).expect("extension")).expect("extension");
        assert_eq!(text(&extension, 1).as_deref(), Some("x-kubernetes-group-version-kind"));
    }
}
