//! HTTPS and metrics servers (SPEC 5): TLS, connection handling, limits, graceful shutdown.
//! Knows nothing about KEP rules; [`routes`] hands requests to [`crate::admission`].

pub mod devcert;
mod listener;
pub mod routes;
pub mod shutdown;
pub mod tls;

pub use listener::{Limits, serve_https};

use std::sync::atomic::{AtomicBool, Ordering};

/// What `/readyz` reports (SPEC 4.4): ready when the certificate is loaded, the caches have
/// synced, and shutdown has not begun. Never depends on the controller's Lease.
#[derive(Debug, Default)]
pub struct Readiness {
    cert_loaded: AtomicBool,
    caches_synced: AtomicBool,
    shutting_down: AtomicBool,
}

impl Readiness {
    /// Records that the serving certificate is loaded.
    pub fn set_cert_loaded(&self) {
        self.cert_loaded.store(true, Ordering::Release);
    }

    /// Records whether the Node and NodeMaintenance caches are synced.
    pub fn set_caches_synced(&self, synced: bool) {
        self.caches_synced.store(synced, Ordering::Release);
    }

    /// Records that shutdown has begun: readiness goes false for good.
    pub fn set_shutting_down(&self) {
        self.shutting_down.store(true, Ordering::Release);
    }

    /// `None` when ready, otherwise why not.
    pub fn not_ready_reason(&self) -> Option<&'static str> {
        if self.shutting_down.load(Ordering::Acquire) {
            Some("shutting down")
        } else if !self.cert_loaded.load(Ordering::Acquire) {
            Some("serving certificate not loaded")
        } else if !self.caches_synced.load(Ordering::Acquire) {
            Some("node cache not synced")
        } else {
            None
        }
    }
}

/// Serves `GET /metrics` (OpenMetrics text) and `/healthz` over plain HTTP on `listener`
/// until `shutdown` completes.
///
/// # Errors
/// The I/O error that stopped the server.
pub async fn serve_metrics(
    listener: tokio::net::TcpListener,
    registry: std::sync::Arc<prometheus_client::registry::Registry>,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    use axum::routing::get;
    let app = axum::Router::new()
        .route(
            "/metrics",
            get(move || {
                let registry = registry.clone();
                async move {
                    (
                        [(
                            axum::http::header::CONTENT_TYPE,
                            "application/openmetrics-text; version=1.0.0; charset=utf-8",
                        )],
                        crate::metrics::encode(&registry),
                    )
                }
            }),
        )
        .route("/healthz", get(|| async { "ok" }));
    axum::serve(listener, app).with_graceful_shutdown(shutdown).await
}
