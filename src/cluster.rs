//! Reaching the cluster: the kube client (kubeconfig or in-cluster), who the user is
//! (SelfSubjectReview), what they may do (SelfSubjectAccessReview), and the reflector stores
//! that the engine and the console share.

pub mod batch_writer;
/// Dynamic shell completion of contexts, namespaces and batches.
pub mod complete;
pub mod deadline;

pub mod stores;

use std::path::PathBuf;

use crate::api::lenient::{Lenient, Undecodable};
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec};
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

/// What a connection made from inside a Pod (no kubeconfig) calls its context.
pub const IN_CLUSTER_CONTEXT: &str = "in-cluster";

/// Which namespaces capdeck looks at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    All,
    Namespace(String),
}

impl Scope {
    pub fn api<K>(&self, client: &kube::Client) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        match self {
            Self::All => Api::all(client.clone()),
            Self::Namespace(namespace) => Api::namespaced(client.clone(), namespace),
        }
    }

    pub fn label(&self) -> String {
        match self {
            Self::All => "all namespaces".into(),
            Self::Namespace(namespace) => format!("namespace {namespace}"),
        }
    }

    pub fn includes(&self, namespace: &str) -> bool {
        match self {
            Self::All => true,
            Self::Namespace(scoped) => scoped == namespace,
        }
    }
}

/// How to reach the cluster, as the kubectl flags say it (`cli::ClusterArgs` is the command
/// line's form; the front ends get this one).
#[derive(Clone, Debug, Default)]
pub struct ClusterTarget {
    /// Kubeconfig file (`None`: $KUBECONFIG, then ~/.kube/config; in a Pod: the service account).
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context (`None`: the current context).
    pub context: Option<String>,
    /// Namespace to look at (`None`: the context's namespace).
    pub namespace: Option<String>,
    /// Every namespace.
    pub all_namespaces: bool,
    /// How long to wait for the API server to begin answering a request, and for an exec
    /// credential plugin (kubectl's `--request-timeout`).
    pub request_timeout: deadline::RequestTimeout,
}

/// What the connection is for: one-shot requests also bound each read of an answer's body; a
/// watch's body may rightly stay quiet for minutes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Requests {
    OneShot,
    Watching,
}

/// A client plus what it points at.
#[derive(Clone)]
pub struct Connection {
    pub client: kube::Client,
    /// Context name, or `in-cluster`.
    pub context: String,
    pub server: String,
    pub default_namespace: String,
}

#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error(
        "no kubeconfig found and not running in a cluster: set KUBECONFIG or pass --kubeconfig \
(or try `capdeck --demo`, which needs no cluster)"
    )]
    NoConfig,
    #[error("cannot read kubeconfig {path}: {message}")]
    Kubeconfig { path: String, message: String },
    #[error("kubeconfig has no context {0:?} (kubectl config get-contexts lists them)")]
    NoContext(String),
    #[error("cannot use the kubeconfig: {0}")]
    Config(String),
    #[error("cannot build a client for {server}: {message}")]
    Client { server: String, message: String },
    // The plugin's error in the text, not as a source: `{:#}` would print it twice.
    #[error("cannot connect to {server}: {plugin}")]
    Plugin { server: String, plugin: deadline::PluginTimedOut },
}

impl ClusterTarget {
    /// The contexts of the kubeconfig `connect` would read (for `:ctx` completion and the fleet).
    /// A kubeconfig that does not parse is an error naming the file and the line, never its text.
    pub fn context_names(&self) -> Result<Vec<String>, ConnectError> {
        let kubeconfig = match &self.kubeconfig {
            Some(path) => Kubeconfig::read_from(path),
            None => Kubeconfig::read(),
        };
        match kubeconfig {
            Ok(config) => Ok(config.contexts.into_iter().map(|named| named.name).collect()),
            Err(kube::config::KubeconfigError::FindPath) => Ok(Vec::new()),
            Err(kube::config::KubeconfigError::ReadConfig(io, _)) if io.kind() == std::io::ErrorKind::NotFound => {
                Ok(Vec::new())
            }
            Err(error) => Err(ConnectError::Kubeconfig {
                path: self.kubeconfig.as_ref().map_or_else(
                    || std::env::var("KUBECONFIG").unwrap_or_else(|_| "~/.kube/config".into()),
                    |path| path.display().to_string(),
                ),
                message: kubeconfig_problem(&error),
            }),
        }
    }

    pub fn scope(&self, connection: &Connection) -> Scope {
        if self.all_namespaces {
            Scope::All
        } else {
            Scope::Namespace(self.namespace.clone().unwrap_or_else(|| connection.default_namespace.clone()))
        }
    }

    /// Connect for one-shot requests (see `connect_for`).
    pub async fn connect(&self) -> Result<Connection, ConnectError> {
        self.connect_for(Requests::OneShot).await
    }

    /// Connect as kubectl would: explicit kubeconfig, $KUBECONFIG, ~/.kube/config, in-cluster;
    /// every request within `--request-timeout` (`deadline`).
    pub async fn connect_for(&self, requests: Requests) -> Result<Connection, ConnectError> {
        let options = KubeConfigOptions { context: self.context.clone(), ..KubeConfigOptions::default() };
        let (config, context) = match &self.kubeconfig {
            Some(path) => {
                let kubeconfig = Kubeconfig::read_from(path).map_err(|error| ConnectError::Kubeconfig {
                    path: path.display().to_string(),
                    message: kubeconfig_problem(&error),
                })?;
                let context = self.context.clone().or_else(|| kubeconfig.current_context.clone()).unwrap_or_default();
                if !kubeconfig.contexts.iter().any(|named| named.name == context) {
                    return Err(ConnectError::NoContext(context));
                }
                let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                    .await
                    .map_err(|error| ConnectError::Config(without_echoed_input(&error.to_string())))?;
                (config, context)
            }
            None => match kube::Config::from_kubeconfig(&options).await {
                Ok(config) => {
                    let context = self
                        .context
                        .clone()
                        .or_else(|| Kubeconfig::read().ok().and_then(|k| k.current_context))
                        .unwrap_or_default();
                    (config, context)
                }
                Err(kubeconfig_error) => match kube::Config::incluster() {
                    Ok(config) => (config, IN_CLUSTER_CONTEXT.to_string()),
                    Err(_) if self.context.is_some() => {
                        return Err(ConnectError::NoContext(self.context.clone().unwrap_or_default()));
                    }
                    Err(_) => {
                        // No kubeconfig at all (none found, or $KUBECONFIG names a missing file):
                        // say how to get one; any other problem is the file's.
                        use kube::config::KubeconfigError;
                        return Err(match &kubeconfig_error {
                            KubeconfigError::FindPath => ConnectError::NoConfig,
                            KubeconfigError::ReadConfig(io, _) if io.kind() == std::io::ErrorKind::NotFound => {
                                ConnectError::NoConfig
                            }
                            other => ConnectError::Config(without_echoed_input(&other.to_string())),
                        });
                    }
                },
            },
        };
        let server = without_userinfo(&config.cluster_url.to_string());
        let default_namespace = config.default_namespace.clone();
        let mut config = config;
        if let (Requests::OneShot, Some(after)) = (requests, self.request_timeout.after) {
            // Each read of a body that stalls after its answer began. A second longer than the
            // answer deadline, so that a server silent from the start gets the deadline's error,
            // which names it.
            config.read_timeout = Some(after + std::time::Duration::from_secs(1));
            // From when the request is written, not from when its pooled connection went idle.
            config.reset_reader_on_write = true;
        }
        let client = deadline::build_client(config, self.request_timeout).await.map_err(|error| match error {
            deadline::BuildError::PluginTimedOut(plugin) => ConnectError::Plugin { server: server.clone(), plugin },
            deadline::BuildError::Kube(error, plugin) => {
                let mut message = describe_client_error(&error, &context);
                if let (kube::Error::Auth(_), Some(plugin)) = (&error, plugin) {
                    message = format!("the exec credential plugin {plugin:?}: {message}");
                }
                ConnectError::Client { server: server.clone(), message }
            }
            deadline::BuildError::Thread(message) => ConnectError::Client { server: server.clone(), message },
            invalid @ deadline::BuildError::InvalidToken => ConnectError::Config(invalid.to_string()),
        })?;
        Ok(Connection { client, context, server, default_namespace })
    }
}

/// Who the API server says we are (what `kubectl auth whoami` shows). `None` when the server
/// does not answer SelfSubjectReview.
pub async fn whoami(client: &kube::Client) -> Option<String> {
    who_am_i(client).await.ok()
}

/// `whoami`, or why the server did not say (described, with what to check).
pub async fn who_am_i(client: &kube::Client) -> Result<String, String> {
    let reviews: Api<SelfSubjectReview> = Api::all(client.clone());
    let review = reviews
        .create(&PostParams::default(), &SelfSubjectReview::default())
        .await
        .map_err(|error| format!("SelfSubjectReview failed: {}", describe_error(&error)))?;
    review
        .status
        .and_then(|status| status.user_info)
        .and_then(|user| user.username)
        .ok_or_else(|| "its SelfSubjectReview named no user".to_string())
}

/// Whether we may `verb` the resource (SelfSubjectAccessReview). Errors count as "no".
pub async fn can_i(client: &kube::Client, verb: &str, group: &str, resource: &str, namespace: Option<&str>) -> bool {
    can_i_subresource(client, verb, group, resource, "", namespace).await
}

/// Whether we may `verb` a subresource (`pods/log`: resource `pods`, subresource `log`).
pub async fn can_i_subresource(
    client: &kube::Client,
    verb: &str,
    group: &str,
    resource: &str,
    subresource: &str,
    namespace: Option<&str>,
) -> bool {
    let reviews: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let review = access_review(verb, group, resource, subresource, namespace);
    reviews
        .create(&PostParams::default(), &review)
        .await
        .ok()
        .and_then(|review| review.status)
        .is_some_and(|status| status.allowed)
}

/// The SelfSubjectAccessReview asking whether we may `verb` (a subresource of) the resource.
fn access_review(
    verb: &str,
    group: &str,
    resource: &str,
    subresource: &str,
    namespace: Option<&str>,
) -> SelfSubjectAccessReview {
    SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.into()),
                group: Some(group.into()),
                resource: Some(resource.into()),
                subresource: (!subresource.is_empty()).then(|| subresource.into()),
                namespace: namespace.map(str::to_string),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    }
}

/// Whether we may `verb` the resource, as the API server's authorizer answers; `Err` when it could
/// not be asked (the review failed: a time-out, an error, a server that does not serve them).
pub async fn may(
    client: &kube::Client,
    verb: &str,
    group: &str,
    resource: &str,
    namespace: Option<&str>,
) -> Result<bool, String> {
    let reviews: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    let review = access_review(verb, group, resource, "", namespace);
    let answered = reviews.create(&PostParams::default(), &review).await.map_err(|error| describe_error(&error))?;
    answered.status.map(|status| status.allowed).ok_or_else(|| "the review came back without an answer".into())
}

/// A list decoded one object at a time ([`Lenient`]): the objects that decode, and those that do
/// not, each named (never quoted). One bad object never fails a list.
#[derive(Debug)]
pub struct Listed<K> {
    pub items: Vec<K>,
    pub undecodable: Vec<Undecodable>,
}

impl<K> Default for Listed<K> {
    fn default() -> Self {
        Self { items: Vec::new(), undecodable: Vec::new() }
    }
}

impl<K> Listed<K> {
    pub fn of(objects: impl IntoIterator<Item = Lenient<K>>) -> Self {
        let mut listed = Self::default();
        for object in objects {
            match object.into_result() {
                Ok(object) => listed.items.push(object),
                Err(undecodable) => listed.undecodable.push(undecodable),
            }
        }
        listed
    }
}

/// LIST `api`, decoding each object on its own.
pub async fn list_each<K>(api: &kube::Api<Lenient<K>>, params: &kube::api::ListParams) -> Result<Listed<K>, kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(params).await.map(|list| Listed::of(list.items))
}

/// An object that did not decode, for the CLI's warnings and `doctor`: `Freeze other/x: field
/// spec.until: …; skipped (kubectl -n other get freeze x -o yaml shows it)`.
pub fn describe_undecodable(kind: &str, undecodable: &Undecodable) -> String {
    let namespace = undecodable.namespace();
    let name = undecodable.name();
    let (at, flag) = if namespace.is_empty() {
        (String::new(), String::new())
    } else {
        (format!("{namespace}/"), format!("-n {namespace} "))
    };
    format!(
        "{kind} {at}{name} does not decode ({}); skipped. `kubectl {flag}get {} {name} -o yaml` shows it: fix or delete it",
        undecodable.describe(),
        kind.to_lowercase()
    )
}

/// An object that does not decode, as the kube error a read or write of it returns (its
/// message names the object and the field, never a value).
pub fn undecodable_error(kind: &str, undecodable: &Undecodable) -> kube::Error {
    kube::Error::SerdeError(<serde_json::Error as serde::de::Error>::custom(format!("{kind} {undecodable}")))
}

/// sap-btp-service-operator's ServiceBindings; `None` when the kind is not served.
pub async fn list_service_bindings(
    client: &kube::Client,
    scope: &Scope,
) -> Result<Option<Listed<crate::api::service_binding::ServiceBinding>>, String> {
    match list_each(&scope.api(client), &kube::api::ListParams::default()).await {
        Ok(listed) => Ok(Some(listed)),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(error) => Err(describe_error(&error)),
    }
}

/// A 403: the API server refused the request to this user.
pub fn is_forbidden(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 403)
}

/// One object by name: a GET, and on a 403 a LIST of that name (`metadata.name` field selector).
/// The engine's ClusterRole (and so the chart's ServiceAccount) grants `list` on Secrets and
/// Namespaces, not `get`. When both are refused, the GET's error. The object is decoded on its
/// own: one that does not decode is `Some(Err(…))`.
pub async fn get_or_list_by_name<K>(
    api: &kube::Api<Lenient<K>>,
    name: &str,
) -> Result<Option<Result<K, Undecodable>>, kube::Error>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let found = match api.get_opt(name).await {
        Err(error) if is_forbidden(&error) => api
            .list(&kube::api::ListParams::default().fields(&format!("metadata.name={name}")))
            .await
            .map(|list| list.items.into_iter().next())
            .map_err(|listed| if is_forbidden(&listed) { error } else { listed }),
        read => read,
    };
    found.map(|found| found.map(Lenient::into_result))
}

/// One Secret by name, for the CLI's live reads (`credentials`, `fleet`, `deps`), by
/// [`get_or_list_by_name`]: neither allowed says so.
pub async fn read_secret(client: &kube::Client, namespace: &str, name: &str) -> crate::lookup::SecretLookup {
    use crate::lookup::SecretLookup;
    let api: kube::Api<Lenient<k8s_openapi::api::core::v1::Secret>> = kube::Api::namespaced(client.clone(), namespace);
    match get_or_list_by_name(&api, name).await {
        Ok(Some(Ok(secret))) => SecretLookup::Found(std::sync::Arc::new(secret.into())),
        Ok(Some(Err(undecodable))) => SecretLookup::Malformed(format!("does not decode ({})", undecodable.describe())),
        Ok(None) => SecretLookup::Missing,
        Err(error) if is_forbidden(&error) => SecretLookup::Malformed(format!(
            "cannot be read: you may neither get nor list Secrets in {namespace} ({})",
            describe_error(&error)
        )),
        Err(error) => SecretLookup::Malformed(format!("cannot be read: {}", describe_error(&error))),
    }
}

/// A kube error at a module boundary: `Display` is `describe_error` (what happened and what to
/// do), the kube error stays available as the source.
#[derive(Debug, thiserror::Error)]
#[error("{}", describe_error(.0))]
pub struct ApiError(#[source] pub kube::Error);

/// Whether retrying the same request later can succeed without anyone changing anything: the
/// API server was unreachable, busy, failing, or the object changed under us.
pub fn is_transient(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => matches!(status.code, 409 | 429 | 500..=599),
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

/// The causes of `error`, outermost first: its `source()` chain, also into the error an
/// `std::io::Error` wraps (whose own `source()` skips it), which is where hyper-rustls puts a TLS
/// failure.
fn causes<'a>(error: &'a (dyn std::error::Error + 'static)) -> Vec<&'a (dyn std::error::Error + 'static)> {
    let mut found = Vec::new();
    let mut next = Some(error);
    while let Some(current) = next {
        found.push(current);
        if found.len() > 32 {
            break;
        }
        next = match current.downcast_ref::<std::io::Error>().and_then(std::io::Error::get_ref) {
            Some(inner) => Some(inner),
            None => current.source(),
        };
    }
    found
}

/// Whether rustls refused a certificate for being X.509 v1 (webpki's `UnsupportedCertVersion`):
/// `openssl x509 -req` without `-extfile` makes one, and kubectl (Go) accepts it. At client build
/// for the client certificate, in the TLS handshake for the server's.
fn is_x509_v1(error: &kube::Error) -> bool {
    causes(error).into_iter().any(|cause| {
        matches!(
            cause.downcast_ref::<rustls::Error>(),
            Some(rustls::Error::InvalidCertificate(rustls::CertificateError::Other(other)))
                if other.to_string().contains("UnsupportedCertVersion")
        ) || cause.to_string().contains("UnsupportedCertVersion")
    })
}

/// Why a client cannot be built from the kubeconfig of `context`, with the fix.
fn describe_client_error(error: &kube::Error, context: &str) -> String {
    if is_x509_v1(error) {
        return format!(
            "the client certificate in kubeconfig context {context:?} is X.509 v1, which kubectl accepts but \
             rustls refuses (it needs v3): re-issue it with extensions, e.g. `openssl x509 -req ... -extfile \
             <(printf 'extendedKeyUsage=clientAuth')`, or use a token"
        );
    }
    without_echoed_input(&error.to_string())
}

/// Why a request never reached the API server, in a few words (`connection refused`, `DNS lookup
/// failed: …`, `TLS: …`, `timed out`); `None` when the error is not about reaching it.
pub fn unreachable_cause(error: &kube::Error) -> Option<String> {
    use std::io::ErrorKind;
    if !matches!(error, kube::Error::HyperError(_) | kube::Error::Service(_)) {
        return None;
    }
    if is_x509_v1(error) {
        return Some(
            "TLS: a certificate in the handshake is X.509 v1, which rustls refuses (it needs v3): re-issue the API \
             server's certificate (or the kubeconfig's client certificate) with extensions"
                .into(),
        );
    }
    let causes = causes(error);
    for cause in &causes {
        if let Some(no_answer) = cause.downcast_ref::<deadline::NoAnswer>() {
            return Some(format!("no answer within {} ({})", deadline::shown(no_answer.after), no_answer.flag));
        }
        if let Some(tls) = cause.downcast_ref::<rustls::Error>() {
            return Some(describe_tls(tls));
        }
    }
    for (index, cause) in causes.iter().enumerate() {
        // hyper-util's connector names the step: `dns error` wraps the resolver's io::Error.
        if cause.to_string() == "dns error" {
            let detail = causes.get(index + 1).map(|inner| format!(": {}", strip_os_error(&inner.to_string())));
            return Some(format!("DNS lookup failed{}", detail.unwrap_or_default()));
        }
    }
    for cause in &causes {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            return Some(match io.kind() {
                ErrorKind::ConnectionRefused => "connection refused".into(),
                ErrorKind::TimedOut => "timed out".into(),
                ErrorKind::ConnectionReset => "connection reset by the server".into(),
                ErrorKind::ConnectionAborted => "connection aborted".into(),
                ErrorKind::HostUnreachable => "host unreachable".into(),
                ErrorKind::NetworkUnreachable => "network unreachable".into(),
                ErrorKind::UnexpectedEof => "the server closed the connection".into(),
                _ => strip_os_error(&io.to_string()),
            });
        }
    }
    // The deepest cause says most (`client error (Connect)` says least).
    causes.last().map(|cause| cause.to_string())
}

/// `Connection refused (os error 111)` → `Connection refused`.
fn strip_os_error(text: &str) -> String {
    match text.rfind(" (os error ") {
        Some(at) if text.ends_with(')') => text[..at].to_string(),
        _ => text.to_string(),
    }
}

/// A TLS failure in words, with what to check.
fn describe_tls(error: &rustls::Error) -> String {
    use rustls::CertificateError;
    match error {
        rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer) => {
            "TLS: the server's certificate is not signed by a CA the kubeconfig trusts (certificate-authority-data)"
                .into()
        }
        rustls::Error::InvalidCertificate(CertificateError::Expired | CertificateError::ExpiredContext { .. }) => {
            "TLS: the server's certificate has expired".into()
        }
        rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        ) => "TLS: the server's certificate is not valid for this host name (the kubeconfig's server)".into(),
        rustls::Error::AlertReceived(alert) => format!("TLS: the server ended the handshake ({alert:?})"),
        other => format!("TLS: {other}"),
    }
}

/// A short, actionable description of a kube error for people.
/// Parsers quote the input around a problem: a kubeconfig's YAML error shows the lines near it
/// (a `token:`, a `client-key-data:`), an exec plugin's bad output its JSON (`"token":"…"`). Keep
/// where and what (file, line, column, the problem) and never the input: the quoted source after
/// the first line goes, and so does anything in quotes on it.
pub fn without_echoed_input(message: &str) -> String {
    static QUOTED: std::sync::LazyLock<Option<regex::Regex>> =
        std::sync::LazyLock::new(|| regex::Regex::new(r#""(?:[^"\\]|\\.)*"|`[^`]*`"#).ok());
    let first = message.split('\n').next().unwrap_or_default().trim_end();
    let unquoted = match QUOTED.as_ref() {
        Some(quoted) => quoted.replace_all(first, "\"…\"").into_owned(),
        None => first.to_string(),
    };
    without_userinfo(&unquoted)
}

/// URLs with their user info masked: a kubeconfig's `server: https://admin:PW@host` or
/// `proxy-url` is named in errors, logs, `/readyz` and tables as `https://…@host`.
pub fn without_userinfo(text: &str) -> String {
    static USERINFO: std::sync::LazyLock<Option<regex::Regex>> =
        std::sync::LazyLock::new(|| regex::Regex::new(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@]*@").ok());
    match USERINFO.as_ref() {
        Some(userinfo) => userinfo.replace_all(text, "${1}…@").into_owned(),
        None => text.to_string(),
    }
}

/// The answer deadline's error, when that is why `error` happened.
pub fn no_answer(error: &kube::Error) -> Option<&deadline::NoAnswer> {
    causes(error).into_iter().find_map(|cause| cause.downcast_ref::<deadline::NoAnswer>())
}

/// Why a kubeconfig cannot be read, with what to do: a missing file says so (kube's own text
/// repeats the path in quotes), anything else is kube's words without the input it echoes.
fn kubeconfig_problem(error: &kube::config::KubeconfigError) -> String {
    match error {
        kube::config::KubeconfigError::ReadConfig(io, _) if io.kind() == std::io::ErrorKind::NotFound => {
            "no such file: point --kubeconfig or $KUBECONFIG at your kubeconfig (kubectl config view shows \
             the one kubectl uses)"
                .into()
        }
        kube::config::KubeconfigError::ReadConfig(io, _) => format!("{io}"),
        other => without_echoed_input(&other.to_string()),
    }
}

/// A Status's message, never a response body: when kube could not read the answer as a Status it
/// puts the answer's text in the message; then only the `message` field of a JSON Status is
/// kept, and anything else is not shown.
pub fn status_message(status: &kube::core::Status) -> String {
    let text = status.message.trim();
    if !text.starts_with('{') {
        return status.message.clone();
    }
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|body| body.get("message").and_then(serde_json::Value::as_str).map(str::to_string))
        .unwrap_or_else(|| "the answer was not a Kubernetes Status (not shown: it may hold credentials)".into())
}

pub fn describe_error(error: &kube::Error) -> String {
    without_userinfo(&describe(error))
}

fn describe(error: &kube::Error) -> String {
    if let kube::Error::Auth(_) = error {
        return format!("cannot get credentials from the kubeconfig: {}", without_echoed_input(&error.to_string()));
    }
    if is_x509_v1(error) {
        return "a certificate in the TLS handshake is X.509 v1, which rustls refuses (it needs v3): re-issue the \
                API server's certificate (or the client certificate in the kubeconfig) with extensions, e.g. \
                `openssl x509 -req ... -extfile <(printf 'extendedKeyUsage=clientAuth')`"
            .into();
    }
    match error {
        kube::Error::Api(status) => {
            let message = status_message(status);
            match status.code {
                401 => format!("unauthorized: {message} (are your kubeconfig credentials still valid?)"),
                403 => format!("forbidden: {message}"),
                404 => format!("not found: {message}"),
                409 => format!("conflict: {message} (someone else changed it; re-read and try again)"),
                _ => format!("{message} ({} {})", status.code, status.reason),
            }
        }
        kube::Error::HyperError(_) | kube::Error::Service(_) => {
            if let Some(no_answer) = no_answer(error) {
                return format!("{no_answer}: is it up, and not overloaded? (a longer {} waits more)", no_answer.flag);
            }
            format!(
                "cannot reach the API server: {} (is the cluster up and the kubeconfig right?)",
                unreachable_cause(error).unwrap_or_else(|| error.to_string())
            )
        }
        // serde's message may quote a value of the answer, and an answer may hold credentials;
        // capdeck's own (`undecodable_error`) names the object and the field only.
        kube::Error::SerdeError(error) if error.to_string().contains(" does not decode (") => {
            format!("{error}: fix or delete it")
        }
        kube::Error::SerdeError(_) => {
            "the API server's answer does not decode (not shown: it may hold credentials)".into()
        }
        other => other.to_string(),
    }
}

/// A watch's error for people and logs, like [`describe_error`].
pub fn describe_watch_error(error: &kube::runtime::watcher::Error) -> String {
    use kube::runtime::watcher::Error;
    match error {
        Error::InitialListFailed(error) | Error::WatchStartFailed(error) | Error::WatchFailed(error) => {
            describe_error(error)
        }
        Error::WatchError(status) => format!("{} ({} {})", status_message(status), status.code, status.reason),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(kube::core::Status::failure("x", "Reason").with_code(code).boxed())
    }

    /// A list over `config`, to get the error a user would get.
    async fn list_error(config: kube::Config) -> kube::Error {
        let client = kube::Client::try_from(config).expect("client");
        let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client);
        api.list(&kube::api::ListParams::default()).await.expect_err("nobody answers")
    }

    /// A response body kube put in a Status's message never reaches a person: a JSON Status gives
    /// its message, anything else is not shown.
    #[test]
    fn a_status_message_is_never_a_body() {
        let with = |message: &str| kube::core::Status::failure(message, "Forbidden").with_code(403);
        let body = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"freezes is forbidden: User \"mallory\"","code":403}"#;
        assert_eq!(status_message(&with(body)), r#"freezes is forbidden: User "mallory""#);
        let secret = r#"{"data":{"password":"hunter2"}}"#;
        assert!(!status_message(&with(secret)).contains("hunter2"));
        assert!(!status_message(&with("{not json hunter2")).contains("hunter2"));
        assert_eq!(status_message(&with("plain words")), "plain words");
        let error = kube::Error::Api(with(secret).boxed());
        assert!(!describe_error(&error).contains("hunter2"), "{}", describe_error(&error));
    }

    fn closed_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("address").port()
    }

    #[test]
    fn user_info_in_urls_is_masked() {
        let cases = [
            ("https://admin:SECRET@10.0.0.1:6443/", "https://…@10.0.0.1:6443/"),
            (
                "cannot connect to http://u:SECRET@127.0.0.1:1: refused",
                "cannot connect to http://…@127.0.0.1:1: refused",
            ),
            ("configured proxy socks5://user@proxy:1080/ requires", "configured proxy socks5://…@proxy:1080/ requires"),
            ("https://10.0.0.1:6443/api?x=a@b", "https://10.0.0.1:6443/api?x=a@b"),
            ("mail alice@example.com", "mail alice@example.com"),
        ];
        for (text, expected) in cases {
            assert_eq!(without_userinfo(text), expected, "{text}");
        }
        assert_eq!(without_echoed_input("bad proxy http://u:SECRET@p:2/ here"), "bad proxy http://…@p:2/ here");
    }

    #[tokio::test]
    async fn a_refused_connection_is_named_not_dumped() {
        for scheme in ["http", "https"] {
            let url = format!("{scheme}://127.0.0.1:{}", closed_port());
            let error = list_error(kube::Config::new(url.parse().expect("url"))).await;
            assert_eq!(unreachable_cause(&error).as_deref(), Some("connection refused"), "{scheme}: {error:?}");
            assert_eq!(
                describe_error(&error),
                "cannot reach the API server: connection refused (is the cluster up and the kubeconfig right?)"
            );
        }
        assert_eq!(unreachable_cause(&api(500)), None, "the server answered");
    }

    /// What the console's outage banner says when the API server is down: a watch's error through
    /// the client capdeck builds (its deadline layer included), named as the CLI names it, never
    /// kube's `ServiceError: client error (Connect)`.
    #[tokio::test]
    async fn a_watch_that_cannot_connect_is_named_as_the_cli_names_it() {
        use futures::StreamExt as _;
        let url = format!("https://127.0.0.1:{}", closed_port());
        let client =
            deadline::build_client(kube::Config::new(url.parse().expect("url")), deadline::RequestTimeout::default())
                .await
                .expect("client");
        let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client);
        let mut stream = std::pin::pin!(kube::runtime::watcher(api, kube::runtime::watcher::Config::default()));
        // The watcher says `Init` first, then fails its list.
        let mut error = None;
        while let Some(event) = stream.next().await {
            if let Err(failed) = event {
                error = Some(failed);
                break;
            }
        }
        let error = error.expect("an error from a closed port");
        let text = describe_watch_error(&error);
        assert_eq!(
            text,
            "cannot reach the API server: connection refused (is the cluster up and the kubeconfig right?)"
        );
    }

    /// One DER element at `at`: (tag, content start, end).
    fn der_element(der: &[u8], at: usize) -> (u8, usize, usize) {
        let first = der[at + 1];
        let (length, header) = if first < 0x80 {
            (usize::from(first), 2)
        } else {
            let count = usize::from(first & 0x7f);
            (der[at + 2..at + 2 + count].iter().fold(0, |sum, byte| (sum << 8) | usize::from(*byte)), 2 + count)
        };
        (der[at], at + header, at + header + length)
    }

    fn der_wrap(tag: u8, content: &[u8]) -> Vec<u8> {
        let length = content.len();
        let mut out = vec![tag];
        if length < 0x80 {
            out.push(u8::try_from(length).expect("short"));
        } else {
            let bytes: Vec<u8> = length.to_be_bytes().into_iter().skip_while(|byte| *byte == 0).collect();
            out.push(0x80 | u8::try_from(bytes.len()).expect("length of length"));
            out.extend(bytes);
        }
        out.extend_from_slice(content);
        out
    }

    /// A serving certificate for 127.0.0.1 made X.509 v1: rcgen's v3 without `[0] version` and
    /// `[3] extensions`, signed again.
    fn v1_serving_certificate() -> (Vec<u8>, rcgen::KeyPair) {
        use rcgen::SigningKey as _;
        let key = rcgen::KeyPair::generate().expect("key");
        let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).expect("params");
        let der = params.self_signed(&key).expect("certificate").der().to_vec();
        let (_, certificate, _) = der_element(&der, 0);
        let (_, tbs_content, tbs_end) = der_element(&der, certificate);
        let (_, _, algorithm_end) = der_element(&der, tbs_end);
        let mut fields = Vec::new();
        let mut at = tbs_content;
        while at < tbs_end {
            let (tag, _, end) = der_element(&der, at);
            if tag != 0xa0 && tag != 0xa3 {
                fields.extend_from_slice(&der[at..end]);
            }
            at = end;
        }
        let tbs = der_wrap(0x30, &fields);
        let mut bits = vec![0u8];
        bits.extend(key.sign(&tbs).expect("sign"));
        let mut body = tbs;
        body.extend_from_slice(&der[tbs_end..algorithm_end]);
        body.extend(der_wrap(0x03, &bits));
        (der_wrap(0x30, &body), key)
    }

    #[derive(Debug)]
    struct Fixed(std::sync::Arc<rustls::sign::CertifiedKey>);

    impl rustls::server::ResolvesServerCert for Fixed {
        fn resolve(&self, _: rustls::server::ClientHello<'_>) -> Option<std::sync::Arc<rustls::sign::CertifiedKey>> {
            Some(self.0.clone())
        }
    }

    /// An API server whose own certificate is X.509 v1: the client builds, and the request fails
    /// in the TLS handshake, deep inside hyper's error — still named with the fix.
    #[tokio::test]
    async fn a_v1_server_certificate_is_found_in_the_handshake_error() {
        use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
        let (der, key) = v1_serving_certificate();
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let signing = rustls::crypto::ring::sign::any_supported_type(&PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
            key.serialize_der(),
        )))
        .expect("signing key");
        // `CertifiedKey::new` does not parse the certificate (`with_single_cert` would refuse v1).
        let certified = rustls::sign::CertifiedKey::new(vec![CertificateDer::from(der.clone())], signing);
        let server = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("versions")
            .with_no_client_auth()
            .with_cert_resolver(std::sync::Arc::new(Fixed(std::sync::Arc::new(certified))));
        let server = std::sync::Arc::new(server);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let Ok(connection) = rustls::ServerConnection::new(server.clone()) else { return };
                let mut tls = rustls::StreamOwned::new(connection, stream);
                let _ = std::io::Read::read(&mut tls, &mut [0u8; 64]);
            }
        });
        let mut config = kube::Config::new(format!("https://127.0.0.1:{port}").parse().expect("url"));
        config.root_cert = Some(vec![der]);
        let error = list_error(config).await;
        let text = describe_error(&error);
        assert!(
            text.contains("X.509 v1") && text.contains("re-issue the API server's certificate"),
            "{text}: {error:?}"
        );
        assert!(unreachable_cause(&error).is_some_and(|cause| cause.contains("X.509 v1")), "{error:?}");
    }

    #[test]
    fn only_errors_that_retrying_can_fix_are_transient() {
        for code in [409, 429, 500, 502, 503, 504] {
            assert!(is_transient(&api(code)), "{code}");
        }
        for code in [400, 401, 403, 404, 410, 422] {
            assert!(!is_transient(&api(code)), "{code}");
        }
    }
}
