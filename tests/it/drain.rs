//! Stopping a server under load (issue 44): calls it accepted finish, new connections are
//! refused. Before, the tool service's cancellation was a child of the shutdown token and every
//! call in flight failed the moment SIGTERM arrived. The same with real processes behind a
//! load balancer: `replicas.rs`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use serde_json::{Value, json};

use crate::support::{KEY, Server, engine_args, poll, serve_app, spec_path};

async fn execute(url: String) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(url)
        .header("x-api-key", KEY)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "api_execute",
            "arguments": {"operationId": "getPetById", "pathParams": {"petId": 7}}}}),
        )
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let text = response.text().await.unwrap_or_default();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

#[tokio::test]
async fn calls_in_flight_finish_when_the_server_stops() {
    let arrived = Arc::new(AtomicUsize::new(0));
    let counter = arrived.clone();
    let slow = Router::new().fallback(move || {
        let counter = counter.clone();
        async move {
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(1500)).await;
            axum::Json(json!({"id": 7, "name": "rex", "photoUrls": []}))
        }
    });
    let upstream = format!("http://{}", serve_app(slow).await);
    let mut args = engine_args(&spec_path("petstore-3.0.json"), Some(upstream));
    args.upstream_timeout = Duration::from_secs(20);
    let server = Server::start(args, true).await;
    let url = server.url("/mcp");
    let calls: Vec<_> = (0..4).map(|_| tokio::spawn(execute(url.clone()))).collect();
    poll(
        "every call reached the upstream",
        Duration::from_secs(30),
        Duration::from_millis(10),
        || async { (arrived.load(Ordering::SeqCst) == 4).then_some(()) },
    )
    .await;
    let health = server.url("/health");
    // SIGTERM, as `cancel_on_signal` turns it into a cancelled token.
    drop(server);
    for call in calls {
        let (status, body) = call.await.unwrap();
        assert_eq!(status, 200, "{body}");
        assert_ne!(body["result"]["isError"], true, "{body}");
        assert_eq!(
            body["result"]["structuredContent"]["body"]["name"], "rex",
            "{body}"
        );
    }
    // It accepts nothing new.
    assert!(reqwest::get(&health).await.is_err());
}

#[tokio::test]
async fn ready_says_yes_while_serving() {
    let server = Server::start(engine_args(&spec_path("petstore-3.0.json"), None), true).await;
    let ready = reqwest::get(server.url("/ready")).await.unwrap();
    assert_eq!(ready.status(), 200);
    assert_eq!(ready.json::<Value>().await.unwrap(), json!({"ready": true}));
}
