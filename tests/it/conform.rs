//! Protocol conformance details the official MCP suite (`scripts/conformance.sh`) also checks:
//! a tools-only server answers the methods of capabilities it does not advertise with -32601
//! (Method not found), over stateful and stateless Streamable HTTP; and the stateless
//! `tools/list` served from its serialized result is byte for byte rmcp's answer.

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
    assert!(caps.prompts.is_none() && caps.resources.is_none() && caps.completions.is_none());

    assert_method_not_found("prompts/list", client.list_prompts(None).await);
    assert_method_not_found("resources/list", client.list_resources(None).await);
    assert_method_not_found(
        "resources/templates/list",
        client.list_resource_templates(None).await,
    );
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
/// same request with a `_meta` (which always goes to rmcp) is the reference, on every
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
            let through_rmcp = format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list","params":{{"_meta":{{"progressToken":1}}}}}}"#
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
    // No key: the key check comes first.
    assert_eq!(post(list.clone(), vec![accept]).await.0, 401);
    // What rmcp refuses stays refused.
    assert_eq!(
        post(list.clone(), vec![("accept", "application/json"), key])
            .await
            .0,
        406
    );
    assert_eq!(
        post(
            list.clone(),
            vec![("accept", "application/json;q=0, text/event-stream"), key]
        )
        .await
        .0,
        406
    );
    assert_eq!(
        post(
            list.clone(),
            vec![accept, key, ("mcp-protocol-version", "1999-01-01")]
        )
        .await
        .0,
        400
    );
}
