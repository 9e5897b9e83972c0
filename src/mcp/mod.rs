//! Thin rmcp adapter: the tool list, call dispatch to [`Engine::call`], and mapping results to
//! MCP (`structuredContent` + a JSON text block; `isError: true` for tool failures). Protocol
//! errors are left to rmcp, which uses them only for malformed JSON-RPC. The `resources`
//! capability serves binary API responses only (`resources`).

mod resources;

pub(crate) use resources::{ReadHold, binary_content};

use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestMethod,
    CompleteRequestParams, CompleteResult, Implementation, ListPromptsRequestMethod,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig, ServerResult, SubscriptionFilter, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use sha2::{Digest, Sha256};

use crate::tools::{Caller, Engine, Named, UnknownTool};

/// What the HTTP layer learned about the caller, attached to each request's extensions.
#[derive(Debug, Clone, Default)]
pub(crate) struct HttpCaller {
    /// A stable, non-secret id for the presented credential (used as the session id in
    /// stateless mode).
    pub key_fingerprint: String,
    /// The verified server key (production).
    pub key: Option<crate::auth::KeyPrincipal>,
    /// The principal of a verified bearer token (production with OAuth): the user the calls
    /// run as, no session token needed.
    pub bearer: Option<crate::auth::Principal>,
}

/// The `_meta` key on an `api_execute` result: `true` when the call used a safe method (GET,
/// HEAD, OPTIONS) and so changed nothing, `false` when it may have (`Output::read_only`; a
/// dry run and the other tools carry none).
pub(crate) const READ_ONLY_META: &str = "apigate/readOnly";

/// A tool's outcome as MCP sends it: the value as `structuredContent` plus a JSON text block,
/// `isError: true` for a tool failure, and `_meta` saying whether an `api_execute` changed
/// nothing.
pub fn call_tool_result(tool: &Named, result: crate::tools::ToolResult) -> CallToolResult {
    match result {
        Ok(output) => {
            let read_only = output.read_only();
            let mut result = CallToolResult::structured(output.to_json());
            if let Some(read_only) = read_only {
                // Tool annotations are per tool; `_meta` says it of this one call.
                let mut meta = serde_json::Map::new();
                meta.insert(READ_ONLY_META.into(), read_only.into());
                result.meta = Some(rmcp::model::MetaObject(meta));
            }
            result
        }
        Err(error) => {
            // The name is the agent's: escaped and cut, like every outside text in a log.
            let name = match tool {
                Ok(t) => t.name(),
                Err(UnknownTool(name)) => name,
            };
            tracing::info!(tool = %crate::printable::cell(name, 64), code = error.code.as_str(), "tool call failed");
            CallToolResult::structured_error(error.to_json())
        }
    }
}

/// Fingerprint of a secret, safe to log and to use as an id.
pub fn fingerprint(secret: &str) -> String {
    let digest = Sha256::digest(secret.as_bytes());
    format!("key-{}", &hex::encode(digest)[..16])
}

/// One MCP session's handler. Stateful transports create one per session (its drop ends the
/// session for the monitor); stateless HTTP creates one per request.
#[derive(Clone)]
pub(crate) struct McpServer {
    engine: Arc<Engine>,
    session: Arc<Session>,
    tools: ToolList,
}

/// The tool list as rmcp serves it: without and with the session header (production leaves
/// `_sessionToken` out of the schemas when the connection carries `x-session-token`), and as
/// `tools/list`'s `result` serialized the way rmcp sends [`McpServer::list_tools`]'s answer to
/// a peer on a protocol version before 2026-07-28 (no `resultType`), which the HTTP adapter
/// answers plain `tools/list` requests with (see `http::tool_list`). Built for one version
/// of the APIs: rebuilding it per `tools/list` was most of that request's cost.
pub(crate) struct Built {
    /// The [`crate::apis::Apis::version`] it was built for.
    version: u64,
    plain: Vec<Tool>,
    with_session_header: Vec<Tool>,
    json_plain: bytes::Bytes,
    json_with_session_header: bytes::Bytes,
}

/// The tool list of one server, shared by its handlers: built once per version of the APIs
/// (a reload that changes the APIs' names or titles changes the list, and sessions hear of
/// it: [`tool_list_changes`]).
#[derive(Clone)]
pub(crate) struct ToolList {
    built: Arc<arc_swap::ArcSwap<Built>>,
}

impl ToolList {
    pub fn new(engine: &Engine) -> ToolList {
        ToolList {
            built: Arc::new(arc_swap::ArcSwap::from_pointee(Built::new(engine))),
        }
    }

    /// The list for the APIs the engine serves now: the one built, or a new one after a
    /// reload.
    pub(crate) fn current(&self, engine: &Engine) -> Arc<Built> {
        let built = self.built.load_full();
        let version = engine.apis().version;
        if built.version == version {
            return built;
        }
        let fresh = Arc::new(Built::new(engine));
        self.built.store(fresh.clone());
        fresh
    }
}

impl Built {
    fn new(engine: &Engine) -> Built {
        let version = engine.apis().version;
        let build = |session_header: bool| -> Vec<Tool> {
            engine
                .tool_definitions(session_header)
                .into_iter()
                .filter_map(|t| match serde_json::from_value(t) {
                    Ok(tool) => Some(tool),
                    Err(e) => {
                        tracing::error!(error = %e, "tool definition does not fit rmcp's Tool");
                        None
                    }
                })
                .collect()
        };
        let json = |tools: &Vec<Tool>| {
            // A list of plain JSON values serializes without fail; an empty list if not.
            let mut result =
                ServerResult::ListToolsResult(ListToolsResult::with_all_items(tools.clone()));
            result.strip_result_type_for_legacy_peer();
            serde_json::to_vec(&result)
                .map(bytes::Bytes::from)
                .unwrap_or_else(|e| {
                    tracing::error!(error = %e, "could not serialize the tool list");
                    bytes::Bytes::from_static(br#"{"tools":[]}"#)
                })
        };
        let plain = build(false);
        let with_session_header = build(true);
        Built {
            version,
            json_plain: json(&plain),
            json_with_session_header: json(&with_session_header),
            plain,
            with_session_header,
        }
    }

    /// The serialized result for a request with these headers (and a verified bearer
    /// token or not: it is the user's session).
    pub(crate) fn json_for(&self, headers: &http::HeaderMap, bearer: bool) -> &bytes::Bytes {
        if session_pinned(headers, bearer) {
            &self.json_with_session_header
        } else {
            &self.json_plain
        }
    }
}

/// Whether the connection's session is known without `_sessionToken`: it carries a
/// (non-blank) `x-session-token`, or a verified bearer token (which is the session).
/// Production then leaves `_sessionToken` out of the tools' schemas.
fn session_pinned(headers: &http::HeaderMap, bearer: bool) -> bool {
    bearer
        || headers
            .get(crate::auth::SESSION_TOKEN_HEADER)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| !v.trim().is_empty())
}

/// Calls `send` each time a reload changed the tool list (an API added, removed or
/// retitled), until `stop` fires or `send` fails (the peer is gone). The list is compared,
/// not the reload: a reload that changed only operations sends nothing (clients see those
/// at their next `api_discover`).
async fn tool_list_changes<F, Fut>(
    engine: Arc<Engine>,
    tools: ToolList,
    stop: tokio_util::sync::CancellationToken,
    send: F,
) where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let mut changes = engine.watch_apis();
    let mut seen = tools.current(&engine).json_plain.clone();
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            changed = changes.changed() => if changed.is_err() { return },
        }
        let now = tools.current(&engine).json_plain.clone();
        if now != seen {
            seen = now;
            if !send().await {
                return;
            }
        }
    }
}

struct Session {
    engine: Arc<Engine>,
    /// Set once the session is known (MCP `initialized`, or at creation for stdio / SSE).
    id: Mutex<Option<String>>,
    /// The session's id in monitor events, set when the monitor heard of its start.
    monitor_id: Mutex<Option<String>>,
    /// Whether this handler lives as long as the session (not stateless HTTP).
    tracked: bool,
    /// Cancelled when the session ends: stops its tool-list watch.
    ended: tokio_util::sync::CancellationToken,
}

impl Drop for Session {
    fn drop(&mut self) {
        self.ended.cancel();
        if !self.tracked {
            return;
        }
        if let Some(id) = self.monitor_id.lock().ok().and_then(|mut g| g.take()) {
            self.engine.session_ended(&id);
        }
    }
}

impl McpServer {
    /// A handler for one session. `session_id` is known up front for stdio and legacy SSE;
    /// Streamable HTTP learns it from the `Mcp-Session-Id` header.
    pub fn new(engine: Arc<Engine>, session_id: Option<String>, tracked: bool) -> McpServer {
        let tools = ToolList::new(&engine);
        McpServer::with_tools(engine, session_id, tracked, &tools)
    }

    /// [`McpServer::new`] with the server's tool list, built once.
    pub(crate) fn with_tools(
        engine: Arc<Engine>,
        session_id: Option<String>,
        tracked: bool,
        tools: &ToolList,
    ) -> McpServer {
        McpServer {
            session: Arc::new(Session {
                engine: engine.clone(),
                id: Mutex::new(session_id),
                monitor_id: Mutex::new(None),
                tracked,
                ended: tokio_util::sync::CancellationToken::new(),
            }),
            engine,
            tools: tools.clone(),
        }
    }

    /// Makes the handlers of one Streamable HTTP service (one per session, or per request
    /// when stateless), all sharing the server's tool list.
    pub(crate) fn factory(
        engine: Arc<Engine>,
        tracked: bool,
        tools: &ToolList,
    ) -> impl Fn() -> Result<McpServer, std::io::Error> + Send + Sync + 'static {
        let tools = tools.clone();
        move || Ok(McpServer::with_tools(engine.clone(), None, tracked, &tools))
    }

    fn caller(&self, extensions: &rmcp::model::Extensions) -> Caller {
        let parts = extensions.get::<http::request::Parts>();
        let http = parts.and_then(|p| p.extensions.get::<HttpCaller>());
        Caller {
            // Only the session this handler serves. The request's `mcp-session-id` header is
            // not read here: on rmcp's sessionless path (stateless mode, or a protocol
            // 2026-07-28 `_meta` request on a stateful server) nothing validated it.
            mcp_session: self.session.id.lock().ok().and_then(|g| g.clone()),
            key: http.and_then(|c| c.key.clone()),
            bearer: http.and_then(|c| c.bearer.clone()),
            key_fingerprint: http.map(|c| c.key_fingerprint.clone()),
            session_token: parts
                .and_then(|p| p.headers.get(crate::auth::SESSION_TOKEN_HEADER))
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
            cancelled: None,
        }
    }
}

impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        let title = &self.engine.apis().title();
        // Resources are binary API responses an `api_execute` result linked to (no
        // subscriptions, no list-changed notifications). The tool list changes when a reload
        // adds, removes or retitles an API.
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .build();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new("apigate", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "apigate gives you {}: find an operation with api_discover, read its parameters \
                 with api_schema, then call it with api_execute.",
                if title.is_empty() {
                    "an HTTP API"
                } else {
                    title.as_str()
                }
            ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let parts = context.extensions.get::<http::request::Parts>();
        let session_header = parts.is_some_and(|p| {
            let bearer = p
                .extensions
                .get::<HttpCaller>()
                .is_some_and(|c| c.bearer.is_some());
            session_pinned(&p.headers, bearer)
        });
        let built = self.tools.current(&self.engine);
        let tools = if session_header {
            &built.with_session_header
        } else {
            &built.plain
        };
        Ok(ListToolsResult::with_all_items(tools.clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut caller = self.caller(&context.extensions);
        caller.cancelled = Some(context.ct.clone());
        let args = request.arguments.unwrap_or_default();
        // The one place (with `http/tool_call.rs`) a tool's name is read as text.
        let tool = crate::tools::Tool::parse(&request.name);
        // A call cancelled (by the client, or at the end of the server's drain) stops here: its
        // future is dropped, which writes its audit row (`CANCELLED`), while the process
        // still runs. rmcp sends no answer to a cancelled request.
        let (result, binary) = tokio::select! {
            done = self.engine.call_with_binary(&caller, &tool, args) => done,
            () = context.ct.cancelled() => {
                return Err(ErrorData::internal_error("the call was cancelled", None));
            }
        };
        let mut result = call_tool_result(&tool, result);
        if let Some(binary) = binary {
            binary_content(&mut result, binary);
        }
        Ok(result.into())
    }

    // `prompts` and `completions` are not advertised, so they answer -32601 (Method not found)
    // as the spec asks, instead of rmcp's default empty lists.
    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Err(ErrorData::method_not_found::<ListPromptsRequestMethod>())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        resources::list(&self.engine, &self.caller(&context.extensions)).await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(resources::templates())
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let caller = self.caller(&context.extensions);
        let hold = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.extensions.get::<resources::ReadHold>());
        resources::read(&self.engine, &caller, &request.uri, hold)
            .await
            .map(Into::into)
    }

    async fn complete(
        &self,
        _request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        Err(ErrorData::method_not_found::<CompleteRequestMethod>())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::default();
        accepted.tools_list_changed = requested.tools_list_changed;
        Some(accepted)
    }

    /// A `subscriptions/listen` stream (protocol 2026-07-28): `notifications/tools/list_changed`
    /// when a reload changed the tool list.
    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let sink = context.sink().clone();
        let stop = context.request_context().ct.clone();
        tool_list_changes(self.engine.clone(), self.tools.clone(), stop, move || {
            let sink = sink.clone();
            async move { sink.notify_tool_list_changed().await.is_ok() }
        })
        .await;
        Ok(())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if !self.session.tracked {
            // Stateless: the monitor hears of the session on its first call, and no stream
            // stays open for a list-changed notification.
            return;
        }
        // Sessions on protocol versions before 2026-07-28 hear of a changed tool list on
        // their own stream.
        let peer = context.peer.clone();
        tokio::spawn(tool_list_changes(
            self.engine.clone(),
            self.tools.clone(),
            self.session.ended.clone(),
            move || {
                let peer = peer.clone();
                async move { peer.notify_tool_list_changed().await.is_ok() }
            },
        ));
        // rmcp delivers `initialized` to a session's own handler only (routed by, and so
        // validating, its `mcp-session-id`); stdio and SSE handlers know their id already.
        let header = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|p| p.headers.get("mcp-session-id"))
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        if let (Some(header), Ok(mut id)) = (header, self.session.id.lock()) {
            id.get_or_insert(header);
        }
        let Some(monitor_id) = self.caller(&context.extensions).monitor_session() else {
            return;
        };
        if let Ok(mut id) = self.session.monitor_id.lock() {
            id.get_or_insert_with(|| monitor_id.clone());
        }
        self.engine.session_started(&monitor_id);
    }
}

#[cfg(test)]
mod tests {
    use super::fingerprint;

    #[test]
    fn fingerprints_are_stable_and_not_reversible() {
        let id = fingerprint("sess_0123456789abcdef0123456789abcdef");
        assert!(id.starts_with("key-"));
        assert!(!id.contains("0123456789abcdef"));
        assert_eq!(id, fingerprint("sess_0123456789abcdef0123456789abcdef"));
    }
}
