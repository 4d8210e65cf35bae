//! TLS behaviour (SPEC 5): ALPN h2 and http/1.1, TLS 1.2+ only, certificate reload through a
//! Secret-volume style `..data` symlink swap without dropping connections, optional client
//! certificate verification.

mod support;

use std::time::Duration;
use support::tls::{ca, leaf, served_cn, write_secret_volume};
use support::webhook::{Server, client_trusting, start};

/// A standalone server whose certificate (CN "first", signed by the returned CA) is read
/// from a Secret-volume style directory, polled every `poll`.
async fn start_on_volume(poll: &str) -> (support::tls::Ca, tempfile::TempDir, Server) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let authority = ca("test CA");
    let vol = tempfile::tempdir().unwrap();
    let (c1, k1) = leaf(&authority, "first");
    write_secret_volume(vol.path(), 1, &c1, &k1);
    let cert = vol.path().join("tls.crt").display().to_string();
    let key = vol.path().join("tls.key").display().to_string();
    let server = start(&["--tls-cert-file", &cert, "--tls-key-file", &key, "--cert-poll-interval", poll]).await;
    (authority, vol, server)
}

#[tokio::test]
async fn certificate_reload_survives_the_secret_volume_symlink_swap() {
    let (authority, vol, server) = start_on_volume("200ms").await;
    assert_eq!(served_cn(server.bound.addr, &authority.pem).await, "first");

    // A keep-alive connection opened before the swap keeps working after it.
    let client = client_trusting(authority.pem.as_bytes());
    assert_eq!(client.get(server.url("/healthz")).send().await.unwrap().status(), 200);

    let (c2, k2) = leaf(&authority, "second");
    write_secret_volume(vol.path(), 2, &c2, &k2);
    let seen = cn_within(&server, &authority, "second", Duration::from_secs(5)).await;
    assert_eq!(seen, "second", "new connections see the new certificate within the poll interval");
    assert_eq!(client.get(server.url("/healthz")).send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn a_broken_new_certificate_keeps_the_old_one() {
    let (authority, vol, server) = start_on_volume("100ms").await;
    write_secret_volume(vol.path(), 2, "garbage", "garbage");
    // Several poll intervals: every new connection still gets the old certificate.
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(served_cn(server.bound.addr, &authority.pem).await, "first");
    }
    // The reloads went on meanwhile (a server that never reloads would pass the above): a
    // good certificate written after the broken one is picked up.
    let (c3, k3) = leaf(&authority, "second");
    write_secret_volume(vol.path(), 3, &c3, &k3);
    assert_eq!(cn_within(&server, &authority, "second", Duration::from_secs(5)).await, "second");
}

/// The CN new connections get, polled every 100 ms until it is `want` or `limit` passed.
async fn cn_within(server: &Server, authority: &support::tls::Ca, want: &str, limit: Duration) -> String {
    let started = std::time::Instant::now();
    loop {
        let seen = served_cn(server.bound.addr, &authority.pem).await;
        if seen == want || started.elapsed() > limit {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
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
