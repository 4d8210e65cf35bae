//! `node-maintenance`: the binary. The command line lives in [`node_maintenance::cli`].

fn main() -> std::process::ExitCode {
    node_maintenance::cli::main()
}
