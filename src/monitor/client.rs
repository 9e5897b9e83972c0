//! The agent-monitor client: the gate every tool call passes when `--monitor URL` is given.
//!
//! It speaks the plugin side of the protocol in `docs/monitor-protocol.md`: `session.started`,
//! `tool.pre_execute` (awaited, fail-closed), `tool.post_execute`, `session.error` and
//! `session.idle`. It keeps per-session statistics (`toolCallCount`, `uniqueTools`,
//! `duration`) and sanitizes tool arguments (`sanitize`) before they leave the process: the
//! session token, credentials and header values never reach the monitor. Events are
//! [`protocol::Event`](super::protocol::Event)s, the type the reference monitor parses.
//!
//! With a database ([`Monitor::share_stats`], production) the statistics are counted in
//! Postgres for every replica (`store/shared.rs`): a session whose calls reach three replicas
//! is one session with one `toolCallCount`, started once and reported idle once.
//!
//! Imports reqwest only; no axum, no rmcp (the tools pipeline calls it).

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::store::{MonitorStats, Store};
use crate::types::Tool;

use super::protocol::{Base, Call, Event, FinalStats, SessionStats};
use super::sanitize::{
    MAX_ARG_CHARS, MAX_FULL_FIELD_CHARS, OperationRef, cut, preview, redact_secrets_in_text,
    sanitize_args, type_name,
};
use crate::types::duration::human_duration;

/// Default time `tool.pre_execute` may take before the call is blocked.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default time without calls after which a session is reported idle and forgotten.
pub(crate) const DEFAULT_IDLE_AFTER: Duration = Duration::from_secs(30 * 60);
/// The largest monitor answer we read; anything longer is an invalid answer.
const MAX_RESPONSE_BYTES: usize = 64 * 1024;
const MAX_ERROR_CHARS: usize = 500;

/// Where the monitor is and how apigate describes itself in every event.
#[derive(Debug, Clone)]
pub struct MonitorConfig {
    /// `http(s)://host:port` or the full endpoint; a bare origin gets `/agent-monitor` appended.
    pub url: String,
    /// How long `tool.pre_execute` may take before the call is blocked (default 10 s).
    pub timeout: Duration,
    /// `project` base field (default: the spec's title, or "unknown").
    pub project: String,
    /// `directory` base field (default: the working directory).
    pub directory: String,
    /// `worktree` base field (default: the working directory).
    pub worktree: String,
    /// A session without calls for this long is reported `session.idle` and forgotten
    /// (stateless mode has no session close; default 30 min).
    pub idle_after: Duration,
}

impl MonitorConfig {
    /// A config with the defaults: 10 s timeout, project "unknown", the working directory as
    /// `directory` and `worktree`, sessions idle after 30 minutes.
    pub fn new(url: impl Into<String>) -> Self {
        let cwd = std::env::current_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_else(|_| ".".to_owned());
        Self {
            url: url.into(),
            timeout: DEFAULT_TIMEOUT,
            project: "unknown".to_owned(),
            directory: cwd.clone(),
            worktree: cwd,
            idle_after: DEFAULT_IDLE_AFTER,
        }
    }
}

/// Why a [`Monitor`] could not be built.
#[derive(Debug, thiserror::Error)]
pub enum MonitorError {
    #[error("invalid agent-monitor URL {url:?}: {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error("cannot build the agent-monitor HTTP client")]
    Client(#[source] reqwest::Error),
}

/// One tool call as the gate sees it (after auth and argument validation).
#[derive(Debug, Clone, Copy)]
pub struct ToolCall<'a> {
    /// The session id apigate made for the monitor (`tools::monitor_session_id`): from the
    /// key's fingerprint and the validated MCP or user session, never from the request.
    pub session_id: &'a str,
    pub call_id: &'a str,
    pub tool: Tool,
    /// The tool's arguments as the agent sent them; sanitized before sending.
    pub args: &'a Value,
    /// The resolved operation, for `api_execute` (and `api_schema`).
    pub operation: Option<OperationRef<'a>>,
    /// For `api_execute`: the request as its dry run shows it (configured credentials already
    /// redacted). Sanitized by [`preview`] and sent in `tool.pre_execute` only, so a person
    /// approving the call sees which resource it touches and what it sends.
    pub preview: Option<&'a Value>,
}

/// Which way the gate failed; callers may branch on it, agents read [`Blocked`]'s `Display`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BlockCause {
    /// The monitor answered `{"block": true, ...}`.
    Monitor,
    /// The monitor could not be reached (connection refused, DNS, TLS...).
    Unreachable,
    /// No complete answer within the configured timeout.
    Timeout,
    /// The monitor answered with a non-2xx status.
    Status(u16),
    /// The answer was not JSON (or too large).
    InvalidJson,
    /// The answer was JSON without a boolean `block`.
    MissingBlock,
    /// The session statistics the replicas share could not be counted.
    Statistics,
}

/// A call the gate stopped; maps to `BLOCKED_BY_MONITOR`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    pub cause: BlockCause,
    /// What happened, in words an agent can act on.
    pub reason: String,
}

impl BlockCause {
    /// A stable word for error details and metrics: `monitor`, `unreachable`, `timeout`,
    /// `http_status`, `invalid_json`, `missing_block`, `statistics`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Monitor => "monitor",
            Self::Unreachable => "unreachable",
            Self::Timeout => "timeout",
            Self::Status(_) => "http_status",
            Self::InvalidJson => "invalid_json",
            Self::MissingBlock => "missing_block",
            Self::Statistics => "statistics",
        }
    }
}

impl fmt::Display for Blocked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for Blocked {}

/// The agent-monitor client. Cheap to clone; all clones share the session statistics.
#[derive(Clone)]
pub struct Monitor {
    inner: Arc<Inner>,
}

struct Inner {
    http: reqwest::Client,
    /// Where events are posted.
    post_url: String,
    /// The same without query or fragment, for messages and logs.
    endpoint: String,
    cfg: MonitorConfig,
    sessions: Mutex<Sessions>,
    /// Where every replica counts the statistics, once [`Monitor::share_stats`] set it.
    shared: OnceLock<SharedStats>,
}

struct SharedStats {
    store: Store,
    /// Block a call whose statistics cannot be counted (`--limits-unavailable closed`);
    /// else count it in this process alone.
    fail_closed: bool,
}

/// A tool's bit in the shared `tools` set.
fn tool_bit(tool: Tool) -> u32 {
    match tool {
        Tool::Discover => 1,
        Tool::Execute => 2,
        Tool::Schema => 4,
    }
}

/// The `sessionStats` of shared statistics.
fn session_stats(stats: &MonitorStats) -> SessionStats {
    SessionStats {
        tool_call_count: stats.tool_calls,
        unique_tools: u64::from(stats.tools.count_ones()),
        duration: millis(stats.duration),
    }
}

/// The tools of a shared `tools` set, sorted by name.
fn tools_of(bits: u32) -> Vec<Tool> {
    [Tool::Discover, Tool::Execute, Tool::Schema]
        .into_iter()
        .filter(|t| bits & tool_bit(*t) != 0)
        .collect()
}

#[derive(Default)]
struct Sessions {
    by_id: HashMap<String, Tracked>,
    last_sweep: Option<Instant>,
}

/// What the gate tracks of one session.
struct Tracked {
    started: Instant,
    last_activity: Instant,
    tool_calls: u64,
    tools: BTreeSet<Tool>,
}

impl Tracked {
    fn new(now: Instant) -> Self {
        Self {
            started: now,
            last_activity: now,
            tool_calls: 0,
            tools: BTreeSet::new(),
        }
    }
}

impl fmt::Debug for Monitor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Monitor")
            .field("endpoint", &self.inner.endpoint)
            .field("timeout", &self.inner.cfg.timeout)
            .finish_non_exhaustive()
    }
}

impl Monitor {
    /// Validates the URL and builds the HTTP client (no redirects, no proxy for loopback).
    pub fn new(cfg: MonitorConfig) -> Result<Self, MonitorError> {
        let post_url = normalize_url(&cfg.url)?;
        let loopback = url::Url::parse(&post_url)
            .ok()
            .and_then(|u| u.host().map(|h| is_loopback_host(&h)))
            .unwrap_or(false);
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(cfg.timeout.min(Duration::from_secs(5)))
            .user_agent(concat!("apigate/", env!("CARGO_PKG_VERSION")));
        if loopback {
            builder = builder.no_proxy();
        }
        let http = builder.build().map_err(MonitorError::Client)?;
        let shown = post_url
            .split(['?', '#'])
            .next()
            .unwrap_or_default()
            .to_owned();
        Ok(Self {
            inner: Arc::new(Inner {
                http,
                post_url,
                endpoint: shown,
                cfg,
                sessions: Mutex::new(Sessions::default()),
                shared: OnceLock::new(),
            }),
        })
    }

    /// Counts the sessions' statistics in `store`, shared by every replica that uses it.
    /// `fail_closed`: a call whose statistics cannot be counted is blocked. Set once.
    pub fn share_stats(&self, store: Store, fail_closed: bool) {
        let _ = self.inner.shared.set(SharedStats { store, fail_closed });
    }

    /// The configuration it was built with.
    pub fn config(&self) -> &MonitorConfig {
        &self.inner.cfg
    }

    /// The endpoint events are posted to (without its query string, safe to log).
    pub fn endpoint(&self) -> &str {
        &self.inner.endpoint
    }

    /// Records the session's start and sends `session.started` (fire and forget).
    /// Calling it again for a known session does nothing.
    pub fn session_started(&self, session_id: &str) {
        if self.inner.shared.get().is_some() {
            // Started by its first call, once for all replicas (`pre_execute`).
            return;
        }
        if self.start_if_new(session_id) {
            let event = self.session_started_event(session_id);
            self.fire(event);
        }
    }

    /// The blocking gate: sends `tool.pre_execute` and waits for the monitor's decision.
    /// Fail-closed: anything but a 2xx JSON answer with `"block": false` blocks the call.
    /// A session not seen before is started first (stateless mode), its `session.started`
    /// sent before the `tool.pre_execute`.
    pub async fn pre_execute(&self, call: &ToolCall<'_>) -> Result<(), Blocked> {
        let deadline = tokio::time::Instant::now() + self.inner.cfg.timeout;
        let (new, session_stats) = match self.inner.shared.get() {
            Some(shared) => self.record_shared(shared, call, deadline).await?,
            None => (
                self.start_if_new(call.session_id),
                self.record_call(call.session_id, call.tool),
            ),
        };
        if new {
            let started = self.session_started_event(call.session_id);
            // Its failure shows up in the pre_execute answer below; only the order matters here.
            let _ = tokio::time::timeout_at(deadline, self.post(&started)).await;
        }
        let event = Event::PreExecute {
            base: self.base(),
            call: Call {
                tool: call.tool.name().to_owned(),
                session_id: call.session_id.to_owned(),
                call_id: call.call_id.to_owned(),
            },
            args: sanitize_args(call.tool, call.args, call.operation.as_ref()),
            session_stats,
            preview: call.preview.map(preview),
        };
        match tokio::time::timeout_at(deadline, self.decide(&event)).await {
            Ok(result) => result,
            Err(_) => Err(self.timed_out()),
        }
    }

    /// Counts `call` in the statistics every replica shares: whether it started the session,
    /// and the statistics with it. When they cannot be counted the call is blocked, or with
    /// `fail_closed` off counted in this process alone.
    async fn record_shared(
        &self,
        shared: &SharedStats,
        call: &ToolCall<'_>,
        deadline: tokio::time::Instant,
    ) -> Result<(bool, SessionStats), Blocked> {
        let counted = tokio::time::timeout_at(
            deadline,
            shared
                .store
                .monitor_record(call.session_id, tool_bit(call.tool)),
        )
        .await;
        let why = match counted {
            Ok(Ok((stats, new))) => return Ok((new, session_stats(&stats))),
            Ok(Err(e)) => e.to_string(),
            Err(_) => "no answer in time".to_string(),
        };
        tracing::warn!(error = %why, "the monitor's session statistics cannot be counted in Postgres");
        if shared.fail_closed {
            return Err(self.blocked(
                BlockCause::Statistics,
                "the call was blocked: its session's statistics for the agent monitor are \
                 counted in Postgres for every replica, and Postgres did not answer \
                 (--limits-unavailable closed); try again later"
                    .to_string(),
            ));
        }
        Ok((
            self.start_if_new(call.session_id),
            self.record_call(call.session_id, call.tool),
        ))
    }

    /// Sends `tool.post_execute` after a successful call (fire and forget).
    pub fn post_execute(&self, call: &ToolCall<'_>, output_len: usize) {
        self.touch(call.session_id);
        self.fire(Event::PostExecute {
            base: self.base(),
            call: Call {
                tool: call.tool.name().to_owned(),
                session_id: call.session_id.to_owned(),
                call_id: call.call_id.to_owned(),
            },
            title: call_title(call),
            output_length: u64::try_from(output_len).unwrap_or(u64::MAX),
            has_metadata: call.operation.is_some(),
        });
    }

    /// Sends `session.error` for a failed call (fire and forget). `error` should be the
    /// error's code or a short message; it is cut to 500 characters and scrubbed of tokens.
    pub fn session_error(&self, session_id: &str, error: &str) {
        self.touch(session_id);
        self.fire(Event::SessionError {
            base: self.base(),
            session_id: session_id.to_owned(),
            error: cut(&redact_secrets_in_text(error), MAX_ERROR_CHARS),
        });
    }

    /// Sends `session.idle` with the session's final statistics and forgets it
    /// (fire and forget). Call it when an MCP session closes or times out.
    pub fn session_idle(&self, session_id: &str) {
        let stats = self.lock().by_id.remove(session_id);
        if self.inner.shared.get().is_some() {
            let this = self.clone();
            let id = session_id.to_owned();
            self.spawn(async move {
                let Some(shared) = this.inner.shared.get() else {
                    return;
                };
                match shared.store.monitor_end(&id).await {
                    Ok(Some(stats)) => this.fire(this.shared_idle_event(&id, &stats)),
                    // Never called: no statistics, nothing to report.
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, "could not end a monitor session in Postgres")
                    }
                }
            });
            return;
        }
        let event = self.idle_event(session_id, stats.as_ref(), Instant::now());
        self.fire(event);
    }

    /// Sends `session.idle` for the sessions every replica shares that have been idle for
    /// the idle time; each is ended by one replica only. At most once a minute per replica.
    fn sweep_shared(&self, shared: &SharedStats) {
        let now = Instant::now();
        {
            let mut sessions = self.lock();
            if sessions
                .last_sweep
                .is_some_and(|t| now.duration_since(t) < Duration::from_secs(60))
            {
                return;
            }
            sessions.last_sweep = Some(now);
        }
        let this = self.clone();
        let store = shared.store.clone();
        self.spawn(async move {
            match store.monitor_end_idle(this.inner.cfg.idle_after).await {
                Ok(ended) => {
                    for (id, stats) in ended {
                        this.fire(this.shared_idle_event(&id, &stats));
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not sweep idle monitor sessions in Postgres")
                }
            }
        });
    }

    fn shared_idle_event(&self, session_id: &str, stats: &MonitorStats) -> Event {
        Event::SessionIdle {
            base: self.base(),
            session_id: session_id.to_owned(),
            final_stats: FinalStats {
                duration: millis(stats.duration),
                total_tool_calls: stats.tool_calls,
                unique_tools: tools_of(stats.tools)
                    .into_iter()
                    .map(|t| t.name().to_owned())
                    .collect(),
            },
        }
    }

    /// Runs `task` on the current runtime, if there is one.
    fn spawn(&self, task: impl std::future::Future<Output = ()> + Send + 'static) {
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(task);
        }
    }

    /// How many sessions are being tracked (for tests and metrics).
    pub fn tracked_sessions(&self) -> usize {
        self.lock().by_id.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Sessions> {
        // A panic while holding this lock leaves plain counters behind: keep using them.
        self.inner
            .sessions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Registers the session if unknown; true if it was new. Also sweeps idle sessions.
    fn start_if_new(&self, session_id: &str) -> bool {
        let now = Instant::now();
        let (new, expired) = {
            let mut sessions = self.lock();
            let expired = self.sweep(&mut sessions, now);
            let new = !sessions.by_id.contains_key(session_id);
            if new {
                sessions
                    .by_id
                    .insert(session_id.to_owned(), Tracked::new(now));
            }
            (new, expired)
        };
        for (id, stats) in expired {
            let event = self.idle_event(&id, Some(&stats), now);
            self.fire(event);
        }
        new
    }

    /// Removes sessions without activity for `idle_after`; at most one sweep a minute.
    fn sweep(&self, sessions: &mut Sessions, now: Instant) -> Vec<(String, Tracked)> {
        if sessions
            .last_sweep
            .is_some_and(|t| now.duration_since(t) < Duration::from_secs(60))
        {
            return Vec::new();
        }
        sessions.last_sweep = Some(now);
        let idle_after = self.inner.cfg.idle_after;
        let stale: Vec<String> = sessions
            .by_id
            .iter()
            .filter(|(_, s)| now.duration_since(s.last_activity) >= idle_after)
            .map(|(id, _)| id.clone())
            .collect();
        stale
            .into_iter()
            .filter_map(|id| sessions.by_id.remove(&id).map(|s| (id, s)))
            .collect()
    }

    fn touch(&self, session_id: &str) {
        if let Some(shared) = self.inner.shared.get() {
            let store = shared.store.clone();
            let id = session_id.to_owned();
            self.spawn(async move {
                if let Err(e) = store.monitor_touch(&id).await {
                    tracing::debug!(error = %e, "could not note a monitor session's activity");
                }
            });
            self.sweep_shared(shared);
            return;
        }
        if let Some(s) = self.lock().by_id.get_mut(session_id) {
            s.last_activity = Instant::now();
        }
    }

    /// Counts this call and returns the `sessionStats` object (the count includes it).
    fn record_call(&self, session_id: &str, tool: Tool) -> SessionStats {
        let now = Instant::now();
        let mut sessions = self.lock();
        let s = sessions
            .by_id
            .entry(session_id.to_owned())
            .or_insert_with(|| Tracked::new(now));
        s.tool_calls += 1;
        s.last_activity = now;
        s.tools.insert(tool);
        SessionStats {
            tool_call_count: s.tool_calls,
            unique_tools: u64::try_from(s.tools.len()).unwrap_or(u64::MAX),
            duration: millis(now.duration_since(s.started)),
        }
    }

    /// The fields every event carries, stamped now.
    fn base(&self) -> Base {
        let cfg = &self.inner.cfg;
        Base {
            timestamp: now_ms(),
            project: cfg.project.clone(),
            directory: cfg.directory.clone(),
            worktree: cfg.worktree.clone(),
        }
    }

    fn session_started_event(&self, session_id: &str) -> Event {
        let base = self.base();
        Event::SessionStarted {
            start_time: base.timestamp,
            base,
            session_id: session_id.to_owned(),
        }
    }

    fn idle_event(&self, session_id: &str, stats: Option<&Tracked>, now: Instant) -> Event {
        let final_stats = match stats {
            Some(s) => FinalStats {
                duration: millis(now.duration_since(s.started)),
                total_tool_calls: s.tool_calls,
                unique_tools: s.tools.iter().map(|t| t.name().to_owned()).collect(),
            },
            None => FinalStats::default(),
        };
        Event::SessionIdle {
            base: self.base(),
            session_id: session_id.to_owned(),
            final_stats,
        }
    }

    /// Posts an event in the background; failures are logged, never surfaced.
    fn fire(&self, event: Event) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!("agent-monitor event dropped: no tokio runtime");
            return;
        };
        let this = self.clone();
        runtime.spawn(async move {
            let kind = event.kind();
            let outcome = tokio::time::timeout(this.inner.cfg.timeout, this.post(&event)).await;
            match outcome {
                Ok(Ok(resp)) if resp.status().is_success() => {}
                Ok(Ok(resp)) => tracing::warn!(
                    event = %kind, status = resp.status().as_u16(),
                    "agent monitor rejected an event"
                ),
                Ok(Err(e)) => {
                    tracing::warn!(event = %kind, error = %e, "agent monitor unreachable")
                }
                Err(_) => tracing::warn!(event = %kind, "agent monitor timed out"),
            }
        });
    }

    async fn post(&self, event: &Event) -> Result<reqwest::Response, reqwest::Error> {
        self.inner
            .http
            .post(&self.inner.post_url)
            .json(event)
            .send()
            .await
    }

    /// Sends a `tool.pre_execute` and interprets the answer, fail-closed.
    async fn decide(&self, event: &Event) -> Result<(), Blocked> {
        let mut resp = self.post(event).await.map_err(|e| {
            if e.is_timeout() {
                self.timed_out()
            } else {
                self.blocked(
                    BlockCause::Unreachable,
                    format!("is unreachable ({})", crate::error_chain(&e.without_url())),
                )
            }
        })?;
        let status = resp.status();
        if !status.is_success() {
            return Err(self.blocked(
                BlockCause::Status(status.as_u16()),
                format!("returned HTTP {status} instead of a decision"),
            ));
        }
        let mut body = Vec::new();
        loop {
            match resp.chunk().await {
                Ok(Some(chunk)) => {
                    body.extend_from_slice(&chunk);
                    if body.len() > MAX_RESPONSE_BYTES {
                        return Err(self.blocked(
                            BlockCause::InvalidJson,
                            format!("sent an answer larger than {MAX_RESPONSE_BYTES} bytes"),
                        ));
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    return Err(self.blocked(
                        BlockCause::Unreachable,
                        format!(
                            "broke off while answering ({})",
                            crate::error_chain(&e.without_url())
                        ),
                    ));
                }
            }
        }
        interpret_decision(&body).map_err(|(cause, what)| self.blocked(cause, what))
    }

    fn timed_out(&self) -> Blocked {
        self.blocked(
            BlockCause::Timeout,
            format!(
                "did not answer within {} (a monitor that waits for a person's approval needs \
                 a longer monitor timeout)",
                human_duration(self.inner.cfg.timeout)
            ),
        )
    }

    fn blocked(&self, cause: BlockCause, what: String) -> Blocked {
        let reason = match cause {
            BlockCause::Monitor | BlockCause::Statistics => what,
            _ => format!(
                "the agent monitor at {} {what}; the call was blocked because the gate fails \
                 closed. Ask the user to check that the monitor is running and healthy, then retry.",
                self.inner.endpoint
            ),
        };
        Blocked { cause, reason }
    }
}

/// Reads a monitor's answer: `Ok` only for a JSON object with `"block": false`.
fn interpret_decision(body: &[u8]) -> Result<(), (BlockCause, String)> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        (
            BlockCause::InvalidJson,
            format!("answered with invalid JSON ({e})"),
        )
    })?;
    match value.get("block") {
        Some(Value::Bool(false)) => Ok(()),
        Some(Value::Bool(true)) => {
            let reason = value
                .get("reason")
                .and_then(Value::as_str)
                .map(|r| cut(r, MAX_ERROR_CHARS))
                .filter(|r| !r.trim().is_empty())
                .unwrap_or_else(|| "no reason given".to_owned());
            Err((
                BlockCause::Monitor,
                format!("blocked by the agent monitor: {reason}"),
            ))
        }
        Some(other) => Err((
            BlockCause::MissingBlock,
            format!(
                "answered without a boolean `block` field (it is {})",
                type_name(other)
            ),
        )),
        None => Err((
            BlockCause::MissingBlock,
            "answered without the required boolean `block` field".to_owned(),
        )),
    }
}

/// Turns `--monitor URL` into the endpoint: http(s) only; a bare origin gets `/agent-monitor`.
fn normalize_url(raw: &str) -> Result<String, MonitorError> {
    let invalid = |reason: &str| MonitorError::InvalidUrl {
        url: raw.to_owned(),
        reason: reason.to_owned(),
    };
    let mut url = url::Url::parse(raw.trim()).map_err(|e| invalid(&e.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid("the scheme must be http or https"));
    }
    if url.host().is_none() {
        return Err(invalid("a host is required"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(invalid("credentials in the URL are not supported"));
    }
    if url.path() == "/" || url.path().is_empty() {
        url.set_path("/agent-monitor");
    }
    Ok(url.to_string())
}

fn is_loopback_host(host: &url::Host<&str>) -> bool {
    match host {
        url::Host::Domain(d) => d.eq_ignore_ascii_case("localhost"),
        url::Host::Ipv4(ip) => ip.is_loopback(),
        url::Host::Ipv6(ip) => ip.is_loopback(),
    }
}

/// A short human title for `tool.post_execute`.
fn call_title(call: &ToolCall<'_>) -> String {
    if let Some(op) = &call.operation {
        let verb = if call.tool == Tool::Schema {
            "Schema of"
        } else {
            "Called"
        };
        return cut(
            &format!(
                "{verb} {} {} ({})",
                op.method.to_ascii_uppercase(),
                op.path,
                op.operation_id
            ),
            MAX_FULL_FIELD_CHARS,
        );
    }
    let query = call.args.get("query").and_then(Value::as_str);
    match (call.tool, query) {
        (Tool::Discover, Some(q)) => format!(
            "Searching operations: {}",
            cut(&redact_secrets_in_text(q), MAX_ARG_CHARS)
        ),
        (tool, _) => tool.name().to_owned(),
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_normalized() {
        assert_eq!(
            normalize_url("http://127.0.0.1:37123").unwrap(),
            "http://127.0.0.1:37123/agent-monitor"
        );
        assert_eq!(
            normalize_url("http://localhost:1/custom/path").unwrap(),
            "http://localhost:1/custom/path"
        );
        assert!(normalize_url("ftp://x").is_err());
        assert!(normalize_url("not a url").is_err());
        assert!(normalize_url("http://u:p@localhost:1").is_err());
    }

    #[test]
    fn decisions_fail_closed() {
        assert!(interpret_decision(br#"{"block": false}"#).is_ok());
        let (cause, msg) = interpret_decision(br#"{"block": true, "reason": "no"}"#).unwrap_err();
        assert_eq!(cause, BlockCause::Monitor);
        assert!(msg.contains("no"));
        assert_eq!(
            interpret_decision(br#"{"block": true}"#).unwrap_err().1,
            "blocked by the agent monitor: no reason given"
        );
        assert_eq!(
            interpret_decision(b"OK").unwrap_err().0,
            BlockCause::InvalidJson
        );
        assert_eq!(
            interpret_decision(br#"{"allow": true}"#).unwrap_err().0,
            BlockCause::MissingBlock
        );
        assert_eq!(
            interpret_decision(br#"{"block": "false"}"#).unwrap_err().0,
            BlockCause::MissingBlock
        );
        assert_eq!(
            interpret_decision(b"[]").unwrap_err().0,
            BlockCause::MissingBlock
        );
    }
}
