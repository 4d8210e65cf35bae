//! Graceful shutdown (SPEC 5): after the signal the server is not ready at once but keeps
//! serving through the delay; a request in flight when the listener stops still completes;
//! then the server exits.

mod support;

use std::time::Duration;

#[tokio::test]
async fn shutdown_goes_unready_keeps_serving_then_finishes_in_flight_requests() {
    let mut server = support::webhook::start(&["--shutdown-delay", "600ms", "--shutdown-grace", "5s"]).await;
    let client = server.client();
    assert_eq!(client.get(server.url("/readyz")).send().await.unwrap().status(), 200);

    // A request whose body arrives slowly is in flight across the whole shutdown.
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Vec<u8>, std::io::Error>>(4);
    let body = reqwest::Body::wrap_stream(tokio_stream_from(rx));
    let slow = tokio::spawn({
        let client = client.clone();
        let url = server.url("/validate-node?timeout=10s");
        async move { client.post(url).header("content-type", "application/json").body(body).send().await }
    });
    let review =
        std::fs::read(support::webhook::fixtures_dir().join("apiserver/19-node-cordon-validate-node.json")).unwrap();
    tx.send(Ok(review[..10].to_vec())).await.unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;

    server.stop();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let ready = client.get(server.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 503, "not ready as soon as shutdown begins");
    assert_eq!(ready.text().await.unwrap(), "shutting down");
    assert_eq!(
        client.get(server.url("/healthz")).send().await.unwrap().status(),
        200,
        "still serving during the delay"
    );

    tokio::time::sleep(Duration::from_millis(700)).await;
    // The listener is closed now; the slow request's connection is still open.
    assert!(tokio::net::TcpStream::connect(server.bound.addr).await.is_err(), "no new connections after the delay");
    tx.send(Ok(review[10..].to_vec())).await.unwrap();
    drop(tx);
    let resp = slow.await.unwrap().expect("in-flight request completes");
    assert_eq!(resp.status(), 200);
    let answer: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(answer["response"]["allowed"], true);

    let exited = tokio::time::timeout(Duration::from_secs(5), &mut server.task).await;
    assert!(matches!(exited, Ok(Ok(Ok(())))), "server exits cleanly within --shutdown-grace");
}

fn tokio_stream_from<T: Send + 'static>(
    mut rx: tokio::sync::mpsc::Receiver<T>,
) -> impl futures::Stream<Item = T> + Send + 'static {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}
