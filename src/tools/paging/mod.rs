//! Paging as the real APIs do it: from one response, the exact query of the same operation's
//! next page, by the operation's pagination extension (`extensions.rs`) or else the table of
//! conventions (`conventions.rs`: RFC 8288 `Link`, Stripe, Kubernetes, Slack, Google, AWS,
//! OData, HAL, JSON:API, Twilio, Jira, offsets, page numbers, cursors); and how to start a page
//! at one of its items after a cut ([`Resume`]): Stripe's cursor from the last item shown, an
//! offset plus the items shown, or the same page again with the items shown skipped by this
//! server (`skipItems`). A next page the response shows but the operation cannot ask for is
//! [`Next::Unmapped`], never the end. Pure: no I/O.

use serde_json::{Map, Value};
use url::Url;

mod conventions;
mod extensions;
mod link;
mod next;

#[cfg(test)]
use crate::spec::ParamIn;
#[cfg(test)]
use next::MAX_SHOWN;
pub use next::{Continuation, Next};
use next::{Seen, declares};

use crate::spec::Operation;

/// How a page is started at one of its items (after a cut).
#[derive(Debug, Clone, PartialEq)]
pub enum Resume {
    /// The cursor `param` set to the `key` of the item before (Stripe's `starting_after`).
    AfterItem {
        param: &'static str,
        key: &'static str,
    },
    /// The offset `param`: the page's own offset `at` plus the item's index.
    Offset { param: &'static str, at: u64 },
    /// The same page again, its first items skipped by this server (`skipItems`).
    Skip,
}

/// The paging of one page: by which convention, what is next, how to resume inside it.
#[derive(Debug, Clone, PartialEq)]
pub struct Paging {
    /// The convention's (or extension's) name; `none` when the response shows nothing.
    pub by: &'static str,
    pub next: Next,
    pub resume: Resume,
}

/// The pointer of the list a page holds however small it is (a short last page, `limit: 3`):
/// the body itself, else the array with the most items among its fields and theirs.
pub fn any_list(body: &Value) -> Option<String> {
    if body.is_array() {
        return Some(String::new());
    }
    let mut best: Option<(usize, String)> = None;
    let top = body.as_object()?;
    for (k, v) in top {
        let mut at = String::new();
        crate::spec::push_segment(&mut at, k);
        let mut consider = |len: usize, at: String| {
            if best.as_ref().is_none_or(|(b, _)| len > *b) {
                best = Some((len, at));
            }
        };
        match v {
            Value::Array(a) => consider(a.len(), at),
            Value::Object(inner) => {
                for (k2, v2) in inner {
                    if let Value::Array(a) = v2 {
                        let mut inner_at = at.clone();
                        crate::spec::push_segment(&mut inner_at, k2);
                        consider(a.len(), inner_at);
                    }
                }
            }
            _ => {}
        }
    }
    best.map(|(_, at)| at)
}

/// A next page the call's credentials would leak through: a next query holding one in any
/// form once decoded (alone, or joined from its values in order: a secret cut in two), or a
/// continuation's value; and a next query whose values pass `max_value_bytes`, which its own
/// call would refuse. Either becomes a [`Next::Unmapped`] that shows no credential.
pub(crate) fn guard(
    next: Next,
    secrets: &crate::upstream::Secrets,
    max_value_bytes: usize,
) -> Next {
    let holds = |s: &str| secrets.holds(s.as_bytes()) || secrets.holds_decoded(s);
    match next {
        Next::Query(q) => {
            let texts: Vec<String> = q
                .values()
                .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
                .collect();
            if texts.iter().any(|t| holds(t)) || holds(&texts.concat()) {
                return Next::Unmapped(Continuation::new(
                    "query",
                    crate::upstream::REDACTED,
                    "the next page's query holds a credential of this server's".into(),
                ));
            }
            if let Some((k, t)) = q
                .keys()
                .zip(&texts)
                .find(|(_, t)| t.len() > max_value_bytes)
            {
                return Next::Unmapped(Continuation::new(
                    "query",
                    t,
                    format!(
                        "its `{k}` is {} bytes, over the limit of {max_value_bytes} for a value \
                         (--max-value-bytes)",
                        t.len()
                    ),
                ));
            }
            Next::Query(q)
        }
        Next::Unmapped(mut c) => {
            if holds(&c.value) {
                c.value = crate::upstream::REDACTED.to_string();
            }
            Next::Unmapped(c)
        }
        Next::End => Next::End,
    }
}

/// The pointer of a page's item list the operation's pagination extension names, if any.
pub fn declared_list(op: &Operation) -> Option<String> {
    extensions::declared(op)?.ok()?.results
}

/// The paging of a 2xx response to `request` (sent with the query `sent`), whose item list
/// is at `list`.
pub fn paging(
    op: &Operation,
    request: &Url,
    sent: &Map<String, Value>,
    headers: &Map<String, Value>,
    body: &Value,
    list: Option<&str>,
) -> Paging {
    let seen = Seen {
        op,
        request,
        sent,
        headers,
        body,
        list,
    };
    let (by, next) = match extensions::declared(op) {
        Some(Ok(d)) => (d.name, d.read(&seen)),
        Some(Err(why)) => match read_table(&seen) {
            // The extension says how, in a form this server cannot follow: say so rather
            // than end.
            ("none", Next::End) => (
                "extension",
                Next::Unmapped(Continuation::new(
                    "the operation's pagination extension",
                    "",
                    why,
                )),
            ),
            found => found,
        },
        None => read_table(&seen),
    };
    // Only a GET's next page is its query: another method's goes in its body, which `next`
    // does not carry.
    let next = match next {
        Next::Query(q) if op.method != crate::spec::Method::Get => {
            Next::Unmapped(Continuation::new(
                "query",
                &Value::Object(q).to_string(),
                format!(
                    "{} pages by its request body, which `next` does not carry",
                    op.method
                ),
            ))
        }
        other => other,
    };
    let resume = resume_of(op, sent, by, &next);
    Paging { by, next, resume }
}

/// The first convention whose marker the response carries: in the body, else in the object
/// that holds the list (Spotify's `{"artists": {"items": […], "next": …}}`); else a flag
/// that says there is more (`has_more: true`) is reported, not taken for the end.
fn read_table(seen: &Seen) -> (&'static str, Next) {
    let found = |seen: &Seen| {
        conventions::TABLE
            .iter()
            .find_map(|c| Some((c.name, c.shows.read(seen)?)))
    };
    if let Some(f) = found(seen) {
        return f;
    }
    if let Some(list) = seen.list
        && let Some((holder, item)) = list.rsplit_once('/')
        && !holder.is_empty()
        && let Some(envelope) = seen.body.pointer(holder).filter(|v| v.is_object())
    {
        let inner = format!("/{item}");
        let nested = Seen {
            body: envelope,
            list: Some(&inner),
            ..*seen
        };
        if let Some((by, next)) = found(&nested) {
            return (by, at_holder(next, holder));
        }
    }
    for flag in MORE {
        if seen.body.pointer(flag).and_then(Value::as_bool) == Some(true) {
            let why = "it names no cursor, link or offset this server knows".to_string();
            return ("none", Next::Unmapped(Continuation::new(flag, "true", why)));
        }
    }
    ("none", Next::End)
}

/// Flags by which a response says there are more items.
const MORE: [&str; 4] = ["/has_more", "/hasMore", "/more", "/meta/has_more"];

/// A continuation found inside the list's envelope, its place given from the body's root.
fn at_holder(next: Next, holder: &str) -> Next {
    match next {
        Next::Unmapped(mut c) if c.at.starts_with('/') => {
            c.at = format!("{holder}{}", c.at);
            Next::Unmapped(c)
        }
        other => other,
    }
}

/// How to start this page at one of its items.
fn resume_of(op: &Operation, sent: &Map<String, Value>, by: &str, next: &Next) -> Resume {
    if by == "stripe" || (declares(op, "starting_after") && sent.contains_key("starting_after")) {
        return Resume::AfterItem {
            param: "starting_after",
            key: "id",
        };
    }
    // An offset the operation takes, when the pages go by it (the page was asked by offset,
    // the next one is, or the convention is one of offsets) and no page number or cursor
    // chose this page.
    let by_offset = matches!(by, "jira" | "offset")
        || matches!(next, Next::Query(q) if conventions::OFFSETS.iter().any(|o| q.contains_key(*o)));
    let chosen_otherwise = sent.keys().any(|k| {
        !conventions::OFFSETS.contains(&k.as_str()) && PAGE_CHOOSERS.contains(&k.as_str())
    });
    for param in conventions::OFFSETS {
        if declares(op, param) && !chosen_otherwise && (by_offset || sent.contains_key(param)) {
            let at = sent.get(param).and_then(conventions::as_u64).unwrap_or(0);
            return Resume::Offset { param, at };
        }
    }
    Resume::Skip
}

/// Query parameters that choose a page other than by offset.
const PAGE_CHOOSERS: [&str; 12] = [
    "page",
    "cursor",
    "pageToken",
    "page_token",
    "continue",
    "starting_after",
    "ending_before",
    "after",
    "NextToken",
    "nextToken",
    "PageToken",
    "Page",
];

/// The query and `skipItems` that start a page fetched with `query` (and `skipped` items
/// skipped) at its item `index`; `before` is the cursor (`key`) of the item just before it.
pub fn resume(
    how: &Resume,
    query: &Map<String, Value>,
    skipped: usize,
    index: usize,
    before: Option<&Value>,
) -> (Map<String, Value>, usize) {
    let mut q = query.clone();
    match how {
        Resume::AfterItem { param, .. } if index > 0 => {
            if let Some(id) = before.filter(|v| v.is_string()) {
                q.remove("ending_before");
                q.insert((*param).into(), id.clone());
                return (q, 0);
            }
        }
        Resume::Offset { param, at } => {
            if let Some(o) = at
                .checked_add(skipped as u64)
                .and_then(|o| o.checked_add(index as u64))
            {
                q.insert((*param).into(), Value::from(o));
                return (q, 0);
            }
        }
        _ => {}
    }
    (q, skipped.saturating_add(index))
}

#[cfg(test)]
mod tests;
