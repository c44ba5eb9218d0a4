//! X.509 certificates inside a binding Secret's values (a PEM block as the value, or inside a
//! JSON string of it, as in `credentials` or `certificate` keys): when each stops being valid.
//! Only the key and the date leave this module, never the certificate.

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use serde::Serialize;
use serde_json::Value;

const PEM_MARKER: &str = "-----BEGIN CERTIFICATE-----";
/// Nested JSON deeper than this is not searched (a credential is never that deep).
const MAX_DEPTH: usize = 32;

/// The earliest `notAfter` of the certificates under one key of the Secret.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CertificateExpiry {
    pub key: String,
    pub not_after: Timestamp,
}

/// Per key, the earliest `notAfter` of the PEM certificates found in its value. Blocks that do
/// not parse are skipped: the Secret's format is judged elsewhere.
pub fn expiries(data: &BTreeMap<String, Vec<u8>>) -> Vec<CertificateExpiry> {
    data.iter()
        .filter_map(|(key, value)| {
            let text = String::from_utf8_lossy(value);
            if !text.contains(PEM_MARKER) {
                return None;
            }
            let mut found = Vec::new();
            match serde_json::from_str::<Value>(&text) {
                Ok(json) => strings_with_pem(&json, 0, &mut found),
                Err(_) => found.push(text.to_string()),
            }
            let not_after = found.iter().flat_map(|pem| not_after(pem.as_bytes())).min()?;
            Some(CertificateExpiry { key: key.clone(), not_after })
        })
        .collect()
}

fn strings_with_pem(value: &Value, depth: usize, found: &mut Vec<String>) {
    if depth > MAX_DEPTH {
        return;
    }
    match value {
        Value::String(text) if text.contains(PEM_MARKER) => found.push(text.clone()),
        Value::Array(items) => items.iter().for_each(|item| strings_with_pem(item, depth + 1, found)),
        Value::Object(map) => map.values().for_each(|item| strings_with_pem(item, depth + 1, found)),
        _ => {}
    }
}

/// `notAfter` of every certificate in a PEM text.
fn not_after(pem: &[u8]) -> Vec<Timestamp> {
    x509_parser::pem::Pem::iter_from_buffer(pem)
        .filter_map(Result::ok)
        .filter(|block| block.label == "CERTIFICATE")
        .filter_map(|block| {
            let (_, certificate) = x509_parser::parse_x509_certificate(&block.contents).ok()?;
            Timestamp::from_second(certificate.validity().not_after.timestamp()).ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn certificate(year: i32, month: u8, day: u8) -> String {
        let mut params = rcgen::CertificateParams::new(vec!["uaa.example.com".into()]).expect("params");
        params.not_after = rcgen::date_time_ymd(year, month, day);
        let key = rcgen::KeyPair::generate().expect("key");
        params.self_signed(&key).expect("certificate").pem()
    }

    #[test]
    fn finds_certificates_raw_and_inside_json_and_keeps_the_earliest() {
        let raw = certificate(2027, 3, 1);
        let inside = serde_json::json!({"clientid": "sb-1", "certificate": certificate(2026, 12, 24),
                                        "chain": [certificate(2030, 1, 1)]})
        .to_string();
        let data = BTreeMap::from([
            ("tls.crt".to_string(), raw.into_bytes()),
            ("credentials".to_string(), inside.into_bytes()),
            ("clientsecret".to_string(), b"not a certificate".to_vec()),
            ("broken".to_string(), format!("{PEM_MARKER}\nnot base64\n-----END CERTIFICATE-----\n").into_bytes()),
        ]);
        let found = expiries(&data);
        let at = |text: &str| text.parse::<Timestamp>().expect("time");
        assert_eq!(
            found,
            vec![
                CertificateExpiry { key: "credentials".into(), not_after: at("2026-12-24T00:00:00Z") },
                CertificateExpiry { key: "tls.crt".into(), not_after: at("2027-03-01T00:00:00Z") },
            ]
        );
    }
}
