//! The HTTP face of the sandbox: one fallback handler that routes Kubernetes API paths,
//! applies latency, injected faults and deny rules, logs the request, and answers with JSON
//! (objects, lists, Tables, Status errors) or a newline-delimited watch stream.

use std::collections::HashMap;
use std::convert::Infallible;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use super::Sandbox;
use super::control::{RequestInfo, RequestRecord};
use super::patch::PatchType;
use super::registry::ResourceType;
use super::selectors::{FieldSelector, LabelSelector, Selectors};
use super::store::{ApiError, DeleteOptions, Object, WatchStart, WriteOptions, classify};
use super::views;

const BODY_LIMIT: usize = 32 * 1024 * 1024;

/// The in-process "network" between `Sandbox::client()` and the router: while the sandbox is
/// unreachable, requests fail as a refused connection would, before reaching the server.
#[derive(Clone)]
pub struct Connection {
    sandbox: Sandbox,
    router: Router,
}

impl Connection {
    pub fn new(sandbox: Sandbox) -> Self {
        let router = router(sandbox.clone());
        Self { sandbox, router }
    }
}

impl<B> tower::Service<axum::http::Request<B>> for Connection
where
    B: axum::body::HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    type Response = Response;
    type Error = std::io::Error;
    type Future = futures::future::BoxFuture<'static, Result<Response, std::io::Error>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: axum::http::Request<B>) -> Self::Future {
        if !self.sandbox.is_reachable() {
            let refused = std::io::Error::new(
                std::io::ErrorKind::ConnectionRefused,
                "sandbox is unreachable (simulated network outage)",
            );
            return Box::pin(std::future::ready(Err(refused)));
        }
        let mut router = self.router.clone();
        Box::pin(async move {
            match tower::Service::call(&mut router, request).await {
                Ok(response) => Ok(response),
                Err(never) => match never {},
            }
        })
    }
}

/// The shutdown of the HTTP server a request came through (absent in-process). Open watches end
/// when it begins, and a watch that arrives after it began (a client re-watching on a
/// keep-alive connection) ends at once: graceful shutdown never waits out a watch's timeout.
#[derive(Clone)]
pub struct ServerStopping(pub tokio_util::sync::CancellationToken);

pub fn router(sandbox: Sandbox) -> Router {
    Router::new().fallback(handle).with_state(sandbox).layer(DefaultBodyLimit::max(BODY_LIMIT))
}

/// Where a path points.
enum Route {
    Version,
    Health,
    Api,
    Apis,
    ApiGroup(String),
    GroupVersion(String, String),
    OpenApiV3Index,
    OpenApiV3(String, String),
    OpenApiV2,
    Resource(Box<ResourceRoute>),
    NotFound,
}

struct ResourceRoute {
    resource: ResourceType,
    namespace: Option<String>,
    name: Option<String>,
    subresource: Option<String>,
}

fn route(sandbox: &Sandbox, path: &str) -> Route {
    let segments: Vec<&str> = path.trim_matches('/').split('/').filter(|s| !s.is_empty()).collect();
    let (group, version, rest) = match segments.as_slice() {
        ["version"] => return Route::Version,
        ["healthz" | "livez" | "readyz", ..] => return Route::Health,
        ["api"] => return Route::Api,
        ["apis"] => return Route::Apis,
        ["apis", group] => return Route::ApiGroup((*group).to_string()),
        ["openapi", "v3"] => return Route::OpenApiV3Index,
        ["openapi", "v3", "api", version] => return Route::OpenApiV3(String::new(), (*version).to_string()),
        ["openapi", "v3", "apis", group, version] => {
            return Route::OpenApiV3((*group).to_string(), (*version).to_string());
        }
        ["openapi", "v2", ..] | ["swagger-2.0.0.pb-v1"] => return Route::OpenApiV2,
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return Route::NotFound,
    };
    if rest.is_empty() {
        return Route::GroupVersion(group.to_string(), version.to_string());
    }
    let lookup = |plural: &str| sandbox.with_store(|store| store.registry.get(group, version, plural).cloned());
    let namespaced_collection =
        |ns: &str, plural: &str| lookup(plural).filter(|r| r.namespaced).map(|r| (ns.to_string(), r));
    let (namespace, resource, name, subresource) = match rest {
        ["namespaces", ns, plural, tail @ ..] if namespaced_collection(ns, plural).is_some() => {
            let Some((ns, resource)) = namespaced_collection(ns, plural) else { return Route::NotFound };
            match tail {
                [] => (Some(ns), resource, None, None),
                [name] => (Some(ns), resource, Some((*name).to_string()), None),
                [name, sub] => (Some(ns), resource, Some((*name).to_string()), Some((*sub).to_string())),
                _ => return Route::NotFound,
            }
        }
        [plural, tail @ ..] => {
            let Some(resource) = lookup(plural) else { return Route::NotFound };
            match tail {
                [] => (None, resource, None, None),
                [name] if !resource.namespaced => (None, resource, Some((*name).to_string()), None),
                [name, sub] if !resource.namespaced => {
                    (None, resource, Some((*name).to_string()), Some((*sub).to_string()))
                }
                _ => return Route::NotFound,
            }
        }
        [] => return Route::NotFound,
    };
    Route::Resource(Box::new(ResourceRoute { resource, namespace, name, subresource }))
}

fn parse_query(query: Option<&str>) -> HashMap<String, String> {
    let mut params = HashMap::new();
    for pair in query.unwrap_or_default().split('&').filter(|pair| !pair.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        params.insert(percent_decode(key), percent_decode(value));
    }
    params
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        match bytes[index] {
            b'+' => out.push(b' '),
            b'%' => {
                let decoded = bytes
                    .get(index + 1..index + 3)
                    .and_then(|hex| std::str::from_utf8(hex).ok())
                    .and_then(|hex| u8::from_str_radix(hex, 16).ok());
                match decoded {
                    Some(byte) => {
                        out.push(byte);
                        index += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            byte => out.push(byte),
        }
        index += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn json_response(status: u16, value: &Value) -> Response {
    let body = serde_json::to_vec(value).unwrap_or_default();
    let mut response = (StatusCode::from_u16(status).unwrap_or(StatusCode::OK), body).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// `pods/{name}/log`, as a kubelet-less API server answers: a Pod never scheduled to a node has
/// no log (empty, 200). The sandbox's stand-in for a kubelet: a Pod on a node whose annotation
/// `sandbox.capdeck.dev/log` holds its log text (the demo's failing Pod), `tailLines` applied.
fn pod_log(sandbox: &Sandbox, namespace: &str, name: &str, query: &HashMap<String, String>) -> Response {
    let Some(pods) = sandbox.with_store(|store| store.registry.by_group_plural("", "pods").cloned()) else {
        return error_response(&ApiError::new(404, "NotFound", "the server could not find the requested resource"));
    };
    let pod = match sandbox.with_store(|store| store.get(&pods, namespace, name)) {
        Ok(pod) => pod,
        Err(error) => return error_response(&error),
    };
    let on_node = pod.pointer("/spec/nodeName").and_then(Value::as_str).is_some_and(|node| !node.is_empty());
    let text = pod
        .pointer("/metadata/annotations/sandbox.capdeck.dev~1log")
        .and_then(Value::as_str)
        .filter(|_| on_node)
        .unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = query.get("tailLines").and_then(|n| n.parse::<usize>().ok()).unwrap_or(lines.len());
    let mut body = lines[lines.len().saturating_sub(tail)..].join("\n");
    if !body.is_empty() {
        body.push('\n');
    }
    let mut response = (StatusCode::OK, body).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    response
}

fn error_response(error: &ApiError) -> Response {
    let mut response = json_response(error.code, &error.status());
    if error.code == 429 {
        response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
}

fn injected(status: u16) -> ApiError {
    let (reason, message) = match status {
        409 => (
            "Conflict",
            "injected conflict: the object has been modified; please apply your changes to the latest version and try again",
        ),
        410 => ("Expired", "injected: too old resource version"),
        429 => ("TooManyRequests", "injected: too many requests, please try again later"),
        500 => ("InternalError", "injected: an error on the server has prevented the request from succeeding"),
        503 => ("ServiceUnavailable", "injected: the server is currently unable to handle the request"),
        403 => ("Forbidden", "injected: forbidden"),
        504 => (
            "Timeout",
            "injected: Timeout: request did not complete within requested timeout - context deadline exceeded",
        ),
        _ => ("InternalError", "injected fault"),
    };
    ApiError::new(status, reason, message)
}

/// How objects are answered, from the first media type the client accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Presentation {
    Object,
    /// `as=Table`: kubectl's printer columns.
    Table,
    /// `as=PartialObjectMetadata` / `as=PartialObjectMetadataList`: metadata only (kube's
    /// `Api<PartialObjectMeta<K>>`, client-go's metadata informers).
    Metadata,
}

impl Presentation {
    fn of(accept: &str) -> Self {
        let first = accept.split(',').next().unwrap_or_default();
        if first.contains("as=Table") {
            Self::Table
        } else if first.contains("as=PartialObjectMetadata") {
            Self::Metadata
        } else {
            Self::Object
        }
    }

    /// One object as this presentation shows it.
    fn object(self, resource: &ResourceType, object: &Object) -> Value {
        match self {
            Self::Object => (**object).clone(),
            Self::Table => views::table(resource, std::slice::from_ref(object), None, None),
            Self::Metadata => views::partial_object_metadata(object),
        }
    }
}

async fn handle(State(sandbox): State<Sandbox>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_string();
    let raw_query = parts.uri.query().unwrap_or_default().to_string();
    let query = parse_query(parts.uri.query());
    let text_header = |name: header::HeaderName| {
        parts.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string()
    };
    let accept = text_header(header::ACCEPT);
    let content_type = text_header(header::CONTENT_TYPE);
    let route = route(&sandbox, &path);
    let info = match &route {
        Route::Resource(resource) => RequestInfo {
            verb: verb(
                &parts.method,
                resource.name.is_some(),
                query.get("watch").is_some_and(|w| w == "true" || w == "1"),
            ),
            group: resource.resource.group.clone(),
            resource: resource.resource.plural.clone(),
            subresource: resource.subresource.clone(),
            namespace: resource.namespace.clone(),
            name: resource.name.clone(),
        },
        _ => RequestInfo::default(),
    };
    let latency = sandbox.control(|control| control.latency);
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let mut made = None;
    let response = if !sandbox.is_reachable() {
        error_response(&injected(503))
    } else {
        let fault = matches!(route, Route::Resource(_)).then(|| sandbox.control(|c| c.take_fault(&info))).flatten();
        match (fault, route) {
            (Some(fault), _) if !fault.applied => error_response(&injected(fault.status)),
            (fault, Route::Resource(target)) => {
                let bytes = match axum::body::to_bytes(body, BODY_LIMIT).await {
                    Ok(bytes) => bytes,
                    Err(error) => {
                        return error_response(&ApiError::bad_request(format!(
                            "could not read the request body: {error}"
                        )));
                    }
                };
                let stopping = parts.extensions.get::<ServerStopping>().cloned();
                let answer =
                    resource_request(&sandbox, *target, &info, &query, &accept, &content_type, bytes, stopping).await;
                // Carried out, and answered as if it had not been.
                match fault {
                    Some(fault) => {
                        made = Some(answer.status().as_u16());
                        error_response(&injected(fault.status))
                    }
                    None => answer,
                }
            }
            (_, other) => non_resource(&sandbox, other, &parts.method),
        }
    };
    sandbox.record(RequestRecord {
        method: parts.method.to_string(),
        path,
        query: raw_query,
        info,
        status: response.status().as_u16(),
        made,
        field_manager: query.get("fieldManager").cloned(),
        content_type: (!content_type.is_empty()).then_some(content_type),
    });
    response
}

fn verb(method: &Method, named: bool, watch: bool) -> String {
    match (method.as_str(), named) {
        ("GET", _) if watch => "watch",
        ("GET", true) => "get",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => "unknown",
    }
    .to_string()
}

fn non_resource(sandbox: &Sandbox, route: Route, method: &Method) -> Response {
    if method != Method::GET {
        return error_response(&ApiError::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        ));
    }
    sandbox.with_store(|store| match route {
        Route::Version => json_response(200, &views::version()),
        Route::Health => json_response(200, &json!("ok")),
        Route::Api => json_response(200, &views::api_versions()),
        Route::Apis => json_response(200, &views::api_group_list(&store.registry)),
        Route::ApiGroup(group) => match views::api_group(&store.registry, &group) {
            Some(document) => json_response(200, &document),
            None => not_found_path(),
        },
        Route::GroupVersion(group, version) => match views::resource_list(&store.registry, &group, &version) {
            Some(document) => json_response(200, &document),
            None => not_found_path(),
        },
        Route::OpenApiV3Index => json_response(200, &views::openapi_index(&store.registry, store.revision())),
        Route::OpenApiV3(group, version) => match views::openapi_document(&store.registry, &group, &version) {
            Some(document) => json_response(200, &document),
            None => not_found_path(),
        },
        Route::OpenApiV2 => {
            let resources: Vec<(String, String, String, String)> = store
                .registry
                .all()
                .map(|resource| {
                    (
                        views::object_path(resource),
                        resource.group.clone(),
                        resource.version.clone(),
                        resource.kind.clone(),
                    )
                })
                .collect();
            let mut response = (StatusCode::OK, super::proto::openapi_v2(&resources)).into_response();
            response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream"));
            response
        }
        Route::NotFound | Route::Resource(_) => not_found_path(),
    })
}

fn not_found_path() -> Response {
    error_response(&ApiError::new(404, "NotFound", "the server could not find the requested resource"))
}

fn parse_body(bytes: &[u8], content_type: &str) -> Result<Value, ApiError> {
    if content_type.contains("protobuf") {
        if let Some(object) = super::proto::decode_object(bytes) {
            return Ok(object);
        }
        return Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml",
        ));
    }
    if let Ok(value) = serde_json::from_slice(bytes) {
        return Ok(value);
    }
    let text = std::str::from_utf8(bytes).map_err(|_| ApiError::bad_request("the request body is not UTF-8"))?;
    serde_saphyr::from_str::<Value>(text).map_err(|error| {
        let message = error.to_string();
        ApiError::bad_request(format!(
            "could not decode the request body: {}",
            message.lines().next().unwrap_or("invalid")
        ))
    })
}

fn selectors(query: &HashMap<String, String>) -> Result<Selectors, ApiError> {
    Ok(Selectors {
        labels: LabelSelector::parse(query.get("labelSelector").map_or("", String::as_str))
            .map_err(|error| ApiError::bad_request(format!("unable to parse requirement: {error}")))?,
        fields: FieldSelector::parse(query.get("fieldSelector").map_or("", String::as_str))
            .map_err(|error| ApiError::bad_request(format!("invalid field selector: {error}")))?,
    })
}

fn write_options(query: &HashMap<String, String>) -> WriteOptions {
    WriteOptions {
        dry_run: query.get("dryRun").is_some_and(|value| value == "All"),
        field_manager: query.get("fieldManager").cloned(),
        force: query.get("force").is_some_and(|value| value == "true"),
    }
}

#[allow(clippy::too_many_arguments)]
async fn resource_request(
    sandbox: &Sandbox,
    target: ResourceRoute,
    info: &RequestInfo,
    query: &HashMap<String, String>,
    accept: &str,
    content_type: &str,
    body: Bytes,
    stopping: Option<ServerStopping>,
) -> Response {
    let resource = &target.resource;
    let namespace = target.namespace.clone().unwrap_or_default();
    if resource.create_only {
        return review_request(sandbox, resource, info, content_type, &body);
    }
    if sandbox.control(|control| control.denies(info)) {
        let user = sandbox.control(|control| control.user.clone());
        return error_response(&forbidden(resource, info, &user));
    }
    if target.subresource.as_deref() == Some("log") && resource.plural == "pods" && info.verb == "get" {
        return pod_log(sandbox, &namespace, target.name.as_deref().unwrap_or_default(), query);
    }
    if let Some(sub) = &target.subresource
        && !(sub == "status" && resource.status_subresource)
    {
        return error_response(&ApiError::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource ({sub})"),
        ));
    }
    let status_only = target.subresource.is_some();
    let options = write_options(query);
    let presentation = Presentation::of(accept);
    let result: Result<(u16, Value), ApiError> = match (info.verb.as_str(), &target.name) {
        ("watch", _) => return watch(sandbox, target, query, presentation, stopping),
        ("get", Some(name)) => sandbox
            .with_store(|store| store.get(resource, &namespace, name))
            .map(|object| (200, presentation.object(resource, &object))),
        ("list", None) => list(sandbox, resource, target.namespace.as_deref(), query, presentation),
        ("create", None) => parse_body(&body, content_type)
            .and_then(|value| sandbox.with_store_mut(|store| store.create(resource, &namespace, value, &options)))
            .map(|object| (201, (*object).clone())),
        ("update", Some(name)) => parse_body(&body, content_type)
            .and_then(|value| {
                sandbox.with_store_mut(|store| store.update(resource, &namespace, name, value, status_only, &options))
            })
            .map(|object| (200, (*object).clone())),
        ("patch", Some(name)) => {
            let object = Target { resource, namespace: &namespace, name, status_only };
            patch(sandbox, &object, content_type, &body, &options)
        }
        ("delete", Some(name)) => {
            let delete = delete_options(&body, query);
            sandbox
                .with_store_mut(|store| store.delete(resource, &namespace, name, &delete))
                .map(|object| (200, (*object).clone()))
        }
        ("deletecollection", None) => delete_collection(sandbox, resource, target.namespace.as_deref(), query, &body),
        _ => Err(ApiError::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )),
    };
    match result {
        Ok((status, value)) => json_response(status, &value),
        Err(error) => error_response(&error),
    }
}

/// A review (create-only resources: SelfSubjectReview, SelfSubjectAccessReview), in JSON or
/// protobuf as kubectl sends it.
fn review_request(
    sandbox: &Sandbox,
    resource: &ResourceType,
    info: &RequestInfo,
    content_type: &str,
    body: &Bytes,
) -> Response {
    if info.verb != "create" {
        return error_response(&ApiError::new(
            405,
            "MethodNotAllowed",
            format!("{} only supports create", resource.plural),
        ));
    }
    let decoded = if content_type.contains("protobuf") {
        super::proto::decode_review(body)
            .ok_or_else(|| ApiError::new(415, "UnsupportedMediaType", "this protobuf body could not be read"))
    } else {
        parse_body(body, content_type)
    };
    match decoded {
        Ok(review) => json_response(201, &sandbox.review(resource, review)),
        Err(error) => error_response(&error),
    }
}

/// One object a request names.
struct Target<'a> {
    resource: &'a ResourceType,
    namespace: &'a str,
    name: &'a str,
    /// The status subresource only.
    status_only: bool,
}

/// A patch of any of kube-apiserver's four kinds; a server-side apply that creates the object
/// answers 201, like kube-apiserver.
fn patch(
    sandbox: &Sandbox,
    object: &Target<'_>,
    content_type: &str,
    body: &Bytes,
    options: &WriteOptions,
) -> Result<(u16, Value), ApiError> {
    let Some(kind) = PatchType::from_content_type(content_type) else {
        return Err(ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml, application/strategic-merge-patch+json (got {content_type:?})"
            ),
        ));
    };
    let patch = parse_body(body, content_type)?;
    let Target { resource, namespace, name, status_only } = *object;
    sandbox.with_store_mut(|store| {
        let existed = store.get(resource, namespace, name).is_ok();
        store
            .patch(resource, namespace, name, kind, &patch, status_only, options)
            .map(|object| (if existed { 200 } else { 201 }, (*object).clone()))
    })
}

fn forbidden(resource: &ResourceType, info: &RequestInfo, user: &str) -> ApiError {
    let target = info.name.as_deref().map(|name| format!(" \"{name}\"")).unwrap_or_default();
    let place = match &info.namespace {
        Some(ns) => format!(" in the namespace \"{ns}\""),
        None => " at the cluster scope".to_string(),
    };
    let mut error = ApiError::new(
        403,
        "Forbidden",
        format!(
            "{}{target} is forbidden: User \"{user}\" cannot {} resource \"{}{}\" in API group \"{}\"{place}",
            resource.qualified(),
            info.verb,
            resource.plural,
            info.subresource.as_deref().map(|s| format!("/{s}")).unwrap_or_default(),
            resource.group
        ),
    );
    error.details = Some(json!({"name": info.name, "group": resource.group, "kind": resource.plural}));
    error
}

fn delete_options(body: &[u8], query: &HashMap<String, String>) -> DeleteOptions {
    let parsed: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let propagation = parsed
        .get("propagationPolicy")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| query.get("propagationPolicy").cloned());
    DeleteOptions {
        dry_run: query.get("dryRun").is_some_and(|v| v == "All")
            || parsed.get("dryRun").and_then(Value::as_array).is_some_and(|v| v.iter().any(|x| x == "All")),
        orphan: propagation.as_deref() == Some("Orphan") || parsed.get("orphanDependents") == Some(&Value::Bool(true)),
        precondition_uid: parsed.pointer("/preconditions/uid").and_then(Value::as_str).map(str::to_string),
        precondition_resource_version: parsed
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_string),
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct ContinueToken {
    rv: u64,
    namespace: String,
    name: String,
}

fn list(
    sandbox: &Sandbox,
    resource: &ResourceType,
    namespace: Option<&str>,
    query: &HashMap<String, String>,
    presentation: Presentation,
) -> Result<(u16, Value), ApiError> {
    let selectors = selectors(query)?;
    let limit = query.get("limit").and_then(|l| l.parse::<usize>().ok()).filter(|l| *l > 0);
    let token = match query.get("continue").filter(|c| !c.is_empty()) {
        None => None,
        Some(text) => Some(
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(text)
                .ok()
                .and_then(|bytes| serde_json::from_slice::<ContinueToken>(&bytes).ok())
                .ok_or_else(|| ApiError::bad_request("invalid continue token"))?,
        ),
    };
    sandbox.with_store(|store| {
        if let Some(token) = &token
            && token.rv < store.floor()
        {
            return Err(ApiError::gone(
                "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
            ));
        }
        let after = token.as_ref().map(|t| (t.namespace.clone(), t.name.clone()));
        let (items, next) = store.list(resource, namespace, &selectors, after.as_ref(), limit);
        // Pages of one list share the first page's resourceVersion, as on a real server.
        let rv = token.as_ref().map_or(store.revision(), |t| t.rv);
        let continue_token = next.map(|(namespace, name)| {
            let token = ContinueToken { rv, namespace, name };
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(serde_json::to_vec(&token).unwrap_or_default())
        });
        if presentation == Presentation::Table {
            return Ok((200, views::table(resource, &items, Some(rv), continue_token)));
        }
        let mut metadata = json!({"resourceVersion": rv.to_string()});
        if let Some(token) = continue_token {
            metadata["continue"] = Value::String(token);
        }
        Ok((
            200,
            json!({
                "kind": if presentation == Presentation::Metadata { "PartialObjectMetadataList".to_string() } else { format!("{}List", resource.kind) },
                "apiVersion": if presentation == Presentation::Metadata { "meta.k8s.io/v1".to_string() } else { resource.api_version() },
                "metadata": metadata,
                "items": items.iter().map(|object| presentation.object(resource, object)).collect::<Vec<_>>(),
            }),
        ))
    })
}

fn delete_collection(
    sandbox: &Sandbox,
    resource: &ResourceType,
    namespace: Option<&str>,
    query: &HashMap<String, String>,
    body: &[u8],
) -> Result<(u16, Value), ApiError> {
    let selectors = selectors(query)?;
    let options = delete_options(body, query);
    sandbox.with_store_mut(|store| {
        let (items, _) = store.list(resource, namespace, &selectors, None, None);
        let mut deleted = Vec::new();
        for item in items {
            let ns = item.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default().to_string();
            let name = item.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
            deleted.push((*store.delete(resource, &ns, &name, &options)?).clone());
        }
        Ok((
            200,
            json!({"kind": format!("{}List", resource.kind), "apiVersion": resource.api_version(),
                   "metadata": {"resourceVersion": store.revision().to_string()}, "items": deleted}),
        ))
    })
}

/// What a watch request asks for.
struct WatchOptions {
    selectors: Selectors,
    /// `sendInitialEvents`: the current state first, then a bookmark that ends it.
    send_initial: bool,
    start: WatchStart,
    bookmarks: bool,
    timeout: Option<Duration>,
}

fn watch_options(sandbox: &Sandbox, query: &HashMap<String, String>) -> Result<WatchOptions, ApiError> {
    let selectors = selectors(query)?;
    let send_initial = query.get("sendInitialEvents").is_some_and(|v| v == "true");
    if send_initial && sandbox.control(|control| control.refuse_streaming_lists) {
        return Err(ApiError::new(
            422,
            "Invalid",
            "ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled",
        ));
    }
    let start = match query.get("resourceVersion").map(String::as_str) {
        _ if send_initial => WatchStart::CurrentState,
        None | Some("" | "0") => WatchStart::CurrentState,
        Some(rv) => match rv.parse() {
            Ok(rv) => WatchStart::After(rv),
            Err(_) => return Err(ApiError::bad_request(format!("invalid resourceVersion {rv:?}"))),
        },
    };
    let bookmarks = query.get("allowWatchBookmarks").is_some_and(|v| v == "true");
    let timeout = query.get("timeoutSeconds").and_then(|t| t.parse::<u64>().ok()).map(Duration::from_secs);
    Ok(WatchOptions { selectors, send_initial, start, bookmarks, timeout })
}

/// A BOOKMARK's object at `revision`; `initial_end` marks the end of the initial events.
fn bookmark(resource: &ResourceType, revision: u64, initial_end: bool) -> Value {
    let mut metadata = json!({"resourceVersion": revision.to_string()});
    if initial_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    json!({"kind": resource.kind, "apiVersion": resource.api_version(), "metadata": metadata})
}

/// When a watch ends on its own: its timeout, or the server stopping.
async fn watch_ends(deadline: Option<tokio::time::Instant>, stopping: Option<&ServerStopping>) {
    let expired = async {
        match deadline {
            Some(deadline) => tokio::time::sleep_until(deadline).await,
            None => std::future::pending().await,
        }
    };
    let server_stopping = async {
        match stopping {
            Some(ServerStopping(token)) => token.cancelled().await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        () = expired => {}
        () = server_stopping => {}
    }
}

fn watch(
    sandbox: &Sandbox,
    target: ResourceRoute,
    query: &HashMap<String, String>,
    presentation: Presentation,
    stopping: Option<ServerStopping>,
) -> Response {
    let resource = target.resource;
    let WatchOptions { selectors, send_initial, start, bookmarks, timeout } = match watch_options(sandbox, query) {
        Ok(options) => options,
        Err(error) => return error_response(&error),
    };
    let namespace = target.namespace.clone();
    let subscription = sandbox.with_store(|store| store.watch(&resource, namespace.as_deref(), &selectors, start));
    let (sender, receiver) = tokio::sync::mpsc::channel::<Result<Bytes, Infallible>>(64);
    let mut dropped = sandbox.drop_watch_signal();
    let bookmark_interval = sandbox.bookmark_interval();
    tokio::spawn(async move {
        let line = |kind: &str, object: Value| {
            let mut text = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
            text.push(b'\n');
            Ok(Bytes::from(text))
        };
        let present = |object: &Object| presentation.object(&resource, object);
        let (initial, mut changes, mut revision) = match subscription {
            Ok(subscription) => subscription,
            Err(error) => {
                let _ = sender.send(line("ERROR", error.status())).await;
                return;
            }
        };
        for (kind, object) in initial {
            revision = revision.max(super::store::resource_version(&object).unwrap_or(0));
            if sender.send(line(kind.as_str(), present(&object))).await.is_err() {
                return;
            }
        }
        let bookmark = |revision: u64, initial_end: bool| bookmark(&resource, revision, initial_end);
        if send_initial && sender.send(line("BOOKMARK", bookmark(revision, true))).await.is_err() {
            return;
        }
        let deadline = timeout.map(|timeout| tokio::time::Instant::now() + timeout);
        let mut ticker = tokio::time::interval(bookmark_interval);
        ticker.tick().await;
        loop {
            tokio::select! {
                () = watch_ends(deadline, stopping.as_ref()) => return,
                _ = dropped.changed() => return,
                () = sender.closed() => return,
                _ = ticker.tick(), if bookmarks => {
                    if sender.send(line("BOOKMARK", bookmark(revision, false))).await.is_err() {
                        return;
                    }
                }
                change = changes.recv() => match change {
                    Ok(change) => {
                        revision = change.revision;
                        if change.key.group != resource.group || change.key.plural != resource.plural {
                            continue;
                        }
                        if namespace.as_deref().is_some_and(|ns| change.key.namespace != ns) {
                            continue;
                        }
                        if let Some((kind, object)) = classify(&change, &selectors)
                            && sender.send(line(kind.as_str(), present(&object))).await.is_err()
                        {
                            return;
                        }
                    }
                    Err(RecvError::Lagged(_)) => {
                        // The watcher fell too far behind: like an expired watch cache, it must re-list.
                        let _ = sender.send(line("ERROR", ApiError::gone("too old resource version: the watch fell behind").status())).await;
                        return;
                    }
                    Err(RecvError::Closed) => return,
                },
            }
        }
    });
    let stream = tokio_stream::wrappers::ReceiverStream::new(receiver);
    let mut response = Response::new(Body::from_stream(stream));
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_strings_decode() {
        let query = parse_query(Some("labelSelector=app%3Dcap%2Ctier+in+(a)&watch=true&x"));
        assert_eq!(query["labelSelector"], "app=cap,tier in (a)");
        assert_eq!(query["watch"], "true");
        assert_eq!(query["x"], "");
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }

    /// A watch's body, read until it ends or `bound` of (paused) time passes.
    async fn watch_body(router: &mut Router, bound: Duration) -> Option<String> {
        let request = axum::http::Request::get("/api/v1/namespaces?watch=true").body(Body::empty()).expect("request");
        let response = match tower::Service::call(router, request).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
        let body = axum::body::to_bytes(response.into_body(), usize::MAX);
        let bytes = tokio::time::timeout(bound, body).await.ok()?.expect("body");
        Some(String::from_utf8_lossy(&bytes).into_owned())
    }

    #[tokio::test(start_paused = true)]
    async fn a_watch_arriving_after_the_server_began_stopping_ends_at_once() {
        let sandbox = Sandbox::default();
        let stopping = tokio_util::sync::CancellationToken::new();
        let mut router = router(sandbox).layer(axum::Extension(ServerStopping(stopping.clone())));
        // While the server runs, a watch without timeoutSeconds stays open.
        assert_eq!(watch_body(&mut router, Duration::from_secs(60)).await, None);
        stopping.cancel();
        // Once it stops, a late watch still gets its initial events, then ends: graceful
        // shutdown does not wait for it.
        let body = watch_body(&mut router, Duration::from_secs(60)).await.expect("the late watch ended");
        assert!(body.contains(r#""type":"ADDED""#) && body.contains("kube-system"), "{body}");
    }
}
