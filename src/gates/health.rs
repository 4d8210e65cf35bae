//! Node health of a health gate (`spec.healthGate.maxUnhealthy`, SPEC 4.6).

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// What the health gate reads of one node the budget selects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GateNode {
    /// Condition `Ready` is True (False, Unknown or missing: not ready).
    pub ready: bool,
    /// Some maintenance holds the node: a node a maintenance took down is expected to be down
    /// and counts against the budget's count, not its health.
    pub held: bool,
}

impl GateNode {
    /// Unhealthy: not Ready and held by no maintenance. A cordon alone does not count.
    pub fn unhealthy(&self) -> bool {
        !self.ready && !self.held
    }
}

/// `maxUnhealthy` as read: a number of nodes, or a percentage of the selected nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaxUnhealthy {
    /// At most this many nodes.
    Nodes(usize),
    /// At most this percentage (0 to 100) of the selected nodes, rounded down.
    Percent(usize),
}

impl MaxUnhealthy {
    /// Reads `value`: an integer from 0, or `"0%"` to `"100%"`.
    ///
    /// # Errors
    /// The reason, for a person, for a negative integer, a percentage out of range, or text
    /// that is not a percentage.
    pub fn parse(value: &IntOrString) -> Result<Self, String> {
        match value {
            IntOrString::Int(n) => usize::try_from(*n)
                .map(MaxUnhealthy::Nodes)
                .map_err(|_| format!("{n} is negative: an integer from 0 or a percentage from 0% to 100%")),
            IntOrString::String(s) => s
                .strip_suffix('%')
                .and_then(|p| p.parse::<usize>().ok())
                .filter(|p| *p <= 100)
                .map(MaxUnhealthy::Percent)
                .ok_or_else(|| format!("{s:?} is neither an integer from 0 nor a percentage from 0% to 100%")),
        }
    }

    /// The most unhealthy nodes of `selected` that keep the gate open.
    pub fn resolve(self, selected: usize) -> usize {
        match self {
            MaxUnhealthy::Nodes(n) => n,
            MaxUnhealthy::Percent(p) => selected * p / 100,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_unhealthy_reads_integers_from_zero_and_percentages_rounded_down() {
        let parse = |v: IntOrString| MaxUnhealthy::parse(&v).map(|m| m.resolve(10));
        assert_eq!(parse(IntOrString::Int(0)), Ok(0));
        assert_eq!(parse(IntOrString::Int(3)), Ok(3));
        assert_eq!(parse(IntOrString::String("0%".into())), Ok(0));
        assert_eq!(parse(IntOrString::String("25%".into())), Ok(2));
        assert_eq!(parse(IntOrString::String("100%".into())), Ok(10));
        for bad in [IntOrString::Int(-1), IntOrString::String("101%".into()), IntOrString::String("3".into())] {
            assert!(parse(bad.clone()).is_err(), "{bad:?}");
        }
        assert!(GateNode { ready: false, held: false }.unhealthy());
        assert!(!GateNode { ready: false, held: true }.unhealthy(), "a held node counts against the count");
    }
}
