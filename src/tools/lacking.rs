//! What a caller lacks for a call before it runs: the features the tool needs, and for
//! `api_execute` those of the operation it names (its `x-required-features`, the permission
//! rules, and with several APIs one naming its API), that the caller's grants do not hold.
//! The HTTP layer asks this of a signed-in person's `tools/call` and, when more scopes would
//! grant what is lacking, answers `403 insufficient_scope` instead of running the call
//! (step-up authorization; `http/step_up.rs`), recording the refusal here as the pipeline
//! records its own. Nothing here knows about scopes.

use serde_json::{Map, Value};

use super::args::Target;
use super::engine::Engine;
use super::resolve::find;
use crate::apis::{Apis, OpRef};
use crate::auth::Principal;
use crate::spec::Method;
use crate::store::Decision;
use crate::types::{Code, Tool};

/// What a call lacks, found before it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lacking {
    pub tool: Tool,
    /// The operation the call names, when it names one the caller may be refused.
    pub operation: Option<OpRef>,
    /// One entry per requirement not met, each the features any one of which meets it, the
    /// tool's first: `["apigate.execute"]`, `["billing.write"]`, `["petstore.execute",
    /// "petstore:addPet"]`.
    pub features: Vec<Vec<String>>,
}

impl Lacking {
    /// The first feature lacking, as a `FORBIDDEN` tool error's `missing` names it.
    pub fn first(&self) -> &str {
        self.features
            .first()
            .and_then(|f| f.first())
            .map(String::as_str)
            .unwrap_or_default()
    }
}

/// The arguments naming the operation: all `api_execute`'s permission depends on.
const TARGET_ARGUMENTS: [&str; 4] = ["operationId", "method", "path", "api"];

impl Engine {
    /// What `principal` lacks for calling `tool` with `args`, or `None` when nothing (the
    /// call runs, and any refusal is the pipeline's), when the operation cannot be told from
    /// the arguments (the pipeline says why), or when the caller is refused for being
    /// read-only, which no feature changes. Reads only the arguments naming the operation,
    /// each within the size limits the pipeline applies.
    pub fn lacking(
        &self,
        principal: &Principal,
        tool: Tool,
        args: &Map<String, Value>,
    ) -> Option<Lacking> {
        let mut features = Vec::new();
        if !principal.features.allows(tool.feature()) {
            features.push(vec![tool.feature().to_string()]);
        }
        let mut operation = None;
        if tool == Tool::Execute {
            let apis = self.apis();
            if let Some(r) = self.named_operation(&apis, principal, args)
                && let (Some(api), Some(op)) = (apis.list.get(r.api), apis.operation(r))
            {
                let missing = principal.missing_to_execute(
                    op.method,
                    &op.path,
                    &op.required_features,
                    &api.rules,
                )?;
                features.extend(missing.into_iter().map(|f| vec![f.to_string()]));
                if !apis.api_allows(principal, r)
                    && let Some(names) = apis.api_features(r)
                {
                    features.push(names.to_vec());
                }
                operation = Some(r);
            }
        }
        (!features.is_empty()).then_some(Lacking {
            tool,
            operation,
            features,
        })
    }

    /// The operation `args` name, as the pipeline would find it for `principal`; `None` when
    /// they name none (or too long a name: the pipeline refuses it).
    fn named_operation(
        &self,
        apis: &Apis,
        principal: &Principal,
        args: &Map<String, Value>,
    ) -> Option<OpRef> {
        let longest = self.limits.max_path_bytes.max(self.limits.max_value_bytes);
        let mut target = Map::new();
        for name in TARGET_ARGUMENTS {
            match args.get(name) {
                // Not copied: `check_target` would refuse it.
                Some(Value::String(s)) if s.len() > longest => return None,
                // `method` in any case, as the pipeline reads it.
                Some(Value::String(m)) if name == "method" => {
                    let method = Method::parse(m)?;
                    target.insert(name.into(), Value::String(method.as_str().into()));
                }
                Some(Value::Null) | None => {}
                Some(v) => {
                    target.insert(name.into(), v.clone());
                }
            }
        }
        let target: Target = serde_json::from_value(Value::Object(target)).ok()?;
        self.limits.check_target(&target).ok()?;
        let found = find(&self.visibility, apis, principal, &target).ok()??;
        Some(found.at())
    }

    /// Records a call refused before it ran for what its caller lacks (the HTTP layer's
    /// step-up): the metrics and the audit row (`denied`, `FORBIDDEN`) the pipeline writes
    /// for its own refusals.
    pub async fn record_lacking(&self, principal: &Principal, lacking: &Lacking) {
        metrics::counter!("apigate_tool_calls_total", "tool" => lacking.tool.name(), "outcome" => Code::Forbidden.as_str())
            .increment(1);
        let Some(auth) = &self.auth else {
            return;
        };
        let mut entry = principal.audit_entry(lacking.tool.name(), Decision::Denied);
        let apis = self.apis();
        if let Some(r) = lacking.operation
            && let Some(op) = apis.operation(r)
        {
            entry.operation = Some(apis.shown_id(r));
            entry.method = Some(op.method.to_string());
            entry.path = Some(op.path.clone());
        }
        entry.error_code = Some(Code::Forbidden);
        auth.record_audit(entry).await;
    }
}
