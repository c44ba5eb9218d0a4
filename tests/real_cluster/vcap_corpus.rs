//! Binding Secret shapes for the VCAP corpus story: both formats the Go CAP Operator reads
//! (`credentials` JSON without `.metadata`, and sap-btp-service-operator's `.metadata`), with the
//! encoding corners Go's `encoding/json` treats specially. `generation` is written into every
//! credential value, so a rotation is the same shapes with another generation.

use std::collections::BTreeMap;

/// One binding Secret: its service name (also the Secret's name), its class, and its data.
#[derive(Clone)]
pub struct Shape {
    pub service: String,
    pub class: &'static str,
    pub data: BTreeMap<String, String>,
}

fn shape(service: &str, class: &'static str, data: &[(&str, String)]) -> Shape {
    Shape {
        service: service.to_string(),
        class,
        data: data.iter().map(|(k, v)| ((*k).to_string(), v.clone())).collect(),
    }
}

/// `.metadata` of sap-btp-service-operator: the usual metadata properties, then `credentials`.
fn btp_metadata(credentials: &str) -> String {
    format!(
        r#"{{"metaDataProperties":[{{"name":"instance_name","format":"text"}},{{"name":"instance_guid","format":"text"}},{{"name":"plan","format":"text"}},{{"name":"label","format":"text"}},{{"name":"type","format":"text"}},{{"name":"tags","format":"json"}}],"credentialProperties":{credentials}}}"#
    )
}

fn btp_fields(instance: &str, label: &str, plan: &str, tags: &str) -> Vec<(&'static str, String)> {
    vec![
        ("instance_name", instance.to_string()),
        ("instance_guid", format!("{instance}-0f3c-4c5e-9d1b")),
        ("plan", plan.to_string()),
        ("label", label.to_string()),
        ("type", label.to_string()),
        ("tags", tags.to_string()),
    ]
}

fn with(mut fields: Vec<(&'static str, String)>, more: &[(&'static str, String)]) -> Vec<(&'static str, String)> {
    fields.extend(more.iter().cloned());
    fields
}

/// Secrets without `.metadata`: a `credentials` key holding JSON (the Go operator's path B).
pub fn credentials_json(generation: u32) -> Vec<Shape> {
    let g = generation;
    let large: String = "MIIDdzCCAl+gAwIBAgIEAgAAuTANBgkqhkiG9w0BAQUFADBaMQswCQYDVQQGEwJJRTES".repeat(2_000);
    vec![
        shape(
            "b-simple",
            "xsuaa",
            &[(
                "credentials",
                format!(r#"{{"clientid":"sb-a","clientsecret":"s-{g}","url":"https://uaa.example.com"}}"#),
            )],
        ),
        shape(
            "b-second-xsuaa",
            "xsuaa",
            &[(
                "credentials",
                format!(
                    r#"{{"clientid":"sb-b","clientsecret":"t-{g}","url":"https://uaa2.example.com","xsappname":"b!t1"}}"#
                ),
            )],
        ),
        shape(
            "b-nested",
            "destination",
            &[(
                "credentials",
                format!(
                    r#"{{"uaa":{{"clientid":"d","clientsecret":"s-{g}","nested":{{"deep":[1,2,{{"x":"y"}}]}}}},"uri":"https://destination.example.com"}}"#
                ),
            )],
        ),
        shape(
            "b-unicode",
            "connectivity",
            &[("credentials", format!(r#"{{"user":"Jürgen Müller 日本語 🚀","password":"pässwörd-{g}"}}"#))],
        ),
        shape(
            "b-html",
            "html5-apps-repo",
            &[("credentials", format!(r#"{{"uri":"https://x.example.com/?a=1&b=<2>","password":"p<&>-{g}"}}"#))],
        ),
        shape(
            "b-numbers",
            "hana",
            &[(
                "credentials",
                format!(
                    r#"{{"port":443,"ratio":1.0,"big":1e21,"small":1e-7,"exp":2.5E+3,"huge":12345678901234567890,"negzero":-0.0,"password":"p-{g}"}}"#
                ),
            )],
        ),
        // A changed Secret whose payload stays the same: the generation is in a key path B never reads.
        shape("b-null", "feature-flags", &[("credentials", "null".into()), ("instance_guid", format!("guid-{g}"))]),
        shape(
            "b-empty-object",
            "application-logs",
            &[("credentials", "{}".into()), ("instance_guid", format!("guid-{g}"))],
        ),
        shape(
            "b-large",
            "objectstore",
            &[("credentials", format!(r#"{{"certificate":"{large}","secret_access_key":"k-{g}"}}"#))],
        ),
        shape(
            "b-duplicate-keys",
            "redis-cache",
            &[("credentials", format!(r#"{{"password":"first","password":"second-{g}","port":6379}}"#))],
        ),
        shape(
            "b-line-separators",
            "auditlog",
            &[(
                "credentials",
                format!("{{\"text\":\"a\u{2028}b\u{2029}c\",\"escaped\":\"d\\u2028e\",\"password\":\"p-{g}\"}}"),
            )],
        ),
        shape(
            "b-control-chars",
            "credstore",
            &[("credentials", format!(r#"{{"pem":"line1\nline2\ttab\u0001\u001f","password":"p-{g}"}}"#))],
        ),
        shape(
            "b-escaped-slash",
            "saas-registry",
            &[(
                "credentials",
                format!(
                    r#"{{"url":"https:\/\/registry.example.com\/v1","password":"p-{g}","\u00e9t\u00e9":"summer"}}"#
                ),
            )],
        ),
        shape(
            "b-empty-values",
            "portal",
            &[("credentials", format!(r#"{{"a":"","b":[],"c":{{}},"password":"p-{g}"}}"#))],
        ),
        shape(
            "b-bools",
            "jobscheduler",
            &[("credentials", format!(r#"{{"flags":[true,false,null],"enabled":true,"password":"p-{g}"}}"#))],
        ),
        shape(
            "b-key-order",
            "workflow",
            &[(
                "credentials",
                format!(r#"{{"zeta":1,"Alpha":2,"alpha":3,"_under":4,"10":5,"9":6,"password":"p-{g}"}}"#),
            )],
        ),
    ]
}

/// Secrets with sap-btp-service-operator's `.metadata` (the Go operator's path A).
pub fn with_metadata(generation: u32) -> Vec<Shape> {
    let g = generation;
    let text = |name: &str| format!(r#"{{"name":"{name}","format":"text"}}"#);
    let json = |name: &str| format!(r#"{{"name":"{name}","format":"json"}}"#);
    let large: String = "0123456789abcdef".repeat(8_000);
    let typical = format!("[{},{},{}]", text("clientid"), text("clientsecret"), text("url"));
    vec![
        shape(
            "a-typical",
            "xsuaa",
            &with(
                btp_fields("a-typical-uaa", "xsuaa", "application", r#"["xsuaa"]"#),
                &[
                    (".metadata", btp_metadata(&typical)),
                    ("clientid", "sb-a!t1".into()),
                    ("clientsecret", format!("s-{g}")),
                    ("url", "https://uaa.example.com".into()),
                ],
            ),
        ),
        shape(
            "a-second-xsuaa",
            "xsuaa",
            &with(
                btp_fields("a-broker-uaa", "xsuaa", "broker", r#"["xsuaa","broker"]"#),
                &[
                    (".metadata", btp_metadata(&typical)),
                    ("clientid", "sb-b!b2".into()),
                    ("clientsecret", format!("b-{g}")),
                    ("url", "https://uaa.example.com".into()),
                ],
            ),
        ),
        shape(
            "a-json-credential",
            "destination",
            &with(
                btp_fields("a-dest", "destination", "lite", r#"["destination","conn","destination"]"#),
                &[
                    (".metadata", btp_metadata(&format!("[{},{}]", json("uaa"), text("uri")))),
                    ("uaa", format!(r#"{{"clientid":"d","clientsecret":"s-{g}","tenantmode":"dedicated"}}"#)),
                    ("uri", "https://destination.example.com".into()),
                ],
            ),
        ),
        shape(
            "a-container",
            "hana",
            &with(
                btp_fields("a-hdi", "hana", "hdi-shared", r#"["hana","database","relational"]"#),
                &[
                    (".metadata", btp_metadata(r#"[{"name":"credentials","format":"json","container":true}]"#)),
                    (
                        "credentials",
                        format!(
                            r#"{{"host":"h.example.com","port":"443","password":"p-{g}","certificate":"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"}}"#
                        ),
                    ),
                ],
            ),
        ),
        shape(
            "a-source-name",
            "connectivity",
            &with(
                btp_fields("a-conn", "connectivity", "lite", r#"["connectivity"]"#),
                &[
                    (
                        ".metadata",
                        btp_metadata(
                            r#"[{"name":"user","sourceName":"username","format":"text"},{"name":"password","format":"text"}]"#,
                        ),
                    ),
                    ("username", "conn-user".into()),
                    ("password", format!("p-{g}")),
                ],
            ),
        ),
        shape(
            "a-empty-text",
            "portal",
            &with(
                btp_fields("a-portal", "portal", "standard", "[]"),
                &[
                    (".metadata", btp_metadata(&format!("[{},{}]", text("empty"), text("password")))),
                    ("empty", String::new()),
                    ("password", format!("p-{g}")),
                ],
            ),
        ),
        shape(
            "a-missing-key",
            "auditlog",
            &with(
                btp_fields("a-audit", "auditlog", "oauth2", r#"["auditlog"]"#),
                &[
                    (".metadata", btp_metadata(&format!("[{},{}]", text("not-there"), text("password")))),
                    ("password", format!("p-{g}")),
                ],
            ),
        ),
        shape(
            "a-unknown-format",
            "credstore",
            &with(
                btp_fields("a-cred", "credstore", "standard", "[]"),
                &[
                    (
                        ".metadata",
                        btp_metadata(r#"[{"name":"blob","format":"binary"},{"name":"password","format":"text"}]"#),
                    ),
                    ("blob", "AAEC".into()),
                    ("password", format!("p-{g}")),
                ],
            ),
        ),
        // No `label` among the metadata properties: the class becomes the label.
        shape(
            "a-no-label",
            "jobscheduler",
            &[
                (
                    ".metadata",
                    format!(
                        r#"{{"metaDataProperties":[{}],"credentialProperties":[{}]}}"#,
                        text("instance_name"),
                        text("password")
                    ),
                ),
                ("instance_name", "a-jobs".into()),
                ("password", format!("p-{g}")),
            ],
        ),
        // No `instance_name` either: the service's name becomes the entry's name.
        shape(
            "a-no-instance-name",
            "workflow",
            &[
                (
                    ".metadata",
                    format!(
                        r#"{{"metaDataProperties":[{}],"credentialProperties":[{}]}}"#,
                        text("plan"),
                        text("password")
                    ),
                ),
                ("plan", "standard".into()),
                ("password", format!("p-{g}")),
            ],
        ),
        // Go matches JSON keys case-insensitively (the spelling in its own tests).
        shape(
            "a-lowercase-keys",
            "redis-cache",
            &[
                (
                    ".metadata",
                    format!(
                        r#"{{"metadataProperties":[{}],"CREDENTIALPROPERTIES":[{}]}}"#,
                        text("instance_name"),
                        text("password")
                    ),
                ),
                ("instance_name", "a-redis".into()),
                ("password", format!("p-{g}")),
            ],
        ),
        shape(
            "a-unicode",
            "feature-flags",
            &with(
                btp_fields("a-ff-日本", "feature-flags", "lite", r#"["flags","ünïcödé"]"#),
                &[
                    (".metadata", btp_metadata(&format!("[{},{}]", text("user"), text("password")))),
                    ("user", "Zoë 🚀 <admin> & co".into()),
                    ("password", format!("pä-{g}")),
                ],
            ),
        ),
        shape(
            "a-json-array",
            "html5-apps-repo",
            &with(
                btp_fields("a-html5", "html5-apps-repo", "app-host", r#"["html5"]"#),
                &[
                    (".metadata", btp_metadata(&format!("[{},{}]", json("endpoints"), text("password")))),
                    ("endpoints", r#"[{"url":"https://a"},{"url":"https://b","weight":0.5}]"#.into()),
                    ("password", format!("p-{g}")),
                ],
            ),
        ),
        // A text container replaces the credentials with a string and ends the list.
        shape(
            "a-text-container",
            "application-logs",
            &with(
                btp_fields("a-logs", "application-logs", "lite", "[]"),
                &[
                    (
                        ".metadata",
                        btp_metadata(
                            r#"[{"name":"first","format":"text"},{"name":"raw","format":"text","container":true},{"name":"after","format":"text"}]"#,
                        ),
                    ),
                    ("first", "dropped".into()),
                    ("raw", format!("raw-{g}")),
                    ("after", "never read".into()),
                ],
            ),
        ),
        // A JSON container after other properties discards them and ends the list.
        shape(
            "a-container-after",
            "objectstore",
            &with(
                btp_fields("a-os", "objectstore", "s3-standard", r#"["objectstore"]"#),
                &[
                    (
                        ".metadata",
                        btp_metadata(
                            r#"[{"name":"first","format":"text"},{"name":"all","format":"json","container":true},{"name":"after","format":"text"}]"#,
                        ),
                    ),
                    ("first", "dropped".into()),
                    ("all", format!(r#"{{"bucket":"b","secret_access_key":"k-{g}"}}"#)),
                    ("after", "never read".into()),
                ],
            ),
        ),
        shape(
            "a-large",
            "saas-registry",
            &with(
                btp_fields("a-reg", "saas-registry", "application", r#"["saas"]"#),
                &[
                    (".metadata", btp_metadata(&format!("[{},{}]", text("blob"), text("password")))),
                    ("blob", large),
                    ("password", format!("p-{g}")),
                ],
            ),
        ),
        shape(
            "a-html-names",
            "smart-search",
            &with(
                btp_fields("a-search", "smart-search", "default", "[]"),
                &[
                    (".metadata", btp_metadata(r#"[{"name":"a<b>&c","sourceName":"odd","format":"text"}]"#)),
                    ("odd", format!("v-{g}")),
                ],
            ),
        ),
        // instance_name read as JSON: a number becomes the entry's name as is.
        shape(
            "a-json-instance-name",
            "print",
            &[
                (
                    ".metadata",
                    format!(
                        r#"{{"metaDataProperties":[{},{}],"credentialProperties":[{}]}}"#,
                        json("instance_name"),
                        json("tags"),
                        text("password")
                    ),
                ),
                ("instance_name", "42".into()),
                ("tags", r#"["print",1,true]"#.into()),
                ("password", format!("p-{g}")),
            ],
        ),
        shape(
            "a-no-credentials",
            "alert-notification",
            &[
                (
                    ".metadata",
                    format!(r#"{{"metaDataProperties":[{}],"credentialProperties":[]}}"#, text("instance_name")),
                ),
                ("instance_name", "a-alerts".into()),
                ("instance_guid", format!("guid-{g}")),
            ],
        ),
        shape(
            "a-json-numbers",
            "cloud-logging",
            &with(
                btp_fields("a-cls", "cloud-logging", "standard", "[]"),
                &[
                    (".metadata", btp_metadata(&format!("[{},{}]", json("limits"), text("password")))),
                    ("limits", r#"{"max":1.50,"min":0.0,"exp":1E+2,"int":9007199254740993}"#.into()),
                    ("password", format!("p-{g}")),
                ],
            ),
        ),
    ]
}

/// A JSON container among the metadata properties: upstream replaces the whole entry with it,
/// then its credential step finds no `credentials` map and panics (recovered by its reconciler).
pub fn metadata_container(generation: u32) -> Shape {
    let g = generation;
    shape("a-metadata-container", "business-logging", &[
        (".metadata", r#"{"metaDataProperties":[{"name":"entry","format":"json","container":true}],"credentialProperties":[{"name":"password","format":"text"}]}"#.into()),
        ("entry", r#"{"instance_name":"a-bl","plan":"default"}"#.into()),
        ("password", format!("p-{g}")),
    ])
}

/// A flat servicebinding.io Secret (every key a credential, no `.metadata`, no `credentials`):
/// capdeck reads it, the Go operator refuses it.
pub fn flat(generation: u32) -> Shape {
    shape(
        "flat-binding",
        "xsuaa",
        &[
            ("clientid", "sb-flat".into()),
            ("clientsecret", format!("f-{}", generation)),
            ("url", "https://uaa.example.com".into()),
        ],
    )
}
