//! `api_execute`'s result from the pages it fetched: their lists joined into one, `select`
//! applied to the body (2xx only), the body fitted to the response budget (`upstream::fit`:
//! whole items of a list, else a valid JSON prefix), and what the agent needs to go on: the
//! `cut`, one `note` sentence, the `next` call's arguments and, with `pages`, how many were
//! fetched and why it stopped. Pure: the pages were fetched by the pipeline (`tools/mod.rs`).

use serde_json::{Map, Value};

use super::ops::select_error;
use super::output::{ExecuteResult, Output, PagesFetched};
use super::page::Page;
use super::select::{Room, Select};
use super::{ToolError, ToolResult};
use crate::apis::Apis;
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
) -> ToolResult {
    let fetched = pages.len();
    let Some(mut last) = pages.pop() else {
        return Err(ToolError::new(super::Code::Internal, "no page was fetched"));
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
    let next = last.next_args(apis, select.map(Select::as_str), asked);
    let Page {
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
    let whole = !response.truncated;
    let mut matched_nothing = false;
    if let Some(s) = select
        && response.ok
    {
        let room = Room {
            json_bytes: api.upstream.config().max_read_bytes,
            memory: budget.left(),
        };
        response.body = s
            .apply(std::mem::take(&mut response.body), room)
            .map_err(|e| select_error(&e).with("status", Value::from(response.status)))?;
        secrets.redact_value(&mut response.body);
        matched_nothing = response.body.is_null();
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
    // A page number resumes after a cut too, when some page size puts a page boundary right
    // after the last item shown: the shown items end at offset `o`, and a size `q` dividing `o`
    // (at least half the items shown, so the pages stay useful) makes page `o / q + 1` start
    // there. On a first page that is always `q = shown`.
    if let (Some(c), Some(n), None, false) = (&fitted.cut, &mut next, select, resumes)
        && let Some(Value::Object(q)) = n.get_mut("query")
        && let Some(resumed) = resume_page(q, c.shown, fetched)
    {
        *q = resumed;
        resumes = true;
    }
    let note = note(
        budget.over().map(ToString::to_string),
        matched_nothing,
        whole,
        fitted.truncated,
        fitted.cut.as_ref(),
        select.is_some(),
        next.is_some().then_some(resumes),
    );
    Ok(Output::Execute(Box::new(ExecuteResult {
        response,
        cut: fitted.cut,
        note,
        next,
        pages: (asked > 1).then(|| PagesFetched {
            fetched,
            stopped_because: stopped.filter(|_| fetched < asked),
        }),
        operation_id: op.id.clone(),
        method: op.method,
    })))
}

/// Names of a page-size query parameter beside `page`.
const PAGE_SIZES: [&str; 5] = ["per_page", "limit", "page_size", "pageSize", "size"];

/// The next page's query after a cut left `shown` items of the `fetched` pages before `query`'s
/// `page`: the same items from the first one not shown, by a page size that puts a page
/// boundary there (see `finish`), or `None` when no size of at least half of `shown` does.
fn resume_page(
    query: &Map<String, Value>,
    shown: usize,
    fetched: usize,
) -> Option<Map<String, Value>> {
    let number = |v: &Value| {
        v.as_u64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
    };
    let next_page = number(query.get("page")?)?;
    let (size_name, size) = PAGE_SIZES
        .iter()
        .find_map(|n| Some((*n, number(query.get(*n)?)?)))?;
    let first_page = next_page.checked_sub(fetched as u64)?.max(1);
    let offset = (first_page - 1)
        .checked_mul(size)?
        .checked_add(shown as u64)?;
    let shown = shown as u64;
    let q = (shown.div_ceil(2).max(1)..=shown)
        .rev()
        .find(|q| offset % q == 0)?;
    let mut out = query.clone();
    out.insert("page".into(), Value::from(offset / q + 1));
    out.insert(size_name.into(), Value::from(q));
    Some(out)
}

/// The one sentence a result carries when something is not shown.
fn note(
    over: Option<String>,
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn query(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    #[test]
    fn a_cut_page_resumes_right_after_the_last_item_shown() {
        // Page 1 of 100, 13 shown: the next 13 start at item 14.
        let next = query(json!({"per_page": 100, "page": 2, "state": "open"}));
        assert_eq!(
            resume_page(&next, 13, 1),
            Some(query(json!({"per_page": 13, "page": 2, "state": "open"})))
        );
        // Pages 1-2 of 30 joined, 40 shown (offset 40): 40 per page, page 2 starts at item 41.
        let next = query(json!({"per_page": "30", "page": "3"}));
        assert_eq!(
            resume_page(&next, 40, 2),
            Some(query(json!({"per_page": 40, "page": 2})))
        );
        // Page 3 of 30, 12 shown: offset 72 = 6 × 12, so 12 per page, page 7.
        let next = query(json!({"limit": 30, "page": 4}));
        assert_eq!(
            resume_page(&next, 12, 1),
            Some(query(json!({"limit": 12, "page": 7})))
        );
        // Page 2 of 100, 11 shown: offset 111 = 3 × 37; no size from 6 to 11 divides it.
        assert_eq!(
            resume_page(&query(json!({"per_page": 100, "page": 3})), 11, 1),
            None
        );
        // No page size, or nothing shown: nothing to compute.
        assert_eq!(resume_page(&query(json!({"page": 2})), 10, 1), None);
        assert_eq!(
            resume_page(&query(json!({"per_page": 100, "page": 2})), 0, 1),
            None
        );
    }
}
