//! A next page given as a URL: the `rel="next"` target of an RFC 8288 `Link` header, or a URL
//! in the body (Spotify's `next`, OData's `@odata.nextLink`, HAL's `_links.next.href`, …),
//! mapped to the query of the same operation. Only the URL's query is used: its path may
//! differ (GitHub's `Link` points at `/repositories/{id}/issues`), its origin must be the
//! request's, and a URL is never called as such.

use serde_json::{Map, Value};
use url::Url;

use super::next::{Continuation, Next, declares};
use crate::spec::Operation;

/// The target of the `rel="next"` link of a `Link` header value (several joined by `, `),
/// `None` when no link is `next`.
pub(super) fn link_next(header: &str) -> Option<String> {
    let mut rest = header;
    while let Some(open) = rest.find('<') {
        let close = rest[open..].find('>')? + open;
        let target = &rest[open + 1..close];
        let after = &rest[close + 1..];
        // The parameters run to the next link (`, <`) or the end.
        let end = after.find('<').unwrap_or(after.len());
        if rels(&after[..end]).any(|r| r.eq_ignore_ascii_case("next")) {
            return Some(target.to_string());
        }
        rest = &after[end..];
    }
    None
}

/// Whether a `Link` header speaks of paging at all (`next`, `prev`, `first` or `last`): a
/// header of other links (`preload`, `describedby`) says nothing about a next page.
pub(super) fn pages_links(header: &str) -> bool {
    header.split('<').skip(1).any(|link| {
        let params = link.split_once('>').map_or("", |(_, p)| p);
        rels(params).any(|r| {
            ["next", "prev", "previous", "first", "last"]
                .iter()
                .any(|p| r.eq_ignore_ascii_case(p))
        })
    })
}

fn rels(params: &str) -> impl Iterator<Item = &str> {
    params
        .split(';')
        .filter_map(|p| p.split_once('='))
        .filter(|(k, _)| k.trim().eq_ignore_ascii_case("rel"))
        .flat_map(|(_, v)| {
            v.trim()
                .trim_end_matches(',')
                .trim()
                .trim_matches('"')
                .split_ascii_whitespace()
        })
}

/// The operation's query for a next-page URL found `at` (a header or a body pointer). Every
/// pair of its query must be a query parameter the operation declares; a credential the
/// response was scrubbed of (`[redacted]`) is left out (the configured one goes out again).
pub(super) fn from_url(op: &Operation, request: &Url, at: &str, target: &str) -> Next {
    let unmapped = |why: String| Next::Unmapped(Continuation::new(at, target, why));
    let Ok(url) = request.join(target) else {
        return unmapped("it is not a URL".into());
    };
    if target.contains(crate::upstream::REDACTED) {
        return unmapped("it holds a credential of this server's, scrubbed".into());
    }
    if url.origin() != request.origin() {
        return unmapped(format!(
            "it points at another origin ({}) than the request's ({}): a scheme, host or port \
             this server does not call",
            url.origin().ascii_serialization(),
            request.origin().ascii_serialization()
        ));
    }
    // An opaque cursor must go back byte for byte: one that is not text cannot.
    let raw = url.query().unwrap_or_default();
    if raw.split('&').any(|pair| {
        percent_encoding::percent_decode(pair.as_bytes())
            .decode_utf8()
            .is_err()
    }) {
        return unmapped(
            "its query holds bytes that are not text, which a query value cannot carry exactly"
                .into(),
        );
    }
    if url.query().is_none_or(str::is_empty) {
        return unmapped("it has no query to map to the operation's parameters".into());
    }
    let mut query = Map::new();
    for (k, v) in url.query_pairs() {
        // A credential the response was scrubbed of (its name and value, or its value).
        if k.contains(crate::upstream::REDACTED) || v.contains(crate::upstream::REDACTED) {
            continue;
        }
        if !declares(op, &k) {
            return unmapped(format!(
                "its query parameter `{k}` is not one the operation declares"
            ));
        }
        match query.get_mut(k.as_ref()) {
            // A repeated parameter is an array.
            Some(Value::Array(a)) => a.push(Value::String(v.into_owned())),
            Some(first) => {
                let one = first.take();
                *first = Value::Array(vec![one, Value::String(v.into_owned())]);
            }
            None => {
                query.insert(k.into_owned(), Value::String(v.into_owned()));
            }
        }
    }
    Next::Query(query)
}
