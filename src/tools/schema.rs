//! `api_schema`: one operation as the caller may call it, compact by default or in full, or one
//! part of it whole (`detail`); where its calls really go, and which of its credentials the
//! server supplies (they leave `parameters`, and `security` says so).

use serde_json::{Value, json};

use super::args::SchemaDetail;
use super::error::ToolError;
use super::output::{Output, SchemaPart, SchemaResult};
use crate::apis::{Apis, OpRef};
use crate::auth::Principal;
use crate::spec::{Detail, Operation, Violation};

/// Runs `api_schema` on the operation `r`.
pub(super) fn schema(
    apis: &Apis,
    principal: &Principal,
    r: OpRef,
    detail: SchemaDetail,
) -> Result<Output, ToolError> {
    match detail {
        SchemaDetail::Part(path) => part(apis, r, path),
        SchemaDetail::View(detail) => view(apis, principal, r, detail),
    }
}

/// One part of the operation, whole.
fn part(apis: &Apis, r: OpRef, path: String) -> Result<Output, ToolError> {
    let api = &apis.list[r.api];
    let op = &api.spec.operations[r.op];
    let part = api.spec.describe_part(op, &path).map_err(|message| {
        ToolError::invalid(
            format!("{message}; or leave `detail` out for the whole operation, shortened"),
            vec![Violation {
                pointer: "/detail".into(),
                message,
            }],
        )
    })?;
    Ok(Output::SchemaPart(Box::new(SchemaPart {
        operation_id: apis.shown_id(r),
        method: op.method,
        path: op.path.clone(),
        detail: path,
        part,
    })))
}

/// The operation's view, compact or full.
fn view(apis: &Apis, principal: &Principal, r: OpRef, detail: Detail) -> Result<Output, ToolError> {
    let api = &apis.list[r.api];
    let op = &api.spec.operations[r.op];
    let mut operation = api.spec.describe(op, detail);
    // Where calls really go: `--upstream` replaces the spec's server.
    if operation.server_url.is_some() {
        operation.server_url = crate::upstream::server_url(api.upstream.config(), &api.spec, op)
            .or(operation.server_url);
    }
    if apis.qualified() {
        operation.operation_id = apis.shown_id(r);
    }
    let to = super::credentials::call_api(apis, api);
    if let Some(security) = security_view(api, to, principal, op, detail) {
        operation.security = Some(security);
    }
    // A credential parameter a configured credential stands for is not the agent's to
    // give: it leaves `parameters`, and `security` says the server supplies it.
    let used = super::credentials::credential_params(apis, api, principal, op);
    if let Some(shown) = super::credentials::supplied_view(&used) {
        operation.parameters.retain(|v| {
            !used.iter().any(|c| {
                c.supplied && c.param.location.as_str() == v.location && c.param.name == v.name
            })
        });
        let security = operation.security.get_or_insert_with(|| {
            json!({"supplied": true, "note": "apigate adds these credentials to the call; \
                do not send them yourself"})
        });
        if let Value::Object(fields) = security {
            fields.insert("suppliedParameters".into(), shown);
        }
    }
    let select = operation.outline.as_ref().and_then(super::select::lesson);
    Ok(Output::Schema(Box::new(SchemaResult {
        operation,
        api: apis.qualified().then(|| api.name.clone()),
        select,
    })))
}

/// `api_schema`'s `security`: the alternatives the operation accepts (any one will do), each
/// scheme with where its credential goes and whether apigate supplies it. The agent never
/// sends credentials itself (it may not set `Authorization`, `Cookie` or a configured header).
fn security_view(
    api: &crate::apis::Api,
    to: crate::auth::session_upstream::CallApi<'_>,
    principal: &Principal,
    op: &Operation,
    detail: Detail,
) -> Option<Value> {
    let alternatives = crate::spec::security_alternatives(op.security.as_ref())?;
    // Only the headers stored for this API count: the others never go to it.
    let supplied = |scheme: &str| super::credentials::scheme_supplied(api, principal, to, scheme);
    if alternatives.is_empty() || alternatives.iter().any(Vec::is_empty) {
        return Some(json!({"needed": false}));
    }
    let mut any = false;
    let shown: Vec<Value> = alternatives
        .iter()
        .map(|alt| {
            let mut all = true;
            let schemes: Vec<Value> = alt
                .iter()
                .map(|name| {
                    let mut v = match api.spec.security_schemes.get(name) {
                        Some(k) => k.describe(),
                        None => json!({"type": "undefined in the spec"}),
                    };
                    let ok = supplied(name);
                    all &= ok;
                    v["scheme"] = Value::String(name.clone());
                    v["supplied"] = Value::Bool(ok);
                    v
                })
                .collect();
            any |= all;
            Value::Array(schemes)
        })
        .collect();
    // Credentials apigate supplies are all an agent needs to know of them (the compact view).
    if any && detail == Detail::Compact {
        return Some(json!({"needed": true, "supplied": true}));
    }
    Some(json!({
        "needed": true,
        "alternatives": shown,
        "supplied": any,
        "note": if any {
            "apigate adds these credentials to the call; do not send them yourself"
        } else {
            "apigate has no credential for any alternative: the API will likely refuse the call \
             (401 or 403); the operator can add one (--upstream-credential SCHEME=VALUE)"
        },
    }))
}
