//! Authorization through SubjectAccessReviews (SPEC 3.4): the requesting user needs
//! `delete` on every selected node. One SAR for all nodes first (empty name); if that is not
//! allowed, one per node with bounded concurrency; answers cached briefly per full identity
//! and node. Fails closed: any SAR that cannot be answered makes the outcome
//! [`AuthzOutcome::Unavailable`].

use crate::admission::{Authorizer, AuthzOutcome};
use crate::metrics::{Metrics, SarLabels};
use futures::future::BoxFuture;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::authentication::v1::UserInfo;
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec, SubjectAccessReview,
    SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};
use std::time::{Duration, Instant};

/// Tuning of the SubjectAccessReview authorizer.
#[derive(Clone, Debug)]
pub struct SarOptions {
    /// SARs in flight at once for one review.
    pub concurrency: usize,
    /// How long an answer is reused for the same identity and node.
    pub cache_ttl: Duration,
    /// Time allowed for one SAR call.
    pub timeout: Duration,
}

impl Default for SarOptions {
    fn default() -> Self {
        SarOptions { concurrency: 32, cache_ttl: Duration::from_secs(10), timeout: Duration::from_secs(3) }
    }
}

/// [`Authorizer`] backed by `authorization.k8s.io/v1` SubjectAccessReviews.
#[derive(Clone)]
pub struct SarAuthorizer {
    ask: Ask,
    cache: moka::sync::Cache<(String, String), bool>,
    options: SarOptions,
    metrics: Metrics,
}

/// Whose access is asked about.
#[derive(Clone)]
enum Ask {
    /// The requesting user's (webhook): SubjectAccessReview, which needs `create
    /// subjectaccessreviews`.
    User(Api<SubjectAccessReview>),
    /// The client's own (`review` what-if): SelfSubjectAccessReview, which every
    /// authenticated user may create; the `user` argument is ignored.
    Myself(Api<SelfSubjectAccessReview>),
}

impl Ask {
    async fn allowed(&self, user: &UserInfo, name: &str) -> kube::Result<bool> {
        let pp = PostParams::default();
        match self {
            Ask::User(api) => api.create(&pp, &review(user, name)).await.map(|r| r.status.is_some_and(|s| s.allowed)),
            Ask::Myself(api) => {
                let own = SelfSubjectAccessReview {
                    metadata: Default::default(),
                    spec: SelfSubjectAccessReviewSpec {
                        resource_attributes: review(user, name).spec.resource_attributes,
                        non_resource_attributes: None,
                    },
                    status: None,
                };
                api.create(&pp, &own).await.map(|r| r.status.is_some_and(|s| s.allowed))
            }
        }
    }
}

/// The name that stands for "every node" in a SAR (and in the cache).
const ALL_NODES: &str = "";

impl SarAuthorizer {
    /// An authorizer that sends SARs through `client`.
    pub fn new(client: Client, options: SarOptions, metrics: Metrics) -> Self {
        Self::asking(Ask::User(Api::all(client)), options, metrics)
    }

    /// An authorizer for the client's own identity (SelfSubjectAccessReview): what the
    /// `review` command uses to tell whether the current user would be allowed.
    pub fn for_myself(client: Client, options: SarOptions, metrics: Metrics) -> Self {
        Self::asking(Ask::Myself(Api::all(client)), options, metrics)
    }

    fn asking(ask: Ask, options: SarOptions, metrics: Metrics) -> Self {
        let cache = moka::sync::Cache::builder().max_capacity(100_000).time_to_live(options.cache_ttl).build();
        SarAuthorizer { ask, cache, options, metrics }
    }

    /// Whether `user` may delete node `name` (`""`: every node): from cache, else one SAR.
    async fn may_delete(&self, identity: &str, user: &UserInfo, name: &str) -> Result<bool, String> {
        let key = (identity.to_owned(), name.to_owned());
        if let Some(allowed) = self.cache.get(&key) {
            self.metrics.sar_cache_hits.inc();
            return Ok(allowed);
        }
        let started = Instant::now();
        let result = tokio::time::timeout(self.options.timeout, self.ask.allowed(user, name))
            .await
            .map_err(|_| {
                format!("SubjectAccessReview timed out after {}", humantime::format_duration(self.options.timeout))
            })
            .and_then(|r| r.map_err(|e| format!("SubjectAccessReview failed: {e}")));
        self.metrics.sar_duration.observe(started.elapsed().as_secs_f64());
        let label = match result {
            Ok(true) => "allowed",
            Ok(false) => "denied",
            Err(_) => "error",
        };
        self.metrics.sar_calls.get_or_create(&SarLabels { result: label }).inc();
        if let Ok(allowed) = result {
            self.cache.insert(key, allowed);
        }
        result
    }

    async fn decide(&self, user: &UserInfo, nodes: &[&str]) -> AuthzOutcome {
        if nodes.is_empty() {
            return AuthzOutcome::Allowed;
        }
        // The full identity: two users with the same name but other groups are not the same.
        let identity = serde_json::to_string(user).unwrap_or_default();
        match self.may_delete(&identity, user, ALL_NODES).await {
            Ok(true) => return AuthzOutcome::Allowed,
            Ok(false) => {}
            Err(e) => return AuthzOutcome::Unavailable(e),
        }
        // Boxed so the stream's item type does not name a closure over borrowed data
        // (which trips the compiler's Send proof for the outer BoxFuture).
        let identity = &identity;
        let checks: Vec<BoxFuture<'_, Result<(String, bool), String>>> = nodes
            .iter()
            .map(|n| -> BoxFuture<'_, _> {
                Box::pin(async move { self.may_delete(identity, user, n).await.map(|ok| ((*n).to_owned(), ok)) })
            })
            .collect();
        let answers: Result<Vec<(String, bool)>, String> =
            futures::stream::iter(checks).buffer_unordered(self.options.concurrency.max(1)).try_collect().await;
        match answers {
            Err(e) => AuthzOutcome::Unavailable(e),
            Ok(answers) => {
                let mut denied: Vec<String> = answers.into_iter().filter(|(_, ok)| !ok).map(|(n, _)| n).collect();
                if denied.is_empty() {
                    AuthzOutcome::Allowed
                } else {
                    denied.sort();
                    AuthzOutcome::Denied(denied)
                }
            }
        }
    }
}

/// The SAR for `verb: delete, group: "", resource: nodes, name` on behalf of `user`
/// (username, uid, groups and extra all passed through).
fn review(user: &UserInfo, name: &str) -> SubjectAccessReview {
    SubjectAccessReview {
        metadata: Default::default(),
        spec: SubjectAccessReviewSpec {
            user: user.username.clone(),
            uid: user.uid.clone(),
            groups: user.groups.clone(),
            extra: user.extra.clone(),
            resource_attributes: Some(ResourceAttributes {
                verb: Some("delete".into()),
                group: Some(String::new()),
                resource: Some("nodes".into()),
                name: (!name.is_empty()).then(|| name.to_owned()),
                ..Default::default()
            }),
            ..Default::default()
        },
        status: None,
    }
}

impl Authorizer for SarAuthorizer {
    fn authorize<'a>(
        &'a self,
        user: &'a crate::admission::review::UserInfo<'a>,
        nodes: &'a [&'a str],
    ) -> BoxFuture<'a, AuthzOutcome> {
        Box::pin(async move { self.decide(&user.to_k8s(), nodes).await })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn review_carries_the_whole_identity_and_the_node() {
        let user = UserInfo {
            username: Some("alice".into()),
            uid: Some("u-1".into()),
            groups: Some(vec!["ops".into()]),
            extra: Some([("scope".to_string(), vec!["x".to_string()])].into()),
        };
        let r = review(&user, "worker-1");
        assert_eq!(r.spec.user.as_deref(), Some("alice"));
        assert_eq!(r.spec.uid.as_deref(), Some("u-1"));
        assert_eq!(r.spec.extra, user.extra);
        let attrs = r.spec.resource_attributes.unwrap();
        assert_eq!(
            (attrs.verb.as_deref(), attrs.resource.as_deref(), attrs.name.as_deref()),
            (Some("delete"), Some("nodes"), Some("worker-1"))
        );
        assert_eq!(attrs.group.as_deref(), Some(""));
        assert_eq!(review(&user, ALL_NODES).spec.resource_attributes.unwrap().name, None);
    }
}
