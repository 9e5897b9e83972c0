//! Deciding a `tool.pre_execute`: by the rules at once, or held as an approval until a person
//! decides, it times out, the caller goes away or the monitor stops; each ending recorded as a
//! decision.

use std::sync::Arc;

use tokio::sync::oneshot;

use super::{
    ApprovalView, DecisionRecord, HeldCall, MAX_DECISIONS, MonitorState, Pending, Push, Shared,
    call_summary, now_ms,
};
use crate::monitor::protocol::GateDecision;
use crate::monitor::rules::{Action, RuleFacts};

/// How a held approval ended.
#[derive(Debug, Clone)]
pub(super) enum Outcome {
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

    fn decision(&self) -> GateDecision {
        match self {
            Outcome::Approved => GateDecision::allow(),
            Outcome::Denied(Some(r)) if !r.trim().is_empty() => {
                GateDecision::block(format!("denied by a person: {}", r.trim()))
            }
            Outcome::Denied(_) => GateDecision::block("denied by a person"),
            Outcome::TimedOut => GateDecision::block("approval timed out"),
            Outcome::Abandoned => {
                GateDecision::block("the caller disconnected before a person decided")
            }
            Outcome::Shutdown => GateDecision::block("the monitor is shutting down"),
        }
    }

    /// The reason a decision record shows.
    fn reason(&self) -> String {
        match self {
            Outcome::Approved => "approved by a person".to_owned(),
            other => other.decision().reason.unwrap_or_default(),
        }
    }
}

impl Shared {
    /// Decides a `tool.pre_execute` by the rules; a call that needs approval is held until a
    /// person decides, the approval times out, the caller goes away or the monitor stops.
    pub(super) async fn pre_execute(self: Arc<Self>, call: HeldCall) -> GateDecision {
        let verdict = self.rules.evaluate(&RuleFacts {
            tool: &call.tool,
            args: &call.args,
            tool_call_count: call.tool_call_count,
            calls_last_minute: call.calls_last_minute,
        });
        if verdict.action != Action::RequireApproval {
            let block = verdict.action == Action::Block;
            let record = DecisionRecord {
                event_seq: call.event_seq,
                at: now_ms(),
                summary: call_summary(&call.tool, &call.args),
                session_id: call.session_id,
                call_id: call.call_id,
                tool: call.tool,
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
                let mut state = self.lock();
                self.push_decision(&mut state, record)
            };
            for p in pushes {
                self.publish(p);
            }
            return if block {
                GateDecision::block(verdict.reason)
            } else {
                GateDecision::allow()
            };
        }

        let (tx, mut rx) = oneshot::channel();
        let created = now_ms();
        let view = {
            let mut state = self.lock();
            state.next_approval += 1;
            let view = ApprovalView {
                id: format!("ap-{}", state.next_approval),
                status: "pending",
                created_at: created,
                expires_at: created
                    + i64::try_from(self.approval_timeout.as_millis()).unwrap_or(i64::MAX / 2),
                session_id: call.session_id,
                call_id: call.call_id,
                tool: call.tool,
                args: call.args,
                preview: call.preview,
                rule: verdict.rule,
                reason: verdict.reason,
                event_seq: call.event_seq,
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
        self.publish(Push::Approval(view.clone()));
        let _guard = PendingGuard {
            shared: self.clone(),
            id: view.id.clone(),
        };
        let outcome = tokio::select! {
            r = &mut rx => r.ok(),
            () = tokio::time::sleep(self.approval_timeout) => {
                self.resolve(&view.id, Outcome::TimedOut);
                rx.await.ok()
            }
            () = self.shutdown.cancelled() => {
                self.resolve(&view.id, Outcome::Shutdown);
                rx.await.ok()
            }
        };
        outcome.unwrap_or(Outcome::Abandoned).decision()
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
        pushes.push(Push::GateDecision(d));
        pushes
    }

    /// A person approves or denies a pending approval; `None` if it is not pending (already
    /// decided, timed out, or unknown).
    pub(in crate::monitor::server) fn decide(
        &self,
        id: &str,
        approve: bool,
        reason: Option<String>,
    ) -> Option<ApprovalView> {
        let outcome = if approve {
            Outcome::Approved
        } else {
            Outcome::Denied(reason)
        };
        self.resolve(id, outcome)
    }

    /// Ends a pending approval, if still pending: records the decision, tells the page and
    /// wakes the held request. Whoever resolves first wins.
    pub(super) fn resolve(&self, id: &str, outcome: Outcome) -> Option<ApprovalView> {
        let (view, pushes) = {
            let mut state = self.lock();
            let pending = state.pending.remove(id)?;
            let mut view = pending.view;
            view.status = outcome.status();
            let record = DecisionRecord {
                event_seq: view.event_seq,
                at: now_ms(),
                session_id: view.session_id.clone(),
                call_id: view.call_id.clone(),
                tool: view.tool.clone(),
                summary: call_summary(&view.tool, &view.args),
                block: outcome.decision().block,
                reason: outcome.reason(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_block_except_approval() {
        assert!(!Outcome::Approved.decision().block);
        assert_eq!(Outcome::Approved.reason(), "approved by a person");
        assert_eq!(
            Outcome::TimedOut.decision(),
            GateDecision::block("approval timed out")
        );
        assert_eq!(
            Outcome::Denied(Some("not today".into())).reason(),
            "denied by a person: not today"
        );
    }
}
