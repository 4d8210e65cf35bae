//! TLS behaviour (SPEC 5): ALPN h2 and http/1.1, TLS 1.2+ only, certificate reload through a
//! Secret-volume style `..data` symlink swap without dropping connections, optional client
//! certificate verification.

mod support;

use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, ServerName};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use support::webhook::{client_trusting, start};

struct Ca {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

fn ca(name: &str) -> Ca {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(rcgen::DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let cert = params.self_signed(&key).unwrap();
    Ca { pem: cert.pem(), issuer: Issuer::new(params, key) }
}

/// A leaf for localhost signed by `ca`: (cert PEM, key PEM).
fn leaf(ca: &Ca, cn: &str) -> (String, String) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    params.distinguished_name.push(rcgen::DnType::CommonName, cn);
    (params.signed_by(&key, &ca.issuer).unwrap().pem(), key.serialize_pem())
}

/// Writes a kubelet-style Secret volume: `..<ts>/tls.{crt,key}`, `..data -> ..<ts>`,
/// `tls.crt -> ..data/tls.crt`; a later call swaps `..data` atomically.
fn write_secret_volume(dir: &Path, generation: u32, cert: &str, key: &str) {
    let ts = dir.join(format!("..2026_11_22_00_00_0{generation}"));
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
}

/// Handshakes with the server and returns the common name of the leaf it presents.
async fn served_cn(addr: std::net::SocketAddr, ca_pem: &str) -> String {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let tls = connector.connect(ServerName::try_from("localhost").unwrap(), tcp).await.unwrap();
    let leaf = tls.get_ref().1.peer_certificates().unwrap()[0].clone();
    let text = String::from_utf8_lossy(leaf.as_ref()).to_string();
    ["first", "second"].into_iter().find(|cn| text.contains(cn)).unwrap_or("unknown").to_string()
}

use rustls::pki_types::pem::PemObject;

#[tokio::test]
async fn certificate_reload_survives_the_secret_volume_symlink_swap() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let authority = ca("test CA");
    let vol = tempfile::tempdir().unwrap();
    let (c1, k1) = leaf(&authority, "first");
    write_secret_volume(vol.path(), 1, &c1, &k1);
    let cert = vol.path().join("tls.crt").display().to_string();
    let key = vol.path().join("tls.key").display().to_string();
    let server = start(&["--tls-cert-file", &cert, "--tls-key-file", &key, "--cert-poll-interval", "200ms"]).await;
    assert_eq!(served_cn(server.bound.addr, &authority.pem).await, "first");

    // A keep-alive connection opened before the swap keeps working after it.
    let client = client_trusting(authority.pem.as_bytes());
    assert_eq!(client.get(server.url("/healthz")).send().await.unwrap().status(), 200);

    let (c2, k2) = leaf(&authority, "second");
    write_secret_volume(vol.path(), 2, &c2, &k2);
    let mut seen = String::new();
    for _ in 0..50 {
        seen = served_cn(server.bound.addr, &authority.pem).await;
        if seen == "second" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(seen, "second", "new connections see the new certificate within the poll interval");
    assert_eq!(client.get(server.url("/healthz")).send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn a_broken_new_certificate_keeps_the_old_one() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let authority = ca("test CA");
    let vol = tempfile::tempdir().unwrap();
    let (c1, k1) = leaf(&authority, "first");
    write_secret_volume(vol.path(), 1, &c1, &k1);
    let cert = vol.path().join("tls.crt").display().to_string();
    let key = vol.path().join("tls.key").display().to_string();
    let server = start(&["--tls-cert-file", &cert, "--tls-key-file", &key, "--cert-poll-interval", "100ms"]).await;
    write_secret_volume(vol.path(), 2, "garbage", "garbage");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(served_cn(server.bound.addr, &authority.pem).await, "first");
}

#[tokio::test]
async fn alpn_offers_h2_and_http11() {
    let server = start(&[]).await;
    let h2 = server.client().get(server.url("/healthz")).send().await.unwrap();
    assert_eq!(h2.version(), reqwest::Version::HTTP_2);
    let h1 = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&server.ca_pem()).unwrap())
        .http1_only()
        .build()
        .unwrap()
        .get(server.url("/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(h1.version(), reqwest::Version::HTTP_11);
}

#[tokio::test]
async fn tls_1_1_and_older_are_refused_and_1_2_works() {
    let server = start(&[]).await;
    let ca = reqwest::Certificate::from_pem(&server.ca_pem()).unwrap();
    let tls12 = reqwest::Client::builder()
        .add_root_certificate(ca.clone())
        .max_tls_version(reqwest::tls::Version::TLS_1_2)
        .build()
        .unwrap();
    assert_eq!(tls12.get(server.url("/healthz")).send().await.unwrap().status(), 200);
    // A TLS 1.0 ClientHello record gets a protocol_version alert, not a session.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut tcp = tokio::net::TcpStream::connect(server.bound.addr).await.unwrap();
    let hello: [u8; 52] = [
        0x16, 0x03, 0x01, 0x00, 0x2f, 0x01, 0x00, 0x00, 0x2b, 0x03, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x00, 0x00, 0x02, 0x00, 0x2f, 0x01, 0x00, 0x00, 0x00,
    ];
    tcp.write_all(&hello).await.unwrap();
    let mut buf = [0u8; 7];
    let n = tcp.read(&mut buf).await.unwrap_or(0);
    assert!(n == 0 || buf[0] == 0x15, "expected an alert or a close, got {:?}", &buf[..n]);
}

#[tokio::test]
async fn client_certificates_are_required_when_a_client_ca_is_given() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let clients = ca("apiserver client CA");
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("client-ca.crt");
    std::fs::write(&ca_file, &clients.pem).unwrap();
    let server = start(&["--client-ca", ca_file.to_str().unwrap()]).await;
    assert!(server.client().get(server.url("/healthz")).send().await.is_err(), "no client certificate: refused");
    let (cert, key) = leaf(&clients, "kube-apiserver");
    let identity = reqwest::Identity::from_pem(format!("{cert}{key}").as_bytes()).unwrap();
    let with_cert = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&server.ca_pem()).unwrap())
        .identity(identity)
        .build()
        .unwrap();
    assert_eq!(with_cert.get(server.url("/healthz")).send().await.unwrap().status(), 200);
}
