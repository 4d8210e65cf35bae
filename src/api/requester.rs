//! `spec.requester` of an EvictionRequest (KEP-4563, `lifecycle.k8s.io/v1alpha1`), checked
//! at start-up with the rules kube-apiserver applies, so that a requester every
//! real cluster would refuse stops the process with the rule it breaks instead of silently
//! falling back to the Eviction API at every eviction.
//!
//! The rules, from the upstream source:
//! - `+k8s:format=k8s-prefixed-label-key` on `EvictionRequestSpec.Requester`
//!   (kubernetes/api `lifecycle/v1alpha1/types.go`), checked by `validate.PrefixedLabelKey`
//!   (kubernetes/apimachinery `pkg/api/validate/strfmt.go`) with `content.IsPrefixedLabelKey`
//!   and `content.IsLabelKey` (`pkg/api/validate/content/kube.go`): a DNS-1123 subdomain
//!   prefix (at most 253 characters), one `/`, and a name of at most 63 characters of
//!   `[A-Za-z0-9_.-]` starting and ending alphanumeric.
//! - `+k8s:customValidation`: `ValidateCustom_EvictionRequestSpec_Requester`
//!   (kubernetes/kubernetes `pkg/apis/lifecycle/v1alpha1/validation.go`) calls
//!   `ValidateForbiddenReservedDomainSuffixes(.., [".k8s.io", ".kubernetes.io"])`
//!   (`pkg/apis/core/v1/validation.go`): the prefix, lower-cased and without trailing dots,
//!   must neither end in `.k8s.io`/`.kubernetes.io` nor be `k8s.io`/`kubernetes.io`.

/// Longest DNS-1123 subdomain (`content.DNS1123SubdomainMaxLength`).
pub const SUBDOMAIN_MAX: usize = 253;
/// The regular expression of a DNS-1123 subdomain, unanchored, as Kubernetes writes it in its
/// message (`dns1123SubdomainFmt`, apimachinery `pkg/util/validation/validation.go`).
pub const DNS1123_SUBDOMAIN_FMT: &str = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
/// Kubernetes' message for a value that is not a DNS-1123 subdomain (`IsDNS1123Subdomain`:
/// `dns1123SubdomainErrorMsg` with its example and [`DNS1123_SUBDOMAIN_FMT`]), as a user sees
/// it after `Invalid value: "...": ` for a Kubernetes object name.
pub const DNS1123_SUBDOMAIN_MESSAGE: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric \
     characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used \
     for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
/// Longest name part of a label key (`labelKeyMaxLength`).
const NAME_MAX: usize = 63;
/// The domains `ValidateCustom_EvictionRequestSpec_Requester` reserves.
const RESERVED: [&str; 2] = ["k8s.io", "kubernetes.io"];

/// Why a requester is refused: each variant names the upstream rule it breaks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequesterError {
    /// Not `domain/name` with exactly one `/` (`k8s-prefixed-label-key`).
    #[error(
        "{0:?} is not a domain-prefixed key such as \"acme.io/foo\" (rule k8s-prefixed-label-key: one '/' between \
         a DNS subdomain and a name)"
    )]
    NotPrefixed(String),
    /// The domain is not a lowercase DNS-1123 subdomain.
    #[error(
        "the domain {0:?} is not a lowercase RFC 1123 subdomain (rule k8s-prefixed-label-key: at most 253 \
         characters, dot-separated parts of [a-z0-9-], each starting and ending alphanumeric)"
    )]
    Domain(String),
    /// The name after the `/` is empty, too long or has other characters.
    #[error(
        "the name {0:?} is not a label key name (rule k8s-prefixed-label-key: 1 to 63 characters of \
         [A-Za-z0-9_.-], starting and ending alphanumeric)"
    )]
    Name(String),
    /// The domain is reserved for Kubernetes itself.
    #[error(
        "the domain {0:?} is reserved (rule ValidateCustom_EvictionRequestSpec_Requester: domain names *.k8s.io, \
         *.kubernetes.io are reserved)"
    )]
    Reserved(String),
}

/// Whether `value` is a DNS-1123 subdomain as Kubernetes checks one (`IsDNS1123Subdomain`):
/// at most 253 characters matching [`DNS1123_SUBDOMAIN_FMT`] whole, that is dot-separated
/// non-empty parts of lowercase alphanumerics and `-`, each starting and ending alphanumeric
/// (no limit on a part's length: that is a DNS label's rule, not a subdomain's). The rule of
/// an EvictionRequest requester's domain and of a budget's pause request names (SPEC 4.6).
pub fn is_dns1123_subdomain(value: &str) -> bool {
    !value.is_empty() && value.len() <= SUBDOMAIN_MAX && value.split('.').all(is_dns_label)
}

/// One dot-separated part of `dns1123SubdomainFmt`: upstream's subdomain check is that
/// regular expression and the overall length, without a per-part limit.
fn is_dns_label(part: &str) -> bool {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    !part.is_empty()
        && part.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && edge(part.chars().next())
        && edge(part.chars().last())
}

fn is_label_key_name(name: &str) -> bool {
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    !name.is_empty()
        && name.len() <= NAME_MAX
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && edge(name.chars().next())
        && edge(name.chars().last())
}

/// Checks `value` as kube-apiserver checks `spec.requester` of an EvictionRequest on
/// create (module docs: the rules and their upstream files). Returns `value` unchanged; a
/// clap `value_parser` for `--eviction-requester`.
///
/// # Errors
/// [`RequesterError`] naming the first rule `value` breaks.
pub fn parse_requester(value: &str) -> Result<String, RequesterError> {
    let (domain, name) = match value.split('/').collect::<Vec<_>>().as_slice() {
        [domain, name] => (*domain, *name),
        _ => return Err(RequesterError::NotPrefixed(value.to_owned())),
    };
    if !is_dns1123_subdomain(domain) {
        return Err(RequesterError::Domain(domain.to_owned()));
    }
    if !is_label_key_name(name) {
        return Err(RequesterError::Name(name.to_owned()));
    }
    let clean = domain.trim().to_ascii_lowercase();
    let clean = clean.trim_end_matches('.');
    if RESERVED.iter().any(|r| clean == *r || clean.ends_with(&format!(".{r}"))) {
        return Err(RequesterError::Reserved(domain.to_owned()));
    }
    Ok(value.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upstream_examples_pass_and_fail_as_upstream() {
        // Valid: the requester of upstream's strategy test, and our default.
        for ok in ["foo.example.com/bar", "acme.io/foo", "nodemaintenance.x-k8s.io/controller", "a.b/Under_score.1"] {
            assert_eq!(parse_requester(ok).as_deref(), Ok(ok));
        }
        // Upstream's declarative-validation test cases and strfmt tests.
        assert!(matches!(parse_requester("foo"), Err(RequesterError::NotPrefixed(_))));
        assert!(matches!(parse_requester("only/one/slash"), Err(RequesterError::NotPrefixed(_))));
        assert!(matches!(parse_requester("Example.com/abc"), Err(RequesterError::Domain(_))));
        assert!(matches!(parse_requester("example_com/abc"), Err(RequesterError::Domain(_))));
        assert!(matches!(parse_requester("/simple"), Err(RequesterError::Domain(_))));
        assert!(matches!(parse_requester(&format!("{}/abc", "a".repeat(254))), Err(RequesterError::Domain(_))));
        assert!(matches!(parse_requester("example.com/"), Err(RequesterError::Name(_))));
        assert!(matches!(parse_requester("example.com/-dash"), Err(RequesterError::Name(_))));
        assert!(matches!(parse_requester(&format!("example.com/{}", "b".repeat(64))), Err(RequesterError::Name(_))));
        assert!(parse_requester(&format!("example.com/{}", "b".repeat(63))).is_ok());
        for reserved in ["k8s.io/key", "dev.kubernetes.io/key", "nodemaintenance.k8s.io/controller", "kubernetes.io/x"]
        {
            assert!(matches!(parse_requester(reserved), Err(RequesterError::Reserved(_))), "{reserved}");
        }
    }

    #[test]
    fn a_subdomain_is_what_kubernetes_takes_for_one() {
        for ok in ["a", "0", "example.com", "a-b.c-d", "1.2.3", &"a".repeat(64), &format!("{}.b", "a".repeat(251))] {
            assert!(is_dns1123_subdomain(ok), "{ok}");
        }
        let long = format!("{}.bc", "a".repeat(251));
        for bad in ["", "Ops Team", "A", "a_b", "-a", "a-", "a..b", ".a", "a.", "é", "a/b", long.as_str()] {
            assert!(!is_dns1123_subdomain(bad), "{bad}");
        }
        // The message quotes the regular expression it names.
        assert!(
            DNS1123_SUBDOMAIN_MESSAGE.contains(&format!("regex used for validation is '{DNS1123_SUBDOMAIN_FMT}')"))
        );
    }

    #[test]
    fn the_error_names_the_rule() {
        let e = parse_requester("nodemaintenance.k8s.io/controller").unwrap_err().to_string();
        assert!(e.contains("*.k8s.io, *.kubernetes.io are reserved") && e.contains("nodemaintenance.k8s.io"), "{e}");
        let e = parse_requester("controller").unwrap_err().to_string();
        assert!(e.contains("k8s-prefixed-label-key"), "{e}");
    }
}
