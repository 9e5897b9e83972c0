//! The engine: what every tool call shares, built once at start-up (the APIs served, swapped
//! whole by a reload; the monitor gate; whose permissions calls run with; the database side;
//! the input limits, upload folder, identity signer, held responses and byte budgets the
//! pipeline's steps are handed), and who is calling ([`Caller`]). The pipeline that runs a
//! call over it is `pipeline.rs`.

use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::args;
use super::binary_out::BinaryOptions;
use super::defs;
use super::page::Budgets;
use super::resolve;
use super::upload;
use crate::apis::{Api, Apis, Served};
use crate::auth::{Auth, KeyPrincipal, PermissionRules, Principal, add_session_token_param};
use crate::index::Index;
use crate::monitor::Monitor;
use crate::spec::Spec;
use crate::upstream::Upstream;

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
    served: Arc<Served>,
    /// Pipeline passes running now (`pass::Pass`): a shutdown waits for the cancelled ones to
    /// have queued their audit rows ([`Engine::passes_ended`]).
    pub(super) passes: std::sync::atomic::AtomicUsize,
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
            served: Arc::new(Served::new(apis)),
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
        self.served.get()
    }

    /// The APIs served, as a reload replaces them (`apis::reload::Reloader`).
    pub fn served(&self) -> Arc<Served> {
        self.served.clone()
    }

    /// Serves `apis` from the next call on; calls in flight finish on the APIs they started
    /// with (what each set of grants may see is remembered per version of the APIs).
    pub fn replace_apis(&self, apis: Apis) {
        self.served.replace(apis);
    }

    /// Wakes on each replacement of the APIs, by [`Engine::replace_apis`] or a reload
    /// (sessions send `notifications/tools/list_changed` when the tool list changed with it).
    pub(crate) fn watch_apis(&self) -> tokio::sync::watch::Receiver<()> {
        self.served.watch()
    }

    /// Adds permission rules (`--permissions FILE`) to every API's own.
    pub fn add_rules(&mut self, rules: PermissionRules) {
        let Apis {
            mut list, index, ..
        } = Arc::unwrap_or_clone(self.served.get());
        for api in &mut list {
            api.rules = api.rules.and(&rules);
        }
        self.served.replace(Apis::new(list, index));
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
}
