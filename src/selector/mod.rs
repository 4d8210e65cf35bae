//! Node and pod selectors: validation with field paths (SPEC 3.2) and matching compiled once
//! per object (SPEC 3.5, 4.3).
//!
//! Pod selectors (`metav1.LabelSelector`) compile through kube's [`Selector`] into
//! [`PodSelector`], which matches any label lookup; node selectors
//! (`core/v1 NodeSelector`) need `Gt`/`Lt` and `matchFields`, which kube's type lacks, so
//! they compile into [`NodeMatcher`]; [`NodeIndex`] evaluates them over a whole cluster at once.
//! Validation and matching share the operator rules, so they stay in one file; a third of it
//! is their tests.

use crate::field::{FieldError, FieldPath};
use k8s_openapi::api::core::v1::{Node, NodeSelector, NodeSelectorRequirement};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::{Expression, Selector};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

mod index;

pub use index::NodeIndex;

/// The operators of a node selector's `matchExpressions`.
pub const NODE_OPERATORS: &[&str] = &["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"];
/// The operators of a node selector's `matchFields`.
pub const FIELD_OPERATORS: &[&str] = &["In", "NotIn"];
/// The operators of a pod label selector's `matchExpressions`.
pub const LABEL_OPERATORS: &[&str] = &["In", "NotIn", "Exists", "DoesNotExist"];
/// The only key a node selector's `matchFields` may use.
pub const FIELD_KEYS: &[&str] = &["metadata.name"];

/// Validates a label key (a qualified name: optional DNS-subdomain prefix and `/`, then a name
/// of at most 63 characters). Returns the problem as text, `None` when valid.
pub fn label_key_problem(key: &str) -> Option<String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix
        && (p.is_empty() || p.len() > 253 || !p.split('.').all(is_dns_label))
    {
        return Some("prefix part must be a lowercase RFC 1123 subdomain (e.g. 'example.com')".into());
    }
    if name.is_empty() || name.len() > 63 || !is_qualified_name_part(name) {
        return Some(
            "name part must be at most 63 characters of alphanumerics, '-', '_' or '.', \
             starting and ending with an alphanumeric (e.g. 'MyName', 'my.name', '123-abc')"
                .into(),
        );
    }
    None
}

/// Validates a label value (empty, or at most 63 characters shaped like a qualified name part).
pub fn label_value_problem(value: &str) -> Option<String> {
    if value.is_empty() || (value.len() <= 63 && is_qualified_name_part(value)) {
        None
    } else {
        Some("must be empty or at most 63 characters of alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric".into())
    }
}

fn is_qualified_name_part(s: &str) -> bool {
    let b = s.as_bytes();
    b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

fn is_dns_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_lowercase() | b[0].is_ascii_digit()
        && b[b.len() - 1].is_ascii_lowercase() | b[b.len() - 1].is_ascii_digit()
        && b.iter().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// Validates a node selector (SPEC 3.2): at least one term; known operators; In/NotIn with
/// values; Exists/DoesNotExist without; Gt/Lt with exactly one integer; matchFields only on
/// `metadata.name`; valid label keys and values. `path` makes the selector's own path (e.g.
/// `spec.nodeSelector`); it is called only to report an error, so a valid selector formats no
/// path. Returns every error found, empty when valid.
pub fn validate_node_selector(selector: &NodeSelector, path: &dyn Fn() -> FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    let terms_path = || path().child("nodeSelectorTerms");
    if selector.node_selector_terms.is_empty() {
        errs.push(FieldError::required(&terms_path(), "must have at least one term"));
    }
    for (i, term) in selector.node_selector_terms.iter().enumerate() {
        let tp = || terms_path().index(i);
        for (j, req) in term.match_expressions.iter().flatten().enumerate() {
            validate_node_requirement(req, &|| tp().child("matchExpressions").index(j), false, &mut errs);
        }
        for (j, req) in term.match_fields.iter().flatten().enumerate() {
            validate_node_requirement(req, &|| tp().child("matchFields").index(j), true, &mut errs);
        }
    }
    errs
}

fn validate_node_requirement(
    req: &NodeSelectorRequirement,
    path: &dyn Fn() -> FieldPath,
    field: bool,
    errs: &mut Vec<FieldError>,
) {
    let values = req.values.as_deref().unwrap_or_default();
    let key_path = || path().child("key");
    if field {
        if !FIELD_KEYS.contains(&req.key.as_str()) {
            errs.push(FieldError::not_supported(&key_path(), &req.key, FIELD_KEYS));
        }
    } else if let Some(p) = label_key_problem(&req.key) {
        errs.push(FieldError::invalid(&key_path(), &req.key, p));
    }
    let op_path = || path().child("operator");
    let values_path = || path().child("values");
    let supported = if field { FIELD_OPERATORS } else { NODE_OPERATORS };
    match req.operator.as_str() {
        op if !supported.contains(&op) => errs.push(FieldError::not_supported(&op_path(), op, supported)),
        "In" | "NotIn" if values.is_empty() => {
            errs.push(FieldError::required(&values_path(), "must be specified when `operator` is 'In' or 'NotIn'"))
        }
        "Exists" | "DoesNotExist" if !values.is_empty() => errs.push(FieldError::forbidden(
            &values_path(),
            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
        )),
        "Gt" | "Lt" if values.len() != 1 => errs.push(FieldError::required(
            &values_path(),
            "must be specified single value when `operator` is 'Lt' or 'Gt'",
        )),
        "Gt" | "Lt" if values[0].parse::<i64>().is_err() => {
            errs.push(FieldError::invalid(&values_path().index(0), &values[0], "must be an integer for 'Gt' or 'Lt'"))
        }
        "Gt" | "Lt" => {}
        _ if !field => {
            for (k, v) in values.iter().enumerate() {
                if let Some(p) = label_value_problem(v) {
                    errs.push(FieldError::invalid(&values_path().index(k), v, p));
                }
            }
        }
        _ => {}
    }
}

/// Validates a pod label selector (drainPlan `podSelector`, SPEC 3.2). `path` makes the
/// selector's own path; it is called only to report an error. Returns every error.
pub fn validate_label_selector(selector: &LabelSelector, path: &dyn Fn() -> FieldPath) -> Vec<FieldError> {
    let mut errs = Vec::new();
    for (k, v) in selector.match_labels.iter().flatten() {
        let p = || path().child("matchLabels");
        if let Some(problem) = label_key_problem(k) {
            errs.push(FieldError::invalid(&p(), k, problem));
        }
        if let Some(problem) = label_value_problem(v) {
            errs.push(FieldError::invalid(&p().key(k), v, problem));
        }
    }
    for (i, req) in selector.match_expressions.iter().flatten().enumerate() {
        let rp = || path().child("matchExpressions").index(i);
        if let Some(problem) = label_key_problem(&req.key) {
            errs.push(FieldError::invalid(&rp().child("key"), &req.key, problem));
        }
        let values = req.values.as_deref().unwrap_or_default();
        match req.operator.as_str() {
            op if !LABEL_OPERATORS.contains(&op) => {
                errs.push(FieldError::not_supported(&rp().child("operator"), op, LABEL_OPERATORS))
            }
            "In" | "NotIn" if values.is_empty() => errs.push(FieldError::required(
                &rp().child("values"),
                "must be specified when `operator` is 'In' or 'NotIn'",
            )),
            "Exists" | "DoesNotExist" if !values.is_empty() => errs.push(FieldError::forbidden(
                &rp().child("values"),
                "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            )),
            _ => {}
        }
    }
    errs
}

/// A pod selector (`metav1.LabelSelector`) compiled once, matched against any labels
/// (SPEC 4.3 "Targets": a target's podSelector must match the pod's labels).
#[derive(Clone, Debug)]
pub struct PodSelector(Vec<Expression>);

impl PodSelector {
    /// Compiles a pod selector; `None` when it is invalid ([`validate_label_selector`] says why).
    pub fn compile(selector: &LabelSelector) -> Option<Self> {
        Selector::try_from(selector.clone()).ok().map(|s| PodSelector(s.into_iter().collect()))
    }

    /// Whether labels read through `lookup` (key -> value) match: every expression holds
    /// (`metav1.LabelSelector` semantics; an empty selector matches everything).
    pub fn matches<'a>(&self, lookup: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.0.iter().all(|e| match e {
            Expression::In(k, vs) => lookup(k).is_some_and(|v| vs.contains(v)),
            Expression::NotIn(k, vs) => !lookup(k).is_some_and(|v| vs.contains(v)),
            Expression::Exists(k) => lookup(k).is_some(),
            Expression::DoesNotExist(k) => lookup(k).is_none(),
            Expression::Equal(k, v) => lookup(k) == Some(v.as_str()),
            Expression::NotEqual(k, v) => lookup(k) != Some(v.as_str()),
        })
    }
}

/// One requirement, compiled.
#[derive(Clone, Debug)]
enum Requirement {
    In(String, BTreeSet<String>),
    NotIn(String, BTreeSet<String>),
    Exists(String),
    DoesNotExist(String),
    Gt(String, i64),
    Lt(String, i64),
}

impl Requirement {
    fn compile(req: &NodeSelectorRequirement) -> Option<Self> {
        let key = req.key.clone();
        let values = req.values.as_deref().unwrap_or_default();
        let set = || values.iter().cloned().collect::<BTreeSet<_>>();
        let int = || if values.len() == 1 { values[0].parse::<i64>().ok() } else { None };
        Some(match req.operator.as_str() {
            "In" if !values.is_empty() => Requirement::In(key, set()),
            "NotIn" if !values.is_empty() => Requirement::NotIn(key, set()),
            "Exists" if values.is_empty() => Requirement::Exists(key),
            "DoesNotExist" if values.is_empty() => Requirement::DoesNotExist(key),
            "Gt" => Requirement::Gt(key, int()?),
            "Lt" => Requirement::Lt(key, int()?),
            _ => return None,
        })
    }

    fn key(&self) -> &str {
        match self {
            Requirement::In(k, _)
            | Requirement::NotIn(k, _)
            | Requirement::Exists(k)
            | Requirement::DoesNotExist(k)
            | Requirement::Gt(k, _)
            | Requirement::Lt(k, _) => k,
        }
    }

    fn matches<'a>(&self, lookup: impl Fn(&str) -> Option<&'a str>) -> bool {
        match self {
            Requirement::In(k, vs) => lookup(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => !lookup(k).is_some_and(|v| vs.contains(v)),
            Requirement::Exists(k) => lookup(k).is_some(),
            Requirement::DoesNotExist(k) => lookup(k).is_none(),
            Requirement::Gt(k, n) => lookup(k).and_then(|v| v.parse::<i64>().ok()).is_some_and(|v| v > *n),
            Requirement::Lt(k, n) => lookup(k).and_then(|v| v.parse::<i64>().ok()).is_some_and(|v| v < *n),
        }
    }
}

/// A node selector compiled once: terms ORed, requirements within a term ANDed; an empty term
/// matches nothing (core/v1 semantics).
#[derive(Clone, Debug)]
pub struct NodeMatcher {
    terms: Vec<(Vec<Requirement>, Vec<Requirement>)>,
}

impl NodeMatcher {
    /// Compiles a node selector. Returns `None` when it is invalid
    /// ([`validate_node_selector`] says why).
    pub fn compile(selector: &NodeSelector) -> Option<Self> {
        let compile_all = |reqs: &Option<Vec<NodeSelectorRequirement>>| {
            reqs.iter().flatten().map(Requirement::compile).collect::<Option<Vec<_>>>()
        };
        let terms = selector
            .node_selector_terms
            .iter()
            .map(|t| Some((compile_all(&t.match_expressions)?, compile_all(&t.match_fields)?)))
            .collect::<Option<Vec<_>>>()?;
        Some(NodeMatcher { terms })
    }

    /// Whether a node with this name and these labels is selected.
    pub fn matches_parts(&self, name: &str, labels: &BTreeMap<String, String>) -> bool {
        self.terms.iter().any(|(exprs, fields)| {
            (!exprs.is_empty() || !fields.is_empty())
                && exprs.iter().all(|r| r.matches(|k| labels.get(k).map(String::as_str)))
                && fields.iter().all(|r| r.matches(|k| (k == "metadata.name").then_some(name)))
        })
    }

    /// The label keys its terms read (`matchExpressions`; `matchFields` read the name).
    pub fn label_keys(&self) -> impl Iterator<Item = &str> {
        self.terms.iter().flat_map(|(exprs, _)| exprs.iter().map(Requirement::key))
    }

    /// Whether `node` is selected: its name and labels against the terms.
    pub fn matches(&self, node: &Node) -> bool {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        let name = node.metadata.name.as_deref().unwrap_or_default();
        self.matches_parts(name, node.metadata.labels.as_ref().unwrap_or(&EMPTY))
    }
}

/// The `nodes` that `selector` matches (an invalid selector matches none).
pub fn matching(selector: &NodeSelector, nodes: &[Arc<Node>]) -> Vec<Arc<Node>> {
    let Some(m) = NodeMatcher::compile(selector) else { return Vec::new() };
    nodes.iter().filter(|n| m.matches(n)).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::NodeSelectorTerm;

    fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|s| s.to_string()).collect()),
        }
    }

    fn selector(exprs: Vec<NodeSelectorRequirement>, fields: Vec<NodeSelectorRequirement>) -> NodeSelector {
        NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_expressions: (!exprs.is_empty()).then_some(exprs),
                match_fields: (!fields.is_empty()).then_some(fields),
            }],
        }
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn invalid_node_selector_reports_every_error_with_its_path() {
        let s = selector(
            vec![
                req("pool", "Contains", &["gen"]),
                req("topology.kubernetes.io/zone", "In", &[]),
                req("kubernetes.io/arch", "Exists", &["amd64"]),
                req("Bad Key", "Gt", &["x"]),
            ],
            vec![req("metadata.labels", "In", &["x"])],
        );
        let errs: Vec<String> = validate_node_selector(&s, &|| FieldPath::root("spec").child("nodeSelector"))
            .iter()
            .map(|e| e.to_string())
            .collect();
        let t = "spec.nodeSelector.nodeSelectorTerms[0]";
        assert!(
            errs[0].starts_with(&format!("{t}.matchExpressions[0].operator: Unsupported value: \"Contains\"")),
            "{errs:?}"
        );
        assert!(errs[1].starts_with(&format!("{t}.matchExpressions[1].values: Required value")));
        assert!(errs[2].starts_with(&format!("{t}.matchExpressions[2].values: Forbidden")));
        assert!(errs[3].starts_with(&format!("{t}.matchExpressions[3].key: Invalid value: \"Bad Key\"")));
        assert!(errs[4].starts_with(&format!("{t}.matchExpressions[3].values[0]: Invalid value: \"x\"")));
        assert!(errs[5].starts_with(&format!("{t}.matchFields[0].key: Unsupported value: \"metadata.labels\"")));
        assert_eq!(errs.len(), 6);
    }

    #[test]
    fn node_selector_without_terms_is_required() {
        let errs = validate_node_selector(&NodeSelector::default(), &|| FieldPath::root("spec").child("nodeSelector"));
        assert_eq!(
            errs[0].to_string(),
            "spec.nodeSelector.nodeSelectorTerms: Required value: must have at least one term"
        );
    }

    #[test]
    fn gt_lt_need_exactly_one_integer() {
        let p = || FieldPath::root("s");
        assert!(validate_node_selector(&selector(vec![req("cpu", "Gt", &["4"])], vec![]), &p).is_empty());
        assert_eq!(validate_node_selector(&selector(vec![req("cpu", "Lt", &["4", "5"])], vec![]), &p).len(), 1);
    }

    #[test]
    fn matching_follows_core_v1_semantics() {
        let m = NodeMatcher::compile(&selector(
            vec![req("pool", "In", &["general", "gpu"]), req("cpu", "Gt", &["8"]), req("spot", "DoesNotExist", &[])],
            vec![],
        ))
        .unwrap();
        assert!(m.matches_parts("n", &labels(&[("pool", "gpu"), ("cpu", "16")])));
        assert!(!m.matches_parts("n", &labels(&[("pool", "gpu"), ("cpu", "8")])));
        assert!(!m.matches_parts("n", &labels(&[("pool", "gpu"), ("cpu", "16"), ("spot", "")])));
        assert!(!m.matches_parts("n", &labels(&[("pool", "other"), ("cpu", "16")])));
        let not_in = NodeMatcher::compile(&selector(vec![req("zone", "NotIn", &["a"])], vec![])).unwrap();
        assert!(not_in.matches_parts("n", &labels(&[])), "NotIn matches a node without the label");
    }

    #[test]
    fn match_fields_select_by_name_and_terms_are_ored() {
        let mut s = selector(vec![], vec![req("metadata.name", "In", &["worker-1", "worker-2"])]);
        s.node_selector_terms
            .push(NodeSelectorTerm { match_expressions: Some(vec![req("pool", "In", &["gpu"])]), match_fields: None });
        let m = NodeMatcher::compile(&s).unwrap();
        assert!(m.matches_parts("worker-1", &labels(&[])));
        assert!(m.matches_parts("gpu-9", &labels(&[("pool", "gpu")])));
        assert!(!m.matches_parts("worker-3", &labels(&[("pool", "general")])));
    }

    #[test]
    fn empty_term_matches_nothing_and_invalid_selector_does_not_compile() {
        let empty = NodeSelector { node_selector_terms: vec![NodeSelectorTerm::default()] };
        assert!(!NodeMatcher::compile(&empty).unwrap().matches_parts("n", &labels(&[])));
        assert!(NodeMatcher::compile(&selector(vec![req("a", "Like", &["x"])], vec![])).is_none());
    }

    #[test]
    fn label_selector_validation_and_matching() {
        let bad = LabelSelector {
            match_expressions: Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                key: "app".into(),
                operator: "Equals".into(),
                values: Some(vec!["x".into()]),
            }]),
            ..Default::default()
        };
        let errs = validate_label_selector(&bad, &|| FieldPath::root("p"));
        assert_eq!(errs.len(), 1);
        assert!(errs[0].to_string().starts_with("p.matchExpressions[0].operator: Unsupported value: \"Equals\""));
        let good = LabelSelector { match_labels: Some(labels(&[("app", "postgres")])), ..Default::default() };
        assert!(validate_label_selector(&good, &|| FieldPath::root("p")).is_empty());
        let sel = PodSelector::compile(&good).unwrap();
        let (pg, web) = (labels(&[("app", "postgres"), ("x", "y")]), labels(&[("app", "web")]));
        assert!(sel.matches(|k| pg.get(k).map(String::as_str)));
        assert!(!sel.matches(|k| web.get(k).map(String::as_str)));
    }

    #[test]
    fn label_keys() {
        assert!(label_key_problem("node-role.kubernetes.io/control-plane").is_none());
        assert!(label_key_problem("app").is_none());
        assert!(label_key_problem("Example.com/app").is_some());
        assert!(label_key_problem("/app").is_some());
        assert!(label_key_problem(&"a".repeat(64)).is_some());
        assert!(label_key_problem("-app").is_some());
    }
}
