//! One page of an `api_execute` call: sending the planned request with its credentials,
//! reading the answer whole (up to `--max-read-bytes`, scrubbed), and where the next page is
//! (`pages.rs`), as the arguments of the same operation. The pipeline (`tools/mod.rs`) fetches
//! each page as a call of its own; `result.rs` makes them one result.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::credentials::{call_credentials, credential_sources};
use super::ops::{Planned, send_failure};
use super::{Code, Engine, ToolError};
use crate::apis::Apis;
use crate::auth::Principal;
use crate::upstream::{CallArgs, CallBudget, InFlight, Secrets, UpstreamResponse};

/// The bytes an `api_execute` call may hold (`--max-call-bytes`: every page read, decoded
/// and parsed, and its `select` result) and all calls together (`--max-bytes-in-flight`).
#[derive(Debug, Clone)]
pub struct Budgets {
    pub max_call_bytes: usize,
    pub in_flight: InFlight,
}

impl Default for Budgets {
    fn default() -> Budgets {
        Budgets {
            max_call_bytes: crate::upstream::DEFAULT_MAX_CALL_BYTES,
            in_flight: InFlight::default(),
        }
    }
}

impl Budgets {
    /// A new call's budget.
    pub(crate) fn call(&self) -> CallBudget {
        CallBudget::new(self.max_call_bytes, Some(self.in_flight.clone()))
    }
}

/// One page of an `api_execute` call as the upstream answered it: the body whole (up to
/// `--max-read-bytes`), before `select` and the budget ([`super::result::finish`]).
pub struct Page {
    pub planned: Box<Planned>,
    pub response: UpstreamResponse,
    /// The credentials the body was scrubbed of, for cutting it.
    pub secrets: Arc<Secrets>,
    /// The pointer of the body's list, if it is one.
    pub list: Option<String>,
    /// The query of the next page, when the response shows one.
    pub next: Option<Map<String, Value>>,
    /// The bytes of a binary answer, which travel beside the result (image or resource link).
    pub binary: Option<super::BinaryOut>,
}

impl Page {
    /// The `api_execute` arguments that fetch the page after this one: with the call's
    /// `select` and `pages` (what the result's `next` shows), or with neither, as one raw page
    /// (how the pipeline fetches the following pages itself).
    pub(crate) fn next_args(
        &self,
        apis: &Apis,
        select: Option<&str>,
        pages: usize,
    ) -> Option<Map<String, Value>> {
        let query = self.next.clone()?;
        let p = &self.planned;
        let mut args = Map::new();
        args.insert("operationId".into(), Value::String(apis.shown_id(p.at())));
        if !p.call.path_params.is_empty() {
            args.insert(
                "pathParams".into(),
                Value::Object(p.call.path_params.clone()),
            );
        }
        args.insert("query".into(), Value::Object(query));
        if !p.call.headers.is_empty() {
            args.insert("headers".into(), Value::Object(p.call.headers.clone()));
        }
        if let Some(a) = &p.call.accept {
            args.insert("accept".into(), Value::String(a.clone()));
        }
        if let Some(s) = select {
            args.insert("select".into(), Value::String(s.to_string()));
        }
        if pages > 1 {
            args.insert("pages".into(), Value::from(pages));
        }
        Some(args)
    }
}

/// Sends a planned `api_execute` request and reads its answer (one page) within the call's
/// `budget` (a page that would take more is cut, and `budget.over()` says why). A binary answer is
/// held for `owner` or made an image (`binary_out::deliver`), its bytes kept beside the page.
#[allow(clippy::too_many_arguments)]
pub(super) async fn fetch(
    engine: &Engine,
    apis: &Apis,
    principal: &Principal,
    planned: Box<Planned>,
    call_id: &str,
    upstream_status: &mut Option<u16>,
    sources: &mut Vec<String>,
    owner: &str,
    budget: &mut CallBudget,
) -> Result<Page, ToolError> {
    let api = &apis.list[planned.api];
    let op = &api.spec.operations[planned.op];
    let credentials =
        call_credentials(engine, apis, api, principal, op, &planned.request, call_id)?;
    *sources = credential_sources(api, &credentials);
    let fetched = api
        .upstream
        .fetch_within(&planned.request, &credentials, budget)
        .await
        .map_err(|e| send_failure(api, op, &planned.request, e))?;
    let mut response = fetched.response;
    *upstream_status = Some(response.status);
    metrics::counter!("apigate_upstream_responses_total", "status" => response.status.to_string())
        .increment(1);
    if response.status >= 500 {
        let fitted = crate::upstream::fit(
            std::mem::take(&mut response.body),
            api.upstream.config().max_body_bytes,
            !response.truncated,
            &fetched.secrets,
        );
        response.body = fitted.body;
        response.truncated = fitted.truncated;
        let value = serde_json::to_value(&response).unwrap_or_default();
        let mut e = ToolError::new(
            Code::UpstreamError,
            format!(
                "the API answered HTTP {} for {} {}",
                response.status, op.method, op.path
            ),
        );
        if let Value::Object(m) = value {
            e.details.extend(m);
        }
        return Err(e);
    }
    let binary = match response.binary.take() {
        Some(b) => super::binary_out::deliver(engine, owner, &b, &mut response.body).await,
        None => None,
    };
    let list = if response.ok && !response.truncated {
        crate::upstream::list_pointer(&response.body)
    } else {
        None
    };
    let next = if response.ok && !response.truncated {
        super::pages::next_query(
            op,
            planned.request.url(),
            &planned.call.query,
            &response.headers,
            &response.body,
            list.as_deref(),
        )
        .and_then(|q| valid_query(&api.spec, &planned, q))
    } else {
        None
    };
    Ok(Page {
        planned,
        response,
        secrets: fetched.secrets,
        list,
        next,
        binary,
    })
}

/// `query` for the same call, if the operation accepts it: coerced and validated as `plan`
/// does, so that a `next` is always a call that passes.
fn valid_query(
    spec: &crate::spec::Spec,
    planned: &Planned,
    query: Map<String, Value>,
) -> Option<Map<String, Value>> {
    let op = &spec.operations[planned.op];
    let mut call = CallArgs {
        path_params: planned.call.path_params.clone(),
        query,
        headers: planned.call.headers.clone(),
        ..CallArgs::default()
    };
    if !super::ops::validate(spec, op, &mut call).is_empty() {
        return None;
    }
    (call.query != planned.call.query).then_some(call.query)
}
