//! `tools/list`, answered from the result serialized once per version of the APIs ([`ToolList`])
//! instead of through rmcp: a fresh service, task and cancellation tree per stateless
//! request, three tasks and their channels per stateful one, and serializing the same three
//! tools (8 KB of JSON) every time were most of what the request cost.
//!
//! Only requests whose answer rmcp would give the same way take this path: a plain
//! `tools/list` (no cursor, no `_meta`), `Accept` naming JSON and SSE, and no
//! `MCP-Protocol-Version` header or one of the handshake versions before the standard
//! headers; on a stateful server, only within a live session of the caller's key (the gate
//! checks). The answer is JSON (`application/json`), which Streamable HTTP allows for any
//! request; rmcp sends a stateful answer as a one-event SSE stream. Anything else goes on to
//! rmcp, which answers or refuses it as before.

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, GetMeta, JsonRpcMessage, ProtocolVersion};

use crate::mcp::ToolList;

/// The answer to `message`, or `None` when rmcp should answer it.
pub fn answer(
    lists: &ToolList,
    engine: &crate::tools::Engine,
    bearer: bool,
    message: &ClientJsonRpcMessage,
    headers: &HeaderMap,
) -> Option<Response> {
    let JsonRpcMessage::Request(request) = message else {
        return None;
    };
    let ClientRequest::ListToolsRequest(list) = &request.request else {
        return None;
    };
    // rmcp keeps a request's `_meta` apart from its params.
    if !request.request.get_meta().is_empty()
        || list
            .params
            .as_ref()
            .is_some_and(|p| p.cursor.is_some() || p.meta.is_some())
        || !accepts_json_and_sse(headers)
        || !plain_protocol_version(headers)
    {
        return None;
    }
    let built = lists.current(engine);
    let result = built.json_for(headers, bearer);
    let id = serde_json::to_vec(&request.id).ok()?;
    let mut body = Vec::with_capacity(result.len() + id.len() + 40);
    body.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    body.extend_from_slice(&id);
    body.extend_from_slice(br#","result":"#);
    body.extend_from_slice(result);
    body.push(b'}');
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = StatusCode::OK;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Some(response)
}

/// rmcp answers 406 unless `Accept` names both `application/json` and `text/event-stream`.
/// Media ranges with parameters or quotes (`;q=0`, …) are left to rmcp's parser.
pub(super) fn accepts_json_and_sse(headers: &HeaderMap) -> bool {
    let (mut json, mut sse) = (false, false);
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else {
            return false;
        };
        if value.contains([';', '"']) {
            return false;
        }
        for media in value.split(',') {
            let essence = media.trim();
            json |= essence.eq_ignore_ascii_case("application/json");
            sse |= essence.eq_ignore_ascii_case("text/event-stream");
        }
    }
    json && sse
}

/// No `MCP-Protocol-Version`, or one rmcp knows that has a handshake and predates the
/// standard headers (`Mcp-Method`, checked against the body from then on).
pub(super) fn plain_protocol_version(headers: &HeaderMap) -> bool {
    let mut values = headers.get_all("mcp-protocol-version").iter();
    let Some(value) = values.next() else {
        return true;
    };
    if values.next().is_some() {
        return false;
    }
    let Ok(value) = value.to_str() else {
        return false;
    };
    ProtocolVersion::KNOWN_VERSIONS.iter().any(|v| {
        v.as_str() == value
            && v.has_initialize()
            && v.as_str() < ProtocolVersion::STANDARD_HEADERS.as_str()
    })
}
