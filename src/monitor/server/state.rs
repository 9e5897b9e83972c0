//! The reference monitor's state apart from its routes: the event ring, the sessions as the
//! events describe them, held approvals and their outcomes, the decision log, and the fan-out
//! to the page's event stream and the JSONL log. Every change goes through [`Shared`]; the
//! routes only parse requests and shape answers. How a `tool.pre_execute` is decided (the
//! rules, held approvals) is in `state/approvals.rs`.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::response::sse::Event as SseEvent;
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio_util::sync::CancellationToken;

mod approvals;

use crate::monitor::protocol::{Call, Event, GateDecision, ReceivedEvent};
use crate::monitor::rules::RuleSet;
use approvals::Outcome;

const MAX_SESSIONS: usize = 1000;
const MAX_DECISIONS: usize = 500;

/// The monitor's state, shared by every request.
pub(super) struct Shared {
    rules: RuleSet,
    approval_timeout: Duration,
    max_events: usize,
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
    /// Recent `tool.pre_execute` times per key and per user session (`rate_scopes`), so a
    /// rate rule is not reset by opening a new MCP session.
    recent_by_scope: HashMap<String, VecDeque<Instant>>,
}

/// One received event, as the API and the page show it (the JSON as it came).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct StoredEvent {
    seq: u64,
    received_at: i64,
    event: Value,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SessionView {
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

impl SessionView {
    fn new(session_id: &str, at: i64) -> SessionView {
        SessionView {
            session_id: session_id.to_owned(),
            project: String::new(),
            directory: String::new(),
            started_at: at,
            last_event_at: at,
            state: "active",
            tool_call_count: 0,
            unique_tools: BTreeSet::new(),
            duration_ms: 0,
            blocked: 0,
            errors: 0,
            last_error: None,
            recent_calls: VecDeque::new(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct ApprovalView {
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
pub(super) struct DecisionRecord {
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
pub(super) enum Push {
    Event(StoredEvent),
    Session(SessionView),
    Approval(ApprovalView),
    GateDecision(DecisionRecord),
}

impl Push {
    pub(super) fn to_sse(&self) -> SseEvent {
        let (name, data) = match self {
            Push::Event(e) => ("event", serde_json::to_string(e)),
            Push::Session(s) => ("session", serde_json::to_string(s)),
            Push::Approval(a) => ("approval", serde_json::to_string(a)),
            Push::GateDecision(d) => ("decision", serde_json::to_string(d)),
        };
        SseEvent::default()
            .event(name)
            .data(data.unwrap_or_else(|_| "null".to_owned()))
    }
}

/// Everything the page loads at once (`GET /api/state`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct StateView {
    events: Vec<StoredEvent>,
    sessions: Vec<SessionView>,
    approvals: Vec<ApprovalView>,
    decisions: Vec<DecisionRecord>,
    rules: Value,
    approval_timeout_ms: u128,
    uptime_ms: u128,
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
    pub(super) fn new(
        rules: RuleSet,
        approval_timeout: Duration,
        max_events: usize,
        log: Option<mpsc::Sender<String>>,
        shutdown: CancellationToken,
    ) -> Arc<Shared> {
        let (push, _) = broadcast::channel(1024);
        Arc::new(Shared {
            rules,
            approval_timeout,
            max_events: max_events.max(1),
            state: Mutex::new(MonitorState::default()),
            push,
            log,
            shutdown,
            started: Instant::now(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, MonitorState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Cancelled when the monitor shuts down.
    pub(super) fn shutdown(&self) -> &CancellationToken {
        &self.shutdown
    }

    /// Blocks every pending approval ("the monitor is shutting down").
    pub(super) fn block_all_pending(&self) {
        let ids: Vec<String> = self.lock().pending.keys().cloned().collect();
        for id in ids {
            self.resolve(&id, Outcome::Shutdown);
        }
    }

    /// A receiver of everything pushed to the page from now on.
    pub(super) fn subscribe(&self) -> broadcast::Receiver<Push> {
        self.push.subscribe()
    }

    fn publish(&self, push: Push) {
        if let Some(log) = &self.log {
            let line = match &push {
                Push::Event(e) => serde_json::to_value(e).ok().map(|mut v| {
                    v["kind"] = "event".into();
                    v
                }),
                Push::GateDecision(d) => serde_json::to_value(d).ok().map(|mut v| {
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

    /// Takes one received event: stores it, updates its session and, for a
    /// `tool.pre_execute`, decides (holding the answer while a person decides).
    pub(super) async fn receive(self: &Arc<Self>, received: ReceivedEvent) -> Option<GateDecision> {
        let (stored, per_minute, pushes) = self.record(&received);
        for p in pushes {
            self.publish(p);
        }
        match received.event {
            Some(Event::PreExecute {
                call:
                    Call {
                        tool,
                        session_id,
                        call_id,
                    },
                args,
                session_stats,
                preview,
                ..
            }) => {
                let call = HeldCall {
                    event_seq: stored.seq,
                    tool,
                    session_id,
                    call_id,
                    args,
                    preview: preview.filter(Value::is_object),
                    tool_call_count: session_stats.tool_call_count.max(1),
                    calls_last_minute: per_minute.unwrap_or(1),
                };
                Some(self.clone().pre_execute(call).await)
            }
            _ => None,
        }
    }

    /// Stores an event, updates its session; returns the stored event and, for a
    /// `tool.pre_execute`, the session's calls in the last minute.
    fn record(&self, received: &ReceivedEvent) -> (StoredEvent, Option<u32>, Vec<Push>) {
        let now = Instant::now();
        let at = now_ms();
        let mut pushes = Vec::new();
        let mut state = self.lock();
        state.next_seq += 1;
        let stored = StoredEvent {
            seq: state.next_seq,
            received_at: at,
            event: received.raw.clone(),
        };
        state.events.push_back(stored.clone());
        while state.events.len() > self.max_events {
            state.events.pop_front();
        }
        pushes.push(Push::Event(stored.clone()));
        let mut per_minute = None;
        let Some(event) = received
            .event
            .as_ref()
            .filter(|e| !e.session_id().is_empty())
        else {
            return (stored, per_minute, pushes);
        };
        let base = event.base();
        let ts = if base.timestamp != 0 {
            base.timestamp
        } else {
            at
        };
        let id = event.session_id();
        let scope_calls = match event {
            Event::PreExecute { .. } => count_scopes(&mut state.recent_by_scope, id, now),
            _ => 0,
        };
        let session = state
            .sessions
            .entry(id.to_owned())
            .or_insert_with(|| SessionView::new(id, ts));
        if !base.project.is_empty() {
            session.project = base.project.clone();
        }
        if !base.directory.is_empty() {
            session.directory = base.directory.clone();
        }
        session.last_event_at = ts;
        match event {
            Event::SessionStarted { start_time, .. } => {
                session.state = "active";
                session.started_at = if *start_time != 0 { *start_time } else { ts };
            }
            Event::PreExecute {
                call: Call { tool, .. },
                session_stats,
                ..
            } => {
                session.state = "active";
                session.tool_call_count = match session_stats.tool_call_count {
                    0 => session.tool_call_count + 1,
                    n => n,
                };
                if session_stats.duration != 0 {
                    session.duration_ms = session_stats.duration;
                }
                if !tool.is_empty() {
                    session.unique_tools.insert(tool.clone());
                }
                session.recent_calls.push_back(now);
                while session
                    .recent_calls
                    .front()
                    .is_some_and(|t| now.duration_since(*t) > Duration::from_secs(60))
                {
                    session.recent_calls.pop_front();
                }
                let own = u32::try_from(session.recent_calls.len()).unwrap_or(u32::MAX);
                per_minute = Some(own.max(scope_calls));
            }
            Event::SessionError { error, .. } => {
                session.errors += 1;
                session.last_error = (!error.is_empty()).then(|| error.clone());
            }
            Event::SessionIdle { final_stats, .. } => {
                session.state = "idle";
                if final_stats.duration != 0 {
                    session.duration_ms = final_stats.duration;
                }
                if final_stats.total_tool_calls != 0 {
                    session.tool_call_count = final_stats.total_tool_calls;
                }
            }
            Event::PostExecute { .. } => {}
        }
        pushes.push(Push::Session(session.clone()));
        if state.sessions.len() > MAX_SESSIONS {
            evict_session(&mut state.sessions);
        }
        (stored, per_minute, pushes)
    }

    pub(super) fn rules_view(&self) -> Value {
        json!({
            "source": self.rules.source(),
            "default": self.rules.default_action(),
            "rules": self.rules.specs(),
        })
    }

    pub(super) fn events(&self) -> Vec<StoredEvent> {
        self.lock().events.iter().cloned().collect()
    }

    pub(super) fn sessions(&self) -> Vec<SessionView> {
        sessions_sorted(&self.lock())
    }

    pub(super) fn approvals(&self) -> Vec<ApprovalView> {
        approvals_sorted(&self.lock())
    }

    pub(super) fn decisions(&self) -> Vec<DecisionRecord> {
        self.lock().decisions.iter().cloned().collect()
    }

    pub(super) fn snapshot(&self) -> StateView {
        let state = self.lock();
        StateView {
            events: state.events.iter().cloned().collect(),
            sessions: sessions_sorted(&state),
            approvals: approvals_sorted(&state),
            decisions: state.decisions.iter().cloned().collect(),
            rules: self.rules_view(),
            approval_timeout_ms: self.approval_timeout.as_millis(),
            uptime_ms: self.started.elapsed().as_millis(),
        }
    }
}

/// A `tool.pre_execute` being decided.
struct HeldCall {
    event_seq: u64,
    tool: String,
    session_id: String,
    call_id: String,
    args: Value,
    preview: Option<Value>,
    tool_call_count: u64,
    calls_last_minute: u32,
}

/// The scopes beside its own session that a call's rate counts against, from apigate's session
/// id (`KEY/session-USER/mcp-…`, `monitor::monitor_session_id`): the key, and the user session
/// (through any key). An id without `/` (another plugin's, or apigate's key alone) has none.
fn rate_scopes(session_id: &str) -> Vec<String> {
    let mut parts = session_id.split('/');
    let (Some(key), Some(_)) = (parts.next(), parts.clone().next()) else {
        return Vec::new();
    };
    let mut scopes = vec![format!("key:{key}")];
    if let Some(user) = parts.find(|p| p.starts_with("session-")) {
        scopes.push(format!("user:{user}"));
    }
    scopes
}

/// Records a call at `now` in each of its rate scopes; the most calls any of them saw in the
/// last minute, this one included (0 with no scope). The map stays bounded.
fn count_scopes(
    scopes: &mut HashMap<String, VecDeque<Instant>>,
    session_id: &str,
    now: Instant,
) -> u32 {
    let minute = Duration::from_secs(60);
    let mut most = 0usize;
    for scope in rate_scopes(session_id) {
        let times = scopes.entry(scope).or_default();
        times.push_back(now);
        while times
            .front()
            .is_some_and(|t| now.duration_since(*t) > minute)
        {
            times.pop_front();
        }
        most = most.max(times.len());
    }
    if scopes.len() > 4 * MAX_SESSIONS {
        scopes.retain(|_, t| {
            t.back()
                .is_some_and(|last| now.duration_since(*last) <= minute)
        });
        while scopes.len() > 4 * MAX_SESSIONS {
            let oldest = scopes
                .iter()
                .min_by_key(|(_, t)| t.back().copied())
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => scopes.remove(&k),
                None => break,
            };
        }
    }
    u32::try_from(most).unwrap_or(u32::MAX)
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
