//! Nothing unauthenticated, or cheap with one key, may exhaust the server (issue 15, items
//! 4–9), and bodies that are not JSON-RPC get a JSON-RPC error. Each test floods or starves a
//! real server over real sockets, on a small limit, and checks the refusal the limit promises.

use std::time::Duration;

use apigate::http::ConnLimits;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{
    KEY, Server, Upstream, call, call_err, call_ok, engine_args, execute_err, spec_path,
    sse_endpoint,
};

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}}"#;

async fn petstore(options: impl FnOnce(&mut apigate::http::HttpOptions)) -> Server {
    Server::start_custom(
        engine_args(&spec_path("petstore-3.0.json"), None),
        options,
        ConnLimits::default(),
    )
    .await
}

/// POSTs `body` to `/mcp` with the key and the headers rmcp expects.
async fn post_mcp(server: &Server, body: &str, session: Option<&str>) -> reqwest::Response {
    let mut request = reqwest::Client::new()
        .post(server.url("/mcp"))
        .header("x-api-key", KEY)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string());
    if let Some(id) = session {
        request = request.header("mcp-session-id", id);
    }
    request.send().await.expect("the server answers")
}

/// Item 4: every made-up method used to become its own `/metrics` label, unauthenticated.
#[tokio::test]
async fn made_up_methods_do_not_become_metrics_labels() {
    let server = petstore(|_| {}).await;
    let client = reqwest::Client::new();
    for i in 0..50 {
        let method = reqwest::Method::from_bytes(format!("FLOOD{i}X").as_bytes()).unwrap();
        let status = client
            .request(method, server.url("/nowhere"))
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status, 404);
    }
    let anonymous = client.get(server.url("/metrics")).send().await.unwrap();
    assert_eq!(
        anonymous.status(),
        401,
        "/metrics needs the key on the main listener"
    );
    let metrics = crate::support::metrics(&server.url("")).await;
    assert!(
        !metrics.contains("FLOOD"),
        "a made-up method is a label: {}",
        metrics.lines().find(|l| l.contains("FLOOD")).unwrap_or("")
    );
    assert!(
        metrics.contains(r#"method="other""#),
        "made-up methods are counted as `other`"
    );

    // `--metrics-listen`: the scraper's listener serves /metrics alone, without a key.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let stop = tokio_util::sync::CancellationToken::new();
    tokio::spawn(apigate::http::serve(
        listener,
        apigate::http::metrics_router(),
        stop.clone(),
        ConnLimits::default(),
    ));
    let scraped = client
        .get(format!("http://{addr}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(scraped.status(), 200);
    assert!(
        scraped
            .text()
            .await
            .unwrap()
            .contains("apigate_http_requests_total")
    );
    let other = client
        .get(format!("http://{addr}/mcp"))
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 404, "nothing but /metrics on that listener");
    stop.cancel();
}

/// Item 5: a multi-megabyte `path` was matched against every template (a minute of CPU on
/// GitHub); an over-long query text was analysed and embedded. Both are refused up front.
#[tokio::test]
async fn oversized_arguments_are_refused_before_any_matching() {
    let server = Server::start(engine_args(&spec_path("github-rest-3.0.json"), None), false).await;
    let client = server.client().await;
    let path = format!("/repos/{}/x", "a".repeat(100_000));
    let err = execute_err(
        &client,
        json!({"method": "GET", "path": path, "dryRun": true}),
        "INVALID_ARGUMENTS",
    )
    .await;
    let violation = &err["violations"][0];
    assert_eq!(violation["pointer"], "/path");
    assert!(
        violation["message"]
            .as_str()
            .unwrap()
            .contains("--max-path-bytes"),
        "{err}"
    );

    let deep = "/x".repeat(70);
    let (_, err) = call(
        &client,
        "api_schema",
        json!({"method": "GET", "path": deep}),
    )
    .await;
    assert_eq!(err["code"], "INVALID_ARGUMENTS", "{err}");
    assert!(err.to_string().contains("segments"), "{err}");

    let err = call_err(
        &client,
        "api_discover",
        json!({"query": "list repositories ".repeat(100)}),
        "INVALID_ARGUMENTS",
    )
    .await;
    assert!(err.to_string().contains("--max-query-chars"), "{err}");

    let (_, err) = call(
        &client,
        "api_execute",
        json!({"operationId": "repos/get", "pathParams": {"owner": "o".repeat(9000), "repo": "r"},
            "headers": {"X-Big": "h".repeat(9000)}, "dryRun": true}),
    )
    .await;
    assert_eq!(err["code"], "INVALID_ARGUMENTS", "{err}");
    let pointers: Vec<&str> = crate::support::strings(&err["violations"], "pointer");
    assert_eq!(pointers, ["/pathParams/owner", "/headers/X-Big"], "{err}");

    // Within the limits, the same tools answer.
    call_ok(
        &client,
        "api_discover",
        json!({"query": "list repositories for a user"}),
    )
    .await;
}

/// Item 6: the query-vector cache held whole query strings. A query is now embedded and
/// cached by its first 1,000 characters, so two huge queries that share them are one entry.
#[tokio::test]
async fn the_query_cache_keys_by_the_capped_text() {
    let dir = crate::dense::model_dir();
    let embedder = apigate::index::embed::Embedder::load(&dir).expect("the model loads");
    let head = "find the pets that are available ".repeat(40);
    let a = format!("{head}{}", "a".repeat(50_000));
    let b = format!("{head}{}", "b".repeat(50_000));
    embedder.embed_query(&a).unwrap();
    assert!(
        embedder.cached_query(&b).is_some(),
        "queries that agree on their first 1,000 characters share an entry"
    );
    let bytes = embedder.query_cache_bytes();
    assert!(
        bytes <= 1000 + 384 * 4,
        "one entry weighs its capped text and its vector, not the whole query: {bytes}"
    );
}

/// Item 7: a legacy SSE client that never reads its stream could queue without end.
#[tokio::test]
async fn an_sse_client_that_never_reads_is_refused() {
    let server = petstore(|o| o.sse_queue = 4).await;
    let client = reqwest::Client::new();
    let mut stream = client
        .get(server.url("/sse"))
        .header("x-api-key", KEY)
        .send()
        .await
        .unwrap();
    // Read only the endpoint event, then never again.
    let endpoint = sse_endpoint(&mut stream).await;
    let post = |body: String| {
        client
            .post(server.url(&endpoint))
            .header("x-api-key", KEY)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    assert_eq!(post(INIT.to_string()).await.unwrap().status(), 202);
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert_eq!(post(initialized.into()).await.unwrap().status(), 202);
    // Each tools/list reply is a few KB; the socket buffers take some before the queues fill.
    let mut refused = None;
    for i in 2..20_000 {
        let response = post(format!(
            r#"{{"jsonrpc":"2.0","id":{i},"method":"tools/list"}}"#
        ))
        .await
        .unwrap();
        if response.status() != 202 {
            refused = Some((i, response.status(), response.text().await.unwrap()));
            break;
        }
    }
    let (after, status, body) = refused.expect("the queue is bounded: some message is refused");
    assert_eq!(status, 429, "{body}");
    assert!(body.contains("--sse-queue"), "{body}");
    eprintln!("refused after {after} messages");
    drop(stream);
}

/// Item 8: one key could open sessions without end (20,000 in 17 s took 1.25 GB).
#[tokio::test]
async fn sessions_per_key_are_capped() {
    let server = petstore(|o| o.max_sessions_per_key = 3).await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        let response = post_mcp(&server, INIT, None).await;
        assert_eq!(response.status(), 200);
        let id = response.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_string();
        ids.push(id);
    }
    let refused = post_mcp(&server, INIT, None).await;
    assert_eq!(refused.status(), 429);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], -32000, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("--max-sessions-per-key 3"), "{message}");
    assert!(
        message.contains("DELETE"),
        "says how to free one: {message}"
    );

    // Ending one frees its place.
    let deleted = reqwest::Client::new()
        .delete(server.url("/mcp"))
        .header("x-api-key", KEY)
        .header("mcp-session-id", &ids[0])
        .send()
        .await
        .unwrap();
    assert!(deleted.status().is_success(), "{}", deleted.status());
    assert_eq!(post_mcp(&server, INIT, None).await.status(), 200);
}

/// Bodies that are not JSON-RPC get 400 and a JSON-RPC error (rmcp answered 415).
#[tokio::test]
async fn malformed_json_rpc_is_a_400_with_a_json_rpc_error() {
    let server = petstore(|_| {}).await;
    for (body, code) in [
        ("{not json", -32700),
        (r#"{"jsonrpc":"2.0","id":1}"#, -32600),
        (r#"[1, 2]"#, -32600),
    ] {
        let response = post_mcp(&server, body, None).await;
        assert_eq!(response.status(), 400, "{body}");
        let error: Value = response.json().await.unwrap();
        assert_eq!(error["error"]["code"], code, "{body}: {error}");
        assert_eq!(error["jsonrpc"], "2.0");
    }
    // The wrong content type is still 415, as the transport specifies.
    let wrong = reqwest::Client::new()
        .post(server.url("/mcp"))
        .header("x-api-key", KEY)
        .header("content-type", "text/plain")
        .header("accept", "application/json, text/event-stream")
        .body(INIT)
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 415);
}

/// Item 9: connections that send half a header stayed open indefinitely (slowloris).
#[tokio::test]
async fn a_half_sent_header_is_cut_off() {
    let server = Server::start_custom(
        engine_args(&spec_path("petstore-3.0.json"), None),
        |_| {},
        ConnLimits {
            header_read_timeout: Duration::from_millis(500),
            ..ConnLimits::default()
        },
    )
    .await;
    let mut tcp = TcpStream::connect(server.addr).await.unwrap();
    tcp.write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        .await
        .unwrap();
    // Generous: the server cuts it after 0.5 s; without a timeout this read never ends.
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(30), tcp.read_to_end(&mut buf)).await;
    assert!(
        read.is_ok(),
        "the server kept a connection with a half-sent header open"
    );
    // Complete requests are still served.
    let health = reqwest::get(server.url("/health")).await.unwrap();
    assert_eq!(health.status(), 200);
}

/// Item 9: connections beyond `--max-connections` are closed as they arrive.
#[tokio::test]
async fn connections_beyond_the_cap_are_closed() {
    let upstream = Upstream::start().await;
    let server = Server::start_custom(
        engine_args(&spec_path("petstore-3.0.json"), Some(upstream.url())),
        |_| {},
        ConnLimits {
            max_connections: 3,
            header_read_timeout: Duration::from_secs(60),
            ..ConnLimits::default()
        },
    )
    .await;
    let mut idle = Vec::new();
    for _ in 0..3 {
        let tcp = TcpStream::connect(server.addr).await.unwrap();
        idle.push(tcp);
    }
    // Let the server accept the three before the fourth arrives.
    let mut probe = TcpStream::connect(server.addr).await.unwrap();
    let _ = probe
        .write_all(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        .await;
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(30), probe.read_to_end(&mut buf)).await;
    assert!(
        read.is_ok(),
        "the fourth connection was neither served nor closed"
    );
    let text = String::from_utf8_lossy(&buf);
    assert!(
        !text.starts_with("HTTP/1.1 200"),
        "a fourth connection was served beyond --max-connections 3: {text}"
    );
    // Closing one frees a slot.
    drop(idle.pop());
    let mut served = None;
    for _ in 0..100 {
        if let Ok(r) = reqwest::get(server.url("/health")).await {
            served = Some(r.status());
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(served, Some(reqwest::StatusCode::OK));
}

/// A client that keeps an event stream open used to hold `SIGTERM` off for ever: shutdown
/// now waits for open streams for a grace period only.
#[tokio::test]
async fn an_open_stream_does_not_hold_off_shutdown() {
    let spec = spec_path("petstore-3.0.json");
    let (mut proc, url) = crate::support::spawn_dev(&spec, None, &[], &[]).await;
    let sse = url.replace("/mcp", "/sse");
    let mut stream = reqwest::Client::new()
        .get(&sse)
        .header("x-api-key", KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let first = stream.chunk().await.unwrap();
    assert!(first.is_some(), "the endpoint event arrives");
    // `terminate` fails the test if the process has not exited within 60 s.
    assert!(proc.terminate().await, "{}", proc.log());
    drop(stream);
}
