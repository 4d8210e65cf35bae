//! TLS material for tests: throw-away CAs and leaves (rcgen), a kubelet-style Secret volume
//! whose `..data` symlink is swapped atomically, and a handshake that reports which
//! certificate a server presents.

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use std::path::Path;
use std::sync::Arc;

/// A CA: its certificate (PEM) and what signs leaves.
pub struct Ca {
    pub pem: String,
    pub issuer: Issuer<'static, KeyPair>,
}

/// A new self-signed CA named `name`.
pub fn ca(name: &str) -> Ca {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(rcgen::DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let cert = params.self_signed(&key).unwrap();
    Ca { pem: cert.pem(), issuer: Issuer::new(params, key) }
}

/// A leaf for localhost signed by `ca`: (cert PEM, key PEM).
pub fn leaf(ca: &Ca, cn: &str) -> (String, String) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    params.distinguished_name.push(rcgen::DnType::CommonName, cn);
    (params.signed_by(&key, &ca.issuer).unwrap().pem(), key.serialize_pem())
}

/// Writes a kubelet-style Secret volume: `..<ts>/tls.{crt,key}`, `..data -> ..<ts>`,
/// `tls.crt -> ..data/tls.crt`; a later call swaps `..data` atomically and then removes the
/// previous directory, as the kubelet does.
pub fn write_secret_volume(dir: &Path, generation: u32, cert: &str, key: &str) {
    let ts = dir.join(format!("..2026_11_22_00_00_{generation:06}"));
    std::fs::create_dir_all(&ts).unwrap();
    std::fs::write(ts.join("tls.crt"), cert).unwrap();
    std::fs::write(ts.join("tls.key"), key).unwrap();
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(ts.file_name().unwrap(), &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
    for f in ["tls.crt", "tls.key"] {
        let link = dir.join(f);
        if std::fs::symlink_metadata(&link).is_err() {
            std::os::unix::fs::symlink(Path::new("..data").join(f), &link).unwrap();
        }
    }
    if generation > 1 {
        let _ = std::fs::remove_dir_all(dir.join(format!("..2026_11_22_00_00_{:06}", generation - 1)));
    }
}

/// The DER of the leaf certificate `addr` presents for `localhost`, verified against
/// `ca_pem`.
pub async fn served_leaf(addr: std::net::SocketAddr, ca_pem: &str) -> CertificateDer<'static> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let tls = connector.connect(ServerName::try_from("localhost").unwrap(), tcp).await.unwrap();
    tls.get_ref().1.peer_certificates().unwrap()[0].clone().into_owned()
}

/// Which of the common names "first"/"second" the served leaf has ("unknown" otherwise).
pub async fn served_cn(addr: std::net::SocketAddr, ca_pem: &str) -> String {
    let leaf = served_leaf(addr, ca_pem).await;
    let text = String::from_utf8_lossy(leaf.as_ref()).to_string();
    ["first", "second"].into_iter().find(|cn| text.contains(cn)).unwrap_or("unknown").to_string()
}
