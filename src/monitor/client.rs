//! The agent-monitor client: the gate every tool call passes when `--monitor URL` is given.
//!
//! It speaks the plugin side of the protocol in `docs/monitor-protocol.md`: `session.started`,
//! `tool.pre_execute` (awaited, fail-closed), `tool.post_execute`, `session.error` and
//! `session.idle`. It keeps per-session statistics (`toolCallCount`, `uniqueTools`,
//! `duration`) and sanitizes tool arguments before they leave the process: the session token,
//! credentials and header values never reach the monitor.
//!
//! Imports reqwest only; no axum, no rmcp (the tools pipeline calls it).

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

use regex::Regex;
use serde_json::{Map, Value, json};

/// The longest a string argument may be once sanitized (the protocol's "first 100 chars").
pub const MAX_ARG_CHARS: usize = 100;
/// Default time `tool.pre_execute` may take before the call is blocked.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default time without calls after which a session is reported idle and forgotten.
pub const DEFAULT_IDLE_AFTER: Duration = Duration::from_secs(30 * 60);
/// The largest monitor answer we read; anything longer is an invalid answer.
const MAX_RESPONSE_BYTES: usize = 64 * 1024;
/// Limits that keep a sanitized `args` object small whatever the agent sent.
const MAX_ARG_KEYS: usize = 32;
const MAX_FULL_FIELD_CHARS: usize = 2048;
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

/// The gate's command-line flags, for `apigate dev` and `apigate serve` (`#[command(flatten)]`).
#[derive(Debug, Clone, clap::Args)]
pub struct MonitorFlags {
    /// Ask this agent monitor before every tool call (fail-closed), e.g.
    /// http://127.0.0.1:37123 (`apigate monitor` or the VS Code agent-monitor extension).
    #[arg(long = "monitor", value_name = "URL", env = "APIGATE_MONITOR_URL")]
    pub monitor: Option<String>,
    /// How long a tool call waits for the monitor's decision before it is blocked. Raise it
    /// when the monitor asks a person (e.g. 5m).
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "10s",
        value_parser = parse_duration,
        env = "APIGATE_MONITOR_TIMEOUT"
    )]
    pub monitor_timeout: Duration,
    /// `project` in monitor events (default: the spec's title).
    #[arg(long, value_name = "NAME")]
    pub monitor_project: Option<String>,
    /// `worktree` in monitor events (default: the working directory).
    #[arg(long, value_name = "PATH")]
    pub monitor_worktree: Option<String>,
}

impl MonitorFlags {
    /// The gate, or `None` when `--monitor` was not given. `spec_title` becomes the
    /// `project` unless `--monitor-project` says otherwise.
    pub fn build(&self, spec_title: Option<&str>) -> Result<Option<Monitor>, MonitorError> {
        let Some(url) = &self.monitor else {
            return Ok(None);
        };
        let mut cfg = MonitorConfig::new(url.clone());
        cfg.timeout = self.monitor_timeout;
        if let Some(project) = self
            .monitor_project
            .as_deref()
            .or(spec_title)
            .filter(|p| !p.trim().is_empty())
        {
            cfg.project = project.to_owned();
        }
        if let Some(worktree) = &self.monitor_worktree {
            cfg.worktree = worktree.clone();
        }
        Monitor::new(cfg).map(Some)
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
    /// The MCP session id or the auth session's id — never a token (stateless dev mode uses
    /// [`crate::mcp::fingerprint`] of the API key).
    pub session_id: &'a str,
    pub call_id: &'a str,
    pub tool: &'a str,
    /// The tool's arguments as the agent sent them; sanitized before sending.
    pub args: &'a Value,
    /// The resolved operation, for `api_execute` (and `api_schema`).
    pub operation: Option<OperationRef<'a>>,
    /// For `api_execute`: the request as its dry run shows it (configured credentials already
    /// redacted). Sanitized by [`preview`] and sent in `tool.pre_execute` only, so a person
    /// approving the call sees which resource it touches and what it sends.
    pub preview: Option<&'a Value>,
}

/// The operation a call resolved to; sent in full (method, path template, operationId).
#[derive(Debug, Clone, Copy)]
pub struct OperationRef<'a> {
    pub operation_id: &'a str,
    pub method: &'a str,
    pub path: &'a str,
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
    /// `http_status`, `invalid_json`, `missing_block`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Monitor => "monitor",
            Self::Unreachable => "unreachable",
            Self::Timeout => "timeout",
            Self::Status(_) => "http_status",
            Self::InvalidJson => "invalid_json",
            Self::MissingBlock => "missing_block",
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
}

#[derive(Default)]
struct Sessions {
    by_id: HashMap<String, SessionStats>,
    last_sweep: Option<Instant>,
}

struct SessionStats {
    started: Instant,
    last_activity: Instant,
    tool_calls: u64,
    tools: BTreeSet<String>,
}

impl SessionStats {
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
            }),
        })
    }

    /// The endpoint events are posted to (without its query string, safe to log).
    pub fn endpoint(&self) -> &str {
        &self.inner.endpoint
    }

    /// Records the session's start and sends `session.started` (fire and forget).
    /// Calling it again for a known session does nothing.
    pub fn session_started(&self, session_id: &str) {
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
        if self.start_if_new(call.session_id) {
            let started = self.session_started_event(call.session_id);
            // Its failure shows up in the pre_execute answer below; only the order matters here.
            let _ = tokio::time::timeout_at(deadline, self.post(&started)).await;
        }
        let stats = self.record_call(call.session_id, call.tool);
        let mut event = self.base("tool.pre_execute");
        event.insert("tool".into(), call.tool.into());
        event.insert("sessionID".into(), call.session_id.into());
        event.insert("callID".into(), call.call_id.into());
        event.insert(
            "args".into(),
            sanitize_args(call.tool, call.args, call.operation.as_ref()),
        );
        event.insert("sessionStats".into(), stats);
        if let Some(request) = call.preview {
            event.insert("preview".into(), preview(request));
        }
        let event = Value::Object(event);
        match tokio::time::timeout_at(deadline, self.decide(&event)).await {
            Ok(result) => result,
            Err(_) => Err(self.timed_out()),
        }
    }

    /// Sends `tool.post_execute` after a successful call (fire and forget).
    pub fn post_execute(&self, call: &ToolCall<'_>, output_len: usize) {
        self.touch(call.session_id);
        let mut event = self.base("tool.post_execute");
        event.insert("tool".into(), call.tool.into());
        event.insert("sessionID".into(), call.session_id.into());
        event.insert("callID".into(), call.call_id.into());
        event.insert("title".into(), call_title(call).into());
        event.insert("outputLength".into(), output_len.into());
        event.insert("hasMetadata".into(), call.operation.is_some().into());
        self.fire(Value::Object(event));
    }

    /// Sends `session.error` for a failed call (fire and forget). `error` should be the
    /// error's code or a short message; it is cut to 500 characters and scrubbed of tokens.
    pub fn session_error(&self, session_id: &str, error: &str) {
        self.touch(session_id);
        let mut event = self.base("session.error");
        event.insert("sessionID".into(), session_id.into());
        event.insert(
            "error".into(),
            cut(&redact_secrets_in_text(error), MAX_ERROR_CHARS).into(),
        );
        self.fire(Value::Object(event));
    }

    /// Sends `session.idle` with the session's final statistics and forgets it
    /// (fire and forget). Call it when an MCP session closes or times out.
    pub fn session_idle(&self, session_id: &str) {
        let stats = self.lock().by_id.remove(session_id);
        let event = self.idle_event(session_id, stats.as_ref(), Instant::now());
        self.fire(event);
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
                    .insert(session_id.to_owned(), SessionStats::new(now));
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
    fn sweep(&self, sessions: &mut Sessions, now: Instant) -> Vec<(String, SessionStats)> {
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
        if let Some(s) = self.lock().by_id.get_mut(session_id) {
            s.last_activity = Instant::now();
        }
    }

    /// Counts this call and returns the `sessionStats` object (the count includes it).
    fn record_call(&self, session_id: &str, tool: &str) -> Value {
        let now = Instant::now();
        let mut sessions = self.lock();
        let s = sessions
            .by_id
            .entry(session_id.to_owned())
            .or_insert_with(|| SessionStats::new(now));
        s.tool_calls += 1;
        s.last_activity = now;
        if !s.tools.contains(tool) {
            s.tools.insert(tool.to_owned());
        }
        json!({
            "toolCallCount": s.tool_calls,
            "uniqueTools": s.tools.len(),
            "duration": millis(now.duration_since(s.started)),
        })
    }

    fn base(&self, kind: &str) -> Map<String, Value> {
        let cfg = &self.inner.cfg;
        let mut m = Map::new();
        m.insert("type".into(), kind.into());
        m.insert("timestamp".into(), now_ms().into());
        m.insert("project".into(), cfg.project.clone().into());
        m.insert("directory".into(), cfg.directory.clone().into());
        m.insert("worktree".into(), cfg.worktree.clone().into());
        m
    }

    fn session_started_event(&self, session_id: &str) -> Value {
        let mut event = self.base("session.started");
        let start = event.get("timestamp").cloned().unwrap_or(Value::Null);
        event.insert("sessionID".into(), session_id.into());
        event.insert("startTime".into(), start);
        Value::Object(event)
    }

    fn idle_event(&self, session_id: &str, stats: Option<&SessionStats>, now: Instant) -> Value {
        let mut event = self.base("session.idle");
        event.insert("sessionID".into(), session_id.into());
        let final_stats = match stats {
            Some(s) => json!({
                "duration": millis(now.duration_since(s.started)),
                "totalToolCalls": s.tool_calls,
                "uniqueTools": s.tools.iter().collect::<Vec<_>>(),
            }),
            None => json!({"duration": 0, "totalToolCalls": 0, "uniqueTools": []}),
        };
        event.insert("finalStats".into(), final_stats);
        Value::Object(event)
    }

    /// Posts an event in the background; failures are logged, never surfaced.
    fn fire(&self, event: Value) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!("agent-monitor event dropped: no tokio runtime");
            return;
        };
        let this = self.clone();
        runtime.spawn(async move {
            let kind = event
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("?")
                .to_owned();
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

    async fn post(&self, event: &Value) -> Result<reqwest::Response, reqwest::Error> {
        self.inner
            .http
            .post(&self.inner.post_url)
            .json(event)
            .send()
            .await
    }

    /// Sends a `tool.pre_execute` and interprets the answer, fail-closed.
    async fn decide(&self, event: &Value) -> Result<(), Blocked> {
        let mut resp = self.post(event).await.map_err(|e| {
            if e.is_timeout() {
                self.timed_out()
            } else {
                self.blocked(
                    BlockCause::Unreachable,
                    format!("is unreachable ({})", error_chain(&e.without_url())),
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
                            error_chain(&e.without_url())
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
            BlockCause::Monitor => what,
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
        let verb = if call.tool == "api_schema" {
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
        ("api_discover", Some(q)) => format!(
            "Searching operations: {}",
            cut(&redact_secrets_in_text(q), MAX_ARG_CHARS)
        ),
        (tool, _) => tool.to_owned(),
    }
}

/// The `args` object sent to the monitor, per the protocol: strings cut to 100 characters,
/// every other value shown by its type name, secret-looking keys redacted and the session
/// token dropped. For `api_execute` (and `api_schema`) the method, path and operationId are
/// given in full — from `operation` when known — and `dryRun` as its boolean, so that a
/// monitor can decide on them. Header values, bodies and nested objects never appear.
pub fn sanitize_args(tool: &str, args: &Value, operation: Option<&OperationRef>) -> Value {
    let mut out = Map::new();
    let Value::Object(obj) = args else {
        return Value::Object(out);
    };
    let full_operation = matches!(tool, "api_execute" | "api_schema");
    for (key, value) in obj.iter().take(MAX_ARG_KEYS) {
        if key == "_sessionToken" {
            continue;
        }
        let key_out = cut(key, MAX_ARG_CHARS);
        if is_secret_key(key) {
            out.insert(key_out, "[redacted]".into());
            continue;
        }
        let sanitized = match (full_operation, key.as_str(), value) {
            (true, "method" | "path" | "operationId", Value::String(s)) => {
                cut(&redact_secrets_in_text(s), MAX_FULL_FIELD_CHARS).into()
            }
            (true, "dryRun", Value::Bool(b)) if tool == "api_execute" => Value::Bool(*b),
            (_, _, Value::String(s)) => cut(&redact_secrets_in_text(s), MAX_ARG_CHARS).into(),
            (_, _, other) => type_name(other).into(),
        };
        out.insert(key_out, sanitized);
    }
    if full_operation {
        if let Some(op) = operation {
            out.insert("operationId".into(), op.operation_id.into());
            out.insert("method".into(), op.method.to_ascii_uppercase().into());
            out.insert("path".into(), op.path.into());
        } else if let Some(Value::String(m)) = out.get_mut("method") {
            *m = m.to_ascii_uppercase();
        }
    }
    Value::Object(out)
}

/// Does this key name look like it holds a credential?
fn is_secret_key(key: &str) -> bool {
    let k: String = key
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .map(|c| c.to_ascii_lowercase())
        .collect();
    const NEEDLES: [&str; 11] = [
        "token",
        "secret",
        "passw",
        "authorization",
        "apikey",
        "cookie",
        "session",
        "credential",
        "privatekey",
        "accesskey",
        "signature",
    ];
    NEEDLES.iter().any(|n| k.contains(n))
}

/// The most bytes of a request body a preview shows.
const PREVIEW_BODY_BYTES: usize = 4096;

/// A request's dry-run view (`{method, url, headers, body, contentType}`) as a monitor may see
/// it: the method and the URL's path as they are (they say which resource the call touches);
/// query values, header values and body fields under credential-like names redacted;
/// credential-shaped text redacted anywhere; the body cut at 4 KB.
pub fn preview(view: &Value) -> Value {
    let mut out = Map::new();
    if let Some(m) = view.get("method").and_then(Value::as_str) {
        out.insert("method".into(), m.into());
    }
    if let Some(url) = view.get("url").and_then(Value::as_str) {
        out.insert("url".into(), preview_url(url).into());
    }
    if let Some(Value::Object(headers)) = view.get("headers") {
        let shown: Map<String, Value> = headers
            .iter()
            .map(|(k, v)| {
                let v = match v.as_str() {
                    _ if is_secret_key(k) => "[redacted]".to_string(),
                    Some(s) => redact_secrets_in_text(s),
                    None => type_name(v).to_string(),
                };
                (k.clone(), Value::String(v))
            })
            .collect();
        out.insert("headers".into(), Value::Object(shown));
    }
    if let Some(ct) = view.get("contentType").and_then(Value::as_str) {
        out.insert("contentType".into(), ct.into());
    }
    if let Some(body) = view.get("body") {
        let mut body = body.clone();
        redact_fields(&mut body);
        let text = match &body {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        if text.len() > PREVIEW_BODY_BYTES {
            let cut = text.floor_char_boundary(PREVIEW_BODY_BYTES);
            body = Value::String(format!("{}… ({} bytes in all)", &text[..cut], text.len()));
        }
        out.insert("body".into(), body);
    }
    Value::Object(out)
}

/// The URL with the values of credential-like query parameters redacted.
fn preview_url(url: &str) -> String {
    let Ok(mut parsed) = url::Url::parse(url) else {
        return redact_secrets_in_text(url);
    };
    if parsed.query().is_some() {
        let pairs: Vec<(String, String)> = parsed
            .query_pairs()
            .map(|(k, v)| {
                let v = if is_secret_key(&k) {
                    "[redacted]".to_string()
                } else {
                    redact_secrets_in_text(&v)
                };
                (k.into_owned(), v)
            })
            .collect();
        parsed.query_pairs_mut().clear().extend_pairs(pairs);
    }
    parsed.to_string()
}

/// Redacts, in place, the values under credential-like keys and credential-shaped text.
fn redact_fields(v: &mut Value) {
    match v {
        Value::Object(map) => {
            for (k, child) in map.iter_mut() {
                if is_secret_key(k) {
                    *child = Value::String("[redacted]".into());
                } else {
                    redact_fields(child);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact_fields),
        Value::String(s) => *s = redact_secrets_in_text(s),
        _ => {}
    }
}

/// Replaces things shaped like apigate tokens, bearer credentials or key=value secrets. The
/// key=value pattern has no leading `\b`: `_` is a word character, so `\btoken` would miss
/// `access_token=…` and `client_secret: …`, the most common spellings.
fn redact_secrets_in_text(s: &str) -> String {
    static PATTERNS: LazyLock<Vec<Regex>> = LazyLock::new(|| {
        [
            r"sess_[0-9A-Za-z]{16,}",
            r"agk_[0-9A-Za-z]+_[0-9A-Za-z]+",
            r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]+",
            r"(?i)(token|secret|password|passwd|api[_-]?key|apikey)\s*[=:]\s*\S+",
        ]
        .iter()
        .filter_map(|p| Regex::new(p).ok())
        .collect()
    });
    let mut out = s.to_owned();
    for re in PATTERNS.iter() {
        if re.is_match(&out) {
            out = re.replace_all(&out, "[redacted]").into_owned();
        }
    }
    out
}

/// JSON type names as the protocol shows them.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The first `max` characters of `s` (never splits a character).
fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => s[..i].to_owned(),
        None => s.to_owned(),
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        let text = inner.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        source = inner.source();
    }
    s
}

/// `10s`, `1.5s`, `250ms`, `5m` — for messages.
pub(crate) fn human_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms.is_multiple_of(60_000) {
        format!("{}m", ms / 60_000)
    } else if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// Parses `10`, `10s`, `500ms`, `5m`, `1h`, `7d` into a duration (a bare number is seconds).
/// Every duration flag takes this form.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("invalid duration {s:?}: expected e.g. 10s, 500ms, 5m, 1h"))?;
    let d = match unit.trim() {
        "" | "s" | "sec" | "secs" => Duration::from_secs(n),
        "ms" => Duration::from_millis(n),
        "m" | "min" | "mins" => Duration::from_secs(n.saturating_mul(60)),
        "h" => Duration::from_secs(n.saturating_mul(3600)),
        "d" => Duration::from_secs(n.saturating_mul(86_400)),
        other => return Err(format!("invalid duration unit {other:?} in {s:?}")),
    };
    if d.is_zero() {
        return Err("a duration must be greater than zero".to_owned());
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_preview_shows_the_request_but_no_credential() {
        let view = json!({
            "method": "POST",
            "url": "https://api.example.com/v2/pet/42?expand=owner&api_key=k-123456&token=t-9",
            "headers": {"authorization": "[redacted]", "X-Api-Key": "given-key", "X-Trace": "abc",
                "X-Note": "Bearer sk_live_abcdef"},
            "contentType": "application/json",
            "body": {"name": "Rex", "password": "hunter2", "owner": {"client_secret": "s3"},
                "note": "token=abc123"}
        });
        let p = preview(&view);
        let text = p.to_string();
        for secret in [
            "k-123456",
            "t-9",
            "given-key",
            "sk_live_abcdef",
            "hunter2",
            "s3\"",
            "abc123",
        ] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        assert_eq!(p["method"], "POST");
        let url = p["url"].as_str().unwrap();
        assert!(
            url.starts_with("https://api.example.com/v2/pet/42?expand=owner&"),
            "{url}"
        );
        assert_eq!(p["headers"]["X-Trace"], "abc");
        assert_eq!(p["body"]["name"], "Rex");
        let big =
            json!({"method": "POST", "url": "https://a.example/x", "body": "x".repeat(10_000)});
        let cut = preview(&big)["body"].as_str().unwrap().to_string();
        assert!(
            cut.len() < 4200 && cut.ends_with("(10000 bytes in all)"),
            "{}",
            cut.len()
        );
    }

    #[test]
    fn strings_are_cut_and_other_values_typed() {
        let long = "x".repeat(300);
        let args = json!({"query": long, "limit": 5, "tag": "pets", "method": "get", "extra": [1]});
        let out = sanitize_args("api_discover", &args, None);
        assert_eq!(out["query"].as_str().unwrap().chars().count(), 100);
        assert_eq!(out["limit"], "number");
        assert_eq!(out["tag"], "pets");
        assert_eq!(out["method"], "get");
        assert_eq!(out["extra"], "array");
    }

    #[test]
    fn cutting_respects_characters() {
        let s = "é".repeat(150);
        assert_eq!(cut(&s, 100).chars().count(), 100);
    }

    #[test]
    fn execute_shows_operation_in_full_and_hides_the_rest() {
        let long_path = format!("/{}", "a".repeat(150));
        let args = json!({
            "operationId": "deletePet",
            "pathParams": {"petId": 1},
            "headers": {"Authorization": "Bearer abc", "X-Trace": "t"},
            "body": {"password": "hunter2"},
            "query": {"token": "t0k"},
            "dryRun": true,
            "_sessionToken": "sess_0123456789abcdef0123456789abcdef",
        });
        let op = OperationRef {
            operation_id: "deletePet",
            method: "delete",
            path: &long_path,
        };
        let out = sanitize_args("api_execute", &args, Some(&op));
        assert_eq!(out["method"], "DELETE");
        assert_eq!(out["path"], long_path.as_str());
        assert_eq!(out["operationId"], "deletePet");
        assert_eq!(out["headers"], "object");
        assert_eq!(out["body"], "object");
        assert_eq!(out["pathParams"], "object");
        assert_eq!(out["dryRun"], true);
        assert!(out.get("_sessionToken").is_none());
        let text = out.to_string();
        for secret in ["Bearer", "abc", "hunter2", "t0k", "sess_"] {
            assert!(!text.contains(secret), "{secret} leaked: {text}");
        }
    }

    #[test]
    fn secret_keys_and_token_shaped_strings_are_redacted() {
        let args = json!({
            "apiKey": "k",
            "x-session-id": "s",
            "query": "find sess_0123456789abcdef0123456789abcdef and Bearer xyz.abc",
            "note": "password=hunter2 ok",
        });
        let out = sanitize_args("api_discover", &args, None);
        assert_eq!(out["apiKey"], "[redacted]");
        assert_eq!(out["x-session-id"], "[redacted]");
        let text = out.to_string();
        assert!(!text.contains("sess_0123"), "{text}");
        assert!(!text.contains("xyz.abc"), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
    }

    #[test]
    fn non_object_args_give_an_empty_object() {
        assert_eq!(sanitize_args("api_discover", &json!("x"), None), json!({}));
    }

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

    #[test]
    fn flags_build_the_gate_only_when_asked() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            flags: MonitorFlags,
        }
        let off = Cli::try_parse_from(["x"]).unwrap().flags;
        assert!(off.build(Some("Petstore")).unwrap().is_none());
        let on = Cli::try_parse_from([
            "x",
            "--monitor",
            "http://127.0.0.1:37123",
            "--monitor-timeout",
            "5m",
        ])
        .unwrap()
        .flags;
        let gate = on.build(Some("Petstore")).unwrap().unwrap();
        assert_eq!(gate.endpoint(), "http://127.0.0.1:37123/agent-monitor");
        assert_eq!(gate.inner.cfg.timeout, Duration::from_secs(300));
        assert_eq!(gate.inner.cfg.project, "Petstore");
        assert!(Cli::try_parse_from(["x", "--monitor-timeout", "soon"]).is_err());
        let bad = Cli::try_parse_from(["x", "--monitor", "ftp://x"])
            .unwrap()
            .flags;
        assert!(bad.build(None).is_err());
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("10").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("ten").is_err());
        assert_eq!(
            parse_duration("3d").unwrap(),
            Duration::from_secs(3 * 86_400)
        );
        assert!(parse_duration("3w").is_err());
        assert_eq!(human_duration(Duration::from_secs(10)), "10s");
        assert_eq!(human_duration(Duration::from_millis(300)), "300ms");
    }
}
