//! Leader election (SPEC 1.2): one active controller, the holder of a coordination.k8s.io
//! Lease that kube-lease-manager takes, renews and releases.
//!
//! A standby also watches the Lease. kube-lease-manager alone looks at a Lease held by
//! someone else again only when the expiry it last read has passed, so a leader that steps
//! down (SIGTERM: the controller stops and releases the Lease at once, `app.rs`) would
//! leave the cluster without a controller for up to a Lease duration. On the watch event
//! of the release the standby asks afresh, so the handover takes a round trip or two.

use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder, LeaseManagerError};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The Lease this replica competes for.
#[derive(Clone)]
pub struct LeaseIdentity {
    /// Client for the Lease calls.
    pub client: Client,
    /// Lease namespace.
    pub namespace: String,
    /// Lease name (`--lease-name`).
    pub name: String,
    /// This replica's identity (`holderIdentity`).
    pub identity: String,
    /// Lease duration in seconds; the holder renews a third of it before it ends.
    pub seconds: u64,
}

/// How long to wait before asking again after a failed Lease call.
const RETRY: Duration = Duration::from_secs(1);

impl LeaseIdentity {
    async fn manager(&self) -> Result<LeaseManager, LeaseManagerError> {
        LeaseManagerBuilder::new(self.client.clone(), &self.name)
            .with_namespace(&self.namespace)
            .with_identity(&self.identity)
            .with_duration(self.seconds)
            .with_grace((self.seconds / 3).max(1))
            .build()
            .await
    }

    /// Makes sure the Lease exists (creating it if need be), so that a Lease this replica
    /// can never take (a missing namespace, no RBAC) stops the start instead of being
    /// retried for ever.
    ///
    /// # Errors
    /// The Lease could not be read or created.
    pub async fn check(&self) -> Result<(), LeaseManagerError> {
        self.manager().await.map(drop)
    }

    /// Waits until this replica holds the Lease and returns its manager (renew it with
    /// [`hold`], give it back with [`release`]); `None` once `stop` is cancelled.
    ///
    /// # Errors
    /// The Lease watch ended (it retries on its own, so only a bug ends it).
    pub async fn acquire(&self, stop: &CancellationToken) -> Result<Option<LeaseManager>, WatchEnded> {
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), &self.namespace);
        let config = watcher::Config::default().fields(&format!("metadata.name={}", self.name));
        // Every Lease state the watch shows that nobody holds; the watch retries errors with
        // kube-runtime's default backoff.
        let mut free =
            std::pin::pin!(watcher::watcher(leases, config).default_backoff().filter_map(|event| async move {
                match event {
                    Ok(watcher::Event::Apply(lease) | watcher::Event::InitApply(lease)) => {
                        (!is_held(&lease)).then_some(())
                    }
                    Ok(watcher::Event::Delete(_)) => Some(()),
                    _ => None,
                }
            }));
        loop {
            let manager = match self.manager().await {
                Ok(m) => m,
                Err(e) => {
                    tracing::warn!(error = %e, "leader election: the Lease could not be read; trying again");
                    tokio::select! {
                        () = stop.cancelled() => return Ok(None),
                        () = tokio::time::sleep(RETRY) => continue,
                    }
                }
            };
            tokio::select! {
                () = stop.cancelled() => return Ok(None),
                changed = manager.changed() => match changed {
                    Ok(true) => return Ok(Some(manager)),
                    Ok(false) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, "leader election failed; trying again");
                        tokio::time::sleep(RETRY).await;
                    }
                },
                // Released (or deleted): ask again with a manager that reads it afresh.
                freed = free.next() => if freed.is_none() { return Err(WatchEnded) },
            }
        }
    }
}

/// Keeps renewing the Lease while this replica holds it; returns when someone else holds
/// it. A failed renewal is tried again every second (kube-lease-manager's `watch` does the
/// same): the Lease is lost only once another replica took it after it expired.
pub async fn hold(manager: &LeaseManager) {
    loop {
        match manager.changed().await {
            Ok(false) => return,
            Ok(true) => {}
            Err(e) => {
                tracing::warn!(error = %e, "renewing the Lease failed; trying again");
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}

/// Gives the Lease back (a soft release: only if this replica still holds it), waiting at
/// most 5 s; a failure is logged (the Lease then expires on its own).
pub async fn release(manager: LeaseManager) {
    match tokio::time::timeout(Duration::from_secs(5), manager.release()).await {
        Ok(Ok(())) => tracing::info!("Lease released"),
        Ok(Err(e)) => tracing::warn!(error = %e, "releasing the Lease failed; it expires on its own"),
        Err(_) => tracing::warn!("releasing the Lease timed out; it expires on its own"),
    }
}

/// Whether somebody holds `lease` (a holder identity is set).
fn is_held(lease: &Lease) -> bool {
    lease.spec.as_ref().and_then(|s| s.holder_identity.as_deref()).is_some_and(|h| !h.is_empty())
}

/// The watch of the Lease ended, which kube-runtime's watcher with a backoff never does.
#[derive(Debug, thiserror::Error)]
#[error("the Lease watch ended")]
pub struct WatchEnded;
