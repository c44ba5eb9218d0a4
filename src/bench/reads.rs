//! What a client read from the API server: requests and response bytes, by request, counted on
//! the client side (a tower layer around kube's HTTP service). The benches use it to say what
//! the stores cost the API server to sync, which the sandbox's request log cannot (it runs in
//! another process and does not size its answers).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use http_body_util::BodyExt as _;
use hyper::http::{self, Request, Response};
use kube::client::{Body, ClientBuilder, DynBody};
use serde_json::{Value, json};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

const INITIAL_EVENTS_END: &[u8] = b"k8s.io/initial-events-end";

/// Requests and bytes per request label (`list secrets (metadata)`, `watch capapplications`,
/// `streaming list captenants`, …).
#[derive(Clone, Default)]
pub struct ReadCounter {
    tallies: Arc<Mutex<BTreeMap<String, Tally>>>,
    /// Only when asked for ([`ReadCounter::logging`]; the engine bench reports this process's
    /// memory): in order, `sent LABEL` per request, and `answered LABEL` when its answer came:
    /// the response's headers for a get or list, the end of the initial objects for a streaming
    /// list (never for a plain watch).
    log: Option<Arc<Mutex<Vec<String>>>>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    pub requests: u64,
    pub bytes: u64,
}

impl ReadCounter {
    /// A counter that also keeps the order of requests and answers ([`ReadCounter::log`]).
    pub fn logging() -> Self {
        Self { log: Some(Arc::default()), ..Self::default() }
    }

    /// A client for `config` whose every request is counted here.
    pub fn client(&self, config: kube::Config) -> anyhow::Result<kube::Client> {
        let counter = self.clone();
        let builder = ClientBuilder::try_from(config)?;
        let layer = tower::layer::layer_fn(move |inner| Counting { inner, counter: counter.clone() });
        Ok(builder.with_layer(&layer).build())
    }

    fn add(&self, label: &str, requests: u64, bytes: u64) {
        let mut tallies = self.tallies.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let tally = tallies.entry(label.to_string()).or_default();
        tally.requests += requests;
        tally.bytes += bytes;
    }

    pub fn snapshot(&self) -> BTreeMap<String, Tally> {
        self.tallies.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    fn note(&self, entry: impl FnOnce() -> String) {
        if let Some(log) = &self.log {
            log.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(entry());
        }
    }

    /// What was sent and answered, in order; empty unless made with [`ReadCounter::logging`].
    pub fn log(&self) -> Vec<String> {
        self.log
            .as_ref()
            .map(|log| log.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone())
            .unwrap_or_default()
    }

    /// The reads since `before` (a snapshot), as JSON: totals and the requests by label.
    pub fn since(&self, before: &BTreeMap<String, Tally>) -> Value {
        let mut by_request = serde_json::Map::new();
        let (mut requests, mut bytes) = (0, 0);
        for (label, now) in self.snapshot() {
            let then = before.get(&label).copied().unwrap_or_default();
            let (count, size) = (now.requests - then.requests, now.bytes - then.bytes);
            if count == 0 && size == 0 {
                continue;
            }
            requests += count;
            bytes += size;
            by_request.insert(label, json!({"requests": count, "bytes": size}));
        }
        json!({"requests": requests, "bytes": bytes, "by_request": by_request})
    }
}

/// `verb resource` of a request, `(metadata)` when it asks for metadata only.
fn label<B>(request: &Request<B>) -> String {
    let path = request.uri().path();
    let query = request.uri().query().unwrap_or_default();
    let watch = query.split('&').any(|pair| pair == "watch=true" || pair == "watch=1");
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    // /api/v1/[namespaces/NS/]PLURAL[/NAME[/SUB]] or /apis/GROUP/VERSION/[namespaces/NS/]PLURAL[/NAME[/SUB]]
    let rest = match segments.first() {
        Some(&"api") => segments.get(2..).unwrap_or_default(),
        Some(&"apis") => segments.get(3..).unwrap_or_default(),
        _ => return format!("{} {path}", request.method()),
    };
    let rest = match rest {
        ["namespaces", _, tail @ ..] if !tail.is_empty() => tail,
        other => other,
    };
    let (plural, named) = match rest {
        [] => return format!("{} {path}", request.method()),
        [plural] => (*plural, false),
        [plural, ..] => (*plural, true),
    };
    let streaming = query.split('&').any(|pair| pair == "sendInitialEvents=true");
    let verb = match (request.method().as_str(), named, watch) {
        ("GET", _, true) if streaming => "streaming list",
        ("GET", _, true) => "watch",
        ("GET", false, false) => "list",
        ("GET", true, false) => "get",
        (method, _, _) => return format!("{} {plural}", method.to_lowercase()),
    };
    let metadata = request
        .headers()
        .get(http::header::ACCEPT)
        .and_then(|accept| accept.to_str().ok())
        .is_some_and(|accept| accept.contains("as=PartialObjectMetadata"));
    if metadata { format!("{verb} {plural} (metadata)") } else { format!("{verb} {plural}") }
}

struct Counting<S> {
    inner: S,
    counter: ReadCounter,
}

impl<S> tower::Service<Request<Body>> for Counting<S>
where
    S: tower::Service<Request<Body>, Response = Response<Box<DynBody>>, Error = BoxError>,
    S::Future: Send + 'static,
{
    type Response = Response<Box<DynBody>>;
    type Error = BoxError;
    type Future = BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let label = label(&request);
        self.counter.add(&label, 1, 0);
        self.counter.note(|| format!("sent {label}"));
        let streaming = label.starts_with("streaming list");
        let counter = self.counter.clone();
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            if !streaming && !label.starts_with("watch") {
                counter.note(|| format!("answered {label}"));
            }
            Ok(response.map(|body| {
                let counted = body.map_frame(move |frame| {
                    if let Some(data) = frame.data_ref() {
                        counter.add(&label, 0, data.len() as u64);
                        // The bookmark that ends a streaming list's initial objects.
                        if streaming && data.windows(INITIAL_EVENTS_END.len()).any(|w| w == INITIAL_EVENTS_END) {
                            counter.note(|| format!("answered {label}"));
                        }
                    }
                    frame
                });
                Box::new(counted) as Box<DynBody>
            }))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labelled(method: &str, uri: &str, accept: Option<&str>) -> String {
        let mut request = Request::builder().method(method).uri(uri);
        if let Some(accept) = accept {
            request = request.header(http::header::ACCEPT, accept);
        }
        label(&request.body(()).expect("request"))
    }

    #[test]
    fn requests_are_labelled_by_verb_and_resource() {
        assert_eq!(labelled("GET", "/api/v1/secrets?limit=500", None), "list secrets");
        let metadata = Some("application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1");
        assert_eq!(labelled("GET", "/api/v1/namespaces/a/secrets?limit=500", metadata), "list secrets (metadata)");
        assert_eq!(labelled("GET", "/api/v1/secrets?watch=true&resourceVersion=4", None), "watch secrets");
        let streaming =
            "/apis/sme.sap.com/v1alpha1/captenants?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan";
        assert_eq!(labelled("GET", streaming, None), "streaming list captenants");
        assert_eq!(labelled("GET", "/apis/sme.sap.com/v1alpha1/namespaces/a/captenants/t1", None), "get captenants");
        assert_eq!(labelled("PATCH", "/apis/apps/v1/namespaces/a/deployments/d", None), "patch deployments");
        assert_eq!(labelled("GET", "/api/v1/namespaces", None), "list namespaces");
        assert_eq!(labelled("GET", "/api/v1/namespaces/a", None), "get namespaces");
        assert_eq!(labelled("GET", "/version", None), "GET /version");
    }
}
