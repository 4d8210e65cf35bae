//! The object store: every object as `serde_json::Value`, one global resourceVersion
//! counter (like etcd's revision), a change history for watches that resume from a
//! resourceVersion, and a broadcast channel for live watch events.
//!
//! Write semantics follow kube-apiserver's generic registry: `uid`, `creationTimestamp` and
//! `deletionTimestamp` are server-owned, a stale `resourceVersion` is a 409, no-op writes
//! neither bump the resourceVersion nor produce events, DELETE of an object with
//! finalizers only sets `deletionTimestamp` (and bumps `generation`), and removing the
//! last finalizer of such an object deletes it.

use super::errors::ApiError;
use super::lifecycle;
use super::meta::{
    finalizers, meta_mut, meta_str, new_uid, normalize, now_rfc3339, rfc3339, spec_part, valid_name, without_volatile,
};
use super::resources::ResourceKind;
use super::select::Filter;
use super::ssa::{self, Writer};
pub use super::types::{Change, ChangeKind, DeleteOpts, Deleted, Mode, WatchStart};
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::broadcast;

/// How many changes the history keeps before the oldest are forgotten (watches from an
/// older resourceVersion then get 410 Expired).
const HISTORY_LIMIT: usize = 25_000;

type Key = (String, String);

#[derive(Default)]
struct State {
    rv: u64,
    objects: HashMap<&'static str, BTreeMap<Key, Value>>,
    history: VecDeque<Arc<Change>>,
    compacted: u64,
}

/// The store.
pub struct Store {
    state: Mutex<State>,
    tx: broadcast::Sender<Arc<Change>>,
}

impl State {
    fn map(&mut self, res: &ResourceKind) -> &mut BTreeMap<Key, Value> {
        self.objects.entry(res.id).or_default()
    }
}

impl Store {
    /// An empty store.
    pub fn new() -> Self {
        Self { state: Mutex::new(State::default()), tx: broadcast::channel(16_384).0 }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn commit(&self, st: &mut State, res: &ResourceKind, kind: ChangeKind, object: Value, prev: Option<Value>) {
        let change = Arc::new(Change { rv: st.rv, res: res.id, kind, object, prev });
        st.history.push_back(change.clone());
        while st.history.len() > HISTORY_LIMIT {
            st.compacted = st.history.pop_front().map_or(st.compacted, |c| c.rv);
        }
        let _ = self.tx.send(change);
    }

    fn stamp(st: &mut State, obj: &mut Value) {
        st.rv += 1;
        meta_mut(obj).insert("resourceVersion".into(), json!(st.rv.to_string()));
    }

    /// Changes up to this resourceVersion have been forgotten.
    pub fn compacted(&self) -> u64 {
        self.lock().compacted
    }

    /// One object.
    pub fn get(&self, res: &ResourceKind, ns: &str, name: &str) -> Option<Value> {
        self.lock().map(res).get(&(ns.to_owned(), name.to_owned())).cloned()
    }

    /// One page of [`Store::list`]: at most `limit` of the matching objects whose key
    /// (namespace, name) comes after `after`, the list's resourceVersion, and how many
    /// matching objects follow the page. Only the page is cloned, so a paginated LIST of
    /// 100,000 pods stays linear.
    pub fn list_page(
        &self,
        res: &ResourceKind,
        filter: &Filter,
        after: Option<&Key>,
        limit: Option<usize>,
    ) -> (Vec<Value>, u64, usize) {
        let mut st = self.lock();
        let rv = st.rv;
        let lower = after.map_or(Bound::Unbounded, |a| Bound::Excluded(a.clone()));
        let mut matching = st.map(res).range((lower, Bound::Unbounded)).map(|(_, o)| o).filter(|o| filter.matches(o));
        let page: Vec<Value> = matching.by_ref().take(limit.unwrap_or(usize::MAX)).cloned().collect();
        (page, rv, matching.count())
    }

    /// Creates `obj` (POST). `ns` is the namespace of the request path.
    pub fn create(&self, res: &ResourceKind, ns: &str, mut obj: Value, writer: &Writer) -> Result<Value, ApiError> {
        if !obj.is_object() {
            return Err(ApiError::bad_request("the body of the request is not an object"));
        }
        let body_ns = meta_str(&obj, "namespace").to_owned();
        if res.namespaced && !body_ns.is_empty() && body_ns != ns {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        let mut name = meta_str(&obj, "name").to_owned();
        if name.is_empty() {
            let prefix = meta_str(&obj, "generateName");
            if prefix.is_empty() {
                let msg = "name or generateName is required";
                return Err(ApiError::invalid(res, "", "metadata.name", "FieldValueRequired", msg));
            }
            name = format!("{prefix}{}", &new_uid()[..5]);
        }
        if !valid_name(&name) {
            let msg = format!(
                "Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'"
            );
            return Err(ApiError::invalid(res, &name, "metadata.name", "FieldValueInvalid", &msg));
        }
        obj["apiVersion"] = json!(res.api_version());
        obj["kind"] = json!(res.kind);
        let m = meta_mut(&mut obj);
        m.insert("name".into(), json!(name));
        if res.namespaced {
            m.insert("namespace".into(), json!(ns));
        } else {
            m.remove("namespace");
        }
        m.insert("uid".into(), json!(new_uid()));
        m.insert("creationTimestamp".into(), json!(now_rfc3339()));
        for f in ["resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "managedFields"] {
            m.remove(f);
        }
        if res.custom {
            m.insert("generation".into(), json!(1));
            obj.as_object_mut().expect("object").remove("status");
        }
        lifecycle::admit(res, None, &mut obj)?;
        ssa::track(res, None, &mut obj, writer)?;
        let mut st = self.lock();
        let key = (if res.namespaced { ns.to_owned() } else { String::new() }, name.clone());
        if st.map(res).contains_key(&key) {
            return Err(ApiError::already_exists(res, &name));
        }
        Self::stamp(&mut st, &mut obj);
        st.map(res).insert(key, obj.clone());
        self.commit(&mut st, res, ChangeKind::Added, obj.clone(), None);
        Ok(obj)
    }

    /// Updates one object: `f` turns the stored object into the requested one (PUT body or
    /// patch result), under the store lock. A missing object is a 404, unless
    /// `create_missing` (apply, or PUT where the resource allows create-on-update): then
    /// `f(None)` is created.
    #[allow(clippy::too_many_arguments)]
    pub fn update(
        &self,
        res: &ResourceKind,
        ns: &str,
        name: &str,
        mode: Mode,
        create_missing: bool,
        writer: &Writer,
        f: impl FnOnce(Option<&Value>) -> Result<Value, ApiError>,
    ) -> Result<Value, ApiError> {
        let key = (ns.to_owned(), name.to_owned());
        let mut st = self.lock();
        let Some(old) = st.map(res).get(&key).cloned() else {
            drop(st);
            if mode == Mode::Main && create_missing {
                let obj = f(None)?;
                if meta_str(&obj, "name") != name {
                    return Err(ApiError::bad_request("the name of the object does not match the name on the URL"));
                }
                return self.create(res, ns, obj, writer);
            }
            return Err(ApiError::not_found(res, name));
        };
        let new = f(Some(&old))?;
        let rv = meta_str(&new, "resourceVersion");
        if !rv.is_empty() && rv != meta_str(&old, "resourceVersion") {
            return Err(ApiError::stale(res, name));
        }
        if meta_str(&new, "name") != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                meta_str(&new, "name")
            )));
        }
        let mut new = normalize(res, mode, &old, new)?;
        if mode == Mode::Main {
            lifecycle::admit(res, Some(&old), &mut new)?;
        }
        ssa::track(res, Some(&old), &mut new, writer)?;
        if without_volatile(&new) == without_volatile(&old) {
            return Ok(old);
        }
        Self::stamp(&mut st, &mut new);
        let deleting = !meta_str(&old, "deletionTimestamp").is_empty() && finalizers(&new).is_empty();
        if deleting {
            st.map(res).remove(&key);
            let mut gone = old.clone();
            meta_mut(&mut gone).insert("resourceVersion".into(), json!(st.rv.to_string()));
            self.commit(&mut st, res, ChangeKind::Deleted, gone, Some(old));
        } else {
            st.map(res).insert(key, new.clone());
            self.commit(&mut st, res, ChangeKind::Modified, new.clone(), Some(old));
        }
        Ok(new)
    }

    /// DELETE of one object.
    pub fn delete(&self, res: &ResourceKind, ns: &str, name: &str, opts: &DeleteOpts) -> Result<Deleted, ApiError> {
        let mut st = self.lock();
        let key = (ns.to_owned(), name.to_owned());
        let old = st.map(res).get(&key).cloned().ok_or_else(|| ApiError::not_found(res, name))?;
        if let Some(uid) = &opts.uid
            && uid != meta_str(&old, "uid")
        {
            let why = format!(
                "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                meta_str(&old, "uid")
            );
            return Err(ApiError::conflict(res, name, &why));
        }
        if let Some(rv) = &opts.resource_version
            && rv != meta_str(&old, "resourceVersion")
        {
            let why = format!(
                "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                meta_str(&old, "resourceVersion")
            );
            return Err(ApiError::conflict(res, name, &why));
        }
        let deleting = !meta_str(&old, "deletionTimestamp").is_empty();
        let pending = !finalizers(&old).is_empty() || opts.graceful.is_some_and(|g| g > 0);
        if deleting && pending {
            return Ok(if pending { Deleted::Pending(old) } else { Deleted::Gone(old) });
        }
        if pending {
            let mut new = old.clone();
            let grace = opts.graceful.unwrap_or(0);
            let at = k8s_openapi::jiff::Timestamp::now() + k8s_openapi::jiff::SignedDuration::from_secs(grace);
            let m = meta_mut(&mut new);
            m.insert("deletionTimestamp".into(), json!(rfc3339(at)));
            m.insert("deletionGracePeriodSeconds".into(), json!(grace));
            if let Some(g) = m.get("generation").and_then(Value::as_i64).filter(|g| *g > 0) {
                m.insert("generation".into(), json!(g + 1));
            }
            Self::stamp(&mut st, &mut new);
            st.map(res).insert(key, new.clone());
            self.commit(&mut st, res, ChangeKind::Modified, new.clone(), Some(old));
            return Ok(Deleted::Pending(new));
        }
        let mut gone = st.map(res).remove(&key).expect("present");
        Self::stamp(&mut st, &mut gone);
        self.commit(&mut st, res, ChangeKind::Deleted, gone.clone(), Some(old));
        Ok(Deleted::Gone(gone))
    }

    /// Ends a graceful deletion: removes the object if it still has `uid`, a
    /// `deletionTimestamp` and no finalizers.
    pub fn finish_graceful(&self, res: &ResourceKind, ns: &str, name: &str, uid: &str) {
        let mut st = self.lock();
        let key = (ns.to_owned(), name.to_owned());
        let Some(old) = st.map(res).get(&key).cloned() else { return };
        if meta_str(&old, "uid") != uid
            || meta_str(&old, "deletionTimestamp").is_empty()
            || !finalizers(&old).is_empty()
        {
            return;
        }
        let mut gone = st.map(res).remove(&key).expect("present");
        Self::stamp(&mut st, &mut gone);
        self.commit(&mut st, res, ChangeKind::Deleted, gone, Some(old));
    }

    /// Test-side upsert, bypassing admission-like checks: fills `apiVersion`, `kind`,
    /// `uid`, `creationTimestamp` (and `generation` for custom resources) when missing.
    pub fn put(&self, res: &ResourceKind, mut obj: Value) -> Value {
        obj["apiVersion"] = json!(res.api_version());
        obj["kind"] = json!(res.kind);
        let ns = if res.namespaced { meta_str(&obj, "namespace").to_owned() } else { String::new() };
        let ns = if res.namespaced && ns.is_empty() { "default".to_owned() } else { ns };
        let key = (ns.clone(), meta_str(&obj, "name").to_owned());
        assert!(!key.1.is_empty(), "put: object without metadata.name");
        let mut st = self.lock();
        let old = st.map(res).get(&key).cloned();
        let m = meta_mut(&mut obj);
        if res.namespaced {
            m.insert("namespace".into(), json!(ns));
        }
        let old_meta = |f: &str| old.as_ref().and_then(|o| o.get("metadata")?.get(f).cloned());
        // Field ownership survives a test-side replace (as it survives an update that does
        // not send managedFields), so server-side apply still removes what its manager stops
        // applying.
        m.remove("managedFields");
        if let Some(owners) = old_meta("managedFields") {
            m.insert("managedFields".into(), owners);
        }
        if !m.contains_key("uid") {
            m.insert("uid".into(), old_meta("uid").unwrap_or_else(|| json!(new_uid())));
        }
        if !m.contains_key("creationTimestamp") {
            m.insert("creationTimestamp".into(), old_meta("creationTimestamp").unwrap_or_else(|| json!(now_rfc3339())));
        }
        if res.custom {
            let given = m.get("generation").and_then(Value::as_i64);
            let g = match &old {
                Some(o) => {
                    let g = o.pointer("/metadata/generation").and_then(Value::as_i64).unwrap_or(1);
                    if spec_part(o) == spec_part(&obj) { g } else { g + 1 }
                }
                None => given.unwrap_or(1),
            };
            meta_mut(&mut obj).insert("generation".into(), json!(g));
        }
        if old.as_ref().is_some_and(|o| without_volatile(o) == without_volatile(&obj)) {
            return old.expect("checked");
        }
        Self::stamp(&mut st, &mut obj);
        st.map(res).insert(key, obj.clone());
        let kind = if old.is_some() { ChangeKind::Modified } else { ChangeKind::Added };
        self.commit(&mut st, res, kind, obj.clone(), old);
        obj
    }

    /// Test-side removal, ignoring finalizers. Returns the removed object.
    pub fn remove(&self, res: &ResourceKind, ns: &str, name: &str) -> Option<Value> {
        let mut st = self.lock();
        let old = st.map(res).remove(&(ns.to_owned(), name.to_owned()))?;
        let mut gone = old.clone();
        Self::stamp(&mut st, &mut gone);
        self.commit(&mut st, res, ChangeKind::Deleted, gone.clone(), Some(old));
        Some(gone)
    }

    /// Forgets the change history: watches from any earlier resourceVersion get 410.
    pub fn compact(&self) {
        let mut st = self.lock();
        st.history.clear();
        st.compacted = st.rv;
    }

    /// Subscribes a new watch of `res` from `from` (`None` = current state as ADDED).
    pub fn start_watch(
        &self,
        res: &ResourceKind,
        filter: &Filter,
        from: Option<u64>,
    ) -> (WatchStart, u64, broadcast::Receiver<Arc<Change>>) {
        let mut st = self.lock();
        let rx = self.tx.subscribe();
        let rv = st.rv;
        let start = match from {
            None => WatchStart::Initial(st.map(res).values().filter(|o| filter.matches(o)).cloned().collect()),
            Some(from) if from < st.compacted => WatchStart::Expired(st.compacted),
            Some(from) => {
                let first = st.history.partition_point(|c| c.rv <= from);
                WatchStart::Replay(st.history.iter().skip(first).filter(|c| c.res == res.id).cloned().collect())
            }
        };
        (start, rv, rx)
    }
}
