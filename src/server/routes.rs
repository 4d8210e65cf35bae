//! HTTP handlers (SPEC 3 endpoints, SPEC 5 limits): decode the AdmissionReview, hand the
//! request to [`crate::admission`], encode the answer. Knows nothing about KEP rules.

use super::Readiness;
use crate::admission::review::{self, Request};
use crate::admission::{Authorizer, ClusterView, Decision, Denial};
use crate::metrics::{AdmissionLabels, Metrics};
use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::QueryRejection;
use axum::extract::{DefaultBodyLimit, FromRequestParts, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use kube::core::admission::Operation;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;
use serde::Deserialize;
use std::sync::{Arc, OnceLock};
use std::task::Poll;
use std::time::Duration;
use tokio::sync::Semaphore;

/// Largest request body accepted: an UPDATE review carries two objects of up to 3 MiB.
pub const MAX_BODY_BYTES: usize = 7 * 1024 * 1024;

/// Everything the handlers share.
#[derive(Clone)]
pub struct AppState {
    /// Nodes and NodeMaintenances for the decisions.
    pub view: Arc<dyn ClusterView>,
    /// Authorization of node deletes (SPEC 3.4).
    pub authz: Arc<dyn Authorizer>,
    /// Metric families.
    pub metrics: Metrics,
    /// What `/readyz` reports.
    pub readiness: Arc<Readiness>,
    /// Longest time spent on one review, whatever `?timeout=` says.
    pub max_review_time: Duration,
}

/// The four admission endpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// `/mutate`: NodeMaintenance defaulting.
    Mutate,
    /// `/validate`: NodeMaintenance validation and authorization.
    Validate,
    /// `/validate-node`: Node uncordon warnings.
    ValidateNode,
    /// `/validate-budget`: NodeDisruptionBudget validation.
    ValidateBudget,
}

impl Endpoint {
    fn label(self) -> &'static str {
        match self {
            Endpoint::Mutate => "mutate",
            Endpoint::Validate => "validate",
            Endpoint::ValidateNode => "validate-node",
            Endpoint::ValidateBudget => "validate-budget",
        }
    }
}

/// The webhook router: `POST /mutate`, `/validate`, `/validate-node`, `/validate-budget`; `GET /healthz`,
/// `/readyz`. Bodies over [`MAX_BODY_BYTES`] get 413.
pub fn router(state: AppState) -> Router {
    // Handlers get the state behind one Arc: cloning `AppState` itself for every request
    // (what axum does with `State<AppState>`) costs a dozen atomic increments and decrements.
    let state = Arc::new(Shared { series: AdmissionSeries::default(), state });
    Router::new()
        .route("/mutate", post(|s, q, h, b| review_handler(Endpoint::Mutate, s, q, h, b)))
        .route("/validate", post(|s, q, h, b| review_handler(Endpoint::Validate, s, q, h, b)))
        .route("/validate-node", post(|s, q, h, b| review_handler(Endpoint::ValidateNode, s, q, h, b)))
        .route("/validate-budget", post(|s, q, h, b| review_handler(Endpoint::ValidateBudget, s, q, h, b)))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

/// Wraps the router with the request limits (SPEC 5): at most `max_in_flight` requests at
/// once, refusing the excess at once with 503 (load shedding, before routing, so probes and
/// unknown paths count too), and a hard per-request `timeout` (408) as a safety net behind
/// each review's own deadline. Returns the service to serve ([`crate::server::serve_https`]).
pub fn with_limits(app: Router, max_in_flight: usize, timeout: Duration) -> Limited {
    Limited { app, in_flight: Arc::new(Semaphore::new(max_in_flight)), timeout }
}

/// The router behind the request limits of [`with_limits`]: one service around the whole
/// router rather than tower layers around each route, which axum clones (boxed) for every
/// request.
#[derive(Clone)]
pub struct Limited {
    app: Router,
    /// A permit per request in flight; none left means 503.
    in_flight: Arc<Semaphore>,
    timeout: Duration,
}

impl<B> tower::Service<axum::http::Request<B>> for Limited
where
    B: axum::body::HttpBody<Data = Bytes> + Send + 'static,
    B::Error: Into<tower::BoxError>,
{
    type Response = Response;
    type Error = std::convert::Infallible;
    type Future = futures::future::BoxFuture<'static, Result<Response, Self::Error>>;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        tower::Service::<axum::http::Request<B>>::poll_ready(&mut self.app, cx)
    }

    fn call(&mut self, req: axum::http::Request<B>) -> Self::Future {
        let Ok(permit) = self.in_flight.clone().try_acquire_owned() else {
            let refused = status_body(503, "ServiceUnavailable", "too many requests in flight; retry");
            return Box::pin(std::future::ready(Ok((StatusCode::SERVICE_UNAVAILABLE, refused).into_response())));
        };
        let (call, deadline) = (self.app.call(req), tokio::time::Instant::now() + self.timeout);
        Box::pin(async move {
            let response = match within(deadline, call).await {
                Some(Ok(response)) => response,
                Some(Err(never)) => match never {},
                None => StatusCode::REQUEST_TIMEOUT.into_response(),
            };
            drop(permit);
            Ok(response)
        })
    }
}

/// Awaits `work` until `deadline`: its output, or `None` once the deadline has passed. The
/// timer is made only if `work` does not finish in its first poll, as most requests do:
/// making one (what `tokio::time::timeout` does up front) takes a reference to the runtime's
/// timer, shared by every worker thread.
async fn within<F: Future>(deadline: tokio::time::Instant, work: F) -> Option<F::Output> {
    let mut work = std::pin::pin!(work);
    let mut timer = std::pin::pin!(None::<tokio::time::Sleep>);
    std::future::poll_fn(|cx| {
        if let Poll::Ready(out) = work.as_mut().poll(cx) {
            return Poll::Ready(Some(out));
        }
        if timer.is_none() {
            timer.set(Some(tokio::time::sleep_until(deadline)));
        }
        match timer.as_mut().as_pin_mut() {
            Some(sleep) => sleep.poll(cx).map(|()| None),
            None => Poll::Pending,
        }
    })
    .await
}

/// What the handlers share.
struct Shared {
    state: AppState,
    series: AdmissionSeries,
}

/// Label values of the admission metrics: as many endpoints as [`Endpoint`] has variants,
/// these operations and results.
const ENDPOINTS: usize = 4;
const OPERATIONS: [&str; 5] = ["CREATE", "UPDATE", "DELETE", "CONNECT", "unknown"];
const RESULTS: [&str; 3] = ["allowed", "denied", "error"];

/// The admission request counter and duration histogram of each label set, taken from their
/// families when the label set is first used and kept (they share their values with the
/// families): a family lookup hashes the labels under a lock, twice per review. A label set
/// appears in `/metrics` when first used, as with the families alone.
struct AdmissionSeries {
    /// By endpoint, operation and result (`Endpoint` order, [`OPERATIONS`], [`RESULTS`]).
    slots: Vec<OnceLock<(Counter, Histogram)>>,
}

impl Default for AdmissionSeries {
    fn default() -> Self {
        let slots = ENDPOINTS * OPERATIONS.len() * RESULTS.len();
        AdmissionSeries { slots: (0..slots).map(|_| OnceLock::new()).collect() }
    }
}

impl AdmissionSeries {
    /// Counts one review of `endpoint` with these `operation` and `result` labels that took
    /// `seconds`.
    fn observe(
        &self,
        metrics: &Metrics,
        endpoint: Endpoint,
        operation: &'static str,
        result: &'static str,
        seconds: f64,
    ) {
        let labels = AdmissionLabels { endpoint: endpoint.label(), operation, result };
        let from_families = || {
            let counter = metrics.admission_requests.get_or_create(&labels).clone();
            (counter, metrics.admission_duration.get_or_create(&labels).clone())
        };
        let record = |(counter, histogram): &(Counter, Histogram)| {
            counter.inc();
            histogram.observe(seconds);
        };
        let o = OPERATIONS.iter().position(|o| *o == operation);
        let r = RESULTS.iter().position(|r| *r == result);
        match o.zip(r).and_then(|(o, r)| self.slots.get((endpoint as usize * OPERATIONS.len() + o) * RESULTS.len() + r))
        {
            Some(slot) => record(slot.get_or_init(from_families)),
            None => record(&from_families()),
        }
    }
}

async fn readyz(State(shared): State<Arc<Shared>>) -> Response {
    match shared.state.readiness.not_ready_reason() {
        None => (StatusCode::OK, "ok").into_response(),
        Some(why) => (StatusCode::SERVICE_UNAVAILABLE, why).into_response(),
    }
}

/// The query of a review: `?timeout=`, what the apiserver allows the webhook.
#[derive(Deserialize)]
struct ReviewQuery {
    timeout: Option<String>,
}

impl<S: Send + Sync> FromRequestParts<S> for ReviewQuery {
    type Rejection = QueryRejection;

    /// Reads the query as axum's `Query<ReviewQuery>` reads it (form-urlencoded, keys and
    /// values decoded, other parameters ignored), without serde: a query naming `timeout`
    /// twice is handed to `Query`, which refuses it with its own answer.
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let mut timeout = None;
        for (key, value) in form_urlencoded::parse(parts.uri.query().unwrap_or_default().as_bytes()) {
            if key == "timeout" {
                if timeout.is_some() {
                    return Query::try_from_uri(&parts.uri).map(|Query(q)| q);
                }
                timeout = Some(value.into_owned());
            }
        }
        Ok(ReviewQuery { timeout })
    }
}

/// The time to spend on a review, counted from when the handler has its body: the
/// apiserver's `?timeout=` less a margin to get the answer back, capped by the server's
/// maximum.
fn review_deadline(query: &ReviewQuery, max: Duration) -> Duration {
    let asked = query.timeout.as_deref().and_then(|t| humantime::parse_duration(t).ok());
    match asked {
        Some(t) => max.min(t.mul_f64(0.9).saturating_sub(Duration::from_millis(100))).max(Duration::from_millis(50)),
        None => max,
    }
}

fn operation_label(op: &Operation) -> &'static str {
    match op {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        Operation::Delete => "DELETE",
        Operation::Connect => "CONNECT",
    }
}

/// Whether the request says `Content-Type: application/json`; read in place (the `HeaderMap`
/// extractor would copy every header).
struct JsonContentType(bool);

impl<S: Send + Sync> FromRequestParts<S> for JsonContentType {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(JsonContentType(is_json(&parts.headers)))
    }
}

async fn review_handler(
    endpoint: Endpoint,
    State(shared): State<Arc<Shared>>,
    query: ReviewQuery,
    JsonContentType(json): JsonContentType,
    body: Bytes,
) -> Response {
    let (started, state) = (tokio::time::Instant::now(), &shared.state);
    let decoded = json.then(|| review::decode(&body));
    let mut span = AdmissionSpan::new(endpoint, decoded.as_ref().and_then(|d| d.as_ref().ok()).map(|r| &r.request));
    let (status, body, operation, result) = match &decoded {
        None => (
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            status_body(415, "UnsupportedMediaType", "Content-Type must be application/json"),
            "unknown",
            "error",
        ),
        Some(Err(e)) => {
            span.log(|| tracing::warn!(error = %e, "undecodable AdmissionReview"));
            match &e.uid {
                Some(uid) => {
                    let d = Decision::deny(Denial::bad_request(e.message.clone()));
                    (StatusCode::OK, review::encode(&e.api_version, uid, &d, false), "unknown", "denied")
                }
                None => (StatusCode::BAD_REQUEST, status_body(400, "BadRequest", &e.message), "unknown", "error"),
            }
        }
        Some(Ok(rev)) => {
            let req = &rev.request;
            let deadline = review_deadline(&query, state.max_review_time);
            let decision = span.around(within(started + deadline, decide(endpoint, req, state))).await;
            let decision = decision.unwrap_or_else(|| {
                Decision::deny(Denial::unavailable(format!(
                    "review did not finish within {}",
                    humantime::format_duration(deadline)
                )))
            });
            match &decision.denial {
                Some(d) => span.log(|| tracing::info!(code = d.code, message = %d.message, "denied")),
                // At debug the span is open (`AdmissionSpan::new`); below, the event is off.
                None => span.log_if_open(|| tracing::debug!(warnings = decision.warnings.len(), "allowed")),
            }
            let bytes = review::encode(&rev.api_version, &req.uid, &decision, endpoint == Endpoint::Mutate);
            (StatusCode::OK, bytes, operation_label(&req.operation), decision.result_label())
        }
    };
    span.record_result(result);
    shared.series.observe(&state.metrics, endpoint, operation, result, started.elapsed().as_secs_f64());
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// The `admission` span of one review: its fields (endpoint, uid, operation, name, user) are
/// the context of the review's log lines, and formatting them costs about as much as the
/// whole decision of a small review. So it is opened only when something may log inside it:
/// before the handler logs, once the decision waits (on a SubjectAccessReview, whose client
/// logs failures), and at once when the log filter lets debug events through anywhere. A
/// decision that finishes in its first poll emits no event at info or above (nothing in
/// `admission` logs), so the lines written are those a span opened up front would give.
struct AdmissionSpan<'r> {
    span: Option<tracing::Span>,
    endpoint: Endpoint,
    /// The request, when the body could be read.
    request: Option<&'r Request<'r>>,
}

impl<'r> AdmissionSpan<'r> {
    fn new(endpoint: Endpoint, request: Option<&'r Request<'r>>) -> Self {
        let mut span = AdmissionSpan { span: None, endpoint, request };
        if tracing::level_filters::LevelFilter::current() >= tracing::Level::DEBUG {
            span.open();
        }
        span
    }

    /// The span, opened with every field of a readable request at once: one formatting pass
    /// instead of one per field (the `fmt` layer renders span fields as they are recorded).
    fn open(&mut self) -> &tracing::Span {
        let (endpoint, request) = (self.endpoint.label(), self.request);
        self.span.get_or_insert_with(|| match request {
            Some(req) => tracing::info_span!(
                "admission",
                endpoint,
                uid = req.uid.as_ref(),
                operation = operation_label(&req.operation),
                name = req.name.as_ref(),
                user = req.user_info.username.as_deref().unwrap_or(""),
                result = tracing::field::Empty,
            ),
            None => tracing::info_span!(
                "admission",
                endpoint,
                uid = tracing::field::Empty,
                operation = tracing::field::Empty,
                name = tracing::field::Empty,
                user = tracing::field::Empty,
                result = tracing::field::Empty,
            ),
        })
    }

    /// Runs `log` inside the span, opening it.
    fn log(&mut self, log: impl FnOnce()) {
        self.open().in_scope(log);
    }

    /// Runs `log` inside the span if it is open, else outside any.
    fn log_if_open(&self, log: impl FnOnce()) {
        match &self.span {
            Some(span) => span.in_scope(log),
            None => log(),
        }
    }

    /// Awaits `work`: outside the span until it first waits, inside it from then on.
    async fn around<F: Future>(&mut self, work: F) -> F::Output {
        let mut work = std::pin::pin!(work);
        std::future::poll_fn(|cx| {
            if let Some(span) = &self.span {
                return span.in_scope(|| work.as_mut().poll(cx));
            }
            let polled = work.as_mut().poll(cx);
            if polled.is_pending() {
                self.open();
            }
            polled
        })
        .await
    }

    /// Records the outcome on the span, if it was opened.
    fn record_result(&self, result: &'static str) {
        if let Some(span) = &self.span {
            span.record("result", result);
        }
    }
}

async fn decide(endpoint: Endpoint, req: &Request<'_>, state: &AppState) -> Decision {
    match endpoint {
        Endpoint::Mutate => crate::admission::mutate(req),
        Endpoint::Validate => crate::admission::validate(req, state.view.as_ref(), state.authz.as_ref()).await,
        Endpoint::ValidateNode => crate::admission::validate_node(req, state.view.as_ref()),
        Endpoint::ValidateBudget => crate::admission::validate_budget(req),
    }
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"))
}

/// A metav1.Status body for answers that cannot be an AdmissionReview.
fn status_body(code: u16, reason: &str, message: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code, "reason": reason, "message": message,
    }))
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn within_gives_up_at_the_deadline_and_not_before() {
        let start = tokio::time::Instant::now();
        let deadline = start + Duration::from_secs(2);
        assert_eq!(within(deadline, async { 7 }).await, Some(7), "work done at once");
        let slow = async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            8
        };
        assert_eq!(within(deadline, slow).await, Some(8), "work that waits, done before the deadline");
        assert_eq!(start.elapsed(), Duration::from_secs(1));
        assert_eq!(within(deadline, std::future::pending::<()>()).await, None, "work that never ends");
        assert_eq!(start.elapsed(), Duration::from_secs(2), "given up at the deadline");
        assert_eq!(within(deadline, async { 9 }).await, Some(9), "work done at once, past the deadline");
    }

    #[test]
    fn kept_series_count_into_their_families_and_appear_when_first_used() {
        let (metrics, registry) = Metrics::new();
        let series = AdmissionSeries::default();
        for _ in 0..3 {
            series.observe(&metrics, Endpoint::Validate, "CREATE", "allowed", 0.001);
        }
        series.observe(&metrics, Endpoint::ValidateBudget, "unknown", "error", 0.002);
        let labels = |endpoint, operation, result| AdmissionLabels { endpoint, operation, result };
        assert_eq!(metrics.admission_requests.get_or_create(&labels("validate", "CREATE", "allowed")).get(), 3);
        assert_eq!(metrics.admission_requests.get_or_create(&labels("validate-budget", "unknown", "error")).get(), 1);
        let text = crate::metrics::encode(&registry);
        let count = r#"node_maintenance_admission_request_duration_seconds_count{endpoint="validate",operation="CREATE",result="allowed"} 3"#;
        assert!(text.contains(count), "{text}");
        assert!(!text.contains(r#"endpoint="mutate""#), "a label set appears only once used: {text}");
    }

    #[tokio::test]
    async fn the_query_reads_as_axum_reads_it() {
        let read = |uri: &str| {
            let (mut parts, ()) = axum::http::Request::post(uri).body(()).unwrap().into_parts();
            async move {
                let fast = ReviewQuery::from_request_parts(&mut parts, &()).await.map(|q| q.timeout);
                let axum = Query::<ReviewQuery>::try_from_uri(&parts.uri).map(|Query(q)| q.timeout);
                (fast.map_err(|e| e.body_text()), axum.map_err(|e| e.body_text()))
            }
        };
        for uri in [
            "/validate",
            "/validate?",
            "/validate?timeout=10s",
            "/validate?timeout=",
            "/validate?a=1&timeout=2s&b",
            "/validate?time%6Fut=1%73",
            "/validate?timeout=1s&timeout=2s",
            "/validate?timeout=1s&time%6Fut=2s",
            "/validate?timeout=%FF%zz+x",
        ] {
            let (fast, axum) = read(uri).await;
            assert_eq!(fast, axum, "{uri}");
        }
    }

    #[test]
    fn deadline_honours_the_apiserver_timeout_with_a_margin() {
        let max = Duration::from_secs(8);
        let q = |t: &str| ReviewQuery { timeout: Some(t.into()) };
        assert_eq!(review_deadline(&q("10s"), max), max);
        assert_eq!(review_deadline(&q("2s"), max), Duration::from_millis(1700));
        assert_eq!(review_deadline(&ReviewQuery { timeout: None }, max), max);
        assert_eq!(review_deadline(&q("garbage"), max), max);
        assert_eq!(review_deadline(&q("10ms"), max), Duration::from_millis(50));
    }
}
