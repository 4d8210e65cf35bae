//! Watch streams: newline-delimited `{"type": ..., "object": ...}` events, like the
//! apiserver's watch cache.
//!
//! - `resourceVersion` absent or `"0"`: synthetic ADDED events for the current objects,
//!   then live events. No streaming lists (`sendInitialEvents`: a 400): the product's
//!   watchers list, then watch.
//! - `resourceVersion=N`: every change after N, then live events; an N older than the
//!   history gives an ERROR event with a 410 `Expired` Status.
//! - Selectors are applied to both the old and the new object, so an object that stops
//!   matching is sent as DELETED and one that starts matching as ADDED.
//! - With `allowWatchBookmarks=true`, an idle stream gets a BOOKMARK every
//!   bookmark interval; the stream ends after `timeoutSeconds`, when the test closes
//!   watches, or when the client lags too far behind (it then resumes from its last
//!   resourceVersion, as after any watch end).

use super::errors::ApiError;
use super::resources::ResourceKind;
use super::select::Filter;
use super::server::{Inner, OpenWatch, Req, lock};
use super::store::{Change, ChangeKind, WatchStart};
use axum::body::{Body, Bytes};
use hyper::{Response, header};
use serde_json::{Value, json};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How often an idle watch with `allowWatchBookmarks` gets a BOOKMARK.
const BOOKMARK_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);

fn line(kind: &str, object: &Value) -> Bytes {
    let mut v = serde_json::to_vec(&json!({"type": kind, "object": object})).expect("JSON serializes");
    v.push(b'\n');
    v.into()
}

fn bookmark(res: &ResourceKind, rv: u64) -> Bytes {
    let meta = json!({"resourceVersion": rv.to_string(), "creationTimestamp": null});
    line("BOOKMARK", &json!({"kind": res.kind, "apiVersion": res.api_version(), "metadata": meta}))
}

/// The event a watcher with `filter` sees for `change`, if any.
fn transform<'a>(change: &'a Change, filter: &Filter) -> Option<(&'static str, &'a Value)> {
    let cur = filter.matches(&change.object);
    let prev = change.prev.as_ref().is_some_and(|p| filter.matches(p));
    let kind = match (change.kind, prev, cur) {
        (ChangeKind::Added, _, true) => "ADDED",
        (ChangeKind::Modified, true, true) => "MODIFIED",
        (ChangeKind::Modified, false, true) => "ADDED",
        (ChangeKind::Modified, true, false) | (ChangeKind::Deleted, true, _) | (ChangeKind::Deleted, _, true) => {
            "DELETED"
        }
        _ => return None,
    };
    Some((kind, &change.object))
}

struct Unregister(Arc<Inner>, u64);

impl Drop for Unregister {
    fn drop(&mut self) {
        lock(&self.0.watches).retain(|w| w.id != self.1);
    }
}

struct Stream {
    res: &'static ResourceKind,
    filter: Filter,
    bookmarks: bool,
    deadline: Instant,
    token: CancellationToken,
    tx: mpsc::Sender<Bytes>,
}

/// Starts a watch of `res` and answers with its event stream.
pub fn serve(
    inner: &Arc<Inner>,
    res: &'static ResourceKind,
    filter: Filter,
    req: &Req,
) -> Result<Response<Body>, ApiError> {
    if req.param("sendInitialEvents").is_some() {
        return Err(ApiError::bad_request("the stand-in does not emulate streaming lists (sendInitialEvents)"));
    }
    let from = match req.param("resourceVersion") {
        None | Some("0") => None,
        Some(rv) => Some(rv.parse::<u64>().map_err(|_| {
            ApiError::bad_request(format!("resourceVersion: Invalid value: \"{rv}\": must be a number"))
        })?),
    };
    let timeout = req.param("timeoutSeconds").and_then(|t| t.parse().ok()).unwrap_or(1800);
    let (start, start_rv, rx) = inner.store.start_watch(res, &filter, from);
    let token = CancellationToken::new();
    let id = {
        let mut next = lock(&inner.next_watch);
        *next += 1;
        *next
    };
    lock(&inner.watches).push(OpenWatch { id, path: req.path.clone(), token: token.clone() });
    let (tx, mut body_rx) = mpsc::channel::<Bytes>(256);
    let stream = Stream {
        res,
        filter,
        bookmarks: req.param("allowWatchBookmarks") == Some("true"),
        deadline: Instant::now() + Duration::from_secs(timeout),
        token,
        tx,
    };
    let guard = Unregister(inner.clone(), id);
    let inner2 = inner.clone();
    tokio::spawn(async move {
        let _guard = guard;
        stream.run(&inner2, start, start_rv, from, rx).await;
    });
    let body = Body::from_stream(futures::stream::poll_fn(move |cx| {
        body_rx.poll_recv(cx).map(|o| o.map(Ok::<Bytes, Infallible>))
    }));
    Ok(Response::builder()
        .status(200)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body)
        .expect("response builds"))
}

impl Stream {
    async fn send(&self, bytes: Bytes) -> bool {
        self.tx.send(bytes).await.is_ok()
    }

    async fn run(
        self,
        inner: &Inner,
        start: WatchStart,
        start_rv: u64,
        from: Option<u64>,
        mut rx: broadcast::Receiver<Arc<Change>>,
    ) {
        match start {
            WatchStart::Initial(objects) => {
                for o in &objects {
                    if !self.send(line("ADDED", o)).await {
                        return;
                    }
                }
            }
            WatchStart::Replay(changes) => {
                for c in &changes {
                    if let Some((kind, obj)) = transform(c, &self.filter)
                        && !self.send(line(kind, obj)).await
                    {
                        return;
                    }
                }
            }
            WatchStart::Expired(oldest) => {
                let msg = format!("too old resource version: {} ({oldest})", from.unwrap_or_default());
                let status = ApiError::new(410, "Expired", msg).status_json();
                self.send(line("ERROR", &status)).await;
                return;
            }
        }
        let mut last = start_rv;
        let interval = BOOKMARK_INTERVAL;
        let mut tick = tokio::time::interval_at(Instant::now() + interval, interval);
        loop {
            tokio::select! {
                biased;
                () = self.token.cancelled() => return,
                () = inner.shutdown.cancelled() => return,
                () = tokio::time::sleep_until(self.deadline) => return,
                () = self.tx.closed() => return,
                r = rx.recv() => match r {
                    Ok(c) => {
                        last = c.rv;
                        if c.res != self.res.id {
                            continue;
                        }
                        if let Some((kind, obj)) = transform(&c, &self.filter)
                            && !self.send(line(kind, obj)).await
                        {
                            return;
                        }
                    }
                    Err(_) => return,
                },
                _ = tick.tick(), if self.bookmarks => {
                    if !self.send(bookmark(self.res, last)).await {
                        return;
                    }
                }
            }
        }
    }
}
