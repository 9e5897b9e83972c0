//! Where an API's next page is, as the query of the same operation: an RFC 8288
//! `Link: <…>; rel="next"` header mapped back to the operation's declared query parameters
//! (same origin and path as the request, else nothing: a Link URL is never called as such),
//! or a cursor in the body (`has_more` + the last item's id → `starting_after`, `next_cursor`,
//! `nextPageToken`, `next_page_token`, `cursor`, `offset` + `limit`). Pure: no I/O.

use serde_json::{Map, Value};
use url::Url;

use crate::spec::{Operation, ParamIn};

/// The query of the page after this one, when the response shows one.
pub(crate) fn next_query(
    op: &Operation,
    request: &Url,
    sent: &Map<String, Value>,
    headers: &Map<String, Value>,
    body: &Value,
    list: Option<&str>,
) -> Option<Map<String, Value>> {
    if let Some(link) = headers.get("link").and_then(Value::as_str)
        && let Some(next) = link_next(link)
    {
        // A Link that names no usable page says there is none; a cursor is not guessed.
        return from_link(op, request, &next);
    }
    from_body(op, sent, body, list)
}

fn declares(op: &Operation, name: &str) -> bool {
    op.parameters
        .iter()
        .any(|p| p.location == ParamIn::Query && p.name == name)
}

/// The target of the `rel="next"` link of a `Link` header value (several joined by `, `).
fn link_next(header: &str) -> Option<String> {
    let mut rest = header;
    while let Some(open) = rest.find('<') {
        let close = rest[open..].find('>')? + open;
        let target = &rest[open + 1..close];
        let after = &rest[close + 1..];
        // The parameters run to the next link (`, <`) or the end.
        let end = after.find('<').unwrap_or(after.len());
        let params = &after[..end];
        let is_next = params.split(';').any(|p| {
            let Some((k, v)) = p.split_once('=') else {
                return false;
            };
            k.trim().eq_ignore_ascii_case("rel")
                && v.trim()
                    .trim_end_matches(',')
                    .trim()
                    .trim_matches('"')
                    .split_ascii_whitespace()
                    .any(|r| r.eq_ignore_ascii_case("next"))
        });
        if is_next {
            return Some(target.to_string());
        }
        rest = &after[end..];
    }
    None
}

/// The query of a next link on the request's own origin and path, every pair of it a query
/// parameter the operation declares (a credential or a `[redacted]` value never is one).
fn from_link(op: &Operation, request: &Url, target: &str) -> Option<Map<String, Value>> {
    let url = request.join(target).ok()?;
    if url.origin() != request.origin() || url.path() != request.path() {
        return None;
    }
    let mut query = Map::new();
    for (k, v) in url.query_pairs() {
        if !declares(op, &k) || v.contains(crate::upstream::REDACTED) {
            return None;
        }
        match query.get_mut(k.as_ref()) {
            // A repeated parameter is an array.
            Some(Value::Array(a)) => a.push(Value::String(v.into_owned())),
            Some(first) => {
                let first = first.take();
                query.insert(
                    k.into_owned(),
                    Value::Array(vec![first, Value::String(v.into())]),
                );
            }
            None => {
                query.insert(k.into_owned(), Value::String(v.into_owned()));
            }
        }
    }
    Some(query)
}

/// A body cursor: (the body field, the query parameter it goes to).
const CURSORS: [(&str, &str); 5] = [
    ("next_cursor", "cursor"),
    ("nextCursor", "cursor"),
    ("nextPageToken", "pageToken"),
    ("next_page_token", "page_token"),
    ("cursor", "cursor"),
];

/// Objects a cursor may sit in besides the body itself (Slack's `response_metadata`).
const CURSOR_HOLDERS: [&str; 4] = ["response_metadata", "meta", "pagination", "paging"];

fn from_body(
    op: &Operation,
    sent: &Map<String, Value>,
    body: &Value,
    list: Option<&str>,
) -> Option<Map<String, Value>> {
    let Value::Object(top) = body else {
        return None;
    };
    let with = |name: &str, value: Value| {
        let mut q = sent.clone();
        q.insert(name.to_string(), value);
        Some(q)
    };
    // Stripe: `has_more` and the last item's id.
    if let Some(more) = top.get("has_more").and_then(Value::as_bool) {
        if !more || !declares(op, "starting_after") {
            return None;
        }
        let items = body.pointer(list?)?.as_array()?;
        let id = items.last()?.get("id")?.as_str()?;
        let mut q = sent.clone();
        q.remove("ending_before");
        q.insert("starting_after".into(), Value::String(id.to_string()));
        return Some(q);
    }
    let holders = std::iter::once(top).chain(
        CURSOR_HOLDERS
            .iter()
            .filter_map(|h| top.get(*h).and_then(Value::as_object)),
    );
    for holder in holders {
        for (field, param) in CURSORS {
            if let Some(Value::String(c)) = holder.get(field)
                && !c.is_empty()
                && declares(op, param)
                && sent.get(param) != Some(&Value::String(c.clone()))
            {
                return with(param, Value::String(c.clone()));
            }
        }
    }
    // `offset` + `limit`: the next offset while a full page came back and the total (if said)
    // is not reached.
    let number = |k: &str| top.get(k).and_then(Value::as_u64);
    if let (Some(offset), Some(limit)) = (number("offset"), number("limit"))
        && limit > 0
        && declares(op, "offset")
    {
        let shown = list
            .and_then(|p| body.pointer(p))
            .and_then(Value::as_array)
            .map(|a| a.len() as u64);
        let total = number("total").or_else(|| number("total_count"));
        let next = offset.checked_add(limit)?;
        let more = match (total, shown) {
            (Some(t), _) => next < t,
            (None, Some(n)) => n >= limit,
            (None, None) => false,
        };
        if more {
            return with("offset", Value::from(next));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::spec::Parameter;

    fn op(query: &[&str]) -> Operation {
        Operation {
            id: "listThings".into(),
            method: crate::spec::Method::Get,
            path: "/things".into(),
            summary: None,
            description: None,
            tags: Vec::new(),
            deprecated: false,
            parameters: query
                .iter()
                .map(|n| Parameter {
                    name: n.to_string(),
                    location: ParamIn::Query,
                    required: false,
                    description: None,
                    schema: json!({"type": "string"}),
                    style: "form".into(),
                    explode: true,
                    deprecated: false,
                })
                .collect(),
            request_body: None,
            responses: Vec::new(),
            security: None,
            servers: Vec::new(),
            extensions: Map::new(),
            required_features: Vec::new(),
            response_types: Vec::new(),
        }
    }

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn a_link_maps_back_to_the_query() {
        let url = Url::parse("https://api.example/things?page=1&per_page=10").unwrap();
        let op = op(&["page", "per_page", "state"]);
        let h = |v: &str| map(json!({"link": v}));
        let next = |link: &str| next_query(&op, &url, &Map::new(), &h(link), &Value::Null, None);
        assert_eq!(
            next(
                r#"<https://api.example/things?per_page=10&page=2>; rel="next", <https://api.example/things?per_page=10&page=12>; rel="last""#
            ),
            Some(map(json!({"per_page": "10", "page": "2"})))
        );
        // rel among others, relative target, order of links.
        assert_eq!(
            next(r#"</things?page=1>; rel="prev first", </things?page=3&state=open>; rel="next""#),
            Some(map(json!({"page": "3", "state": "open"})))
        );
        // Another origin or path, an undeclared or redacted parameter: no next.
        for bad in [
            r#"<https://evil.example/things?page=2>; rel="next""#,
            r#"<https://api.example/other?page=2>; rel="next""#,
            r#"<https://api.example/things?page=2&token=x>; rel="next""#,
            r#"<https://api.example/things?page=%5Bredacted%5D>; rel="next""#,
        ] {
            assert_eq!(next(bad), None, "{bad}");
        }
        // Only a last link: no next, and no body cursor guessed.
        assert_eq!(
            next(r#"<https://api.example/things?page=9>; rel="last""#),
            None
        );
    }

    #[test]
    fn body_cursors() {
        let url = Url::parse("https://api.example/things").unwrap();
        let none = Map::new();
        let sent = map(json!({"limit": 3}));
        let stripe =
            json!({"object": "list", "data": [{"id": "ch_1"}, {"id": "ch_2"}], "has_more": true});
        let op_s = op(&["limit", "starting_after", "ending_before"]);
        assert_eq!(
            next_query(&op_s, &url, &sent, &none, &stripe, Some("/data")),
            Some(map(json!({"limit": 3, "starting_after": "ch_2"})))
        );
        let last = json!({"data": [{"id": "ch_9"}], "has_more": false});
        assert_eq!(
            next_query(&op_s, &url, &sent, &none, &last, Some("/data")),
            None
        );
        let slack = json!({"members": [], "response_metadata": {"next_cursor": "dXNlcjpVMDYx"}});
        assert_eq!(
            next_query(
                &op(&["cursor"]),
                &url,
                &none,
                &none,
                &slack,
                Some("/members")
            ),
            Some(map(json!({"cursor": "dXNlcjpVMDYx"})))
        );
        let slack_end = json!({"members": [], "response_metadata": {"next_cursor": ""}});
        assert_eq!(
            next_query(&op(&["cursor"]), &url, &none, &none, &slack_end, None),
            None
        );
        let google = json!({"items": [1], "nextPageToken": "t2"});
        assert_eq!(
            next_query(
                &op(&["pageToken"]),
                &url,
                &none,
                &none,
                &google,
                Some("/items")
            ),
            Some(map(json!({"pageToken": "t2"})))
        );
        // Not declared: no next.
        assert_eq!(
            next_query(&op(&["page"]), &url, &none, &none, &google, None),
            None
        );
        let offsets = json!({"results": [1, 2], "offset": 4, "limit": 2, "total": 10});
        assert_eq!(
            next_query(
                &op(&["offset", "limit"]),
                &url,
                &none,
                &none,
                &offsets,
                Some("/results")
            ),
            Some(map(json!({"offset": 6})))
        );
        let end = json!({"results": [1, 2], "offset": 8, "limit": 2, "total": 10});
        assert_eq!(
            next_query(&op(&["offset"]), &url, &none, &none, &end, Some("/results")),
            None
        );
    }
}
