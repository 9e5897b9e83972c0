//! A realistic local API for the response-shaping tests and the agent benchmark: an axum app
//! answering with objects shaped and sized like the real ones (generated deterministically,
//! no randomness), paginated the way GitHub and Stripe paginate. Start it with
//! `FixtureApi::start().await` and point apigate at `api.url()` with the GitHub
//! (`github-rest-3.0.json`) or Stripe (`stripe.json`) spec.
//!
//! Routes (any `{owner}`/`{repo}`):
//! - `GET /repos/{owner}/{repo}/issues?per_page=&page=`: [`ISSUES`] issues (numbers 113 down to
//!   1, newest first), each a GitHub issue object of about 4.9 KB (user, labels, assignees,
//!   milestone, body, reactions, …). `per_page` defaults to 30, at most 100. A `Link` header
//!   with `rel="next"`, `"last"` (and `"prev"`, `"first"` after page 1), absolute URLs on
//!   this server, as GitHub sends them.
//! - `GET /repos/{owner}/{repo}/actions/runs?per_page=&page=`: `{total_count, workflow_runs}`
//!   over [`RUNS`] workflow runs of about 11 KB each (actor, head_commit, repository,
//!   head_repository, …), with the same `Link` header.
//! - `GET /v1/charges?limit=&starting_after=&ending_before=`: a Stripe list `{object: "list",
//!   data, has_more, url}` over [`CHARGES`] charges of about 2.3 KB each (newest first);
//!   `limit` defaults to 10, between 1 and 100; an unknown cursor is Stripe's 400.
//! - `GET /repos/{owner}/{repo}/issues/{number}`, `GET /v1/charges/{charge}`: one issue, one
//!   charge (404 / Stripe's 400 for one that does not exist).
//! - `POST /v1/charges`: creates nothing, answers a charge.
//!
//! Every request is recorded (`requests()`), so a test can say what the API saw.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

/// How many issues the repository has.
pub const ISSUES: usize = 113;
/// How many workflow runs.
pub const RUNS: usize = 40;
/// How many charges.
pub const CHARGES: usize = 113;

/// The running fixture API.
pub struct FixtureApi {
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<String>>>,
    headers: Arc<Mutex<Vec<HeaderMap>>>,
}

#[derive(Clone)]
struct St {
    base: String,
    seen: Arc<Mutex<Vec<String>>>,
    headers: Arc<Mutex<Vec<HeaderMap>>>,
}

impl FixtureApi {
    /// Starts the API on 127.0.0.1:0.
    pub async fn start() -> FixtureApi {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen: Arc<Mutex<Vec<String>>> = Arc::default();
        let headers: Arc<Mutex<Vec<HeaderMap>>> = Arc::default();
        let state = St {
            base: format!("http://{addr}"),
            seen: seen.clone(),
            headers: headers.clone(),
        };
        let app = Router::new()
            .route("/repos/{owner}/{repo}/issues", get(github_list))
            .route("/repos/{owner}/{repo}/issues/{number}", get(one_issue))
            .route("/repos/{owner}/{repo}/actions/runs", get(github_list))
            .route("/v1/charges", get(charges).post(create_charge))
            .route("/v1/charges/{charge}", get(one_charge))
            .layer(axum::middleware::from_fn_with_state(state.clone(), record))
            .with_state(state);
        tokio::spawn(async move { axum::serve(listener, app).await });
        FixtureApi {
            addr,
            seen,
            headers,
        }
    }

    /// The base URL, for `--upstream`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request received, as `METHOD /path?query`.
    pub fn requests(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }

    /// The headers of every request received, in order.
    pub fn headers(&self) -> Vec<HeaderMap> {
        self.headers.lock().unwrap().clone()
    }
}

async fn record(
    State(st): State<St>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    st.seen
        .lock()
        .unwrap()
        .push(format!("{} {}", req.method(), req.uri()));
    st.headers.lock().unwrap().push(req.headers().clone());
    next.run(req).await
}

type Params = Query<std::collections::HashMap<String, String>>;

/// `per_page` and `page` as GitHub reads them.
fn page_args(q: &Params) -> (usize, usize) {
    let per_page = q
        .get("per_page")
        .and_then(|v| v.parse().ok())
        .unwrap_or(30usize)
        .clamp(1, 100);
    let page = q
        .get("page")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1usize)
        .max(1);
    (per_page, page)
}

/// GitHub's `Link` header for page `page` of `total` items.
fn link(base: &str, uri: &Uri, per_page: usize, page: usize, total: usize) -> Option<String> {
    let last = total.div_ceil(per_page).max(1);
    let to = |p: usize| format!("<{base}{}?per_page={per_page}&page={p}>", uri.path());
    let mut parts = Vec::new();
    if page > 1 {
        parts.push(format!("{}; rel=\"prev\"", to(page - 1)));
    }
    if page < last {
        parts.push(format!("{}; rel=\"next\"", to(page + 1)));
        parts.push(format!("{}; rel=\"last\"", to(last)));
    }
    if page > 1 {
        parts.push(format!("{}; rel=\"first\"", to(1)));
    }
    (!parts.is_empty()).then(|| parts.join(", "))
}

fn with_link(body: Value, link: Option<String>) -> Response {
    let mut headers = HeaderMap::new();
    if let Some(l) = link {
        headers.insert("link", HeaderValue::from_str(&l).unwrap());
    }
    (headers, axum::Json(body)).into_response()
}

/// A GitHub list, paged: the issues (a bare array) or the workflow runs (in an object with
/// their count), newest first, with the `Link` header.
async fn github_list(
    State(st): State<St>,
    Path((owner, repo)): Path<(String, String)>,
    uri: Uri,
    q: Params,
) -> Response {
    let runs = uri.path().ends_with("/actions/runs");
    let total = if runs { RUNS } else { ISSUES };
    let (per_page, page) = page_args(&q);
    let items = (0..total)
        .skip((page - 1) * per_page)
        .take(per_page)
        .map(|i| (total - i) as u64);
    let items: Vec<Value> = if runs {
        items.map(|n| workflow_run(&owner, &repo, n)).collect()
    } else {
        items.map(|n| issue(&owner, &repo, n)).collect()
    };
    let body = if runs {
        json!({"total_count": RUNS, "workflow_runs": items})
    } else {
        Value::Array(items)
    };
    with_link(body, link(&st.base, &uri, per_page, page, total))
}

async fn one_issue(Path((owner, repo, number)): Path<(String, String, u64)>) -> Response {
    if !(1..=ISSUES as u64).contains(&number) {
        return (
            StatusCode::NOT_FOUND,
            axum::Json(json!({"message": "Not Found", "status": "404"})),
        )
            .into_response();
    }
    axum::Json(issue(&owner, &repo, number)).into_response()
}

async fn one_charge(Path(id): Path<String>) -> Response {
    match (1..=CHARGES as u64).find(|n| charge_id(*n) == id) {
        Some(n) => axum::Json(charge(n)).into_response(),
        None => stripe_error("No such charge"),
    }
}

async fn charges(q: Params) -> Response {
    let limit: usize = q
        .get("limit")
        .and_then(|v| v.parse().ok())
        .unwrap_or(10usize);
    if !(1..=100).contains(&limit) {
        return stripe_error("limit must be between 1 and 100");
    }
    // Newest first: index 0 is ch_…113.
    let index_of = |id: &str| (1..=CHARGES).find(|n| charge_id(*n as u64) == id);
    let numbers: Vec<u64> = (1..=CHARGES as u64).rev().collect();
    let start = match (q.get("starting_after"), q.get("ending_before")) {
        (Some(after), _) => match index_of(after) {
            Some(n) => CHARGES - n + 1,
            None => return stripe_error("No such charge"),
        },
        (None, Some(before)) => match index_of(before) {
            Some(n) => (CHARGES - n).saturating_sub(limit),
            None => return stripe_error("No such charge"),
        },
        (None, None) => 0,
    };
    let data: Vec<Value> = numbers
        .iter()
        .skip(start)
        .take(limit)
        .map(|n| charge(*n))
        .collect();
    let has_more = start + data.len() < CHARGES;
    axum::Json(json!({"object": "list", "data": data, "has_more": has_more, "url": "/v1/charges"}))
        .into_response()
}

async fn create_charge() -> Response {
    axum::Json(charge(CHARGES as u64 + 1)).into_response()
}

fn stripe_error(message: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        axum::Json(json!({"error": {"type": "invalid_request_error", "message": message}})),
    )
        .into_response()
}

/// Deterministic words for titles and bodies.
pub fn words(seed: u64, n: usize) -> String {
    const W: [&str; 24] = [
        "cache", "index", "request", "timeout", "parser", "retry", "client", "server", "token",
        "config", "docs", "build", "error", "stream", "schema", "query", "page", "field", "label",
        "merge", "branch", "deploy", "test", "release",
    ];
    (0..n)
        .map(|i| W[((seed * 7 + i as u64 * 13 + (i as u64 * seed) % 5) % 24) as usize])
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn user(login: &str, id: u64) -> Value {
    let u = format!("https://api.github.com/users/{login}");
    json!({
        "login": login, "id": id, "node_id": format!("MDQ6VXNlcj{id:08}"),
        "avatar_url": format!("https://avatars.githubusercontent.com/u/{id}?v=4"),
        "gravatar_id": "", "url": u, "html_url": format!("https://github.com/{login}"),
        "followers_url": format!("{u}/followers"),
        "following_url": format!("{u}/following{{/other_user}}"),
        "gists_url": format!("{u}/gists{{/gist_id}}"),
        "starred_url": format!("{u}/starred{{/owner}}{{/repo}}"),
        "subscriptions_url": format!("{u}/subscriptions"),
        "organizations_url": format!("{u}/orgs"), "repos_url": format!("{u}/repos"),
        "events_url": format!("{u}/events{{/privacy}}"),
        "received_events_url": format!("{u}/received_events"),
        "type": "User", "user_view_type": "public", "site_admin": false
    })
}

const LOGINS: [&str; 5] = ["octocat", "hubot", "monalisa", "defunkt", "mojombo"];

/// A GitHub issue object, about 4.9 KB.
pub fn issue(owner: &str, repo: &str, number: u64) -> Value {
    let r = format!("https://api.github.com/repos/{owner}/{repo}");
    let login = LOGINS[(number % 5) as usize];
    let label = |name: &str, color: &str, id: u64| {
        json!({"id": id, "node_id": format!("LA_kwDOAbc{id}"), "url": format!("{r}/labels/{name}"),
               "name": name, "color": color, "default": name == "bug",
               "description": format!("Something about {name}")})
    };
    let mut labels = vec![label("bug", "d73a4a", 208045946)];
    if number.is_multiple_of(3) {
        labels.push(label("enhancement", "a2eeef", 208045947));
    }
    let body = format!(
        "### Describe the bug\n\n{}\n\n### To reproduce\n\n1. {}\n2. {}\n3. {}\n\n### Expected \
         behavior\n\n{}\n\n### Environment\n\n- OS: Linux\n- Version: 2.{}.0\n\n{}",
        words(number, 150),
        words(number + 1, 12),
        words(number + 2, 12),
        words(number + 3, 12),
        words(number + 4, 100),
        number % 20,
        words(number + 5, 60)
    );
    let milestone = json!({
        "url": format!("{r}/milestones/1"), "html_url": format!("https://github.com/{owner}/{repo}/milestone/1"),
        "labels_url": format!("{r}/milestones/1/labels"), "id": 1002604, "node_id": "MDk6TWlsZXN0b25lMTAwMjYwNA==",
        "number": 1, "state": "open", "title": "v1.0", "description": "Tracking milestone for Version 1.0",
        "creator": user("octocat", 1), "open_issues": 4, "closed_issues": 8,
        "created_at": "2011-04-10T20:09:31Z", "updated_at": "2014-03-03T18:58:10Z",
        "closed_at": null, "due_on": "2012-10-09T23:39:01Z"
    });
    json!({
        "url": format!("{r}/issues/{number}"),
        "repository_url": r,
        "labels_url": format!("{r}/issues/{number}/labels{{/name}}"),
        "comments_url": format!("{r}/issues/{number}/comments"),
        "events_url": format!("{r}/issues/{number}/events"),
        "html_url": format!("https://github.com/{owner}/{repo}/issues/{number}"),
        "id": 1_000_000 + number, "node_id": format!("I_kwDOAbc{number:06}"), "number": number,
        "title": format!("#{number}: {}", words(number, 6)),
        "user": user(login, 1000 + number % 5),
        "labels": labels,
        "state": if number.is_multiple_of(4) { "closed" } else { "open" },
        "locked": false,
        "assignee": null,
        "assignees": [],
        "milestone": if number.is_multiple_of(2) { milestone } else { Value::Null },
        "comments": number % 7,
        "created_at": format!("2026-{:02}-{:02}T10:{:02}:00Z", 1 + number % 12, 1 + number % 28, number % 60),
        "updated_at": format!("2026-{:02}-{:02}T12:{:02}:00Z", 1 + number % 12, 1 + number % 28, number % 60),
        "closed_at": null,
        "author_association": "CONTRIBUTOR",
        "type": null,
        "active_lock_reason": null,
        "sub_issues_summary": {"total": 0, "completed": 0, "percent_completed": 0},
        "issue_dependencies_summary": {"blocked_by": 0, "total_blocked_by": 0, "blocking": 0, "total_blocking": 0},
        "body": body,
        "closed_by": null,
        "reactions": {"url": format!("{r}/issues/{number}/reactions"), "total_count": number % 9,
            "+1": number % 5, "-1": 0, "laugh": 0, "hooray": number % 2, "confused": 0,
            "heart": number % 3, "rocket": 0, "eyes": 0},
        "timeline_url": format!("{r}/issues/{number}/timeline"),
        "performed_via_github_app": null,
        "state_reason": null
    })
}

fn repository(owner: &str, repo: &str, id: u64) -> Value {
    let r = format!("https://api.github.com/repos/{owner}/{repo}");
    let mut m = serde_json::Map::new();
    m.insert("id".into(), json!(id));
    m.insert("node_id".into(), json!(format!("MDEwOlJlcG9zaXRvcnk{id}")));
    m.insert("name".into(), json!(repo));
    m.insert("full_name".into(), json!(format!("{owner}/{repo}")));
    m.insert("private".into(), json!(false));
    m.insert("owner".into(), user(owner, 1));
    m.insert(
        "html_url".into(),
        json!(format!("https://github.com/{owner}/{repo}")),
    );
    m.insert("description".into(), json!("This your first repo!"));
    m.insert("fork".into(), json!(false));
    m.insert("url".into(), json!(r));
    for (k, suffix) in [
        ("archive_url", "/{archive_format}{/ref}"),
        ("assignees_url", "/assignees{/user}"),
        ("blobs_url", "/git/blobs{/sha}"),
        ("branches_url", "/branches{/branch}"),
        ("collaborators_url", "/collaborators{/collaborator}"),
        ("comments_url", "/comments{/number}"),
        ("commits_url", "/commits{/sha}"),
        ("compare_url", "/compare/{base}...{head}"),
        ("contents_url", "/contents/{+path}"),
        ("contributors_url", "/contributors"),
        ("deployments_url", "/deployments"),
        ("downloads_url", "/downloads"),
        ("events_url", "/events"),
        ("forks_url", "/forks"),
        ("git_commits_url", "/git/commits{/sha}"),
        ("git_refs_url", "/git/refs{/sha}"),
        ("git_tags_url", "/git/tags{/sha}"),
        ("issue_comment_url", "/issues/comments{/number}"),
        ("issue_events_url", "/issues/events{/number}"),
        ("issues_url", "/issues{/number}"),
        ("keys_url", "/keys{/key_id}"),
        ("labels_url", "/labels{/name}"),
        ("languages_url", "/languages"),
        ("merges_url", "/merges"),
        ("milestones_url", "/milestones{/number}"),
        (
            "notifications_url",
            "/notifications{?since,all,participating}",
        ),
        ("pulls_url", "/pulls{/number}"),
        ("releases_url", "/releases{/id}"),
        ("stargazers_url", "/stargazers"),
        ("statuses_url", "/statuses/{sha}"),
        ("subscribers_url", "/subscribers"),
        ("subscription_url", "/subscription"),
        ("tags_url", "/tags"),
        ("teams_url", "/teams"),
        ("trees_url", "/git/trees{/sha}"),
        ("hooks_url", "/hooks"),
    ] {
        m.insert(k.into(), json!(format!("{r}{suffix}")));
    }
    Value::Object(m)
}

/// A GitHub Actions workflow run, about 11 KB.
pub fn workflow_run(owner: &str, repo: &str, n: u64) -> Value {
    let r = format!("https://api.github.com/repos/{owner}/{repo}");
    let id = 30_433_642 + n;
    let sha = format!(
        "{:040x}",
        u128::from(n.wrapping_mul(0x9e37_79b9_7f4a_7c15)) << 24 | u128::from(n)
    );
    let actor = user(LOGINS[(n % 5) as usize], 1000 + n % 5);
    let conclusion = ["success", "failure", "success", "cancelled", "success"][(n % 5) as usize];
    json!({
        "id": id, "name": "Build", "node_id": format!("MDEyOldvcmtmbG93IFJ1bj{id}"),
        "head_branch": format!("feature-{n}"), "head_sha": sha,
        "path": ".github/workflows/build.yml@main", "display_title": words(n, 5),
        "run_number": n, "event": if n.is_multiple_of(2) { "push" } else { "pull_request" },
        "status": "completed", "conclusion": conclusion,
        "workflow_id": 159038, "check_suite_id": 414944374 + n,
        "check_suite_node_id": format!("MDEwOkNoZWNrU3VpdGU0MTQ5NDQzNz{n}"),
        "url": format!("{r}/actions/runs/{id}"),
        "html_url": format!("https://github.com/{owner}/{repo}/actions/runs/{id}"),
        "pull_requests": [],
        "created_at": format!("2026-03-{:02}T10:00:00Z", 1 + n % 28),
        "updated_at": format!("2026-03-{:02}T10:09:00Z", 1 + n % 28),
        "actor": actor.clone(), "run_attempt": 1, "referenced_workflows": [],
        "run_started_at": format!("2026-03-{:02}T10:00:00Z", 1 + n % 28),
        "triggering_actor": actor,
        "jobs_url": format!("{r}/actions/runs/{id}/jobs"),
        "logs_url": format!("{r}/actions/runs/{id}/logs"),
        "check_suite_url": format!("{r}/check-suites/{}", 414944374 + n),
        "artifacts_url": format!("{r}/actions/runs/{id}/artifacts"),
        "cancel_url": format!("{r}/actions/runs/{id}/cancel"),
        "rerun_url": format!("{r}/actions/runs/{id}/rerun"),
        "previous_attempt_url": null,
        "workflow_url": format!("{r}/actions/workflows/159038"),
        "head_commit": {
            "id": sha, "tree_id": format!("{:040x}", id as u128 * 31),
            "message": format!("{}\n\n{}", words(n + 1, 8), words(n + 2, 50)),
            "timestamp": format!("2026-03-{:02}T09:58:00Z", 1 + n % 28),
            "author": {"name": "Octo Cat", "email": "octocat@github.com"},
            "committer": {"name": "GitHub", "email": "noreply@github.com"}
        },
        "repository": repository(owner, repo, 1296269),
        "head_repository": repository(owner, repo, 1296269)
    })
}

pub fn charge_id(n: u64) -> String {
    format!("ch_3Mtw{n:04}LkdIwHu7ix28a3tqPa")
}

fn card_details(n: u64) -> Value {
    json!({
        "card": {"amount_authorized": 250 * n, "brand": "visa",
            "checks": {"address_line1_check": null, "address_postal_code_check": null, "cvc_check": "pass"},
            "country": "US", "exp_month": 3, "exp_year": 2027, "extended_authorization": {"status": "disabled"},
            "fingerprint": "mToisGZ01V71BCos", "funding": "credit",
            "incremental_authorization": {"status": "unavailable"}, "installments": null,
            "last4": format!("{:04}", 4242 + n % 7), "mandate": null,
            "multicapture": {"status": "unavailable"}, "network": "visa",
            "network_token": {"used": false}, "overcapture": {"maximum_amount_capturable": 250 * n, "status": "unavailable"},
            "three_d_secure": null, "wallet": null},
        "type": "card"
    })
}

/// A Stripe charge, about 2.3 KB.
pub fn charge(n: u64) -> Value {
    let id = charge_id(n);
    let mut charge = json!({
        "id": id, "object": "charge", "amount": 250 * n, "amount_captured": 250 * n,
        "amount_refunded": 0, "application": null, "application_fee": null,
        "application_fee_amount": null,
        "balance_transaction": format!("txn_3MmlLrLkdIwHu7ix0uke3Ezy{n:03}"),
        "billing_details": {
            "address": {"city": "San Francisco", "country": "US", "line1": format!("{n} Market St"),
                "line2": null, "postal_code": "94105", "state": "CA"},
            "email": format!("customer{n}@example.com"), "name": format!("Customer {n}"), "phone": null
        },
        "calculated_statement_descriptor": "Stripe", "captured": true,
        "created": 1_680_000_000 + n * 3600, "currency": "usd",
        "customer": format!("cus_NffrFeUfNV2H{n:03}"), "description": words(n, 18),
        "destination": null, "dispute": null, "disputed": false,
        "failure_balance_transaction": null, "failure_code": null, "failure_message": null,
    });
    let more = json!({
        "fraud_details": {}, "invoice": null, "livemode": false,
        "metadata": {"order_id": format!("order_{n}")}, "on_behalf_of": null, "order": null,
        "outcome": {"network_status": "approved_by_network", "reason": null, "risk_level": "normal",
            "risk_score": 32 + n % 20, "seller_message": "Payment complete.", "type": "authorized"},
        "paid": true, "payment_intent": format!("pi_3MtwBwLkdIwHu7ix28a3{n:04}"),
        "payment_method": format!("pm_1MtwBwLkdIwHu7ixik4{n:04}"),
        "payment_method_details": card_details(n),
        "receipt_email": null, "receipt_number": null,
        "receipt_url": format!("https://pay.stripe.com/receipts/payment/CAcaFwoVYWNjdF8xTTJKVGtMa2RJd0h1N2l4KOvG06AGMgZfBXyr1aw6LBa9vaaSRWU96d8qBwz9z2J_CObiV_H2-e8RezSK_sw0KISesp4czsOUlVKY{n:04}"),
        "refunded": false, "review": null, "shipping": null, "source": null,
        "source_transfer": null, "statement_descriptor": null, "statement_descriptor_suffix": null,
        "status": "succeeded", "transfer_data": null, "transfer_group": null
    });
    if let (Value::Object(c), Value::Object(more)) = (&mut charge, more) {
        c.extend(more);
    }
    charge
}

#[test]
fn objects_are_the_size_of_the_real_ones() {
    let size = |v: &Value| v.to_string().len();
    let issue = size(&issue("octo", "hello", 57));
    let run = size(&workflow_run("octo", "hello", 7));
    let charge = size(&charge(57));
    println!("sizes: issue {issue}, workflow run {run}, charge {charge}");
    assert!((4_400..5_400).contains(&issue), "issue: {issue}");
    assert!((10_000..12_000).contains(&run), "run: {run}");
    assert!((2_000..2_700).contains(&charge), "charge: {charge}");
}
