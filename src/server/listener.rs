//! The TLS accept loop: bounded connections, handshake timeout, HTTP/1.1 and HTTP/2 with
//! header and stream limits, an idle timeout, graceful draining of open connections.

use axum::response::Response;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// Connection limits of the HTTPS server.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Open connections at most; beyond that, accepting waits.
    pub max_connections: usize,
    /// Time allowed from accepting a connection to the end of its TLS handshake.
    pub handshake_timeout: Duration,
    /// Time allowed for a client to send request headers (HTTP/1.1); also closes idle
    /// keep-alive connections that send nothing.
    pub header_read_timeout: Duration,
    /// Concurrent HTTP/2 streams per connection.
    pub max_concurrent_streams: u32,
    /// Time given to in-flight requests after the listener stops.
    pub shutdown_grace: Duration,
    /// A connection with no request in flight for this long is closed gracefully (HTTP/2
    /// GOAWAY, so a client never loses a request to it); this also closes connections that
    /// finish the handshake and then send nothing, which would otherwise hold a
    /// `max_connections` slot for good.
    pub idle_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 1024,
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(30),
            max_concurrent_streams: 100,
            shutdown_grace: Duration::from_secs(20),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

/// Serves `app` (the router, or the router behind its request limits:
/// [`crate::server::routes::with_limits`]) over TLS on `listener` until `shutdown` completes,
/// then waits up to `limits.shutdown_grace` for open connections to finish their requests.
///
/// A client that speaks plain HTTP to this port gets a plain `400 Bad Request` saying so.
pub async fn serve_https<S>(
    listener: TcpListener,
    tls: Arc<rustls::ServerConfig>,
    app: S,
    limits: Limits,
    shutdown: impl Future<Output = ()>,
) where
    S: tower::Service<hyper::Request<hyper::body::Incoming>, Response = Response, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
{
    let acceptor = TlsAcceptor::from(tls);
    // Cancelled to ask every connection to close gracefully. Each connection waits on a child
    // token of its own: its task polls that wait on every wake-up, and a token shared by all
    // connections would put one lock shared by every worker thread on each of them.
    let closing = CancellationToken::new();
    // Every connection task holds a receiver, never read: the channel closes once all of them
    // have ended.
    let (alive_tx, alive_rx) = tokio::sync::watch::channel(());
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
        let (acceptor, app, builder, close, alive) =
            (acceptor.clone(), app.clone(), builder.clone(), closing.child_token(), alive_rx.clone());
        let limits = limits.clone();
        tokio::spawn(async move {
            let (_permit, _alive) = (permit, alive);
            // One deadline for the whole way to a TLS session: a client that sends nothing,
            // or dribbles its ClientHello, is cut at `handshake_timeout`.
            let handshake = async {
                let tcp = refuse_plain_http(tcp).await?;
                acceptor.accept(tcp).await.map_err(|e| tracing::debug!(%peer, error = %e, "TLS handshake failed")).ok()
            };
            let tls = match tokio::time::timeout(limits.handshake_timeout, handshake).await {
                Ok(Some(s)) => s,
                Ok(None) => return,
                Err(_) => return tracing::debug!(%peer, "TLS handshake timed out"),
            };
            let activity = Arc::new(Activity::new());
            let service = hyper::service::service_fn({
                let activity = activity.clone();
                move |req: hyper::Request<hyper::body::Incoming>| {
                    let busy = activity.begin();
                    let call = app.clone().oneshot(req);
                    async move {
                        let response = call.await;
                        drop(busy);
                        response
                    }
                }
            });
            let conn = builder.serve_connection(TokioIo::new(tls), service);
            tokio::pin!(conn);
            let ended = tokio::select! {
                // The connection first: this select runs on every wake-up of the connection.
                biased;
                r = conn.as_mut() => Some(r),
                () = close.cancelled() => None,
                _ = activity.idle_for(limits.idle_timeout) => {
                    tracing::debug!(%peer, "closing idle connection");
                    None
                }
            };
            let result = match ended {
                Some(r) => r,
                None => {
                    conn.as_mut().graceful_shutdown();
                    match tokio::time::timeout(limits.shutdown_grace, conn).await {
                        Ok(r) => r,
                        Err(_) => return tracing::debug!(%peer, "connection did not close within --shutdown-grace"),
                    }
                }
            };
            if let Err(e) = result {
                tracing::debug!(%peer, error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    drop(alive_rx);
    closing.cancel();
    if tokio::time::timeout(limits.shutdown_grace, alive_tx.closed()).await.is_err() {
        tracing::warn!("in-flight connections did not finish within --shutdown-grace");
    }
}

/// Requests in flight on one connection, and when the last one ended.
struct Activity {
    in_flight: AtomicUsize,
    last: std::sync::Mutex<Instant>,
}

/// Marks a request in flight until dropped.
struct Busy(Arc<Activity>);

impl Drop for Busy {
    fn drop(&mut self) {
        if let Ok(mut last) = self.0.last.lock() {
            *last = Instant::now();
        }
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Activity {
    fn new() -> Self {
        Activity { in_flight: AtomicUsize::new(0), last: std::sync::Mutex::new(Instant::now()) }
    }

    fn begin(self: &Arc<Self>) -> Busy {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        Busy(self.clone())
    }

    /// Completes once the connection has had no request in flight for `timeout`.
    async fn idle_for(&self, timeout: Duration) {
        loop {
            if self.in_flight.load(Ordering::Acquire) > 0 {
                // Busy: the earliest it can have been idle long enough is `timeout` from now.
                tokio::time::sleep(timeout).await;
                continue;
            }
            let last = self.last.lock().map(|l| *l).unwrap_or_else(|_| Instant::now());
            if Instant::now() >= last + timeout {
                return;
            }
            tokio::time::sleep_until(last + timeout).await;
        }
    }
}

/// Answers a plain-HTTP request on the TLS port the way Go's servers do, then closes it.
/// Returns the stream back when it looks like TLS.
async fn refuse_plain_http(mut tcp: TcpStream) -> Option<TcpStream> {
    let mut first = [0u8; 1];
    // A TLS ClientHello starts with record type 0x16; HTTP starts with an ASCII method. The
    // caller's handshake deadline bounds the wait.
    if !matches!(tcp.peek(&mut first).await, Ok(1)) || !first[0].is_ascii_uppercase() {
        return Some(tcp);
    }
    let msg = b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nClient sent an HTTP request to an HTTPS server.\n";
    let _ = tcp.write_all(msg).await;
    let _ = tcp.shutdown().await;
    None
}
