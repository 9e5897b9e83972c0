//! The reference monitor (`apigate monitor`): the protocol's `POST /agent-monitor` endpoint,
//! decisions by [`RuleSet`], human approvals that hold a `tool.pre_execute` answer open, a
//! bounded in-memory event ring (optionally appended to a JSONL file), a JSON API and a live
//! dashboard page (Server-Sent Events) served by the same process.
//!
//! The only axum user in `monitor/`; the client half never imports this file.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path as UrlPath, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use futures::{Stream, StreamExt};
use serde::Serialize;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::client::{human_duration, parse_duration};
use super::rules::{Action, CallFacts, RuleSet};

const PAGE: &str = include_str!("page.html");
/// Protocol events are small (arguments are cut to 100 characters); this bounds the ring.
const MAX_BODY_BYTES: usize = 64 * 1024;
const MAX_SESSIONS: usize = 1000;
const MAX_DECISIONS: usize = 500;

/// `apigate monitor` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct MonitorArgs {
    /// Address to listen on (the protocol's port is 37123).
    #[arg(
        long,
        default_value = "127.0.0.1:37123",
        env = "APIGATE_MONITOR_LISTEN"
    )]
    pub listen: SocketAddr,
    /// TOML rules file (see examples/monitor-rules.toml). Without it, every mutating
    /// `api_execute` needs approval and everything else is allowed.
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
    /// Append every event and decision to this JSONL file.
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// How long a call waits for a person before it is blocked ("approval timed out").
    /// The agent side must wait at least as long: `apigate … --monitor-timeout`.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub approval_timeout: Duration,
    /// How many events the in-memory ring keeps.
    #[arg(long, default_value_t = 1000)]
    pub max_events: usize,
}

/// Everything the server needs, built from [`MonitorArgs`] or by tests.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub rules: RuleSet,
    pub log: Option<PathBuf>,
    pub approval_timeout: Duration,
    pub max_events: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            rules: RuleSet::default_rules(),
            log: None,
            approval_timeout: Duration::from_secs(300),
            max_events: 1000,
        }
    }
}

impl ServerConfig {
    /// Loads the rules file named by the flags (or the default rules).
    pub fn from_args(args: &MonitorArgs) -> anyhow::Result<Self> {
        let rules = match &args.rules {
            Some(path) => RuleSet::from_file(path)?,
            None => RuleSet::default_rules(),
        };
        Ok(Self {
            rules,
            log: args.log.clone(),
            approval_timeout: args.approval_timeout,
            max_events: args.max_events.max(1),
        })
    }
}

/// A monitor running in the background (see [`spawn`]).
pub struct RunningMonitor {
    addr: SocketAddr,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
    log_task: Option<tokio::task::JoinHandle<()>>,
}

impl RunningMonitor {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR` (the dashboard); the protocol endpoint is `{url}/agent-monitor`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Blocks every pending approval ("the monitor is shutting down"), ends the event
    /// streams and waits for the server to stop.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        let served = self.task.await.context("the monitor task panicked")?;
        if let Some(log) = self.log_task {
            log.await.context("the event log writer panicked")?;
        }
        served.context("the monitor server failed")
    }
}

/// Starts the monitor on an already bound listener (tests bind 127.0.0.1:0).
pub async fn spawn(listener: TcpListener, config: ServerConfig) -> anyhow::Result<RunningMonitor> {
    let addr = listener.local_addr()?;
    let shutdown = CancellationToken::new();
    let (log_tx, log_task) = match &config.log {
        Some(path) => {
            let (tx, task) = open_log(path.clone(), shutdown.clone()).await?;
            (Some(tx), Some(task))
        }
        None => (None, None),
    };
    let (push_tx, _) = broadcast::channel(1024);
    let shared = Arc::new(Shared {
        rules: config.rules,
        approval_timeout: config.approval_timeout,
        max_events: config.max_events.max(1),
        loopback_only: addr.ip().is_loopback(),
        state: Mutex::new(MonitorState::default()),
        push: push_tx,
        log: log_tx,
        shutdown: shutdown.clone(),
        started: Instant::now(),
    });
    {
        // On shutdown, pending approvals are answered (block) so the server can drain.
        let shared = shared.clone();
        tokio::spawn(async move {
            shared.shutdown.cancelled().await;
            let ids: Vec<String> = shared.lock().pending.keys().cloned().collect();
            for id in ids {
                shared.resolve(&id, Outcome::Shutdown);
            }
        });
    }
    let app = router(shared);
    let stop = shutdown.clone();
    let task = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await
    });
    Ok(RunningMonitor {
        addr,
        shutdown,
        task,
        log_task,
    })
}

/// `apigate monitor`: serves until Ctrl-C or SIGTERM, then shuts down gracefully.
pub async fn run(args: MonitorArgs) -> anyhow::Result<()> {
    let config = ServerConfig::from_args(&args)?;
    let listener = TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let rules_source = config.rules.source().to_owned();
    let rule_count = config.rules.specs().len();
    let monitor = spawn(listener, config).await?;
    eprintln!(
        "apigate monitor listening on {url}\n  dashboard:  {url}/\n  endpoint:   {url}/agent-monitor\n  rules:      {rules_source} ({rule_count} rules)\n  approvals time out after {}",
        human_duration(args.approval_timeout),
        url = monitor.url(),
    );
    if !args.listen.ip().is_loopback() {
        eprintln!(
            "warning: {} is not a loopback address: anyone who can reach it can read the events \
             and approve calls (the monitor has no login)",
            args.listen
        );
    }
    shutdown_signal().await;
    eprintln!("apigate monitor: shutting down");
    monitor.shutdown().await
}

async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::warn!(error = %e, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}

async fn open_log(
    path: PathBuf,
    shutdown: CancellationToken,
) -> anyhow::Result<(mpsc::Sender<String>, tokio::task::JoinHandle<()>)> {
    let mut file = tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .await
        .with_context(|| format!("cannot open the event log {}", path.display()))?;
    let (tx, mut rx) = mpsc::channel::<String>(4096);
    let task = tokio::spawn(async move {
        loop {
            let line = tokio::select! {
                line = rx.recv() => line,
                () = shutdown.cancelled() => None,
            };
            let Some(mut line) = line else { break };
            line.push('\n');
            if let Err(e) = file.write_all(line.as_bytes()).await {
                tracing::warn!(error = %e, path = %path.display(), "cannot write the event log");
            }
        }
        // Write what was queued before the shutdown.
        while let Ok(mut line) = rx.try_recv() {
            line.push('\n');
            let _ = file.write_all(line.as_bytes()).await;
        }
        let _ = file.flush().await;
    });
    Ok((tx, task))
}

struct Shared {
    rules: RuleSet,
    approval_timeout: Duration,
    max_events: usize,
    loopback_only: bool,
    state: Mutex<MonitorState>,
    push: broadcast::Sender<Push>,
    log: Option<mpsc::Sender<String>>,
    shutdown: CancellationToken,
    started: Instant,
}

#[derive(Default)]
struct MonitorState {
    next_seq: u64,
    next_approval: u64,
    events: VecDeque<StoredEvent>,
    sessions: HashMap<String, SessionView>,
    pending: HashMap<String, Pending>,
    decisions: VecDeque<DecisionRecord>,
}

/// One received event, as the API and the page show it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct StoredEvent {
    seq: u64,
    received_at: i64,
    event: Value,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct SessionView {
    #[serde(rename = "sessionID")]
    session_id: String,
    project: String,
    directory: String,
    started_at: i64,
    last_event_at: i64,
    /// active | idle
    state: &'static str,
    tool_call_count: u64,
    unique_tools: BTreeSet<String>,
    duration_ms: u64,
    blocked: u64,
    errors: u64,
    last_error: Option<String>,
    #[serde(skip)]
    recent_calls: VecDeque<Instant>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct ApprovalView {
    id: String,
    /// pending | approved | denied | timed_out | abandoned | shutdown
    status: &'static str,
    created_at: i64,
    expires_at: i64,
    #[serde(rename = "sessionID")]
    session_id: String,
    #[serde(rename = "callID")]
    call_id: String,
    tool: String,
    args: Value,
    /// `api_execute`'s request as apigate will send it, when the event carried one.
    #[serde(skip_serializing_if = "Option::is_none")]
    preview: Option<Value>,
    rule: Option<String>,
    reason: String,
    event_seq: u64,
}

struct Pending {
    view: ApprovalView,
    reply: oneshot::Sender<Outcome>,
}

/// A decision on one `tool.pre_execute`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
struct DecisionRecord {
    event_seq: u64,
    at: i64,
    #[serde(rename = "sessionID")]
    session_id: String,
    #[serde(rename = "callID")]
    call_id: String,
    tool: String,
    summary: String,
    block: bool,
    reason: String,
    /// rule | default | approved | denied | timed_out | abandoned | shutdown
    by: &'static str,
    rule: Option<String>,
    approval_id: Option<String>,
}

/// What is pushed to the page's event stream.
#[derive(Debug, Clone)]
enum Push {
    Event(StoredEvent),
    Session(SessionView),
    Approval(ApprovalView),
    Decision(DecisionRecord),
}

impl Push {
    fn to_sse(&self) -> Event {
        let (name, data) = match self {
            Push::Event(e) => ("event", serde_json::to_string(e)),
            Push::Session(s) => ("session", serde_json::to_string(s)),
            Push::Approval(a) => ("approval", serde_json::to_string(a)),
            Push::Decision(d) => ("decision", serde_json::to_string(d)),
        };
        Event::default()
            .event(name)
            .data(data.unwrap_or_else(|_| "null".to_owned()))
    }
}

/// How a held approval ended.
#[derive(Debug, Clone)]
enum Outcome {
    Approved,
    Denied(Option<String>),
    TimedOut,
    Abandoned,
    Shutdown,
}

impl Outcome {
    fn status(&self) -> &'static str {
        match self {
            Outcome::Approved => "approved",
            Outcome::Denied(_) => "denied",
            Outcome::TimedOut => "timed_out",
            Outcome::Abandoned => "abandoned",
            Outcome::Shutdown => "shutdown",
        }
    }

    fn decision(&self) -> (bool, String) {
        match self {
            Outcome::Approved => (false, "approved by a person".to_owned()),
            Outcome::Denied(Some(r)) if !r.trim().is_empty() => {
                (true, format!("denied by a person: {}", r.trim()))
            }
            Outcome::Denied(_) => (true, "denied by a person".to_owned()),
            Outcome::TimedOut => (true, "approval timed out".to_owned()),
            Outcome::Abandoned => (
                true,
                "the caller disconnected before a person decided".to_owned(),
            ),
            Outcome::Shutdown => (true, "the monitor is shutting down".to_owned()),
        }
    }
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn call_summary(tool: &str, args: &Value) -> String {
    match (str_field(args, "method"), str_field(args, "path")) {
        (Some(m), Some(p)) => format!("{tool} {m} {p}"),
        _ => match str_field(args, "query") {
            Some(q) => format!("{tool} \"{q}\""),
            None => str_field(args, "operationId")
                .map(|op| format!("{tool} {op}"))
                .unwrap_or_else(|| tool.to_owned()),
        },
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, MonitorState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn publish(&self, push: Push) {
        if let Some(log) = &self.log {
            let line = match &push {
                Push::Event(e) => serde_json::to_value(e).ok().map(|mut v| {
                    v["kind"] = "event".into();
                    v
                }),
                Push::Decision(d) => serde_json::to_value(d).ok().map(|mut v| {
                    v["kind"] = "decision".into();
                    v
                }),
                _ => None,
            };
            if let Some(line) = line
                && log.try_send(line.to_string()).is_err()
            {
                tracing::warn!("event log is behind; an entry was dropped");
            }
        }
        // No subscriber is fine.
        let _ = self.push.send(push);
    }

    /// Stores an event, updates its session; returns the stored event and, for a
    /// `tool.pre_execute`, the session's calls in the last minute.
    fn record(&self, event: Value) -> (StoredEvent, Option<u32>, Vec<Push>) {
        let now = Instant::now();
        let at = now_ms();
        let mut pushes = Vec::new();
        let mut state = self.lock();
        state.next_seq += 1;
        let stored = StoredEvent {
            seq: state.next_seq,
            received_at: at,
            event,
        };
        state.events.push_back(stored.clone());
        while state.events.len() > self.max_events {
            state.events.pop_front();
        }
        pushes.push(Push::Event(stored.clone()));
        let ev = &stored.event;
        let kind = str_field(ev, "type").unwrap_or_default();
        let mut per_minute = None;
        if let Some(id) = str_field(ev, "sessionID") {
            let ts = ev.get("timestamp").and_then(Value::as_i64).unwrap_or(at);
            let session = state
                .sessions
                .entry(id.to_owned())
                .or_insert_with(|| SessionView {
                    session_id: id.to_owned(),
                    project: String::new(),
                    directory: String::new(),
                    started_at: ts,
                    last_event_at: ts,
                    state: "active",
                    tool_call_count: 0,
                    unique_tools: BTreeSet::new(),
                    duration_ms: 0,
                    blocked: 0,
                    errors: 0,
                    last_error: None,
                    recent_calls: VecDeque::new(),
                });
            if let Some(p) = str_field(ev, "project") {
                session.project = p.to_owned();
            }
            if let Some(d) = str_field(ev, "directory") {
                session.directory = d.to_owned();
            }
            session.last_event_at = ts;
            match kind {
                "session.started" => {
                    session.state = "active";
                    session.started_at = ev.get("startTime").and_then(Value::as_i64).unwrap_or(ts);
                }
                "tool.pre_execute" => {
                    session.state = "active";
                    let stats = ev.get("sessionStats");
                    let count = stats
                        .and_then(|s| s.get("toolCallCount"))
                        .and_then(Value::as_u64);
                    session.tool_call_count = count.unwrap_or(session.tool_call_count + 1);
                    if let Some(d) = stats
                        .and_then(|s| s.get("duration"))
                        .and_then(Value::as_u64)
                    {
                        session.duration_ms = d;
                    }
                    if let Some(tool) = str_field(ev, "tool") {
                        session.unique_tools.insert(tool.to_owned());
                    }
                    session.recent_calls.push_back(now);
                    while session
                        .recent_calls
                        .front()
                        .is_some_and(|t| now.duration_since(*t) > Duration::from_secs(60))
                    {
                        session.recent_calls.pop_front();
                    }
                    per_minute =
                        Some(u32::try_from(session.recent_calls.len()).unwrap_or(u32::MAX));
                }
                "session.error" => {
                    session.errors += 1;
                    session.last_error = str_field(ev, "error").map(str::to_owned);
                }
                "session.idle" => {
                    session.state = "idle";
                    if let Some(fs) = ev.get("finalStats") {
                        if let Some(d) = fs.get("duration").and_then(Value::as_u64) {
                            session.duration_ms = d;
                        }
                        if let Some(n) = fs.get("totalToolCalls").and_then(Value::as_u64) {
                            session.tool_call_count = n;
                        }
                    }
                }
                _ => {}
            }
            pushes.push(Push::Session(session.clone()));
            if state.sessions.len() > MAX_SESSIONS {
                evict_session(&mut state.sessions);
            }
        }
        (stored, per_minute, pushes)
    }

    fn push_decision(&self, state: &mut MonitorState, d: DecisionRecord) -> Vec<Push> {
        let mut pushes = Vec::new();
        if d.block
            && let Some(s) = state.sessions.get_mut(&d.session_id)
        {
            s.blocked += 1;
            pushes.push(Push::Session(s.clone()));
        }
        state.decisions.push_back(d.clone());
        while state.decisions.len() > MAX_DECISIONS {
            state.decisions.pop_front();
        }
        pushes.push(Push::Decision(d));
        pushes
    }

    /// Ends a pending approval, if still pending: records the decision, tells the page and
    /// wakes the held request. Whoever resolves first wins.
    fn resolve(&self, id: &str, outcome: Outcome) -> Option<ApprovalView> {
        let (view, pushes) = {
            let mut state = self.lock();
            let pending = state.pending.remove(id)?;
            let mut view = pending.view;
            view.status = outcome.status();
            let (block, reason) = outcome.decision();
            let record = DecisionRecord {
                event_seq: view.event_seq,
                at: now_ms(),
                session_id: view.session_id.clone(),
                call_id: view.call_id.clone(),
                tool: view.tool.clone(),
                summary: call_summary(&view.tool, &view.args),
                block,
                reason,
                by: outcome.status(),
                rule: view.rule.clone(),
                approval_id: Some(view.id.clone()),
            };
            let mut pushes = vec![Push::Approval(view.clone())];
            pushes.extend(self.push_decision(&mut state, record));
            // The held request may be gone already; its guard handles that.
            let _ = pending.reply.send(outcome);
            (view, pushes)
        };
        for p in pushes {
            self.publish(p);
        }
        Some(view)
    }
}

fn evict_session(sessions: &mut HashMap<String, SessionView>) {
    let victim = sessions
        .values()
        .min_by_key(|s| (s.state == "active", s.last_event_at))
        .map(|s| s.session_id.clone());
    if let Some(id) = victim {
        sessions.remove(&id);
    }
}

/// Answers a held request's approval as abandoned when the request is dropped.
struct PendingGuard {
    shared: Arc<Shared>,
    id: String,
}

impl Drop for PendingGuard {
    fn drop(&mut self) {
        self.shared.resolve(&self.id, Outcome::Abandoned);
    }
}

fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/", get(page))
        .route(
            "/agent-monitor",
            post(agent_monitor).fallback(|| async { not_found() }),
        )
        .route("/api/state", get(api_state))
        .route("/api/events", get(api_events))
        .route("/api/sessions", get(api_sessions))
        .route("/api/approvals", get(api_approvals))
        .route("/api/decisions", get(api_decisions))
        .route("/api/rules", get(api_rules))
        .route("/api/stream", get(api_stream))
        .route("/api/approvals/{id}/approve", post(approve))
        .route("/api/approvals/{id}/deny", post(deny))
        .route(
            "/health",
            get(|| async { axum::Json(json!({"status": "ok"})) }),
        )
        .fallback(|| async { not_found() })
        .layer(middleware::from_fn_with_state(shared.clone(), guard_origin))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(shared)
}

fn not_found() -> Response {
    (StatusCode::NOT_FOUND, "Not Found").into_response()
}

fn json_error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, axum::Json(json!({"error": message.into()}))).into_response()
}

/// Browser protections for a localhost service: a loopback-bound monitor only answers
/// loopback `Host` names (DNS rebinding), and a request carrying an `Origin` must come from
/// the page itself (no other site can approve calls or post events).
async fn guard_origin(State(shared): State<Arc<Shared>>, req: Request, next: Next) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    if shared.loopback_only && !is_loopback_authority(&host) {
        return json_error(
            StatusCode::FORBIDDEN,
            "this monitor only answers on localhost",
        );
    }
    if req.method() != Method::GET
        && let Some(origin) = req.headers().get(header::ORIGIN)
    {
        let same = origin
            .to_str()
            .ok()
            .and_then(|o| url::Url::parse(o).ok())
            .is_some_and(|o| {
                let authority = match o.port() {
                    Some(p) => format!("{}:{p}", o.host_str().unwrap_or_default()),
                    None => o.host_str().unwrap_or_default().to_owned(),
                };
                authority.eq_ignore_ascii_case(&host)
            });
        if !same {
            return json_error(StatusCode::FORBIDDEN, "cross-origin requests are refused");
        }
    }
    next.run(req).await
}

fn is_loopback_authority(authority: &str) -> bool {
    let host = match authority.rsplit_once(':') {
        Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h,
        _ => authority,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

async fn page() -> Html<&'static str> {
    Html(PAGE)
}

/// `POST /agent-monitor`: the protocol endpoint.
async fn agent_monitor(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let event: Value = match serde_json::from_slice(&body) {
        Ok(v @ Value::Object(_)) => v,
        _ => return (StatusCode::BAD_REQUEST, "Bad Request").into_response(),
    };
    if str_field(&event, "type").is_none() {
        return (StatusCode::BAD_REQUEST, "Bad Request: missing `type`").into_response();
    }
    let is_pre = str_field(&event, "type") == Some("tool.pre_execute");
    let (stored, per_minute, pushes) = shared.record(event);
    for p in pushes {
        shared.publish(p);
    }
    if !is_pre {
        return (StatusCode::OK, "OK").into_response();
    }
    pre_execute(shared, stored, per_minute.unwrap_or(1)).await
}

async fn pre_execute(shared: Arc<Shared>, stored: StoredEvent, per_minute: u32) -> Response {
    let ev = &stored.event;
    let tool = str_field(ev, "tool").unwrap_or_default().to_owned();
    let session_id = str_field(ev, "sessionID").unwrap_or_default().to_owned();
    let call_id = str_field(ev, "callID").unwrap_or_default().to_owned();
    let args = ev.get("args").cloned().unwrap_or_else(|| json!({}));
    let tool_call_count = ev
        .get("sessionStats")
        .and_then(|s| s.get("toolCallCount"))
        .and_then(Value::as_u64)
        .unwrap_or(1);
    let verdict = shared.rules.evaluate(&CallFacts {
        tool: &tool,
        args: &args,
        tool_call_count,
        calls_last_minute: per_minute,
    });
    if verdict.action != Action::RequireApproval {
        let block = verdict.action == Action::Block;
        let record = DecisionRecord {
            event_seq: stored.seq,
            at: now_ms(),
            session_id,
            call_id,
            summary: call_summary(&tool, &args),
            tool,
            block,
            reason: verdict.reason.clone(),
            by: if verdict.rule.is_some() {
                "rule"
            } else {
                "default"
            },
            rule: verdict.rule,
            approval_id: None,
        };
        let pushes = {
            let mut state = shared.lock();
            shared.push_decision(&mut state, record)
        };
        for p in pushes {
            shared.publish(p);
        }
        return decision_response(block, &verdict.reason);
    }

    let (tx, mut rx) = oneshot::channel();
    let created = now_ms();
    let view = {
        let mut state = shared.lock();
        state.next_approval += 1;
        let view = ApprovalView {
            id: format!("ap-{}", state.next_approval),
            status: "pending",
            created_at: created,
            expires_at: created
                + i64::try_from(shared.approval_timeout.as_millis()).unwrap_or(i64::MAX / 2),
            session_id,
            call_id,
            tool,
            args,
            preview: ev.get("preview").filter(|p| p.is_object()).cloned(),
            rule: verdict.rule,
            reason: verdict.reason,
            event_seq: stored.seq,
        };
        state.pending.insert(
            view.id.clone(),
            Pending {
                view: view.clone(),
                reply: tx,
            },
        );
        view
    };
    shared.publish(Push::Approval(view.clone()));
    let _guard = PendingGuard {
        shared: shared.clone(),
        id: view.id.clone(),
    };
    let outcome = tokio::select! {
        r = &mut rx => r.ok(),
        () = tokio::time::sleep(shared.approval_timeout) => {
            shared.resolve(&view.id, Outcome::TimedOut);
            rx.await.ok()
        }
        () = shared.shutdown.cancelled() => {
            shared.resolve(&view.id, Outcome::Shutdown);
            rx.await.ok()
        }
    };
    let (block, reason) = outcome.unwrap_or(Outcome::Abandoned).decision();
    decision_response(block, &reason)
}

fn decision_response(block: bool, reason: &str) -> Response {
    let body = if block {
        json!({"block": true, "reason": reason})
    } else {
        json!({"block": false})
    };
    (StatusCode::OK, axum::Json(body)).into_response()
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StateView {
    events: Vec<StoredEvent>,
    sessions: Vec<SessionView>,
    approvals: Vec<ApprovalView>,
    decisions: Vec<DecisionRecord>,
    rules: Value,
    approval_timeout_ms: u128,
    uptime_ms: u128,
}

fn rules_view(shared: &Shared) -> Value {
    json!({
        "source": shared.rules.source(),
        "default": shared.rules.default_action(),
        "rules": shared.rules.specs(),
    })
}

fn sessions_sorted(state: &MonitorState) -> Vec<SessionView> {
    let mut v: Vec<SessionView> = state.sessions.values().cloned().collect();
    v.sort_by_key(|s| std::cmp::Reverse(s.last_event_at));
    v
}

fn approvals_sorted(state: &MonitorState) -> Vec<ApprovalView> {
    let mut v: Vec<ApprovalView> = state.pending.values().map(|p| p.view.clone()).collect();
    v.sort_by_key(|a| a.event_seq);
    v
}

async fn api_state(State(shared): State<Arc<Shared>>) -> axum::Json<StateView> {
    let state = shared.lock();
    axum::Json(StateView {
        events: state.events.iter().cloned().collect(),
        sessions: sessions_sorted(&state),
        approvals: approvals_sorted(&state),
        decisions: state.decisions.iter().cloned().collect(),
        rules: rules_view(&shared),
        approval_timeout_ms: shared.approval_timeout.as_millis(),
        uptime_ms: shared.started.elapsed().as_millis(),
    })
}

async fn api_events(State(shared): State<Arc<Shared>>) -> axum::Json<Vec<StoredEvent>> {
    axum::Json(shared.lock().events.iter().cloned().collect())
}

async fn api_sessions(State(shared): State<Arc<Shared>>) -> axum::Json<Vec<SessionView>> {
    axum::Json(sessions_sorted(&shared.lock()))
}

async fn api_approvals(State(shared): State<Arc<Shared>>) -> axum::Json<Vec<ApprovalView>> {
    axum::Json(approvals_sorted(&shared.lock()))
}

async fn api_decisions(State(shared): State<Arc<Shared>>) -> axum::Json<Vec<DecisionRecord>> {
    axum::Json(shared.lock().decisions.iter().cloned().collect())
}

async fn api_rules(State(shared): State<Arc<Shared>>) -> axum::Json<Value> {
    axum::Json(rules_view(&shared))
}

async fn approve(State(shared): State<Arc<Shared>>, UrlPath(id): UrlPath<String>) -> Response {
    decide(&shared, &id, Outcome::Approved)
}

async fn deny(
    State(shared): State<Arc<Shared>>,
    UrlPath(id): UrlPath<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let reason = if body.is_empty() {
        None
    } else {
        let is_json = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        match serde_json::from_slice::<Value>(&body) {
            Ok(v) if is_json => str_field(&v, "reason").map(|r| r.chars().take(500).collect()),
            _ => {
                return json_error(
                    StatusCode::BAD_REQUEST,
                    "expected an empty body or JSON {\"reason\": \"...\"}",
                );
            }
        }
    };
    decide(&shared, &id, Outcome::Denied(reason))
}

fn decide(shared: &Shared, id: &str, outcome: Outcome) -> Response {
    match shared.resolve(id, outcome) {
        Some(view) => (StatusCode::OK, axum::Json(view)).into_response(),
        None => json_error(
            StatusCode::NOT_FOUND,
            format!("no pending approval {id:?} (already decided, timed out, or unknown)"),
        ),
    }
}

/// `GET /api/stream`: Server-Sent Events `event`, `session`, `approval`, `decision`; a
/// `resync` event when the client fell behind (the page then reloads `/api/state`).
async fn api_stream(
    State(shared): State<Arc<Shared>>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let rx = shared.push.subscribe();
    let hello = futures::stream::once(async { Ok(Event::default().event("hello").data("{}")) });
    let updates = tokio_stream::wrappers::BroadcastStream::new(rx).map(|item| {
        Ok(match item {
            Ok(push) => push.to_sse(),
            Err(_lagged) => Event::default().event("resync").data("{}"),
        })
    });
    let stop = shared.shutdown.clone().cancelled_owned();
    Sse::new(hello.chain(updates).take_until(stop)).keep_alive(KeepAlive::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_authorities() {
        assert!(is_loopback_authority("127.0.0.1:37123"));
        assert!(is_loopback_authority("localhost:1"));
        assert!(is_loopback_authority("[::1]:8080"));
        assert!(is_loopback_authority("localhost"));
        assert!(!is_loopback_authority("evil.example:37123"));
        assert!(!is_loopback_authority(""));
    }

    #[test]
    fn outcomes_block_except_approval() {
        assert!(!Outcome::Approved.decision().0);
        assert_eq!(
            Outcome::TimedOut.decision(),
            (true, "approval timed out".to_owned())
        );
        assert_eq!(
            Outcome::Denied(Some("not today".into())).decision().1,
            "denied by a person: not today"
        );
    }
}
