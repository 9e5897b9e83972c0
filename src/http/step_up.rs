//! Step-up authorization (MCP authorization, "Runtime Insufficient Scope Errors"): a signed-in
//! person's `tools/call` that their token's scopes do not allow is answered `403` with
//! `WWW-Authenticate: Bearer error="insufficient_scope", scope="…", resource_metadata="…"`
//! before it runs, so that the client can ask the person for those scopes and call again.
//!
//! What the call lacks is the tools' answer (`Engine::lacking`: the tool's feature, and for
//! `api_execute` the named operation's features and, with several APIs, one naming its API);
//! which scopes grant it is the scope table's (`ResourceServer::step_up_scopes`). When no
//! scope would grant it (the table has none, the key beside the token lacks it too, or the
//! caller is read-only), the call goes on and the pipeline refuses it with a `FORBIDDEN` tool
//! error as before. Every POST carries one JSON-RPC message (MCP has no batches since
//! 2025-06-18, and a JSON array is refused with 400 before this), so one call is checked.
//!
//! `resources/read` needs no scope of its own: a held response is read by its owner, the
//! person whose `api_execute` fetched it, and that call needed its scopes.

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage};
use serde_json::{Map, Value};

use super::AppState;
use super::error::ApiError;
use crate::mcp::HttpCaller;
use crate::types::{Code, Tool};

/// The `403 insufficient_scope` for `message`, when it is a `tools/call` of a signed-in
/// person whose token's scopes do not grant what it needs and more scopes would; the refusal
/// is audited as the pipeline's are. `None`: the call goes on.
pub(super) async fn refusal(
    state: &AppState,
    caller: &HttpCaller,
    message: &ClientJsonRpcMessage,
) -> Option<Response> {
    let gate = state.oauth.as_ref()?;
    let principal = caller.bearer.as_ref()?;
    let JsonRpcMessage::Request(request) = message else {
        return None;
    };
    let ClientRequest::CallToolRequest(call) = &request.request else {
        return None;
    };
    let tool = Tool::parse(&call.params.name).ok()?;
    let none = Map::new();
    let args = call.params.arguments.as_ref().unwrap_or(&none);
    let lacking = state.engine.lacking(principal, tool, args)?;
    let key = caller.key.as_ref().map(|k| &k.features);
    let scopes = gate.server.step_up_scopes(&lacking.features, key)?;
    state.engine.record_lacking(principal, &lacking).await;
    let apis = state.engine.apis();
    let what = match lacking.operation {
        Some(r) => format!("{} of {}", tool.name(), apis.shown_id(r)),
        None => tool.name().to_string(),
    };
    let needs: Vec<&str> = lacking
        .features
        .iter()
        .filter_map(|f| f.first().map(String::as_str))
        .collect();
    let description = format!("{what} needs {}", needs.join(", "));
    tracing::info!(tool = tool.name(), missing = %crate::printable::cell(lacking.first(), 200),
        "a token without the scopes a call needs: 403 insufficient_scope");
    let scope = scopes.join(" ");
    let mut error = ApiError::new(
        Code::Forbidden,
        format!(
            "{description}, which this token's scopes do not grant: sign in again with the \
             scope{} {scope} (an MCP client that supports step-up authorization asks for {} \
             itself), then call again",
            if scopes.len() == 1 { "" } else { "s" },
            if scopes.len() == 1 { "it" } else { "them" },
        ),
    );
    error
        .details
        .insert("missing".into(), Value::String(lacking.first().into()));
    error.details.insert("scope".into(), Value::String(scope));
    let mut response = error.into_response();
    let challenge = super::guard::insufficient_scope(gate, &scopes, Some(&description));
    if let Ok(value) = HeaderValue::from_str(&challenge) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    Some(response)
}
