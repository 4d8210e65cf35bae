//! Development certificates for standalone mode (SPEC 5): a throw-away CA and a serving
//! certificate signed by it, generated with rcgen.

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
use std::path::{Path, PathBuf};

/// Errors creating development certificates.
#[derive(Debug, thiserror::Error)]
pub enum DevCertError {
    /// rcgen failed.
    #[error("generating certificate: {0}")]
    Generate(#[from] rcgen::Error),
    /// Writing a file failed.
    #[error("writing {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

/// The files written by [`ensure_dev_certs`].
#[derive(Clone, Debug)]
pub struct DevCerts {
    /// CA certificate to trust (`ca.crt`), e.g. `curl --cacert`.
    pub ca: PathBuf,
    /// Serving certificate (`tls.crt`).
    pub cert: PathBuf,
    /// Serving key (`tls.key`, PKCS#8, mode 0600).
    pub key: PathBuf,
}

/// Names the development serving certificate is valid for.
pub const DEV_NAMES: &[&str] = &["localhost", "127.0.0.1", "::1", "node-maintenance.node-maintenance.svc"];

/// Writes `ca.crt`, `tls.crt` and `tls.key` into `dir` unless all three exist already
/// (then reuses them). The serving certificate covers [`DEV_NAMES`] plus `extra_names`.
///
/// # Errors
/// [`DevCertError`] when generation or writing fails.
pub fn ensure_dev_certs(dir: &Path, extra_names: &[String]) -> Result<DevCerts, DevCertError> {
    let files = DevCerts { ca: dir.join("ca.crt"), cert: dir.join("tls.crt"), key: dir.join("tls.key") };
    if files.ca.exists() && files.cert.exists() && files.key.exists() {
        return Ok(files);
    }
    let write = |path: &Path, data: &str| -> Result<(), DevCertError> {
        std::fs::create_dir_all(dir)
            .and_then(|_| std::fs::write(path, data))
            .map_err(|source| DevCertError::Write { path: path.to_owned(), source })
    };
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.distinguished_name.push(DnType::CommonName, "node-maintenance development CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca = ca_params.self_signed(&ca_key)?;
    let issuer = rcgen::Issuer::new(ca_params, ca_key);

    let names: Vec<String> = DEV_NAMES.iter().map(|s| s.to_string()).chain(extra_names.iter().cloned()).collect();
    let key = KeyPair::generate()?;
    let mut params = CertificateParams::new(names)?;
    params.distinguished_name.push(DnType::CommonName, "node-maintenance");
    let cert = params.signed_by(&key, &issuer)?;

    write(&files.ca, &ca.pem())?;
    write(&files.cert, &cert.pem())?;
    write(&files.key, &key.serialize_pem())?;
    restrict(&files.key);
    Ok(files)
}

#[cfg(unix)]
fn restrict(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600));
}

#[cfg(not(unix))]
fn restrict(_path: &Path) {}
