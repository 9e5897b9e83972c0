//! `tools/call` of `api_discover` and `api_schema`, run here instead of through rmcp when
//! nothing can make them wait: both are local lookups, bounded in time, and without a monitor
//! there is no gate a client could need to cancel. rmcp's per-request service (a task and a
//! cancellation tree per stateless request; three tasks, their channels and an SSE stream per
//! stateful one) cost more than the search itself.
//!
//! The same requests as [`super::tool_list`]: no `_meta`, `Accept` naming JSON and SSE, a
//! plain protocol version, stateless or within a live session of the caller's key; and params
//! of only `name` and `arguments`. The answer is the JSON-RPC response rmcp would send, as
//! JSON. `api_execute`, any call while a monitor is configured, and everything else go on to
//! rmcp, whose SSE stream keeps a long call alive and whose cancellation reaches the monitor.

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use rmcp::model::{
    ClientJsonRpcMessage, ClientRequest, GetMeta, JsonRpcMessage, RequestId, ServerJsonRpcMessage,
    ServerResult,
};

use super::tool_list::{accepts_json_and_sse, plain_protocol_version};
use crate::mcp::HttpCaller;
use crate::tools::{Caller, Engine, Output};
use crate::types::Tool;

/// The answer to `message`, or `None` when rmcp should answer it. `session` is the live
/// Streamable HTTP session the gate checked, if any.
pub async fn answer(
    engine: &Engine,
    message: &ClientJsonRpcMessage,
    headers: &HeaderMap,
    caller: &HttpCaller,
    session: Option<&str>,
) -> Option<Response> {
    let JsonRpcMessage::Request(request) = message else {
        return None;
    };
    let ClientRequest::CallToolRequest(call) = &request.request else {
        return None;
    };
    let params = &call.params;
    let tool = Tool::parse(&params.name);
    if engine.monitor.is_some()
        || !matches!(tool, Ok(Tool::Discover | Tool::Schema))
        || !request.request.get_meta().is_empty()
        || params.meta.is_some()
        || params.input_responses.is_some()
        || params.request_state.is_some()
        || !accepts_json_and_sse(headers)
        || !plain_protocol_version(headers)
    {
        return None;
    }
    let who = Caller {
        mcp_session: session.map(str::to_string),
        key: caller.key.clone(),
        key_fingerprint: Some(caller.key_fingerprint.clone()),
        session_token: headers
            .get(crate::auth::SESSION_TOKEN_HEADER)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
        bearer: caller.bearer.clone(),
        cancelled: None,
    };
    let args = params.arguments.clone().unwrap_or_default();
    let outcome = engine.call(&who, &tool, args).await;
    // The call has run (and is audited): it must not fall through to rmcp and run again.
    let body = match outcome {
        Ok(output) if output.read_only().is_none() => answer_json(&request.id, &output),
        outcome => {
            let mut result =
                ServerResult::CallToolResult(crate::mcp::call_tool_result(&tool, outcome));
            result.strip_result_type_for_legacy_peer();
            serde_json::to_vec(&ServerJsonRpcMessage::response(result, request.id.clone()))
        }
    };
    let body = match body {
        Ok(body) => body,
        Err(e) => {
            tracing::error!(error = %e, "could not serialize a tool result");
            return Some(super::error::json_error(
                crate::types::Code::Internal,
                "the tool ran but its result could not be serialized",
            ));
        }
    };
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = StatusCode::OK;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Some(response)
}

/// The JSON-RPC answer rmcp sends for a successful call (`mcp::call_tool_result`, without
/// `resultType`), written straight from the typed result: the result is serialized once, and
/// that JSON is both the text block (as a string) and `structuredContent` (as it is), instead
/// of being built as a `Value`, printed, and serialized again.
fn answer_json(id: &RequestId, output: &Output) -> serde_json::Result<Vec<u8>> {
    let json = serde_json::to_string(output)?;
    let text = serde_json::to_string(&json)?;
    let id = serde_json::to_string(id)?;
    let parts: [&[u8]; 7] = [
        br#"{"jsonrpc":"2.0","id":"#,
        id.as_bytes(),
        br#","result":{"content":[{"type":"text","text":"#,
        text.as_bytes(),
        br#"}],"structuredContent":"#,
        json.as_bytes(),
        br#","isError":false}}"#,
    ];
    Ok(parts.concat())
}
