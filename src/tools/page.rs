//! One page of an `api_execute` call: sending the planned request with its credentials,
//! reading the answer whole (up to `--max-read-bytes`, scrubbed), its first items left out
//! (`skipItems`), and where the next page is (`paging`), as the arguments of the same
//! operation. The pipeline (`pipeline.rs`) fetches
//! each page as a call of its own; `result.rs` makes them one result.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::binary_out::{BinaryOptions, BinaryOut};
use super::credentials::{call_credentials, credential_sources};
use super::error::ToolError;
use super::ops::{Planned, send_failure};
use super::paging::{self, Next, Paging};
use super::select::Select;
use crate::apis::Apis;
use crate::auth::Principal;
use crate::auth::identity::Identity;
use crate::held::HeldResponses;
use crate::types::Code;
use crate::types::CredentialSource;
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
    /// Where the next page is and how to resume inside this one (a whole 2xx answer only).
    pub paging: Option<Paging>,
    /// Items left out at the start of the list (`skipItems`).
    pub skipped: usize,
    /// Items of the list after those left out.
    pub items: usize,
    /// The bytes of a binary answer, which travel beside the result (image or resource link).
    pub binary: Option<BinaryOut>,
}

impl Page {
    /// The `api_execute` arguments that fetch the page after this one, with the call's
    /// `select` and `pages`: what the result's `next` shows.
    pub(crate) fn next_args(
        &self,
        apis: &Apis,
        select: Option<&Select>,
        pages: usize,
    ) -> Option<Map<String, Value>> {
        match &self.paging.as_ref()?.next {
            Next::Query(q) => Some(
                self.planned
                    .next(apis, q.clone(), 0, select.cloned(), pages)
                    .to_map(),
            ),
            _ => None,
        }
    }
}

/// What sending a page reads of the server's settings, and which call it is for.
pub(crate) struct PageCall<'a> {
    /// Signs the identity assertion into the request (`--identity-header`).
    pub identity: Option<&'a Identity>,
    /// How a binary answer comes back (`--max-image-bytes`, `--download-dir`).
    pub binary: &'a BinaryOptions,
    /// Where a binary answer is held for `resources/read`.
    pub held: &'a HeldResponses,
    /// `--max-value-bytes`: the longest value the next page's query may carry.
    pub max_value_bytes: usize,
    /// The call's id (the monitor's events, the audit row, the identity assertion).
    pub call_id: &'a str,
    /// Who a held binary answer belongs to.
    pub owner: &'a str,
}

/// What a page's request carried, for the audit row.
#[derive(Default)]
pub(crate) struct Sent {
    /// The upstream's status.
    pub status: Option<u16>,
    /// Where the credentials the request carried came from.
    pub sources: Vec<CredentialSource>,
}

/// Sends a planned `api_execute` request and reads its answer (one page) within the call's
/// `budget` (a page that would take more is cut, and `budget.over()` says why). A binary answer is
/// held for the call's owner or made an image (`binary_out::deliver`), its bytes kept beside
/// the page. `sent` learns the status and the credentials' sources, a failed call's too.
pub(super) async fn fetch(
    call: &PageCall<'_>,
    apis: &Apis,
    principal: &Principal,
    planned: Box<Planned>,
    sent: &mut Sent,
    budget: &mut CallBudget,
) -> Result<Page, ToolError> {
    let api = &apis.list[planned.api];
    let op = &api.spec.operations[planned.op];
    let credentials = call_credentials(
        call.identity,
        apis,
        api,
        principal,
        op,
        &planned.request,
        call.call_id,
    )?;
    sent.sources = credential_sources(api, &credentials);
    let fetched = api
        .upstream
        .fetch_within(&planned.request, &credentials, budget)
        .await
        .map_err(|e| send_failure(api, op, &planned.request, e))?;
    let mut response = fetched.response;
    sent.status = Some(response.status);
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
        Some(b) => {
            super::binary_out::deliver(call.binary, call.held, call.owner, &b, &mut response.body)
                .await
        }
        None => None,
    };
    let whole = response.ok && !response.truncated;
    let list = whole
        .then(|| {
            paging::declared_list(op)
                .filter(|l| response.body.pointer(l).is_some_and(Value::is_array))
                .or_else(|| crate::upstream::list_pointer(&response.body))
                .or_else(|| paging::any_list(&response.body))
        })
        .flatten();
    // `skipItems`: the first items of the list, left out before anything else sees them.
    let mut skipped = 0;
    let mut items = 0;
    if let Some(Value::Array(a)) = list.as_deref().and_then(|l| response.body.pointer_mut(l)) {
        skipped = planned.skip_items.min(a.len());
        a.drain(..skipped);
        items = a.len();
    }
    let paging = whole.then(|| {
        let mut paging = paging::paging(
            op,
            planned.request.url(),
            &planned.call.query,
            &response.headers,
            &response.body,
            list.as_deref(),
        );
        if let Next::Query(q) = &paging.next {
            paging.next = valid_next(&api.spec, &planned, q.clone());
        }
        paging.next = paging::guard(paging.next, &fetched.secrets, call.max_value_bytes);
        paging
    });
    // A header is shown up to 2 KiB (a Link of twenty thousand links is read above, whole).
    for v in response.headers.values_mut() {
        if let Value::String(s) = v
            && s.len() > MAX_HEADER_SHOWN
        {
            let mut end = MAX_HEADER_SHOWN;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            s.truncate(end);
            s.push('…');
        }
    }
    Ok(Page {
        planned,
        response,
        secrets: fetched.secrets,
        list,
        paging,
        skipped,
        items,
        binary,
    })
}

/// The longest header value a result shows.
const MAX_HEADER_SHOWN: usize = 2048;

/// The next page's `query` for the same call, coerced and validated as `plan` does, so that a
/// `next` is always a call that passes; else why not.
fn valid_next(spec: &crate::spec::Spec, planned: &Planned, query: Map<String, Value>) -> Next {
    let op = &spec.operations[planned.op];
    let mut call = CallArgs {
        path_params: planned.call.path_params.clone(),
        query,
        headers: planned.call.headers.clone(),
        ..CallArgs::default()
    };
    let shown = Value::Object(call.query.clone()).to_string();
    let violations = super::ops::validate(spec, op, &mut call);
    if let Some(v) = violations.first() {
        return Next::Unmapped(paging::Continuation::new(
            "query",
            &shown,
            format!(
                "the next page's query fails the operation's schema at {}: {}",
                v.pointer, v.message
            ),
        ));
    }
    if call.query == planned.call.query {
        return Next::Unmapped(paging::Continuation::new(
            "query",
            &shown,
            "the next page's query is this page's: following it would loop".into(),
        ));
    }
    Next::Query(call.query)
}
