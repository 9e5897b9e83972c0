//! `api_execute`'s result from the pages it fetched: their lists joined into one, `select`
//! applied to the body (2xx only), the body fitted to the response budget (`upstream::fit`:
//! whole items of a list, else a valid JSON prefix), and what the agent needs to go on: the
//! `cut`, one `note` sentence, the `next` call's arguments and, with `pages`, how many were
//! fetched and why it stopped. Pure: the pages were fetched by the pipeline (`pipeline.rs`).

use serde_json::{Map, Value};

use super::error::ToolError;
use super::output::{ExecuteResult, Output, PagesFetched};
use super::page::Page;
use super::paging::{self, Next, Resume};
use super::select::Room;
use crate::apis::Apis;
use crate::types::Code;
use crate::upstream::{CallBudget, Cut, fit};

/// The result of a call from its pages (at least one; the later ones are 2xx pages of the
/// first one's list). `stopped` says why fewer pages than asked were fetched. `select` runs
/// within what is left of the call's `budget`, on the joined body itself (not a copy), and
/// its result is scrubbed of the call's credentials again: pieces the scrubber passed, joined
/// or reversed by the expression, are a credential once more.
pub fn finish(
    apis: &Apis,
    mut pages: Vec<Page>,
    stopped: Option<String>,
    budget: &mut CallBudget,
) -> Result<Output, ToolError> {
    let fetched = pages.len();
    let Some(mut last) = pages.pop() else {
        return Err(ToolError::new(Code::Internal, "no page was fetched"));
    };
    // What the call asked for is on its first page (the later ones are fetched as one raw
    // page each).
    let (select, asked, at) = match pages.first_mut() {
        Some(f) => (f.planned.select.take(), f.planned.pages, f.planned.at()),
        None => (
            last.planned.select.take(),
            last.planned.pages,
            last.planned.at(),
        ),
    };
    let api = &apis.list[at.api];
    let op = &api.spec.operations[at.op];
    let select = select.as_ref();
    // Where each page's items start in the joined list, and how to resume inside it.
    let spans: Vec<Span> = pages
        .iter()
        .chain(std::iter::once(&last))
        .map(|p| Span {
            query: p.planned.call.query.clone(),
            skipped: p.skipped,
            items: p.items,
            resume: p.paging.as_ref().map_or(Resume::Skip, |g| g.resume.clone()),
        })
        .collect();
    // The items' cursors (Stripe's ids), read before `select` takes the body.
    let keys: Vec<Value> = match spans.iter().find_map(|s| match &s.resume {
        Resume::AfterItem { key, .. } => Some(*key),
        _ => None,
    }) {
        Some(key) => pages
            .iter()
            .chain(std::iter::once(&last))
            .filter_map(|p| p.response.body.pointer(p.list.as_deref()?)?.as_array())
            .flatten()
            .map(|i| i.get(key).cloned().unwrap_or(Value::Null))
            .collect(),
        None => Vec::new(),
    };
    // The later pages' items join the first's, in order, under the last page's envelope
    // (its `has_more` and cursor are the current ones).
    let mut joined: Vec<Value> = Vec::new();
    let mut duration_ms = last.response.duration_ms.unwrap_or(0);
    for p in pages.iter_mut() {
        duration_ms = duration_ms.saturating_add(p.response.duration_ms.unwrap_or(0));
        if let Some(Value::Array(items)) = p
            .list
            .as_deref()
            .and_then(|l| p.response.body.pointer_mut(l))
        {
            joined.append(items);
        }
    }
    let next = last.next_args(apis, select, asked);
    let continuation = match last.paging.as_ref().map(|p| &p.next) {
        Some(Next::Unmapped(c)) => Some(c.clone()),
        _ => None,
    };
    let Page {
        planned: last_planned,
        mut response,
        secrets,
        list,
        ..
    } = last;
    response.duration_ms = Some(duration_ms);
    if !joined.is_empty()
        && let Some(Value::Array(items)) =
            list.as_deref().and_then(|l| response.body.pointer_mut(l))
    {
        joined.append(items);
        *items = joined;
    }
    let total_items: usize = spans.iter().map(|s| s.items).sum();
    let whole = !response.truncated;
    let mut matched_nothing = false;
    // Whether the n-th element of what is shown is the n-th item of the pages.
    let mut item_wise = list.is_some();
    if let Some(s) = select
        && response.ok
    {
        let room = Room {
            json_bytes: api.upstream.config().max_read_bytes,
            memory: budget.left(),
        };
        response.body = s
            .apply(std::mem::take(&mut response.body), room)
            .map_err(|e| {
                e.to_tool_error()
                    .with("status", Value::from(response.status))
            })?;
        secrets.redact_value(&mut response.body);
        matched_nothing = response.body.is_null();
        item_wise = list.as_deref().is_some_and(|l| s.item_wise(l))
            && response
                .body
                .as_array()
                .is_some_and(|a| a.len() == total_items);
        response.keep_acted_on();
    }
    let fitted = fit(
        std::mem::take(&mut response.body),
        api.upstream.config().max_body_bytes,
        whole,
        &secrets,
    );
    response.body = fitted.body;
    response.truncated = fitted.truncated;
    // After a cut, `next` starts at the first item not shown: by the API's own cursor or
    // offset where it has one, else the same page again with the items shown skipped.
    let listed = |c: &Cut| match select {
        Some(_) => c.pointer.is_empty(),
        None => list.as_deref() == Some(c.pointer.as_str()),
    };
    let get = op.method == crate::spec::Method::Get;
    let (next, resumes) = match &fitted.cut {
        Some(c) if get && item_wise && listed(c) && c.total == total_items => {
            let (k, index) = locate(&spans, c.shown);
            let span = &spans[k];
            let (query, skip) = paging::resume(
                &span.resume,
                &span.query,
                span.skipped,
                index,
                c.shown.checked_sub(1).and_then(|i| keys.get(i)),
            );
            let args = last_planned.next(apis, query, skip, select.cloned(), asked);
            (Some(args.to_map()), true)
        }
        Some(_) => (next, false),
        None => (next, true),
    };
    let note = note(
        budget.over().map(ToString::to_string),
        matched_nothing,
        whole,
        fitted.truncated,
        fitted.cut.as_ref(),
        select.is_some(),
        next.is_some().then_some(resumes),
        continuation.as_ref(),
    );
    Ok(Output::Execute(Box::new(ExecuteResult {
        response,
        cut: fitted.cut,
        note,
        next,
        continuation,
        pages: (asked > 1).then(|| PagesFetched {
            fetched,
            stopped_because: stopped.filter(|_| fetched < asked),
        }),
        operation_id: apis.shown_id(at),
        api: apis.qualified().then(|| api.name.clone()),
        method: op.method,
    })))
}

/// One page's place in the joined list.
struct Span {
    /// The query it was fetched with.
    query: Map<String, Value>,
    /// Items left out at its start (`skipItems`).
    skipped: usize,
    /// Items it added to the list.
    items: usize,
    resume: Resume,
}

/// The page holding the joined list's item `n` (the last page when `n` is past the end),
/// and the item's index in it.
fn locate(spans: &[Span], n: usize) -> (usize, usize) {
    let mut before = 0;
    for (k, s) in spans.iter().enumerate() {
        if n < before + s.items {
            return (k, n - before);
        }
        before += s.items;
    }
    let k = spans.len().saturating_sub(1);
    (k, spans.get(k).map_or(0, |s| s.items))
}

/// The one sentence a result carries when something is not shown.
#[allow(clippy::too_many_arguments)]
fn note(
    over: Option<String>,
    matched_nothing: bool,
    whole: bool,
    truncated: bool,
    cut: Option<&Cut>,
    selected: bool,
    next_resumes: Option<bool>,
    continuation: Option<&paging::Continuation>,
) -> Option<String> {
    if matched_nothing {
        return Some(
            "`select` matched nothing in the response body, so `body` is null: check the field \
             names (api_schema shows the response's fields) or call without `select` to see \
             the body."
                .into(),
        );
    }
    if let Some(over) = over.filter(|_| !whole) {
        return Some(format!(
            "The response is cut: {over}. Ask for less (a smaller page size or a filter in \
             `query`)."
        ));
    }
    if !whole {
        return Some(
            "The response was longer than this server reads (--max-read-bytes) and is cut: ask \
             for less (a smaller page size or a filter in `query`)."
                .into(),
        );
    }
    if let Some(c) = cut {
        let at = if c.pointer.is_empty() {
            "the list".to_string()
        } else {
            format!("the list at {}", c.pointer)
        };
        let next = match next_resumes {
            Some(true) => ", or call `next`, which starts right after the last item shown",
            Some(false) => {
                "; `next` starts after the whole page, so the items not shown are not in it \
                 (select item by item, e.g. `[].{id: id}`, or ask for smaller pages to reach them)"
            }
            None if continuation.is_some() => "; `continuation` shows the API's next page",
            None => "",
        };
        let fewer = if selected {
            "select fewer fields"
        } else {
            "keep only the fields you need with `select`"
        };
        return Some(format!(
            "{} of the {} items of {at} are shown (whole items, to fit the response budget): \
             {fewer}, or ask for a smaller page size{next}.",
            c.shown, c.total
        ));
    }
    if truncated {
        return Some(
            "The body was cut to fit the response budget: keep only the fields you need with \
             `select`."
                .to_string(),
        );
    }
    continuation.map(|c| format!("There are more items: {}.", c.says()))
}
