//! Types shared by the store, the watch streams and the handlers.

use serde_json::Value;
use std::sync::Arc;

/// The type of a watch event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeKind {
    /// ADDED.
    Added,
    /// MODIFIED.
    Modified,
    /// DELETED.
    Deleted,
}

impl ChangeKind {}

/// One committed change.
#[derive(Debug)]
pub struct Change {
    /// The resourceVersion the change produced.
    pub rv: u64,
    /// [`ResourceKind::id`] of the changed object.
    pub res: &'static str,
    /// What happened.
    pub kind: ChangeKind,
    /// The object after the change (for DELETED, the last state with the deletion's rv).
    pub object: Value,
    /// The object before the change (selector transitions in watches).
    pub prev: Option<Value>,
}

/// Which part of an object a write may change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The main resource: `status` is kept as stored when the resource has a status
    /// subresource.
    Main,
    /// The `status` subresource: only `status` changes.
    Status,
}

/// DELETE options that the stand-in honours.
#[derive(Clone, Debug, Default)]
pub struct DeleteOpts {
    /// `preconditions.uid`.
    pub uid: Option<String>,
    /// `preconditions.resourceVersion`.
    pub resource_version: Option<String>,
    /// Graceful deletion: keep the object with `deletionTimestamp` (the caller removes it
    /// later with [`Store::finish_graceful`]).
    pub graceful: Option<i64>,
}

/// Outcome of a DELETE.
#[derive(Debug)]
pub enum Deleted {
    /// The object is gone (its last state).
    Gone(Value),
    /// The object remains, with `deletionTimestamp` (finalizers or graceful deletion).
    Pending(Value),
}

/// Where a new watch starts.
pub enum WatchStart {
    /// Synthetic ADDED events for these current objects.
    Initial(Vec<Value>),
    /// Replay of these changes (newer than the requested resourceVersion).
    Replay(Vec<Arc<Change>>),
    /// The requested resourceVersion is older than the history: 410 Expired.
    Expired(u64),
}
