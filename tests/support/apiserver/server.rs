//! The HTTP/1.1 server: accepting connections (each can be dropped on purpose), request
//! logging, fault injection and dispatch to the handlers.

use super::errors::{ApiError, json_response};
use super::resources::{ALL, Route, Target, parse_path};
use super::store::Store;
use super::{DownMode, RequestRecord, handlers, pods, sar};
use axum::body::Body;
use hyper::body::Incoming;
use hyper::{Method, Request, Response, header};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

/// Locks a mutex, ignoring poisoning (a panicking test must not cascade).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whole-server and per-path fault injection.
#[derive(Debug, Default)]
pub struct Faults {
    /// The whole server is down.
    pub down: Option<DownMode>,
    /// Path prefixes that are down.
    pub prefixes: Vec<(String, DownMode)>,
}

/// An open watch stream, so that it can be ended from the test.
#[derive(Debug)]
pub struct OpenWatch {
    /// Registration id.
    pub id: u64,
    /// Request path of the watch.
    pub path: String,
    /// Cancelled to end the stream.
    pub token: CancellationToken,
}

/// Shared server state.
pub struct Inner {
    /// Objects and their history.
    pub store: Store,
    /// Fault injection.
    pub faults: Mutex<Faults>,
    /// SubjectAccessReview rules, failure modes and records.
    pub sar: sar::SarState,
    /// Eviction refusals, deletion delay and eviction records.
    pub pods: Mutex<pods::PodsState>,
    /// Every Event written (create or patch), as stored after the write.
    pub events: Mutex<Vec<Value>>,
    /// Every request received.
    pub requests: Mutex<Vec<RequestRecord>>,
    /// Open watch streams.
    pub watches: Mutex<Vec<OpenWatch>>,
    /// Next watch registration id.
    pub next_watch: Mutex<u64>,
    /// Cancelled when the [`super::ApiServer`] is dropped.
    pub shutdown: CancellationToken,
    /// Whether lifecycle.k8s.io/v1alpha1 EvictionRequests and Evictions are served.
    pub eviction_requests: AtomicBool,
}

impl Inner {
    /// Fresh state.
    pub fn new() -> Self {
        Self {
            store: Store::new(),
            faults: Mutex::default(),
            sar: sar::SarState::default(),
            pods: Mutex::default(),
            events: Mutex::default(),
            requests: Mutex::default(),
            watches: Mutex::default(),
            next_watch: Mutex::new(0),
            shutdown: CancellationToken::new(),
            eviction_requests: AtomicBool::new(false),
        }
    }

    fn down_for(&self, path: &str) -> Option<DownMode> {
        let f = lock(&self.faults);
        f.down.or_else(|| f.prefixes.iter().find(|(p, _)| path.starts_with(p.as_str())).map(|(_, m)| *m))
    }

    /// Ends the open watches whose path starts with `prefix` (all for `""`).
    pub fn close_watches(&self, prefix: &str) {
        for w in lock(&self.watches).iter().filter(|w| w.path.starts_with(prefix)) {
            w.token.cancel();
        }
    }
}

/// A request as the handlers see it.
pub struct Req {
    /// HTTP method.
    pub method: Method,
    /// Path.
    pub path: String,
    /// Decoded query parameters.
    pub query: HashMap<String, String>,
    /// `Content-Type` without parameters.
    pub content_type: String,
    /// The body.
    pub body: axum::body::Bytes,
    /// Cancel to drop this request's connection.
    pub kill: CancellationToken,
    /// The `User-Agent` header.
    pub user_agent: String,
}

impl Req {
    /// A query parameter.
    pub fn param(&self, key: &str) -> Option<&str> {
        self.query.get(key).map(String::as_str).filter(|v| !v.is_empty())
    }

    /// The field manager: `fieldManager`, else the User-Agent's product name, as the
    /// apiserver derives it.
    pub fn field_manager(&self) -> String {
        match self.param("fieldManager") {
            Some(m) => m.to_owned(),
            None => self.user_agent.split('/').next().unwrap_or_default().chars().take(128).collect(),
        }
    }

    /// Never answers; drops the connection instead.
    pub async fn drop_connection(&self) -> Response<Body> {
        self.kill.cancel();
        std::future::pending().await
    }
}

/// Accepts connections until shutdown.
pub async fn serve(listener: TcpListener, inner: Arc<Inner>) {
    loop {
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok((stream, _)) => stream,
                Err(_) => continue,
            },
            () = inner.shutdown.cancelled() => return,
        };
        let inner = inner.clone();
        tokio::spawn(async move {
            let kill = CancellationToken::new();
            let (svc_inner, svc_kill) = (inner.clone(), kill.clone());
            let svc = hyper::service::service_fn(move |req| handle(svc_inner.clone(), svc_kill.clone(), req));
            let conn = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), svc);
            tokio::select! {
                _ = conn => {}
                () = kill.cancelled() => {}
                () = inner.shutdown.cancelled() => {}
            }
        });
    }
}

/// The APIResourceList of a group version: the served resources of [`ALL`] in it (404 when
/// none), each with its status subresource.
fn discovery(inner: &Inner, group: &str, version: &str) -> Result<Response<Body>, ApiError> {
    let served = ALL.iter().filter(|r| {
        r.group == group && r.version == version && (!r.lifecycle() || inner.eviction_requests.load(Ordering::SeqCst))
    });
    let mut resources = Vec::new();
    for r in served {
        let verbs = ["create", "delete", "get", "list", "patch", "update", "watch"];
        resources.push(
            json!({"name": r.plural, "singularName": "", "namespaced": r.namespaced, "kind": r.kind, "verbs": verbs}),
        );
        if r.status_subresource {
            let status = format!("{}/status", r.plural);
            resources.push(json!({"name": status, "singularName": "", "namespaced": r.namespaced, "kind": r.kind, "verbs": ["get", "patch", "update"]}));
        }
    }
    if resources.is_empty() {
        return Err(ApiError::no_route());
    }
    let version = if group.is_empty() { version.to_owned() } else { format!("{group}/{version}") };
    Ok(json_response(
        200,
        &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": version, "resources": resources}),
    ))
}

/// (verb, group, resource, namespace, name) of a request, as audit logs and RBAC see it.
type Classified = (String, String, String, Option<String>, Option<String>);

fn classify(method: &Method, route: &Route, watch: bool) -> Classified {
    let m = method.as_str().to_ascii_lowercase();
    match route {
        Route::Resource { res, namespace, target } => {
            let (verb, resource, name) = match target {
                Target::Collection => {
                    let verb = match m.as_str() {
                        "get" if watch => "watch",
                        "get" => "list",
                        "post" => "create",
                        "delete" => "deletecollection",
                        other => other,
                    };
                    (verb.to_owned(), res.plural.to_owned(), None)
                }
                Target::Item(n) | Target::Sub(n, _) => {
                    let verb = match m.as_str() {
                        "get" if watch => "watch",
                        "put" => "update",
                        "post" => "create",
                        other => other,
                    };
                    let resource = match target {
                        Target::Sub(_, sub) => format!("{}/{sub}", res.plural),
                        _ => res.plural.to_owned(),
                    };
                    (verb.to_owned(), resource, Some(n.clone()))
                }
            };
            (verb, res.group.to_owned(), resource, namespace.clone(), name)
        }
        Route::SubjectAccessReview => {
            ("create".into(), "authorization.k8s.io".into(), "subjectaccessreviews".into(), None, None)
        }
        Route::Version | Route::Discovery(..) | Route::Unknown => (m, String::new(), String::new(), None, None),
    }
}

async fn handle(
    inner: Arc<Inner>,
    kill: CancellationToken,
    req: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_owned();
    let query: HashMap<String, String> =
        axum::extract::Query::try_from_uri(&parts.uri).map(|q| q.0).unwrap_or_default();
    let route = match parse_path(&path) {
        Route::Resource { res, .. } if res.lifecycle() && !inner.eviction_requests.load(Ordering::SeqCst) => {
            Route::Unknown
        }
        route => route,
    };
    let watch = matches!(query.get("watch").map(String::as_str), Some("true" | "1"));
    let (verb, group, resource, namespace, name) = classify(&parts.method, &route, watch);
    lock(&inner.requests).push(RequestRecord {
        method: parts.method.to_string(),
        path: path.clone(),
        query: parts.uri.query().unwrap_or_default().to_owned(),
        verb,
        group,
        resource,
        namespace,
        name,
    });
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or_default().trim().to_owned())
        .unwrap_or_default();
    let body = match axum::body::to_bytes(Body::new(body), 64 << 20).await {
        Ok(b) => b,
        Err(e) => return Ok(ApiError::bad_request(e.to_string()).response()),
    };
    let user_agent = parts.headers.get(header::USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
    let req = Req { method: parts.method, path, query, content_type, body, kill, user_agent };
    if let Some(mode) = inner.down_for(&req.path) {
        return Ok(match mode {
            DownMode::Unavailable => ApiError::unavailable().response(),
            DownMode::DropConnection => req.drop_connection().await,
        });
    }
    if req.param("dryRun").is_some() {
        return Ok(ApiError::bad_request("the stand-in does not emulate dry runs").response());
    }
    let result = match route {
        Route::Version => Ok(json_response(
            200,
            &json!({"major": "1", "minor": "36", "gitVersion": "v1.36.2-standin", "platform": "linux/amd64"}),
        )),
        Route::SubjectAccessReview => sar::handle(&inner, &req).await,
        Route::Resource { res, namespace, target } => handlers::dispatch(&inner, res, namespace, target, &req).await,
        Route::Discovery(group, version) => discovery(&inner, &group, &version),
        Route::Unknown => Err(ApiError::no_route()),
    };
    Ok(result.unwrap_or_else(|e| e.response()))
}
