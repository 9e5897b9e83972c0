//! Attacks of issues 15, 26 and 41, performed for real against a running apigate (real HTTP
//! server, real upstream, real Postgres where the mode needs it). Each test failed before its
//! fix.
//!
//! - `credential_scope`: a session's or a person's stored upstream credentials reach only the
//!   API they name, with three APIs served; headers that name none are refused when stored.
//! - `leaks`: no credential reaches the agent (truncation, URL user-info, /health, binary bodies).
//! - `encoded`: no credential comes back through a compressed, UTF-16/32 or base64 body.
//! - `forged_text`: agent- and admin-chosen text cannot forge rows or drive the terminal.
//! - `files`: the dev upload and download folders (a swapped-in link, hard links, bidi names, bounds).
//! - `held_reads`: many `resources/read`s of a big held response wait for bytes in flight.
//! - `held_total`: held responses in Postgres stay within a total bound, whatever the owners.
//! - `exhaustion`: nothing unauthenticated, or cheap with one key, exhausts the server.
//! - `mcp_sessions`: an MCP session belongs to the key that opened it.
//! - `owners`: monitor sessions and approvals belong to their owner.
//! - `people`: signed-in people stay apart (exact `sub`, own budgets, own downloads).
//! - `privileges`: key features, session tokens, method override, lockout, admin actions.
//! - `refusals`: refused calls spend the key's budget; refusals are audited, boundedly.
//! - `remote_specs`: a URL spec's `$ref`s stay on its origin; its size is capped; unchanged, not parsed again.
//! - `requests`: what an agent shapes (form `_method`, a credential's query name, free-form
//!   query objects, redirects with an identity assertion, hidden operations' schemas).
//! - `roles`: an admin changes only roles whose features it fully holds.
//! - `session_bounds`: a session's stored headers, monitor rates per key, legacy SSE pinning.
//! - `shares`: one user session's `initialize`s spend its own bucket, not only its key's.
//! - `token_errors`: the OAuth token endpoint's error answer never shows the client secret.
//! - `select`: one `select` cannot exhaust memory, call an unknown function after the request,
//!   or rebuild a scrubbed credential (issue 41, items 1 and 11).
//! - `pages_memory`: `pages` and many calls at once stay within the call's and the server's
//!   byte budgets (issue 41, item 2).
//! - `listen_streams`: `subscriptions/listen` streams count under the key's session cap.
//! - `public_text`: `/health` and 401/503 answers name no secret, its place, or an issuer URL.
//! - `introspection`: made-up opaque tokens cannot lock a known token out of introspection.
//! - `api_names`: with several APIs, a caller is never shown an API it has no feature for.

mod api_names;
mod credential_scope;
mod encoded;
mod exhaustion;
mod files;
mod forged_text;
mod held_reads;
mod held_total;
mod introspection;
mod leaks;
mod listen_streams;
mod mcp_sessions;
mod owners;
mod pages_memory;
mod people;
mod privileges;
mod public_text;
mod refusals;
mod remote_specs;
mod requests;
mod roles;
mod select;
mod session_bounds;
mod shares;
mod token_errors;

use std::collections::HashMap;

use axum::http::HeaderMap;
use serde_json::{Value, json};

use crate::support::header_text;

/// The echo APIs' spec (`leaks`, `encoded`), under `/api` of wherever it is served:
/// `GET /echo` (`pad`, `form`), summed up as `echo_summary`, and `GET {path}` with the query
/// parameters `params`, as `operation`.
fn echo_spec(title: &str, echo_summary: &str, path: &str, operation: Value) -> Value {
    let mut paths = json!({
        "/echo": {"get": {
            "operationId": "echo",
            "summary": echo_summary,
            "parameters": [query_param("pad"), query_param("form")],
            "responses": {"200": {"description": "the credentials"}}
        }}
    });
    paths[path] = json!({ "get": operation });
    json!({
        "openapi": "3.0.3",
        "info": {"title": title, "version": "1"},
        "servers": [{"url": "/api"}],
        "paths": paths
    })
}

/// `spec` as a file of its own for each server (tests run at the same time), named
/// `NAME-<pid>-<n>.json` in the folder `attacks-NAME`.
fn spec_file(name: &str, spec: &Value) -> String {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("attacks-{name}"));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}-{}-{n}.json", std::process::id()));
    std::fs::write(&path, spec.to_string()).unwrap();
    path.to_string_lossy().into_owned()
}

/// An optional string query parameter.
fn query_param(name: &str) -> Value {
    json!({"name": name, "in": "query", "schema": {"type": "string"}})
}

/// What the echo APIs echo: `pad` (of the query), then the credentials received.
fn echoed(headers: &HeaderMap, query: &HashMap<String, String>) -> Value {
    json!({
        "pad": query.get("pad").cloned().unwrap_or_default(),
        "authorization": header_text(headers, "authorization"),
        "x-api-key": header_text(headers, "x-api-key"),
    })
}

/// `api_execute` of `operation` with `query`, as the agent sees it: (structured content, the
/// whole tool result, content and structured content, serialized).
async fn execute(
    client: &rmcp::service::Peer<rmcp::service::RoleClient>,
    operation: &str,
    query: Value,
) -> (Value, String) {
    let args = json!({"operationId": operation, "query": query});
    let (_, shown, text) = crate::support::call_shown(client, "api_execute", args).await;
    (shown, text)
}

/// `echo` with `pad` dots before the credentials, in `form`, asserted to answer 200.
async fn echo_padded(
    client: &rmcp::service::Peer<rmcp::service::RoleClient>,
    pad: usize,
    form: &str,
) -> (Value, String) {
    let args = json!({"pad": ".".repeat(pad), "form": form});
    let (shown, text) = execute(client, "echo", args).await;
    assert_eq!(shown["status"], 200, "{form}, pad {pad}: {text}");
    (shown, text)
}

/// A secret as is and percent-encoded (every non-alphanumeric character, or form style): the
/// forms an echo can take in a URL or a body.
fn url_forms(secret: &str) -> [String; 3] {
    use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
    [
        secret.to_string(),
        utf8_percent_encode(secret, NON_ALPHANUMERIC).to_string(),
        url::form_urlencoded::byte_serialize(secret.as_bytes()).collect(),
    ]
}
