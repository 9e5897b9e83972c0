//! Issue 26, what bounds a session, attacked for real: apigate's HTTP server in production mode
//! over a real Postgres (admin API, legacy SSE) or dev mode, rmcp's MCP client, a recording
//! upstream and the reference monitor over HTTP. Each test failed before its fix.
//!
//! - 3, 8: a session's stored upstream headers take no method override, proxy, forwarding or
//!   `Accept-Encoding` header (one header policy, `upstream::headers`).
//! - 13: a monitor rate rule counts per key (and user session), not only per MCP session.
//! - 14: a legacy SSE stream acts for the session token it was opened with.

use std::time::Duration;

use apigate::auth::AuthConfig;
use apigate::auth::sealed::SecretKeys;
use apigate::monitor::{self, RuleSet, ServerConfig};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::db::TestDb;
use crate::production::{BOOTSTRAP, Prod};
use crate::support::{
    Server, Upstream, call, engine_args, execute_ok, spec_path, sse_client_with, sse_endpoint,
};

// ---- 3, 8 --------------------------------------------------------------------------------------

/// A backend (or an admin key) stores headers for a session: a read-only session's GET went
/// out with `X-HTTP-Method-Override: DELETE`, and `X-Forwarded-For` / `Proxy-Authorization` /
/// `Accept-Encoding` reached the API as if a trusted proxy had set them.
#[tokio::test]
async fn a_session_stores_no_override_proxy_or_forwarding_header() {
    let db = TestDb::new().await;
    let upstream = Upstream::start().await;
    let args = engine_args(&spec_path("petstore-3.0.json"), Some(upstream.url()));
    let cfg = AuthConfig {
        secret_keys: Some(std::sync::Arc::new(
            SecretKeys::from_bytes(&[7u8; 32], None).unwrap(),
        )),
        ..AuthConfig::default()
    };
    let prod = Prod::launch(&db.url, args, Default::default(), cfg, false).await;
    let http = reqwest::Client::new();
    let create = |headers: Value| {
        http.post(prod.url("/admin/v1/sessions"))
            .header("x-api-key", BOOTSTRAP)
            .json(
                &json!({"userId": "u-1", "features": ["*"], "readOnly": true,
                "upstream": {"headers": headers}}),
            )
            .send()
    };
    for name in [
        "X-HTTP-Method-Override",
        "x-http-method",
        "X-Method-Override",
        "Proxy-Authorization",
        "Forwarded",
        "X-Forwarded-For",
        "X-Forwarded-Host",
        "X-Real-IP",
        "Accept-Encoding",
    ] {
        let r = create(json!({"Authorization": "Bearer user-1-token", name: "DELETE"}))
            .await
            .unwrap();
        let status = r.status();
        let body: Value = r.json().await.unwrap();
        assert_eq!(status, StatusCode::BAD_REQUEST, "{name} was stored: {body}");
        let message = body["error"].as_str().unwrap();
        assert!(
            message
                .to_ascii_lowercase()
                .contains(&name.to_ascii_lowercase()),
            "{message}"
        );
        assert!(!message.contains("user-1-token"), "{message}");
    }
    // A credential alone is stored.
    let r = create(json!({"Authorization": "Bearer user-1-token"}))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    assert!(upstream.requests().is_empty());
}

// ---- 13 ----------------------------------------------------------------------------------------

/// `max_calls_per_minute = 3` on discovery: an agent opening a new MCP session every 3 calls
/// made 12 calls in a row without a block.
#[tokio::test]
async fn a_monitor_rate_rule_is_not_reset_by_a_new_mcp_session() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let rules = r#"
        [[rule]]
        name = "burst"
        action = "block"
        tool = "api_discover"
        max_calls_per_minute = 3
        [[rule]]
        name = "rest"
        action = "allow"
    "#;
    let running = monitor::spawn(
        listener,
        ServerConfig {
            rules: RuleSet::from_toml_str(rules).unwrap(),
            approval_timeout: Duration::from_secs(10),
            ..ServerConfig::default()
        },
    )
    .await
    .unwrap();
    let upstream = Upstream::start().await;
    let mut args = engine_args(&spec_path("petstore-3.0.json"), Some(upstream.url()));
    args.monitor.monitor = Some(format!("{}/agent-monitor", running.url()));
    let server = Server::start(args, false).await;
    let mut outcomes = Vec::new();
    for _ in 0..4 {
        // A fresh MCP session every three calls.
        let client = server.client().await;
        for _ in 0..3 {
            let (err, r) = call(&client, "api_discover", json!({"query": "find pets"})).await;
            outcomes.push(if err { r["code"].clone() } else { json!("ok") });
        }
        client.cancel().await.unwrap();
    }
    assert_eq!(
        outcomes[..3],
        [json!("ok"), json!("ok"), json!("ok")],
        "{outcomes:?}"
    );
    assert!(
        outcomes[3..].iter().all(|o| o == "BLOCKED_BY_MONITOR"),
        "new MCP sessions reset the key's rate: {outcomes:?}"
    );
    running.shutdown().await.unwrap();
}

// ---- 14 ----------------------------------------------------------------------------------------

/// A stream opened with a read-only `x-session-token` took a `POST /message` whose tool call
/// carried another user's `_sessionToken` (or whose own header named another session), and
/// ran it as that user.
#[tokio::test]
async fn a_legacy_sse_stream_acts_for_the_session_it_was_opened_with() {
    let (_db, upstream, prod) = Prod::petstore().await;
    let key = prod.agent_key().await;
    let reader = prod.session(&["apigate.*", "pets.*"], true).await;
    let writer = prod.session(&["apigate.*", "pets.*"], false).await;
    // The stream is opened with the reader's token; the messages carry the key alone.
    let client = sse_client_with(
        &prod.url(""),
        &[("x-api-key", &key), ("x-session-token", &reader)],
        &[("x-api-key", &key)],
    )
    .await;
    let delete = json!({"operationId": "deletePet", "pathParams": {"petId": 5},
        "_sessionToken": writer});
    let (err, r) = call(&client, "api_execute", delete).await;
    assert!(err, "the stream ran another session's DELETE: {r}");
    assert_eq!(r["code"], "UNAUTHORIZED", "{r}");
    // The read-only session's own read works on the stream.
    execute_ok(
        &client,
        json!({"operationId": "getPetById", "pathParams": {"petId": 5}}),
    )
    .await;
    client.cancel().await.unwrap();

    // A message whose own header names another session is refused at the door.
    let http = reqwest::Client::new();
    let mut stream = http
        .get(prod.url("/sse"))
        .header("x-api-key", &key)
        .header("x-session-token", &reader)
        .send()
        .await
        .unwrap();
    let endpoint = sse_endpoint(&mut stream).await;
    // Keep the stream open while the test posts to it.
    tokio::spawn(async move { while let Ok(Some(_)) = stream.chunk().await {} });
    let call_delete = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": {"name": "api_execute",
            "arguments": {"operationId": "deletePet", "pathParams": {"petId": 6}}}});
    let r = http
        .post(prod.url(&endpoint))
        .header("x-api-key", &key)
        .header("x-session-token", &writer)
        .json(&call_delete)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::FORBIDDEN);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["code"], "SESSION_TOKEN_MISMATCH", "{body}");
    assert!(!body.to_string().contains(&writer));
    let deletes = upstream
        .requests()
        .iter()
        .filter(|r| r.method == "DELETE")
        .count();
    assert_eq!(deletes, 0, "a DELETE reached the API");
}
