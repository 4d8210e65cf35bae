//! Firing Prometheus alerts for the health gates of NodeDisruptionBudgets (SPEC 4.6,
//! `healthGate.alerts`): one `GET <url>/api/v1/alerts` with a timeout, of the Prometheus the
//! controller flag `--prometheus-url` names (never a budget field: a budget author must not
//! make the controller call arbitrary URLs), at most every [`READ_INTERVAL`].
//!
//! [`AlertsClient`] does one read and returns the label sets of the firing alerts (pending
//! ones do not count). [`AlertsReader`] wraps it for the controller's loop: it reads only
//! when the last read is [`READ_INTERVAL`] old, keeps the last outcome as an
//! [`AlertsView`] and says when the next read is due, so the loop wakes for it instead of
//! polling. Fail closed, as kured: no URL, an error or a timeout leaves a snapshot that
//! closes the gate until the next successful read.
//!
//! HTTP is reqwest (rustls with ring, the webpki roots plus `--prometheus-ca-file`): the
//! timeout, TLS roots and connection reuse come with it, where hyper-util's client would need
//! hyper-rustls and our own body and timeout handling. reqwest takes the process's default
//! rustls provider (which `serve` installs) or ring, and installs none itself.

pub use crate::gates::AlertsView;
use crate::metrics::{AlertReadLabels, Metrics};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The shortest time between two reads of Prometheus' alerts (SPEC 4.6: "read at most every
/// 15 s"), counted from the start of one read to the start of the next.
pub const READ_INTERVAL: Duration = Duration::from_secs(15);

/// The largest `/api/v1/alerts` answer read, in bytes (16 MiB, some tens of thousands of
/// alerts): a bigger one is an error, so a broken or hostile endpoint cannot exhaust memory.
pub const MAX_BODY_BYTES: usize = 16 << 20;

/// The labels of one firing alert (`alertname`, `severity`, ...), sorted by name.
pub type AlertLabels = BTreeMap<String, String>;

/// Where the controller reads alerts (the `serve` flags `--prometheus-url`,
/// `--prometheus-ca-file` and `--prometheus-timeout`; SPEC 4.6 `healthGate.alerts`).
#[derive(clap::Args, Clone, Debug)]
pub struct PrometheusOptions {
    /// Prometheus whose firing alerts close the health gates of NodeDisruptionBudgets
    /// (`healthGate.alerts`), e.g. `http://prometheus-operated.monitoring.svc:9090`; alerts
    /// are read from `<url>/api/v1/alerts`. Unset: a budget with alert matchers never opens.
    #[arg(
        id = "prometheus_url",
        long = "prometheus-url",
        value_name = "PROMETHEUS_URL",
        env = "NM_PROMETHEUS_URL",
        value_parser = parse_url
    )]
    pub url: Option<reqwest::Url>,
    /// CA bundle (PEM) trusted for an https `--prometheus-url`, besides the public roots.
    #[arg(
        id = "prometheus_ca_file",
        long = "prometheus-ca-file",
        value_name = "PROMETHEUS_CA_FILE",
        env = "NM_PROMETHEUS_CA_FILE"
    )]
    pub ca_file: Option<PathBuf>,
    /// Time allowed for one read of Prometheus' alerts (connect, answer and body); past it
    /// the health gates with alert matchers close until the next successful read.
    #[arg(
        id = "prometheus_timeout",
        long = "prometheus-timeout",
        value_name = "PROMETHEUS_TIMEOUT",
        env = "NM_PROMETHEUS_TIMEOUT",
        default_value = "5s",
        value_parser = parse_timeout
    )]
    pub timeout: Duration,
}

impl Default for PrometheusOptions {
    /// No Prometheus (alert gates stay closed), the flag's default timeout.
    fn default() -> Self {
        PrometheusOptions { url: None, ca_file: None, timeout: Duration::from_secs(5) }
    }
}

/// The parser of `--prometheus-url`: an absolute `http` or `https` URL with a host.
fn parse_url(text: &str) -> Result<reqwest::Url, String> {
    let url = reqwest::Url::parse(text).map_err(|e| format!("not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || !url.has_host() {
        return Err("not an http:// or https:// URL with a host".into());
    }
    Ok(url)
}

/// The parser of `--prometheus-timeout`: a duration (`5s`, `1500ms`) above zero, since a
/// zero timeout would fail every read.
fn parse_timeout(text: &str) -> Result<Duration, String> {
    match humantime::parse_duration(text) {
        Ok(d) if d.is_zero() => Err("must be above 0".into()),
        Ok(d) => Ok(d),
        Err(e) => Err(e.to_string()),
    }
}

/// Why reading Prometheus' alerts failed, or why its client could not be built (SPEC 4.6:
/// either closes the health gates with alert matchers). The URL in the messages has no
/// password.
#[derive(Debug, thiserror::Error)]
pub enum AlertsError {
    /// `--prometheus-ca-file` could not be read.
    #[error("reading the Prometheus CA file {path}: {source}")]
    CaFile {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// `--prometheus-ca-file` holds no usable PEM certificate.
    #[error("the Prometheus CA file {path}: {what}")]
    CaPem {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        what: String,
    },
    /// The HTTP client could not be built (TLS configuration).
    #[error("building the HTTP client for Prometheus: {0}")]
    Client(String),
    /// No complete answer within the timeout.
    #[error("GET {url}: no answer within {}", humantime::format_duration(*.timeout))]
    Timeout {
        /// The URL read.
        url: String,
        /// The timeout (`--prometheus-timeout`).
        timeout: Duration,
    },
    /// No connection: refused, DNS, TLS handshake (an unknown CA), or broken off.
    #[error("GET {url}: {what}")]
    Unreachable {
        /// The URL read.
        url: String,
        /// The cause, with its causes.
        what: String,
    },
    /// An HTTP status other than 2xx.
    #[error("GET {url}: HTTP {status}{detail}")]
    Status {
        /// The URL read.
        url: String,
        /// The HTTP status code.
        status: u16,
        /// `": "` and Prometheus' `error`, or the start of the body; empty without one.
        detail: String,
    },
    /// The body is longer than [`MAX_BODY_BYTES`].
    #[error("GET {url}: the answer is larger than {limit} bytes")]
    TooLarge {
        /// The URL read.
        url: String,
        /// The limit, in bytes.
        limit: usize,
    },
    /// The body is not the JSON of `/api/v1/alerts`.
    #[error("GET {url}: not an answer of /api/v1/alerts: {what}")]
    Invalid {
        /// The URL read.
        url: String,
        /// What the parser said.
        what: String,
    },
    /// Prometheus answered with `status` other than `success`.
    #[error("GET {url}: Prometheus answered status {status:?}: {error}")]
    Unsuccessful {
        /// The URL read.
        url: String,
        /// The `status` field.
        status: String,
        /// `errorType` and `error`.
        error: String,
    },
}

impl AlertsError {
    /// The `result` label of `node_maintenance_alert_reads_total` for this error: one of
    /// [`AlertReadLabels::RESULTS`] other than `success`.
    fn result(&self) -> &'static str {
        match self {
            AlertsError::Timeout { .. } => "timeout",
            AlertsError::Unreachable { .. } => "unreachable",
            // Errors of the configuration, returned by the constructors, never by a read.
            AlertsError::CaFile { .. } | AlertsError::CaPem { .. } | AlertsError::Client(_) => "unreachable",
            AlertsError::Status { .. } => "http_error",
            AlertsError::TooLarge { .. } | AlertsError::Invalid { .. } | AlertsError::Unsuccessful { .. } => {
                "invalid_response"
            }
        }
    }
}

/// The envelope of every Prometheus HTTP API answer; `data` only with `success`.
#[derive(Deserialize)]
struct Envelope {
    status: String,
    data: Option<AlertsData>,
    #[serde(rename = "errorType", default)]
    error_type: String,
    #[serde(default)]
    error: String,
}

#[derive(Deserialize)]
struct AlertsData {
    alerts: Vec<Alert>,
}

/// One alert; `annotations`, `activeAt` and `value` are not needed and not parsed.
#[derive(Deserialize)]
struct Alert {
    #[serde(default)]
    labels: AlertLabels,
    state: String,
}

/// A client for one Prometheus' `/api/v1/alerts` (SPEC 4.6 `healthGate.alerts`); cheap to
/// clone (the connection pool is shared).
#[derive(Clone, Debug)]
pub struct AlertsClient {
    http: reqwest::Client,
    endpoint: reqwest::Url,
    /// `endpoint` without its password, for messages.
    shown: String,
    timeout: Duration,
}

impl AlertsClient {
    /// A client for `<url>/api/v1/alerts` (a path in `url`, as behind a proxy at
    /// `/prometheus`, is kept), trusting the webpki roots and the PEM certificates of
    /// `ca_file`; each read is bounded by `timeout`.
    ///
    /// # Errors
    /// [`AlertsError::CaFile`] or [`AlertsError::CaPem`] when `ca_file` cannot be read or
    /// holds no certificate; [`AlertsError::Client`] when the TLS configuration is refused.
    pub fn new(url: &reqwest::Url, ca_file: Option<&Path>, timeout: Duration) -> Result<Self, AlertsError> {
        let mut builder = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .user_agent(concat!("node-maintenance/", env!("CARGO_PKG_VERSION")));
        if let Some(path) = ca_file {
            let pem = std::fs::read(path).map_err(|source| AlertsError::CaFile { path: path.to_owned(), source })?;
            let pem_error = |what: String| AlertsError::CaPem { path: path.to_owned(), what };
            let certificates = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| pem_error(causes(&e)))?;
            if certificates.is_empty() {
                return Err(pem_error("no PEM certificate".into()));
            }
            for certificate in certificates {
                builder = builder.add_root_certificate(certificate);
            }
        }
        let http = builder.build().map_err(|e| AlertsError::Client(causes(&e)))?;
        let mut endpoint = url.clone();
        // `join` replaces the last path segment unless the path ends with a slash.
        if !endpoint.path().ends_with('/') {
            endpoint.set_path(&format!("{}/", endpoint.path()));
        }
        let endpoint = endpoint.join("api/v1/alerts").map_err(|e| AlertsError::Client(e.to_string()))?;
        let mut shown = endpoint.clone();
        let _ = shown.set_password(None);
        Ok(AlertsClient { http, endpoint, shown: shown.to_string(), timeout })
    }

    /// One read: the label sets of the alerts Prometheus reports as `firing`, in its order
    /// (`pending` and any other state left out).
    ///
    /// # Errors
    /// [`AlertsError::Timeout`] past the timeout, [`AlertsError::Unreachable`] without a
    /// connection, [`AlertsError::Status`] for a non-2xx answer, [`AlertsError::TooLarge`]
    /// above [`MAX_BODY_BYTES`], [`AlertsError::Invalid`] for a body that is not the JSON
    /// of `/api/v1/alerts`, [`AlertsError::Unsuccessful`] for a `status` other than
    /// `success`.
    pub async fn firing(&self) -> Result<Vec<AlertLabels>, AlertsError> {
        let response = self.http.get(self.endpoint.clone()).send().await.map_err(|e| self.transport(e))?;
        let status = response.status();
        let body = self.body(response).await?;
        if !status.is_success() {
            // Prometheus explains a refusal in the envelope's `error`; a proxy in plain text.
            let detail = match serde_json::from_slice::<Envelope>(&body) {
                Ok(envelope) if !envelope.error.is_empty() => format!(": {}", envelope.error),
                _ if body.is_empty() => String::new(),
                _ => format!(": {}", String::from_utf8_lossy(&body[..body.len().min(200)])),
            };
            return Err(AlertsError::Status { url: self.shown.clone(), status: status.as_u16(), detail });
        }
        let envelope: Envelope = serde_json::from_slice(&body)
            .map_err(|e| AlertsError::Invalid { url: self.shown.clone(), what: e.to_string() })?;
        if envelope.status != "success" {
            let error = format!("{}: {}", envelope.error_type, envelope.error);
            return Err(AlertsError::Unsuccessful { url: self.shown.clone(), status: envelope.status, error });
        }
        let Some(data) = envelope.data else {
            return Err(AlertsError::Invalid { url: self.shown.clone(), what: "no data".into() });
        };
        Ok(data.alerts.into_iter().filter(|a| a.state == "firing").map(|a| a.labels).collect())
    }

    /// The body, read chunk by chunk up to [`MAX_BODY_BYTES`] (a `Content-Length` above it
    /// is refused before reading).
    async fn body(&self, mut response: reqwest::Response) -> Result<Vec<u8>, AlertsError> {
        let too_large = || AlertsError::TooLarge { url: self.shown.clone(), limit: MAX_BODY_BYTES };
        if response.content_length().is_some_and(|n| n > MAX_BODY_BYTES as u64) {
            return Err(too_large());
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| self.transport(e))? {
            if body.len() + chunk.len() > MAX_BODY_BYTES {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        Ok(body)
    }

    /// A reqwest error as [`AlertsError::Timeout`] or [`AlertsError::Unreachable`]; the URL
    /// is left out of its message (it may carry a password).
    fn transport(&self, error: reqwest::Error) -> AlertsError {
        if error.is_timeout() {
            AlertsError::Timeout { url: self.shown.clone(), timeout: self.timeout }
        } else {
            AlertsError::Unreachable { url: self.shown.clone(), what: causes(&error.without_url()) }
        }
    }
}

/// The message of `error` and of each of its causes, joined by `": "` (reqwest's own
/// message alone says only "error sending request").
fn causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The controller's reader of firing alerts: reads through an [`AlertsClient`] at most
/// every [`READ_INTERVAL`] and keeps the last outcome, so it may be called on every pass of
/// a loop that runs often (between reads a call is a comparison and an `Arc` clone).
///
/// Reads are counted in `node_maintenance_alert_reads_total{result}` and timed in
/// `node_maintenance_alert_read_duration_seconds`.
#[derive(Debug)]
pub struct AlertsReader {
    /// `None` without `--prometheus-url`.
    client: Option<AlertsClient>,
    metrics: Metrics,
    last: Arc<AlertsView>,
    /// When the next read may start; `None` before the first.
    due: Option<Instant>,
}

impl AlertsReader {
    /// A reader for `options` (without a URL, one whose snapshot is always
    /// [`AlertsView::NotConfigured`] and that never reads), counting its reads in
    /// `metrics`. Its snapshot is [`AlertsView::Failed`] until the first read.
    ///
    /// # Errors
    /// As [`AlertsClient::new`]: the CA file cannot be read or holds no certificate, or the
    /// TLS configuration is refused.
    pub fn new(options: &PrometheusOptions, metrics: Metrics) -> Result<Self, AlertsError> {
        let client = options
            .url
            .as_ref()
            .map(|url| AlertsClient::new(url, options.ca_file.as_deref(), options.timeout))
            .transpose()?;
        let last = match client {
            None => AlertsView::NotConfigured,
            Some(_) => AlertsView::Failed("Prometheus' alerts not read yet".into()),
        };
        Ok(AlertsReader { client, metrics, last: Arc::new(last), due: None })
    }

    /// The outcome of the last read (see [`AlertsView`]), without reading.
    pub fn snapshot(&self) -> Arc<AlertsView> {
        self.last.clone()
    }

    /// When [`AlertsReader::refresh`] will read next: `None` without a URL (never), else
    /// [`READ_INTERVAL`] after the start of the last read, or `now` before the first. The
    /// controller wakes then rather than polling.
    pub fn next_read_at(&self, now: Instant) -> Option<Instant> {
        self.client.as_ref().map(|_| self.due.unwrap_or(now))
    }

    /// Reads Prometheus' alerts when due (first call, or `now` at least [`READ_INTERVAL`]
    /// after the start of the last read), then returns the snapshot; otherwise returns the
    /// last one at once. A read waits at most `--prometheus-timeout`; a failed read leaves
    /// [`AlertsView::Failed`] (fail closed) and is logged when its message changes.
    pub async fn refresh(&mut self, now: Instant) -> Arc<AlertsView> {
        let Some(client) = &self.client else { return self.last.clone() };
        if self.due.is_some_and(|due| now < due) {
            return self.last.clone();
        }
        self.due = Some(now + READ_INTERVAL);
        let started = Instant::now();
        let outcome = client.firing().await;
        self.metrics.alert_read_duration.observe(started.elapsed().as_secs_f64());
        let result = outcome.as_ref().map_or_else(AlertsError::result, |_| "success");
        self.metrics.alert_reads.get_or_create(&AlertReadLabels { result }).inc();
        let snapshot = match outcome {
            Ok(firing) => {
                if matches!(*self.last, AlertsView::Failed(_)) {
                    tracing::info!(firing = firing.len(), "Prometheus' alerts read");
                }
                AlertsView::Firing(firing)
            }
            Err(e) => {
                let message = e.to_string();
                // Once per distinct failure: an outage would otherwise log every 15 s.
                if !matches!(&*self.last, AlertsView::Failed(m) if *m == message) {
                    tracing::warn!(error = %message, "reading Prometheus' alerts failed; health gates with alert matchers are closed");
                }
                AlertsView::Failed(message)
            }
        };
        self.last = Arc::new(snapshot);
        self.last.clone()
    }
}
