//! The test control plane's PKI (rcgen): one CA that signs the apiserver's serving
//! certificate and the users' client certificates (CN = user, O = group, as the apiserver's
//! x509 authenticator reads them), the ServiceAccount token signing key, and kubeconfigs.

use base64::Engine;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    SanType,
};
use std::path::{Path, PathBuf};

/// The CA and the files the apiserver reads.
pub struct Pki {
    pub ca_pem: String,
    issuer: Issuer<'static, KeyPair>,
    pub dir: PathBuf,
}

/// Paths of the apiserver's certificate files inside [`Pki::dir`].
pub struct ServingFiles {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
    pub sa_key: PathBuf,
    pub sa_pub: PathBuf,
}

fn write(path: &Path, data: &str) {
    std::fs::write(path, data).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

impl Pki {
    /// A new CA whose files go into `dir`.
    pub fn new(dir: &Path) -> Pki {
        let key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.distinguished_name.push(DnType::CommonName, "envtest CA");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages =
            vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let cert = params.self_signed(&key).expect("CA self-signed");
        Pki { ca_pem: cert.pem(), issuer: Issuer::new(params, key), dir: dir.to_owned() }
    }

    /// Writes the CA, the apiserver's serving certificate (127.0.0.1, localhost,
    /// kubernetes.default.svc, the service IP 10.0.0.1) and the ServiceAccount key pair.
    pub fn serving_files(&self) -> ServingFiles {
        let mut params = CertificateParams::new(vec![
            "localhost".to_string(),
            "kubernetes".into(),
            "kubernetes.default".into(),
            "kubernetes.default.svc".into(),
        ])
        .expect("serving params");
        params.subject_alt_names.push(SanType::IpAddress([127, 0, 0, 1].into()));
        params.subject_alt_names.push(SanType::IpAddress([10, 0, 0, 1].into()));
        params.distinguished_name.push(DnType::CommonName, "kube-apiserver");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate().expect("serving key");
        let cert = params.signed_by(&key, &self.issuer).expect("serving certificate");
        let sa = KeyPair::generate().expect("ServiceAccount key");
        let files = ServingFiles {
            ca: self.dir.join("ca.crt"),
            cert: self.dir.join("apiserver.crt"),
            key: self.dir.join("apiserver.key"),
            sa_key: self.dir.join("sa.key"),
            sa_pub: self.dir.join("sa.pub"),
        };
        write(&files.ca, &self.ca_pem);
        write(&files.cert, &cert.pem());
        write(&files.key, &key.serialize_pem());
        write(&files.sa_key, &sa.serialize_pem());
        write(&files.sa_pub, &sa.public_key_pem());
        files
    }

    /// Writes `<name>.crt` and `<name>.key`: a serving certificate for 127.0.0.1 and
    /// localhost signed by the CA (e.g. for a webhook the apiserver calls by URL with
    /// `caBundle` = [`Pki::ca_pem`]); returns (certificate, key) paths.
    pub fn serving_pair(&self, name: &str) -> (PathBuf, PathBuf) {
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).expect("serving params");
        params.subject_alt_names.push(SanType::IpAddress([127, 0, 0, 1].into()));
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let key = KeyPair::generate().expect("serving key");
        let cert = params.signed_by(&key, &self.issuer).expect("serving certificate");
        let (cert_path, key_path) = (self.dir.join(format!("{name}.crt")), self.dir.join(format!("{name}.key")));
        write(&cert_path, &cert.pem());
        write(&key_path, &key.serialize_pem());
        (cert_path, key_path)
    }

    /// A client certificate and key (PEM) for `user` in `group`.
    pub fn client(&self, user: &str, group: Option<&str>) -> (String, String) {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("client params");
        params.distinguished_name.push(DnType::CommonName, user);
        if let Some(g) = group {
            params.distinguished_name.push(DnType::OrganizationName, g);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate().expect("client key");
        let cert = params.signed_by(&key, &self.issuer).expect("client certificate");
        (cert.pem(), key.serialize_pem())
    }

    /// Writes `<name>.kubeconfig` for `server` authenticating with a client certificate for
    /// `user` in `group`; returns its path.
    pub fn kubeconfig(&self, name: &str, server: &str, user: &str, group: Option<&str>) -> PathBuf {
        let (cert, key) = self.client(user, group);
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let auth = format!("client-certificate-data: {}\n    client-key-data: {}", b64(&cert), b64(&key));
        self.write_kubeconfig(name, server, &auth)
    }

    /// Writes `<name>.kubeconfig` for `server` authenticating with a bearer `token`.
    pub fn token_kubeconfig(&self, name: &str, server: &str, token: &str) -> PathBuf {
        self.write_kubeconfig(name, server, &format!("token: {token}"))
    }

    fn write_kubeconfig(&self, name: &str, server: &str, auth: &str) -> PathBuf {
        let ca = base64::engine::general_purpose::STANDARD.encode(&self.ca_pem);
        let path = self.dir.join(format!("{name}.kubeconfig"));
        write(
            &path,
            &format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: envtest\n  cluster:\n    server: {server}\n    \
                 certificate-authority-data: {ca}\nusers:\n- name: {name}\n  user:\n    {auth}\ncontexts:\n- name: {name}\n  \
                 context:\n    cluster: envtest\n    user: {name}\n    namespace: default\ncurrent-context: {name}\n"
            ),
        );
        path
    }
}
