//! The call pipeline of `docs/design.md` over the [`Engine`]: (production) session token →
//! tool permission → rate limit → resolve the operation (and its permission) and validate
//! the arguments → agent-monitor gate → run → post-execute event, audit, metrics. One pass per
//! page: an `api_execute` with `pages` runs the pipeline again for each page after the first,
//! with the typed arguments [`Planned::next`] builds (never JSON parsed back), and ends as
//! one result (`result::finish`).

use std::time::Instant;

use serde_json::{Map, Value};

use super::args::Input;
use super::binary_out::BinaryOut;
use super::engine::{Access, Caller, Engine};
use super::error::ToolError;
use super::ops::{self, Planned, Prepared};
use super::output::Output;
use super::pass::{Named, Pass, Trace, tool_label};
use super::{page, paging, result};
use crate::apis::Apis;
use crate::auth::{Principal, choose_session_token, take_session_token};
use crate::monitor::{OperationRef, ToolCall};
use crate::store::Decision;
use crate::types::{Code, Tool, UnknownTool};

/// What a tool call produced before it is shaped by an adapter.
pub(crate) type ToolResult = Result<Output, ToolError>;

impl Engine {
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
            .call_once(
                caller,
                apis,
                &principal,
                tool,
                Input::Agent(args),
                &mut budget,
            )
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
            let args = match follow(apis, &pages, &budget, room.is_some_and(|r| filled > r)) {
                Ok(args) => args,
                Err(why) => {
                    stopped = Some(why);
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
                    Input::NextPage(Box::new(args)),
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
                Ok(Ran::Page(p))
                    if p.response.ok && pages.last().map(|l| &l.list) == Some(&p.list) =>
                {
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
        input: Input,
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
                    input,
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
        input: Input,
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
        let args_value = match (&self.monitor, &input) {
            (Some(_), Input::Agent(args)) => Value::Object(args.clone()),
            (Some(_), Input::NextPage(args)) => Value::Object(args.to_map()),
            (None, _) => Value::Null,
        };
        let parsed = ops::parse(&self.limits, &self.visibility, apis, principal, tool, input);
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
        let prepared = ops::prepare(
            &self.visibility,
            self.upload_limits(),
            apis,
            principal,
            parsed?,
        )?;
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
        let owner = principal
            .held_owner()
            .unwrap_or_else(|| caller.held_owner());
        let page_call = page::PageCall {
            identity: self.identity.as_deref(),
            binary: &self.binary,
            held: &self.held,
            max_value_bytes: self.limits.max_value_bytes,
            call_id,
            owner: &owner,
        };
        let result = self
            .run(
                apis,
                principal,
                prepared,
                page_call,
                &mut trace.sent,
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

impl Engine {
    /// Runs a validated call: `api_execute` fetches its (first) page, the others finish at
    /// once. Each step is handed the settings it reads.
    async fn run(
        &self,
        apis: &Apis,
        principal: &Principal,
        prepared: Prepared,
        call: page::PageCall<'_>,
        sent: &mut page::Sent,
        budget: &mut crate::upstream::CallBudget,
    ) -> Result<Ran, ToolError> {
        match prepared {
            Prepared::Execute(planned) if !planned.dry_run => {
                page::fetch(&call, apis, principal, planned, sent, budget)
                    .await
                    .map(|p| Ran::Page(Box::new(p)))
            }
            other => ops::done(
                &self.visibility,
                self.identity.as_deref(),
                apis,
                principal,
                other,
            )
            .await
            .map(Ran::Done),
        }
    }

    /// Where a call's bytes may come from and how many it may upload.
    fn upload_limits(&self) -> super::upload::UploadLimits<'_> {
        super::upload::UploadLimits {
            dir: self.upload_dir.as_deref(),
            max_request_bytes: self.limits.max_request_bytes,
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
        let parsed = ops::parse(
            &self.limits,
            &self.visibility,
            &apis,
            principal,
            Tool::Execute,
            Input::Agent(args),
        )?;
        match ops::prepare(
            &self.visibility,
            self.upload_limits(),
            &apis,
            principal,
            parsed,
        )? {
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

/// The typed arguments of the page after the last of `pages`, or why there is none to fetch:
/// the items fetched already fill the response (`full`), the budget cut the last page, the
/// API refused it, or it shows no next page this server can ask for.
fn follow(
    apis: &Apis,
    pages: &[page::Page],
    budget: &crate::upstream::CallBudget,
    full: bool,
) -> Result<super::args::ExecuteArgs, String> {
    let n = pages.len();
    if full {
        return Err(format!(
            "the items of the {n} pages fetched already fill the response \
             (--max-response-bytes): `next` goes on from the first item not shown"
        ));
    }
    // The last page was cut at the budget: no more.
    if let Some(over) = budget.over() {
        return Err(format!("page {n}: {over}"));
    }
    let Some(last) = pages.last() else {
        return Err("no page was fetched".to_string());
    };
    if !last.response.ok {
        return Err(format!(
            "page {n}: the API answered HTTP {}",
            last.response.status
        ));
    }
    match (&last.list, last.paging.as_ref().map(|p| &p.next)) {
        (Some(_), Some(paging::Next::Query(q))) => {
            Ok(last.planned.next(apis, q.clone(), 0, None, 1))
        }
        (_, Some(paging::Next::Unmapped(c))) => Err(format!("page {n}: {}", c.says())),
        _ if last.response.truncated => Err(format!(
            "page {n} is longer than this server reads (--max-read-bytes), so its next page \
             is not known: ask for smaller pages"
        )),
        (None, _) => Err(format!("page {n} holds no list to page through")),
        _ => Err("the API shows no next page".to_string()),
    }
}
