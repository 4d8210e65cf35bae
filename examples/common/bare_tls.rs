//! The transport shared by the load harness's reference servers (`examples/baseline_server.rs`,
//! `examples/kube_floor_server.rs`; `hack/load.sh`): axum on tokio-rustls with the webhook's
//! TLS settings (ring provider, TLS 1.3 and 1.2, ALPN `h2` then `http/1.1`), HTTP/1.1 and
//! HTTP/2 via hyper-util's auto builder on a multi-threaded tokio runtime, and none of the
//! webhook's limits (no connection cap, timeouts, load shedding, tracing or metrics).

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::sync::Arc;
use tokio_rustls::TlsAcceptor;

/// Serves `app` over HTTPS until killed, on the address, certificate chain (PEM) and key (PEM)
/// given as the process's three arguments; `name` is the program's name in the usage line and
/// the start-up message. Exits with status 2 on wrong arguments.
///
/// # Errors
/// Unreadable certificate or key, a TLS configuration rustls refuses, a failed bind or accept.
pub fn serve_from_args(name: &str, app: Router) -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, addr, cert, key] = args.as_slice() else {
        eprintln!("usage: {name} ADDR CERT_PEM KEY_PEM");
        std::process::exit(2);
    };
    let certs = CertificateDer::pem_file_iter(cert)?.collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_file(key)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?
        .with_no_client_auth()
        .with_single_cert(certs, key)?;
    tls.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = TlsAcceptor::from(Arc::new(tls));
    let addr = addr.clone();
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(async move {
        let listener = tokio::net::TcpListener::bind(&addr).await?;
        eprintln!("{name} listening on {}", listener.local_addr()?);
        let builder = auto::Builder::new(TokioExecutor::new());
        loop {
            let (tcp, _) = listener.accept().await?;
            let _ = tcp.set_nodelay(true);
            let (acceptor, app, builder) = (acceptor.clone(), app.clone(), builder.clone());
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else { return };
                let _ = builder.serve_connection(TokioIo::new(tls), TowerToHyperService::new(app)).await;
            });
        }
    })
}
