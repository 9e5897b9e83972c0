//! `api_execute`'s result from the pages it fetched: their lists joined into one, `select`
//! applied to the body (2xx only), the body fitted to the response budget (`upstream::fit`:
//! whole items of a list, else a valid JSON prefix), and what the agent needs to go on: the
//! `cut`, one `note` sentence, the `next` call's arguments and, with `pages`, how many were
//! fetched and why it stopped. Pure: the pages were fetched by the pipeline (`tools/mod.rs`).

use serde::Serialize;
use serde_json::{Map, Value};

use super::ops::select_error;
use super::page::Page;
use super::select::Select;
use super::{Engine, ToolError, ToolResult};
use crate::upstream::{Cut, UpstreamResponse, fit};

/// `api_execute`'s result (a sent call).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecuteResult {
    #[serde(flatten)]
    pub response: UpstreamResponse,
    /// Which whole items of the body's list were left out to fit the budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut: Option<Cut>,
    /// One sentence on what was left out or found nothing, and how to get it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The `api_execute` arguments of the page after the last one fetched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<Map<String, Value>>,
    /// With `pages`: how many were fetched, and why fewer than asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pages: Option<PagesFetched>,
    pub operation_id: String,
    pub method: String,
}

/// How many pages a call with `pages` fetched.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PagesFetched {
    pub fetched: usize,
    /// Why it stopped before the pages asked for (there was no next page, or a page failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stopped_because: Option<String>,
}

/// The result of a call from its pages (at least one; the later ones are 2xx pages of the
/// first one's list). `stopped` says why fewer pages than asked were fetched.
pub fn finish(engine: &Engine, mut pages: Vec<Page>, stopped: Option<String>) -> ToolResult {
    let fetched = pages.len();
    let Some(mut last) = pages.pop() else {
        return Err(ToolError::new(super::Code::Internal, "no page was fetched"));
    };
    // What the call asked for is on its first page (the later ones are fetched as one raw
    // page each).
    let (select, asked, op) = match pages.first_mut() {
        Some(f) => (f.planned.select.take(), f.planned.pages, f.planned.op),
        None => (
            last.planned.select.take(),
            last.planned.pages,
            last.planned.op,
        ),
    };
    let op = &engine.spec.operations[op];
    let select = select.as_ref();
    // The later pages' items join the first's, in order, under the last page's envelope
    // (its `has_more` and cursor are the current ones).
    let mut joined: Vec<Value> = Vec::new();
    let mut duration_ms = last.response.duration_ms;
    for p in pages.iter_mut() {
        duration_ms = duration_ms.saturating_add(p.response.duration_ms);
        if let Some(Value::Array(items)) = p
            .list
            .as_deref()
            .and_then(|l| p.response.body.pointer_mut(l))
        {
            joined.append(items);
        }
    }
    let next = last.next_args(engine, select.map(Select::as_str), asked);
    let Page {
        mut response,
        secrets,
        list,
        ..
    } = last;
    response.duration_ms = duration_ms;
    if !joined.is_empty()
        && let Some(Value::Array(items)) =
            list.as_deref().and_then(|l| response.body.pointer_mut(l))
    {
        joined.append(items);
        *items = joined;
    }
    let whole = !response.truncated;
    let mut matched_nothing = false;
    if let Some(s) = select
        && response.ok
    {
        response.body = s
            .apply(&response.body)
            .map_err(|e| select_error(&e).with("status", Value::from(response.status)))?;
        matched_nothing = response.body.is_null();
    }
    let fitted = fit(
        std::mem::take(&mut response.body),
        engine.upstream.config().max_body_bytes,
        whole,
        &secrets,
    );
    response.body = fitted.body;
    response.truncated = fitted.truncated;
    // A cursor that names the last item (Stripe's `starting_after`) resumes right after the
    // last item shown, so that a cut skips nothing; a page number cannot.
    let mut next = next;
    let mut resumes = fitted.cut.is_none();
    if let (Some(c), Some(n), None) = (&fitted.cut, &mut next, select)
        && let Some(Value::Object(q)) = n.get_mut("query")
        && q.contains_key("starting_after")
    {
        let last_id = response
            .body
            .pointer(&c.pointer)
            .and_then(Value::as_array)
            .and_then(|a| a.last())
            .and_then(|i| i.get("id"))
            .cloned();
        if let Some(id) = last_id {
            q.insert("starting_after".into(), id);
            resumes = true;
        }
    }
    let note = note(
        matched_nothing,
        whole,
        fitted.truncated,
        fitted.cut.as_ref(),
        select.is_some(),
        next.is_some().then_some(resumes),
    );
    Ok(serde_json::to_value(ExecuteResult {
        response,
        cut: fitted.cut,
        note,
        next,
        pages: (asked > 1).then(|| PagesFetched {
            fetched,
            stopped_because: stopped.filter(|_| fetched < asked),
        }),
        operation_id: op.id.clone(),
        method: op.method.as_str().to_string(),
    })
    .unwrap_or_default())
}

/// The one sentence a result carries when something is not shown.
fn note(
    matched_nothing: bool,
    whole: bool,
    truncated: bool,
    cut: Option<&Cut>,
    selected: bool,
    next_resumes: Option<bool>,
) -> Option<String> {
    if matched_nothing {
        return Some(
            "`select` matched nothing in the response body, so `body` is null: check the field \
             names (api_schema shows the response's fields) or call without `select` to see \
             the body."
                .into(),
        );
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
                "; `next` starts after the whole page, so the items not shown are not in it"
            }
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
    truncated.then(|| {
        "The body was cut to fit the response budget: keep only the fields you need with \
         `select`."
            .to_string()
    })
}
