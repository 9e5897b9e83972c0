//! The MCP side of binary responses: the content item an `api_execute` result gains for its
//! bytes ([`binary_content`]: `image`, or a `resource_link` to a held response), and the
//! `resources/*` answers: `resources/read` of a held response for the principal that made the
//! call, `resources/list` of that principal's held responses, one resource template. The
//! owner is the most specific principal of the call: the person a bearer token names, else
//! the user session (named by the connection's `x-session-token`), else the API key.
//! Another owner's id, an unknown one and an expired one are the same resource-not-found
//! error.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use rmcp::ErrorData;
use rmcp::model::{
    CallToolResult, ContentBlock, ListResourceTemplatesResult, ListResourcesResult,
    ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
};
use tokio::sync::OwnedSemaphorePermit;

use crate::held::{HeldMeta, URI_TEMPLATE};
use crate::tools::{Access, BinaryOut, Caller, Engine};

/// Adds the content item for `out` to a tool result (after its text): MCP `image` content
/// with the bytes, or a `resource_link` to the held response.
pub(crate) fn binary_content(result: &mut CallToolResult, out: BinaryOut) {
    let item = match out {
        BinaryOut::Image { mime_type, data } => ContentBlock::image(
            base64::engine::general_purpose::STANDARD.encode(&data),
            mime_type,
        ),
        BinaryOut::Resource(meta) => ContentBlock::resource_link(resource(&meta)),
    };
    result.content.push(item);
}

/// A held response as an MCP `Resource` (also the `resource_link`'s body).
fn resource(meta: &HeldMeta) -> Resource {
    let short = meta.id.get(..12).unwrap_or(&meta.id);
    Resource::new(meta.uri(), format!("response-{short}"))
        .with_mime_type(meta.content_type.clone())
        .with_size(meta.size as u64)
        .with_description(format!(
            "An API response of {} bytes ({}), sha256 {}; readable until {}",
            meta.size,
            meta.content_type,
            meta.sha256,
            meta.expires_at
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        ))
}

/// The one error for a response that cannot be read by this caller, whatever the reason.
fn not_found() -> ErrorData {
    ErrorData::resource_not_found(
        "no such resource: apigate://responses/<id> names a response to a call of this caller \
         (the signed-in person, else the user session, else the API key), readable for a \
         limited time; a session's responses are read with its token in x-session-token",
        None,
    )
}

fn unavailable(e: crate::held::HeldError) -> ErrorData {
    tracing::warn!(error = %e, "held responses unavailable");
    ErrorData::internal_error("the held responses are unavailable; try again later", None)
}

/// Who the caller is, as the owner of held responses: the person of its bearer token, else
/// the user session its `x-session-token` names (checked as a tool call's is, and a failed
/// check spends the key's rate budget), else its key.
async fn owner(engine: &Engine, caller: &Caller) -> Result<String, ErrorData> {
    if let Some(owner) = caller.bearer.as_ref().and_then(|p| p.held_owner()) {
        return Ok(owner);
    }
    let token = caller
        .session_token
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty());
    if let (Access::Sessions, Some(auth), Some(key), Some(token)) =
        (&engine.access, &engine.auth, &caller.key, token)
    {
        let as_key = key.principal();
        auth.rate_holds(&as_key)
            .map_err(|e| ErrorData::invalid_request(e.to_string(), None))?;
        return match auth.authenticate_session(key, token).await {
            Ok(session) => Ok(session.held_owner().unwrap_or_else(|| caller.held_owner())),
            Err(e) => {
                auth.spend_key_rate(&as_key)
                    .await
                    .map_err(|e| ErrorData::invalid_request(e.to_string(), None))?;
                Err(ErrorData::invalid_request(
                    format!("the x-session-token header was refused: {e}"),
                    None,
                ))
            }
        };
    }
    Ok(caller.held_owner())
}

/// What one `resources/read` answer holds in memory, per byte of the response: the bytes,
/// their base64, the JSON-RPC message carrying it, and its frame on the wire.
const READ_COPIES: usize = 4;

/// How long a `resources/read` waits for the server's bytes in flight to come free.
const READ_WAIT: Duration = Duration::from_secs(30);

/// The server's bytes in flight a `resources/read` answer holds, kept by the HTTP layer until
/// the answer is sent (`http::sessions` puts one in the request's extensions): without it
/// (stdio, legacy SSE) they are given back once the answer is built.
#[derive(Debug, Clone, Default)]
pub struct ReadHold(Arc<Mutex<Option<OwnedSemaphorePermit>>>);

impl ReadHold {
    fn keep(&self, permit: OwnedSemaphorePermit) {
        if let Ok(mut slot) = self.0.lock() {
            *slot = Some(permit);
        }
    }
}

/// `resources/read`: the bytes of a held response of the caller, as a blob. The answer's
/// memory (its bytes about [`READ_COPIES`] times) is taken from the server's bytes in flight
/// (`--max-bytes-in-flight`), so many reads at once wait their turn instead of adding up.
pub async fn read(
    engine: &Engine,
    caller: &Caller,
    uri: &str,
    hold: Option<&ReadHold>,
) -> Result<ReadResourceResult, ErrorData> {
    let held = engine
        .held
        .read(&owner(engine, caller).await?, uri)
        .await
        .map_err(unavailable)?
        .ok_or_else(not_found)?;
    let in_flight = &engine.budgets.in_flight;
    let cost = held.bytes.len().saturating_mul(READ_COPIES);
    let Some(permit) = in_flight.hold(cost, READ_WAIT).await else {
        tracing::warn!(
            bytes = held.bytes.len(),
            "resources/read waited too long for bytes in flight"
        );
        return Err(ErrorData::internal_error(
            format!(
                "the server holds its most bytes in flight ({} bytes, --max-bytes-in-flight) \
                 and this response of {} bytes did not fit within {} s: try again when other \
                 reads and calls have finished",
                in_flight.limit(),
                held.bytes.len(),
                READ_WAIT.as_secs()
            ),
            None,
        ));
    };
    if let Some(hold) = hold {
        hold.keep(permit);
    }
    let blob = base64::engine::general_purpose::STANDARD.encode(&held.bytes);
    Ok(ReadResourceResult::new(vec![
        ResourceContents::blob(blob, held.meta.uri()).with_mime_type(held.meta.content_type),
    ]))
}

/// `resources/list`: the caller's held responses, oldest first.
pub async fn list(engine: &Engine, caller: &Caller) -> Result<ListResourcesResult, ErrorData> {
    let held = engine
        .held
        .list(&owner(engine, caller).await?)
        .await
        .map_err(unavailable)?;
    Ok(ListResourcesResult::with_all_items(
        held.iter().map(resource).collect(),
    ))
}

/// `resources/templates/list`: `apigate://responses/{id}`.
pub fn templates() -> ListResourceTemplatesResult {
    ListResourceTemplatesResult::with_all_items(vec![
        ResourceTemplate::new(URI_TEMPLATE, "api-response").with_description(
            "A binary API response an api_execute result linked to (resource_link); readable \
             by the same caller (person, session or API key) for a limited time",
        ),
    ])
}
