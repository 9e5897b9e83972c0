//! One pass of the pipeline as its audit row and metrics see it: what the row records,
//! filled in as the pipeline learns it ([`Trace`]), the tool's name as the log may show it
//! ([`tool_label`]), and the row written even when the pass is dropped before it ends
//! ([`Pass`]).

use std::time::Instant;

use super::engine::{Caller, Engine};
use super::error::ToolError;
use super::page;
use crate::apis::Apis;
use crate::auth::{KeyPrincipal, Principal};
use crate::store::Decision;
use crate::types::{Code, Tool, UnknownTool};

/// The audit log's and the metrics' name for a tool that is not one of the three.
pub const UNKNOWN_TOOL: &str = "unknown";

/// The tool a call names, as the adapter parsed it: one of the three, or a name the pipeline
/// refuses with `UNKNOWN_TOOL` (after the session check, as any call).
pub(crate) type Named = Result<Tool, UnknownTool>;

/// What the audit row records about a call, filled in as the pipeline learns it.
#[derive(Default)]
pub(super) struct Trace {
    /// The operation the arguments name (its index in the spec).
    pub(super) operation: Option<crate::apis::OpRef>,
    /// The upstream's status and where the credentials the call sent came from.
    pub(super) sent: page::Sent,
}

/// A name the agent chose is never stored or printed: any name but the three is `unknown`,
/// and the audit row says only how long it was.
pub(super) fn tool_label(tool: &Named) -> &'static str {
    match tool {
        Ok(t) => t.name(),
        Err(_) => UNKNOWN_TOOL,
    }
}

/// One pass of the pipeline as its audit row sees it. Dropped before it `ended` (the call's
/// future was dropped: its client went away, or the drain timeout cut it), it writes the row
/// anyway, through the audit writer's queue, with `CANCELLED` ([`Code::Cancelled`]): a call that may have reached the API
/// is never missing from the audit log.
pub(super) struct Pass<'a> {
    pub(super) engine: &'a Engine,
    pub(super) caller: &'a Caller,
    pub(super) apis: &'a Apis,
    pub(super) principal: &'a Result<Principal, ToolError>,
    pub(super) tool: &'a Named,
    pub(super) started: Instant,
    pub(super) started_at: chrono::DateTime<chrono::Utc>,
    pub(super) call_id: uuid::Uuid,
    pub(super) trace: Trace,
    pub(super) ended: bool,
}

impl Pass<'_> {
    pub(super) fn audit_entry(
        &mut self,
        decision: Decision,
        code: Option<Code>,
    ) -> crate::store::AuditEntry {
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
        entry.upstream_status = trace.sent.status;
        entry.credential_sources = trace.sent.sources;
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
