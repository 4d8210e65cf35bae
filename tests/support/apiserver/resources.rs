//! The resources the stand-in serves and how request paths map onto them.

/// Static description of one served resource.
#[derive(Debug, PartialEq, Eq)]
pub struct ResourceKind {
    /// Unique key in the store (`nodes`, `events.k8s.io/events`, ...).
    pub id: &'static str,
    /// API group (`""` = core).
    pub group: &'static str,
    /// API version.
    pub version: &'static str,
    /// Plural resource name.
    pub plural: &'static str,
    /// Kind.
    pub kind: &'static str,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Has a `status` subresource: main-resource writes keep the stored status and
    /// `/status` writes change only `status`.
    pub status_subresource: bool,
    /// A custom resource: `metadata.generation` bumps on changes outside metadata and
    /// status, `status` is dropped on create, strategic merge patch is refused (415) and
    /// list items carry `apiVersion`/`kind`.
    pub custom: bool,
}

impl ResourceKind {
    /// `v1` or `group/version`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.to_owned() } else { format!("{}/{}", self.group, self.version) }
    }

    /// `nodes` or `nodemaintenances.nodemaintenance.k8s.io`, as error messages spell it.
    pub fn qualified(&self) -> String {
        if self.group.is_empty() { self.plural.to_owned() } else { format!("{}.{}", self.plural, self.group) }
    }
}

/// Core/v1 Nodes.
pub const NODES: ResourceKind = ResourceKind {
    id: "nodes",
    group: "",
    version: "v1",
    plural: "nodes",
    kind: "Node",
    namespaced: false,
    status_subresource: true,
    custom: false,
};

/// Core/v1 Pods.
pub const PODS: ResourceKind = ResourceKind {
    id: "pods",
    group: "",
    version: "v1",
    plural: "pods",
    kind: "Pod",
    namespaced: true,
    status_subresource: true,
    custom: false,
};

/// nodemaintenance.k8s.io/v1alpha1 NodeMaintenances (the CRD).
pub const NODE_MAINTENANCES: ResourceKind = ResourceKind {
    id: "nodemaintenances",
    group: "nodemaintenance.k8s.io",
    version: "v1alpha1",
    plural: "nodemaintenances",
    kind: "NodeMaintenance",
    namespaced: false,
    status_subresource: true,
    custom: true,
};

/// nodemaintenance.k8s.io/v1alpha1 NodeDisruptionBudgets (the CRD of issue 20).
pub const NODE_DISRUPTION_BUDGETS: ResourceKind = ResourceKind {
    id: "nodedisruptionbudgets",
    group: "nodemaintenance.k8s.io",
    version: "v1alpha1",
    plural: "nodedisruptionbudgets",
    kind: "NodeDisruptionBudget",
    namespaced: false,
    status_subresource: true,
    custom: true,
};

/// coordination.k8s.io/v1 Leases.
pub const LEASES: ResourceKind = ResourceKind {
    id: "leases",
    group: "coordination.k8s.io",
    version: "v1",
    plural: "leases",
    kind: "Lease",
    namespaced: true,
    status_subresource: false,
    custom: false,
};

/// events.k8s.io/v1 Events.
pub const EVENTS: ResourceKind = ResourceKind {
    id: "events.k8s.io/events",
    group: "events.k8s.io",
    version: "v1",
    plural: "events",
    kind: "Event",
    namespaced: true,
    status_subresource: false,
    custom: false,
};

/// lifecycle.k8s.io/v1alpha1 EvictionRequests (KEP-4563, alpha in 1.37): served only when a
/// test turns them on ([`super::ApiServer::serve_eviction_requests`]), as a cluster serves
/// them only with the `EvictionRequestAPI` feature gate.
pub const EVICTION_REQUESTS: ResourceKind = ResourceKind {
    id: "lifecycle.k8s.io/evictionrequests",
    group: "lifecycle.k8s.io",
    version: "v1alpha1",
    plural: "evictionrequests",
    kind: "EvictionRequest",
    namespaced: true,
    status_subresource: true,
    custom: false,
};

/// lifecycle.k8s.io/v1alpha1 Evictions: the evictionrequest-controller's object for one
/// target, where the responders report progress; served together with
/// [`EVICTION_REQUESTS`]. No controller runs here: tests write them as it would.
pub const EVICTIONS: ResourceKind = ResourceKind {
    id: "lifecycle.k8s.io/evictions",
    group: "lifecycle.k8s.io",
    version: "v1alpha1",
    plural: "evictions",
    kind: "Eviction",
    namespaced: true,
    status_subresource: true,
    custom: false,
};

/// apps/v1 Deployments (the controller watches them for evacuation by rollout, issue 21).
pub const DEPLOYMENTS: ResourceKind = ResourceKind {
    id: "apps/deployments",
    group: "apps",
    version: "v1",
    plural: "deployments",
    kind: "Deployment",
    namespaced: true,
    status_subresource: true,
    custom: false,
};

/// policy/v1 PodDisruptionBudgets (the controller watches them for evacuation by rollout).
pub const PDBS: ResourceKind = ResourceKind {
    id: "policy/poddisruptionbudgets",
    group: "policy",
    version: "v1",
    plural: "poddisruptionbudgets",
    kind: "PodDisruptionBudget",
    namespaced: true,
    status_subresource: true,
    custom: false,
};

/// Every resource with a store.
pub const ALL: [&ResourceKind; 10] = [
    &NODES,
    &PODS,
    &NODE_MAINTENANCES,
    &NODE_DISRUPTION_BUDGETS,
    &LEASES,
    &EVENTS,
    &EVICTION_REQUESTS,
    &EVICTIONS,
    &DEPLOYMENTS,
    &PDBS,
];

impl ResourceKind {
    /// Served only while [`super::ApiServer::serve_eviction_requests`] is on.
    pub fn lifecycle(&self) -> bool {
        self.group == EVICTION_REQUESTS.group
    }
}

/// Which part of a resource a path addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The collection (list, watch, create).
    Collection,
    /// One object.
    Item(String),
    /// A subresource of one object: (name, subresource).
    Sub(String, String),
}

/// A parsed request path.
#[derive(Debug, Clone)]
pub enum Route {
    /// A stored resource.
    Resource {
        /// Which resource.
        res: &'static ResourceKind,
        /// The namespace in the path, if any.
        namespace: Option<String>,
        /// Collection, object or subresource.
        target: Target,
    },
    /// `POST /apis/authorization.k8s.io/v1/subjectaccessreviews`.
    SubjectAccessReview,
    /// `GET /version`.
    Version,
    /// `GET /apis/{group}/{version}`: the group version's resources (discovery).
    Discovery(String, String),
    /// Anything else (404).
    Unknown,
}

/// Maps a request path onto a [`Route`].
pub fn parse_path(path: &str) -> Route {
    let segs: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segs.as_slice() {
        ["version"] => return Route::Version,
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return Route::Unknown,
    };
    if group == "authorization.k8s.io" && version == "v1" && rest == ["subjectaccessreviews"] {
        return Route::SubjectAccessReview;
    }
    if rest.is_empty() {
        return Route::Discovery(group.to_owned(), version.to_owned());
    }
    let (namespace, rest) = match rest {
        ["namespaces", ns, rest @ ..] if !rest.is_empty() => (Some((*ns).to_owned()), rest),
        _ => (None, rest),
    };
    let Some(plural) = rest.first() else { return Route::Unknown };
    let Some(res) = ALL.iter().copied().find(|r| r.group == group && r.version == version && r.plural == *plural)
    else {
        return Route::Unknown;
    };
    let target = match rest {
        [_] => Target::Collection,
        [_, name] => Target::Item((*name).to_owned()),
        [_, name, sub] => Target::Sub((*name).to_owned(), (*sub).to_owned()),
        _ => return Route::Unknown,
    };
    let scoped_ok = match (res.namespaced, &namespace, &target) {
        (false, Some(_), _) => false,
        (true, None, Target::Collection) => true,
        (true, None, _) => false,
        _ => true,
    };
    if !scoped_ok {
        return Route::Unknown;
    }
    Route::Resource { res, namespace, target }
}
