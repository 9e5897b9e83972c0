//! The mapper on each convention's response shape, as the real APIs send it.

use serde_json::{Map, Value, json};
use url::Url;

use super::*;
use crate::spec::{Method, Parameter};

fn op(method: Method, query: &[&str], ext: Value) -> Operation {
    Operation {
        id: "listThings".into(),
        method,
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
        extensions: ext.as_object().cloned().unwrap_or_default(),
        required_features: Vec::new(),
        response_types: Vec::new(),
    }
}

fn get(query: &[&str]) -> Operation {
    op(Method::Get, query, Value::Null)
}

fn map(v: Value) -> Map<String, Value> {
    v.as_object().cloned().unwrap_or_default()
}

fn url() -> Url {
    Url::parse("https://api.example/repos/o/r/things?page=1&per_page=10").expect("url")
}

/// (convention, next) for a response.
fn read(op: &Operation, sent: Value, headers: Value, body: Value) -> (&'static str, Next) {
    let list = first_list(&body, String::new());
    let p = paging(
        op,
        &url(),
        &map(sent),
        &map(headers),
        &body,
        list.as_deref(),
    );
    (p.by, p.next)
}

/// The pointer of the body's first list (the test bodies are small: the server's own guess
/// wants a list to be most of the body).
fn first_list(v: &Value, at: String) -> Option<String> {
    match v {
        Value::Array(_) => Some(at),
        Value::Object(m) => m
            .iter()
            .find_map(|(k, c)| first_list(c, format!("{at}/{k}"))),
        _ => None,
    }
}

fn query(v: Value) -> Next {
    Next::Query(map(v))
}

fn unmapped(n: &Next) -> &Continuation {
    match n {
        Next::Unmapped(c) => c,
        other => panic!("not unmapped: {other:?}"),
    }
}

#[test]
fn link_headers_use_only_the_query() {
    let op = get(&["page", "per_page", "state"]);
    let h = |v: &str| json!({"link": v});
    // GitHub's real Link points at /repositories/{id}/…: its query is the next page's.
    assert_eq!(
        read(
            &op,
            json!({}),
            h(
                r#"<https://api.example/repositories/1296269/issues?per_page=10&page=2>; rel="next", <https://api.example/repositories/1296269/issues?per_page=10&page=12>; rel="last""#
            ),
            json!([])
        ),
        ("link", query(json!({"per_page": "10", "page": "2"})))
    );
    // rel among others, relative target.
    assert_eq!(
        read(
            &op,
            json!({}),
            h(r#"</x?page=1>; rel="prev first", </x?page=3&state=open>; rel="next""#),
            json!([])
        )
        .1,
        query(json!({"page": "3", "state": "open"}))
    );
    // The last page: a Link without next ends, and no body cursor is guessed.
    assert_eq!(
        read(
            &op,
            json!({}),
            h(r#"<https://api.example/x?page=9>; rel="last""#),
            json!({"next_cursor": "c"})
        ),
        ("link", Next::End)
    );
    // Another host, an undeclared parameter: shown, not followed, not the end.
    let (_, n) = read(
        &op,
        json!({}),
        h(r#"<https://evil.example/x?page=2>; rel="next""#),
        json!([]),
    );
    assert!(unmapped(&n).why.contains("another origin"), "{n:?}");
    let (_, n) = read(
        &op,
        json!({}),
        h(r#"<https://api.example/x?page=2&since=4>; rel="next""#),
        json!([]),
    );
    assert_eq!(unmapped(&n).at, "header link");
    assert!(unmapped(&n).why.contains("`since`"));
    // A credential the response was scrubbed of is left out: the configured one goes again.
    assert_eq!(
        read(
            &op,
            json!({}),
            h(r#"<https://api.example/x?page=2&access_token=%5Bredacted%5D>; rel="next""#),
            json!([])
        )
        .1,
        query(json!({"page": "2"}))
    );
    // A query credential the API echoed, scrubbed name and value together: left out.
    assert_eq!(
        read(
            &op,
            json!({}),
            h(r#"<https://api.example/x?%5Bredacted%5D&page=2>; rel="next""#),
            json!([])
        )
        .1,
        query(json!({"page": "2"}))
    );
    // A cursor that is not text cannot go back byte for byte.
    let (_, n) = read(
        &op,
        json!({}),
        h(r#"<https://api.example/x?page=%FF%FE>; rel="next""#),
        json!([]),
    );
    assert!(unmapped(&n).why.contains("not text"), "{n:?}");
    // Another port is another origin.
    let (_, n) = read(
        &op,
        json!({}),
        h(r#"<https://api.example:8443/x?page=2>; rel="next""#),
        json!([]),
    );
    assert!(unmapped(&n).why.contains("another origin"), "{n:?}");
    // A Link header of other links says nothing about pages.
    assert_eq!(
        read(
            &op,
            json!({}),
            h(r#"</style.css>; rel="preload""#),
            json!([])
        ),
        ("none", Next::End)
    );
}

#[test]
fn body_conventions() {
    let sent = json!({"limit": 3});
    let stripe =
        json!({"object": "list", "data": [{"id": "ch_1"}, {"id": "ch_2"}], "has_more": true});
    let op_s = get(&["limit", "starting_after", "ending_before"]);
    assert_eq!(
        read(&op_s, sent.clone(), json!({}), stripe),
        (
            "stripe",
            query(json!({"limit": 3, "starting_after": "ch_2"}))
        )
    );
    let last = json!({"data": [{"id": "ch_9"}], "has_more": false});
    assert_eq!(read(&op_s, sent.clone(), json!({}), last).1, Next::End);
    // Stripe's search pages by `next_page` into `page`, has_more beside it.
    let search = json!({"object": "search_result", "data": [{"id": "cus_1"}], "has_more": true, "next_page": "pg_abc"});
    assert_eq!(
        read(
            &get(&["page", "limit", "query"]),
            json!({"query": "x"}),
            json!({}),
            search
        ),
        (
            "page-number",
            query(json!({"query": "x", "page": "pg_abc"}))
        )
    );
    let k8s = |c: &str| json!({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "9", "continue": c}, "items": [{"metadata": {"name": "a"}}]});
    let op_k = get(&["limit", "continue"]);
    assert_eq!(
        read(&op_k, json!({"limit": 1}), json!({}), k8s("eyJ2Ijoi")),
        (
            "kubernetes",
            query(json!({"limit": 1, "continue": "eyJ2Ijoi"}))
        )
    );
    assert_eq!(read(&op_k, json!({}), json!({}), k8s("")).1, Next::End);
    let slack = json!({"ok": true, "channels": [{"id": "C1"}], "has_more": true, "response_metadata": {"next_cursor": "dXNlcjpVMDYx"}});
    assert_eq!(
        read(&get(&["cursor", "limit"]), json!({}), json!({}), slack),
        ("slack", query(json!({"cursor": "dXNlcjpVMDYx"})))
    );
    let google = json!({"kind": "blogger#postList", "items": [{"id": "1"}], "nextPageToken": "t2"});
    assert_eq!(
        read(
            &get(&["pageToken", "maxResults"]),
            json!({}),
            json!({}),
            google.clone()
        ),
        ("google", query(json!({"pageToken": "t2"})))
    );
    // Not declared: shown, not the end.
    let (_, n) = read(&get(&["page"]), json!({}), json!({}), google);
    assert_eq!(unmapped(&n).at, "/nextPageToken");
    assert_eq!(unmapped(&n).value, "t2");
    let aws = json!({"Blocks": [{"BlockIndex": 1}], "NextToken": "AQID"});
    assert_eq!(
        read(
            &get(&["pageToken", "maxResults", "NextToken"]),
            json!({}),
            json!({}),
            aws
        )
        .1,
        query(json!({"pageToken": "AQID"}))
    );
    let odata = json!({"value": [{"id": "u1"}], "@odata.nextLink": "https://api.example/v1/users?$top=1&$skiptoken=X1"});
    assert_eq!(
        read(
            &get(&["$top", "$skiptoken"]),
            json!({}),
            json!({}),
            odata.clone()
        ),
        ("odata", query(json!({"$top": "1", "$skiptoken": "X1"})))
    );
    let (_, n) = read(&get(&["$top"]), json!({}), json!({}), odata);
    assert!(unmapped(&n).why.contains("$skiptoken"));
    let hal = json!({"items": [{"key": "f"}], "_links": {"next": {"href": "/api/v2/flags/p?limit=1&offset=1"}}});
    assert_eq!(
        read(&get(&["limit", "offset"]), json!({}), json!({}), hal).1,
        query(json!({"limit": "1", "offset": "1"}))
    );
    let jsonapi =
        |next: Value| json!({"data": [{"id": "1"}], "links": {"prev": null, "next": next}});
    assert_eq!(
        read(
            &get(&["page[size]", "page[after]"]),
            json!({}),
            json!({}),
            jsonapi(json!(
                "https://api.example/api/v1/accounts?page%5Bsize%5D=1&page%5Bafter%5D=WyIx"
            ))
        )
        .1,
        query(json!({"page[size]": "1", "page[after]": "WyIx"}))
    );
    assert_eq!(
        read(
            &get(&["page[size]"]),
            json!({}),
            json!({}),
            jsonapi(Value::Null)
        )
        .1,
        Next::End
    );
    let twilio = json!({"conversations": [{"sid": "CH1"}], "meta": {"page": 0, "page_size": 1, "next_page_url": "https://api.example/v1/Conversations?PageSize=1&Page=1&PageToken=PTCH1", "key": "conversations"}});
    assert_eq!(
        read(
            &get(&["PageSize", "Page", "PageToken"]),
            json!({}),
            json!({}),
            twilio
        )
        .1,
        query(json!({"PageSize": "1", "Page": "1", "PageToken": "PTCH1"}))
    );
    let jira = |at: u64, last: bool| json!({"startAt": at, "maxResults": 2, "total": 5, "isLast": last, "values": [{"id": "1"}, {"id": "2"}]});
    let op_j = get(&["startAt", "maxResults"]);
    assert_eq!(
        read(&op_j, json!({"maxResults": 2}), json!({}), jira(2, false)),
        ("jira", query(json!({"maxResults": 2, "startAt": 4})))
    );
    assert_eq!(
        read(&op_j, json!({}), json!({}), jira(4, true)).1,
        Next::End
    );
    // Spotify: the next URL; a cut resumes by offset.
    let spotify = json!({"href": "x", "items": [{"id": "t1"}, {"id": "t2"}], "limit": 2, "next": "https://api.example/v1/albums/a/tracks?offset=2&limit=2", "offset": 0, "previous": null, "total": 5});
    let op_o = get(&["offset", "limit", "market"]);
    let p = paging(
        &op_o,
        &url(),
        &Map::new(),
        &Map::new(),
        &spotify,
        Some("/items"),
    );
    assert_eq!(
        (p.by, p.next),
        ("next-url", query(json!({"offset": "2", "limit": "2"})))
    );
    assert_eq!(
        p.resume,
        Resume::Offset {
            param: "offset",
            at: 0
        }
    );
    // Airflow: offset as sent, `total_entries` in the body.
    let airflow = json!({"dags": [{"dag_id": "a"}, {"dag_id": "b"}], "total_entries": 3});
    assert_eq!(
        read(
            &get(&["offset", "limit"]),
            json!({"limit": 2}),
            json!({}),
            airflow
        )
        .1,
        query(json!({"limit": 2, "offset": 2}))
    );
    let hetzner = |n: Value| json!({"servers": [{"id": 1}], "meta": {"pagination": {"page": 1, "per_page": 1, "previous_page": null, "next_page": n, "last_page": 3, "total_entries": 3}}});
    assert_eq!(
        read(
            &get(&["page", "per_page"]),
            json!({}),
            json!({}),
            hetzner(json!(2))
        )
        .1,
        query(json!({"page": "2"}))
    );
    assert_eq!(
        read(&get(&["page"]), json!({}), json!({}), hetzner(Value::Null)).1,
        Next::End
    );
    // Hetzner's spec declares no `page`: said, not ended.
    assert!(matches!(
        read(&get(&[]), json!({}), json!({}), hetzner(json!(2))).1,
        Next::Unmapped(_)
    ));
    // A numeric cursor goes back as its digits; one past what JSON numbers hold exactly is said.
    let big = json!({"items": [1], "next_cursor": 12345678901234567u64});
    assert_eq!(
        read(&get(&["cursor"]), json!({}), json!({}), big).1,
        query(json!({"cursor": "12345678901234567"}))
    );
    let huge: Value =
        serde_json::from_str(r#"{"items": [1], "next_cursor": 123456789012345678901234567890}"#)
            .expect("json");
    assert!(matches!(
        read(&get(&["cursor"]), json!({}), json!({}), huge).1,
        Next::Unmapped(_)
    ));
    // Jira's `startAt` is not an offset API's `total`: with both declared, `offset` goes on.
    let both = json!({"offset": 5, "total": 100, "items": [{"id": 1}, {"id": 2}, {"id": 3}]});
    assert_eq!(
        read(&get(&["offset", "startAt"]), json!({}), json!({}), both).1,
        query(json!({"offset": 8}))
    );
    let empty = json!({"startAt": 0, "total": 100, "isLast": false, "values": []});
    assert!(matches!(
        read(&get(&["startAt"]), json!({}), json!({}), empty).1,
        Next::Unmapped(_)
    ));
    let square = json!({"customers": [{"id": "C1"}], "cursor": "CUR2"});
    assert_eq!(
        read(&get(&["cursor", "limit"]), json!({}), json!({}), square).1,
        query(json!({"cursor": "CUR2"}))
    );
}

#[test]
fn what_is_not_followed_is_said() {
    // A cursor equal to the one sent would loop.
    let slack = json!({"channels": [{"id": "C1"}], "response_metadata": {"next_cursor": "c1"}});
    let (_, n) = read(&get(&["cursor"]), json!({"cursor": "c1"}), json!({}), slack);
    assert!(unmapped(&n).why.contains("loop"));
    // `has_more: true` with nothing to follow is not the end.
    let (_, n) = read(
        &get(&[]),
        json!({}),
        json!({}),
        json!({"messages": [{"ts": "1"}], "has_more": true}),
    );
    assert_eq!(unmapped(&n).at, "/has_more");
    // A POST's next page goes in its body.
    let aws = json!({"ReportDefinitions": [{"ReportName": "a"}], "NextToken": "N2"});
    let (_, n) = read(
        &op(Method::Post, &["NextToken"], Value::Null),
        json!({}),
        json!({}),
        aws,
    );
    assert!(unmapped(&n).why.contains("POST"), "{n:?}");
    // The list's envelope is read too (Spotify's followed artists).
    let followed = json!({"artists": {"items": [{"id": "a1"}], "next": "https://api.example/v1/me/following?type=artist&after=a1&limit=1", "cursors": {"after": "a1"}, "limit": 1}});
    assert_eq!(
        read(
            &get(&["type", "after", "limit"]),
            json!({}),
            json!({}),
            followed
        )
        .1,
        query(json!({"type": "artist", "after": "a1", "limit": "1"}))
    );
    // Values shown are bounded.
    let long = json!({"items": [1], "nextPageToken": "x".repeat(5000)});
    let (_, n) = read(&get(&[]), json!({}), json!({}), long);
    assert!(unmapped(&n).value.len() <= MAX_SHOWN + 3);
}

#[test]
fn extensions_come_first() {
    // Azure: items at `itemName`, the next link at `nextLinkName`.
    let ms = op(
        Method::Get,
        &["api-version", "$skiptoken"],
        json!({"x-ms-pageable": {"nextLinkName": "nextLink", "itemName": "modelList"}}),
    );
    assert_eq!(declared_list(&ms).as_deref(), Some("/modelList"));
    let body = json!({"modelList": [{"modelId": "m"}], "nextLink": "https://api.example/custom/models?api-version=2&$skiptoken=S2", "next_cursor": "no"});
    let p = paging(
        &ms,
        &url(),
        &Map::new(),
        &Map::new(),
        &body,
        Some("/modelList"),
    );
    assert_eq!(
        (p.by, p.next),
        (
            "x-ms-pageable",
            query(json!({"api-version": "2", "$skiptoken": "S2"}))
        )
    );
    // `nextLinkName: null`: one page, whatever the body holds.
    let single = op(
        Method::Get,
        &["cursor"],
        json!({"x-ms-pageable": {"nextLinkName": null}}),
    );
    assert_eq!(
        paging(
            &single,
            &url(),
            &Map::new(),
            &Map::new(),
            &json!({"value": [], "next_cursor": "c"}),
            None
        )
        .next,
        Next::End
    );
    // Speakeasy and Fern cursors.
    let speakeasy = op(
        Method::Get,
        &["after"],
        json!({"x-speakeasy-pagination": {"type": "cursor", "inputs": [{"name": "after", "in": "parameters", "type": "cursor"}], "outputs": {"nextCursor": "$.meta.next", "results": "$.records"}}}),
    );
    let body = json!({"records": [{"id": 1}], "meta": {"next": "r2"}});
    assert_eq!(
        paging(
            &speakeasy,
            &url(),
            &Map::new(),
            &Map::new(),
            &body,
            Some("/records")
        )
        .next,
        query(json!({"after": "r2"}))
    );
    let fern = op(
        Method::Get,
        &["page"],
        json!({"x-fern-pagination": {"offset": "$request.page", "results": "$response.data"}}),
    );
    let body = json!({"data": [{"id": 1}]});
    assert_eq!(
        paging(
            &fern,
            &url(),
            &map(json!({"page": 3})),
            &Map::new(),
            &body,
            Some("/data")
        )
        .next,
        query(json!({"page": 4}))
    );
    assert_eq!(
        paging(
            &fern,
            &url(),
            &map(json!({"page": 3})),
            &Map::new(),
            &json!({"data": []}),
            Some("/data")
        )
        .next,
        Next::End
    );
    // One this server cannot follow (a cursor in the request body) is said.
    let body_cursor = op(
        Method::Get,
        &[],
        json!({"x-speakeasy-pagination": {"type": "cursor", "inputs": [{"name": "after", "in": "requestBody", "type": "cursor"}], "outputs": {"nextCursor": "$.next"}}}),
    );
    let n = paging(
        &body_cursor,
        &url(),
        &Map::new(),
        &Map::new(),
        &json!({"data": [1]}),
        None,
    )
    .next;
    assert!(unmapped(&n).why.contains("requestBody"), "{n:?}");
}

#[test]
fn resuming_inside_a_page() {
    let q = map(json!({"per_page": 30, "page": 2}));
    // A page number: the same page, the items shown skipped.
    assert_eq!(resume(&Resume::Skip, &q, 0, 13, None), (q.clone(), 13));
    assert_eq!(resume(&Resume::Skip, &q, 5, 13, None), (q.clone(), 18));
    // An offset: the page's own plus the items before.
    let o = map(json!({"offset": 40, "limit": 20}));
    assert_eq!(
        resume(
            &Resume::Offset {
                param: "offset",
                at: 40
            },
            &o,
            2,
            7,
            None
        ),
        (map(json!({"offset": 49, "limit": 20})), 0)
    );
    // Stripe: after the last item shown; at the page's first item, the page as fetched.
    let s = map(json!({"limit": 10, "ending_before": "x"}));
    let after = Resume::AfterItem {
        param: "starting_after",
        key: "id",
    };
    assert_eq!(
        resume(&after, &s, 0, 4, Some(&json!("ch_4"))),
        (map(json!({"limit": 10, "starting_after": "ch_4"})), 0)
    );
    assert_eq!(resume(&after, &s, 0, 0, None), (s.clone(), 0));
}

#[test]
fn rows_have_unique_names() {
    let mut names = conventions::names();
    let n = names.len();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), n);
}
