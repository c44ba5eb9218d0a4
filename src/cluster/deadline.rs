//! Nothing waits forever: `--request-timeout` (kubectl's flag and meaning) bounds how long a
//! request waits for the API server to begin its answer, how long an exec credential plugin may
//! run while the client is built, and, for one-shot commands, each read of an answer's body.
//! A watch begins its answer at once, so the console's and the daemon's watches are bounded only
//! until then; kube's watcher has its own idle timeout for the rest.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tower::BoxError;

/// `--request-timeout`: `after` `None` waits forever (`0`, as kubectl); `flag` is what the
/// messages tell the user to change (the fleet's is `--timeout`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestTimeout {
    pub after: Option<Duration>,
    pub flag: &'static str,
}

impl RequestTimeout {
    pub const DEFAULT: Duration = Duration::from_secs(30);

    pub fn new(after: Option<Duration>) -> Self {
        Self { after, flag: "--request-timeout" }
    }
}

impl Default for RequestTimeout {
    fn default() -> Self {
        Self::new(Some(Self::DEFAULT))
    }
}

/// kubectl's forms: a Go duration (`30s`, `1m`), a bare number of seconds, or `0` for none.
pub fn parse_request_timeout(text: &str) -> Result<RequestTimeout, String> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<u64>() {
        return Ok(RequestTimeout::new((seconds > 0).then(|| Duration::from_secs(seconds))));
    }
    let duration = crate::api::go_duration::parse_go_duration(text).map_err(|_| {
        format!("{text:?} is not a duration: use one such as 30s or 2m, a number of seconds, or 0 to wait forever")
    })?;
    Ok(RequestTimeout::new((!duration.is_zero()).then_some(duration)))
}

/// A deadline as people read it: `30s`, `2m`, and `1.5s` or `500ms` rather than rounded down.
pub fn shown(after: Duration) -> String {
    if after.subsec_nanos() == 0 {
        return crate::api::go_duration::humanize(after);
    }
    if after < Duration::from_secs(1) {
        return format!("{}ms", after.as_millis());
    }
    let seconds = format!("{:.3}", after.as_secs_f64());
    format!("{}s", seconds.trim_end_matches('0').trim_end_matches('.'))
}

/// The API server did not begin to answer in time.
#[derive(Debug, thiserror::Error)]
#[error("no answer from the API server at {server} within {} ({flag})", shown(*.after))]
pub struct NoAnswer {
    pub server: String,
    pub after: Duration,
    pub flag: &'static str,
}

/// An exec credential plugin did not finish in time.
#[derive(Debug, thiserror::Error)]
#[error(
    "the exec credential plugin {command:?} of the kubeconfig's user gave no credentials within {}: run it \
     yourself to see why (it may wait for a login), or give it longer with {flag}",
    shown(*.after)
)]
pub struct PluginTimedOut {
    pub command: String,
    pub after: Duration,
    pub flag: &'static str,
}

/// The layer that gives up on a request whose answer has not begun within `after`.
#[derive(Clone, Debug)]
pub struct AnswerDeadline {
    pub after: Duration,
    pub server: String,
    pub flag: &'static str,
}

impl<S> tower::Layer<S> for AnswerDeadline {
    type Service = WithAnswerDeadline<S>;

    fn layer(&self, inner: S) -> Self::Service {
        WithAnswerDeadline { inner, deadline: self.clone() }
    }
}

#[derive(Clone, Debug)]
pub struct WithAnswerDeadline<S> {
    inner: S,
    deadline: AnswerDeadline,
}

impl<S, Request> tower::Service<Request> for WithAnswerDeadline<S>
where
    S: tower::Service<Request>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, context: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(context).map_err(Into::into)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        let answer = self.inner.call(request);
        let AnswerDeadline { after, server, flag } = self.deadline.clone();
        Box::pin(async move {
            match tokio::time::timeout(after, answer).await {
                Ok(answered) => answered.map_err(Into::into),
                Err(_) => Err(Box::new(NoAnswer { server, after, flag }) as BoxError),
            }
        })
    }
}

/// The command of the kubeconfig user's exec plugin (its name only: arguments may hold secrets).
pub fn exec_plugin(config: &kube::Config) -> Option<String> {
    let command = config.auth_info.exec.as_ref()?.command.as_ref()?;
    let name = std::path::Path::new(command)
        .file_name()
        .map_or_else(|| command.clone(), |name| name.to_string_lossy().into_owned());
    Some(name)
}

/// Build the client. kube runs an exec credential plugin here, blocking the thread until it
/// exits: on a thread of its own, so the deadline can give up on it (the plugin is left to finish
/// by itself; it is not ours to kill).
pub async fn build_client(config: kube::Config, timeout: RequestTimeout) -> Result<kube::Client, BuildError> {
    // kube turns the token into a header and panics if it cannot be one (a line break in it).
    if let Some(token) = &config.auth_info.token {
        use secrecy::ExposeSecret as _;
        if hyper::header::HeaderValue::from_str(&format!("Bearer {}", token.expose_secret())).is_err() {
            return Err(BuildError::InvalidToken);
        }
    }
    let server = super::without_userinfo(config.cluster_url.to_string().trim_end_matches('/'));
    let plugin = exec_plugin(&config);
    let runtime = tokio::runtime::Handle::current();
    let (sender, built) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new().name("kube-client".into()).spawn(move || {
        let _inside = runtime.enter();
        let _ = sender.send(kube::client::ClientBuilder::try_from(config));
    });
    if let Err(error) = spawned {
        return Err(BuildError::Thread(error.to_string()));
    }
    // Without an exec plugin the build is local work that cannot hang: only a plugin is waited
    // for within the deadline (the deadline then bounds the requests).
    let builder = match timeout.after.filter(|_| plugin.is_some()) {
        Some(after) => match tokio::time::timeout(after, built).await {
            Ok(built) => built,
            Err(_) => {
                return Err(BuildError::PluginTimedOut(PluginTimedOut {
                    command: plugin.clone().unwrap_or_else(|| "(none)".into()),
                    after,
                    flag: timeout.flag,
                }));
            }
        },
        None => built.await,
    }
    .map_err(|_| BuildError::Thread("the thread building the client ended without an answer".into()))?
    .map_err(|error| BuildError::Kube(error, plugin.clone()))?;
    Ok(match timeout.after {
        Some(after) => builder.with_layer(&AnswerDeadline { after, server, flag: timeout.flag }).build(),
        None => builder.build(),
    })
}

#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    PluginTimedOut(PluginTimedOut),
    /// kube's error, and the exec plugin's command if the kubeconfig has one.
    #[error("{0}")]
    Kube(kube::Error, Option<String>),
    #[error("cannot build the client: {0}")]
    Thread(String),
    #[error(
        "the kubeconfig user's token cannot be sent as an HTTP header (it holds a line break or another control \
         character): check its `token:`"
    )]
    InvalidToken,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_timeouts_read_as_kubectl_reads_them() {
        let cases = [
            ("30s", Some(Duration::from_secs(30))),
            ("5", Some(Duration::from_secs(5))),
            ("1m30s", Some(Duration::from_secs(90))),
            ("0", None),
            ("0s", None),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_request_timeout(text), Ok(RequestTimeout::new(expected)), "{text}");
        }
        let refused = parse_request_timeout("soon").expect_err("not a duration");
        assert!(
            refused.starts_with("\"soon\" is not a duration") && refused.contains("0 to wait forever"),
            "{refused}"
        );
        let shown_as: Vec<String> = [1500, 500, 30_000, 120_000].map(|ms| shown(Duration::from_millis(ms))).into();
        assert_eq!(shown_as, ["1.5s", "500ms", "30s", "2m"]);
        assert!(parse_request_timeout("-5s").is_err(), "negative");
    }
}
