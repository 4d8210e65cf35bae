//! Child processes of the test control plane: started with their output in a log file,
//! killed when dropped (and when the test process dies: `PR_SET_PDEATHSIG`), their log's
//! tail printed when something goes wrong.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// A running child; killed on drop.
pub struct Proc {
    pub name: &'static str,
    child: Child,
    pub log: PathBuf,
}

impl Proc {
    /// Starts `cmd` with stdout and stderr into `<dir>/<name>.log`.
    pub fn spawn(name: &'static str, mut cmd: Command, dir: &Path) -> Proc {
        let log = dir.join(format!("{name}.log"));
        let out = File::create(&log).expect("log file");
        let err = out.try_clone().expect("log file handle");
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        // SAFETY: prctl is async-signal-safe; it only sets this child's parent-death signal.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap_or_else(|e| panic!("starting {name}: {e}"));
        Proc { name, child, log }
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

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free TCP port on 127.0.0.1 (bound and released: envtest's way; a rare race with another
/// process is possible).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port").local_addr().expect("addr").port()
}
