//! `labelSelector` and `fieldSelector` query parameters, with the apiserver's syntax and
//! semantics (`!=` and `notin` match objects without the label; unsupported field labels
//! are a 400).

use super::errors::ApiError;
use super::resources::ResourceKind;
use serde_json::Value;

#[derive(Debug, Clone)]
enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

#[derive(Debug, Clone)]
struct FieldReq {
    field: String,
    equal: bool,
    value: String,
}

/// What a list or watch is restricted to: namespace, labels and fields.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    namespace: Option<String>,
    labels: Vec<LabelReq>,
    fields: Vec<FieldReq>,
}

fn split_top_level(s: &str) -> Vec<String> {
    let (mut out, mut cur, mut depth) = (Vec::new(), String::new(), 0i32);
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur);
    out.into_iter().map(|t| t.trim().to_owned()).filter(|t| !t.is_empty()).collect()
}

fn parse_label_term(term: &str) -> Result<LabelReq, String> {
    if let Some(open) = term.find('(') {
        let close = term.rfind(')').filter(|c| *c > open).ok_or_else(|| format!("unclosed '(' in {term:?}"))?;
        let head: Vec<&str> = term[..open].split_whitespace().collect();
        let values: Vec<String> =
            term[open + 1..close].split(',').map(|v| v.trim().to_owned()).filter(|v| !v.is_empty()).collect();
        return match head.as_slice() {
            [key, "in"] => Ok(LabelReq::In((*key).to_owned(), values)),
            [key, "notin"] => Ok(LabelReq::NotIn((*key).to_owned(), values)),
            _ => Err(format!("unable to parse requirement: {term:?}")),
        };
    }
    if let Some(key) = term.strip_prefix('!') {
        return Ok(LabelReq::NotExists(key.trim().to_owned()));
    }
    for (op, neg) in [("!=", true), ("==", false), ("=", false)] {
        if let Some((k, v)) = term.split_once(op) {
            let (k, v) = (k.trim().to_owned(), v.trim().to_owned());
            return Ok(if neg { LabelReq::NotEq(k, v) } else { LabelReq::Eq(k, v) });
        }
    }
    if term.contains(char::is_whitespace) {
        return Err(format!("unable to parse requirement: {term:?}"));
    }
    Ok(LabelReq::Exists(term.to_owned()))
}

/// The value of a field label on an object (`metadata.name`, `spec.nodeName`, ...), as the
/// apiserver's field set renders it: missing strings are `""`, missing booleans `false`.
fn field_value(obj: &Value, field: &str) -> String {
    let pointer = format!("/{}", field.replace('.', "/"));
    match obj.pointer(&pointer) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::Null) | None if matches!(field, "spec.unschedulable" | "spec.hostNetwork") => "false".into(),
        _ => String::new(),
    }
}

impl Filter {
    /// Parses the selectors of a list or watch on `res` in `namespace`.
    pub fn parse(
        res: &ResourceKind,
        namespace: Option<&str>,
        label_selector: Option<&str>,
        field_selector: Option<&str>,
    ) -> Result<Self, ApiError> {
        let mut filter = Filter { namespace: namespace.map(str::to_owned), ..Filter::default() };
        for term in split_top_level(label_selector.unwrap_or_default()) {
            filter.labels.push(parse_label_term(&term).map_err(ApiError::bad_request)?);
        }
        for term in split_top_level(field_selector.unwrap_or_default()) {
            let (field, equal, value) = if let Some((f, v)) = term.split_once("!=") {
                (f, false, v)
            } else if let Some((f, v)) = term.split_once("==") {
                (f, true, v)
            } else if let Some((f, v)) = term.split_once('=') {
                (f, true, v)
            } else {
                return Err(ApiError::bad_request(format!("invalid selector: '{term}'; can't understand '{term}'")));
            };
            let field = field.trim();
            let known = matches!(field, "metadata.name" | "metadata.namespace") || res.field_labels.contains(&field);
            if !known {
                return Err(ApiError::bad_request(format!("field label not supported: {field}")));
            }
            filter.fields.push(FieldReq { field: field.to_owned(), equal, value: value.trim().to_owned() });
        }
        Ok(filter)
    }

    /// Whether `obj` is in the namespace and matches both selectors.
    pub fn matches(&self, obj: &Value) -> bool {
        if let Some(ns) = &self.namespace
            && obj.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default() != ns
        {
            return false;
        }
        let empty = serde_json::Map::new();
        let labels = obj.pointer("/metadata/labels").and_then(Value::as_object).unwrap_or(&empty);
        let label = |k: &str| labels.get(k).and_then(Value::as_str);
        let labels_ok = self.labels.iter().all(|r| match r {
            LabelReq::Eq(k, v) => label(k) == Some(v.as_str()),
            LabelReq::NotEq(k, v) => label(k) != Some(v.as_str()),
            LabelReq::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            LabelReq::NotIn(k, vs) => label(k).is_none_or(|l| vs.iter().all(|v| v != l)),
            LabelReq::Exists(k) => labels.contains_key(k),
            LabelReq::NotExists(k) => !labels.contains_key(k),
        });
        labels_ok && self.fields.iter().all(|f| (field_value(obj, &f.field) == f.value) == f.equal)
    }
}
