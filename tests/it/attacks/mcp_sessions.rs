//! Item 10: a Streamable HTTP session belongs to the key that opened it. Key B used to be able
//! to call tools on, and DELETE, key A's `Mcp-Session-Id`. Production mode, real Postgres.

use serde_json::{Value, json};

use crate::db::TestDb;
use crate::production::{BOOTSTRAP, Options, Prod};
use crate::support::Upstream;

async fn post(server: &Prod, key: &str, session: Option<&str>, body: &Value) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(server.url("/mcp"))
        .header("x-api-key", key)
        .header("mcp-protocol-version", "2025-06-18")
        .header("accept", "application/json, text/event-stream")
        .json(body);
    if let Some(id) = session {
        request = request.header("mcp-session-id", id);
    }
    request.send().await.expect("the server answers")
}

#[tokio::test]
async fn another_keys_session_id_is_unknown_to_it() {
    let (_db, _upstream, server) = Prod::petstore().await;
    let owner = server.agent_key().await;
    let token = server
        .session(
            &["apigate.discover", "apigate.schema", "apigate.execute"],
            false,
        )
        .await;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let opened = post(&server, &owner, None, &init).await;
    assert_eq!(opened.status(), 200);
    let id = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(
        post(&server, &owner, Some(&id), &initialized)
            .await
            .status(),
        202
    );
    let tools_call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "api_discover", "arguments": {"query": "pets", "_sessionToken": token}}});
    let own = post(&server, &owner, Some(&id), &tools_call).await;
    assert_eq!(own.status(), 200);
    assert!(own.text().await.unwrap().contains("findPetsByStatus"));

    // Another valid key naming the owner's session.
    let hijack = post(&server, BOOTSTRAP, Some(&id), &tools_call).await;
    assert_eq!(
        hijack.status(),
        404,
        "another key reached the session: {}",
        hijack.text().await.unwrap()
    );
    // Nor through the `tools/list` the gate answers itself (http::tool_list).
    let tools_list = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/list"});
    let listed = post(&server, BOOTSTRAP, Some(&id), &tools_list).await;
    assert_eq!(
        listed.status(),
        404,
        "another key listed tools in the session: {}",
        listed.text().await.unwrap()
    );
    assert_eq!(
        post(&server, &owner, Some(&id), &tools_list).await.status(),
        200
    );
    let delete = reqwest::Client::new()
        .delete(server.url("/mcp"))
        .header("x-api-key", BOOTSTRAP)
        .header("mcp-session-id", &id)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .unwrap();
    assert_eq!(delete.status(), 404, "another key ended the session");

    // The owner's session lives on.
    let again = post(&server, &owner, Some(&id), &tools_call).await;
    assert_eq!(again.status(), 200);
    assert!(again.text().await.unwrap().contains("findPetsByStatus"));
}

/// Item 10: rmcp logged every new session's id at INFO, even with `RUST_LOG=info` set by the
/// operator; an id and its key are all it takes to join a session.
#[tokio::test]
async fn session_ids_are_not_logged() {
    let spec = crate::support::spec_path("petstore-3.0.json");
    let (mut proc, url) = crate::support::Proc::spawn(
        "dev",
        &[
            "dev",
            "--spec",
            &spec,
            "--listen",
            "127.0.0.1:0",
            "--api-key",
            "k-0123456789abcdef",
        ],
        "/mcp",
    )
    .await;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let opened = reqwest::Client::new()
        .post(&url)
        .header("x-api-key", "k-0123456789abcdef")
        .header("accept", "application/json, text/event-stream")
        .json(&init)
        .send()
        .await
        .unwrap();
    assert_eq!(opened.status(), 200);
    let id = opened.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    let _ = opened.text().await;
    // The log line would be written as the session is created, before the answer.
    assert!(proc.terminate().await, "{}", proc.log());
    let log = proc.stderr();
    assert!(!log.contains(&id), "the session id is in the log:\n{log}");
}

/// Item 8: `initialize` takes from the key's rate limit like a tool call, so one key cannot
/// open sessions as fast as it can send.
#[tokio::test]
async fn initialize_is_rate_limited_per_key() {
    let db = TestDb::new().await;
    let upstream = Upstream::start().await;
    let options = Options {
        key_rate: apigate::auth::RateLimit {
            per_second: 0.01,
            burst: 3,
        },
        ..Options::petstore()
    };
    let server = Prod::start(&db.url, &upstream, options).await;
    let key = server.agent_key().await;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    for _ in 0..3 {
        assert_eq!(post(&server, &key, None, &init).await.status(), 200);
    }
    let refused = post(&server, &key, None, &init).await;
    assert_eq!(refused.status(), 429);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["code"], "RATE_LIMITED", "{body}");
    // Another key has its own bucket.
    assert_eq!(post(&server, BOOTSTRAP, None, &init).await.status(), 200);
}
