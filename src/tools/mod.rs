//! The three tools as plain async functions over core types, and the call pipeline of
//! `docs/design.md`: (production) session token → tool permission → rate limit → resolve the
//! operation (and its permission) and validate arguments → agent-monitor gate → run → post-execute event, audit,
//! metrics. Adapters (MCP over HTTP, SSE, stdio) call [`Engine::call`] and only change how
//! results look.

pub mod args;
pub mod binary_out;
mod credentials;
pub(crate) mod defs;
pub mod error;
mod lacking;
mod method_override;
mod ops;
pub mod output;
mod overview;
mod page;
pub mod paging;
mod resolve;
mod result;
pub mod select;
pub mod upload;

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use crate::apis::{Api, Apis};
use crate::auth::{
    Auth, AuthError, KeyPrincipal, PermissionRules, Principal, add_session_token_param,
    choose_session_token, take_session_token,
};
use crate::index::Index;
use crate::monitor::{Monitor, OperationRef, ToolCall};
use crate::spec::Spec;
use crate::store::Decision;
pub use crate::types::Code;
pub use crate::types::{Tool, UnknownTool};
use crate::upstream::Upstream;
pub use binary_out::BinaryOptions;
pub(crate) use binary_out::BinaryOut;
pub use error::ToolError;
pub use lacking::Lacking;
pub(crate) use ops::Prepared;
pub use ops::{Planned, shown_by_default};
pub use output::Output;
pub use page::Budgets;

/// The audit log's and the metrics' name for a tool that is not one of the three.
pub const UNKNOWN_TOOL: &str = "unknown";

/// Whose permissions a call runs with.
// One per engine, built once: boxing the principal would save nothing.
#[allow(clippy::large_enum_variant)]
pub enum Access {
    /// Every call acts as this principal (dev mode: all features, or the dev key's own
    /// permissions when it was checked against the database at start-up).
    Fixed(Principal),
    /// Every call names its user session (`_sessionToken` or `x-session-token`), checked
    /// against the database (production).
    Sessions,
}

/// Everything a tool call needs, built once at start-up and shared by every session.
pub struct Engine {
    /// The APIs served, with their index: read once per call (a reload swaps them, and a
    /// call in flight finishes on the version it started with).
    apis: arc_swap::ArcSwap<Apis>,
    /// Pipeline passes running now ([`Pass`]): a shutdown waits for the cancelled ones to
    /// have queued their audit rows ([`Engine::passes_ended`]).
    passes: std::sync::atomic::AtomicUsize,
    pub monitor: Option<Monitor>,
    pub access: Access,
    /// The database side: sessions, rate limits and the audit log (absent in dev without a
    /// database).
    pub auth: Option<Auth>,
    /// Size caps on the arguments, checked before any matching or ranking.
    pub limits: args::InputLimits,
    /// Signs an identity assertion into every upstream call (`--identity-header`).
    pub identity: Option<Arc<crate::auth::identity::Identity>>,
    /// Where `{"file": NAME}` uploads are read from (`apigate dev --upload-dir`; never in
    /// production).
    pub upload_dir: Option<Arc<upload::UploadDir>>,
    /// Binary responses held for `resources/read` (in memory; production: in Postgres).
    pub held: crate::held::HeldResponses,
    /// How binary responses come back (`--max-image-bytes`, `--download-dir`).
    pub binary: BinaryOptions,
    /// The bytes one `api_execute` call and all calls together may hold.
    pub budgets: Budgets,
    /// Which operations each set of grants may see (discovery's filter), computed once per
    /// set.
    pub(crate) visibility: resolve::Visibility,
    /// Told of each replacement of the APIs ([`Engine::watch_apis`]).
    apis_changed: tokio::sync::watch::Sender<()>,
}

/// Who is calling, as the transport knows it. Holds no secret but the session token the
/// connection carried, which never leaves the pipeline.
#[derive(Debug, Clone, Default)]
pub struct Caller {
    /// The MCP session this call was routed to (stateful HTTP, SSE, stdio): validated by the
    /// transport, never read from a request header.
    pub mcp_session: Option<String>,
    /// The tier-1 key that authenticated the connection (production).
    pub key: Option<KeyPrincipal>,
    /// A non-secret id of the connection's API key.
    pub key_fingerprint: Option<String>,
    /// The `x-session-token` header of the connection, if any.
    pub session_token: Option<String>,
    /// The principal of the connection's verified bearer token (production with OAuth): the
    /// call runs as it, without a session token.
    pub bearer: Option<Principal>,
    /// Cancelled when the client gives up on this call (MCP `notifications/cancelled`, or
    /// its session closes). A call still waiting for the monitor then stops waiting and
    /// never runs, so a late approval cannot execute it.
    pub cancelled: Option<CancellationToken>,
}

impl Caller {
    /// The id the monitor knows this caller's MCP session by ([`Engine::session_started`]),
    /// made as each call's is (`monitor::monitor_session_id`); `None` without an MCP session.
    pub(crate) fn monitor_session(&self) -> Option<String> {
        let session = self.mcp_session.as_deref()?;
        Some(crate::monitor::monitor_session_id(
            self.key_fingerprint.as_deref(),
            Some(session),
            None,
        ))
    }

    /// Who owns the binary responses of this caller's calls when the call's principal names
    /// no one more specific ([`Principal::held_owner`]: a person, a user session): the tier-1
    /// API key (`key:<id>` for a key in the database, else the presented key's fingerprint),
    /// or `local` for a transport with no key (stdio: one client per process).
    pub(crate) fn held_owner(&self) -> String {
        if let Some(id) = self.key.as_ref().and_then(|k| k.key_id) {
            return format!("key:{id}");
        }
        self.key_fingerprint
            .clone()
            .unwrap_or_else(|| "local".to_string())
    }
}

/// What a tool call produced before it is shaped by an adapter.
pub(crate) type ToolResult = Result<Output, ToolError>;

/// The tool a call names, as the adapter parsed it: one of the three, or a name the pipeline
/// refuses with `UNKNOWN_TOOL` (after the session check, as any call).
pub(crate) type Named = Result<Tool, UnknownTool>;

/// What the audit row records about a call, filled in as the pipeline learns it.
#[derive(Default)]
struct Trace {
    /// The operation the arguments name (its index in the spec).
    operation: Option<crate::apis::OpRef>,
    upstream_status: Option<u16>,
    /// Where the credentials the call sent came from (`server`, `session`, …).
    credential_sources: Vec<crate::types::CredentialSource>,
}

/// A name the agent chose is never stored or printed: any name but the three is `unknown`,
/// and the audit row says only how long it was.
fn tool_label(tool: &Named) -> &'static str {
    match tool {
        Ok(t) => t.name(),
        Err(_) => UNKNOWN_TOOL,
    }
}

/// One pass of the pipeline as its audit row sees it. Dropped before it `ended` (the call's
/// future was dropped: its client went away, or the drain timeout cut it), it writes the row
/// anyway, through the audit writer's queue, with `CANCELLED` ([`Code::Cancelled`]): a call that may have reached the API
/// is never missing from the audit log.
struct Pass<'a> {
    engine: &'a Engine,
    caller: &'a Caller,
    apis: &'a Apis,
    principal: &'a Result<Principal, ToolError>,
    tool: &'a Named,
    started: Instant,
    started_at: chrono::DateTime<chrono::Utc>,
    call_id: uuid::Uuid,
    trace: Trace,
    ended: bool,
}

impl Pass<'_> {
    fn audit_entry(&mut self, decision: Decision, code: Option<Code>) -> crate::store::AuditEntry {
        let who = match self.principal {
            Ok(p) => p.clone(),
            Err(_) => self
                .caller
                .key
                .as_ref()
                .map(KeyPrincipal::principal)
                .unwrap_or_else(Principal::dev),
        };
        let mut entry = who.audit_entry(tool_label(self.tool), decision);
        if let Err(UnknownTool(name)) = self.tool {
            entry.operation = Some(format!("unknown tool ({} chars)", name.chars().count()));
        }
        let trace = std::mem::take(&mut self.trace);
        if let Some(r) = trace.operation
            && let Some(op) = self.apis.operation(r)
        {
            entry.operation = Some(self.apis.shown_id(r));
            entry.method = Some(op.method.to_string());
            entry.path = Some(op.path.clone());
        }
        entry.upstream_status = trace.upstream_status;
        entry.credential_sources = trace.credential_sources;
        entry.duration_ms = self.started.elapsed().as_millis() as u64;
        entry.at = self.started_at;
        entry.call_id = self.call_id;
        entry.error_code = code;
        entry
    }
}

/// Counts a pass out of [`Engine::passes`] when dropped (after its audit row is queued).
struct PassCounted<'a>(&'a std::sync::atomic::AtomicUsize);

impl Drop for PassCounted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

impl Drop for Pass<'_> {
    fn drop(&mut self) {
        let _running = PassCounted(&self.engine.passes);
        if self.ended {
            return;
        }
        let Some(auth) = self.engine.auth.clone() else {
            return;
        };
        metrics::counter!("apigate_tool_calls_total", "tool" => tool_label(self.tool),
            "outcome" => Code::Cancelled.as_str())
        .increment(1);
        let entry = self.audit_entry(Decision::Failed, Some(Code::Cancelled));
        auth.record_audit_later(entry);
    }
}

impl Engine {
    /// A dev engine (every feature allowed) over one API, with no monitor; see the public
    /// fields to change.
    pub fn new(
        spec: Arc<Spec>,
        index: Arc<Index>,
        upstream: Upstream,
        monitor: Option<Monitor>,
    ) -> Engine {
        Engine::serving(Apis::single(Api::single(spec, upstream), index), monitor)
    }

    /// A dev engine (every feature allowed) over `apis`, with no monitor.
    pub fn serving(apis: Apis, monitor: Option<Monitor>) -> Engine {
        Engine {
            apis: arc_swap::ArcSwap::from_pointee(apis),
            passes: std::sync::atomic::AtomicUsize::new(0),
            monitor,
            access: Access::Fixed(Principal::dev()),
            auth: None,
            limits: args::InputLimits::default(),
            identity: None,
            upload_dir: None,
            held: crate::held::HeldResponses::in_memory(Default::default()),
            binary: BinaryOptions::default(),
            budgets: Budgets::default(),
            visibility: resolve::Visibility::default(),
            apis_changed: tokio::sync::watch::Sender::new(()),
        }
    }

    /// Waits until no pipeline pass runs, at most `limit`: a call rmcp cancelled (the drain
    /// timeout) drops its pass a moment after its HTTP answer, and its audit row is queued
    /// then. Returns whether none runs.
    pub async fn passes_ended(&self, limit: std::time::Duration) -> bool {
        let ended = || self.passes.load(std::sync::atomic::Ordering::Acquire) == 0;
        let _ = tokio::time::timeout(limit, async {
            while !ended() {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        })
        .await;
        ended()
    }

    /// The APIs served now. A call reads them once and keeps them to its end.
    pub fn apis(&self) -> Arc<Apis> {
        self.apis.load_full()
    }

    /// Serves `apis` from the next call on; calls in flight finish on the APIs they started
    /// with. The memory of which operations each set of grants may see starts over.
    pub fn replace_apis(&self, apis: Apis) {
        self.apis.store(Arc::new(apis));
        self.visibility.forget();
        self.apis_changed.send_replace(());
    }

    /// Wakes on each [`Engine::replace_apis`] (sessions send `notifications/tools/list_changed`
    /// when the tool list changed with it).
    pub(crate) fn watch_apis(&self) -> tokio::sync::watch::Receiver<()> {
        self.apis_changed.subscribe()
    }

    /// Adds permission rules (`--permissions FILE`) to every API's own.
    pub fn add_rules(&mut self, rules: PermissionRules) {
        let Apis {
            mut list, index, ..
        } = Arc::unwrap_or_clone(self.apis.load_full());
        for api in &mut list {
            api.rules = api.rules.and(&rules);
        }
        self.apis = arc_swap::ArcSwap::from_pointee(Apis::new(list, index));
    }

    /// The tool definitions for `tools/list`; in production each takes `_sessionToken`, unless
    /// the connection carries the session in its `x-session-token` header (`session_header`):
    /// then a model is not asked for it (it would fill in a placeholder).
    pub(crate) fn tool_definitions(&self, session_header: bool) -> Vec<Value> {
        let apis = self.apis();
        let names: Vec<&str> = apis.list.iter().map(|a| a.name.as_str()).collect();
        let mut tools = defs::all(&apis.title(), &names);
        if matches!(self.access, Access::Sessions) && !session_header {
            for t in &mut tools {
                if let Some(Value::Object(schema)) = t.get_mut("inputSchema") {
                    add_session_token_param(schema);
                }
            }
        }
        tools
    }

    /// Tells the monitor that a session started (MCP `initialized`). Sessions it never heard
    /// of (stateless mode) are started by the monitor client on their first call.
    pub fn session_started(&self, session_id: &str) {
        if let Some(m) = &self.monitor {
            m.session_started(session_id);
        }
    }

    /// Tells the monitor that a session ended.
    pub(crate) fn session_ended(&self, session_id: &str) {
        if let Some(m) = &self.monitor {
            m.session_idle(session_id);
        }
    }

    /// Runs one tool call through the whole pipeline; see [`Engine::call_with_binary`] for
    /// the bytes of a binary response.
    pub async fn call(
        &self,
        caller: &Caller,
        tool: &Named,
        args: Map<String, Value>,
    ) -> ToolResult {
        self.call_with_binary(caller, tool, args).await.0
    }

    /// Runs one tool call through the whole pipeline, with the bytes of an `api_execute`
    /// binary response that travel beside the JSON result (`mcp::binary_content` adds them).
    /// An `api_execute` with `pages` runs the pipeline once per page: each page is a call of
    /// its own to the monitor, the audit log and the session's rate limit, and the pages end
    /// as one result (`result::finish`).
    pub(crate) async fn call_with_binary(
        &self,
        caller: &Caller,
        tool: &Named,
        mut args: Map<String, Value>,
    ) -> (ToolResult, Option<BinaryOut>) {
        // Never let a session token travel further than this point.
        let token = take_session_token(&mut args);
        // Every page of the call runs on the same APIs, whatever a reload does meanwhile.
        let apis = self.apis();
        let apis = &*apis;
        // The key's rate limit is checked before the session is, and a failed session check
        // spends it, so calls with a missing or wrong session token are limited like any
        // other call of the key.
        let principal = match self.take_key_rate(caller).await {
            Ok(()) => self.principal(caller, token).await,
            Err(e) => Err(e),
        };
        // Every page of the call, its decoding, parse and `select`, within one budget.
        let mut budget = self.budgets.call();
        let mut first = match self
            .call_once(caller, apis, &principal, tool, args, &mut budget)
            .await
        {
            Ok(Ran::Done(v)) => return (Ok(v), None),
            Ok(Ran::Page(p)) => p,
            Err(e) => return (Err(e), None),
        };
        // A binary answer is no list: it is the only page.
        let binary = first.binary.take();
        let asked = first.planned.pages;
        // Without `select`, what the response can show is known: pages past it would be
        // fetched for nothing (and fetched again by `next`).
        let room = (first.planned.select.is_none()).then(|| {
            apis.list[first.planned.api]
                .upstream
                .config()
                .max_body_bytes
        });
        let mut filled = room.map_or(0, |_| listed_bytes(&first));
        let mut pages = vec![*first];
        let mut stopped = None;
        while pages.len() < asked {
            if let Some(room) = room
                && filled > room
            {
                stopped = Some(format!(
                    "the items of the {} pages fetched already fill the response \
                     (--max-response-bytes): `next` goes on from the first item not shown",
                    pages.len()
                ));
                break;
            }
            // The last page was cut at the budget: no more.
            if let Some(over) = budget.over() {
                stopped = Some(format!("page {}: {over}", pages.len()));
                break;
            }
            let last = pages.last().expect("the first page is there");
            if !last.response.ok {
                stopped = Some(format!(
                    "page {}: the API answered HTTP {}",
                    pages.len(),
                    last.response.status
                ));
                break;
            }
            let next = last.paging.as_ref().map(|p| &p.next);
            let args = match (&last.list, next) {
                (Some(_), Some(paging::Next::Query(q))) => {
                    page::args_for(apis, &last.planned, q.clone(), 0, None, 1)
                }
                (_, Some(paging::Next::Unmapped(c))) => {
                    stopped = Some(format!("page {}: {}", pages.len(), c.says()));
                    break;
                }
                _ if last.response.truncated => {
                    stopped = Some(format!(
                        "page {} is longer than this server reads (--max-read-bytes), so its \
                         next page is not known: ask for smaller pages",
                        pages.len()
                    ));
                    break;
                }
                (None, _) => {
                    stopped = Some(format!(
                        "page {} holds no list to page through",
                        pages.len()
                    ));
                    break;
                }
                _ => {
                    stopped = Some("the API shows no next page".to_string());
                    break;
                }
            };
            let n = pages.len() + 1;
            match self
                .call_once(
                    caller,
                    apis,
                    &principal,
                    &Ok(Tool::Execute),
                    args,
                    &mut budget,
                )
                .await
            {
                // Cut at the budget: not kept (`next` fetches it again).
                Ok(Ran::Page(_)) if budget.over().is_some() => {
                    let over = budget.over().map(ToString::to_string).unwrap_or_default();
                    stopped = Some(format!("page {n} was not kept: {over}"));
                    break;
                }
                Ok(Ran::Page(p)) if p.response.ok && p.list == last.list => {
                    if room.is_some() {
                        filled = filled.saturating_add(listed_bytes(&p));
                    }
                    pages.push(*p)
                }
                Ok(Ran::Page(p)) if p.response.ok => {
                    stopped = Some(format!("page {n} holds no list where page 1 did"));
                    break;
                }
                Ok(Ran::Page(p)) => {
                    stopped = Some(format!(
                        "page {n}: the API answered HTTP {}",
                        p.response.status
                    ));
                    break;
                }
                Ok(Ran::Done(_)) => break,
                Err(e) => {
                    stopped = Some(format!("page {n}: {} ({})", e.message, e.code.as_str()));
                    break;
                }
            }
        }
        let result = result::finish(apis, pages, stopped, &mut budget);
        // A failed call returns no bytes.
        let binary = binary.filter(|_| result.is_ok());
        (result, binary)
    }

    /// One pass of the pipeline, with its metrics and audit row.
    async fn call_once(
        &self,
        caller: &Caller,
        apis: &Apis,
        principal: &Result<Principal, ToolError>,
        tool: &Named,
        args: Map<String, Value>,
        budget: &mut crate::upstream::CallBudget,
    ) -> Result<Ran, ToolError> {
        // Its audit row is written even when this future is dropped before it ends.
        self.passes
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        let mut pass = Pass {
            engine: self,
            caller,
            apis,
            principal,
            tool,
            started: Instant::now(),
            started_at: chrono::Utc::now(),
            // One id for the monitor's events and the audit row.
            call_id: uuid::Uuid::new_v4(),
            trace: Trace::default(),
            ended: false,
        };
        let call_id = pass.call_id.to_string();
        let result = match principal {
            Ok(p) => {
                self.run_pipeline(
                    caller,
                    apis,
                    p,
                    tool,
                    args,
                    &call_id,
                    &mut pass.trace,
                    budget,
                )
                .await
            }
            Err(e) => Err(e.clone()),
        };
        pass.ended = true;
        let outcome = match &result {
            Ok(_) => "ok",
            Err(e) => e.code.as_str(),
        };
        let tool_label = tool_label(tool);
        metrics::counter!("apigate_tool_calls_total", "tool" => tool_label, "outcome" => outcome)
            .increment(1);
        metrics::histogram!("apigate_tool_call_duration_seconds", "tool" => tool_label)
            .record(pass.started.elapsed().as_secs_f64());
        if let Some(auth) = &self.auth {
            let decision = match &result {
                Ok(_) => Decision::Allowed,
                Err(e) if e.code.is_denial() => Decision::Denied,
                Err(_) => Decision::Failed,
            };
            let code = result.as_ref().err().map(|e| e.code);
            let entry = pass.audit_entry(decision, code);
            auth.record_audit(entry).await;
        }
        result
    }

    /// The rate check before the session check: a fixed principal (dev) spends its key's
    /// call here; a person's or a session's key only has to hold one (the call is taken with
    /// the person's or session's own bucket, in step 3, so that a call refused by its own
    /// budget spends nothing of the key's, shared with others).
    async fn take_key_rate(&self, caller: &Caller) -> Result<(), ToolError> {
        let Some(auth) = &self.auth else {
            return Ok(());
        };
        if let (Access::Sessions, Some(p)) = (&self.access, &caller.bearer) {
            return auth.rate_holds(p).map_err(ToolError::from);
        }
        match (&self.access, &caller.key) {
            (Access::Fixed(p), _) => auth.check_key_rate(p).await,
            (Access::Sessions, Some(key)) => auth.rate_holds(&key.principal()),
            // Refused by the session check below, which names the reason.
            (Access::Sessions, None) => Ok(()),
        }
        .map_err(ToolError::from)
    }

    /// Tier 2: the principal this call runs as.
    async fn principal(
        &self,
        caller: &Caller,
        token: Option<String>,
    ) -> Result<Principal, ToolError> {
        match &self.access {
            Access::Fixed(p) => Ok(p.clone()),
            Access::Sessions if caller.bearer.is_some() => caller.bearer.clone().ok_or_else(|| {
                ToolError::new(Code::Unauthorized, "the connection has no bearer token")
            }),
            Access::Sessions => {
                let (Some(auth), Some(key)) = (&self.auth, &caller.key) else {
                    return Err(ToolError::new(
                        Code::Unauthorized,
                        "the connection has no verified API key",
                    ));
                };
                let token = choose_session_token(token, caller.session_token.as_deref());
                let session = match token {
                    Ok(token) => auth
                        .authenticate_session(key, token.as_deref().unwrap_or(""))
                        .await
                        .map_err(ToolError::from),
                    Err(e) => Err(e.into()),
                };
                // A failed session check spends a call of the key's budget; past it, the answer
                // is the rate limit, not the verdict on the token.
                if session.is_err() {
                    auth.spend_key_rate(&key.principal()).await?;
                }
                session
            }
        }
    }

    /// The session id the monitor sees, made from what was validated: the key's fingerprint
    /// and the MCP session, else the user session (`monitor::monitor_session_id`). Never a
    /// token, never a value the request chose.
    fn monitor_session(caller: &Caller, principal: &Principal) -> String {
        crate::monitor::monitor_session_id(
            caller.key_fingerprint.as_deref(),
            caller.mcp_session.as_deref(),
            principal.session_id,
        )
    }

    #[allow(clippy::too_many_arguments)]
    async fn run_pipeline(
        &self,
        caller: &Caller,
        apis: &Apis,
        principal: &Principal,
        tool: &Named,
        args: Map<String, Value>,
        call_id: &str,
        trace: &mut Trace,
        budget: &mut crate::upstream::CallBudget,
    ) -> Result<Ran, ToolError> {
        let tool = match tool {
            Ok(t) => *t,
            Err(UnknownTool(name)) => {
                return Err(ToolError::new(
                    Code::UnknownTool,
                    format!(
                        "there is no tool {name:?}; the tools are api_discover, api_schema and api_execute"
                    ),
                ));
            }
        };
        // The arguments are typed and the operation they name is found once, here; their
        // errors wait until the caller has passed the tool permission and the rate limit. The
        // audit row names the operation even when a check below refuses the call.
        // Only a monitor reads the raw arguments and the request's view: no copy without one.
        let args_value = match &self.monitor {
            Some(_) => Value::Object(args.clone()),
            None => Value::Null,
        };
        let parsed = ops::parse(self, apis, principal, tool, args);
        if let Ok(p) = &parsed {
            trace.operation = p.operation();
        }
        // 2. Permissions for the tool.
        principal.may_use(tool).map_err(ToolError::from)?;
        // 3. Rate limit: the session's or person's bucket and its key's, together.
        if let Some(auth) = &self.auth {
            auth.check_session_rate(principal)
                .await
                .map_err(ToolError::from)?;
        }
        // 4. The operation's permission; validate the arguments and build the request.
        let prepared = ops::prepare(self, apis, principal, parsed?)?;
        let op = prepared.operation(apis);
        let shown_id = prepared.target().map(|r| apis.shown_id(r));
        // 5. The agent-monitor gate (fail-closed).
        let session_id = Engine::monitor_session(caller, principal);
        let request_view = match (&prepared, &self.monitor) {
            (Prepared::Execute(planned), Some(_)) => Some(planned.request.view()),
            _ => None,
        };
        let call = ToolCall {
            session_id: &session_id,
            call_id,
            tool,
            args: &args_value,
            operation: op.zip(shown_id.as_deref()).map(|(o, id)| OperationRef {
                operation_id: id,
                method: o.method.as_str(),
                path: &o.path,
            }),
            preview: request_view.as_ref(),
        };
        if let Some(monitor) = &self.monitor {
            let gate = monitor.pre_execute(&call);
            let verdict = match &caller.cancelled {
                // Dropping the gate's request tells the monitor nobody waits any more (the
                // reference monitor records a held approval as abandoned).
                Some(cancelled) => tokio::select! {
                    biased;
                    () = cancelled.cancelled() => None,
                    v = gate => Some(v),
                },
                None => Some(gate.await),
            };
            match verdict {
                Some(Ok(())) => {}
                Some(Err(blocked)) => {
                    monitor.session_error(&session_id, Code::BlockedByMonitor.as_str());
                    return Err(ToolError::new(Code::BlockedByMonitor, blocked.to_string())
                        .with("monitor", Value::String(blocked.cause.as_str().into())));
                }
                None => {
                    tracing::info!(
                        tool = tool.name(),
                        "the client cancelled the call while the monitor decided"
                    );
                    return Err(ToolError::new(
                        Code::BlockedByMonitor,
                        "the call was cancelled by the client while it waited for the agent monitor; it did not run",
                    )
                    .with("monitor", Value::String("cancelled".into())));
                }
            }
        }
        // 6. Run.
        let result = run(
            self,
            apis,
            principal,
            prepared,
            call_id,
            &mut trace.upstream_status,
            &mut trace.credential_sources,
            &principal
                .held_owner()
                .unwrap_or_else(|| caller.held_owner()),
            budget,
        )
        .await;
        // 7. Tell the monitor.
        if let Some(monitor) = &self.monitor {
            match &result {
                Ok(Ran::Done(v)) => monitor.post_execute(&call, crate::upstream::json_len(v)),
                Ok(Ran::Page(p)) => {
                    monitor.post_execute(&call, crate::upstream::json_len(&p.response.body))
                }
                Err(e) => monitor.session_error(&session_id, e.code.as_str()),
            }
        }
        result
    }
}

/// What running a validated call produced.
pub(crate) enum Ran {
    /// A finished result (`api_discover`, `api_schema`, a dry run).
    Done(Output),
    /// One page of an `api_execute` call, to be followed or finished.
    Page(Box<page::Page>),
}

/// Runs a validated call: `api_execute` fetches its (first) page, the others finish at once.
#[allow(clippy::too_many_arguments)]
async fn run(
    engine: &Engine,
    apis: &Apis,
    principal: &Principal,
    prepared: Prepared,
    call_id: &str,
    upstream_status: &mut Option<u16>,
    sources: &mut Vec<crate::types::CredentialSource>,
    owner: &str,
    budget: &mut crate::upstream::CallBudget,
) -> Result<Ran, ToolError> {
    match prepared {
        Prepared::Execute(planned) if !planned.dry_run => page::fetch(
            engine,
            apis,
            principal,
            planned,
            call_id,
            upstream_status,
            sources,
            owner,
            budget,
        )
        .await
        .map(|p| Ran::Page(Box::new(p))),
        other => ops::done(engine, apis, principal, other)
            .await
            .map(Ran::Done),
    }
}

/// An auth failure as a tool error, with the details an agent can act on.
impl From<AuthError> for ToolError {
    fn from(e: AuthError) -> ToolError {
        let message = e.to_string();
        match e {
            AuthError::Unauthorized(_) => ToolError::new(Code::Unauthorized, message),
            AuthError::SessionExpired => ToolError::new(Code::SessionExpired, message),
            AuthError::Forbidden { missing } => {
                ToolError::new(Code::Forbidden, message).with("missing", Value::String(missing))
            }
            AuthError::ReadOnly { .. } => {
                ToolError::new(Code::Forbidden, message).with("readOnly", Value::Bool(true))
            }
            AuthError::RateLimited { retry_after_ms } => ToolError::new(Code::RateLimited, message)
                .with("retryAfterMs", Value::from(retry_after_ms)),
            AuthError::Unavailable(_)
            | AuthError::LimitsUnavailable
            | AuthError::Credentials(_) => ToolError::new(Code::Unavailable, message),
        }
    }
}

impl Engine {
    /// `api_execute` up to the request it would send, as the pipeline runs it for
    /// `principal`: typed arguments, the operation, its permission, validation and the built
    /// request. Nothing is sent and no monitor is asked (the fuzz target drives this).
    pub fn plan_execute(
        &self,
        principal: &Principal,
        args: Map<String, Value>,
    ) -> Result<Planned, ToolError> {
        let apis = self.apis();
        let parsed = ops::parse(self, &apis, principal, Tool::Execute, args)?;
        match ops::prepare(self, &apis, principal, parsed)? {
            Prepared::Execute(planned) => Ok(*planned),
            _ => unreachable!("api_execute prepares an execution"),
        }
    }
}

/// The bytes of a page's list as JSON text.
fn listed_bytes(page: &page::Page) -> usize {
    page.list
        .as_deref()
        .and_then(|l| page.response.body.pointer(l))
        .map_or(0, crate::upstream::json_len)
}
