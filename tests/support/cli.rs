//! Running the built `node-maintenance` binary from a test.

use std::process::Command;

/// Runs the binary with `args` (logs at `error` only); returns (exit code, stdout).
pub fn run(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_node-maintenance"))
        .args(args)
        .env("RUST_LOG", "error")
        .output()
        .expect("binary runs");
    (out.status.code().unwrap_or(-1), String::from_utf8(out.stdout).unwrap())
}
