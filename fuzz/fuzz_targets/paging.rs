//! Paging (`tools::paging`, where a response's next page is and how a cut page resumes) on
//! responses drawn from the fuzzer's bytes: `Link` headers and bodies made of every
//! convention's markers (cursors, next links on this and other hosts, offsets, totals, flags,
//! pagination extensions), with operations declaring some of the parameters.
//!
//! Oracle (issue 42): nothing panics or overflows; a next query only names parameters the
//! operation declares (besides those sent) and carries no scrubbed credential it did not
//! send; a POST's is never a query; a continuation's value is bounded; resuming at any item of
//! any page (`usize::MAX` included) gives a query of declared parameters.

#![no_main]

use apigate::spec::{Method, Operation, ParamIn, Parameter};
use apigate::tools::paging::{Next, paging, resume};
use arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value, json};
use url::Url;

const PARAMS: &[&str] = &[
    "page", "per_page", "limit", "offset", "cursor", "continue", "pageToken", "page_token",
    "starting_after", "ending_before", "startAt", "maxResults", "after", "NextToken",
    "nextToken", "PageToken", "Page", "PageSize", "$skiptoken", "$top", "page[after]", "skip",
];

const KEYS: &[&str] = &[
    "has_more", "data", "items", "id", "metadata", "continue", "response_metadata",
    "next_cursor", "nextPageToken", "next_page_token", "NextToken", "nextToken", "@odata.nextLink",
    "nextLink", "_links", "next", "href", "links", "meta", "next_page_url", "startAt", "total",
    "isLast", "offset", "limit", "total_entries", "pagination", "next_page", "cursor", "value",
    "values", "hasMore", "more",
];

const URLS: &[&str] = &[
    "https://api.example/things?page=2", "/repositories/1/issues?page=3&per_page=10",
    "https://evil.example/x?page=2", "?cursor=abc", "https://api.example/x?token=%5Bredacted%5D",
    "https://api.example/x?page=2&page=3", "not a url", "", "https://api.example/x",
    "https://api.example/x?offset=18446744073709551615&limit=1",
];

fn key(u: &mut Unstructured<'_>) -> Result<String> {
    Ok(if u.ratio(1, 6)? {
        apigate_fuzz::string(u)?
    } else {
        u.choose(KEYS)?.to_string()
    })
}

fn leaf(u: &mut Unstructured<'_>) -> Result<Value> {
    Ok(match u.int_in_range(0..=6)? {
        0 => Value::Bool(u.arbitrary()?),
        1 => Value::from(u.arbitrary::<u64>()?),
        2 => Value::from(u.int_in_range(0..=50u64)?),
        3 => Value::String(u.choose(URLS)?.to_string()),
        4 => Value::Null,
        5 => Value::String(apigate_fuzz::string(u)?),
        _ => apigate_fuzz::value(u, 2)?,
    })
}

fn body(u: &mut Unstructured<'_>, depth: usize) -> Result<Value> {
    if depth == 0 || u.ratio(1, 3)? {
        return leaf(u);
    }
    if u.ratio(1, 4)? {
        let n = u.int_in_range(0..=12)?;
        return (0..n)
            .map(|i| Ok(json!({"id": format!("i{i}"), "n": i})))
            .collect::<Result<Vec<_>>>()
            .map(Value::Array);
    }
    let mut m = Map::new();
    for _ in 0..u.int_in_range(0..=6)? {
        m.insert(key(u)?, body(u, depth - 1)?);
    }
    Ok(Value::Object(m))
}

fn link(u: &mut Unstructured<'_>) -> Result<String> {
    let mut out = String::new();
    for _ in 0..u.int_in_range(0..=3)? {
        let rel = *u.choose(&["next", "prev", "last", "first next", "preload", "\"next\""])?;
        let target = if u.ratio(1, 4)? {
            apigate_fuzz::string(u)?
        } else {
            u.choose(URLS)?.to_string()
        };
        out.push_str(&format!("<{target}>; rel={rel}, "));
    }
    if u.ratio(1, 5)? {
        out.push_str(&apigate_fuzz::string(u)?);
    }
    Ok(out)
}

fn extension(u: &mut Unstructured<'_>) -> Result<Map<String, Value>> {
    let mut m = Map::new();
    match u.int_in_range(0..=4)? {
        0 => {
            m.insert("x-ms-pageable".into(), json!({"nextLinkName": leaf(u)?, "itemName": leaf(u)?}));
        }
        1 => {
            let t = *u.choose(&["cursor", "offsetLimit", "url", "x"])?;
            let ty = *u.choose(&["cursor", "offset", "page", "limit"])?;
            let at = *u.choose(&["parameters", "requestBody"])?;
            let name = *u.choose(PARAMS)?;
            let path = *u.choose(&["$.next", "$.meta.next", "$.data", "$[0]", "next", "$response.a.b"])?;
            m.insert(
                "x-speakeasy-pagination".into(),
                json!({"type": t, "inputs": [{"name": name, "in": at, "type": ty}], "outputs": {"nextCursor": path, "results": path, "nextUrl": path}}),
            );
        }
        2 => {
            let name = *u.choose(PARAMS)?;
            let path = *u.choose(&["$response.next", "$response.data", "$request.x.y", "$.x[0]"])?;
            let k = *u.choose(&["cursor", "offset"])?;
            m.insert(
                "x-fern-pagination".into(),
                json!({k: format!("$request.{name}"), "next_cursor": path, "results": path, "step": leaf(u)?, "has-next-page": path}),
            );
        }
        _ => {}
    }
    Ok(m)
}

fn run(u: &mut Unstructured<'_>) -> Result<()> {
    let declared: Vec<&str> = PARAMS.iter().copied().filter(|_| u.ratio(1, 2).unwrap_or(false)).collect();
    let op = Operation {
        id: "list".into(),
        method: if u.ratio(1, 6)? { Method::Post } else { Method::Get },
        path: "/things".into(),
        summary: None,
        description: None,
        tags: Vec::new(),
        deprecated: false,
        parameters: declared
            .iter()
            .map(|n| Parameter {
                name: n.to_string(),
                location: ParamIn::Query,
                required: false,
                description: None,
                schema: json!({"type": "string", "default": 1}),
                style: "form".into(),
                explode: true,
                deprecated: false,
            })
            .collect(),
        request_body: None,
        responses: Vec::new(),
        security: None,
        servers: Vec::new(),
        extensions: extension(u)?,
        required_features: Vec::new(),
        response_types: Vec::new(),
    };
    let mut sent = Map::new();
    for name in &declared {
        if u.ratio(1, 3)? {
            sent.insert(name.to_string(), leaf(u)?);
        }
    }
    let mut headers = Map::new();
    if u.ratio(2, 3)? {
        headers.insert("link".into(), Value::String(link(u)?));
    }
    let body = body(u, 4)?;
    let list = *u.choose(&["", "/data", "/items", "/value", "/values", "/x/items"])?;
    let list = body.pointer(list).filter(|v| v.is_array()).map(|_| list);
    let request = Url::parse("https://api.example/things?page=1").expect("url");
    let p = paging(&op, &request, &sent, &headers, &body, list);
    match &p.next {
        Next::Query(q) => {
            assert_eq!(op.method, Method::Get, "a POST's next page is never a query");
            for (k, v) in q {
                assert!(declared.contains(&k.as_str()) || sent.contains_key(k), "{k} is not declared: {q:?}");
                if sent.get(k) != Some(v) {
                    assert!(!v.to_string().contains("[redacted]"), "{q:?}");
                }
            }
        }
        Next::Unmapped(c) => assert!(c.value.len() <= 512 + '…'.len_utf8(), "{}", c.value.len()),
        Next::End => {}
    }
    let items = list.and_then(|l| body.pointer(l)).and_then(Value::as_array).map_or(0, Vec::len);
    for index in [0, items / 2, items, usize::MAX] {
        let skipped = u.arbitrary::<usize>()?;
        let (q, _) = resume(&p.resume, &sent, skipped, index, Some(&json!("i1")));
        for k in q.keys() {
            assert!(declared.contains(&k.as_str()) || sent.contains_key(k), "{k}: {q:?}");
        }
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = run(&mut Unstructured::new(data));
});
