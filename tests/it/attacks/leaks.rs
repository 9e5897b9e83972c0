//! No credential reaches the agent (issue 15, items 1–3 and binary bodies), attacked for real:
//! apigate's HTTP server with an MCP client, and an upstream axum app that echoes the
//! credentials it receives (as JSON, PHP-style JSON with `\/`, text, or percent-encoded in a
//! link), serves binary content under any content type, and serves the spec only to a caller
//! with the spec URL's user info and `?access_token=`.
//!
//! - `a_cut_never_leaves_part_of_a_credential`: `--max-response-bytes` small, the pad length
//!   swept over the whole budget so the cut lands on every character of every echoed
//!   credential; no 6-character piece of any form (raw, percent-encoded, Basic base64) may
//!   appear in any result.
//! - `upstream_user_info_is_a_secret_in_every_form`: the same sweep with
//!   `--upstream http://user:password@host`, which apigate sends as `Authorization: Basic …`.
//! - `spec_url_credentials_never_reach_the_api`: a spec loaded from a URL with user info and an
//!   access token, with a relative server; the API never receives them.
//! - `health_shows_no_spec_credentials`: `/health` (no key) does not show them either.
//! - `invalid_upstream_and_spec_urls_are_reported_without_credentials`: the real binary.
//! - `binary_bodies_are_described_not_escaped`.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine as _;
use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
use serde_json::{Value, json};

use super::{echo_padded, echo_spec, echoed, execute, query_param, url_forms};
use crate::support::{Server, engine_args};

const TOKEN: &str = "sk_live_51HqLyjWDarjtT1zdp7dcXk9Q";
const API_KEY: &str = "ak_9f8e7d6c5b4a3210ZYXWvuts";
const API_USER: &str = "apiuser";
/// `/`, `+` and `=` need percent-encoding in the URL; base64 of `apiuser:` + this has a `/`.
const API_PASSWORD: &str = "Pa55/w0rd+Sekr3t=x?>?";
const SPEC_USER: &str = "specreader";
const SPEC_PASSWORD: &str = "Sp3cPassw0rd4Docs";
const SPEC_TOKEN: &str = "at_7c1d2e3f4a5b6c7d8e9f";
/// The response budget of the sweeps.
const BUDGET: usize = 320;

fn spec() -> Value {
    let binary = json!({
        "operationId": "binary",
        "summary": "Binary content under any content type",
        "parameters": [query_param("kind"), query_param("type")],
        "responses": {"200": {"description": "bytes"}}
    });
    echo_spec("Echo", "Echo the credentials received", "/binary", binary)
}

/// The spec as a file; its name is `leaks-echo.json`.
fn spec_file() -> String {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("attacks-leaks");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("leaks-echo.json");
    std::fs::write(&path, spec().to_string()).unwrap();
    path.to_string_lossy().into_owned()
}

/// The echoing upstream; also serves the spec to a caller with the spec's credentials.
struct Echo {
    addr: SocketAddr,
    /// The headers of every request to `/api/…`.
    seen: Arc<Mutex<Vec<HeaderMap>>>,
}

impl Echo {
    async fn start() -> Echo {
        let seen: Arc<Mutex<Vec<HeaderMap>>> = Arc::default();
        let app = Router::new()
            .route("/api/echo", get(echo))
            .route("/api/binary", get(binary))
            .route("/openapi.json", get(serve_spec))
            .with_state(seen.clone());
        let addr = crate::support::serve_app(app).await;
        Echo { addr, seen }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

type Params = Query<std::collections::HashMap<String, String>>;

/// The credentials received, after `pad`, in the form asked for.
async fn echo(
    State(seen): State<Arc<Mutex<Vec<HeaderMap>>>>,
    headers: HeaderMap,
    Query(q): Params,
) -> Response {
    seen.lock().unwrap().push(headers.clone());
    let doc = echoed(&headers, &q);
    let text = |field: &str| doc[field].as_str().unwrap().to_string();
    let (pad, auth, key) = (text("pad"), text("authorization"), text("x-api-key"));
    let json_type = [(header::CONTENT_TYPE, "application/json")];
    match q.get("form").map(String::as_str).unwrap_or("json") {
        // PHP's json_encode escapes `/`.
        "slash" => (json_type, doc.to_string().replace('/', "\\/")).into_response(),
        "text" => (
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            format!("{pad}\nauthorization: {auth}\nx-api-key: {key}\n"),
        )
            .into_response(),
        "pct" => {
            let auth: String = url::form_urlencoded::byte_serialize(auth.as_bytes()).collect();
            let key = utf8_percent_encode(&key, NON_ALPHANUMERIC);
            let link = format!("https://example.test/cb?auth={auth}&key={key}");
            (json_type, json!({"pad": pad, "next": link}).to_string()).into_response()
        }
        _ => (json_type, doc.to_string()).into_response(),
    }
}

/// 6,000 bytes that are not UTF-8 (`kind=bytes`) or NUL bytes (`kind=nul`), under the content
/// type `type` (none when `type=none`).
async fn binary(
    State(seen): State<Arc<Mutex<Vec<HeaderMap>>>>,
    headers: HeaderMap,
    Query(q): Params,
) -> Response {
    seen.lock().unwrap().push(headers);
    let body: Vec<u8> = match q.get("kind").map(String::as_str) {
        Some("nul") => vec![0; 6000],
        _ => (0..=255u8).cycle().take(6000).collect(),
    };
    let mut response = body.into_response();
    response.headers_mut().remove(header::CONTENT_TYPE);
    match q.get("type").map(String::as_str) {
        None | Some("none") => {}
        Some(t) => {
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, t.parse().unwrap());
        }
    }
    response
}

/// The spec, only with the spec's user info and access token.
async fn serve_spec(headers: HeaderMap, Query(q): Params) -> Response {
    let want = format!("Basic {}", basic(SPEC_USER, SPEC_PASSWORD));
    let authorized = headers.get("authorization").and_then(|v| v.to_str().ok())
        == Some(want.as_str())
        && q.get("access_token").map(String::as_str) == Some(SPEC_TOKEN);
    if !authorized {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    axum::Json(spec()).into_response()
}

/// base64 of `user:password`, as in `Authorization: Basic …`.
fn basic(user: &str, password: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
}

/// Every form of `secrets` an echo can take: as is, percent-encoded (every non-alphanumeric
/// character, or form style).
fn forms(secrets: &[String]) -> Vec<String> {
    secrets.iter().flat_map(|s| url_forms(s)).collect()
}

/// The first piece of 6 characters or more of any form found in `text`.
fn leaked_piece(text: &str, forms: &[String]) -> Option<(String, String)> {
    for f in forms {
        for w in f.as_bytes().windows(6) {
            let w = String::from_utf8_lossy(w);
            if text.contains(w.as_ref()) {
                return Some((w.into_owned(), f.clone()));
            }
        }
    }
    None
}

/// Sweeps the pad length over the whole budget for every echo form and checks every result.
async fn sweep(server: &Server, forms: &[String]) {
    let client = server.client().await;
    let mut cut = 0;
    for form in ["json", "slash", "text", "pct"] {
        for pad in 0..=BUDGET {
            let (shown, text) = echo_padded(&client, pad, form).await;
            if shown["truncated"] == true {
                cut += 1;
            }
            if let Some((piece, form_of)) = leaked_piece(&text, forms) {
                panic!(
                    "echo form {form}, pad {pad}: {piece:?} (of {form_of:?}) reached the agent: {}",
                    shown["body"]
                );
            }
        }
    }
    // The sweep did cut through the credentials, in every form.
    assert!(cut > 4 * 50, "only {cut} results were cut");
    client.cancel().await.unwrap();
}

/// Item 1: the cut lands on every character of `Authorization: Bearer …` and `X-Api-Key`.
#[tokio::test]
async fn a_cut_never_leaves_part_of_a_credential() {
    let echo = Echo::start().await;
    let mut args = engine_args(&spec_file(), Some(echo.url()));
    args.upstream_headers = vec![
        format!("Authorization: Bearer {TOKEN}"),
        format!("X-Api-Key: {API_KEY}"),
    ];
    args.max_response_bytes = BUDGET;
    let server = Server::start(args, false).await;
    let secrets = [format!("Bearer {TOKEN}"), TOKEN.into(), API_KEY.into()];
    sweep(&server, &forms(&secrets)).await;
    // The upstream did receive them.
    let seen = echo.seen.lock().unwrap().clone();
    assert_eq!(
        seen[0].get("authorization").unwrap(),
        &format!("Bearer {TOKEN}")
    );
}

/// Item 2: `--upstream http://user:password@host` is sent as `Authorization: Basic …`; that
/// value, its base64, `user:password` and the password are secrets in every form.
#[tokio::test]
async fn upstream_user_info_is_a_secret_in_every_form() {
    let echo = Echo::start().await;
    let password_in_url = utf8_percent_encode(API_PASSWORD, NON_ALPHANUMERIC).to_string();
    let upstream = format!("http://{API_USER}:{password_in_url}@{}", echo.addr);
    let mut args = engine_args(&spec_file(), Some(upstream));
    args.upstream_headers = vec![];
    args.max_response_bytes = BUDGET;
    let server = Server::start(args, false).await;
    let b64 = basic(API_USER, API_PASSWORD);
    assert!(b64.contains('/'), "{b64}: the slash form needs a `/`");
    let secrets = [
        format!("Basic {b64}"),
        b64.clone(),
        format!("{API_USER}:{API_PASSWORD}"),
        API_PASSWORD.into(),
        password_in_url,
    ];
    sweep(&server, &forms(&secrets)).await;
    let seen = echo.seen.lock().unwrap().clone();
    assert_eq!(
        seen[0].get("authorization").unwrap(),
        &format!("Basic {b64}"),
        "the user info is sent as Basic credentials"
    );
}

/// The spec URL with user info and an access token: only with both does `/openapi.json`
/// answer.
fn protected_spec_url(echo: &Echo) -> String {
    format!(
        "http://{SPEC_USER}:{SPEC_PASSWORD}@{}/openapi.json?access_token={SPEC_TOKEN}",
        echo.addr
    )
}

fn spec_secrets() -> Vec<String> {
    forms(&[
        SPEC_PASSWORD.to_string(),
        SPEC_TOKEN.into(),
        basic(SPEC_USER, SPEC_PASSWORD),
        format!("{SPEC_USER}:{SPEC_PASSWORD}"),
    ])
}

/// Item 2: a spec fetched from a URL with user info, whose server is relative: API calls go to
/// the spec's host without the spec's credentials.
/// A server on the spec at [`protected_spec_url`], with no upstream header of its own.
async fn protected_spec_server(echo: &Echo) -> Server {
    let mut args = engine_args(&protected_spec_url(echo), None);
    args.upstream_headers = vec![];
    Server::start(args, false).await
}

#[tokio::test]
async fn spec_url_credentials_never_reach_the_api() {
    let echo = Echo::start().await;
    let server = protected_spec_server(&echo).await;
    let client = server.client().await;
    let (shown, text) = execute(&client, "echo", json!({"form": "json"})).await;
    assert_eq!(shown["status"], 200, "{text}");
    let seen = echo.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].get("authorization"),
        None,
        "the spec URL's user info was sent to the API"
    );
    assert_eq!(leaked_piece(&text, &spec_secrets()), None, "{text}");
    client.cancel().await.unwrap();
}

/// Item 3: `/health` needs no key; it names the spec by its URL without user info or query, or
/// by a file's name.
#[tokio::test]
async fn health_shows_no_spec_credentials() {
    let echo = Echo::start().await;
    let server = protected_spec_server(&echo).await;
    let health = reqwest::get(server.url("/health")).await.unwrap();
    assert_eq!(health.status(), 200);
    let health: Value = health.json().await.unwrap();
    let text = health.to_string();
    assert!(!text.contains(SPEC_USER), "{text}");
    assert!(!text.contains("access_token"), "{text}");
    assert_eq!(leaked_piece(&text, &spec_secrets()), None, "{text}");
    assert_eq!(
        health["specs"][0]["source"],
        format!("http://{}/openapi.json", echo.addr),
        "{text}"
    );

    // A spec from a file: its name, not where it lives.
    let file_server = Server::start(engine_args(&spec_file(), Some(echo.url())), false).await;
    let health: Value = crate::support::get_json(file_server.url("/health")).await;
    assert_eq!(health["specs"][0]["source"], "leaks-echo.json", "{health}");
}

/// `apigate dev` with these extra arguments, which must fail: its stderr.
async fn dev_fails(extra: &[&str]) -> String {
    let mut args = vec![
        "dev",
        "--listen",
        "127.0.0.1:0",
        "--api-key",
        crate::support::KEY,
    ];
    args.extend(extra);
    let (ok, _, stderr) = crate::support::run_apigate(&args, &[("NO_COLOR", "1")]).await;
    assert!(!ok, "apigate dev {extra:?} started");
    stderr
}

/// Item 2: an `--upstream` or `--spec` URL that cannot be used is named in the error without
/// its password or token.
#[tokio::test]
async fn invalid_upstream_and_spec_urls_are_reported_without_credentials() {
    let spec = spec_file();
    let password = "Upstr3amPassw0rdXyz";
    for upstream in [
        format!("http://{API_USER}:{password}@127.0.0.1:99999/v1"),
        format!("ftp://{API_USER}:{password}@127.0.0.1/"),
        format!("https://{API_USER}:{password}@api.example.com/?token={password}"),
    ] {
        let stderr = dev_fails(&["--spec", &spec, "--upstream", &upstream]).await;
        assert!(stderr.contains("--upstream"), "{stderr}");
        assert!(!stderr.contains(password), "{upstream}: {stderr}");
    }
    let both = format!("http://{API_USER}:{password}@127.0.0.1:9/");
    let stderr = dev_fails(&[
        "--spec",
        &spec,
        "--upstream",
        &both,
        "--upstream-header",
        "Authorization: Bearer x",
    ])
    .await;
    assert!(stderr.contains("Authorization"), "{stderr}");
    assert!(!stderr.contains(password), "{stderr}");

    // A spec URL nothing answers.
    let port = crate::support::free_port();
    let spec_url = format!(
        "http://{SPEC_USER}:{SPEC_PASSWORD}@127.0.0.1:{port}/openapi.json?access_token={SPEC_TOKEN}"
    );
    let stderr = dev_fails(&["--spec", &spec_url]).await;
    assert!(stderr.contains(&format!("127.0.0.1:{port}")), "{stderr}");
    assert!(!stderr.contains(SPEC_PASSWORD), "{stderr}");
    assert!(!stderr.contains(SPEC_TOKEN), "{stderr}");
}

/// Also: non-UTF-8 bytes (or NULs) under a text, JSON or no content type come back as type and
/// size (here with base64, within the budget), never as kilobytes of escaped text.
#[tokio::test]
async fn binary_bodies_are_described_not_escaped() {
    let echo = Echo::start().await;
    let mut args = engine_args(&spec_file(), Some(echo.url()));
    args.max_response_bytes = 16 * 1024;
    let server = Server::start(args, false).await;
    let client = server.client().await;
    let bytes: Vec<u8> = (0..=255u8).cycle().take(6000).collect();
    for kind in ["bytes", "nul"] {
        for ct in [
            "text/plain",
            "text/plain; charset=utf-8",
            "application/json",
            "application/xml",
            "none",
        ] {
            let (shown, text) = execute(&client, "binary", json!({"kind": kind, "type": ct})).await;
            let body = &shown["body"];
            assert_eq!(
                body["bytes"],
                6000,
                "{kind} as {ct}: {}",
                &text[..text.len().min(300)]
            );
            assert!(body["contentType"].is_string(), "{body}");
            let want = if kind == "nul" {
                vec![0; 6000]
            } else {
                bytes.clone()
            };
            let got = base64::engine::general_purpose::STANDARD
                .decode(body["base64"].as_str().unwrap())
                .unwrap();
            assert!(got == want, "{kind} as {ct}: other bytes");
            // The result is the base64 (twice: content and structured content), not escapes.
            assert!(
                text.len() < 2 * 8000 + 2000,
                "{kind} as {ct}: {} bytes",
                text.len()
            );
        }
    }
    // Over the budget: type and size only.
    let mut args = engine_args(&spec_file(), Some(echo.url()));
    args.max_response_bytes = 1000;
    let small = Server::start(args, false).await;
    let client = small.client().await;
    let (shown, text) = execute(
        &client,
        "binary",
        json!({"kind": "bytes", "type": "text/plain"}),
    )
    .await;
    // The whole body is read (up to --max-read-bytes), so its real size is told; its base64
    // form is over the shown budget, so it is not shown.
    assert_eq!(shown["body"]["bytes"], 6000, "{text}");
    assert!(shown["body"].get("base64").is_none(), "{text}");
    assert!(
        shown["body"]["note"]
            .as_str()
            .unwrap()
            .contains("not shown"),
        "{text}"
    );
    assert!(text.len() < 2000, "{} bytes: {text}", text.len());
}
