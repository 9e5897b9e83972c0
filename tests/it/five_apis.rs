//! One local upstream for five real APIs' shapes, for the agent-task benchmark
//! (`agent_tasks.rs`): an axum app answering where GitHub, Stripe, Slack, Spotify and
//! Kubernetes put their operations (their specs' paths: `/repos/…`, `/v1/charges`,
//! `/api/conversations.list`, `/v1/playlists/…`, `/api/v1/namespaces/…`), with objects of
//! their real fields and size (generated deterministically) and the response headers each
//! really sends (rate limits, request ids, CORS, security headers), paginated the way each
//! paginates:
//!
//! - GitHub: `GET /repos/{owner}/{repo}/issues?state=&sort=&per_page=&page=` ([`ISSUES`]
//!   issues of `fixture_api::issue`, ~4.9 KB each) with a `Link` header pointing at
//!   `/repositories/{id}/issues?…&page=N`, as the real API does; `GET
//!   /repos/{owner}/{repo}/issues/{number}`; `POST …/issues/{number}/comments` (201 with
//!   `Location`).
//! - Stripe: `GET /v1/charges?limit=&starting_after=` (a list with `has_more`, charges of
//!   `fixture_api::charge`, ~2.3 KB each); `POST /v1/charges/{charge}/refund` (the charge, refunded).
//! - Slack: `GET /api/conversations.list?limit=&cursor=` ([`CHANNELS`] channels,
//!   `response_metadata.next_cursor`); `GET /api/conversations.history?channel=&limit=`;
//!   `POST /api/chat.postMessage` (form-encoded `channel`, `text`).
//! - Spotify: `GET /v1/playlists/{id}/tracks?limit=&offset=` (a paging object with
//!   `offset`, `limit`, `total` and the `next` URL; tracks of ~4 KB with their
//!   `available_markets`); `GET /v1/search?q=&type=track&limit=`.
//! - Kubernetes: `GET /api/v1/namespaces/{ns}/pods?limit=&continue=&labelSelector=` (a
//!   `PodList` whose `metadata.continue` names the next page under `limit`); `GET
//!   /api/v1/namespaces/{ns}/pods/{name}` (a pod with metadata, spec and status, ~4 KB).
//!
//! Every request is recorded (`requests()`: method, path and query, body), so a task can
//! check what the API received. [`FiveApis::data`] is the fixture's data as JSON, for the
//! tasks' expected answers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine as _;
use serde_json::{Value, json};

use crate::fixture_api::{self, CHARGES, ISSUES};

/// The GitHub repository's owner, name and numeric id (the id its `Link` URLs use).
pub const OWNER: &str = "octo";
pub const REPO: &str = "hello";
pub const REPO_ID: u64 = 1296269;
/// How many channels the Slack workspace has.
pub const CHANNELS: usize = 150;
/// How many messages each Slack channel has.
pub const MESSAGES: usize = 40;
/// How many tracks the Spotify playlist has.
pub const PLAYLIST_TRACKS: usize = 60;
/// The Spotify playlist's id.
pub const PLAYLIST: &str = "37i9dQZF1DXcBWIGoYBM5M";
/// The Kubernetes namespace the pods run in.
pub const NAMESPACE: &str = "shop";

/// One request the upstream received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: Method,
    /// Path and query.
    pub uri: String,
    pub body: String,
}

/// The running upstream.
pub struct FiveApis {
    pub addr: std::net::SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

#[derive(Clone)]
struct St {
    base: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl FiveApis {
    /// Starts the upstream on 127.0.0.1:0.
    pub async fn start() -> FiveApis {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let st = St {
            base: format!("http://{addr}"),
            seen: seen.clone(),
        };
        let app = Router::new()
            .route("/repos/{owner}/{repo}/issues", get(github_issues))
            .route("/repos/{owner}/{repo}/issues/{number}", get(github_issue))
            .route(
                "/repos/{owner}/{repo}/issues/{number}/comments",
                post(github_comment),
            )
            .route("/v1/charges", get(stripe_charges))
            .route("/v1/charges/{charge}/refund", post(stripe_refund))
            .route("/api/conversations.list", get(slack_channels))
            .route("/api/conversations.history", get(slack_history))
            .route("/api/chat.postMessage", post(slack_post))
            .route("/v1/playlists/{id}/tracks", get(spotify_playlist_tracks))
            .route("/v1/search", get(spotify_search))
            .route("/api/v1/namespaces/{ns}/pods", get(k8s_pods))
            .route("/api/v1/namespaces/{ns}/pods/{name}", get(k8s_pod))
            .with_state(st);
        tokio::spawn(async move { axum::serve(listener, app).await });
        FiveApis { addr, seen }
    }

    /// The base URL, each API's `upstream`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request received, in order.
    pub fn requests(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// The fixture's data, as the tasks' `expected` expressions read it.
    pub fn data() -> Value {
        json!({
            "issues": (1..=ISSUES as u64).rev().map(|n| fixture_api::issue(OWNER, REPO, n)).collect::<Vec<_>>(),
            "charges": (1..=CHARGES as u64).rev().map(fixture_api::charge).collect::<Vec<_>>(),
            "channels": (0..CHANNELS).map(channel).collect::<Vec<_>>(),
            "messages": (0..MESSAGES).map(|i| message(DEPLOYS, i)).collect::<Vec<_>>(),
            "playlist": (0..PLAYLIST_TRACKS).map(|i| track(i as u64)).collect::<Vec<_>>(),
            "catalog": CATALOG.iter().enumerate().map(|(i, _)| catalog_track(i)).collect::<Vec<_>>(),
            "pods": (0..PODS.len()).map(pod).collect::<Vec<_>>(),
        })
    }
}

fn record(st: &St, method: Method, uri: &Uri, body: &[u8]) {
    st.seen.lock().unwrap().push(Seen {
        method,
        uri: uri.to_string(),
        body: String::from_utf8_lossy(body).into_owned(),
    });
}

type Params = Query<HashMap<String, String>>;

fn number(q: &Params, name: &str, default: usize) -> usize {
    q.get(name).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn form(body: &[u8]) -> HashMap<String, String> {
    url::form_urlencoded::parse(body).into_owned().collect()
}

/// A JSON answer with these headers (name, value).
fn answer(status: StatusCode, headers: Vec<(&str, String)>, body: &Value) -> Response {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        map.append(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_str(&value).unwrap(),
        );
    }
    let text = body.to_string();
    (status, map, text).into_response()
}

// ---------------------------------------------------------------------------------- GitHub

/// The headers api.github.com sends with a JSON answer (a real response's set).
fn github_headers(n: u64) -> Vec<(&'static str, String)> {
    vec![
        ("content-type", "application/json; charset=utf-8".into()),
        ("cache-control", "private, max-age=60, s-maxage=60".into()),
        ("vary", "Accept, Authorization, Cookie, X-GitHub-OTP,Accept-Encoding, Accept, X-Requested-With".into()),
        ("etag", format!("W/\"{:064x}\"", u128::from(n).wrapping_mul(0x9e37_79b9_7f4a_7c15_f39c_c060_5ced_c834))),
        ("x-oauth-scopes", "read:org, repo".into()),
        ("x-accepted-oauth-scopes", "repo".into()),
        ("github-authentication-token-expiration", "2026-09-30 00:00:00 UTC".into()),
        ("x-github-media-type", "github.v3; format=json".into()),
        ("x-github-api-version-selected", "2022-11-28".into()),
        ("x-ratelimit-limit", "5000".into()),
        ("x-ratelimit-remaining", format!("{}", 4999 - n % 100)),
        ("x-ratelimit-reset", "1772467200".into()),
        ("x-ratelimit-used", format!("{}", 1 + n % 100)),
        ("x-ratelimit-resource", "core".into()),
        ("access-control-expose-headers", "ETag, Link, Location, Retry-After, X-GitHub-OTP, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Used, X-RateLimit-Resource, X-RateLimit-Reset, X-OAuth-Scopes, X-Accepted-OAuth-Scopes, X-Poll-Interval, X-GitHub-Media-Type, X-GitHub-SSO, X-GitHub-Request-Id, Deprecation, Sunset".into()),
        ("access-control-allow-origin", "*".into()),
        ("strict-transport-security", "max-age=31536000; includeSubdomains; preload".into()),
        ("x-frame-options", "deny".into()),
        ("x-content-type-options", "nosniff".into()),
        ("x-xss-protection", "0".into()),
        ("referrer-policy", "origin-when-cross-origin, strict-origin-when-cross-origin".into()),
        ("content-security-policy", "default-src 'none'".into()),
        ("server", "github.com".into()),
        ("x-github-request-id", format!("C6A2:3F1B2:{:X}:{:X}:67F0A1B2", 0x1A2B3C4 + n, 0x1B2C3D4 + n)),
    ]
}

/// `GET /repos/{owner}/{repo}/issues`: `state` (open, closed, all; default open), `sort`
/// (created, updated; default created), newest first, `per_page` (default 30, at most 100)
/// and `page`; the `Link` header names `/repositories/{id}/issues`, as GitHub's does.
async fn github_issues(
    State(st): State<St>,
    Path((owner, repo)): Path<(String, String)>,
    uri: Uri,
    q: Params,
) -> Response {
    record(&st, Method::GET, &uri, b"");
    let state = q.get("state").map_or("open", String::as_str);
    let mut issues: Vec<Value> = (1..=ISSUES as u64)
        .rev()
        .map(|n| fixture_api::issue(&owner, &repo, n))
        .filter(|i| state == "all" || i["state"] == state)
        .collect();
    if q.get("sort").map(String::as_str) == Some("updated") {
        issues.sort_by(|a, b| b["updated_at"].as_str().cmp(&a["updated_at"].as_str()));
    }
    let per_page = number(&q, "per_page", 30).clamp(1, 100);
    let page = number(&q, "page", 1).max(1);
    let last = issues.len().div_ceil(per_page).max(1);
    let shown: Vec<Value> = issues
        .into_iter()
        .skip((page - 1) * per_page)
        .take(per_page)
        .collect();
    let mut headers = github_headers(page as u64);
    // GitHub's Link: the repository by id, every query parameter of the request, `page` last.
    let kept: Vec<String> = url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
        .filter(|(k, _)| k != "page")
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let to = |p: usize| {
        let mut query = kept.clone();
        query.push(format!("page={p}"));
        format!(
            "<{}/repositories/{REPO_ID}/issues?{}>",
            st.base,
            query.join("&")
        )
    };
    let mut links = Vec::new();
    if page > 1 {
        links.push(format!("{}; rel=\"prev\"", to(page - 1)));
    }
    if page < last {
        links.push(format!("{}; rel=\"next\"", to(page + 1)));
        links.push(format!("{}; rel=\"last\"", to(last)));
    }
    if page > 1 {
        links.push(format!("{}; rel=\"first\"", to(1)));
    }
    if !links.is_empty() {
        headers.push(("link", links.join(", ")));
    }
    answer(StatusCode::OK, headers, &Value::Array(shown))
}

async fn github_issue(
    State(st): State<St>,
    Path((owner, repo, n)): Path<(String, String, u64)>,
    uri: Uri,
) -> Response {
    record(&st, Method::GET, &uri, b"");
    if !(1..=ISSUES as u64).contains(&n) {
        return answer(
            StatusCode::NOT_FOUND,
            github_headers(n),
            &json!({"message": "Not Found", "documentation_url": "https://docs.github.com/rest/issues/issues#get-an-issue", "status": "404"}),
        );
    }
    answer(
        StatusCode::OK,
        github_headers(n),
        &fixture_api::issue(&owner, &repo, n),
    )
}

/// The id GitHub gives the comment created on issue `n`.
pub fn comment_id(n: u64) -> u64 {
    2_047_558_000 + n
}

/// `POST …/issues/{n}/comments` with `{"body": …}`: 201, the comment, and its `Location`.
async fn github_comment(
    State(st): State<St>,
    Path((owner, repo, n)): Path<(String, String, u64)>,
    uri: Uri,
    body: Bytes,
) -> Response {
    record(&st, Method::POST, &uri, &body);
    let text = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|b| b["body"].as_str().map(str::to_string));
    let Some(text) = text.filter(|_| (1..=ISSUES as u64).contains(&n)) else {
        return answer(
            StatusCode::UNPROCESSABLE_ENTITY,
            github_headers(n),
            &json!({"message": "Invalid request.\n\n\"body\" wasn't supplied.", "documentation_url": "https://docs.github.com/rest/issues/comments#create-an-issue-comment", "status": "422"}),
        );
    };
    let r = format!("https://api.github.com/repos/{owner}/{repo}");
    let id = comment_id(n);
    let comment = json!({
        "url": format!("{r}/issues/comments/{id}"),
        "html_url": format!("https://github.com/{owner}/{repo}/issues/{n}#issuecomment-{id}"),
        "issue_url": format!("{r}/issues/{n}"),
        "id": id, "node_id": format!("IC_kwDOAbc{id}"),
        "user": fixture_api::user("octocat", 1),
        "created_at": "2026-03-11T09:30:00Z", "updated_at": "2026-03-11T09:30:00Z",
        "author_association": "OWNER", "body": text,
        "reactions": {"url": format!("{r}/issues/comments/{id}/reactions"), "total_count": 0,
            "+1": 0, "-1": 0, "laugh": 0, "hooray": 0, "confused": 0, "heart": 0, "rocket": 0, "eyes": 0},
        "performed_via_github_app": null
    });
    let mut headers = github_headers(n);
    headers.push((
        "location",
        format!("{}/repos/{owner}/{repo}/issues/comments/{id}", st.base),
    ));
    answer(StatusCode::CREATED, headers, &comment)
}

// ---------------------------------------------------------------------------------- Stripe

fn request_id(seed: u64) -> String {
    format!(
        "req_{}",
        base62(seed.wrapping_mul(0x2545_f491_4f6c_dd1d), 14)
    )
}

/// The headers api.stripe.com sends.
fn stripe_headers(seed: u64, idempotency: Option<String>) -> Vec<(&'static str, String)> {
    let mut h = vec![
        ("server", "nginx".into()),
        ("content-type", "application/json".into()),
        ("access-control-allow-credentials", "true".into()),
        ("access-control-allow-methods", "GET,HEAD,PUT,PATCH,POST,DELETE".into()),
        ("access-control-allow-origin", "*".into()),
        ("access-control-expose-headers", "Request-Id, Stripe-Manage-Version, Stripe-Should-Retry, X-Stripe-External-Auth-Required, X-Stripe-Privileged-Session-Required".into()),
        ("access-control-max-age", "300".into()),
        ("cache-control", "no-cache, no-store".into()),
        ("content-security-policy", "base-uri 'none'; default-src 'none'; form-action 'none'; frame-ancestors 'none'; img-src 'self'; script-src 'self' 'report-sample'; style-src 'self'; worker-src 'none'; upgrade-insecure-requests; report-uri https://q.stripe.com/csp-violation?q=4QI7ysw".into()),
        ("request-id", request_id(seed)),
        ("stripe-version", "2024-06-20".into()),
        ("vary", "Origin".into()),
        ("x-stripe-priority-routing-enabled", "true".into()),
        ("x-stripe-routing-context-priority-tier", "api-testmode".into()),
        ("x-wc", "ABGHI".into()),
        ("strict-transport-security", "max-age=63072000; includeSubDomains; preload".into()),
    ];
    if let Some(key) = idempotency {
        h.push(("original-request", request_id(seed)));
        h.push(("idempotency-key", key));
        h.push(("stripe-should-retry", "false".into()));
    }
    h
}

fn stripe_error(message: &str) -> Response {
    answer(
        StatusCode::BAD_REQUEST,
        stripe_headers(0, None),
        &json!({"error": {"type": "invalid_request_error", "message": message,
            "request_log_url": "https://dashboard.stripe.com/test/logs/req_0?t=1680000000"}}),
    )
}

/// `GET /v1/charges?limit=&starting_after=`: newest first, `has_more`.
async fn stripe_charges(State(st): State<St>, uri: Uri, q: Params) -> Response {
    record(&st, Method::GET, &uri, b"");
    let limit = number(&q, "limit", 10);
    if !(1..=100).contains(&limit) {
        return stripe_error("This value must be less than or equal to 100.");
    }
    let start = match q.get("starting_after") {
        Some(after) => match (1..=CHARGES as u64).find(|n| fixture_api::charge_id(*n) == *after) {
            Some(n) => CHARGES - n as usize + 1,
            None => return stripe_error(&format!("No such charge: '{after}'")),
        },
        None => 0,
    };
    let data: Vec<Value> = (1..=CHARGES as u64)
        .rev()
        .skip(start)
        .take(limit)
        .map(fixture_api::charge)
        .collect();
    let has_more = start + data.len() < CHARGES;
    answer(
        StatusCode::OK,
        stripe_headers(start as u64, None),
        &json!({"object": "list", "data": data, "has_more": has_more, "url": "/v1/charges"}),
    )
}

/// `POST /v1/charges/{charge}/refund` (form-encoded, `amount` optional): the charge, refunded
/// (in whole without `amount`), as this endpoint answers.
async fn stripe_refund(
    State(st): State<St>,
    Path(id): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    record(&st, Method::POST, &uri, &body);
    let Some(n) = (1..=CHARGES as u64).find(|n| fixture_api::charge_id(*n) == id) else {
        return stripe_error(&format!("No such charge: '{id}'"));
    };
    let mut charge = fixture_api::charge(n);
    let amount = form(&body)
        .get("amount")
        .and_then(|a| a.parse().ok())
        .unwrap_or(250 * n);
    charge["amount_refunded"] = json!(amount);
    charge["refunded"] = json!(amount == 250 * n);
    let key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .map_or_else(
            || format!("{:08x}-refund-{n}", n * 2_654_435_761),
            str::to_string,
        );
    answer(StatusCode::OK, stripe_headers(n, Some(key)), &charge)
}

// ----------------------------------------------------------------------------------- Slack

/// The channel every Slack task is about, and where it stands in the list.
pub const DEPLOYS: usize = 127;

fn channel_id(i: usize) -> String {
    format!("C0{}", base62(i as u64 * 7919 + 13, 9).to_uppercase())
}

fn user_id(i: usize) -> String {
    format!("U0{}", base62(i as u64 * 104_729 + 7, 9).to_uppercase())
}

fn channel_name(i: usize) -> String {
    match i {
        0 => "general".into(),
        1 => "random".into(),
        DEPLOYS => "deploys".into(),
        _ => format!("proj-{}-{i}", fixture_api::words(i as u64, 1)),
    }
}

/// A channel as `conversations.list` returns it.
pub fn channel(i: usize) -> Value {
    let name = channel_name(i);
    let created = 1_449_252_889 + i as u64 * 86_400;
    json!({
        "id": channel_id(i), "name": name, "is_channel": true, "is_group": false, "is_im": false,
        "is_mpim": false, "is_private": false, "created": created, "is_archived": i % 17 == 5,
        "is_general": i == 0, "unlinked": 0, "name_normalized": name, "is_shared": false,
        "is_org_shared": false, "is_pending_ext_shared": false, "pending_shared": [],
        "context_team_id": "T012AB3C4", "updated": created * 1000 + 417, "parent_conversation": null,
        "creator": user_id(i % 9), "is_ext_shared": false, "shared_team_ids": ["T012AB3C4"],
        "pending_connected_team_ids": [], "is_member": i.is_multiple_of(3),
        "topic": {"value": format!("{} {}", name, fixture_api::words(i as u64 + 3, 6)), "creator": user_id(i % 9), "last_set": created + 3600},
        "purpose": {"value": format!("This channel is for {}", fixture_api::words(i as u64 + 11, 12)), "creator": user_id(i % 9), "last_set": created},
        "properties": {"posting_restricted_to": {"type": ["admin", "user"]}, "threads_restricted_to": {"type": ["ra"]}},
        "previous_names": [], "num_members": 4 + i % 40
    })
}

/// Message `i` of a channel, newest first (`i` 0 is the latest), as `conversations.history`
/// returns it: its text in `text` and as rich-text `blocks`.
pub fn message(ch: usize, i: usize) -> Value {
    let ts = format!("{}.{:06}", 1_772_400_000 - i as u64 * 977, 100 + i);
    let text = format!(
        "{} {}",
        ["Deployed", "Rolled back", "Starting", "Paused"][i % 4],
        fixture_api::words((ch * 100 + i) as u64, 9)
    );
    json!({
        "user": user_id(i % 7), "type": "message", "ts": ts,
        "client_msg_id": format!("{:08x}-7b1c-4e2a-9f3d-{:012x}", i * 2_654_435, ch * 1_000 + i),
        "text": text, "team": "T012AB3C4",
        "blocks": [{"type": "rich_text", "block_id": base62(i as u64 + 99, 5),
            "elements": [{"type": "rich_text_section", "elements": [{"type": "text", "text": text}]}]}],
        "reactions": if i.is_multiple_of(3) { json!([{"name": "white_check_mark", "users": [user_id(1), user_id(2)], "count": 2}]) } else { json!([]) }
    })
}

/// The headers slack.com sends.
fn slack_headers(seed: u64) -> Vec<(&'static str, String)> {
    vec![
        ("content-type", "application/json; charset=utf-8".into()),
        ("x-slack-req-id", format!("{:032x}", u128::from(seed + 1).wrapping_mul(0x1f3a_5c7e_9b2d_4f60_8a1c_3e5b_7d9f_2468))),
        ("x-oauth-scopes", "channels:read,channels:history,chat:write,groups:read,users:read".into()),
        ("x-accepted-oauth-scopes", "channels:read,groups:read,mpim:read,im:read".into()),
        ("access-control-expose-headers", "x-slack-req-id, retry-after".into()),
        ("access-control-allow-headers", "slack-route, x-slack-version-ts, x-b3-traceid, x-b3-spanid, x-b3-parentspanid, x-b3-sampled, x-b3-flags".into()),
        ("access-control-allow-origin", "*".into()),
        ("x-slack-backend", "r".into()),
        ("x-slack-shared-secret-outcome", "no-match".into()),
        ("x-slack-edge-shared-secret-outcome", "no-match".into()),
        ("referrer-policy", "no-referrer".into()),
        ("x-content-type-options", "nosniff".into()),
        ("x-xss-protection", "0".into()),
        ("cache-control", "private, no-cache, no-store, must-revalidate".into()),
        ("expires", "Sat, 26 Jul 1997 05:00:00 GMT".into()),
        ("pragma", "no-cache".into()),
        ("strict-transport-security", "max-age=31536000; includeSubDomains; preload".into()),
        ("vary", "Accept-Encoding".into()),
        ("via", "1.1 slack-prod.tinyspeck.com, envoy-www-iad-xbwoyfpb, envoy-edge-iad-obbjlpqr".into()),
        ("x-envoy-attempt-count", "1".into()),
        ("x-envoy-upstream-service-time", "47".into()),
        ("x-backend", "main_normal main_canary_with_overflow main_control_with_overflow".into()),
        ("x-server", "slack-www-hhvm-main-iad-jxkd".into()),
        ("x-slack-shared-secret-outcome", "no-match".into()),
        ("x-edge-backend", "envoy-www".into()),
    ]
}

fn cursor_for(i: usize) -> String {
    base64::engine::general_purpose::STANDARD.encode(format!("team:{}", channel_id(i)))
}

/// `GET /api/conversations.list?limit=&cursor=` (limit default 100, at most 1000).
async fn slack_channels(State(st): State<St>, uri: Uri, q: Params) -> Response {
    record(&st, Method::GET, &uri, b"");
    let limit = number(&q, "limit", 100).clamp(1, 1000);
    let start = match q.get("cursor").filter(|c| !c.is_empty()) {
        Some(c) => match (0..CHANNELS).find(|i| cursor_for(*i) == *c) {
            Some(i) => i,
            None => {
                return answer(
                    StatusCode::OK,
                    slack_headers(1),
                    &json!({"ok": false, "error": "invalid_cursor"}),
                );
            }
        },
        None => 0,
    };
    let exclude_archived = q.get("exclude_archived").map(String::as_str) == Some("true");
    let end = (start + limit).min(CHANNELS);
    let channels: Vec<Value> = (start..end)
        .map(channel)
        .filter(|c| !exclude_archived || c["is_archived"] == false)
        .collect();
    let next = if end < CHANNELS {
        cursor_for(end)
    } else {
        String::new()
    };
    answer(
        StatusCode::OK,
        slack_headers(start as u64),
        &json!({"ok": true, "channels": channels, "response_metadata": {"next_cursor": next}}),
    )
}

/// `GET /api/conversations.history?channel=&limit=` (limit default 100): the newest first.
async fn slack_history(State(st): State<St>, uri: Uri, q: Params) -> Response {
    record(&st, Method::GET, &uri, b"");
    let Some(ch) = q
        .get("channel")
        .and_then(|c| (0..CHANNELS).find(|i| channel_id(*i) == *c))
    else {
        return answer(
            StatusCode::OK,
            slack_headers(2),
            &json!({"ok": false, "error": "channel_not_found"}),
        );
    };
    let limit = number(&q, "limit", 100).clamp(1, 999);
    let messages: Vec<Value> = (0..MESSAGES.min(limit)).map(|i| message(ch, i)).collect();
    let more = limit < MESSAGES;
    answer(
        StatusCode::OK,
        slack_headers(3),
        &json!({"ok": true, "messages": messages, "has_more": more, "pin_count": 2,
            "channel_actions_ts": null, "channel_actions_count": 0,
            "response_metadata": {"next_cursor": if more { base64::engine::general_purpose::STANDARD.encode(format!("bmV4dF90czox{limit}")) } else { String::new() }}}),
    )
}

/// The `ts` Slack gives the message posted.
pub const POSTED_TS: &str = "1772403311.552209";

/// `POST /api/chat.postMessage` with `channel`, `text` (form-encoded).
async fn slack_post(State(st): State<St>, uri: Uri, body: Bytes) -> Response {
    record(&st, Method::POST, &uri, &body);
    let fields = form(&body);
    let ch = fields.get("channel").and_then(|c| {
        (0..CHANNELS)
            .find(|i| channel_id(*i) == *c || channel_name(*i) == c.trim_start_matches('#'))
    });
    let (Some(ch), Some(text)) = (ch, fields.get("text")) else {
        return answer(
            StatusCode::OK,
            slack_headers(4),
            &json!({"ok": false, "error": "channel_not_found"}),
        );
    };
    answer(
        StatusCode::OK,
        slack_headers(5),
        &json!({"ok": true, "channel": channel_id(ch), "ts": POSTED_TS,
            "message": {"user": "U0BOTUSER1", "type": "message", "ts": POSTED_TS, "bot_id": "B0123ABCDEF",
                "app_id": "A0123ABCDEF", "text": text, "team": "T012AB3C4",
                "bot_profile": {"id": "B0123ABCDEF", "deleted": false, "name": "deploy-bot", "updated": 1_700_000_000,
                    "app_id": "A0123ABCDEF", "icons": {"image_36": "https://a.slack-edge.com/80588/img/plugins/app/bot_36.png",
                        "image_48": "https://a.slack-edge.com/80588/img/plugins/app/bot_48.png",
                        "image_72": "https://a.slack-edge.com/80588/img/plugins/app/service_72.png"},
                    "team_id": "T012AB3C4"},
                "blocks": [{"type": "rich_text", "block_id": "xQ3vT", "elements": [{"type": "rich_text_section", "elements": [{"type": "text", "text": text}]}]}]},
            "response_metadata": {"warnings": ["missing_charset"]}, "warning": "missing_charset"}),
    )
}

// --------------------------------------------------------------------------------- Spotify

/// `n` as `len` base-62 digits.
fn base62(mut n: u64, len: usize) -> String {
    const D: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    (0..len)
        .map(|i| {
            n = n
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407 + i as u64);
            D[(n >> 33) as usize % 62] as char
        })
        .collect()
}

fn spotify_id(seed: u64) -> String {
    base62(seed, 22)
}

/// Every market a track is available in (Spotify lists them all, ~185 codes).
fn markets() -> Vec<String> {
    let first = "ABCDEFGHIJKLMNOPRSTUVWZ".as_bytes();
    let second = "ADEFGHILMNORSTUVWYZ".as_bytes();
    first
        .iter()
        .flat_map(|a| {
            second
                .iter()
                .map(move |b| format!("{}{}", *a as char, *b as char))
        })
        .take(185)
        .collect()
}

fn spotify_link(kind: &str, id: &str) -> Value {
    json!({"external_urls": {"spotify": format!("https://open.spotify.com/{kind}/{id}")},
        "href": format!("https://api.spotify.com/v1/{kind}s/{id}"), "id": id, "type": kind,
        "uri": format!("spotify:{kind}:{id}")})
}

fn artist(name: &str, seed: u64) -> Value {
    let id = spotify_id(seed);
    let mut a = spotify_link("artist", &id);
    a["name"] = json!(name);
    a
}

/// A full track object, as Spotify returns it without `market` (~4 KB).
fn track_object(
    name: &str,
    artist_name: &str,
    album_name: &str,
    seed: u64,
    popularity: u64,
) -> Value {
    let id = spotify_id(seed);
    let album_id = spotify_id(seed / 10 + 7);
    let artists = vec![artist(artist_name, seed % 97 + 1000)];
    let image = |size: u64| json!({"height": size, "url": format!("https://i.scdn.co/image/ab67616d0000{size:04}{}", base62(seed / 10, 24)), "width": size});
    let mut album = spotify_link("album", &album_id);
    if let Value::Object(a) = &mut album {
        a.insert("album_type".into(), json!("album"));
        a.insert("artists".into(), json!(artists));
        a.insert("available_markets".into(), json!(markets()));
        a.insert("images".into(), json!([image(640), image(300), image(64)]));
        a.insert("name".into(), json!(album_name));
        a.insert(
            "release_date".into(),
            json!(format!(
                "{}-{:02}-{:02}",
                1975 + seed % 45,
                1 + seed % 12,
                1 + seed % 28
            )),
        );
        a.insert("release_date_precision".into(), json!("day"));
        a.insert("total_tracks".into(), json!(10 + seed % 8));
    }
    let mut t = spotify_link("track", &id);
    if let Value::Object(m) = &mut t {
        m.insert("album".into(), album);
        m.insert("artists".into(), json!(artists));
        m.insert("available_markets".into(), json!(markets()));
        m.insert("disc_number".into(), json!(1));
        m.insert(
            "duration_ms".into(),
            json!(150_000 + seed * 7_919 % 200_000),
        );
        m.insert("explicit".into(), json!(seed.is_multiple_of(5)));
        m.insert(
            "external_ids".into(),
            json!({"isrc": format!("GBUM7{:07}", seed * 31 % 10_000_000)}),
        );
        m.insert("is_local".into(), json!(false));
        m.insert("name".into(), json!(name));
        m.insert("popularity".into(), json!(popularity));
        m.insert("preview_url".into(), Value::Null);
        m.insert("track_number".into(), json!(1 + seed % 12));
    }
    t
}

/// Track `i` of the playlist, as its `items` hold it (`added_at`, `added_by`, `track`, …).
pub fn track(i: u64) -> Value {
    let name = format!(
        "{} {}",
        ["Midnight", "Golden", "Electric", "Paper", "Silver"][(i % 5) as usize],
        fixture_api::words(i + 40, 2)
    );
    let artist_name = ["The Lumens", "Nova Park", "Kite Theory", "Ada Vale"][(i % 4) as usize];
    json!({
        "added_at": format!("2026-02-{:02}T08:{:02}:00Z", 1 + i % 28, i % 60),
        "added_by": spotify_link("user", "spotify"),
        "is_local": false, "primary_color": null,
        "track": track_object(&name, artist_name, &format!("{artist_name} Live"), 5000 + i, 40 + i % 60),
        "video_thumbnail": {"url": null}
    })
}

/// The catalogue `search` looks in: (track, artist, album, popularity).
const CATALOG: [(&str, &str, &str, u64); 8] = [
    (
        "Bohemian Rhapsody - Remastered 2011",
        "Queen",
        "A Night At The Opera (2011 Remaster)",
        86,
    ),
    ("Bohemian Rhapsody - Live Aid", "Queen", "Live Aid", 61),
    (
        "Bohemian Rhapsody",
        "Panic! At The Disco",
        "Suicide Squad: The Album",
        58,
    ),
    (
        "Bohemian Rhapsody - Live At Wembley Stadium",
        "Queen",
        "Live At Wembley Stadium",
        49,
    ),
    (
        "Bohemian Like You",
        "The Dandy Warhols",
        "Thirteen Tales From Urban Bohemia",
        71,
    ),
    (
        "Don't Stop Me Now - Remastered 2011",
        "Queen",
        "Jazz (2011 Remaster)",
        84,
    ),
    (
        "Somebody To Love - Remastered 2011",
        "Queen",
        "A Day At The Races (2011 Remaster)",
        77,
    ),
    (
        "Bohemian Rhapsody (Piano)",
        "Piano Covers Club",
        "Rock Ballads on Piano",
        23,
    ),
];

/// Catalogue track `i` as a full track object.
pub fn catalog_track(i: usize) -> Value {
    let (name, artist_name, album, popularity) = CATALOG[i];
    track_object(name, artist_name, album, 9000 + i as u64 * 13, popularity)
}

/// The headers api.spotify.com sends.
fn spotify_headers(seed: u64) -> Vec<(&'static str, String)> {
    vec![
        ("content-type", "application/json; charset=utf-8".into()),
        ("cache-control", "private, max-age=0".into()),
        ("x-robots-tag", "noindex, nofollow".into()),
        ("access-control-allow-origin", "*".into()),
        ("access-control-allow-headers", "Accept, App-Platform, Authorization, Content-Type, Origin, Retry-After, Spotify-App-Version, X-Cloud-Trace-Context, client-token, content-access-token".into()),
        ("access-control-allow-methods", "GET, POST, OPTIONS, PUT, DELETE, PATCH".into()),
        ("access-control-allow-credentials", "true".into()),
        ("access-control-max-age", "604800".into()),
        ("etag", format!("\"MC,MTc3MjQwMDAwMDAwMCwx{}\"", base62(seed, 12))),
        ("strict-transport-security", "max-age=31536000".into()),
        ("x-content-type-options", "nosniff".into()),
        ("alt-svc", "h3=\":443\"; ma=2592000,h3-29=\":443\"; ma=2592000".into()),
        ("server", "envoy".into()),
        ("via", "HTTP/2 edgeproxy, 1.1 google".into()),
    ]
}

/// The paging object Spotify wraps a list in: `href`, `items`, `limit`, `next` (a URL or
/// null), `offset`, `previous`, `total`.
fn paging(url: &str, items: Vec<Value>, offset: usize, limit: usize, total: usize) -> Value {
    let at = |o: usize| format!("{url}?offset={o}&limit={limit}");
    json!({
        "href": at(offset), "items": items, "limit": limit,
        "next": (offset + limit < total).then(|| at(offset + limit)),
        "offset": offset,
        "previous": (offset > 0).then(|| at(offset.saturating_sub(limit))),
        "total": total
    })
}

/// `GET /v1/playlists/{id}/tracks?limit=&offset=` (limit default 20, at most 50 by the spec).
async fn spotify_playlist_tracks(
    State(st): State<St>,
    Path(id): Path<String>,
    uri: Uri,
    q: Params,
) -> Response {
    record(&st, Method::GET, &uri, b"");
    if id != PLAYLIST {
        return answer(
            StatusCode::NOT_FOUND,
            spotify_headers(0),
            &json!({"error": {"status": 404, "message": "Resource not found"}}),
        );
    }
    let limit = number(&q, "limit", 20);
    if !(1..=50).contains(&limit) {
        return answer(
            StatusCode::BAD_REQUEST,
            spotify_headers(0),
            &json!({"error": {"status": 400, "message": "Invalid limit"}}),
        );
    }
    let offset = number(&q, "offset", 0);
    let items = (offset..(offset + limit).min(PLAYLIST_TRACKS))
        .map(|i| track(i as u64))
        .collect();
    let url = format!("{}/v1/playlists/{PLAYLIST}/tracks", st.base);
    answer(
        StatusCode::OK,
        spotify_headers(offset as u64),
        &paging(&url, items, offset, limit, PLAYLIST_TRACKS),
    )
}

/// `GET /v1/search?q=&type=track&limit=`: the catalogue's tracks holding every word of `q`
/// (field filters `track:`, `artist:` read as words), most popular first.
async fn spotify_search(State(st): State<St>, uri: Uri, q: Params) -> Response {
    record(&st, Method::GET, &uri, b"");
    let words: Vec<String> = q
        .get("q")
        .map(|s| {
            s.split(|c: char| c.is_whitespace() || c == ':')
                .filter(|w| !matches!(*w, "track" | "artist" | "album" | ""))
                .map(str::to_lowercase)
                .collect()
        })
        .unwrap_or_default();
    if words.is_empty()
        || q.get("type")
            .is_none_or(|t| !t.split(',').any(|t| t == "track"))
    {
        return answer(
            StatusCode::BAD_REQUEST,
            spotify_headers(1),
            &json!({"error": {"status": 400, "message": "No search query"}}),
        );
    }
    let limit = number(&q, "limit", 20).clamp(1, 50);
    let offset = number(&q, "offset", 0);
    let mut found: Vec<usize> = (0..CATALOG.len())
        .filter(|i| {
            let (name, artist_name, ..) = CATALOG[*i];
            let text = format!("{name} {artist_name}").to_lowercase();
            words.iter().all(|w| text.contains(w.trim_matches('"')))
        })
        .collect();
    found.sort_by_key(|i| std::cmp::Reverse(CATALOG[*i].3));
    let total = found.len();
    let items = found
        .into_iter()
        .skip(offset)
        .take(limit)
        .map(catalog_track)
        .collect();
    let url = format!("{}/v1/search", st.base);
    answer(
        StatusCode::OK,
        spotify_headers(2),
        &json!({"tracks": paging(&url, items, offset, limit, total)}),
    )
}

// ------------------------------------------------------------------------------ Kubernetes

/// The pods of the namespace: (deployment or job, phase, restarts).
const PODS: [(&str, &str, u64); 24] = [
    ("checkout", "Running", 0),
    ("checkout", "Running", 2),
    ("checkout", "Running", 0),
    ("cart", "Running", 0),
    ("cart", "Running", 1),
    ("cart", "Pending", 0),
    ("catalog", "Running", 0),
    ("catalog", "Running", 0),
    ("catalog", "Running", 5),
    ("catalog", "Running", 0),
    ("frontend", "Running", 0),
    ("frontend", "Running", 0),
    ("frontend", "Running", 0),
    ("frontend", "Failed", 7),
    ("payments", "Running", 0),
    ("payments", "Running", 0),
    ("redis", "Running", 0),
    ("worker", "Running", 3),
    ("worker", "Running", 0),
    ("worker", "Pending", 0),
    ("worker", "Running", 0),
    ("worker", "Running", 1),
    ("report-cron", "Succeeded", 0),
    ("report-cron", "Succeeded", 0),
];

fn pod_name(i: usize) -> String {
    let (app, ..) = PODS[i];
    let hash = base62(app.len() as u64 * 31 + 5, 10).to_lowercase();
    format!(
        "{app}-{hash}-{}",
        base62(i as u64 * 7 + 3, 5).to_lowercase()
    )
}

/// Pod `i` as the API server returns it (1.13: metadata, spec, status; ~4 KB).
pub fn pod(i: usize) -> Value {
    let (app, phase, restarts) = PODS[i];
    let name = pod_name(i);
    let uid = |s: u64| {
        format!(
            "{:08x}-{:04x}-11e9-{:04x}-{:012x}",
            s * 2_654_435_761 % 0xffff_ffff,
            s % 0xffff,
            (s * 7) % 0xffff,
            s * 40_503
        )
    };
    let image = format!("registry.example.com/shop/{app}:1.{}.{}", 4 + i % 3, i % 10);
    let started = format!("2026-03-{:02}T0{}:1{}:22Z", 1 + i % 9, i % 10, i % 6);
    let running = phase == "Running";
    let ready = if running { "True" } else { "False" };
    let state = match phase {
        "Running" => json!({"running": {"startedAt": started}}),
        "Pending" => json!({"waiting": {"reason": "ContainerCreating"}}),
        "Failed" => {
            json!({"terminated": {"exitCode": 137, "reason": "OOMKilled", "startedAt": started, "finishedAt": started, "containerID": format!("docker://{:064x}", i * 99_991)}})
        }
        _ => {
            json!({"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": started, "finishedAt": started, "containerID": format!("docker://{:064x}", i * 99_991)}})
        }
    };
    let condition = |t: &str, status: &str| json!({"type": t, "status": status, "lastProbeTime": null, "lastTransitionTime": started});
    json!({
        "metadata": {
            "name": name, "generateName": format!("{}-", name.rsplit_once('-').map_or(app, |(p, _)| p)),
            "namespace": NAMESPACE, "selfLink": format!("/api/v1/namespaces/{NAMESPACE}/pods/{name}"),
            "uid": uid(i as u64 + 1), "resourceVersion": format!("{}", 48_213_977 + i * 131),
            "creationTimestamp": started,
            "labels": {"app": app, "pod-template-hash": base62(app.len() as u64 * 31 + 5, 10).to_lowercase(), "tier": if app == "frontend" { "web" } else { "backend" }},
            "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": "9102", "kubernetes.io/psp": "eks.privileged"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name.rsplit_once('-').map_or(app, |(p, _)| p),
                "uid": uid(app.len() as u64), "controller": true, "blockOwnerDeletion": true}]
        },
        "spec": {
            "volumes": [{"name": format!("default-token-{}", base62(9, 5).to_lowercase()), "secret": {"secretName": format!("default-token-{}", base62(9, 5).to_lowercase()), "defaultMode": 420}}],
            "containers": [{
                "name": app, "image": image,
                "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}, {"name": "metrics", "containerPort": 9102, "protocol": "TCP"}],
                "env": [{"name": "LOG_LEVEL", "value": "info"}, {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}},
                    {"name": "DATABASE_URL", "valueFrom": {"secretKeyRef": {"name": format!("{app}-db"), "key": "url"}}}],
                "resources": {"limits": {"cpu": "500m", "memory": "512Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}},
                "volumeMounts": [{"name": format!("default-token-{}", base62(9, 5).to_lowercase()), "readOnly": true, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
                "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080, "scheme": "HTTP"}, "initialDelaySeconds": 10, "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3},
                "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080, "scheme": "HTTP"}, "timeoutSeconds": 1, "periodSeconds": 5, "successThreshold": 1, "failureThreshold": 3},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"
            }],
            "restartPolicy": if app == "report-cron" { "OnFailure" } else { "Always" },
            "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "serviceAccount": "default",
            "nodeName": format!("ip-10-0-{}-{}.eu-west-1.compute.internal", i % 3 + 1, 40 + i * 3),
            "securityContext": {}, "schedulerName": "default-scheduler",
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
            "priority": 0, "enableServiceLinks": true
        },
        "status": {
            "phase": phase,
            "conditions": [condition("Initialized", "True"), condition("Ready", ready), condition("ContainersReady", ready), condition("PodScheduled", "True")],
            "hostIP": format!("10.0.{}.{}", i % 3 + 1, 40 + i * 3), "podIP": format!("10.0.{}.{}", 100 + i % 3, 7 + i * 5),
            "startTime": started,
            "containerStatuses": [{"name": app, "state": state, "lastState": if restarts > 0 { json!({"terminated": {"exitCode": 1, "reason": "Error", "startedAt": started, "finishedAt": started}}) } else { json!({}) },
                "ready": running, "restartCount": restarts, "image": image,
                "imageID": format!("docker-pullable://registry.example.com/shop/{app}@sha256:{:064x}", i * 7_777_777),
                "containerID": format!("docker://{:064x}", i * 99_991 + 1)}],
            "qosClass": "Burstable"
        }
    })
}

/// The headers a Kubernetes API server sends.
fn k8s_headers(seed: u64) -> Vec<(&'static str, String)> {
    vec![
        (
            "audit-id",
            format!(
                "{:08x}-3b2c-4d1e-9f7a-{:012x}",
                seed * 2_654_435_761 % 0xffff_ffff,
                seed * 40_503
            ),
        ),
        ("cache-control", "no-cache, private".into()),
        ("content-type", "application/json".into()),
        (
            "x-kubernetes-pf-flowschema-uid",
            "7e4fd2b1-53c8-4b73-9a16-2f2a1c1f3d0e".into(),
        ),
        (
            "x-kubernetes-pf-prioritylevel-uid",
            "c2d9a9b8-1e3f-4a5b-8c6d-7e8f9a0b1c2d".into(),
        ),
    ]
}

fn k8s_not_found(kind: &str, name: &str) -> Response {
    answer(
        StatusCode::NOT_FOUND,
        k8s_headers(0),
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": format!("{kind} \"{name}\" not found"), "reason": "NotFound",
            "details": {"name": name, "kind": kind}, "code": 404}),
    )
}

/// `GET /api/v1/namespaces/{ns}/pods?limit=&continue=&labelSelector=app=…`: a `PodList`;
/// under `limit`, `metadata.continue` names the next page.
async fn k8s_pods(State(st): State<St>, Path(ns): Path<String>, uri: Uri, q: Params) -> Response {
    record(&st, Method::GET, &uri, b"");
    let app = q
        .get("labelSelector")
        .and_then(|s| s.strip_prefix("app="))
        .map(str::to_string);
    let all: Vec<usize> = (0..PODS.len())
        .filter(|_| ns == NAMESPACE)
        .filter(|i| app.as_deref().is_none_or(|a| PODS[*i].0 == a))
        .collect();
    let start = match q.get("continue").filter(|c| !c.is_empty()) {
        Some(c) => match base64::engine::general_purpose::STANDARD
            .decode(c)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|s| s.strip_prefix("start:").and_then(|n| n.parse().ok()))
        {
            Some(n) => n,
            None => {
                return answer(
                    StatusCode::GONE,
                    k8s_headers(1),
                    &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": "The provided continue parameter is too old", "reason": "Expired", "code": 410}),
                );
            }
        },
        None => 0,
    };
    let limit = number(&q, "limit", 0);
    let end = if limit == 0 {
        all.len()
    } else {
        (start + limit).min(all.len())
    };
    let items: Vec<Value> = all[start.min(end)..end].iter().map(|i| pod(*i)).collect();
    let mut metadata =
        json!({"selfLink": format!("/api/v1/namespaces/{ns}/pods"), "resourceVersion": "48217311"});
    if end < all.len() {
        metadata["continue"] =
            json!(base64::engine::general_purpose::STANDARD.encode(format!("start:{end}")));
    }
    answer(
        StatusCode::OK,
        k8s_headers(2),
        &json!({"kind": "PodList", "apiVersion": "v1", "metadata": metadata, "items": items}),
    )
}

async fn k8s_pod(
    State(st): State<St>,
    Path((ns, name)): Path<(String, String)>,
    uri: Uri,
) -> Response {
    record(&st, Method::GET, &uri, b"");
    match (0..PODS.len())
        .find(|i| pod_name(*i) == name)
        .filter(|_| ns == NAMESPACE)
    {
        Some(i) => answer(StatusCode::OK, k8s_headers(3), &pod(i)),
        None => k8s_not_found("pods", &name),
    }
}

#[test]
fn objects_are_the_size_of_the_real_ones() {
    let size = |v: &Value| v.to_string().len();
    let (channel, message, track, pod) = (
        size(&channel(7)),
        size(&message(DEPLOYS, 3)),
        size(&track(7)),
        size(&pod(4)),
    );
    println!(
        "sizes: slack channel {channel}, message {message}, spotify playlist track {track}, pod {pod}"
    );
    assert!((800..1_400).contains(&channel), "channel: {channel}");
    assert!((400..900).contains(&message), "message: {message}");
    assert!((3_000..5_000).contains(&track), "track: {track}");
    assert!((3_000..5_000).contains(&pod), "pod: {pod}");
}
