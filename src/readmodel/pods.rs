//! A Deployment's ReplicaSets and their Pods, for the console's drill-down from a rollout row:
//! what state each Pod is in, how often its containers restarted and how they last ended, and
//! which VCAP Secret each ReplicaSet's Pods read. Read on demand (only while the pane is open),
//! never watched: the console has no Pod store.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Pod, PodSpec};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, ListParams, LogParams};

use crate::api::container::termination_text;
use crate::api::lenient::Lenient;
use crate::cluster::describe_error;

/// How many log lines `l` shows.
pub const LOG_LINES: i64 = 100;
const REVISION: &str = "deployment.kubernetes.io/revision";

/// One line of the pane: a ReplicaSet, or one of its Pods under it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodRow {
    pub kind: RowKind,
    pub name: String,
    /// ReplicaSet: `current` or `old`; Pod: a container's waiting reason, else its phase.
    pub status: String,
    /// `ready/total` replicas or containers.
    pub ready: String,
    pub restarts: i32,
    /// How the container that restarted most last ended: `Error (exit code 1)`.
    pub last_termination: Option<String>,
    /// ReplicaSet: the VCAP Secret its Pods read (`envFrom`).
    pub secret: Option<String>,
    pub created: Option<Timestamp>,
    /// Pod: the container whose log `l` shows (the one that restarted most, else the first).
    pub log_container: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowKind {
    ReplicaSet,
    Pod,
}

/// The rows for `deployment`: its ReplicaSets, newest revision first, each followed by its Pods.
/// Pods owned by none of them (being adopted, or orphaned) come last.
pub fn rows(deployment: &Deployment, replicasets: &[ReplicaSet], pods: &[Pod]) -> Vec<PodRow> {
    let uid = deployment.metadata.uid.as_deref();
    let owned_by = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, owner: Option<&str>| {
        meta.owner_references.iter().flatten().any(|reference| Some(reference.uid.as_str()) == owner)
    };
    let revision = |rs: &ReplicaSet| rs.annotations().get(REVISION).and_then(|r| r.parse::<i64>().ok()).unwrap_or(0);
    let mut owned: Vec<&ReplicaSet> = replicasets.iter().filter(|rs| owned_by(&rs.metadata, uid)).collect();
    owned.sort_by_key(|rs| std::cmp::Reverse(revision(rs)));
    let newest = owned.first().map(|rs| revision(rs));
    let mut out = Vec::new();
    let mut shown = std::collections::BTreeSet::new();
    for rs in owned {
        let status = rs.status.as_ref();
        let its_pods: Vec<&Pod> =
            pods.iter().filter(|pod| owned_by(&pod.metadata, rs.metadata.uid.as_deref())).collect();
        out.push(PodRow {
            kind: RowKind::ReplicaSet,
            name: rs.name_any(),
            status: if Some(revision(rs)) == newest { "current".into() } else { "old".into() },
            ready: format!(
                "{}/{}",
                status.and_then(|s| s.ready_replicas).unwrap_or(0),
                rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0)
            ),
            restarts: its_pods.iter().map(|pod| pod_row(pod).restarts).sum(),
            last_termination: None,
            secret: rs
                .spec
                .as_ref()
                .and_then(|s| s.template.as_ref())
                .and_then(|t| t.spec.as_ref())
                .and_then(vcap_secret),
            created: rs.metadata.creation_timestamp.as_ref().map(|t| t.0),
            log_container: None,
        });
        for pod in its_pods {
            shown.insert(pod.name_any());
            out.push(pod_row(pod));
        }
    }
    let selector: Option<&std::collections::BTreeMap<String, String>> =
        deployment.spec.as_ref().and_then(|spec| spec.selector.match_labels.as_ref());
    for pod in pods.iter().filter(|pod| !shown.contains(&pod.name_any())) {
        let labels = pod.labels();
        if selector.is_some_and(|selector| selector.iter().all(|(k, v)| labels.get(k) == Some(v))) {
            out.push(pod_row(pod));
        }
    }
    out
}

/// The VCAP Secret a Pod template reads: the first `envFrom` Secret of its containers.
fn vcap_secret(spec: &PodSpec) -> Option<String> {
    spec.containers.iter().chain(spec.init_containers.iter().flatten()).find_map(|container| {
        container.env_from.iter().flatten().find_map(|source| source.secret_ref.as_ref().map(|s| s.name.clone()))
    })
}

fn pod_row(pod: &Pod) -> PodRow {
    let status = pod.status.as_ref();
    let containers: Vec<&k8s_openapi::api::core::v1::ContainerStatus> =
        status.and_then(|s| s.container_statuses.as_ref()).map(|c| c.iter().collect()).unwrap_or_default();
    let total = pod.spec.as_ref().map_or(containers.len(), |spec| spec.containers.len());
    let waiting = containers
        .iter()
        .find_map(|c| c.state.as_ref().and_then(|s| s.waiting.as_ref()).and_then(|w| w.reason.clone()));
    let worst = containers.iter().max_by_key(|c| c.restart_count);
    let first_container = pod.spec.as_ref().and_then(|spec| spec.containers.first()).map(|c| c.name.clone());
    PodRow {
        kind: RowKind::Pod,
        name: pod.name_any(),
        status: waiting.or_else(|| status.and_then(|s| s.phase.clone())).unwrap_or_else(|| {
            if pod.metadata.deletion_timestamp.is_some() { "Terminating" } else { "Pending" }.into()
        }),
        ready: format!("{}/{total}", containers.iter().filter(|c| c.ready).count()),
        restarts: containers.iter().map(|c| c.restart_count).sum(),
        last_termination: worst.and_then(|c| termination_text(c)),
        secret: None,
        created: pod.metadata.creation_timestamp.as_ref().map(|t| t.0),
        log_container: worst.filter(|c| c.restart_count > 0).map(|c| c.name.clone()).or(first_container),
    }
}

/// Read the Deployment, its ReplicaSets and Pods (by its selector) and build the rows. Errors
/// say what could not be read and why (RBAC names the verb).
pub async fn fetch(client: &kube::Client, namespace: &str, deployment: &str) -> Result<Vec<PodRow>, String> {
    let deployments: Api<Lenient<Deployment>> = Api::namespaced(client.clone(), namespace);
    let live = deployments
        .get_opt(deployment)
        .await
        .map_err(|error| format!("cannot read Deployment {namespace}/{deployment}: {}", describe_error(&error)))?
        .ok_or_else(|| format!("Deployment {namespace}/{deployment} no longer exists"))?
        .into_result()
        .map_err(|undecodable| format!("Deployment {undecodable}"))?;
    let labels = live
        .spec
        .as_ref()
        .and_then(|spec| spec.selector.match_labels.as_ref())
        .map(|labels| labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(","))
        .unwrap_or_default();
    if labels.is_empty() {
        return Err(format!(
            "Deployment {namespace}/{deployment} has no matchLabels selector; capdeck cannot find its Pods"
        ));
    }
    let params = ListParams::default().labels(&labels);
    // One object each: a ReplicaSet or Pod that does not decode is left out, not the pane.
    let replicasets: Api<Lenient<ReplicaSet>> = Api::namespaced(client.clone(), namespace);
    let replicasets = crate::cluster::list_each(&replicasets, &params)
        .await
        .map_err(|error| format!("cannot list ReplicaSets in {namespace}: {}", describe_error(&error)))?;
    let pods: Api<Lenient<Pod>> = Api::namespaced(client.clone(), namespace);
    let pods = crate::cluster::list_each(&pods, &params)
        .await
        .map_err(|error| format!("cannot list Pods in {namespace}: {}", describe_error(&error)))?;
    Ok(rows(&live, &replicasets.items, &pods.items))
}

/// Key-name parts whose values are credentials (case-insensitive, anywhere in the name): `pass`
/// covers `password`, `passwd` and `passphrase`.
const SECRET_KEY_PARTS: &[&str] =
    &["secret", "pass", "pwd", "token", "key", "certificate", "credential", "private", "auth"];
/// Keys whose values are public in binding and VCAP Secrets (lower case, `-` read as `_`): shown
/// in logs, except a password inside a URI (`postgres://user:PW@…`), which is masked anyway.
const PUBLIC_KEYS: &[&str] = &[
    ".metadata",
    "name",
    "label",
    "plan",
    "tags",
    "type",
    "provider",
    "instance_name",
    "instance_guid",
    "binding_name",
    "binding_guid",
    "syslog_drain_url",
    "volume_mounts",
    "url",
    "uri",
    "clientid",
    "client_id",
    "xsappname",
    "uaadomain",
    "identityzone",
    "identityzoneid",
    "subaccountid",
    "tenantid",
    "zoneid",
    "tenantmode",
    "credential_type",
    "user",
    "username",
    "hdi_user",
    "host",
    "hostname",
    "port",
    "domain",
    "domains",
    "schema",
    "database",
    "driver",
    "region",
];
/// Key-name endings that name an endpoint (`token_service_url`): a value shaped like a public
/// URL or domain is shown even when the name also says `token` or `key`.
const ENDPOINT_KEY_ENDINGS: &[&str] = &["url", "uri", "domain", "host", "endpoint"];
/// Shorter values are not masked (they would mask ordinary words).
const MIN_MASKED: usize = 6;
/// Longer values are masked in base64 only where their encoding starts with them.
const MAX_EMBEDDED: usize = 256;

/// What a key says about its value.
#[derive(Clone, Copy, PartialEq, Eq)]
enum KeyClass {
    /// A credential: masked whatever it looks like.
    Secret,
    /// Public: shown (but for a password inside a URI).
    Public,
    /// Masked unless it looks public (`public_shaped`).
    ByShape,
}

fn key_class(key: &str) -> KeyClass {
    let key = key.to_ascii_lowercase().replace('-', "_");
    if PUBLIC_KEYS.contains(&key.as_str()) {
        KeyClass::Public
    } else if ENDPOINT_KEY_ENDINGS.iter().any(|ending| key.ends_with(ending)) {
        KeyClass::ByShape
    } else if secret_key(&key) {
        KeyClass::Secret
    } else {
        KeyClass::ByShape
    }
}

/// Whether a key, flag or header name names a credential (`clientsecret`, `--db-password`,
/// `X-Api-Key`).
pub fn secret_key(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    SECRET_KEY_PARTS.iter().any(|part| name.contains(part))
}

/// A value that is public by its shape: a URL without user info or query, a domain, a number
/// (or version, or IP address), a boolean, a lower-case word (`dedicated`, `binding-secret`:
/// generated credentials have digits or capitals, and masking such words would mask them all
/// over a log).
pub fn public_shaped(value: &str) -> bool {
    let value = value.trim();
    if value.chars().all(|c| c.is_ascii_digit() || c == '.')
        || value.split('-').all(|word| !word.is_empty() && word.chars().all(|c| c.is_ascii_lowercase()))
    {
        return true;
    }
    if let Some((scheme, rest)) = value.split_once("://") {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        return !scheme.is_empty()
            && scheme.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
            && !authority.contains('@')
            && !rest.contains('?')
            && !rest.contains(char::is_whitespace);
    }
    let labels: Vec<&str> = value.split('.').collect();
    labels.len() >= 2
        && labels.iter().all(|label| !label.is_empty() && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
        && labels.last().is_some_and(|tld| tld.len() >= 2 && tld.chars().all(|c| c.is_ascii_alphabetic()))
}

/// The VCAP Secrets of `namespace` as the API server has them (with their payloads, which the
/// stores keep as digests), to mask a log with. A user who may not read Secrets there gets none,
/// as their stores hold none; any other failure is an error: a log is never shown with old
/// credentials unmasked because a read failed.
pub async fn vcap_secrets(client: &kube::Client, namespace: &str) -> Result<Vec<crate::api::StoredSecret>, String> {
    let api: kube::Api<crate::api::lenient::Lenient<k8s_openapi::api::core::v1::Secret>> =
        kube::Api::namespaced(client.clone(), namespace);
    let params = kube::api::ListParams::default().labels(crate::api::LABEL_SECRET_OWNER_HASH);
    match crate::cluster::list_each(&api, &params).await {
        Ok(listed) => Ok(listed.items.into_iter().map(crate::api::StoredSecret::new).collect()),
        Err(kube::Error::Api(status)) if status.code == 403 => Ok(Vec::new()),
        Err(error) => Err(format!(
            "cannot read the VCAP Secrets of {namespace}, whose old credentials the log is masked with ({}): the \
             log is not shown; try again",
            crate::cluster::describe_error(&error)
        )),
    }
}

/// Credential values in `secrets` (binding and VCAP Secrets), longest first. A Pod that logs its
/// credentials is not a reason for capdeck to show them.
///
/// Every string value of a Secret counts, in its data and in JSON inside it (`VCAP_SERVICES`,
/// `credentials`), unless its key is known to be public (`url`, `clientid`, `xsappname`, …) or
/// it looks public (a URL without user info, a domain, a number); a key that names a credential
/// (`pwd`, `token`, `certificate`, …) makes its value masked whatever it looks like. Besides the
/// values: the password of every URI (`scheme://user:PW@host`, also `?password=PW`), each line of
/// a multi-line value (the base64 lines of a PEM, as logs print them), and the valid parts of a
/// value that is not UTF-8. One byte that is not UTF-8 never turns masking off: data is read
/// lossily, and JSON that does not parse is read for its `"key":"value"` parts. [`mask`] masks
/// each value also in its JSON-escaped and base64 forms.
pub fn credential_values<'a>(secrets: impl IntoIterator<Item = &'a crate::api::StoredSecret>) -> Vec<String> {
    let mut out = Vec::new();
    for secret in secrets {
        for (key, value) in secret.entries() {
            consider(key, &String::from_utf8_lossy(value), &mut out);
        }
    }
    out.retain(|value| value.chars().count() >= MIN_MASKED);
    longest_first(&mut out);
    out
}

/// Longest first, so that a value containing another is masked whole; without duplicates.
fn longest_first(values: &mut Vec<String>) {
    values.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    values.dedup();
}

/// The credentials in `text`, the value of `key`.
fn consider(key: &str, text: &str, out: &mut Vec<String>) {
    let trimmed = text.trim();
    if trimmed.starts_with('{') || trimmed.starts_with('[') {
        match serde_json::from_str::<serde_json::Value>(trimmed) {
            // In JSON a string is a credential by its own key (`clientsecret`), not its
            // container's (`credentials` also holds `clientid` and `url`).
            Ok(json @ (serde_json::Value::Object(_) | serde_json::Value::Array(_))) => {
                walk(&json, key, out);
                return;
            }
            // Broken JSON (a byte that was not UTF-8 between its strings): its `"key":"value"`
            // parts, and the whole text by its own key below.
            _ => json_pairs(trimmed, out),
        }
    }
    uri_secrets(text, out);
    let masked = match key_class(key) {
        KeyClass::Secret => true,
        KeyClass::Public => false,
        KeyClass::ByShape => !public_shaped(trimmed),
    };
    if masked {
        out.push(text.to_string());
        // Logs print a multi-line value (a PEM) line by line; a PEM may also come with its line
        // breaks written as `\n`. The `-----BEGIN …-----` lines are not secret.
        let pem = text.contains("-----BEGIN");
        if text.contains('\n') || pem {
            let lines = text.split('\n').flat_map(|line| if pem { line.split("\\n").collect() } else { vec![line] });
            out.extend(lines.map(str::trim).filter(|line| !line.starts_with("-----")).map(str::to_string));
        }
        // What was not UTF-8 is U+FFFD here; a log may show it otherwise, so the parts around it.
        if text.contains(char::REPLACEMENT_CHARACTER) {
            out.extend(text.split(char::REPLACEMENT_CHARACTER).map(|part| part.trim().to_string()));
        }
    }
}

fn walk(value: &serde_json::Value, key: &str, out: &mut Vec<String>) {
    match value {
        serde_json::Value::String(text) => consider(key, text, out),
        serde_json::Value::Number(number) if key_class(key) == KeyClass::Secret => out.push(number.to_string()),
        serde_json::Value::Object(map) => map.iter().for_each(|(key, value)| walk(value, key, out)),
        serde_json::Value::Array(items) => items.iter().for_each(|item| walk(item, key, out)),
        _ => {}
    }
}

/// The `"key": "value"` parts of text that looks like JSON but does not parse.
fn json_pairs(text: &str, out: &mut Vec<String>) {
    static PAIR: std::sync::LazyLock<Option<regex::Regex>> =
        std::sync::LazyLock::new(|| regex::Regex::new(r#""((?:[^"\\]|\\.)*)"\s*:\s*"((?:[^"\\]|\\.)*)""#).ok());
    let Some(pair) = PAIR.as_ref() else { return };
    let unescape =
        |raw: &str| serde_json::from_str::<String>(&format!("\"{raw}\"")).unwrap_or_else(|_| raw.to_string());
    for captures in pair.captures_iter(text) {
        if let (Some(key), Some(value)) = (captures.get(1), captures.get(2)) {
            consider(&unescape(key.as_str()), &unescape(value.as_str()), out);
        }
    }
}

/// The passwords of the URIs in `text`: `scheme://user:PW@host` and `?password=PW`, as written
/// and percent-decoded.
fn uri_secrets(text: &str, out: &mut Vec<String>) {
    let mut push = |secret: &str| {
        out.push(secret.to_string());
        let decoded = percent_decode(secret);
        if decoded != secret {
            out.push(decoded);
        }
    };
    for (at, _) in text.match_indices("://") {
        let rest = &text[at + 3..];
        let end =
            rest.find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '`')).unwrap_or(rest.len());
        let uri = &rest[..end];
        let authority = uri.split(['/', '?', '#']).next().unwrap_or_default();
        if let Some((userinfo, _host)) = authority.rsplit_once('@')
            && let Some((_user, password)) = userinfo.split_once(':')
        {
            push(password);
        }
        if let Some((_, query)) = uri.split_once('?') {
            let query = query.split('#').next().unwrap_or_default();
            for (name, value) in query.split(['&', ';']).filter_map(|pair| pair.split_once('=')) {
                if secret_key(name) {
                    push(value);
                }
            }
        }
    }
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while let Some(&byte) = bytes.get(index) {
        let hex = bytes.get(index + 1..index + 3).and_then(|hex| std::str::from_utf8(hex).ok());
        match hex.and_then(|hex| u8::from_str_radix(hex, 16).ok()) {
            Some(decoded) if byte == b'%' => {
                out.push(decoded);
                index += 3;
            }
            _ => {
                out.push(byte);
                index += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The forms a log may print `value` in: as itself; JSON-escaped the way common encoders do it
/// (serde/JavaScript, with `\/` like PHP, non-ASCII as `\uXXXX` like Python, HTML-safe like Go,
/// escaped twice as in JSON inside JSON); base64 (standard and URL-safe, with and without
/// padding), and, for values up to `MAX_EMBEDDED` bytes, the part of its base64 that is the
/// same wherever it sits in a longer encoded text (`Authorization: Basic base64(user:PW)`).
fn forms(value: &str, out: &mut Vec<String>) {
    use base64::Engine as _;
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
    out.push(value.to_string());
    let escape = |text: &str| {
        serde_json::to_string(text)
            .ok()
            .and_then(|quoted| quoted.strip_prefix('"').and_then(|q| q.strip_suffix('"')).map(str::to_string))
    };
    if let Some(json) = escape(value) {
        let ascii = |upper: bool| {
            json.chars().fold(String::new(), |mut text, c| {
                if c.is_ascii() {
                    text.push(c);
                } else {
                    for unit in c.encode_utf16(&mut [0; 2]) {
                        text.push_str(&if upper { format!("\\u{unit:04X}") } else { format!("\\u{unit:04x}") });
                    }
                }
                text
            })
        };
        let html = json
            .replace('<', "\\u003c")
            .replace('>', "\\u003e")
            .replace('&', "\\u0026")
            .replace('\u{2028}', "\\u2028")
            .replace('\u{2029}', "\\u2029");
        out.extend(escape(&json));
        out.push(json.replace('/', "\\/"));
        out.push(ascii(false).replace('/', "\\/"));
        out.extend([ascii(false), ascii(true), html, json.clone()]);
    }
    let bytes = value.as_bytes();
    for engine in [STANDARD, URL_SAFE] {
        out.push(engine.encode(bytes));
    }
    // The parts for a value inside a longer encoded text are for credentials' sizes (a password
    // in `user:PW`), not a certificate's.
    let offsets = if bytes.len() <= MAX_EMBEDDED { 0..3 } else { 0..1 };
    for engine in [STANDARD_NO_PAD, URL_SAFE_NO_PAD] {
        for offset in offsets.clone() {
            let mut shifted = vec![0; offset];
            shifted.extend_from_slice(bytes);
            let encoded = engine.encode(&shifted);
            // The characters made of the value's bits only.
            let first = (8 * offset).div_ceil(6);
            let last = 8 * (offset + bytes.len()) / 6;
            if offset == 0 {
                out.push(encoded.clone());
            }
            out.extend(encoded.get(first..last).map(str::to_string));
        }
    }
}

/// `lines` with every one of `values` replaced by `•••`, in any of the forms a log may print
/// it in (see `forms`). Where values overlap, their union is masked.
pub fn mask(lines: Vec<String>, values: &[String]) -> Vec<String> {
    let mut patterns = Vec::new();
    for value in values {
        forms(value, &mut patterns);
    }
    // A log line holds no line break: a multi-line value is masked by its lines.
    patterns.retain(|pattern| pattern.chars().count() >= MIN_MASKED && !pattern.contains(['\n', '\r']));
    longest_first(&mut patterns);
    if patterns.is_empty() {
        return lines;
    }
    // An alternation of literals, longest first: the longest match at each place. With many
    // patterns the regex crate runs it as Aho-Corasick, linear in the line.
    let alternation = patterns.iter().map(|pattern| regex::escape(pattern)).collect::<Vec<_>>().join("|");
    let regex = regex::RegexBuilder::new(&alternation).size_limit(1 << 28).dfa_size_limit(1 << 24).build();
    lines
        .into_iter()
        .map(|line| {
            let mut spans = Vec::new();
            match &regex {
                Ok(regex) => {
                    let mut at = 0;
                    while let Some(found) = regex.find_at(&line, at) {
                        spans.push((found.start(), found.end()));
                        // On from the next character, for matches that overlap this one.
                        at = found.start() + line[found.start()..].chars().next().map_or(1, char::len_utf8);
                    }
                }
                // Too many patterns for one regex: slower, never less masked.
                Err(_) => {
                    for pattern in &patterns {
                        spans.extend(line.match_indices(pattern.as_str()).map(|(at, _)| (at, at + pattern.len())));
                    }
                }
            }
            masked(&line, spans)
        })
        .collect()
}

/// `line` with the union of `spans` (byte ranges on character boundaries) replaced by `•••`.
fn masked(line: &str, mut spans: Vec<(usize, usize)>) -> String {
    if spans.is_empty() {
        return line.to_string();
    }
    spans.sort_unstable();
    let mut out = String::with_capacity(line.len());
    let mut shown = 0;
    let mut spans = spans.into_iter().peekable();
    while let Some((start, mut end)) = spans.next() {
        while let Some(&(next, next_end)) = spans.peek() {
            if next > end {
                break;
            }
            end = end.max(next_end);
            spans.next();
        }
        out.push_str(line.get(shown..start).unwrap_or_default());
        out.push_str(crate::output::MASK);
        shown = end;
    }
    out.push_str(line.get(shown..).unwrap_or_default());
    out
}

/// The last `LOG_LINES` lines of a Pod's container, after checking `get pods/log` first (so a
/// user without it is told which permission is missing, not shown an API error).
pub async fn log(
    client: &kube::Client,
    namespace: &str,
    pod: &str,
    container: Option<&str>,
) -> Result<Vec<String>, String> {
    if !crate::cluster::can_i_subresource(client, "get", "", "pods", "log", Some(namespace)).await {
        return Err(format!(
            "you may not read Pod logs in {namespace} (RBAC: get pods/log); ask for it, or use kubectl logs where you can"
        ));
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let params =
        LogParams { container: container.map(str::to_string), tail_lines: Some(LOG_LINES), ..LogParams::default() };
    let text = pods
        .logs(pod, &params)
        .await
        .map_err(|error| format!("cannot read the log of Pod {namespace}/{pod}: {}", describe_error(&error)))?;
    Ok(text.lines().map(str::to_string).collect())
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::output::MASK;

    fn owner(uid: &str) -> Value {
        json!([{"apiVersion": "apps/v1", "kind": "X", "name": "x", "uid": uid, "controller": true}])
    }

    fn rs(name: &str, uid: &str, revision: &str, secret: &str, ready: i32) -> ReplicaSet {
        serde_json::from_value(json!({
            "metadata": {"name": name, "uid": uid, "ownerReferences": owner("d-uid"),
                         "annotations": {REVISION: revision}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "srv"}},
                     "template": {"spec": {"containers": [{"name": "main", "envFrom": [{"secretRef": {"name": secret}}]}]}}},
            "status": {"replicas": 2, "readyReplicas": ready},
        }))
        .expect("rs")
    }

    fn pod(name: &str, rs_uid: &str, status: Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"app": "srv"}, "ownerReferences": owner(rs_uid)},
            "spec": {"containers": [{"name": "main"}, {"name": "sidecar"}]},
            "status": status,
        }))
        .expect("pod")
    }

    /// A Pod that logs its credentials: the values of secret-named keys (flat, in JSON, in
    /// VCAP_SERVICES) are masked; URLs, names and short values stay readable.
    #[test]
    fn credential_values_in_log_lines_are_masked() {
        let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
            "metadata": {"name": "uaa"},
            "data": {
                "clientsecret": base64("s3cr3t-value-1"),
                "url": base64("https://uaa.example.com"),
                "credentials": base64(r#"{"uaa": {"clientsecret": "nested-secret-2", "clientid": "sb-app"}, "password": "pw-123456"}"#),
                "key": base64("abc"),
            },
        }))
        .expect("secret");
        let values = credential_values([&crate::api::StoredSecret::new(secret)]);
        assert_eq!(values, ["nested-secret-2", "s3cr3t-value-1", "pw-123456"]);
        let lines = vec![
            "VCAP: clientsecret=s3cr3t-value-1 url=https://uaa.example.com".to_string(),
            r#"{"clientsecret":"nested-secret-2","password":"pw-123456","clientid":"sb-app"}"#.to_string(),
        ];
        assert_eq!(
            mask(lines, &values),
            [
                "VCAP: clientsecret=••• url=https://uaa.example.com",
                r#"{"clientsecret":"•••","password":"•••","clientid":"sb-app"}"#,
            ]
        );
    }

    /// One binding Secret with `data`.
    fn secret_with(data: &[(&str, &[u8])]) -> k8s_openapi::api::core::v1::Secret {
        k8s_openapi::api::core::v1::Secret {
            data: Some(
                data.iter().map(|(key, value)| (key.to_string(), k8s_openapi::ByteString(value.to_vec()))).collect(),
            ),
            ..Default::default()
        }
    }

    const PEM: &[u8] = b"-----BEGIN CERTIFICATE-----
MIIBszCCAVmgAwIBAgIUQk3d1xWc5Fh0o7bX9aLxq0YyX2EwCgYIKoZIzj0EAwIw
FjEUMBIGA1UEAwwLY2FwZGVjay1kZW1vMB4XDTI2MDEwMTAwMDAwMFoXDTI3MDEw
MTAwMDAwMFowFjEUMBIGA1UEAwwLY2FwZGVjay1kZW1v
-----END CERTIFICATE-----
";

    /// A form, a Secret's data, a logged line, the line as shown.
    type Row<'a> = (&'a str, &'a [(&'a str, &'a [u8])], &'a str, &'a str);

    /// What a credential looks like in a log in practice: each row is a Secret's data, a line
    /// a Pod logged, and the line as the Pods pane shows it. Every row showed the credential
    /// before issue 32 (checked against the former `credential_values`/`mask`).
    #[test]
    fn credentials_are_masked_in_the_forms_logs_print_them() {
        let rows: &[Row] = &[
            (
                "password inside a URI value",
                &[("uri", b"postgres://dbuser:Pa55w0rd-x@db.example.com:5432/app")],
                "connecting to postgres://dbuser:Pa55w0rd-x@db.example.com:5432/app",
                "connecting to postgres://dbuser:•••@db.example.com:5432/app",
            ),
            (
                "URI password, percent-decoded",
                &[("url", b"postgres://app:p%40ss-w0rd@db:5432/x")],
                "auth failed: password p@ss-w0rd",
                "auth failed: password •••",
            ),
            (
                "password in a URI query",
                &[("url", b"jdbc:sap://hana.example.com:443/?user=APP&password=Qw3rty-99")],
                "connect with password=Qw3rty-99",
                "connect with password=•••",
            ),
            ("value under a pwd key", &[("pwd", b"hunter2-xyz")], "login pwd=hunter2-xyz ok", "login pwd=••• ok"),
            (
                "value under a key no list names",
                &[("access", b"AKIA1234567890XYZ")],
                "using AKIA1234567890XYZ",
                "using •••",
            ),
            (
                "a line of a multi-line PEM",
                &[("certificate", PEM)],
                "cert FjEUMBIGA1UEAwwLY2FwZGVjay1kZW1vMB4XDTI2MDEwMTAwMDAwMFoXDTI3MDEw",
                "cert •••",
            ),
            (
                "a PEM line, line breaks written as \\n",
                &[(
                    "key",
                    b"-----BEGIN PRIVATE KEY-----\\nMC4CAQAwBQYDK2VwBCIEIJ7mN0xq2w6tQ2b4yQ9rYl8rZcKf3v5n1s0pX7uE2dA1\\n-----END PRIVATE KEY-----",
                )],
                "  MC4CAQAwBQYDK2VwBCIEIJ7mN0xq2w6tQ2b4yQ9rYl8rZcKf3v5n1s0pX7uE2dA1",
                "  •••",
            ),
            (
                "JSON-escaped with \\/",
                &[("password", br#"pa"ss/w0rd-1"#)],
                r#"{"msg":"login pa\"ss\/w0rd-1"}"#,
                r#"{"msg":"login •••"}"#,
            ),
            (
                "JSON-escaped (serde, JavaScript)",
                &[("password", br#"pa"ss/w0rd-1"#)],
                r#"{"password":"pa\"ss/w0rd-1"}"#,
                r#"{"password":"•••"}"#,
            ),
            (
                "JSON-escaped twice (JSON in a JSON string)",
                &[("password", br#"pa"ss/w0rd-1"#)],
                r#"{"env":"{\"password\":\"pa\\\"ss/w0rd-1\"}"}"#,
                r#"{"env":"{\"password\":\"•••\"}"}"#,
            ),
            (
                "JSON-escaped to ASCII (Python)",
                &[("secret", "pässwörd-1".as_bytes())],
                r#"{"secret": "p\u00e4ssw\u00f6rd-1"}"#,
                r#"{"secret": "•••"}"#,
            ),
            (
                "JSON-escaped HTML-safe (Go)",
                &[("clientsecret", b"a<b>&c-secret")],
                r#"{"s":"a\u003cb\u003e\u0026c-secret"}"#,
                r#"{"s":"•••"}"#,
            ),
            (
                "base64",
                &[("clientsecret", b"s3cr3t-value-1")],
                "secret: czNjcjN0LXZhbHVlLTE=",
                "secret: •••",
            ),
            (
                "base64, URL-safe without padding",
                &[("clientsecret", b"??>>s3cr3t~~")],
                "state=Pz8-PnMzY3IzdH5-&x=1",
                "state=•••&x=1",
            ),
            (
                "base64 of user:password (Basic auth)",
                &[("clientid", b"sb-app"), ("clientsecret", b"s3cr3t-value-1")],
                "Authorization: Basic c2ItYXBwOnMzY3IzdC12YWx1ZS0x",
                "Authorization: Basic c2ItYXBwOn•••",
            ),
            (
                "invalid UTF-8 elsewhere in credentials",
                &[("credentials", b"{\"name\":\"caf\xff\",\"clientsecret\":\"nested-secret-2\"}")],
                "clientsecret=nested-secret-2",
                "clientsecret=•••",
            ),
            (
                "invalid UTF-8 between JSON strings",
                &[("credentials", b"{\"clientsecret\":\"nested-secret-3\",\xff\"url\":\"https://x\"}")],
                "got nested-secret-3",
                "got •••",
            ),
            ("invalid UTF-8 in the value", &[("password", b"abc\xffdefghijk")], "pw defghijk", "pw •••"),
            (
                "trailing line break (echo | base64)",
                &[("password", b"hunter2-xyz\n")],
                "password is hunter2-xyz",
                "password is •••",
            ),
            (
                "overlapping values",
                &[("password", b"abc-xyz1"), ("token", b"xyz1-secret9")],
                "abc-xyz1-secret9",
                "•••",
            ),
        ];
        for (form, data, line, expected) in rows {
            let secret = secret_with(data);
            let values = credential_values([&crate::api::StoredSecret::new(secret.clone())]);
            assert_eq!(mask(vec![line.to_string()], &values), [*expected], "{form}: values {values:?}");
        }
    }

    /// Public values stay readable: URLs, domains, names, ids, the `.metadata` that names the
    /// keys, short words.
    #[test]
    fn public_values_in_log_lines_stay_readable() {
        let metadata = br#"{"credentialProperties":[{"name":"clientsecret","format":"text"},{"name":"verificationkey","format":"text"}]}"#;
        let secret = secret_with(&[
            (".metadata", metadata),
            ("clientid", b"sb-hr-portal!t123"),
            ("clientsecret", b"sk-14f43e7d1bfb"),
            ("url", b"https://hr-portal.authentication.eu10.hana.ondemand.com"),
            ("uaadomain", b"authentication.eu10.hana.ondemand.com"),
            ("token_service_url", b"https://hr.example.com/oauth/token"),
            ("instance_guid", b"867347214cdd2055"),
            ("tags", br#"["xsuaa","uaa-service"]"#),
            ("credential-type", b"binding-secret"),
            ("provisioning", b"dedicated"),
        ]);
        let values = credential_values([&crate::api::StoredSecret::new(secret.clone())]);
        assert_eq!(values, ["sk-14f43e7d1bfb"]);
        let line = "clientsecret=sk-14f43e7d1bfb clientid=sb-hr-portal!t123 url=https://hr-portal.authentication.eu10.hana.ondemand.com token=https://hr.example.com/oauth/token guid=867347214cdd2055 tags=xsuaa,uaa-service type=binding-secret mode=dedicated";
        assert_eq!(mask(vec![line.into()], &values), [line.replace("sk-14f43e7d1bfb", MASK)]);
    }

    /// Many values (a namespace with hundreds of bindings): one pass per line, no blow-up.
    #[test]
    fn many_values_mask_many_lines() {
        let data: Vec<(String, Vec<u8>)> =
            (0..2000).map(|i| (format!("clientsecret{i}"), format!("sk-{i:06}-{}", i * 7919).into_bytes())).collect();
        let data: Vec<(&str, &[u8])> = data.iter().map(|(key, value)| (key.as_str(), value.as_slice())).collect();
        let values = credential_values([&crate::api::StoredSecret::new(secret_with(&data))]);
        assert_eq!(values.len(), 2000);
        let lines: Vec<String> =
            (0..100).map(|i| format!("line {i}: token sk-{:06}-{} end", i * 13, i * 13 * 7919)).collect();
        let masked = mask(lines, &values);
        assert!(masked.iter().all(|line| line.ends_with(": token ••• end")), "{masked:?}");
    }

    fn base64(text: &str) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(text)
    }

    /// Newest ReplicaSet first with the VCAP Secret it reads; a crash-looping Pod says why and
    /// how its container last ended, and `l` would read that container.
    #[test]
    fn replicasets_newest_first_with_their_pods_and_why_they_fail() {
        let deployment: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "srv", "uid": "d-uid"},
            "spec": {"selector": {"matchLabels": {"app": "srv"}}, "template": {}},
        }))
        .expect("deployment");
        let old = rs("srv-6c4", "rs-old", "3", "srv-vcap-old", 2);
        let new = rs("srv-7d9", "rs-new", "4", "srv-vcap-new", 0);
        let crash = json!({"phase": "Running", "containerStatuses": [
            {"name": "main", "image": "i", "imageID": "", "ready": false, "restartCount": 4,
             "state": {"waiting": {"reason": "CrashLoopBackOff"}},
             "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}},
            {"name": "sidecar", "image": "i", "imageID": "", "ready": true, "restartCount": 0}]});
        let fine = json!({"phase": "Running", "containerStatuses": [
            {"name": "main", "image": "i", "imageID": "", "ready": true, "restartCount": 0},
            {"name": "sidecar", "image": "i", "imageID": "", "ready": true, "restartCount": 0}]});
        let pods = [pod("srv-6c4-a", "rs-old", fine), pod("srv-7d9-b", "rs-new", crash)];
        let rows = rows(&deployment, &[old, new], &pods);
        let summary: Vec<(RowKind, &str, &str, &str, i32)> =
            rows.iter().map(|r| (r.kind, r.name.as_str(), r.status.as_str(), r.ready.as_str(), r.restarts)).collect();
        assert_eq!(
            summary,
            [
                (RowKind::ReplicaSet, "srv-7d9", "current", "0/2", 4),
                (RowKind::Pod, "srv-7d9-b", "CrashLoopBackOff", "1/2", 4),
                (RowKind::ReplicaSet, "srv-6c4", "old", "2/2", 0),
                (RowKind::Pod, "srv-6c4-a", "Running", "2/2", 0),
            ]
        );
        assert_eq!(rows[0].secret.as_deref(), Some("srv-vcap-new"));
        assert_eq!(rows[1].last_termination.as_deref(), Some("Error (exit code 1)"));
        assert_eq!(rows[1].log_container.as_deref(), Some("main"));
        assert_eq!(rows[3].log_container.as_deref(), Some("main"), "no restarts: the first container");
    }
}
