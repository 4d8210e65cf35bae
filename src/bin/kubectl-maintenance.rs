//! `kubectl-maintenance`: the same binary as a kubectl plugin, so that
//! `kubectl maintenance review|forecast|watch|status` work once it is on the PATH.

fn main() -> std::process::ExitCode {
    node_maintenance::cli::main()
}
