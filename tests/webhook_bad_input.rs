//! Bad input over real HTTPS (issue "Bad input"): each gets a clear error with the right
//! HTTP status, or `allowed: false` with a code when the uid is readable; never a panic, and
//! the server keeps serving.

mod support;

use serde_json::{Value, json};
use std::time::Duration;
use support::webhook::{Server, start};

fn review(request: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}))
        .unwrap()
}

fn nm_request(uid: &str, object: Value) -> Value {
    json!({
        "uid": uid,
        "kind": {"group": "nodemaintenance.k8s.io", "version": "v1alpha1", "kind": "NodeMaintenance"},
        "resource": {"group": "nodemaintenance.k8s.io", "version": "v1alpha1", "resource": "nodemaintenances"},
        "name": "x", "operation": "CREATE", "userInfo": {"username": "admin", "groups": ["system:masters"]},
        "object": object
    })
}

async fn send(server: &Server, path: &str, content_type: &str, body: Vec<u8>) -> (u16, Value) {
    let resp = server
        .client()
        .post(server.url(path))
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .expect("request completes");
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

/// The server still answers a valid review correctly.
async fn still_serving(server: &Server) {
    let obj = json!({"metadata": {"name": "x"}, "spec": {"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["gpu"]}]}]}}});
    let (status, body) = send(server, "/mutate", "application/json", review(nm_request("ok-1", obj))).await;
    assert_eq!(status, 200);
    assert_eq!(body["response"]["allowed"], true);
    assert!(body["response"]["patch"].is_string());
}

fn denied_with(body: &Value, uid: &str, code: u64, words: &str) {
    let r = &body["response"];
    assert_eq!(r["uid"], uid, "{body}");
    assert_eq!(r["allowed"], false, "{body}");
    assert_eq!(r["status"]["code"], code, "{body}");
    let msg = r["status"]["message"].as_str().unwrap();
    assert!(msg.contains(words), "message {msg:?} lacks {words:?}");
}

#[tokio::test]
async fn malformed_bodies_get_a_clear_error_and_the_server_keeps_serving() {
    let server = start(&[]).await;

    let (status, body) = send(&server, "/validate", "application/json", b"{not json".to_vec()).await;
    assert_eq!(status, 400);
    assert!(body["message"].as_str().unwrap().contains("not an AdmissionReview"), "{body}");

    let (status, body) = send(&server, "/validate", "application/json", br#"{"hello": "world"}"#.to_vec()).await;
    assert_eq!(status, 400, "{body}");

    let wrong_version = serde_json::to_vec(
        &json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {"uid": "v1b1"}}),
    )
    .unwrap();
    let (status, body) = send(&server, "/validate", "application/json", wrong_version).await;
    assert_eq!(status, 200);
    assert_eq!(body["apiVersion"], "admission.k8s.io/v1beta1", "answered in the request's apiVersion");
    denied_with(&body, "v1b1", 400, "admission.k8s.io/v1");

    let mut no_uid = nm_request("", json!({}));
    no_uid.as_object_mut().unwrap().remove("uid");
    let (status, _) = send(&server, "/validate", "application/json", review(no_uid)).await;
    assert_eq!(status, 400);

    let (status, body) =
        send(&server, "/validate", "application/json", review(nm_request("no-object", Value::Null))).await;
    assert_eq!(status, 200);
    denied_with(&body, "no-object", 400, "no object");

    let mut pod = nm_request("a-pod", json!({"kind": "Pod", "spec": {}}));
    pod["kind"] = json!({"group": "", "version": "v1", "kind": "Pod"});
    let (status, body) = send(&server, "/mutate", "application/json", review(pod)).await;
    assert_eq!(status, 200);
    denied_with(&body, "a-pod", 400, "not Pod");

    let unknown_enum = nm_request(
        "enum",
        json!({"spec": {"stage": "Paused", "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["worker-1"]}]}]}}}),
    );
    let (_, body) = send(&server, "/validate", "application/json", review(unknown_enum)).await;
    denied_with(&body, "enum", 422, "spec.stage: Unsupported value: \"Paused\"");

    let wrong_type =
        nm_request("types", json!({"spec": {"nodeSelector": {"nodeSelectorTerms": []}, "drainPlan": "all of it"}}));
    let (_, body) = send(&server, "/validate", "application/json", review(wrong_type)).await;
    denied_with(&body, "types", 400, "spec.drainPlan");

    let (status, body) = send(&server, "/validate", "text/plain", review(nm_request("ct", json!({})))).await;
    assert_eq!(status, 415, "{body}");

    let mut huge = review(nm_request("huge", json!({"spec": {"reason": ""}})));
    huge.splice(huge.len() - 10..huge.len() - 10, std::iter::repeat_n(b' ', 10 * 1024 * 1024));
    let (status, _) = send(&server, "/validate", "application/json", huge).await;
    assert_eq!(status, 413, "a 10 MiB body is refused");

    let invalid_op = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "op", "operation": "EXPLODE"}});
    let (status, body) = send(&server, "/validate", "application/json", serde_json::to_vec(&invalid_op).unwrap()).await;
    assert_eq!(status, 200);
    denied_with(&body, "op", 400, "request");

    still_serving(&server).await;
}

#[tokio::test]
async fn plain_http_to_the_tls_port_is_told_so_and_the_server_keeps_serving() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = start(&[]).await;
    let mut tcp = tokio::net::TcpStream::connect(server.bound.addr).await.unwrap();
    tcp.write_all(b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}").await.unwrap();
    let mut answer = String::new();
    let _ = tcp.read_to_string(&mut answer).await;
    assert!(answer.starts_with("HTTP/1.0 400"), "{answer:?}");
    assert!(answer.contains("HTTPS server"));
    still_serving(&server).await;
}

#[tokio::test]
async fn a_slow_tls_handshake_does_not_block_others() {
    use tokio::io::AsyncReadExt;
    let server = start(&["--max-connections", "4"]).await;
    // Half-open connections that never finish their handshake, in three of the four slots:
    // others are served meanwhile...
    let mut idle = Vec::new();
    for _ in 0..3 {
        let tcp = tokio::net::TcpStream::connect(server.bound.addr).await.unwrap();
        tcp.try_write(&[0x16, 0x03, 0x01]).unwrap();
        idle.push(tcp);
    }
    still_serving(&server).await;
    // ...and the half-open ones are cut at the handshake timeout (10 s), which gives their
    // slots back: without it, four such clients would lock every caller out for good.
    let cut = idle.into_iter().map(|mut tcp| async move {
        let mut buf = [0u8; 64];
        loop {
            match tcp.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    });
    let all_cut = tokio::time::timeout(Duration::from_secs(20), futures::future::join_all(cut)).await;
    assert!(all_cut.is_ok(), "a half-open handshake was still open after 20 s");
}

#[tokio::test]
async fn health_readiness_and_metrics() {
    let server = start(&[]).await;
    let client = server.client();
    assert_eq!(client.get(server.url("/healthz")).send().await.unwrap().status(), 200);
    assert_eq!(client.get(server.url("/readyz")).send().await.unwrap().status(), 200);
    still_serving(&server).await;
    let metrics = reqwest::get(server.metrics_url()).await.unwrap().text().await.unwrap();
    assert!(
        metrics.contains(
            r#"node_maintenance_admission_requests_total{endpoint="mutate",operation="CREATE",result="allowed"} 1"#
        ),
        "{metrics}"
    );
    assert!(metrics.contains("node_maintenance_admission_request_duration_seconds_bucket"));
}
