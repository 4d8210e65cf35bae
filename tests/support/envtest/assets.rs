//! Where the control-plane binaries come from, envtest's convention: the directory named by
//! `KUBEBUILDER_ASSETS` (`kube-apiserver`, `etcd`, `kubectl`, ...), else the Kubernetes bundle
//! in `../shared/envtest/` unpacked once, its SHA256 checked, into `target/envtest/`, with etcd
//! from `PATH` (Debian's `etcd-server`). Nothing is ever downloaded.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The Kubernetes version of the bundle.
pub const VERSION: &str = "v1.36.2";

/// Paths of the binaries a test control plane runs.
#[derive(Clone, Debug)]
pub struct Assets {
    pub etcd: PathBuf,
    pub kube_apiserver: PathBuf,
    pub kube_controller_manager: PathBuf,
    pub kube_scheduler: PathBuf,
    pub kubectl: PathBuf,
    /// `fake_kubelet.py`.
    pub fake_kubelet: PathBuf,
}

impl Assets {
    /// The directory holding kubectl, to put first on a child's `PATH`.
    pub fn bin_dir(&self) -> &Path {
        self.kubectl.parent().expect("kubectl has a directory")
    }
}

/// `../shared` beside the repository.
pub fn shared_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared")
}

/// The assets, found or unpacked once per process; `Err` says why the tier cannot run.
pub fn assets() -> Result<&'static Assets, String> {
    static ASSETS: OnceLock<Result<Assets, String>> = OnceLock::new();
    ASSETS.get_or_init(locate).as_ref().map_err(Clone::clone)
}

fn locate() -> Result<Assets, String> {
    let bin = match std::env::var_os("KUBEBUILDER_ASSETS") {
        Some(dir) => PathBuf::from(dir),
        None => unpack_bundle()?,
    };
    let etcd = [bin.join("etcd"), PathBuf::from("/usr/bin/etcd"), PathBuf::from("/usr/local/bin/etcd")]
        .into_iter()
        .find(|p| p.is_file())
        .ok_or("no etcd in KUBEBUILDER_ASSETS or /usr/bin (apt-get install etcd-server)")?;
    let need = |name: &str| {
        let p = bin.join(name);
        if p.is_file() { Ok(p) } else { Err(format!("{} is missing", p.display())) }
    };
    let fake_kubelet = shared_dir().join("tools/fake_kubelet.py");
    if !fake_kubelet.is_file() {
        return Err(format!("{} is missing", fake_kubelet.display()));
    }
    Ok(Assets {
        etcd,
        kube_apiserver: need("kube-apiserver")?,
        kube_controller_manager: need("kube-controller-manager")?,
        kube_scheduler: need("kube-scheduler")?,
        kubectl: need("kubectl")?,
        fake_kubelet,
    })
}

/// Unpacks `../shared/envtest/kubernetes-*.tar.xz` into `target/envtest/<version>/` after
/// checking it against `SHA256SUMS`; a finished unpack is reused. Test binaries may race
/// here: each unpacks into its own directory and renames it into place.
fn unpack_bundle() -> Result<PathBuf, String> {
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/envtest").join(VERSION);
    let bin = target.join("bin");
    if bin.join("kube-apiserver").is_file() {
        return Ok(bin);
    }
    let name = format!("kubernetes-{VERSION}-linux-amd64.tar.xz");
    let bundle = shared_dir().join("envtest").join(&name);
    let sums = std::fs::read_to_string(shared_dir().join("envtest/SHA256SUMS"))
        .map_err(|e| format!("no KUBEBUILDER_ASSETS and no ../shared/envtest/SHA256SUMS: {e}"))?;
    let want = sums
        .lines()
        .find_map(|l| l.split_once("  ").filter(|(_, f)| *f == name).map(|(h, _)| h.to_owned()))
        .ok_or_else(|| format!("SHA256SUMS has no line for {name}"))?;
    let data = std::fs::read(&bundle).map_err(|e| format!("reading {}: {e}", bundle.display()))?;
    let got: String = Sha256::digest(&data).iter().map(|b| format!("{b:02x}")).collect();
    if got != want {
        return Err(format!("{} has SHA256 {got}, SHA256SUMS says {want}", bundle.display()));
    }
    let staging = target.with_extension(format!("tmp{}", std::process::id()));
    std::fs::create_dir_all(&staging).map_err(|e| format!("creating {}: {e}", staging.display()))?;
    let status = Command::new("tar")
        .arg("-xJf")
        .arg(&bundle)
        .arg("-C")
        .arg(&staging)
        .status()
        .map_err(|e| format!("running tar: {e}"))?;
    if !status.success() {
        return Err(format!("tar -xJf {} failed: {status}", bundle.display()));
    }
    // Another test binary may have won the race: its copy is as good as ours.
    if std::fs::rename(&staging, &target).is_err() {
        let _ = std::fs::remove_dir_all(&staging);
    }
    if bin.join("kube-apiserver").is_file() { Ok(bin) } else { Err(format!("{} has no kube-apiserver", bin.display())) }
}
