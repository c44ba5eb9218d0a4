//! Where notifications go: the receivers (`--notify`, `--notify-secret`), their formats, the
//! signing key and the retry policy. A receiver's URL and key are credentials: nothing here
//! prints them.

use std::time::Duration;

/// What a receiver gets and how it is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PayloadFormat {
    /// The generic JSON body (signed with `--notify-signing-secret`).
    Json,
    /// Slack's `{"text": …}`.
    Slack,
    /// A Microsoft Teams Workflows webhook: an Adaptive Card.
    Teams,
    /// PagerDuty's Events API v2: incidents only, triggered and resolved.
    PagerDuty,
    /// Opsgenie's Alert API: incidents only, created and closed.
    Opsgenie,
}

impl PayloadFormat {
    pub const ALL: [Self; 5] = [Self::Json, Self::Slack, Self::Teams, Self::PagerDuty, Self::Opsgenie];

    /// The word before `=` in `--notify FORMAT=…`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Json => "json",
            Self::Slack => "slack",
            Self::Teams => "teams",
            Self::PagerDuty => "pagerduty",
            Self::Opsgenie => "opsgenie",
        }
    }

    fn of(word: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|format| format.as_str() == word)
    }

    /// Whether it gets only the events that open or close an incident (docs/NOTIFICATIONS.md).
    pub fn takes_incidents_only(self) -> bool {
        matches!(self, Self::PagerDuty | Self::Opsgenie)
    }

    /// An incident service's own endpoint, and the query parameter a URL may carry its key in.
    fn service(self) -> Option<(&'static str, &'static str)> {
        match self {
            Self::PagerDuty => Some(("https://events.pagerduty.com/v2/enqueue", "routing_key")),
            Self::Opsgenie => Some(("https://api.opsgenie.com", "api_key")),
            Self::Json | Self::Slack | Self::Teams => None,
        }
    }
}

/// What `--notify` takes, for its errors.
const EXPECTED: &str = "expected [NAME@][json=|slack=|teams=]http(s)://HOST/PATH, pagerduty=ROUTING_KEY or \
                        opsgenie=API_KEY";

/// A receiver. Its URL and key are secrets (a webhook URL is its own credential): `Debug`, the
/// logs, `capdeck doctor` and the batches' records name it by `name` only.
#[derive(Clone, PartialEq, Eq)]
pub struct NotifyTarget {
    url: String,
    /// PagerDuty's routing key or Opsgenie's API key.
    key: Option<String>,
    pub host: String,
    /// What it is called everywhere: the name given (`oncall@https://…`), else its host's domain
    /// and a short hash of its URL and key (`slack.com#3f9a1c`), so two receivers of one host
    /// differ.
    pub name: String,
    pub format: PayloadFormat,
}

impl std::fmt::Debug for NotifyTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "NotifyTarget({:?} {})", self.format, self.name)
    }
}

/// `NAME@` and `FORMAT=` in front of a receiver, as given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReceiverPrefix {
    pub name: Option<String>,
    pub format: Option<PayloadFormat>,
}

impl ReceiverPrefix {
    /// Splits `[NAME@][FORMAT=]REST`. A name is letters, digits, `-`, `_` and `.` before the
    /// first `@` (a URL's own `@` comes after its `://`); a format is one of the known words.
    pub fn split(text: &str) -> (Self, &str) {
        let text = text.trim();
        let named = text.split_once('@').filter(|(name, _)| {
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        });
        let (name, text) = match named {
            Some((name, rest)) => (Some(name.to_string()), rest),
            None => (None, text),
        };
        let (format, rest) = match text.split_once('=').and_then(|(word, rest)| Some((PayloadFormat::of(word)?, rest)))
        {
            Some((format, rest)) => (Some(format), rest),
            None => (None, text),
        };
        (Self { name, format }, rest)
    }

    /// This prefix with `defaults` where it says nothing; an error when both say different things.
    fn or(self, defaults: &Self) -> Result<Self, String> {
        if let (Some(own), Some(default)) = (&self.name, &defaults.name)
            && own != default
        {
            return Err(format!("names the receiver {own} where the flag names it {default}: say it once"));
        }
        if let (Some(own), Some(default)) = (self.format, defaults.format)
            && own != default
        {
            return Err(format!("says {} where the flag says {}: say it once", own.as_str(), default.as_str()));
        }
        Ok(Self { name: self.name.or_else(|| defaults.name.clone()), format: self.format.or(defaults.format) })
    }
}

impl std::fmt::Display for ReceiverPrefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(name) = &self.name {
            write!(f, "{name}@")?;
        }
        if let Some(format) = self.format {
            write!(f, "{}=", format.as_str())?;
        }
        Ok(())
    }
}

impl NotifyTarget {
    /// `[NAME@][FORMAT=]URL` with an http(s) URL, or `[NAME@]pagerduty=ROUTING_KEY` and
    /// `[NAME@]opsgenie=API_KEY` (their services' US endpoints; for another region or a proxy,
    /// `pagerduty=https://HOST/v2/enqueue?routing_key=KEY`, `opsgenie=https://HOST?api_key=KEY`).
    /// Without a format a `hooks.slack.com` URL gets the Slack body, a Power Automate URL
    /// (`*.logic.azure.com`, `*.powerplatform.com`) the Teams card, any other the generic JSON.
    /// The error never repeats the URL or the key.
    pub fn parse(text: &str) -> Result<Self, String> {
        Self::parse_with(text, &ReceiverPrefix::default())
    }

    /// As [`Self::parse`], with the name and format of `defaults` where `text` has none.
    pub fn parse_with(text: &str, defaults: &ReceiverPrefix) -> Result<Self, String> {
        let (own, rest) = ReceiverPrefix::split(text);
        misspelt(rest)?;
        let ReceiverPrefix { name: given, format } = own.or(defaults)?;
        // An incident service's own URL without its format: that service, not the generic JSON.
        let format = format.or_else(|| service_of_url(rest));
        let (url, key) = match format.and_then(PayloadFormat::service) {
            Some((endpoint, _)) if !rest.contains("://") => (endpoint.to_string(), Some(plain_key(rest)?)),
            Some((_, parameter)) => {
                let (url, key) = key_from_query(rest, parameter)?;
                (url, Some(key))
            }
            None if !rest.contains("://") && !rest.trim().is_empty() => {
                return Err(format!(
                    "is not an http or https URL; a bare routing or API key needs its format in front \
                     (pagerduty=…, opsgenie=…, or --notify-secret NAME@pagerduty=NS/SECRET:KEY) ({EXPECTED})"
                ));
            }
            None => (rest.to_string(), None),
        };
        if format == Some(PayloadFormat::PagerDuty)
            && let Some(key) = &key
        {
            pagerduty_routing_key(key)?;
        }
        let uri: hyper::Uri = url.parse().map_err(|_| format!("is not a URL ({EXPECTED})"))?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) {
            return Err(format!("is not an http or https URL ({EXPECTED})"));
        }
        let host = host_of(&uri).ok_or("has no host")?;
        // `Uri` takes `:99999` and then has no port: read what follows the host.
        let authority = uri.authority().map_or("", |authority| authority.as_str());
        let host_and_port = authority.rsplit('@').next().unwrap_or(authority);
        let after_host = host_and_port.rsplit_once(']').map_or(host_and_port, |(_, rest)| rest);
        if let Some((_, port)) = after_host.rsplit_once(':')
            && !(port.bytes().all(|b| b.is_ascii_digit()) && matches!(port.parse::<u16>(), Ok(1..)))
        {
            return Err(format!("has a port that is not a number from 1 to 65535 ({EXPECTED})"));
        }
        if let Some(name) = &given
            && name.len() > MAX_NAME
        {
            return Err(format!("names the receiver with more than {MAX_NAME} characters: shorten its name"));
        }
        let format = format.unwrap_or(if host == "hooks.slack.com" {
            PayloadFormat::Slack
        } else if host.ends_with(".logic.azure.com") || host.ends_with(".powerplatform.com") {
            PayloadFormat::Teams
        } else {
            PayloadFormat::Json
        });
        let name = given.unwrap_or_else(|| {
            use sha2::Digest as _;
            let mut digest = sha2::Sha256::new();
            digest.update(url.as_bytes());
            if let Some(key) = &key {
                digest.update(b"\0");
                digest.update(key.as_bytes());
            }
            format!("{}#{}", domain_of(&host), hex::encode(&digest.finalize()[..3]))
        });
        Ok(Self { url, key, host, name, format })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// PagerDuty's routing key or Opsgenie's API key.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }
}

/// The longest receiver name: a label's, as the chart's schema has it.
const MAX_NAME: usize = 63;

/// What a receiver without a name is called by: its host's last two labels (`slack.com` for
/// `hooks.slack.com`), an IP address as it is. Not the whole host: some services put the
/// webhook's secret in a sub-domain (`SECRET.m.pipedream.net`), and the name is logged.
fn domain_of(host: &str) -> &str {
    // An address, however written (`127.000.000.001`, `[::1]`): as it is.
    let address = host.starts_with('[') || host.bytes().all(|b| b.is_ascii_digit() || b == b'.');
    let mut dots = host.rmatch_indices('.').map(|(index, _)| index);
    let domain = match (dots.next(), dots.next()) {
        (Some(_), Some(second)) if !address => &host[second + 1..],
        _ => host,
    };
    // The name is at most MAX_NAME with `#` and six hex digits: keep the end, which says most.
    let room = MAX_NAME - 7;
    match domain.char_indices().rev().nth(room - 1) {
        Some((start, _)) if domain.len() > room => &domain[start..],
        _ => domain,
    }
}

/// The longest key taken (PagerDuty's are 32 characters, Opsgenie's 36).
const MAX_KEY: usize = 256;

/// A routing or API key given bare: printable, without spaces, not absurdly long.
fn plain_key(text: &str) -> Result<String, String> {
    let key = text.trim();
    if key.is_empty() {
        return Err(format!("has no key after its format ({EXPECTED})"));
    }
    if key.len() > MAX_KEY {
        return Err(format!("has a key longer than {MAX_KEY} characters ({EXPECTED})"));
    }
    if !key.chars().all(|c| c.is_ascii_graphic()) {
        return Err(format!("has a key that is not one word of printable ASCII ({EXPECTED})"));
    }
    Ok(key.to_string())
}

/// `WORD=…` with a word that is no format, or `NAME@…` with a name of other characters: said
/// as such (else the text reads as a URL and the error misleads). Neither is repeated.
fn misspelt(rest: &str) -> Result<(), String> {
    let before_url = rest.split("://").next().unwrap_or(rest);
    if let Some((word, _)) = before_url.split_once('=')
        && !word.is_empty()
        && word.len() <= 20
        && word.chars().all(|c| c.is_ascii_alphabetic())
    {
        return Err(
            "names a format that does not exist (json, slack, teams, pagerduty or opsgenie, in lower case)".into()
        );
    }
    if let Some((name, _)) = before_url.split_once('@')
        && !name.contains('/')
        && !name.contains('=')
    {
        return Err("names the receiver with characters other than letters, digits, '-', '_' and '.'".into());
    }
    Ok(())
}

/// `uri`'s host as names compare: lower case (they are case-insensitive), without the root's dot.
fn host_of(uri: &hyper::Uri) -> Option<String> {
    let mut host = uri.host().filter(|host| !host.is_empty())?.to_ascii_lowercase();
    if host.ends_with('.') {
        host.pop();
    }
    Some(host)
}

/// PagerDuty's and Opsgenie's own API hosts.
fn service_of_url(text: &str) -> Option<PayloadFormat> {
    let uri: hyper::Uri = text.trim().parse().ok()?;
    match host_of(&uri)?.as_str() {
        "events.pagerduty.com" | "events.eu.pagerduty.com" => Some(PayloadFormat::PagerDuty),
        "api.opsgenie.com" | "api.eu.opsgenie.com" => Some(PayloadFormat::Opsgenie),
        _ => None,
    }
}

/// PagerDuty's Events API v2 takes an integration's routing key: 32 letters and digits. A REST
/// API key (20 characters) is the usual mistake, and PagerDuty would refuse every event.
fn pagerduty_routing_key(key: &str) -> Result<(), String> {
    if key.len() == 32 && key.chars().all(|c| c.is_ascii_alphanumeric()) {
        return Ok(());
    }
    Err(format!(
        "has a routing key of {} characters; PagerDuty's Events API v2 takes an integration key of 32 letters and \
         digits (the service's Integrations tab, \"Events API V2\"; a REST API key does not work here)",
        key.chars().count()
    ))
}

/// `https://HOST/PATH?PARAMETER=KEY&…`: the URL without that parameter, and the key.
fn key_from_query(url: &str, parameter: &str) -> Result<(String, String), String> {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut key = None;
    let mut others = form_urlencoded::Serializer::new(String::new());
    for (name, value) in form_urlencoded::parse(query.as_bytes()) {
        if name == parameter {
            if key.is_some() {
                return Err(format!("has {parameter} twice in its URL's query ({EXPECTED})"));
            }
            key = Some(value.into_owned());
        } else {
            others.append_pair(&name, &value);
        }
    }
    let key = key.ok_or_else(|| format!("has no {parameter} in its URL's query ({EXPECTED})"))?;
    let others = others.finish();
    let url = if others.is_empty() { base.to_string() } else { format!("{base}?{others}") };
    Ok((url, plain_key(&key)?))
}

/// The engine's notification settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NotifyConfig {
    pub targets: Vec<NotifyTarget>,
    /// The cluster's name in every message (`--cluster-name`, else the kube context's name).
    pub cluster: String,
    pub retry: RetryPolicy,
    /// `--notify-signing-secret`: the generic JSON receivers get Standard Webhooks signatures.
    pub signing: Option<SigningKey>,
}

/// The key the generic JSON webhooks are signed with (Standard Webhooks: HMAC-SHA256 over
/// `id.timestamp.body`). A credential: `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct SigningKey(Vec<u8>);

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SigningKey({} bytes)", self.0.len())
    }
}

impl SigningKey {
    /// The shortest key accepted (Standard Webhooks asks for 24 to 64 random bytes).
    pub const MIN_BYTES: usize = 24;

    /// `whsec_BASE64` (the Standard Webhooks form), else the value's own bytes. The error never
    /// repeats the value.
    pub fn parse(value: &[u8]) -> Result<Self, String> {
        use base64::Engine as _;
        let text = std::str::from_utf8(value).map(str::trim);
        let bytes = match text {
            Ok(text) if text.starts_with("whsec_") => base64::engine::general_purpose::STANDARD
                .decode(&text["whsec_".len()..])
                .map_err(|_| "starts with whsec_ but the rest is not base64".to_string())?,
            Ok(text) => text.as_bytes().to_vec(),
            Err(_) => value.to_vec(),
        };
        if bytes.len() < Self::MIN_BYTES {
            return Err(format!(
                "is {} bytes long; a signing secret needs at least {} (make one: echo whsec_$(head -c 32 \
                 /dev/urandom | base64))",
                bytes.len(),
                Self::MIN_BYTES
            ));
        }
        Ok(Self(bytes))
    }

    /// The `webhook-signature` header's value for message `id` sent at `timestamp` (Unix
    /// seconds): `v1,` and the base64 of HMAC-SHA256 over `id.timestamp.body`.
    pub fn sign(&self, id: &str, timestamp: i64, body: &[u8]) -> String {
        use base64::Engine as _;
        use hmac::Mac as _;
        let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&self.0).expect("HMAC takes a key of any length");
        mac.update(format!("{id}.{timestamp}.").as_bytes());
        mac.update(body);
        format!("v1,{}", base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes()))
    }
}

/// `--notify-secret NS/NAME:KEY`: a key of a Secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretKeyRef {
    pub namespace: String,
    pub name: String,
    pub key: String,
}

impl std::str::FromStr for SecretKeyRef {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let key_chars = |key: &str| {
            !key.is_empty()
                && key.len() <= 253
                && key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        };
        let parsed = text.split_once('/').and_then(|(namespace, rest)| {
            let (name, key) = rest.split_once(':')?;
            (crate::api::common::is_dns_label(namespace)
                && crate::api::common::is_dns_subdomain(name)
                && key_chars(key))
            .then(|| Self { namespace: namespace.to_string(), name: name.to_string(), key: key.to_string() })
        });
        parsed.ok_or_else(|| {
            "expected NAMESPACE/SECRET:KEY, each a Kubernetes name (e.g. capdeck-system/notify-signing:secret)".into()
        })
    }
}

impl std::fmt::Display for SecretKeyRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}:{}", self.namespace, self.name, self.key)
    }
}

/// `--notify-secret [NAME@][FORMAT=]NS/SECRET:KEY`: the receiver in a Secret's key, with its
/// name and format given here or in the value (`oncall@pagerduty=ops/pd:routing-key` holds
/// the bare routing key).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotifySecretRef {
    pub prefix: ReceiverPrefix,
    pub secret: SecretKeyRef,
}

impl std::str::FromStr for NotifySecretRef {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let (prefix, rest) = ReceiverPrefix::split(text);
        misspelt(rest)?;
        let secret = rest.parse::<SecretKeyRef>().map_err(|_| {
            "expected [NAME@][FORMAT=]NAMESPACE/SECRET:KEY, each a Kubernetes name (e.g. capdeck-system/notify:url, \
             oncall@pagerduty=capdeck-system/pagerduty:routing-key)"
                .to_string()
        })?;
        Ok(Self { prefix, secret })
    }
}

impl std::fmt::Display for NotifySecretRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}", self.prefix, self.secret)
    }
}

impl NotifySecretRef {
    /// The receiver the Secret's value `text` describes.
    pub fn target(&self, text: &str) -> Result<NotifyTarget, String> {
        NotifyTarget::parse_with(text, &self.prefix)
    }
}

/// How a notification is retried: `attempts` tries, each within `attempt_timeout`, the pause
/// doubling from `first_backoff`. Only 408, 429, 5xx, timeouts and connection errors are retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    pub attempts: u32,
    pub attempt_timeout: Duration,
    pub first_backoff: Duration,
}

impl Default for RetryPolicy {
    /// 5 tries in about 75 s at worst: 10 s each, 1 + 2 + 4 + 8 s between them.
    fn default() -> Self {
        Self { attempts: 5, attempt_timeout: Duration::from_secs(10), first_backoff: Duration::from_secs(1) }
    }
}
