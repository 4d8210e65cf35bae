//! The firing alerts the health gates read (SPEC 4.6 `healthGate.alerts`), kept fresh beside
//! the loop: a task of the leadership term reads Prometheus through
//! [`AlertsReader`] (at most every 15 s, and only while some NodeDisruptionBudget has alert
//! matchers) and publishes each new answer. A changed answer is a trigger of the loop; an
//! unchanged one wakes nothing, so a quiet cluster decides nothing every 15 s.
//!
//! A read runs in this task, not in the loop: a Prometheus that hangs delays its own answer
//! (bounded by `--prometheus-timeout`), never a decision.

use crate::api::{AlertGate, NodeDisruptionBudget};
use crate::cluster::alerts::AlertsReader;
use crate::gates::AlertsRead;
use kube::ResourceExt;
use kube::runtime::reflector::Store;
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::watch;

/// Whether some budget reads alerts.
fn wanted(budgets: &Store<NodeDisruptionBudget>) -> bool {
    budgets.state().iter().any(|b| b.spec.health_gate.as_ref().is_some_and(|h| h.alerts.is_some()))
}

/// The alert gate of each budget that reads alerts, by name.
fn alert_gates(budgets: &Store<NodeDisruptionBudget>) -> BTreeMap<String, AlertGate> {
    let gate = |b: &NodeDisruptionBudget| b.spec.health_gate.as_ref().and_then(|h| h.alerts.clone());
    budgets.state().iter().filter_map(|b| Some((b.name_any(), gate(b)?))).collect()
}

/// Reads alerts into `published` (with the alert gates each read was made for) for as long as it is polled (the term drives it; it never
/// ends by itself): while a budget of `budgets` has alert matchers, a read when
/// [`AlertsReader::next_read_at`] says, else it waits for the next budget change
/// (`budget_changes`). Without `--prometheus-url` it publishes nothing: the snapshot stays
/// [`AlertsView::NotConfigured`], which closes every alert gate.
pub async fn keep_fresh(
    mut reader: AlertsReader,
    budgets: Store<NodeDisruptionBudget>,
    mut budget_changes: watch::Receiver<()>,
    published: watch::Sender<Arc<AlertsRead>>,
) {
    loop {
        let due = reader.next_read_at(std::time::Instant::now());
        match due {
            Some(at) if wanted(&budgets) => {
                tokio::time::sleep_until(at.into()).await;
                // The gates as they are when the read starts: a budget that starts reading
                // alerts later stays closed until the next read.
                let read_for = alert_gates(&budgets);
                let view = (*reader.refresh(std::time::Instant::now()).await).clone();
                let answer = AlertsRead { view, read_for: Some(read_for) };
                published.send_if_modified(|current| {
                    let changed = **current != answer;
                    *current = Arc::new(answer);
                    changed
                });
            }
            // Nothing to read for now: wait for a budget that asks.
            _ => {
                if budget_changes.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        }
    }
}
