//! The validation the CRD schemas carry themselves (`x-kubernetes-validations`, CEL), so that
//! a cluster where the admission webhook is not registered, or is down with
//! `failurePolicy: Ignore`, still refuses what needs no cluster state: a budget with both
//! counts, a blackout that ends before it starts, a stage going backwards, an edited
//! drainPlan (SPEC 3.2, 3.3, 4.6). The webhook stays the main validation and keeps
//! its messages; these rules say the same in the same words where they can, because the
//! apiserver checks the schema before it calls a validating webhook, so a user sees these
//! messages first.
//!
//! The apiserver estimates the worst-case cost of every rule from the schema and refuses the
//! CRD when it is too high, so every list and string a rule reads is bounded (`maxItems`,
//! `maxLength`): our own fields by schemars attributes, the core/v1 selectors inside them by
//! [`node_selector_schema`] and [`label_selector_schema`]. An object stored before a bound or a
//! rule existed stays updatable through CRD validation ratcheting (Kubernetes 1.30+, on by
//! default): a value that did not change is not validated again (rules that read `oldSelf`
//! are not ratcheted, and do not need it: they refuse changes, not stored state).
//!
//! A value the plain schema refuses (a bound, an enum) makes the apiserver skip every CEL
//! rule of the object, so a rule's message stands beside the others only where the schema
//! itself has nothing to say; hence the generous bounds.

use crate::selector::{FIELD_KEYS, FIELD_OPERATORS, LABEL_OPERATORS, NODE_OPERATORS};
use kube::core::{Message, Reason, Rule};
use schemars::Schema;
use serde_json::{Map, Value, json};

/// Most terms in a nodeSelector (NodeMaintenance, NodeDisruptionBudget). Real selectors have
/// a few; a tool that lists nodes by name puts them in one term's `values`.
pub const MAX_SELECTOR_TERMS: u64 = 64;
/// Most requirements in one selector term (matchExpressions or matchFields) or label selector.
pub const MAX_SELECTOR_REQUIREMENTS: u64 = 64;
/// Most values of one node selector requirement: node names listed in `matchFields`
/// (`metadata.name In [...]`) for a large fleet.
pub const MAX_NODE_SELECTOR_VALUES: u64 = 5000;
/// Most values of one label selector requirement (a drainPlan entry's podSelector,
/// `waitForCompletion.podSelector`).
pub const MAX_LABEL_SELECTOR_VALUES: u64 = 256;
/// Most `matchLabels` of a label selector.
pub const MAX_MATCH_LABELS: u64 = 64;
/// Longest label key: a DNS subdomain prefix (253), `/` and a name (63), as Kubernetes
/// validates them.
pub const MAX_LABEL_KEY: u64 = 317;
/// Longest label value, as Kubernetes validates them.
pub const MAX_LABEL_VALUE: u64 = 63;
/// Longest node selector value: a node name (a DNS subdomain).
pub const MAX_NODE_SELECTOR_VALUE: u64 = 253;
/// Longest selector operator: the real ones have at most 12 characters, the rest get the
/// rule's "supported values" message unless absurdly long.
pub const MAX_OPERATOR: u64 = 64;

/// The stages in order, as a CEL map from name to rank (SPEC 3.3).
const STAGE_RANK: &str = "{'Idle': 0, 'Cordon': 1, 'Drain': 2, 'Complete': 3}";

/// `spec.stage` (a transition rule): it may stay or move forward, skipping stages, never back
/// (SPEC 3.3). The message is the webhook's.
pub fn stage_moves_forward() -> Rule {
    Rule::new(format!("{STAGE_RANK}[self] >= {STAGE_RANK}[oldSelf]"))
        .message(Message::Expression(
            "'may not move backwards from ' + oldSelf + ' to ' + self + '; stages only move forward \
             (Idle, Cordon, Drain, Complete): create a new NodeMaintenance instead'"
                .to_owned(),
        ))
        .reason(Reason::FieldValueForbidden)
}

/// `spec.drainPlan` is immutable after creation (SPEC 3.3), written on the spec so that an
/// update leaving the field out (`kubectl replace` of a manifest without it) is refused too: a
/// rule on the field itself is not evaluated when the new object lacks the field. (With the
/// mutating webhook registered such an update has the stored plan carried over before this
/// rule runs, SPEC 3.1.)
pub fn drain_plan_is_immutable() -> Rule {
    Rule::new(
        "has(self.drainPlan) == has(oldSelf.drainPlan) && (!has(self.drainPlan) || self.drainPlan == oldSelf.drainPlan)",
    )
    .message("field is immutable after creation")
    .field_path(".drainPlan")
    .reason(Reason::FieldValueForbidden)
}

/// `spec.nodeSelector` may change only while the stored stage is Idle (SPEC 3.3); the same
/// update may move the stage on. The message is the webhook's.
pub fn node_selector_changes_only_in_idle() -> Rule {
    Rule::new("oldSelf.stage == 'Idle' || self.nodeSelector == oldSelf.nodeSelector")
        .message(Message::Expression(
            "'may change only while the stage is Idle (it is ' + oldSelf.stage + ')'".to_owned(),
        ))
        .field_path(".nodeSelector")
        .reason(Reason::FieldValueForbidden)
}

/// A NodeDisruptionBudget sets at most one of `maxUnavailable` and `minAvailable` (SPEC 4.5,
/// 4.6: with neither it limits through its gates alone). The rule is on the spec, which
/// ratcheting re-validates whenever anything in it changes, so it lets a budget stored with
/// both (before the rule) be updated while it keeps both: a party that server-side applies
/// its pause request must not be refused for a count it does not own.
pub fn at_most_one_count() -> Rule {
    Rule::new(
        "!has(self.maxUnavailable) || !has(self.minAvailable) \
         || (oldSelf.hasValue() && has(oldSelf.value().maxUnavailable) && has(oldSelf.value().minAvailable))",
    )
    .optional_old_self(true)
    .message("at most one of maxUnavailable and minAvailable may be set")
    .field_path(".minAvailable")
    .reason(Reason::FieldValueForbidden)
}

/// A node count of at least one: a positive integer or a percentage from `1%` to `100%`
/// (NodeMaintenance and NodeDisruptionBudget `maxUnavailable`, budget `minAvailable`;
/// [`crate::api::scaled_count`]). The fields carry `maxLength: 8` (a string form; an integer
/// is not checked by it): the regular expression's cost is estimated from the string's
/// longest length, about 2.2 million of the apiserver's 10 million per rule when unbounded.
pub fn positive_count() -> Rule {
    Rule::new("type(self) == int ? self >= 1 : string(self).matches('^(100|[1-9][0-9]?)%$')")
        .message("must be a positive integer or a percentage from 1% to 100%")
}

/// `healthGate.maxUnhealthy`: an integer from 0 or a percentage from `0%` to `100%` (SPEC 4.6).
pub fn unhealthy_count() -> Rule {
    Rule::new("type(self) == int ? self >= 0 : string(self).matches('^(100|[1-9]?[0-9])%$')")
        .message("must be an integer from 0 or a percentage from 0% to 100%")
}

/// A pause request's `name` is a DNS-1123 subdomain (SPEC 4.6), with Kubernetes' message as
/// the webhook gives it ([`crate::api::requester::DNS1123_SUBDOMAIN_MESSAGE`]). A CEL rule
/// rather than a schema `pattern`: a value the plain schema refuses makes the apiserver skip
/// every CEL rule of the object (module docs), and the pattern's message would be the
/// apiserver's, not Kubernetes' own for a name. The field's `maxLength` (253) bounds the
/// regular expression's cost.
pub fn dns1123_subdomain() -> Rule {
    use crate::api::requester::{DNS1123_SUBDOMAIN_FMT, DNS1123_SUBDOMAIN_MESSAGE};
    // A CEL string literal: its backslashes escaped; `matches` is unanchored RE2.
    let regex = DNS1123_SUBDOMAIN_FMT.replace('\\', "\\\\");
    Rule::new(format!("self.matches('^{regex}$')")).message(DNS1123_SUBDOMAIN_MESSAGE)
}

/// A blackout ends after it starts (SPEC 4.6). `start` and `end` are `date-time` strings,
/// which CEL reads as timestamps.
pub fn blackout_ends_after_start() -> Rule {
    Rule::new("self.end > self.start").message("must be after start").field_path(".end")
}

/// Bounds a core/v1 NodeSelector (schemars `transform`) and gives it the shape rules of SPEC
/// 3.2 that need no cluster state: at least one term; operators `In`, `NotIn`, `Exists`,
/// `DoesNotExist`, `Gt`, `Lt` (matchFields: `In`, `NotIn` on `metadata.name` only); values as
/// each operator needs them. Label key and value syntax stays with the webhook. The bounds let
/// the nodeSelector rule compare whole selectors within the apiserver's cost budget.
///
/// The operators and the field key are CEL rules rather than schema `enum`s: the apiserver
/// skips every CEL rule of an object that fails a schema check, so with enums a selector with
/// an unknown operator and an `In` without values would name only the first mistake, where
/// SPEC 3.2 wants every error at once.
pub fn node_selector_schema(schema: &mut Schema) {
    let selector = schema.as_object_mut().expect("a NodeSelector schema is an object");
    add_rule(
        selector,
        Rule::new("size(self.nodeSelectorTerms) > 0")
            .message("must have at least one term")
            .field_path(".nodeSelectorTerms")
            .reason(Reason::FieldValueRequired),
    );
    let terms = property(selector, "nodeSelectorTerms").expect("a NodeSelector has nodeSelectorTerms");
    set(terms, "maxItems", json!(MAX_SELECTOR_TERMS));
    let term = items(terms);
    let expressions = property(term, "matchExpressions").expect("a NodeSelectorTerm has matchExpressions");
    let requirement = requirements(expressions, MAX_NODE_SELECTOR_VALUES, MAX_NODE_SELECTOR_VALUE);
    add_rule(requirement, one_of("operator", NODE_OPERATORS));
    requirement_rules(requirement, true);
    let fields = property(term, "matchFields").expect("a NodeSelectorTerm has matchFields");
    let requirement = requirements(fields, MAX_NODE_SELECTOR_VALUES, MAX_NODE_SELECTOR_VALUE);
    add_rule(requirement, one_of("key", FIELD_KEYS));
    add_rule(requirement, one_of("operator", FIELD_OPERATORS));
    requirement_rules(requirement, false);
}

/// Bounds a metav1 LabelSelector (schemars `transform`) and gives it the shape rules of SPEC
/// 3.2 that need no cluster state: operators `In`, `NotIn`, `Exists`, `DoesNotExist`, values
/// as each operator needs them; see [`node_selector_schema`].
pub fn label_selector_schema(schema: &mut Schema) {
    label_selector_rules(schema.as_object_mut().expect("a LabelSelector schema is an object"));
}

fn label_selector_rules(selector: &mut Map<String, Value>) {
    let expressions = property(selector, "matchExpressions").expect("a LabelSelector has matchExpressions");
    let requirement = requirements(expressions, MAX_LABEL_SELECTOR_VALUES, MAX_LABEL_VALUE);
    add_rule(requirement, one_of("operator", LABEL_OPERATORS));
    requirement_rules(requirement, false);
    let labels = property(selector, "matchLabels").expect("a LabelSelector has matchLabels");
    set(labels, "maxProperties", json!(MAX_MATCH_LABELS));
    let value = labels.get_mut("additionalProperties").and_then(Value::as_object_mut).expect("matchLabels values");
    set(value, "maxLength", json!(MAX_LABEL_VALUE));
}

/// The rules of `spec.drainPlan` entries' podSelectors ([`label_selector_schema`]), given on
/// the spec's field rather than on [`crate::api::DrainPlanEntry`]: the status reuses that type
/// for drain targets, copies of the plan the controller must always be able to write.
pub fn drain_plan_schema(schema: &mut Schema) {
    let plan = schema.as_object_mut().expect("a drainPlan schema is an object");
    label_selector_rules(property(items(plan), "podSelector").expect("a drainPlan entry has a podSelector"));
}

/// Bounds a list of `{key, operator, values}` requirements: at most
/// [`MAX_SELECTOR_REQUIREMENTS`], each with at most `max_values` values of at most `max_value`
/// characters. Returns the requirement's schema.
fn requirements(list: &mut Map<String, Value>, max_values: u64, max_value: u64) -> &mut Map<String, Value> {
    set(list, "maxItems", json!(MAX_SELECTOR_REQUIREMENTS));
    let requirement = items(list);
    set(property(requirement, "key").expect("a requirement has a key"), "maxLength", json!(MAX_LABEL_KEY));
    set(property(requirement, "operator").expect("a requirement has an operator"), "maxLength", json!(MAX_OPERATOR));
    let values = property(requirement, "values").expect("a requirement has values");
    set(values, "maxItems", json!(max_values));
    set(items(values), "maxLength", json!(max_value));
    requirement
}

/// The requirement's `field` is one of `supported`. The apiserver puts `Invalid value:` before
/// the message, so it reads `operator: Invalid value: "Contains": supported values: "In", ...`,
/// the webhook's `Unsupported value` message in the apiserver's words.
fn one_of(field: &str, supported: &[&str]) -> Rule {
    let quoted = |q: &str| supported.iter().map(|s| format!("{q}{s}{q}")).collect::<Vec<_>>().join(", ");
    Rule::new(format!("self.{field} in [{}]", quoted("'")))
        .message(Message::Expression(format!("'\"' + self.{field} + '\": supported values: {}'", quoted("\""))))
        .field_path(format!(".{field}"))
}

/// The values a requirement's operator needs, in the webhook's words: `In` and `NotIn` some,
/// `Exists` and `DoesNotExist` none, and (node labels, `numeric`) `Gt` and `Lt` exactly one
/// integer.
fn requirement_rules(requirement: &mut Map<String, Value>, numeric: bool) {
    add_rule(
        requirement,
        Rule::new("!(self.operator in ['In', 'NotIn']) || (has(self.values) && size(self.values) > 0)")
            .message("must be specified when `operator` is 'In' or 'NotIn'")
            .field_path(".values")
            .reason(Reason::FieldValueRequired),
    );
    add_rule(
        requirement,
        Rule::new("!(self.operator in ['Exists', 'DoesNotExist']) || !has(self.values) || size(self.values) == 0")
            .message("may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
            .field_path(".values")
            .reason(Reason::FieldValueForbidden),
    );
    if numeric {
        add_rule(
            requirement,
            Rule::new("!(self.operator in ['Gt', 'Lt']) || (has(self.values) && size(self.values) == 1)")
                .message("must be specified single value when `operator` is 'Lt' or 'Gt'")
                .field_path(".values")
                .reason(Reason::FieldValueRequired),
        );
        add_rule(
            requirement,
            Rule::new(
                "!(self.operator in ['Gt', 'Lt']) || !has(self.values) || size(self.values) != 1 \
                 || self.values[0].matches('^[+-]?[0-9]+$')",
            )
            .message("must be an integer for 'Gt' or 'Lt'")
            .field_path(".values"),
        );
    }
}

fn property<'a>(schema: &'a mut Map<String, Value>, name: &str) -> Option<&'a mut Map<String, Value>> {
    schema.get_mut("properties")?.get_mut(name)?.as_object_mut()
}

fn items(list: &mut Map<String, Value>) -> &mut Map<String, Value> {
    list.get_mut("items").and_then(Value::as_object_mut).expect("an array schema has items")
}

fn set(schema: &mut Map<String, Value>, key: &str, value: Value) {
    schema.insert(key.to_owned(), value);
}

fn add_rule(schema: &mut Map<String, Value>, rule: Rule) {
    let rule = serde_json::to_value(rule).expect("a rule serializes");
    match schema.entry("x-kubernetes-validations").or_insert_with(|| json!([])) {
        Value::Array(rules) => rules.push(rule),
        other => panic!("x-kubernetes-validations is a list, not {other}"),
    }
}
