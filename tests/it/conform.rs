//! Protocol conformance details the official MCP suite (`scripts/conformance.sh`) also checks:
//! a tools-only server answers the methods of capabilities it does not advertise with -32601
//! (Method not found), over stateful and stateless Streamable HTTP.

use rmcp::ErrorData;
use rmcp::model::ErrorCode;
use rmcp::service::ServiceError;

use crate::support::{Server, Upstream, engine_args, spec_path};

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
