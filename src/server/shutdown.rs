//! Graceful shutdown (SPEC 5): on SIGTERM or SIGINT, stop being ready, keep serving through
//! a delay (the apiserver keeps pooled connections to a terminating pod), then stop accepting
//! and let in-flight requests finish.

use super::Readiness;
use std::sync::Arc;
use std::time::Duration;

/// Waits for SIGTERM or SIGINT (Ctrl-C).
pub async fn signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}

/// Waits for `signal`, marks the server not ready, then waits `delay` while it keeps
/// serving. Completes when the listeners should stop accepting.
pub async fn drain_after(signal: impl std::future::Future<Output = ()>, readiness: Arc<Readiness>, delay: Duration) {
    signal.await;
    tracing::info!(delay = %humantime::format_duration(delay), "shutdown requested; not ready, still serving");
    readiness.set_shutting_down();
    tokio::time::sleep(delay).await;
    tracing::info!("no longer accepting connections; finishing in-flight requests");
}
