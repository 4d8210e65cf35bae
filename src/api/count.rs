//! Node counts given as an integer or a percentage (`maxUnavailable`, `minAvailable`), as
//! Kubernetes' `intstr.GetScaledValueFromIntOrPercent` reads them for PodDisruptionBudgets,
//! with the bounds this API puts on them.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// Resolves `value` against `total` nodes: a positive integer as it is, a percentage from
/// `"1%"` to `"100%"` of `total` rounded up and at least 1 (so a positive percentage of a
/// small pool still allows one node). Used for NodeMaintenance `spec.maxUnavailable` (held
/// nodes at once) and NodeDisruptionBudget `spec.maxUnavailable`/`minAvailable`.
///
/// # Errors
/// The reason, for a person, when the value is 0, negative, a percentage outside 1%..100%,
/// or text that is not a percentage.
pub fn scaled_count(value: &IntOrString, total: usize) -> Result<usize, String> {
    match value {
        IntOrString::Int(n) if *n >= 1 => Ok(usize::try_from(*n).unwrap_or(usize::MAX)),
        IntOrString::Int(n) => Err(format!("{n} is not a positive number of nodes")),
        IntOrString::String(s) => {
            let percent = s.strip_suffix('%').and_then(|p| p.parse::<usize>().ok()).filter(|p| (1..=100).contains(p));
            match percent {
                Some(p) => Ok((total * p).div_ceil(100).max(1)),
                None => Err(format!("{s:?} is neither a positive integer nor a percentage from 1% to 100%")),
            }
        }
    }
}

/// The most of `expected` selected nodes a NodeDisruptionBudget lets be unavailable at once:
/// `maxUnavailable` resolved (at most `expected`), or `expected` minus `minAvailable`
/// resolved, or `expected` when neither is set (a budget may limit only through its gates,
/// SPEC 4.6).
///
/// # Errors
/// The reason, for a person, when both are set or the value is not valid ([`scaled_count`]).
pub fn budget_max_unavailable(
    max_unavailable: Option<&IntOrString>,
    min_available: Option<&IntOrString>,
    expected: usize,
) -> Result<usize, String> {
    match (max_unavailable, min_available) {
        (Some(max), None) => scaled_count(max, expected).map(|m| m.min(expected)),
        (None, Some(min)) => scaled_count(min, expected).map(|m| expected.saturating_sub(m)),
        (None, None) => Ok(expected),
        (Some(_), Some(_)) => Err("at most one of maxUnavailable and minAvailable may be set".to_owned()),
    }
}

/// The value as a person wrote it (`2`, `"25%"`), for messages.
pub fn shown(value: &IntOrString) -> String {
    match value {
        IntOrString::Int(n) => n.to_string(),
        IntOrString::String(s) => s.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_pass_and_percentages_round_up() {
        assert_eq!(scaled_count(&IntOrString::Int(2), 10), Ok(2));
        assert_eq!(scaled_count(&IntOrString::String("25%".into()), 10), Ok(3));
        assert_eq!(scaled_count(&IntOrString::String("1%".into()), 10), Ok(1));
        assert_eq!(scaled_count(&IntOrString::String("100%".into()), 7), Ok(7));
        assert_eq!(scaled_count(&IntOrString::String("50%".into()), 0), Ok(1));
        assert!(scaled_count(&IntOrString::Int(0), 10).is_err());
        assert!(scaled_count(&IntOrString::Int(-1), 10).is_err());
        assert!(scaled_count(&IntOrString::String("0%".into()), 10).is_err());
        assert!(scaled_count(&IntOrString::String("101%".into()), 10).is_err());
        assert!(scaled_count(&IntOrString::String("2".into()), 10).is_err());
    }

    #[test]
    fn a_budget_count_is_one_of_two_or_none() {
        let (one, half) = (IntOrString::Int(1), IntOrString::String("50%".into()));
        assert_eq!(budget_max_unavailable(Some(&one), None, 4), Ok(1));
        assert_eq!(budget_max_unavailable(None, Some(&half), 4), Ok(2));
        assert_eq!(budget_max_unavailable(None, None, 4), Ok(4), "no count: no count limit");
        assert!(budget_max_unavailable(Some(&one), Some(&half), 4).is_err(), "both: fail safe");
        assert!(budget_max_unavailable(Some(&IntOrString::Int(0)), None, 4).is_err());
    }
}
