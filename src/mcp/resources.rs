//! The MCP side of binary responses: the content item an `api_execute` result gains for its
//! bytes ([`binary_content`]: `image`, or a `resource_link` to a held response), and the
//! `resources/*` answers: `resources/read` of a held response for the API key that made the
//! call, `resources/list` of that key's held responses, one resource template. Another key's
//! id, an unknown one and an expired one are the same resource-not-found error.

use base64::Engine as _;
use rmcp::ErrorData;
use rmcp::model::{
    CallToolResult, ContentBlock, ListResourceTemplatesResult, ListResourcesResult,
    ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
};

use crate::held::{HeldMeta, URI_TEMPLATE};
use crate::tools::{BinaryOut, Caller, Engine};

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
        "no such resource: apigate://responses/<id> names a response to this API key's call, \
         readable for a limited time",
        None,
    )
}

fn unavailable(e: crate::held::HeldError) -> ErrorData {
    tracing::warn!(error = %e, "held responses unavailable");
    ErrorData::internal_error("the held responses are unavailable; try again later", None)
}

/// `resources/read`: the bytes of a held response of the caller's key, as a blob.
pub async fn read(
    engine: &Engine,
    caller: &Caller,
    uri: &str,
) -> Result<ReadResourceResult, ErrorData> {
    let held = engine
        .held
        .read(&caller.held_owner(), uri)
        .await
        .map_err(unavailable)?
        .ok_or_else(not_found)?;
    let blob = base64::engine::general_purpose::STANDARD.encode(&held.bytes);
    Ok(ReadResourceResult::new(vec![
        ResourceContents::blob(blob, held.meta.uri()).with_mime_type(held.meta.content_type),
    ]))
}

/// `resources/list`: the caller's key's held responses, oldest first.
pub async fn list(engine: &Engine, caller: &Caller) -> Result<ListResourcesResult, ErrorData> {
    let held = engine
        .held
        .list(&caller.held_owner())
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
             by the same API key for a limited time",
        ),
    ])
}
