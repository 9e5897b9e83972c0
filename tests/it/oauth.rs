//! OAuth 2.0 client credentials for the upstream, end to end: a token endpoint in the test
//! (an axum app that checks `client_secret_basic`, counts fetches and issues short-lived
//! tokens) and an API that accepts only its live tokens and echoes the request. apigate in dev
//! mode over real HTTP with real MCP clients: one fetch for many concurrent callers, a
//! refresh per token lifetime, one refresh and one retry on a 401 (never a loop), a clear
//! `UPSTREAM_ERROR` when the endpoint fails, and neither token nor secret ever in a result.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use apigate::cli::args::{EngineArgs, OAuthArgs};
use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::post;
use base64::Engine as _;
use serde_json::{Value, json};

use crate::support::{Server, call, engine_args, execute_err, execute_ok};

const CLIENT_ID: &str = "apigate-test";
const CLIENT_SECRET: &str = "oauth-client-secret-0123456789";

#[derive(Default)]
struct IdpState {
    fetches: AtomicU64,
    /// Issued tokens and when they expire.
    issued: Mutex<HashMap<String, Instant>>,
    /// Tokens the API no longer accepts.
    revoked: Mutex<Vec<String>>,
    /// The API answers 401 to everything.
    reject_all: Mutex<bool>,
    /// The token endpoint answers this status instead of a token.
    fail_with: Mutex<Option<u16>>,
    /// What the token requests asked for (form bodies).
    forms: Mutex<Vec<String>>,
    /// Requests the API received (Authorization values).
    api_calls: Mutex<Vec<Option<String>>>,
    lifetime_ms: u64,
}

/// The identity provider's token endpoint (`POST /token`) and the API (`GET /things/{id}`),
/// on one listener.
struct Idp {
    addr: SocketAddr,
    state: Arc<IdpState>,
}

impl Idp {
    async fn start(lifetime: Duration) -> Idp {
        let state = Arc::new(IdpState {
            lifetime_ms: lifetime.as_millis() as u64,
            ..Default::default()
        });
        let app = Router::new()
            .route("/token", post(token))
            .fallback(api)
            .with_state(state.clone());
        let addr = crate::support::serve_app(app).await;
        Idp { addr, state }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn fetches(&self) -> u64 {
        self.state.fetches.load(Ordering::SeqCst)
    }

    fn api_calls(&self) -> usize {
        self.state.api_calls.lock().unwrap().len()
    }

    fn issued(&self) -> Vec<String> {
        self.state.issued.lock().unwrap().keys().cloned().collect()
    }
}

async fn token(State(state): State<Arc<IdpState>>, request: Request) -> axum::response::Response {
    state.fetches.fetch_add(1, Ordering::SeqCst);
    // Slow enough that concurrent callers overlap with the fetch.
    tokio::time::sleep(Duration::from_millis(150)).await;
    if let Some(status) = *state.fail_with.lock().unwrap() {
        let status = StatusCode::from_u16(status).unwrap();
        return (
            status,
            axum::Json(json!({"error": "invalid_client", "error_description": CLIENT_SECRET})),
        )
            .into_response();
    }
    let expected = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{CLIENT_ID}:{CLIENT_SECRET}"))
    );
    let auth = crate::support::header_text(request.headers(), "authorization");
    let content_type = crate::support::header_text(request.headers(), "content-type");
    let body = axum::body::to_bytes(request.into_body(), 1 << 16)
        .await
        .unwrap_or_default();
    let form = String::from_utf8_lossy(&body).to_string();
    state.forms.lock().unwrap().push(form.clone());
    if auth != expected
        || content_type != "application/x-www-form-urlencoded"
        || !form
            .split('&')
            .any(|p| p == "grant_type=client_credentials")
    {
        return (
            StatusCode::UNAUTHORIZED,
            axum::Json(json!({"error": "invalid_client"})),
        )
            .into_response();
    }
    let n = state.fetches.load(Ordering::SeqCst);
    let token = format!("at-{n}-{}", uuid::Uuid::new_v4().simple());
    let lifetime = Duration::from_millis(state.lifetime_ms);
    state
        .issued
        .lock()
        .unwrap()
        .insert(token.clone(), Instant::now() + lifetime);
    axum::Json(json!({
        "access_token": token,
        "token_type": "bearer",
        "expires_in": lifetime.as_secs_f64(),
    }))
    .into_response()
}

/// Accepts a live, unrevoked token; echoes what it received (the token included).
async fn api(State(state): State<Arc<IdpState>>, request: Request) -> axum::response::Response {
    let auth = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    state.api_calls.lock().unwrap().push(auth.clone());
    let token = auth
        .as_deref()
        .and_then(|a| a.strip_prefix("Bearer "))
        .unwrap_or_default();
    let live = state
        .issued
        .lock()
        .unwrap()
        .get(token)
        .is_some_and(|exp| Instant::now() < *exp);
    let revoked = state.revoked.lock().unwrap().iter().any(|t| t == token);
    let echo = json!({"authorization": auth, "path": request.uri().to_string()});
    if !live || revoked || *state.reject_all.lock().unwrap() {
        return (StatusCode::UNAUTHORIZED, axum::Json(echo)).into_response();
    }
    axum::Json(echo).into_response()
}

const SPEC: &str = r#"{
  "openapi": "3.0.3",
  "info": {"title": "Things", "version": "1"},
  "components": {"securitySchemes": {
    "tenantKey": {"type": "apiKey", "in": "header", "name": "X-Tenant-Key"}
  }},
  "paths": {
    "/things/{id}": {"get": {"operationId": "getThing", "summary": "Get a thing",
      "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}}],
      "responses": {"200": {"description": "ok"}}}},
    "/keyed/{id}": {"get": {"operationId": "getKeyed", "summary": "Get a keyed thing",
      "security": [{"tenantKey": []}],
      "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}}],
      "responses": {"200": {"description": "ok"}}}}
  }
}"#;

fn args(idp: &Idp, dir: &tempfile::TempDir, token_url: &str) -> EngineArgs {
    let spec = dir.path().join("things.json");
    std::fs::write(&spec, SPEC).unwrap();
    let mut args = engine_args(spec.to_str().unwrap(), Some(idp.url("")));
    args.upstream_headers.clear();
    args.oauth = OAuthArgs {
        upstream_oauth_token_url: Some(token_url.to_string()),
        upstream_oauth_client_id: Some(CLIENT_ID.into()),
        upstream_oauth_client_secret: Some(CLIENT_SECRET.into()),
        upstream_oauth_scope: Some("things:read".into()),
        upstream_oauth_audience: None,
    };
    args
}

fn get_thing(id: u64) -> Value {
    json!({"operationId": "getThing", "pathParams": {"id": id}})
}

/// Neither a token the endpoint issued nor the client secret appears in `out`.
fn assert_no_secret(idp: &Idp, out: &Value) {
    let text = out.to_string();
    assert!(!text.contains(CLIENT_SECRET), "client secret shown: {text}");
    for t in idp.issued() {
        assert!(!text.contains(&t), "token shown: {text}");
        assert!(
            !text.contains(&t[..t.len() - 1]),
            "token prefix shown: {text}"
        );
    }
}

/// 200 calls from 16 concurrent clients over about 6 s, tokens living 2 s: one fetch for the
/// first burst (the endpoint is slow, so all 16 wait for it), then one per lifetime.
#[tokio::test]
async fn concurrent_calls_share_one_token_fetch_per_lifetime() {
    let idp = Idp::start(Duration::from_secs(2)).await;
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(args(&idp, &dir, &idp.url("/token")), false).await;
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..16u64 {
        let client = server.client().await;
        let calls = if c < 8 { 13 } else { 12 };
        tasks.push(tokio::spawn(async move {
            let mut outs = Vec::new();
            for k in 0..calls {
                // Paced by the clock: call k of each client at k × 6 s / 13.
                let at = started + Duration::from_millis(k * 6000 / 13);
                tokio::time::sleep_until(at.into()).await;
                outs.push(call(&client, "api_execute", get_thing(c * 100 + k)).await);
            }
            client.cancel().await.ok();
            outs
        }));
    }
    let mut results = Vec::new();
    for t in tasks {
        results.extend(t.await.unwrap());
    }
    let elapsed = started.elapsed();
    assert_eq!(results.len(), 200);
    for (err, out) in &results {
        assert!(!err, "{out}");
        assert_eq!(out["status"], 200, "{out}");
        assert_no_secret(&idp, out);
        // The echoed token is scrubbed.
        assert_eq!(out["body"]["authorization"], "[redacted]", "{out}");
    }
    let fetches = idp.fetches();
    // One fetch per refresh window (1.8 s of a 2 s token), plus the first.
    let windows = (elapsed.as_secs_f64() / 1.8).ceil() as u64;
    eprintln!("{fetches} token fetches for 200 calls in {elapsed:?}");
    assert!(
        fetches <= 5.max(windows + 1),
        "{fetches} fetches in {elapsed:?}"
    );
    assert!(
        fetches >= 3,
        "tokens were not refreshed: {fetches} fetches in {elapsed:?}"
    );
    // Every API call carried a token; none was refused.
    assert_eq!(idp.api_calls(), 200);
    let forms = idp.state.forms.lock().unwrap().clone();
    assert!(
        forms.iter().all(|f| f.contains("scope=things%3Aread")),
        "{forms:?}"
    );
}

/// A 401 from the API drops the token: one fresh fetch, one retry. An API that refuses every
/// token gets the call twice, and the agent sees its 401: no loop.
#[tokio::test]
async fn a_401_refreshes_once_and_retries_once() {
    let idp = Idp::start(Duration::from_secs(3600)).await;
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(args(&idp, &dir, &idp.url("/token")), false).await;
    let client = server.client().await;
    execute_ok(&client, get_thing(1)).await;
    assert_eq!((idp.fetches(), idp.api_calls()), (1, 1));

    // The API revokes the token: the next call is refused, refreshed, retried.
    let first = idp.issued();
    idp.state.revoked.lock().unwrap().extend(first);
    let out = execute_ok(&client, get_thing(2)).await;
    assert_eq!(out["status"], 200, "{out}");
    assert_eq!((idp.fetches(), idp.api_calls()), (2, 3));
    let calls = idp.state.api_calls.lock().unwrap().clone();
    assert_ne!(calls[1], calls[2], "the retry used the refused token");

    // The API refuses everything: one refresh, one retry, then the 401 is the answer.
    *idp.state.reject_all.lock().unwrap() = true;
    let out = execute_ok(&client, get_thing(3)).await;
    assert_eq!(out["status"], 401, "{out}");
    assert_eq!((idp.fetches(), idp.api_calls()), (3, 5));
    assert_no_secret(&idp, &out);
    client.cancel().await.ok();
}

/// A token endpoint that refuses, or is not there: `UPSTREAM_ERROR` naming the endpoint and
/// its status, no secret (not even the one its error description echoes), nothing sent to
/// the API. Waiting callers share the failed fetch.
#[tokio::test]
async fn a_failing_token_endpoint_is_a_clear_upstream_error() {
    let idp = Idp::start(Duration::from_secs(3600)).await;
    *idp.state.fail_with.lock().unwrap() = Some(401);
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(args(&idp, &dir, &idp.url("/token?tenant=t1")), false).await;
    let client = server.client().await;
    let out = execute_err(&client, get_thing(1), "UPSTREAM_ERROR").await;
    let message = out["error"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "the OAuth token endpoint {} answered HTTP 401 (invalid_client)",
            idp.url("/token")
        )),
        "{message}"
    );
    assert!(message.contains("not sent"), "{message}");
    assert!(!out.to_string().contains("tenant=t1"), "{out}");
    assert_no_secret(&idp, &out);
    assert_eq!(idp.api_calls(), 0);

    // Eight callers at once while the endpoint fails: they share fetches, never one each
    // after another in a queue of failures.
    let before = idp.fetches();
    let mut tasks = Vec::new();
    for i in 0..8 {
        let peer = client.peer().clone();
        tasks.push(tokio::spawn(async move {
            call(&peer, "api_execute", get_thing(i)).await
        }));
    }
    for t in tasks {
        let (err, out) = t.await.unwrap();
        assert!(err, "{out}");
    }
    assert!(
        idp.fetches() - before <= 3,
        "{} fetches",
        idp.fetches() - before
    );
    client.cancel().await.ok();

    // No endpoint at all.
    let dead = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead_url = format!("http://{}/token", dead.local_addr().unwrap());
    drop(dead);
    let server = Server::start(args(&idp, &dir, &dead_url), false).await;
    let client = server.client().await;
    let (err, out) = call(&client, "api_execute", get_thing(1)).await;
    assert!(err, "{out}");
    let message = out["error"].as_str().unwrap();
    assert!(
        message.contains(&format!("{dead_url} could not be reached")),
        "{message}"
    );
    assert_eq!(idp.api_calls(), 0);
    client.cancel().await.ok();
}

/// OAuth and a configured `Authorization` cannot both be sent: refused at start-up, saying
/// which; the secret is needed.
#[tokio::test]
async fn oauth_conflicts_are_refused_at_start() {
    let idp = Idp::start(Duration::from_secs(60)).await;
    let dir = tempfile::tempdir().unwrap();
    let mut a = args(&idp, &dir, &idp.url("/token"));
    a.upstream_headers = vec!["Authorization: Bearer static-0123456789".into()];
    let e = format!("{:#}", a.build().await.err().expect("refused"));
    assert!(e.contains("an --upstream-header sets it too"), "{e}");
    assert!(!e.contains("static-0123456789"), "{e}");
    let mut a = args(&idp, &dir, &idp.url("/token"));
    a.upstream = Some(format!("http://u:pw-0123456789@{}", idp.addr));
    let e = format!("{:#}", a.build().await.err().expect("refused"));
    assert!(e.contains("user info of --upstream"), "{e}");
    let mut a = args(&idp, &dir, &idp.url("/token"));
    a.oauth.upstream_oauth_client_secret = None;
    let e = format!("{:#}", a.build().await.err().expect("refused"));
    assert!(e.contains("APIGATE_UPSTREAM_OAUTH_CLIENT_SECRET"), "{e}");
}

/// Serve mode over a real Postgres: the audit rows say `oauth` (and `scheme:tenantKey` where
/// the operation needs that scheme), never a value; the database holds neither token nor key.
#[tokio::test]
async fn production_audit_names_the_oauth_and_scheme_sources() {
    use crate::production::{Options, Prod};
    let db = crate::db::TestDb::new().await;
    let idp = Idp::start(Duration::from_secs(3600)).await;
    let dir = tempfile::tempdir().unwrap();
    let mut a = args(&idp, &dir, &idp.url("/token"));
    a.upstream_credentials = vec!["tenantKey=tenant-key-0123456789".into()];
    let prod = Prod::start_with(&db.url, a, Options::petstore()).await;
    let key = crate::support::key_holding(&prod.auth, "agent", &["*"]).await;
    let alice = apigate::auth::NewSession {
        user_id: "alice".into(),
        features: vec!["*".into()],
        ..Default::default()
    };
    let session = crate::support::session_token(&prod.auth, alice).await;
    let client = prod.client(&key, Some(&session)).await;
    execute_ok(&client, get_thing(1)).await;
    let out = execute_ok(
        &client,
        json!({"operationId": "getKeyed", "pathParams": {"id": 2}}),
    )
    .await;
    assert!(!out.to_string().contains("tenant-key-0123456789"), "{out}");
    client.cancel().await.ok();

    assert_eq!(prod.auth.drain_audit(Duration::from_secs(10)).await, 0);
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let rows: Vec<(String, Vec<String>)> = sqlx::query_as(
        "SELECT operation, credential_sources FROM audit_log \
         WHERE tool = 'api_execute' ORDER BY id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        rows,
        [
            ("getThing".to_string(), vec!["oauth".to_string()]),
            (
                "getKeyed".to_string(),
                vec!["oauth".to_string(), "scheme:tenantKey".to_string()]
            ),
        ]
    );
    let dump: Vec<(String,)> = sqlx::query_as("SELECT row_to_json(a)::text FROM audit_log a")
        .fetch_all(&pool)
        .await
        .unwrap();
    pool.close().await;
    for (row,) in dump {
        assert!(!row.contains("tenant-key"), "{row}");
        for t in idp.issued() {
            assert!(!row.contains(&t), "{row}");
        }
    }
}

/// Token endpoints that answer oddly: a body over the 64 KiB cap, a redirect (never
/// followed, even to a working endpoint), no `access_token`, a token type other than Bearer.
/// Each is an `UPSTREAM_ERROR` saying what was wrong, and the API gets no call.
#[tokio::test]
async fn odd_token_endpoint_answers_are_refused() {
    let idp = Idp::start(Duration::from_secs(3600)).await;
    let good = idp.url("/token");
    let odd = Router::new()
        .route(
            "/big",
            post(|| async {
                let pad = "x".repeat(100 * 1024);
                axum::Json(json!({"pad": pad, "access_token": "at-big", "token_type": "bearer"}))
            }),
        )
        .route(
            "/redirect",
            post(move || {
                let good = good.clone();
                async move { (StatusCode::TEMPORARY_REDIRECT, [("location", good)]) }
            }),
        )
        .route(
            "/none",
            post(|| async { axum::Json(json!({"token_type": "bearer", "expires_in": 60})) }),
        )
        .route(
            "/mac",
            post(|| async { axum::Json(json!({"access_token": "at-mac", "token_type": "mac"})) }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, odd).await });
    let dir = tempfile::tempdir().unwrap();
    for (path, says) in [
        (
            "/big",
            "answered without a usable token: no access_token in a JSON object",
        ),
        ("/redirect", "answered HTTP 307"),
        (
            "/none",
            "answered without a usable token: no access_token in a JSON object",
        ),
        (
            "/mac",
            "answered without a usable token: token_type is not Bearer",
        ),
    ] {
        let url = format!("{base}{path}");
        let server = Server::start(args(&idp, &dir, &url), false).await;
        let client = server.client().await;
        let (err, out) = call(&client, "api_execute", get_thing(1)).await;
        assert!(err, "{path}: {out}");
        assert_eq!(out["code"], "UPSTREAM_ERROR", "{path}: {out}");
        let message = out["error"].as_str().unwrap();
        assert!(
            message.contains(&format!("{url} {says}")),
            "{path}: {message}"
        );
        client.cancel().await.ok();
    }
    assert_eq!(idp.api_calls(), 0);
    assert_eq!(idp.fetches(), 0, "the redirect was followed");
}
