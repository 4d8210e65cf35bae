//! What /proc says of a process, for the benches that report memory.

/// (VmRSS, VmHWM) in MiB of process `pid` (a number, or `self`); NaN where unreadable.
pub fn rss_mib(pid: impl std::fmt::Display) -> (f64, f64) {
    (status_mib(&pid, "VmRSS:"), status_mib(&pid, "VmHWM:"))
}

/// The kB field `name` (with its colon: `RssAnon:`) of /proc/`pid`/status in MiB; NaN where
/// unreadable.
pub fn status_mib(pid: &impl std::fmt::Display, name: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}
