//! `labelSelector` on lists and watches, in the two forms the product sends (`key=value` and
//! `key`: its EvictionRequests by label and by requester). Other selector forms and every
//! `fieldSelector` are a 400 naming what the stand-in does not emulate: what a real apiserver
//! selects is tested on one (tests/envtest_*.rs).

use super::errors::ApiError;
use serde_json::Value;

#[derive(Debug, Clone)]
enum LabelReq {
    Eq(String, String),
    Exists(String),
}

/// What a list or watch is restricted to: namespace and labels.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    namespace: Option<String>,
    labels: Vec<LabelReq>,
}

fn parse_label_term(term: &str) -> Result<LabelReq, ApiError> {
    let unsupported = || ApiError::bad_request(format!("the stand-in does not emulate the label selector {term:?}"));
    if term.contains(['!', '(', ' ']) {
        return Err(unsupported());
    }
    match term.split_once('=') {
        Some((k, v)) if !k.is_empty() && !v.starts_with('=') => Ok(LabelReq::Eq(k.to_owned(), v.to_owned())),
        Some(_) => Err(unsupported()),
        None => Ok(LabelReq::Exists(term.to_owned())),
    }
}

impl Filter {
    /// Parses the selectors of a list or watch in `namespace`.
    pub fn parse(
        namespace: Option<&str>,
        label_selector: Option<&str>,
        field_selector: Option<&str>,
    ) -> Result<Self, ApiError> {
        if let Some(fields) = field_selector {
            return Err(ApiError::bad_request(format!("the stand-in does not emulate field selectors ({fields:?})")));
        }
        let mut filter = Filter { namespace: namespace.map(str::to_owned), ..Filter::default() };
        for term in label_selector.unwrap_or_default().split(',').map(str::trim).filter(|t| !t.is_empty()) {
            filter.labels.push(parse_label_term(term)?);
        }
        Ok(filter)
    }

    /// Whether `obj` is in the namespace and matches the label selector.
    pub fn matches(&self, obj: &Value) -> bool {
        if let Some(ns) = &self.namespace
            && obj.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or_default() != ns
        {
            return false;
        }
        let empty = serde_json::Map::new();
        let labels = obj.pointer("/metadata/labels").and_then(Value::as_object).unwrap_or(&empty);
        self.labels.iter().all(|r| match r {
            LabelReq::Eq(k, v) => labels.get(k).and_then(Value::as_str) == Some(v.as_str()),
            LabelReq::Exists(k) => labels.contains_key(k),
        })
    }
}
