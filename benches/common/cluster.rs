//! A realistic cluster as JSON, for the benches that fill caches (`controller_rss`,
//! `pass_admission`): Nodes as kubelets on cloud VMs report them, Pods as their controllers
//! make them (7 KiB of JSON on average), and `MAINTENANCES` Drain-stage NodeMaintenances over
//! `RACKS` racks, each draining two neighbouring racks (every node is selected by two). Each
//! node is held and cordoned by the two maintenances that select it, as the controller
//! leaves a node it drains, so that a planning pass over these caches plans every node.

use node_maintenance::api::{DrainPlanEntry, MAINTENANCES_ANNOTATION, NodeMaintenanceNodeStatus, NodeRef, PodType};
use serde_json::{Value, json};

use super::plans::user_plan;

/// Pods per node.
pub const PODS_PER_NODE: usize = 20;
/// Drain-stage NodeMaintenances.
pub const MAINTENANCES: usize = 10;
const RACKS: usize = 10;

fn node_name(n: usize) -> String {
    format!("worker-{n:05}")
}

fn rack(n: usize, nodes: usize) -> usize {
    n * RACKS / nodes
}

/// A pseudo-random hex string (deterministic), e.g. for digests and uids.
fn hex(seed: usize, len: usize) -> String {
    let mut x = (seed as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut s = String::with_capacity(len);
    while s.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.push_str(&format!("{x:016x}"));
    }
    s.truncate(len);
    s
}

pub fn uid(seed: usize) -> String {
    let h = hex(seed, 32);
    format!("{}-{}-{}-{}-{}", &h[..8], &h[8..12], &h[12..16], &h[16..20], &h[20..])
}

const IMAGES: [&str; 12] = [
    "registry.k8s.io/kube-proxy",
    "docker.io/calico/node",
    "docker.io/calico/cni",
    "quay.io/prometheus/node-exporter",
    "docker.io/fluent/fluent-bit",
    "registry.k8s.io/pause",
    "docker.io/library/postgres",
    "docker.io/library/redis",
    "ghcr.io/example/web",
    "ghcr.io/example/api",
    "ghcr.io/example/worker",
    "docker.io/library/nginx",
];

/// A Node as a kubelet on a cloud VM reports it (status included, so stripping matters).
pub fn node(n: usize, nodes: usize) -> Value {
    let name = node_name(n);
    let zone = ["a", "b", "c"][n % 3];
    let images: Vec<Value> = (0..40)
        .map(|i| {
            let repo = IMAGES[i % IMAGES.len()];
            let tag = format!("v1.{}.{}", i / IMAGES.len(), i % 7);
            json!({
                "names": [format!("{repo}@sha256:{}", hex(i * 7919 + 1, 64)), format!("{repo}:{tag}")],
                "sizeBytes": 10_000_000 + i * 1_234_567,
            })
        })
        .collect();
    let cond = |t: &str, s: &str, reason: &str, msg: &str| {
        json!({"type": t, "status": s, "reason": reason, "message": msg,
            "lastHeartbeatTime": "2026-11-21T23:40:00Z", "lastTransitionTime": "2026-11-21T23:24:10Z"})
    };
    let mut annotations = json!({
        "node.alpha.kubernetes.io/ttl": "0",
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
        "csi.volume.kubernetes.io/nodeid": format!("{{\"ebs.csi.aws.com\":\"i-{}\"}}", hex(n, 17)),
        "projectcalico.org/IPv4Address": format!("10.{}.{}.{}/16", n / 65536, (n / 256) % 256, n % 256),
    });
    let mut taints = vec![];
    // Mid-drain state: a third of the nodes already reached a floor, a tenth carry the taint.
    if n.is_multiple_of(3) {
        let status = NodeMaintenanceNodeStatus {
            node_ref: NodeRef { name: name.clone() },
            drain_targets: vec![DrainPlanEntry::new(PodType::Default, 1000)],
            ..Default::default()
        };
        annotations["nodemaintenance.k8s.io/maintenance-status"] =
            json!(serde_json::to_string(&status).expect("serializes"));
    }
    if n.is_multiple_of(10) {
        taints.push(json!({"key": "nodemaintenance.k8s.io/draining", "effect": "NoSchedule"}));
    }
    // Held by the two maintenances that select its rack (`maintenance`), and cordoned.
    let r = rack(n, nodes);
    annotations[MAINTENANCES_ANNOTATION] = json!(
        json!({
            "maintenances": [format!("maintenance-{}", (r + RACKS - 1) % RACKS), format!("maintenance-{r}")],
            "unschedulableBefore": false,
        })
        .to_string()
    );
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "beta.kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/instance-type": "m6i.2xlarge",
                "beta.kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "node.kubernetes.io/instance-type": "m6i.2xlarge",
                "topology.kubernetes.io/region": "eu-west-1",
                "topology.kubernetes.io/zone": format!("eu-west-1{zone}"),
                "pool": "general",
                "example.com/rack": format!("rack-{}", rack(n, nodes)),
            },
            "annotations": annotations,
        },
        "spec": {
            "podCIDR": format!("10.{}.{}.0/24", 64 + n / 256, n % 256),
            "podCIDRs": [format!("10.{}.{}.0/24", 64 + n / 256, n % 256)],
            "providerID": format!("aws:///eu-west-1{zone}/i-{}", hex(n, 17)),
            "taints": taints,
            "unschedulable": true,
        },
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": format!("10.0.{}.{}", n / 256, n % 256)},
                {"type": "InternalDNS", "address": format!("ip-10-0-{}-{}.eu-west-1.compute.internal", n / 256, n % 256)},
                {"type": "Hostname", "address": format!("ip-10-0-{}-{}.eu-west-1.compute.internal", n / 256, n % 256)},
            ],
            "allocatable": {"cpu": "7910m", "ephemeral-storage": "95551679124", "hugepages-1Gi": "0",
                "hugepages-2Mi": "0", "memory": "31482280Ki", "pods": "110"},
            "capacity": {"cpu": "8", "ephemeral-storage": "104845292Ki", "hugepages-1Gi": "0",
                "hugepages-2Mi": "0", "memory": "32496104Ki", "pods": "110"},
            "conditions": [
                cond("NetworkUnavailable", "False", "CalicoIsUp", "Calico is running on this node"),
                cond("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
                cond("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
                cond("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
                cond("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "images": images,
            "nodeInfo": {
                "architecture": "amd64", "bootID": uid(n + 1), "containerRuntimeVersion": "containerd://1.7.27",
                "kernelVersion": "6.1.132-147.221.amzn2023.x86_64", "kubeProxyVersion": "v1.33.1",
                "kubeletVersion": "v1.33.1", "machineID": hex(n + 2, 32), "operatingSystem": "linux",
                "osImage": "Amazon Linux 2023.7.20250527", "systemUUID": uid(n + 3),
            },
        },
    })
}

const APPS: [&str; 8] = ["web", "api", "postgres", "redis", "worker", "batch", "search", "queue"];
const PRIORITIES: [i32; 6] = [0, 0, 1000, 5000, 1_000_000_000, 2_000_000_000];

fn container(name: &str, image: &str, n_env: usize, seed: usize) -> Value {
    let env: Vec<Value> = (0..n_env)
        .map(|i| match i % 3 {
            0 => json!({"name": format!("{}_SETTING_{i}", name.to_uppercase()), "value": format!("value-{}", hex(seed + i, 12))}),
            1 => json!({"name": format!("POD_FIELD_{i}"), "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}}),
            _ => json!({"name": format!("SECRET_{i}"), "valueFrom": {"secretKeyRef": {"name": format!("{name}-secrets"), "key": format!("key-{i}")}}}),
        })
        .collect();
    json!({
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "args": ["--config=/etc/app/config.yaml", "--log-format=json", format!("--listen=:{}", 8000 + seed % 100)],
        "env": env,
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}, {"name": "metrics", "containerPort": 9090, "protocol": "TCP"}],
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP"}, "initialDelaySeconds": 10,
            "periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3},
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "http", "scheme": "HTTP"}, "periodSeconds": 5,
            "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 3},
        "volumeMounts": [
            {"name": "config", "mountPath": "/etc/app", "readOnly": true},
            {"name": "data", "mountPath": "/var/lib/app"},
            {"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true},
        ],
        "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "runAsNonRoot": true,
            "capabilities": {"drop": ["ALL"]}},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    })
}

fn container_status(name: &str, image: &str, seed: usize) -> Value {
    json!({
        "containerID": format!("containerd://{}", hex(seed, 64)),
        "image": image,
        "imageID": format!("{}@sha256:{}", image.split(':').next().unwrap_or(image), hex(seed + 1, 64)),
        "lastState": {},
        "name": name,
        "ready": true,
        "restartCount": seed % 3,
        "started": true,
        "state": {"running": {"startedAt": "2026-11-21T23:30:12Z"}},
        "volumeMounts": [
            {"name": "config", "mountPath": "/etc/app", "readOnly": true, "recursiveReadOnly": "Disabled"},
            {"name": "data", "mountPath": "/var/lib/app"},
            {"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true,
                "recursiveReadOnly": "Disabled"},
        ],
    })
}

/// Pod `k` of node `n`: 3 DaemonSet pods per node, a static pod on every fourth node, the
/// rest from Deployments (ReplicaSets), with the planner bench's priorities and app labels.
pub fn pod(n: usize, k: usize) -> Value {
    let id = n * PODS_PER_NODE + k;
    let node = node_name(n);
    // Workload `w` owns 7 consecutive pods; postgres and redis run as StatefulSets.
    let w = id / 7;
    let (kind, app, priority) = match k {
        0 => ("DaemonSet", "logging", 2_000_001_000),
        1 => ("DaemonSet", "kube-proxy", 2_000_001_000),
        2 => ("DaemonSet", "node-exporter", 1_000_000_000),
        3 if n.is_multiple_of(4) => ("Node", "etcd", 2_000_001_000),
        _ => match APPS[w % APPS.len()] {
            app @ ("postgres" | "redis") => ("StatefulSet", app, PRIORITIES[w % PRIORITIES.len()]),
            app => ("ReplicaSet", app, PRIORITIES[w % PRIORITIES.len()]),
        },
    };
    let hash = hex(w, 10);
    let (namespace, owner, name) = match kind {
        "DaemonSet" => ("kube-system".to_owned(), app.to_owned(), format!("{app}-{:05x}", id * 7 % 0xF_FFFF)),
        "Node" => ("kube-system".to_owned(), node.clone(), format!("{app}-{node}")),
        "StatefulSet" => {
            let sts = format!("{app}-{w}");
            (format!("team-{}", w % 40), sts.clone(), format!("{sts}-{}", id % 7))
        }
        _ => {
            let rs = format!("{app}-{hash}");
            (format!("team-{}", w % 40), rs.clone(), format!("{rs}-{}", &hex(id, 5)))
        }
    };
    // As the controllers set them: equal within a ReplicaSet or DaemonSet, per pod in a
    // StatefulSet.
    let mut labels = match kind {
        "DaemonSet" => json!({"app": app, "controller-revision-hash": hex(k + 77, 10), "pod-template-generation": "3"}),
        "Node" => json!({"component": app, "tier": "control-plane"}),
        _ => json!({
            "app": app,
            "app.kubernetes.io/name": app,
            "app.kubernetes.io/instance": format!("{app}-{}", w % 40),
            "app.kubernetes.io/version": "1.4.2",
        }),
    };
    match kind {
        "ReplicaSet" => labels["pod-template-hash"] = json!(hash),
        "StatefulSet" => {
            labels["controller-revision-hash"] = json!(format!("{owner}-{hash}"));
            labels["statefulset.kubernetes.io/pod-name"] = json!(name);
            labels["apps.kubernetes.io/pod-index"] = json!((id % 7).to_string());
        }
        _ => {}
    }
    if matches!(app, "redis" | "search") {
        labels["tier"] = json!("cache");
    }
    let mut annotations = json!({
        "kubectl.kubernetes.io/restartedAt": "2026-11-20T10:00:00Z",
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "9090",
        "checksum/config": hex(w + 11, 64),
    });
    if kind == "Node" {
        annotations["kubernetes.io/config.mirror"] = json!(hex(id, 32));
        annotations["kubernetes.io/config.source"] = json!("file");
    }
    let image = |c: &str| format!("ghcr.io/example/{c}:1.4.{}", id % 5);
    let mut names = vec![app.to_owned(), "sidecar".to_owned()];
    if id.is_multiple_of(4) {
        names.push("proxy".to_owned());
    }
    let containers: Vec<Value> =
        names.iter().enumerate().map(|(i, c)| container(c, &image(c), 5 - 2 * i.min(2), id * 3 + i)).collect();
    let statuses: Vec<Value> =
        names.iter().enumerate().map(|(i, c)| container_status(c, &image(c), id * 3 + i)).collect();
    let mut tolerations = vec![
        json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}),
        json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}),
    ];
    if kind == "DaemonSet" {
        tolerations
            .push(json!({"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}));
        if k == 2 && n.is_multiple_of(5) {
            tolerations.push(json!({"operator": "Exists"}));
        }
    }
    let cond = |t: &str| json!({"type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-11-21T23:30:15Z"});
    let phase = if id.is_multiple_of(211) { "Succeeded" } else { "Running" };
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name,
            "generateName": format!("{owner}-"),
            "namespace": namespace,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [{"apiVersion": if kind == "Node" { "v1" } else { "apps/v1" }, "kind": kind, "name": owner,
                "uid": uid(w + 5), "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": {
            "containers": containers,
            "volumes": [
                {"name": "config", "configMap": {"name": format!("{app}-config"), "defaultMode": 420}},
                {"name": "data", "emptyDir": {"sizeLimit": "1Gi"}},
                {"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
                    {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
                ]}},
            ],
            "dnsPolicy": "ClusterFirst",
            "enableServiceLinks": true,
            "nodeName": node,
            "preemptionPolicy": "PreemptLowerPriority",
            "priority": priority,
            "restartPolicy": "Always",
            "schedulerName": "default-scheduler",
            "securityContext": {"fsGroup": 2000, "runAsUser": 1000},
            "serviceAccount": app,
            "serviceAccountName": app,
            "terminationGracePeriodSeconds": 30,
            "tolerations": tolerations,
        },
        "status": {
            "conditions": [cond("PodReadyToStartContainers"), cond("Initialized"), cond("Ready"), cond("ContainersReady"), cond("PodScheduled")],
            "containerStatuses": statuses,
            "hostIP": format!("10.0.{}.{}", n / 256, n % 256),
            "hostIPs": [{"ip": format!("10.0.{}.{}", n / 256, n % 256)}],
            "phase": phase,
            "podIP": format!("10.{}.{}.{}", 64 + n / 256, n % 256, k + 2),
            "podIPs": [{"ip": format!("10.{}.{}.{}", 64 + n / 256, n % 256, k + 2)}],
            "qosClass": "Burstable",
            "startTime": "2026-11-21T23:30:10Z",
        },
    })
}

/// Maintenance `i` drains racks `i` and `i + 1`: every node is selected by two maintenances.
pub fn maintenance(i: usize) -> Value {
    let racks = [format!("rack-{i}"), format!("rack-{}", (i + 1) % RACKS)];
    json!({
        "apiVersion": "nodemaintenance.k8s.io/v1alpha1", "kind": "NodeMaintenance",
        "metadata": {"name": format!("maintenance-{i}"), "finalizers": ["nodemaintenance.k8s.io/maintenance-completion"]},
        "spec": {
            "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "example.com/rack", "operator": "In", "values": racks}]}]},
            "stage": "Drain",
            "drainPlan": user_plan(i),
            "reason": "kernel upgrade",
        },
        "status": {"drainStatus": {"drainPlanIndex": i % 3}},
    })
}
