//! Reaching the cluster: the kube client (kubeconfig or in-cluster), who the user is
//! (SelfSubjectReview), what they may do (SelfSubjectAccessReview), and the reflector stores
//! that the engine and the console share.

pub mod leader;
pub mod stores;

use std::path::PathBuf;

use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec};
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

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

/// How to reach the cluster: the usual kubectl flags.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct ClusterArgs {
    /// Kubeconfig file (default: $KUBECONFIG, then ~/.kube/config; in a Pod: the service account)
    #[arg(long, global = true, value_name = "PATH", env = "KUBECONFIG", hide_env_values = true)]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use (default: the current context)
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// Namespace to look at (default: the context's namespace)
    #[arg(short = 'n', long, global = true, value_name = "NS", conflicts_with = "all_namespaces")]
    pub namespace: Option<String>,
    /// Look at every namespace
    #[arg(short = 'A', long, global = true)]
    pub all_namespaces: bool,
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
}

impl ClusterArgs {
    /// The contexts of the kubeconfig `connect` would read (for `:ctx` completion); empty when
    /// there is none or it does not parse — `connect` says why.
    pub fn context_names(&self) -> Vec<String> {
        let kubeconfig = match &self.kubeconfig {
            Some(path) => Kubeconfig::read_from(path),
            None => Kubeconfig::read(),
        };
        kubeconfig.map(|config| config.contexts.into_iter().map(|named| named.name).collect()).unwrap_or_default()
    }

    pub fn scope(&self, connection: &Connection) -> Scope {
        if self.all_namespaces {
            Scope::All
        } else {
            Scope::Namespace(self.namespace.clone().unwrap_or_else(|| connection.default_namespace.clone()))
        }
    }

    /// Connect as kubectl would: explicit kubeconfig, $KUBECONFIG, ~/.kube/config, in-cluster.
    pub async fn connect(&self) -> Result<Connection, ConnectError> {
        let options = KubeConfigOptions { context: self.context.clone(), ..KubeConfigOptions::default() };
        let (config, context) = match &self.kubeconfig {
            Some(path) => {
                let kubeconfig = Kubeconfig::read_from(path).map_err(|error| ConnectError::Kubeconfig {
                    path: path.display().to_string(),
                    message: error.to_string(),
                })?;
                let context = self.context.clone().or_else(|| kubeconfig.current_context.clone()).unwrap_or_default();
                if !kubeconfig.contexts.iter().any(|named| named.name == context) {
                    return Err(ConnectError::NoContext(context));
                }
                let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                    .await
                    .map_err(|error| ConnectError::Config(error.to_string()))?;
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
                    Ok(config) => (config, "in-cluster".to_string()),
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
                            other => ConnectError::Config(other.to_string()),
                        });
                    }
                },
            },
        };
        let server = config.cluster_url.to_string();
        let default_namespace = config.default_namespace.clone();
        let client = kube::Client::try_from(config).map_err(|error| ConnectError::Client {
            server: server.clone(),
            message: describe_client_error(&error, &context),
        })?;
        Ok(Connection { client, context, server, default_namespace })
    }
}

/// Who the API server says we are (what `kubectl auth whoami` shows). `None` when the server
/// does not answer SelfSubjectReview.
pub async fn whoami(client: &kube::Client) -> Option<String> {
    let reviews: Api<SelfSubjectReview> = Api::all(client.clone());
    let review = reviews.create(&PostParams::default(), &SelfSubjectReview::default()).await.ok()?;
    review.status?.user_info?.username
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
    let review = SelfSubjectAccessReview {
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
    };
    reviews
        .create(&PostParams::default(), &review)
        .await
        .ok()
        .and_then(|review| review.status)
        .is_some_and(|status| status.allowed)
}

/// sap-btp-service-operator's ServiceBindings; `None` when the kind is not served.
pub async fn list_service_bindings(
    client: &kube::Client,
    scope: &Scope,
) -> Result<Option<Vec<crate::api::service_binding::ServiceBinding>>, String> {
    let resource = kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        crate::api::service_binding::GROUP,
        "v1",
        "ServiceBinding",
    ));
    let api: kube::Api<kube::api::DynamicObject> = match scope {
        Scope::All => kube::Api::all_with(client.clone(), &resource),
        Scope::Namespace(namespace) => kube::Api::namespaced_with(client.clone(), namespace, &resource),
    };
    match api.list(&kube::api::ListParams::default()).await {
        Ok(list) => Ok(Some(
            list.items
                .into_iter()
                .filter_map(|object| {
                    let name = object.metadata.name.clone().unwrap_or_default();
                    serde_json::to_value(object)
                        .and_then(serde_json::from_value::<crate::api::service_binding::ServiceBinding>)
                        .map_err(|error| tracing::warn!(%error, binding = %name, "a ServiceBinding does not decode; skipped"))
                        .ok()
                })
                .collect(),
        )),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(error) => Err(describe_error(&error)),
    }
}

/// A kube error at a module boundary: `Display` is `describe_error` (what happened and what to
/// do), the kube error stays available as the source.
#[derive(Debug, thiserror::Error)]
#[error("{}", describe_error(.0))]
pub struct ApiError(#[source] pub kube::Error);

/// A short, actionable description of a kube error for people.
/// Whether retrying the same request later can succeed without anyone changing anything: the
/// API server was unreachable, busy, failing, or the object changed under us.
pub fn is_transient(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => matches!(status.code, 409 | 429 | 500..=599),
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

/// Whether rustls refused a certificate for being X.509 v1 (webpki's `UnsupportedCertVersion`):
/// `openssl x509 -req` without `-extfile` makes one, and kubectl (Go) accepts it.
fn is_x509_v1(error: &kube::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        if let Some(rustls::Error::InvalidCertificate(rustls::CertificateError::Other(other))) =
            current.downcast_ref::<rustls::Error>()
            && other.to_string().contains("UnsupportedCertVersion")
        {
            return true;
        }
        source = current.source();
    }
    // Another rustls version in the chain would not downcast: its text still names the cause.
    error.to_string().contains("UnsupportedCertVersion")
}

/// Why a client cannot be built from the kubeconfig of `context`, with the fix.
fn describe_client_error(error: &kube::Error, context: &str) -> String {
    if is_x509_v1(error) {
        return format!(
            "the client certificate in kubeconfig context {context:?} is X.509 v1, which kubectl accepts but \
             rustls refuses (it needs v3): re-issue it with extensions, e.g. `openssl x509 -req ... -extfile \
             <(printf 'extendedKeyUsage=clientAuth')`, or use a token ({error})"
        );
    }
    error.to_string()
}

pub fn describe_error(error: &kube::Error) -> String {
    if is_x509_v1(error) {
        return format!(
            "a certificate in the TLS handshake is X.509 v1, which rustls refuses (it needs v3): re-issue the API \
             server's certificate (or the client certificate in the kubeconfig) with extensions ({error})"
        );
    }
    match error {
        kube::Error::Api(status) => match status.code {
            401 => format!("unauthorized: {} (are your kubeconfig credentials still valid?)", status.message),
            403 => format!("forbidden: {}", status.message),
            404 => format!("not found: {}", status.message),
            409 => format!("conflict: {} (someone else changed it; re-read and try again)", status.message),
            _ => format!("{} ({} {})", status.message, status.code, status.reason),
        },
        kube::Error::HyperError(_) | kube::Error::Service(_) => {
            format!("cannot reach the API server: {error} (is the cluster up and the kubeconfig right?)")
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> kube::Error {
        kube::Error::Api(kube::core::Status::failure("x", "Reason").with_code(code).boxed())
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
