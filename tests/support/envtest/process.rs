//! Child processes of the test control plane: started with their output in a log file,
//! killed when dropped (and when the test process dies: `PR_SET_PDEATHSIG`), their log's
//! tail printed when something goes wrong; killed and started again on demand (issue 25:
//! faults of the control plane).

use std::ffi::OsString;
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A child, running or killed ([`Proc::kill`]); killed on drop.
pub struct Proc {
    pub name: &'static str,
    child: Child,
    pub log: PathBuf,
    /// Program, arguments and environment, to start it again the same way.
    program: OsString,
    args: Vec<OsString>,
    envs: Vec<(OsString, Option<OsString>)>,
}

impl Proc {
    /// Starts `cmd` with stdout and stderr appended to `<dir>/<name>.log`.
    pub fn spawn(name: &'static str, cmd: Command, dir: &Path) -> Proc {
        let log = dir.join(format!("{name}.log"));
        let program = cmd.get_program().to_owned();
        let args = cmd.get_args().map(ToOwned::to_owned).collect();
        let envs = cmd.get_envs().map(|(k, v)| (k.to_owned(), v.map(ToOwned::to_owned))).collect();
        let child = start(name, cmd, &log);
        Proc { name, child, log, program, args, envs }
    }

    /// Kills it (SIGKILL) and waits for it, as a crash would; [`Proc::restart`] starts it again.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Kills it if it runs, then starts it again with the same program, arguments and
    /// environment (its log continues in the same file).
    pub fn restart(&mut self) {
        self.kill();
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args);
        for (k, v) in &self.envs {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        self.child = start(self.name, cmd, &self.log);
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether it has exited (and how).
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// The last `lines` lines of its log.
    pub fn tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

/// Starts `cmd` with its output appended to `log`, killed when this process dies.
fn start(name: &str, mut cmd: Command, log: &Path) -> Child {
    let out = File::options().create(true).append(true).open(log).expect("log file");
    let err = out.try_clone().expect("log file handle");
    cmd.stdin(Stdio::null()).stdout(out).stderr(err);
    // SAFETY: prctl is async-signal-safe; it only sets this child's parent-death signal.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    cmd.spawn().unwrap_or_else(|e| panic!("starting {name}: {e}"))
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The ports [`free_port`] hands out: below Linux's default ephemeral range (32768-60999).
/// A port taken from that range (bind to port 0) could be given by the kernel to one of the
/// many client connections the tests open before the server that was to listen on it
/// starts: etcd then failed with "address already in use".
const PORTS: std::ops::Range<u16> = 10_000..32_768;

/// A free TCP port on 127.0.0.1 (bound and released, as envtest does), outside the
/// ephemeral range and never the same twice in one test binary: the next of [`PORTS`] from a
/// start derived from the process id and the clock, skipping ports that cannot be bound.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: std::sync::OnceLock<AtomicU32> = std::sync::OnceLock::new();
    let span = u32::from(PORTS.end - PORTS.start);
    let next = NEXT.get_or_init(|| {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        AtomicU32::new(std::process::id().wrapping_mul(7919).wrapping_add(nanos))
    });
    for _ in 0..span {
        let port = PORTS.start + u16::try_from(next.fetch_add(1, Ordering::Relaxed) % span).expect("below the span");
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port in {PORTS:?}")
}
