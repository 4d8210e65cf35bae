//! Authorization of NodeMaintenance writes (SPEC 3.4): the requesting user needs `delete`
//! on every node the maintenance selects. The check is behind [`Authorizer`] so that the
//! decision stays pure; cluster mode implements it with SubjectAccessReviews, standalone mode
//! with [`StandaloneAuthorizer`].

use super::review::UserInfo;
use futures::future::BoxFuture;
use std::collections::BTreeSet;

/// The answer of an [`Authorizer`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuthzOutcome {
    /// The user may delete every node asked about.
    Allowed,
    /// The user may not delete these nodes (sorted, never empty).
    Denied(Vec<String>),
    /// The authorizer could not answer (apiserver error, timeout); carries the cause. The
    /// request is then denied with 503 (fail closed).
    Unavailable(String),
}

/// Answers "may this user delete these nodes?" (SPEC 3.4).
pub trait Authorizer: Send + Sync {
    /// Checks `verb: delete, group: "", resource: nodes` on each of `nodes` (names, borrowed
    /// from the caller's index) for `user`. Returns [`AuthzOutcome::Allowed`] for an empty list.
    fn authorize<'a>(&'a self, user: &'a UserInfo<'a>, nodes: &'a [&'a str]) -> BoxFuture<'a, AuthzOutcome>;
}

/// Standalone authorization (SPEC 5): like Kubernetes, members of `system:masters` may do
/// anything; so may the users and groups given on the command line; everyone else is denied.
#[derive(Clone, Debug, Default)]
pub struct StandaloneAuthorizer {
    users: BTreeSet<String>,
    groups: BTreeSet<String>,
}

impl StandaloneAuthorizer {
    /// An authorizer that also allows these user names and group names.
    pub fn new(users: impl IntoIterator<Item = String>, groups: impl IntoIterator<Item = String>) -> Self {
        let mut groups: BTreeSet<String> = groups.into_iter().collect();
        groups.insert("system:masters".into());
        StandaloneAuthorizer { users: users.into_iter().collect(), groups }
    }

    fn allows(&self, user: &UserInfo) -> bool {
        user.username.as_deref().is_some_and(|u| self.users.contains(u))
            || user.groups.iter().flatten().any(|g| self.groups.contains(g.as_ref()))
    }
}

impl Authorizer for StandaloneAuthorizer {
    fn authorize<'a>(&'a self, user: &'a UserInfo<'a>, nodes: &'a [&'a str]) -> BoxFuture<'a, AuthzOutcome> {
        let outcome = if nodes.is_empty() || self.allows(user) {
            AuthzOutcome::Allowed
        } else {
            let mut denied: Vec<String> = nodes.iter().map(|n| (*n).to_owned()).collect();
            denied.sort();
            AuthzOutcome::Denied(denied)
        };
        Box::pin(std::future::ready(outcome))
    }
}

/// How many denied node names a message lists before `and N more`.
const LISTED: usize = 10;

/// The 403 message naming the denied nodes, bounded (SPEC 3.4): `user "alice" may not delete
/// nodes n1, n2 and 47 more; a NodeMaintenance needs "delete" on every node it selects`.
pub fn denied_message(user: &UserInfo, denied: &[String]) -> String {
    let who = user.username.as_deref().unwrap_or("");
    let noun = if denied.len() == 1 { "node" } else { "nodes" };
    let listed = &denied[..denied.len().min(LISTED)];
    let rest = denied.len() - listed.len();
    let names = match (listed, rest) {
        (_, r) if r > 0 => format!("{} and {r} more", listed.join(", ")),
        ([only], _) => only.clone(),
        ([init @ .., last], _) => format!("{} and {last}", init.join(", ")),
        ([], _) => String::new(),
    };
    format!("user {who:?} may not delete {noun} {names}; a NodeMaintenance needs \"delete\" on every node it selects")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, groups: &[&str]) -> UserInfo<'static> {
        UserInfo {
            username: Some(name.to_owned().into()),
            groups: Some(groups.iter().map(|g| g.to_string().into()).collect()),
            ..Default::default()
        }
    }

    fn names(n: usize) -> Vec<String> {
        (1..=n).map(|i| format!("n{i}")).collect()
    }

    fn borrowed(names: &[String]) -> Vec<&str> {
        names.iter().map(String::as_str).collect()
    }

    #[tokio::test]
    async fn standalone_allows_system_masters_and_listed_subjects_only() {
        let a = StandaloneAuthorizer::new(["alice".to_string()], ["ops".to_string()]);
        let owned = names(2);
        let nodes = borrowed(&owned);
        assert_eq!(a.authorize(&user("admin", &["system:masters"]), &nodes).await, AuthzOutcome::Allowed);
        assert_eq!(a.authorize(&user("alice", &[]), &nodes).await, AuthzOutcome::Allowed);
        assert_eq!(a.authorize(&user("carol", &["ops"]), &nodes).await, AuthzOutcome::Allowed);
        assert_eq!(a.authorize(&user("bob", &["dev"]), &nodes).await, AuthzOutcome::Denied(owned.clone()));
        assert_eq!(a.authorize(&user("bob", &["dev"]), &[]).await, AuthzOutcome::Allowed);
    }

    #[test]
    fn denied_message_names_nodes_bounded() {
        let u = user("alice", &[]);
        assert_eq!(
            denied_message(&u, &names(1)),
            "user \"alice\" may not delete node n1; a NodeMaintenance needs \"delete\" on every node it selects"
        );
        assert!(denied_message(&u, &names(3)).contains("nodes n1, n2 and n3;"));
        assert!(denied_message(&u, &names(59)).contains("n9, n10 and 49 more;"));
    }
}
