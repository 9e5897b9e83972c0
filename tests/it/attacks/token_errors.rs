//! Issue 26, item 2: the OAuth token endpoint's error answer never shows the client secret,
//! attacked for real: the `apigate dev` binary with `--upstream-oauth-*`, an MCP client, and a
//! token endpoint (axum) that answers 401 with the client secret as its `error` code, and in
//! its `error_description` (raw, base64, and inside `client_id:secret` base64). Neither the
//! agent's result nor apigate's log (its stderr, `RUST_LOG=debug`) may hold a piece of 6
//! characters of any of those forms; an `error` that is not one of RFC 6749 §5.2's codes is
//! named as unrecognised, a known one is still shown.
//!
//! - `a_token_endpoint_error_never_shows_the_client_secret`.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Value, json};

use crate::support::{KEY, call, flags, mcp_client, spawn_dev};

const CLIENT_ID: &str = "apigate-attack";
const CLIENT_SECRET: &str = "cs_Zq8Kd2Vx7Lm4Np0Rt6Wy3Hb9";

/// What the token endpoint answers (a JSON body, with 401).
type Answer = Arc<Mutex<Value>>;

async fn token(State(answer): State<Answer>) -> Response {
    let body = answer.lock().unwrap().clone();
    (StatusCode::UNAUTHORIZED, axum::Json(body)).into_response()
}

const SPEC: &str = r#"{
  "openapi": "3.0.3",
  "info": {"title": "Things", "version": "1"},
  "paths": {"/things": {"get": {"operationId": "listThings", "summary": "List things",
    "responses": {"200": {"description": "ok"}}}}}
}"#;

/// The client secret in every form an error answer could carry it, and its pieces.
fn forms() -> Vec<String> {
    let pair = format!("{CLIENT_ID}:{CLIENT_SECRET}");
    let mut out = vec![CLIENT_SECRET.to_string()];
    for s in [CLIENT_SECRET, pair.as_str()] {
        out.push(STANDARD.encode(s));
        out.push(URL_SAFE_NO_PAD.encode(s));
    }
    out
}

fn leaked_piece(text: &str) -> Option<String> {
    forms().into_iter().find_map(|f| {
        f.as_bytes()
            .windows(6)
            .map(|w| String::from_utf8_lossy(w).into_owned())
            .find(|w| text.contains(w.as_str()))
    })
}

#[tokio::test]
async fn a_token_endpoint_error_never_shows_the_client_secret() {
    let answer: Answer = Arc::new(Mutex::new(json!({"error": CLIENT_SECRET})));
    let app = Router::new()
        .route("/token", post(token))
        .with_state(answer.clone());
    let addr = crate::support::serve_app(app).await;

    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("things.json");
    std::fs::write(&spec, SPEC).unwrap();
    let upstream = format!("http://{addr}");
    let token_url = format!("http://{addr}/token");
    let oauth = flags(&[
        ("--upstream-oauth-token-url", &token_url),
        ("--upstream-oauth-client-id", CLIENT_ID),
    ]);
    let env = [
        ("RUST_LOG", "debug"),
        ("APIGATE_UPSTREAM_OAUTH_CLIENT_SECRET", CLIENT_SECRET),
    ];
    let spec = spec.to_str().unwrap();
    let (mut dev, mcp_url) = spawn_dev(spec, Some(&upstream), &oauth, &env).await;
    let client = mcp_client(&mcp_url, &[("x-api-key", KEY)]).await;
    let list = json!({"operationId": "listThings"});

    // The secret as the error code.
    let (err, out) = call(&client, "api_execute", list.clone()).await;
    assert!(err, "{out}");
    let message = out["error"].as_str().unwrap_or_default().to_string();
    assert!(message.contains("HTTP 401"), "{out}");
    assert!(message.contains("unrecognised error code"), "{message}");
    if let Some(piece) = leaked_piece(&out.to_string()) {
        panic!("{piece:?} of the client secret reached the agent: {out}");
    }

    // The secret in the description, in several forms, beside a real code.
    let pair = STANDARD.encode(format!("{CLIENT_ID}:{CLIENT_SECRET}"));
    *answer.lock().unwrap() = json!({
        "error": "invalid_client",
        "error_description": format!(
            "client secret {CLIENT_SECRET} refused; you sent Basic {pair} ({})",
            URL_SAFE_NO_PAD.encode(CLIENT_SECRET)
        ),
    });
    let (err, out) = call(&client, "api_execute", list).await;
    assert!(err, "{out}");
    let message = out["error"].as_str().unwrap_or_default();
    assert!(message.contains("HTTP 401 (invalid_client"), "{message}");
    assert!(
        message.contains("refused"),
        "the description is shown: {message}"
    );
    if let Some(piece) = leaked_piece(&out.to_string()) {
        panic!("{piece:?} of the client secret reached the agent: {out}");
    }

    client.cancel().await.ok();
    assert!(dev.terminate().await, "{}", dev.log());
    let log = dev.stderr();
    assert!(
        log.contains("no OAuth token for the upstream"),
        "the failure is logged:\n{log}"
    );
    if let Some(piece) = leaked_piece(&log) {
        panic!("{piece:?} of the client secret is in the log:\n{log}");
    }
}
