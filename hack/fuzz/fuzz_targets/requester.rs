//! `--eviction-requester` (`parse_requester`) and the DNS-1123 subdomain rule it shares with
//! pause request names: both agree with the regular expressions Kubernetes states for them
//! (`DNS1123_SUBDOMAIN_FMT`; the label key name `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`),
//! their lengths and the reserved domains, on every text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use node_maintenance::api::requester::{DNS1123_SUBDOMAIN_FMT, SUBDOMAIN_MAX, is_dns1123_subdomain, parse_requester};
use regex::Regex;
use std::sync::LazyLock;

static SUBDOMAIN: LazyLock<Regex> = LazyLock::new(|| Regex::new(&format!("^(?:{DNS1123_SUBDOMAIN_FMT})$")).unwrap());
static NAME: LazyLock<Regex> = LazyLock::new(|| Regex::new("^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$").unwrap());

fn subdomain(s: &str) -> bool {
    s.len() <= SUBDOMAIN_MAX && SUBDOMAIN.is_match(s)
}

fuzz_target!(|text: &str| {
    assert_eq!(is_dns1123_subdomain(text), subdomain(text), "{text:?}");
    let model = match text.split_once('/') {
        Some((domain, name)) if !name.contains('/') => {
            let reserved =
                ["k8s.io", "kubernetes.io"].iter().any(|r| domain == *r || domain.ends_with(&format!(".{r}")));
            subdomain(domain) && name.len() <= 63 && NAME.is_match(name) && !reserved
        }
        _ => false,
    };
    match parse_requester(text) {
        Ok(v) => {
            assert_eq!(v, text);
            assert!(model, "{text:?} accepted");
        }
        Err(e) => assert!(!model, "{text:?} refused: {e}"),
    }
});
