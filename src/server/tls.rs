//! TLS for the webhook (SPEC 5): rustls with TLS 1.2 and 1.3 only, ALPN `h2` and
//! `http/1.1`, a serving certificate read from files and swapped in place when they change,
//! and optional client-certificate verification.
//!
//! Reload works with the kubelet's Secret volumes, which write a new timestamped directory
//! and atomically swap the `..data` symlink: watching the file paths alone misses that, so the
//! directory is watched (notify) and the content hash is also polled.
//!
//! The leaf certificate's `notAfter` is exported as a gauge so that an expiring
//! certificate, or one that renewed on disk but never got reloaded, raises an alert.

use prometheus_client::metrics::gauge::Gauge;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// Errors loading certificates or building the TLS configuration.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A file holds no usable PEM of the expected kind.
    #[error("{path}: {what}")]
    Pem {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        what: String,
    },
    /// The leaf certificate is not a readable X.509 certificate.
    #[error("{path}: the first certificate is not valid X.509: {what}")]
    X509 {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        what: String,
    },
    /// rustls refused the material or the configuration.
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    /// The client CA bundle could not be turned into a verifier.
    #[error("client CA: {0}")]
    Verifier(#[from] rustls::server::VerifierBuilderError),
}

/// Where the serving certificate and key live (PEM files).
#[derive(Clone, Debug)]
pub struct CertPaths {
    /// Certificate chain, leaf first (e.g. `/tls/tls.crt`).
    pub cert: PathBuf,
    /// Private key, PKCS#8, PKCS#1 or SEC1 (e.g. `/tls/tls.key`).
    pub key: PathBuf,
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read { path: path.to_owned(), source })
}

/// The current serving certificate, replaced atomically on reload; handshakes in flight keep
/// the one they started with.
#[derive(Debug)]
pub struct CertStore {
    paths: CertPaths,
    current: RwLock<(Arc<CertifiedKey>, [u8; 32])>,
    /// `notAfter` of the leaf in use, seconds since the Unix epoch.
    expiration: Gauge,
}

impl CertStore {
    /// Loads the certificate and key.
    ///
    /// # Errors
    /// [`TlsError`] when a file is unreadable, holds no certificate or key, the leaf is not
    /// X.509, or the key does not fit rustls.
    pub fn load(paths: CertPaths) -> Result<Arc<Self>, TlsError> {
        Self::load_reporting(paths, Gauge::default())
    }

    /// Loads the certificate and key like [`CertStore::load`], and keeps `expiration` set to
    /// the leaf's `notAfter` in seconds since the Unix epoch, now and after every reload
    /// (`node_maintenance_serving_certificate_expiration_timestamp_seconds`).
    ///
    /// # Errors
    /// As [`CertStore::load`].
    pub fn load_reporting(paths: CertPaths, expiration: Gauge) -> Result<Arc<Self>, TlsError> {
        let loaded = load_pair(&paths)?;
        expiration.set(loaded.not_after);
        Ok(Arc::new(CertStore { paths, current: RwLock::new((loaded.key, loaded.hash)), expiration }))
    }

    /// Re-reads the files; swaps the certificate in when their content changed and parses.
    /// Returns `Ok(true)` when a new certificate was installed.
    ///
    /// # Errors
    /// [`TlsError`] when the new content does not load (the old certificate stays in use).
    pub fn reload(&self) -> Result<bool, TlsError> {
        let hash = content_hash(&self.paths)?;
        if self.current.read().map(|c| c.1 == hash).unwrap_or(false) {
            return Ok(false);
        }
        let loaded = load_pair(&self.paths)?;
        if let Ok(mut cur) = self.current.write() {
            *cur = (loaded.key, loaded.hash);
        }
        self.expiration.set(loaded.not_after);
        Ok(true)
    }

    /// The certificate chain now served (leaf first), DER.
    pub fn current_chain(&self) -> Vec<CertificateDer<'static>> {
        self.current.read().map(|c| c.0.cert.clone()).unwrap_or_default()
    }

    /// Watches the files and reloads on change: a directory watch for prompt pickup plus a
    /// content-hash poll every `poll` (the `..data` symlink swap fallback). Runs until the
    /// task is dropped.
    pub async fn watch(self: Arc<Self>, poll: Duration) {
        use notify::Watcher;
        let (tx, mut rx) = tokio::sync::mpsc::channel::<()>(1);
        let watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            if res.as_ref().is_ok_and(|e| changes_content(&e.kind)) || res.is_err() {
                let _ = tx.try_send(());
            }
        });
        // Keep the watcher alive for the life of this task; without it only polling works.
        let _watcher = watcher.ok().map(|mut w| {
            let mut dirs: Vec<&Path> =
                [&self.paths.cert, &self.paths.key].iter().filter_map(|p| p.parent()).collect();
            dirs.dedup();
            for dir in dirs {
                let dir = if dir.as_os_str().is_empty() { Path::new(".") } else { dir };
                if let Err(e) = w.watch(dir, notify::RecursiveMode::NonRecursive) {
                    tracing::warn!(dir = %dir.display(), error = %e, "cannot watch certificate directory; polling only");
                }
            }
            w
        });
        let mut tick = tokio::time::interval(poll);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                Some(()) = rx.recv() => {
                    // Let a multi-file update (cert, then key) settle before reading.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
            match self.reload() {
                Ok(true) => tracing::info!(cert = %self.paths.cert.display(), "serving certificate reloaded"),
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "certificate reload failed; keeping the current certificate"),
            }
        }
    }
}

/// Whether a file event in the certificate directory may change what is served: anything but
/// an access. Reading the files (every reload does) raises open, read and close events on
/// Linux; reloading on those read the files again about ten times a second, for ever.
fn changes_content(kind: &notify::EventKind) -> bool {
    !matches!(kind, notify::EventKind::Access(_))
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current.read().ok().map(|c| c.0.clone())
    }
}

fn content_hash(paths: &CertPaths) -> Result<[u8; 32], TlsError> {
    let mut h = Sha256::new();
    h.update(read(&paths.cert)?);
    h.update(read(&paths.key)?);
    Ok(h.finalize().into())
}

/// A certificate and key read from their files.
struct Loaded {
    key: Arc<CertifiedKey>,
    /// SHA-256 of both files' content.
    hash: [u8; 32],
    /// The leaf's `notAfter`, seconds since the Unix epoch.
    not_after: i64,
}

fn load_pair(paths: &CertPaths) -> Result<Loaded, TlsError> {
    let cert_pem = read(&paths.cert)?;
    let key_pem = read(&paths.key)?;
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::Pem { path: paths.cert.clone(), what: format!("invalid PEM: {e}") })?;
    if chain.is_empty() {
        return Err(TlsError::Pem { path: paths.cert.clone(), what: "no CERTIFICATE block".into() });
    }
    let not_after = x509_parser::parse_x509_certificate(&chain[0])
        .map_err(|e| TlsError::X509 { path: paths.cert.clone(), what: e.to_string() })?
        .1
        .validity()
        .not_after
        .timestamp();
    let key = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| TlsError::Pem { path: paths.key.clone(), what: format!("no usable private key: {e}") })?;
    let certified = CertifiedKey::from_der(chain, key, &provider())?;
    let mut h = Sha256::new();
    h.update(&cert_pem);
    h.update(&key_pem);
    Ok(Loaded { key: Arc::new(certified), hash: h.finalize().into(), not_after })
}

/// Builds the rustls server configuration: TLS 1.2+, ALPN `h2` then `http/1.1`, the
/// certificate from `store`, and client-certificate verification against `client_ca`
/// (PEM bundle) when given.
///
/// # Errors
/// [`TlsError`] when the client CA bundle is unreadable or empty.
pub fn server_config(store: Arc<CertStore>, client_ca: Option<&Path>) -> Result<ServerConfig, TlsError> {
    let builder = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(path) => {
            let pem = read(path)?;
            let mut roots = RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(&pem) {
                let cert =
                    cert.map_err(|e| TlsError::Pem { path: path.to_owned(), what: format!("invalid PEM: {e}") })?;
                roots.add(cert)?;
            }
            if roots.is_empty() {
                return Err(TlsError::Pem { path: path.to_owned(), what: "no CERTIFICATE block".into() });
            }
            builder.with_client_cert_verifier(
                WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider()).build()?,
            )
        }
    };
    let mut config = builder.with_cert_resolver(store);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes a self-signed certificate valid until `year`-01-02 and its key into `dir`.
    fn write_cert(dir: &Path, year: i32) -> CertPaths {
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params.not_after = rcgen::date_time_ymd(year, 1, 2);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let paths = CertPaths { cert: dir.join("tls.crt"), key: dir.join("tls.key") };
        std::fs::write(&paths.cert, cert.pem()).unwrap();
        std::fs::write(&paths.key, key.serialize_pem()).unwrap();
        paths
    }

    /// The events a reload's own reads raise (inotify's open, close-after-read) start no
    /// reload; creating, writing, renaming or removing a file does (a writer's close comes
    /// after its writes' modify events).
    #[test]
    fn only_events_that_change_files_start_a_reload() {
        use notify::EventKind;
        use notify::event::{AccessKind, AccessMode, CreateKind, DataChange, ModifyKind, RemoveKind, RenameMode};
        let reads = [
            EventKind::Access(AccessKind::Open(AccessMode::Any)),
            EventKind::Access(AccessKind::Close(AccessMode::Read)),
            EventKind::Access(AccessKind::Read),
        ];
        assert!(reads.iter().all(|k| !changes_content(k)), "{reads:?}");
        let changes = [
            EventKind::Create(CreateKind::File),
            EventKind::Modify(ModifyKind::Data(DataChange::Content)),
            EventKind::Modify(ModifyKind::Name(RenameMode::To)),
            EventKind::Remove(RemoveKind::File),
            EventKind::Any,
        ];
        assert!(changes.iter().all(changes_content), "{changes:?}");
    }

    #[test]
    fn the_expiration_gauge_follows_the_certificate_in_use_across_reloads() {
        let dir = tempfile::tempdir().unwrap();
        let gauge = Gauge::default();
        let store = CertStore::load_reporting(write_cert(dir.path(), 2031), gauge.clone()).unwrap();
        assert_eq!(gauge.get(), 1_925_078_400, "2031-01-02T00:00:00Z");
        assert!(!store.reload().unwrap(), "same files: nothing to do");
        write_cert(dir.path(), 2032);
        assert!(store.reload().unwrap());
        assert_eq!(gauge.get(), 1_956_614_400, "2032-01-02T00:00:00Z");
        std::fs::write(dir.path().join("tls.crt"), "not a certificate").unwrap();
        assert!(store.reload().is_err());
        assert_eq!(gauge.get(), 1_956_614_400, "a failed reload keeps the certificate in use, and its expiry");
    }
}
