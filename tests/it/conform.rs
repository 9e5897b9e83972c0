//! Protocol conformance details the official MCP suite (`scripts/conformance.sh`) also checks:
//! the server answers the methods of capabilities it does not advertise (prompts,
//! completions) with -32601 (Method not found), and advertises `resources` for binary API
//! responses only (an empty list until a call holds one), over stateful and stateless Streamable HTTP; the `tools/list` served
//! from its serialized result, and the `api_discover` and `api_schema` calls the gate runs
//! itself, are rmcp's answer; and sessions kept alive only by such answers do not expire
//! while idle ones do.

use rmcp::ErrorData;
use rmcp::model::ErrorCode;
use rmcp::service::ServiceError;

use crate::support::{KEY, Server, Upstream, engine_args, spec_path};

fn assert_method_not_found<T: std::fmt::Debug>(what: &str, result: Result<T, ServiceError>) {
    match result {
        Err(ServiceError::McpError(ErrorData { code, .. })) => {
            assert_eq!(code, ErrorCode::METHOD_NOT_FOUND, "{what}")
        }
        other => panic!("{what}: expected -32601, got {other:?}"),
    }
}

async fn unadvertised_methods_are_not_found(stateless: bool) {
    let upstream = Upstream::start().await;
    let server = Server::start(
        engine_args(&spec_path("petstore-3.0.json"), Some(upstream.url())),
        stateless,
    )
    .await;
    let client = server.client().await;
    let caps = &client.peer_info().expect("initialized").capabilities;
    assert!(caps.tools.is_some());
    assert!(caps.prompts.is_none() && caps.completions.is_none());
    // Resources: held binary responses, without subscriptions or change notifications.
    let resources = caps.resources.as_ref().expect("resources advertised");
    assert!(resources.subscribe.is_none() && resources.list_changed.is_none());
    assert!(crate::support::resource_uris(&client).await.is_empty());
    let templates = client.list_resource_templates(None).await.unwrap();
    assert_eq!(
        templates
            .resource_templates
            .iter()
            .map(|t| t.uri_template.as_str())
            .collect::<Vec<_>>(),
        ["apigate://responses/{id}"]
    );

    assert_method_not_found("prompts/list", client.list_prompts(None).await);
    assert_method_not_found(
        "completion/complete",
        client
            .complete_prompt_argument("any_prompt", "arg", "x", None)
            .await,
    );
    // The tools still work on the same connection.
    assert_eq!(client.list_all_tools().await.unwrap().len(), 3);
}

#[tokio::test]
async fn stateful_http_answers_unadvertised_methods_with_method_not_found() {
    unadvertised_methods_are_not_found(false).await;
}

#[tokio::test]
async fn stateless_http_answers_unadvertised_methods_with_method_not_found() {
    unadvertised_methods_are_not_found(true).await;
}

/// A stateless server answers a plain `tools/list` from the result it serialized once
/// (`http::tool_list`), without an rmcp service. The answer must be the bytes rmcp gives: the
/// same request with a cursor (which always goes to rmcp) is the reference, on every
/// protocol version a client may name. What rmcp refuses is still refused.
#[tokio::test]
async fn stateless_tools_list_from_its_cached_json_is_rmcps_answer_byte_for_byte() {
    let server = Server::start(engine_args(&spec_path("petstore-3.0.json"), None), true).await;
    let http = reqwest::Client::new();
    let post = |body: String, headers: Vec<(&'static str, &'static str)>| {
        let mut request = http
            .post(server.url("/mcp"))
            .header("content-type", "application/json")
            .body(body);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        async move {
            let response = request.send().await.expect("send");
            let status = response.status().as_u16();
            (status, response.bytes().await.expect("body"))
        }
    };
    let accept = ("accept", "application/json, text/event-stream");
    let key = ("x-api-key", KEY);
    let versions = [
        None,
        Some("2024-11-05"),
        Some("2025-03-26"),
        Some("2025-06-18"),
        Some("2025-11-25"),
    ];
    for version in versions {
        for id in ["7", "\"a-1\""] {
            let mut headers = vec![accept, key];
            headers.extend(version.map(|v| ("mcp-protocol-version", v)));
            let plain = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list"}}"#);
            let with_params =
                format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list","params":{{}}}}"#);
            // A cursor always goes to rmcp (which lists everything on one page anyway).
            let through_rmcp = format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list","params":{{"cursor":"0"}}}}"#
            );
            let (status, reference) = post(through_rmcp, headers.clone()).await;
            assert_eq!(status, 200, "{version:?}");
            let reference_json: serde_json::Value =
                serde_json::from_slice(&reference).expect("JSON");
            assert_eq!(
                reference_json["result"]["tools"].as_array().map(Vec::len),
                Some(3)
            );
            for body in [plain, with_params] {
                let (status, fast) = post(body, headers.clone()).await;
                assert_eq!(status, 200, "{version:?}");
                assert_eq!(
                    String::from_utf8_lossy(&fast),
                    String::from_utf8_lossy(&reference),
                    "{version:?} id {id}"
                );
            }
        }
    }
    let list = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#.to_string();
    let refused = [
        // No key: the key check comes first.
        (vec![accept], 401),
        // What rmcp refuses stays refused.
        (vec![("accept", "application/json"), key], 406),
        (
            vec![("accept", "application/json;q=0, text/event-stream"), key],
            406,
        ),
        (
            vec![accept, key, ("mcp-protocol-version", "1999-01-01")],
            400,
        ),
    ];
    for (headers, status) in refused {
        assert_eq!(
            post(list.clone(), headers.clone()).await.0,
            status,
            "{headers:?}"
        );
    }
}

/// One raw Streamable HTTP client: POSTs JSON-RPC with the key, and the session once it has one.
struct Raw {
    http: reqwest::Client,
    url: String,
    key: &'static str,
    session: Option<String>,
}

impl Raw {
    fn new(server: &Server, key: &'static str) -> Raw {
        Raw {
            http: reqwest::Client::new(),
            url: server.url("/mcp"),
            key,
            session: None,
        }
    }

    /// Status, content type and the JSON-RPC message of the answer (the `data:` of an SSE one).
    async fn post(&self, body: &str) -> (u16, String, Option<serde_json::Value>) {
        let mut request = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .header("x-api-key", self.key)
            .body(body.to_string());
        if let Some(s) = &self.session {
            request = request.header("mcp-session-id", s);
        }
        let response = request.send().await.expect("send");
        let status = response.status().as_u16();
        let content_type = crate::support::header_text(response.headers(), "content-type");
        let text = response.text().await.expect("body");
        let json = if content_type.starts_with("text/event-stream") {
            text.lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim)
                .find(|d| !d.is_empty())
                .and_then(|d| serde_json::from_str(d).ok())
        } else {
            serde_json::from_str(&text).ok()
        };
        (status, content_type, json)
    }

    async fn open(server: &Server, key: &'static str) -> Raw {
        let mut raw = Raw::new(server, key);
        let response = raw
            .http
            .post(&raw.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("x-api-key", key)
            .body(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}"#)
            .send()
            .await
            .expect("initialize");
        assert_eq!(response.status(), 200);
        raw.session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        assert!(raw.session.is_some(), "no session id");
        let (status, _, _) = raw
            .post(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
        assert_eq!(status, 202);
        raw
    }
}

const PLAIN_LIST: &str = r#"{"jsonrpc":"2.0","id":5,"method":"tools/list"}"#;
const LIST_THROUGH_RMCP: &str =
    r#"{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"_meta":{"progressToken":1}}}"#;
const LIST_WITH_CURSOR: &str =
    r#"{"jsonrpc":"2.0","id":5,"method":"tools/list","params":{"cursor":"0"}}"#;

/// In a session, a plain `tools/list` is answered as JSON without rmcp; the message is the one
/// rmcp sends over SSE for the same request with a `_meta`. Another key's session, or one
/// that was closed, gets the 404 of an unknown session.
#[tokio::test]
async fn stateful_tools_list_from_its_cached_json_is_rmcps_answer() {
    let server = Server::start(engine_args(&spec_path("petstore-3.0.json"), None), false).await;
    let raw = Raw::open(&server, KEY).await;
    let (status, content_type, reference) = raw.post(LIST_THROUGH_RMCP).await;
    assert_eq!((status, content_type.as_str()), (200, "text/event-stream"));
    let (status, content_type, with_cursor) = raw.post(LIST_WITH_CURSOR).await;
    assert_eq!((status, content_type.as_str()), (200, "text/event-stream"));
    assert_eq!(with_cursor, reference);
    let (status, content_type, fast) = raw.post(PLAIN_LIST).await;
    assert_eq!((status, content_type.as_str()), (200, "application/json"));
    assert!(fast.is_some());
    assert_eq!(fast, reference);

    let mut stranger = Raw::new(&server, "some-other-key-0123456789");
    stranger.session = raw.session.clone();
    // The single-key dev server refuses the other key before anything else.
    assert_eq!(stranger.post(PLAIN_LIST).await.0, 401);

    let mut made_up = Raw::new(&server, KEY);
    made_up.session = Some("not-a-session".into());
    assert_eq!(made_up.post(PLAIN_LIST).await.0, 404);

    let deleted = raw
        .http
        .delete(&raw.url)
        .header("x-api-key", KEY)
        .header("mcp-protocol-version", "2025-11-25")
        .header("mcp-session-id", raw.session.clone().unwrap_or_default())
        .send()
        .await
        .expect("delete");
    assert!(deleted.status().is_success(), "{}", deleted.status());
    assert_eq!(raw.post(PLAIN_LIST).await.0, 404);
}

/// apigate keeps the sessions' idle clock (rmcp's would not see the `tools/list` answered
/// without it): a session used only for `tools/list` stays open past the idle limit, an idle
/// one is closed and its id becomes unknown.
#[tokio::test]
async fn sessions_expire_when_idle_and_not_while_listing_tools() {
    let server = Server::start_custom(
        engine_args(&spec_path("petstore-3.0.json"), None),
        |o| o.session_idle = std::time::Duration::from_millis(800),
        apigate::http::ConnLimits::default(),
    )
    .await;
    let busy = Raw::open(&server, KEY).await;
    let idle = Raw::open(&server, KEY).await;
    for _ in 0..12 {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert_eq!(busy.post(PLAIN_LIST).await.0, 200);
    }
    // 2.4 s in: three times the limit.
    assert_eq!(idle.post(PLAIN_LIST).await.0, 404);
    assert_eq!(idle.post(LIST_THROUGH_RMCP).await.0, 404);
    let (status, _, answer) = busy.post(LIST_THROUGH_RMCP).await;
    assert_eq!(status, 200);
    assert!(answer.is_some_and(|a| a["result"]["tools"].is_array()));
}

/// `tools/call` bodies: each tool the gate may run itself, with arguments that succeed and
/// ones that fail, and the same request with a `_meta`, which always goes to rmcp.
fn calls(id: &str) -> Vec<(String, String)> {
    let calls = [
        r#""name":"api_discover","arguments":{"query":"find pets by status"}"#,
        r#""name":"api_discover","arguments":{"query":"pets","limit":2}"#,
        r#""name":"api_schema","arguments":{"operationId":"getPetById"}"#,
        r#""name":"api_schema","arguments":{"operationId":"noSuchOperation"}"#,
        r#""name":"api_discover","arguments":{"limit":"many"}"#,
        r#""name":"api_discover""#,
    ];
    calls
        .iter()
        .map(|params| {
            (
                format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{{params}}}}}"#),
                format!(
                    r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{{params},"_meta":{{"progressToken":1}}}}}}"#
                ),
            )
        })
        .collect()
}

/// A stateless server runs `api_discover` and `api_schema` calls itself when no monitor is
/// configured (`http::tool_call`); the answer must be the bytes rmcp gives for the same call
/// with a `_meta` (which always goes to rmcp), on every protocol version, for results and
/// tool errors alike.
#[tokio::test]
async fn stateless_discover_and_schema_calls_answered_early_are_rmcps_answer_byte_for_byte() {
    let server = Server::start(engine_args(&spec_path("petstore-3.0.json"), None), true).await;
    let http = reqwest::Client::new();
    for version in [
        None,
        Some("2024-11-05"),
        Some("2025-06-18"),
        Some("2025-11-25"),
    ] {
        for id in ["7", "\"a-1\""] {
            for (plain, through_rmcp) in calls(id) {
                let post = |body: String| {
                    let mut request = http
                        .post(server.url("/mcp"))
                        .header("content-type", "application/json")
                        .header("accept", "application/json, text/event-stream")
                        .header("x-api-key", KEY)
                        .body(body);
                    if let Some(v) = version {
                        request = request.header("mcp-protocol-version", v);
                    }
                    async move {
                        let response = request.send().await.expect("send");
                        assert_eq!(response.status(), 200);
                        response.bytes().await.expect("body")
                    }
                };
                let reference = post(through_rmcp).await;
                let json: serde_json::Value = serde_json::from_slice(&reference).expect("JSON");
                assert!(json["result"]["content"].is_array(), "{json}");
                let fast = post(plain.clone()).await;
                assert_eq!(
                    String::from_utf8_lossy(&fast),
                    String::from_utf8_lossy(&reference),
                    "{version:?} {plain}"
                );
            }
        }
    }
}

/// In a session, the gate runs `api_discover` and `api_schema` itself and answers as JSON; the
/// message is the one rmcp sends over SSE for the same call with a `_meta`. `api_execute`
/// still goes to rmcp (its SSE stream keeps a long call alive), and so does every call once a
/// monitor is configured: the client's cancellation must reach the monitor's gate.
#[tokio::test]
async fn stateful_discover_and_schema_calls_answered_early_are_rmcps_answer() {
    let upstream = Upstream::start().await;
    let server = Server::start(
        engine_args(&spec_path("petstore-3.0.json"), Some(upstream.url())),
        false,
    )
    .await;
    let raw = Raw::open(&server, KEY).await;
    for (plain, through_rmcp) in calls("9") {
        let (status, content_type, reference) = raw.post(&through_rmcp).await;
        assert_eq!((status, content_type.as_str()), (200, "text/event-stream"));
        let (status, content_type, fast) = raw.post(&plain).await;
        assert_eq!(
            (status, content_type.as_str()),
            (200, "application/json"),
            "{plain}"
        );
        assert!(fast.is_some());
        assert_eq!(fast, reference, "{plain}");
    }
    let execute = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"api_execute","arguments":{"operationId":"getPetById","pathParams":{"petId":1}}}}"#;
    let (status, content_type, answer) = raw.post(execute).await;
    assert_eq!((status, content_type.as_str()), (200, "text/event-stream"));
    assert!(answer.is_some_and(|a| a["result"]["isError"] != true));

    let mut made_up = Raw::new(&server, KEY);
    made_up.session = Some("not-a-session".into());
    assert_eq!(made_up.post(&calls("1")[0].0).await.0, 404);

    // With a monitor (here one that does not answer: fail closed), calls go through rmcp.
    let mut args = engine_args(&spec_path("petstore-3.0.json"), None);
    args.monitor.monitor = Some("http://127.0.0.1:9/hook".into());
    let watched = Server::start(args, false).await;
    let raw = Raw::open(&watched, KEY).await;
    let (status, content_type, answer) = raw.post(&calls("4")[0].0).await;
    assert_eq!((status, content_type.as_str()), (200, "text/event-stream"));
    let answer = answer.expect("an answer");
    assert_eq!(answer["result"]["isError"], true, "{answer}");
}
