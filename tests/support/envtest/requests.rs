//! Counting API requests from the apiserver's own `apiserver_request_total`: what a
//! controller wrote is measured where it arrived, not where it was sent.

use std::collections::BTreeMap;

/// The sum of the samples of `family` (a Prometheus text exposition) whose labels contain
/// every `name="value"` of `labels`; `None` when no sample matches.
pub fn metric_sum(text: &str, family: &str, labels: &[&str]) -> Option<f64> {
    let mut sum = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some(rest) = line.strip_prefix(family) else { continue };
        if !(rest.starts_with(' ') || rest.starts_with('{')) || !labels.iter().all(|l| rest.contains(l)) {
            continue;
        }
        let value = rest.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()).unwrap_or(f64::NAN);
        *sum.get_or_insert(0.0) += value;
    }
    sum
}

/// `(verb, resource, subresource)` → requests, summed over codes and versions.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RequestCounts(pub BTreeMap<(String, String, String), u64>);

/// Verbs that change state (`APPLY` is server-side apply).
pub const WRITE_VERBS: &[&str] = &["POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"];

fn label<'a>(labels: &'a str, name: &str) -> &'a str {
    let key = format!("{name}=\"");
    labels.split(',').find_map(|l| l.strip_prefix(key.as_str())).map_or("", |v| v.trim_end_matches('"'))
}

impl RequestCounts {
    /// Parses the `apiserver_request_total` lines of a `/metrics` text.
    pub fn parse(metrics: &str) -> RequestCounts {
        let mut counts = BTreeMap::new();
        for line in metrics.lines().filter(|l| l.starts_with("apiserver_request_total{")) {
            let Some((labels, value)) = line["apiserver_request_total{".len()..].rsplit_once("} ") else { continue };
            if !label(labels, "dry_run").is_empty() {
                continue;
            }
            let key = (
                label(labels, "verb").to_owned(),
                label(labels, "resource").to_owned(),
                label(labels, "subresource").to_owned(),
            );
            *counts.entry(key).or_default() += value.trim().parse::<f64>().unwrap_or(0.0) as u64;
        }
        RequestCounts(counts)
    }

    /// Requests in `self` that were not in `before`, only where they differ.
    pub fn since(&self, before: &RequestCounts) -> RequestCounts {
        let mut out = BTreeMap::new();
        for (k, v) in &self.0 {
            let d = v.saturating_sub(before.0.get(k).copied().unwrap_or(0));
            if d > 0 {
                out.insert(k.clone(), d);
            }
        }
        RequestCounts(out)
    }

    /// Write requests on `resource` (any subresource).
    pub fn writes_on(&self, resource: &str) -> u64 {
        self.0
            .iter()
            .filter(|((verb, r, _), _)| r == resource && WRITE_VERBS.contains(&verb.as_str()))
            .map(|(_, v)| v)
            .sum()
    }

    /// Requests with this verb, resource and subresource (`""` for none).
    pub fn get(&self, verb: &str, resource: &str, subresource: &str) -> u64 {
        self.0.get(&(verb.to_owned(), resource.to_owned(), subresource.to_owned())).copied().unwrap_or(0)
    }

    /// Every write request, for messages.
    pub fn writes(&self) -> Vec<String> {
        self.0
            .iter()
            .filter(|((verb, _, _), _)| WRITE_VERBS.contains(&verb.as_str()))
            .map(|((verb, r, s), v)| format!("{verb} {r}{}{s}: {v}", if s.is_empty() { "" } else { "/" }))
            .collect()
    }
}

#[test]
fn parses_counts_and_differences() {
    let text = "# HELP x\napiserver_request_total{code=\"200\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"nodes\",scope=\"resource\",subresource=\"status\",verb=\"PATCH\",version=\"v1\"} 7\n\
                apiserver_request_total{code=\"409\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"nodes\",scope=\"resource\",subresource=\"status\",verb=\"PATCH\",version=\"v1\"} 1\n\
                apiserver_request_total{code=\"200\",component=\"apiserver\",dry_run=\"All\",group=\"\",resource=\"nodes\",scope=\"resource\",subresource=\"\",verb=\"PATCH\",version=\"v1\"} 5\n";
    let c = RequestCounts::parse(text);
    assert_eq!(c.get("PATCH", "nodes", "status"), 8);
    assert_eq!(c.writes_on("nodes"), 8, "dry runs are not writes");
    assert_eq!(c.since(&c).0.len(), 0);
}
