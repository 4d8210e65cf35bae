//! The TLS accept loop: bounded connections, handshake timeout, HTTP/1.1 and HTTP/2 with
//! header and stream limits, graceful draining of open connections.

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;

/// Connection limits of the HTTPS server.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Open connections at most; beyond that, accepting waits.
    pub max_connections: usize,
    /// Time allowed for the TLS handshake.
    pub handshake_timeout: Duration,
    /// Time allowed for a client to send request headers (HTTP/1.1); also closes idle
    /// keep-alive connections that send nothing.
    pub header_read_timeout: Duration,
    /// Concurrent HTTP/2 streams per connection.
    pub max_concurrent_streams: u32,
    /// Time given to in-flight requests after the listener stops.
    pub drain_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 1024,
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(30),
            max_concurrent_streams: 100,
            drain_timeout: Duration::from_secs(20),
        }
    }
}

/// Serves `app` over TLS on `listener` until `shutdown` completes, then waits up to
/// `limits.drain_timeout` for open connections to finish their requests.
///
/// A client that speaks plain HTTP to this port gets a plain `400 Bad Request` saying so.
pub async fn serve_https(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) {
    let acceptor = TlsAcceptor::from(tls);
    let graceful = GracefulShutdown::new();
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(limits.header_read_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits.max_concurrent_streams)
        .keep_alive_interval(Some(Duration::from_secs(30)));
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => break },
            _ = &mut shutdown => break,
        };
        let (tcp, peer) = tokio::select! {
            r = listener.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut shutdown => break,
        };
        let _ = tcp.set_nodelay(true);
        let (acceptor, app, builder, watcher) = (acceptor.clone(), app.clone(), builder.clone(), graceful.watcher());
        let handshake_timeout = limits.handshake_timeout;
        tokio::spawn(async move {
            let _permit = permit;
            let Some(tcp) = refuse_plain_http(tcp).await else { return };
            let tls = match tokio::time::timeout(handshake_timeout, acceptor.accept(tcp)).await {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => return tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                Err(_) => return tracing::debug!(%peer, "TLS handshake timed out"),
            };
            let conn = builder.serve_connection(TokioIo::new(tls), TowerToHyperService::new(app));
            if let Err(e) = watcher.watch(conn).await {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(limits.drain_timeout, graceful.shutdown()).await.is_err() {
        tracing::warn!("in-flight connections did not finish within the drain timeout");
    }
}

/// Answers a plain-HTTP request on the TLS port the way Go's servers do, then closes it.
/// Returns the stream back when it looks like TLS.
async fn refuse_plain_http(mut tcp: TcpStream) -> Option<TcpStream> {
    let mut first = [0u8; 1];
    // A TLS ClientHello starts with record type 0x16; HTTP starts with an ASCII method.
    let peeked = tokio::time::timeout(Duration::from_secs(10), tcp.peek(&mut first)).await;
    if !matches!(peeked, Ok(Ok(1))) || !first[0].is_ascii_uppercase() {
        return Some(tcp);
    }
    let msg = b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nClient sent an HTTP request to an HTTPS server.\n";
    let _ = tcp.write_all(msg).await;
    let _ = tcp.shutdown().await;
    None
}
