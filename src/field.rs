//! Field-path validation errors in the Kubernetes format (`spec.drainPlan[3].podType:
//! Unsupported value: "Job": supported values: "Default", "DaemonSet", "Static"`), SPEC 3.2.

use std::fmt;

/// A JSON field path such as `spec.nodeSelector.nodeSelectorTerms[0].matchExpressions[1]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldPath(String);

impl FieldPath {
    /// A root path (`"spec"`, `"status"`).
    pub fn root(name: &str) -> Self {
        FieldPath(name.to_owned())
    }

    /// `self.name`.
    pub fn child(&self, name: &str) -> Self {
        FieldPath(format!("{}.{name}", self.0))
    }

    /// `self[i]`.
    pub fn index(&self, i: usize) -> Self {
        FieldPath(format!("{}[{i}]", self.0))
    }

    /// `self[key]` (map keys, e.g. `matchLabels[app]`).
    pub fn key(&self, key: &str) -> Self {
        FieldPath(format!("{}[{key}]", self.0))
    }

    /// The path as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What is wrong with a field; the variants and their wording follow k8s.io/apimachinery
/// `field.ErrorType` so messages read like the apiserver's own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FieldErrorKind {
    /// The field is missing.
    Required,
    /// The value is malformed; carries the offending value as text.
    Invalid(String),
    /// The value is not one of the supported ones; carries the value and the supported set.
    NotSupported(String, &'static [&'static str]),
    /// The value repeats an earlier one; carries the value as text.
    Duplicate(String),
    /// The change or value is not allowed.
    Forbidden,
    /// The value is longer than the maximum; carries the maximum in characters.
    TooLong(usize),
    /// The list has more items than the maximum; carries the count and the maximum.
    TooMany(usize, usize),
}

/// One validation error: where, what kind, and a detail a person can act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// Path of the offending field.
    pub path: FieldPath,
    /// What kind of error.
    pub kind: FieldErrorKind,
    /// Human-readable detail (may be empty).
    pub detail: String,
}

impl FieldError {
    fn new(path: &FieldPath, kind: FieldErrorKind, detail: impl Into<String>) -> Self {
        FieldError { path: path.clone(), kind, detail: detail.into() }
    }

    /// A required field is missing.
    pub fn required(path: &FieldPath, detail: impl Into<String>) -> Self {
        Self::new(path, FieldErrorKind::Required, detail)
    }

    /// `value` is malformed.
    pub fn invalid(path: &FieldPath, value: impl fmt::Display, detail: impl Into<String>) -> Self {
        Self::new(path, FieldErrorKind::Invalid(value.to_string()), detail)
    }

    /// `value` is not in `supported`.
    pub fn not_supported(path: &FieldPath, value: &str, supported: &'static [&'static str]) -> Self {
        Self::new(path, FieldErrorKind::NotSupported(value.to_owned(), supported), "")
    }

    /// `value` duplicates an earlier element.
    pub fn duplicate(path: &FieldPath, value: impl fmt::Display) -> Self {
        Self::new(path, FieldErrorKind::Duplicate(value.to_string()), "")
    }

    /// Not allowed, for the reason in `detail`.
    pub fn forbidden(path: &FieldPath, detail: impl Into<String>) -> Self {
        Self::new(path, FieldErrorKind::Forbidden, detail)
    }

    /// Longer than `max` characters.
    pub fn too_long(path: &FieldPath, max: usize) -> Self {
        Self::new(path, FieldErrorKind::TooLong(max), "")
    }

    /// A list of `count` items where at most `max` are allowed.
    pub fn too_many(path: &FieldPath, count: usize, max: usize) -> Self {
        Self::new(path, FieldErrorKind::TooMany(count, max), "")
    }

    /// The `reason` of a metav1.StatusCause for this error (`FieldValueInvalid`, ...).
    pub fn cause_reason(&self) -> &'static str {
        match self.kind {
            FieldErrorKind::Required => "FieldValueRequired",
            FieldErrorKind::Invalid(_) => "FieldValueInvalid",
            FieldErrorKind::NotSupported(..) => "FieldValueNotSupported",
            FieldErrorKind::Duplicate(_) => "FieldValueDuplicate",
            FieldErrorKind::Forbidden => "FieldValueForbidden",
            FieldErrorKind::TooLong(_) => "FieldValueTooLong",
            FieldErrorKind::TooMany(..) => "FieldValueTooMany",
        }
    }

    /// The message without the path (`Unsupported value: "Job": supported values: ...`).
    pub fn message(&self) -> String {
        let body = match &self.kind {
            FieldErrorKind::Required => "Required value".to_owned(),
            FieldErrorKind::Invalid(v) => format!("Invalid value: {v:?}"),
            FieldErrorKind::NotSupported(v, supported) => {
                let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
                format!("Unsupported value: {v:?}: supported values: {}", list.join(", "))
            }
            FieldErrorKind::Duplicate(v) => format!("Duplicate value: {v}"),
            FieldErrorKind::Forbidden => "Forbidden".to_owned(),
            FieldErrorKind::TooLong(max) => format!("Too long: may not be more than {max} characters"),
            FieldErrorKind::TooMany(count, max) => format!("Too many: {count}: must have at most {max} items"),
        };
        if self.detail.is_empty() { body } else { format!("{body}: {}", self.detail) }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_render_like_kubernetes() {
        let p = FieldPath::root("spec").child("drainPlan").index(3).child("podType");
        assert_eq!(p.as_str(), "spec.drainPlan[3].podType");
        assert_eq!(FieldPath::root("m").child("matchLabels").key("app").as_str(), "m.matchLabels[app]");
    }

    #[test]
    fn messages_follow_apimachinery_wording() {
        let p = FieldPath::root("spec").child("stage");
        let e = FieldError::not_supported(&p, "Rebooting", &["Idle", "Cordon"]);
        assert_eq!(e.to_string(), r#"spec.stage: Unsupported value: "Rebooting": supported values: "Idle", "Cordon""#);
        assert_eq!(FieldError::required(&p, "").to_string(), "spec.stage: Required value");
        assert_eq!(
            FieldError::forbidden(&p, "may not move backwards").to_string(),
            "spec.stage: Forbidden: may not move backwards"
        );
        assert_eq!(e.cause_reason(), "FieldValueNotSupported");
        let many = FieldError::too_many(&FieldPath::root("spec").child("blackouts"), 33, 32);
        assert_eq!(many.to_string(), "spec.blackouts: Too many: 33: must have at most 32 items");
        assert_eq!(many.cause_reason(), "FieldValueTooMany");
    }
}
