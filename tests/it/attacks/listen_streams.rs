//! Issue 41, item 7: `subscriptions/listen` streams (protocol 2026-07-28) are bounded, attacked
//! for real: `apigate serve` (the binary, Postgres, server keys made with the CLI) at a small
//! `--max-connections`. Before the fix a listen stream was not an MCP session, so
//! `--max-sessions-per-key` ignored it: one key held every connection and `/health` and every
//! other key were refused.

use serde_json::json;

use crate::db::TestDb;
use crate::support::{KEY, Server, Upstream, cli_key, engine_args, flags, spawn_serve, spec_path};

/// A `subscriptions/listen` request for `toolsListChanged` with `key`: its status, and the
/// open stream when it was accepted (read up to the server's acknowledgment). A connection
/// the server closed at once is status 0.
async fn listen(url: &str, key: &str) -> (u16, Option<reqwest::Response>, String) {
    let sent = crate::reload::listen_request(url, key).send().await;
    let Ok(mut response) = sent else {
        return (0, None, String::new());
    };
    let status = response.status().as_u16();
    if status != 200 {
        return (status, None, response.text().await.unwrap_or_default());
    }
    let mut seen = String::new();
    let read = async {
        while !seen.contains("notifications/subscriptions/acknowledged") {
            match response.chunk().await {
                Ok(Some(chunk)) => seen.push_str(&String::from_utf8_lossy(&chunk)),
                _ => return false,
            }
        }
        true
    };
    let acknowledged = tokio::time::timeout(std::time::Duration::from_secs(20), read)
        .await
        .unwrap_or(false);
    assert!(acknowledged, "an accepted listen stream: {seen}");
    (status, Some(response), seen)
}

/// `initialize` with `key`: the status.
async fn initialize(url: &str, key: &str) -> u16 {
    reqwest::Client::new()
        .post(url)
        .header("x-api-key", key)
        .header("accept", "application/json, text/event-stream")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "other", "version": "1"}}}),
        )
        .send()
        .await
        .map(|r| r.status().as_u16())
        .unwrap_or(0)
}

/// One key asks for 20 listen streams at `--max-connections 16` and `--max-sessions-per-key
/// 2`: two are served, the rest get 429 naming the cap; `/health` and another key still work.
#[tokio::test]
async fn one_key_cannot_hold_the_connections_with_listen_streams() {
    let db = TestDb::new().await;
    let upstream = Upstream::start().await;
    let greedy = cli_key(&db.url, "greedy", "apigate.*").await;
    let other = cli_key(&db.url, "other", "apigate.*").await;
    let (greedy, other) = (
        greedy["key"].as_str().unwrap().to_string(),
        other["key"].as_str().unwrap().to_string(),
    );
    let extra = flags(&[
        ("--max-sessions-per-key", "2"),
        ("--max-connections", "16"),
        ("--key-rate", "0"),
    ]);
    let (mut proc, url) = spawn_serve(
        &spec_path("petstore-3.0.json"),
        &upstream.url(),
        &extra,
        &[("DATABASE_URL", db.url.as_str())],
    )
    .await;
    let base = url.trim_end_matches("/mcp").to_string();

    let mut open = Vec::new();
    let mut refused = Vec::new();
    for _ in 0..20 {
        let (status, stream, text) = listen(&url, &greedy).await;
        match stream {
            Some(s) => open.push(s),
            None => refused.push((status, text)),
        }
    }
    assert_eq!(open.len(), 2, "streams served to one key: {refused:?}");
    for (status, text) in &refused {
        assert_eq!(*status, 429, "{text}");
        assert!(text.contains("--max-sessions-per-key"), "{text}");
    }
    let health = reqwest::get(format!("{base}/health")).await;
    assert_eq!(
        health.map(|r| r.status().as_u16()).unwrap_or(0),
        200,
        "/health while one key holds its streams"
    );
    assert_eq!(initialize(&url, &other).await, 200, "another key");
    drop(open);
    assert!(proc.terminate().await, "{}", proc.log());
}

/// A listen stream that carries no notification for the session idle time ends, and its slot
/// is free again: at `--max-sessions-per-key 1` a second stream is refused while the first is
/// open and served once it ended.
#[tokio::test]
async fn an_idle_listen_stream_ends_and_frees_its_slot() {
    let upstream = Upstream::start().await;
    let args = engine_args(&spec_path("petstore-3.0.json"), Some(upstream.url()));
    let server = Server::start_custom(
        args,
        |o| {
            o.max_sessions_per_key = 1;
            o.session_idle = std::time::Duration::from_secs(1);
        },
        Default::default(),
    )
    .await;
    let url = server.url("/mcp");
    let (status, first, _) = listen(&url, KEY).await;
    assert_eq!(status, 200);
    let (status, _, text) = listen(&url, KEY).await;
    assert_eq!(status, 429, "{text}");
    // The first stream ends by itself (the server closes it), well before 30 s.
    let mut first = first.expect("the first stream is open");
    let ended = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while let Ok(Some(_)) = first.chunk().await {}
    })
    .await;
    assert!(ended.is_ok(), "the idle stream is still open");
    let (status, again, text) = listen(&url, KEY).await;
    assert_eq!(status, 200, "{text}");
    drop(again);
}
