//! The conventions real APIs page by, one row each: where a response shows its next page and
//! how that becomes the next call's query. The rows are tried in order; the first whose marker
//! the response carries decides (`Link` header first, then the body). A marker that says "no
//! more" (`has_more: false`, an empty cursor, a `null` next link) ends the paging; one that
//! shows a next page the operation cannot ask for is reported, never taken for the end.

use serde_json::Value;

use super::link;
use super::next::{Continuation, Next, Seen, declares};
use crate::spec::{Operation, ParamIn};

/// Where a response shows its next page, and how it maps to the next query.
#[derive(Debug, Clone, Copy)]
pub(super) enum Shows<'a> {
    /// An RFC 8288 `Link` header with `rel="next"`.
    LinkHeader,
    /// A URL in the body at one of these pointers (`null` or absent on the last page).
    NextUrl(&'a [&'a str]),
    /// An opaque token in the body, sent back as the first of `param` the operation declares.
    Token {
        at: &'a [&'a str],
        param: &'a [&'a str],
    },
    /// A boolean `flag`; the next page starts after the last item's `key` (Stripe).
    HasMore {
        flag: &'a str,
        param: &'a str,
        key: &'a str,
    },
    /// An offset into the whole list (from the body, else as sent, else 0): the next page
    /// starts at offset + the items returned, until `total` or a `last` flag says the end.
    Offset {
        at: &'a [&'a str],
        param: &'a [&'a str],
        total: &'a [&'a str],
        last: &'a [&'a str],
        /// Whether a total alone marks the convention (an offset API's `total_entries`), or
        /// only its own offset field or last flag does (Jira's `startAt`, `isLast`).
        by_total: bool,
    },
    /// A page number counted up by one while pages hold items (and `flag`, if any, is true):
    /// a pagination extension's `page` input, with the parameter's default as the first.
    Increment {
        param: &'a str,
        flag: Option<&'a str>,
    },
}

/// A named row of the table.
#[derive(Debug, Clone, Copy)]
pub(super) struct Convention<'a> {
    pub name: &'a str,
    pub shows: Shows<'a>,
}

const fn row<'a>(name: &'a str, shows: Shows<'a>) -> Convention<'a> {
    Convention { name, shows }
}

/// Every convention, in the order they are tried.
pub(super) const TABLE: &[Convention<'static>] = &[
    row("link", Shows::LinkHeader),
    // A next page's number or token (Hetzner's `meta.pagination`, Stripe's search): before
    // Stripe's `has_more`, which its search results carry too.
    row(
        "page-number",
        Shows::Token {
            at: &[
                "/meta/pagination/next_page",
                "/pagination/next_page",
                "/next_page",
            ],
            param: &["page"],
        },
    ),
    row(
        "stripe",
        Shows::HasMore {
            flag: "/has_more",
            param: "starting_after",
            key: "id",
        },
    ),
    row(
        "kubernetes",
        Shows::Token {
            at: &["/metadata/continue"],
            param: &["continue"],
        },
    ),
    row(
        "slack",
        Shows::Token {
            at: &["/response_metadata/next_cursor"],
            param: &["cursor"],
        },
    ),
    row(
        "google",
        Shows::Token {
            at: &["/nextPageToken"],
            param: &["pageToken", "page_token"],
        },
    ),
    row(
        "page-token",
        Shows::Token {
            at: &["/next_page_token"],
            param: &["page_token", "pageToken"],
        },
    ),
    row(
        "aws",
        Shows::Token {
            at: &["/NextToken", "/nextToken"],
            // AWS EBS answers `NextToken` and reads `pageToken`.
            param: &["pageToken", "nextToken", "NextToken"],
        },
    ),
    row(
        "aws-marker",
        Shows::Token {
            at: &["/NextMarker", "/nextMarker"],
            param: &["Marker", "marker"],
        },
    ),
    row(
        "odata",
        Shows::NextUrl(&["/@odata.nextLink", "/odata.nextLink", "/nextLink"]),
    ),
    row(
        "hal",
        Shows::NextUrl(&["/_links/next/href", "/_links/next"]),
    ),
    row("json-api", Shows::NextUrl(&["/links/next"])),
    row(
        "twilio",
        Shows::NextUrl(&["/meta/next_page_url", "/next_page_uri", "/next_page_url"]),
    ),
    row(
        "jira",
        Shows::Offset {
            at: &["/startAt"],
            param: &["startAt"],
            total: &["/total"],
            last: &["/isLast"],
            by_total: false,
        },
    ),
    row("next-url", Shows::NextUrl(&["/next", "/paging/next"])),
    row(
        "discourse",
        Shows::NextUrl(&["/meta/load_more_directory_items", "/load_more_topics"]),
    ),
    row(
        "offset",
        Shows::Offset {
            at: &["/offset", "/meta/offset", "/pagination/offset", "/skip"],
            param: &["offset", "skip", "$skip", "start"],
            total: &[
                "/total",
                "/total_count",
                "/totalCount",
                "/total_entries",
                "/meta/total",
                "/meta/total_count",
                "/pagination/total",
            ],
            last: &[],
            by_total: true,
        },
    ),
    row(
        "cursor",
        Shows::Token {
            at: &[
                "/next_cursor",
                "/nextCursor",
                "/meta/next_cursor",
                "/pagination/next_cursor",
                "/paging/cursors/after",
                "/cursor",
            ],
            param: &["cursor", "after"],
        },
    ),
];

impl Shows<'_> {
    /// What the response says of the next page by this convention, `None` when it does not
    /// carry this convention's marker at all.
    pub(super) fn read(&self, seen: &Seen) -> Option<Next> {
        match *self {
            Shows::LinkHeader => {
                let header = seen.headers.get("link")?.as_str()?;
                if header.contains(crate::upstream::REDACTED) {
                    return Some(Next::Unmapped(Continuation::new(
                        "header link",
                        header,
                        "it holds a credential of this server's, scrubbed".into(),
                    )));
                }
                if !link::pages_links(header) {
                    return None;
                }
                Some(match link::link_next(header) {
                    Some(target) => link::from_url(seen.op, seen.request, "header link", &target),
                    None => Next::End,
                })
            }
            Shows::NextUrl(at) => at.iter().find_map(|p| {
                let v = seen.body.pointer(p)?;
                let target = match v {
                    Value::String(s) => s.as_str(),
                    // A link object (`{"href": …}`, JSON:API and HAL).
                    Value::Object(o) => match o.get("href") {
                        Some(Value::String(s)) => s.as_str(),
                        Some(Value::Null) | None => return Some(Next::End),
                        Some(_) => return None,
                    },
                    Value::Null => return Some(Next::End),
                    _ => return None,
                };
                if target.is_empty() {
                    return Some(Next::End);
                }
                if !looks_like_url(target) {
                    // A bare token where a link was expected (`"next": "abc"`): a cursor for a
                    // parameter of the field's own name, or `cursor`.
                    let name = p.rsplit('/').next().unwrap_or("next");
                    return Some(token(seen, p, target, &[name, "cursor"]));
                }
                Some(link::from_url(seen.op, seen.request, p, target))
            }),
            Shows::Token { at, param } => at.iter().find_map(|p| match seen.body.pointer(p)? {
                Value::String(s) if s.is_empty() => Some(Next::End),
                Value::String(s) => Some(token(seen, p, s, param)),
                // A number goes back as the digits it was; one JSON cannot hold exactly
                // (past 2^64, or a fraction) cannot.
                Value::Number(n) => Some(
                    match n
                        .as_u64()
                        .map(|u| u.to_string())
                        .or_else(|| n.as_i64().map(|i| i.to_string()))
                    {
                        Some(digits) => token(seen, p, &digits, param),
                        None => Next::Unmapped(Continuation::new(
                            p,
                            &n.to_string(),
                            "a number this server cannot carry back exactly".into(),
                        )),
                    },
                ),
                Value::Null => Some(Next::End),
                _ => None,
            }),
            Shows::HasMore { flag, param, key } => {
                // Slack's `has_more` beside its own cursor is not Stripe's.
                if !declares(seen.op, param) {
                    return None;
                }
                let more = seen.body.pointer(flag)?.as_bool()?;
                if !more {
                    return Some(Next::End);
                }
                let last = seen.items().and_then(|a| a.last());
                let id = last.and_then(|i| i.get(key)).and_then(Value::as_str);
                let unmapped = |why: String| Next::Unmapped(Continuation::new(flag, "true", why));
                Some(match id {
                    None => unmapped(format!("the page's last item has no `{key}`")),
                    Some(id) => {
                        let mut q = seen.sent.clone();
                        q.remove("ending_before");
                        q.insert(param.into(), Value::String(id.into()));
                        Next::Query(q)
                    }
                })
            }
            Shows::Offset {
                at,
                param,
                total,
                last,
                by_total,
            } => {
                let param = param.iter().find(|n| declares(seen.op, n))?;
                let number =
                    |ptrs: &[&str]| ptrs.iter().find_map(|p| as_u64(seen.body.pointer(p)?));
                let (body_at, total, last) = (
                    number(at),
                    number(total),
                    last.iter().find_map(|p| seen.body.pointer(p)?.as_bool()),
                );
                if body_at.is_none() && last.is_none() && !(by_total && total.is_some()) {
                    return None;
                }
                let returned = seen.items()?.len() as u64;
                if returned == 0 && last == Some(false) {
                    return Some(Next::Unmapped(Continuation::new(
                        at.first().copied().unwrap_or("/"),
                        &body_at.unwrap_or(0).to_string(),
                        "the API says this is not the last page but returned no items".into(),
                    )));
                }
                let offset = body_at
                    .or_else(|| seen.sent.get(*param).and_then(as_u64))
                    .unwrap_or(0);
                let next = offset.checked_add(returned)?;
                let more = returned > 0
                    && match (last, total) {
                        (Some(last), _) => !last,
                        (None, Some(total)) => next < total,
                        (None, None) => false,
                    };
                Some(if more {
                    let mut q = seen.sent.clone();
                    q.insert((*param).into(), Value::from(next));
                    Next::Query(q)
                } else {
                    Next::End
                })
            }
            Shows::Increment { param, flag } => {
                if !declares(seen.op, param) {
                    return Some(Next::Unmapped(Continuation::new(
                        "the operation's pagination extension",
                        param,
                        format!("the operation declares no `{param}` query parameter"),
                    )));
                }
                let more = match flag {
                    Some(f) => seen.body.pointer(f)?.as_bool()?,
                    None => true,
                };
                let returned = seen.items()?.len();
                if !more || returned == 0 {
                    return Some(Next::End);
                }
                let current = seen
                    .sent
                    .get(param)
                    .and_then(as_u64)
                    .or_else(|| default_of(seen.op, param))
                    .unwrap_or(1);
                let mut q = seen.sent.clone();
                q.insert(param.into(), Value::from(current.checked_add(1)?));
                Some(Next::Query(q))
            }
        }
    }
}

/// A cursor `value` found at `at`, as the first of `params` the operation declares.
fn token(seen: &Seen, at: &str, value: &str, params: &[&str]) -> Next {
    let Some(param) = params.iter().find(|n| declares(seen.op, n)) else {
        return Next::Unmapped(Continuation::new(
            at,
            value,
            format!(
                "the operation declares no `{}` query parameter to send it back in",
                params.first().copied().unwrap_or("cursor")
            ),
        ));
    };
    if value.contains(crate::upstream::REDACTED) {
        return Next::Unmapped(Continuation::new(
            at,
            value,
            "it holds a credential of this server's, scrubbed".into(),
        ));
    }
    if seen.sent.get(*param).and_then(Value::as_str) == Some(value) {
        return Next::Unmapped(Continuation::new(
            at,
            value,
            format!("it is the `{param}` this page was fetched with: following it would loop"),
        ));
    }
    let mut q = seen.sent.clone();
    q.insert((*param).into(), Value::String(value.into()));
    Next::Query(q)
}

fn looks_like_url(s: &str) -> bool {
    s.starts_with('/') || s.starts_with('?') || s.contains("://")
}

/// A count as JSON has it: a number, or digits in a string (query values as sent).
pub(super) fn as_u64(v: &Value) -> Option<u64> {
    v.as_u64().or_else(|| v.as_str()?.trim().parse().ok())
}

/// The query parameters, in their usual names, that say which page by counting items.
pub(super) const OFFSETS: [&str; 5] = ["offset", "startAt", "start", "skip", "$skip"];

/// Keep the table's names unique: the tests and results name rows by them.
/// The `default` of the operation's query parameter `name`, as a count.
pub(super) fn default_of(op: &Operation, name: &str) -> Option<u64> {
    op.parameters
        .iter()
        .find(|p| p.location == ParamIn::Query && p.name == name)
        .and_then(|p| p.schema.get("default"))
        .and_then(as_u64)
}

#[cfg(test)]
pub(super) fn names() -> Vec<&'static str> {
    TABLE.iter().map(|c| c.name).collect()
}
