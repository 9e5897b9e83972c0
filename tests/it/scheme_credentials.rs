//! Credentials by security scheme (`--upstream-credential SCHEME=VALUE`), end to end through
//! the binary in dev mode: each credential goes where its scheme says (apiKey header, query,
//! cookie; http bearer and basic) and only on the operations whose `security` needs it;
//! `api_schema` says what is needed and what apigate supplies; the query-placed key is in no
//! result, dry run or log line, though the API echoes the URL it was called with; nor is the
//! OAuth token or client secret.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::HeaderMap;
use base64::Engine as _;
use serde_json::{Value, json};

use crate::support::{KEY, call, flags, mcp_client, spawn_dev};

const QUERY_KEY: &str = "query-key-0123456789";
const HEADER_KEY: &str = "header-key-0123456789";
const COOKIE_KEY: &str = "cookie-key-0123456789";
const BEARER: &str = "bearer-token-0123456789";
const BASIC: &str = "alice:basic-password-0123456789";
const OAUTH_TOKEN: &str = "oauth-token-0123456789";
const OAUTH_SECRET: &str = "oauth-secret-0123456789";

const SPEC: &str = r#"{
  "openapi": "3.0.3",
  "info": {"title": "Schemes", "version": "1"},
  "components": {"securitySchemes": {
    "queryKey": {"type": "apiKey", "in": "query", "name": "api_key"},
    "headerKey": {"type": "apiKey", "in": "header", "name": "X-Api-Token"},
    "cookieKey": {"type": "apiKey", "in": "cookie", "name": "session"},
    "bearer": {"type": "http", "scheme": "bearer"},
    "basic": {"type": "http", "scheme": "basic"},
    "mtls": {"type": "mutualTLS"}
  }},
  "paths": {
    "/a": {"get": {"operationId": "queryOnly", "security": [{"queryKey": []}],
      "parameters": [{"name": "q", "in": "query", "schema": {"type": "string"}}],
      "responses": {"200": {"description": "ok"}}}},
    "/b": {"get": {"operationId": "headerAndCookie", "security": [{"headerKey": [], "cookieKey": []}],
      "responses": {"200": {"description": "ok"}}}},
    "/c": {"get": {"operationId": "bearerOrBasic", "security": [{"mtls": []}, {"bearer": []}, {"basic": []}],
      "responses": {"200": {"description": "ok"}}}},
    "/d": {"get": {"operationId": "open", "security": [],
      "responses": {"200": {"description": "ok"}}}},
    "/e": {"get": {"operationId": "basicOnly", "security": [{"basic": []}],
      "responses": {"200": {"description": "ok"}}}},
    "/f": {"get": {"operationId": "mtlsOnly", "security": [{"mtls": []}],
      "responses": {"200": {"description": "ok"}}}}
  }
}"#;

#[derive(Debug, Clone)]
struct Seen {
    uri: String,
    headers: HeaderMap,
}

/// An API that records and echoes every request: its URI and headers.
async fn echo(State(seen): State<Arc<Mutex<Vec<Seen>>>>, request: Request) -> axum::Json<Value> {
    let uri = request.uri().to_string();
    let headers = request.headers().clone();
    seen.lock().unwrap().push(Seen {
        uri: uri.clone(),
        headers: headers.clone(),
    });
    let shown: serde_json::Map<String, Value> = headers
        .iter()
        .map(|(n, v)| (n.to_string(), json!(v.to_str().unwrap_or_default())))
        .collect();
    axum::Json(json!({"uri": uri, "headers": shown}))
}

fn header<'a>(s: &'a Seen, name: &str) -> Option<&'a str> {
    s.headers.get(name).and_then(|v| v.to_str().ok())
}

fn assert_no_credential(text: &str) {
    let basic = base64::engine::general_purpose::STANDARD.encode(BASIC);
    for secret in [
        QUERY_KEY,
        HEADER_KEY,
        COOKIE_KEY,
        BEARER,
        BASIC,
        &basic,
        OAUTH_TOKEN,
        OAUTH_SECRET,
    ] {
        assert!(!text.contains(secret), "{secret} shown: {text}");
        assert!(
            !text.contains(&secret[..10]),
            "part of {secret} shown: {text}"
        );
    }
}

/// A token endpoint that hands out one token.
async fn token() -> axum::Json<Value> {
    axum::Json(json!({"access_token": OAUTH_TOKEN, "token_type": "Bearer", "expires_in": 600}))
}

/// The binary with every scheme kind and OAuth client credentials at once: OAuth's token goes
/// on every call whose scheme does not put its own `Authorization`.
#[tokio::test]
async fn each_credential_goes_where_its_scheme_says_and_only_where_needed() {
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let app = Router::new()
        .route("/oauth/token", axum::routing::post(token))
        .fallback(echo)
        .with_state(seen.clone());
    let addr = crate::support::serve_app(app).await;

    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("schemes.json");
    std::fs::write(&spec, SPEC).unwrap();
    let upstream = format!("http://{addr}");
    let query_arg = format!("queryKey={QUERY_KEY}");
    let header_arg = format!("headerKey={HEADER_KEY}");
    let cookie_arg = format!("cookieKey={COOKIE_KEY}");
    let basic_arg = format!("basic={BASIC}");
    let token_url = format!("http://{addr}/oauth/token");
    let credentials = flags(&[
        ("--upstream-credential", &query_arg),
        ("--upstream-credential", &header_arg),
        ("--upstream-credential", &cookie_arg),
        ("--upstream-credential", "bearer=env:APIGATE_TEST_BEARER"),
        ("--upstream-credential", &basic_arg),
        ("--upstream-oauth-token-url", &token_url),
        ("--upstream-oauth-client-id", "apigate"),
    ]);
    let env = [
        ("RUST_LOG", "debug"),
        ("APIGATE_TEST_BEARER", BEARER),
        ("APIGATE_UPSTREAM_OAUTH_CLIENT_SECRET", OAUTH_SECRET),
    ];
    let spec = spec.to_str().unwrap();
    let (mut dev, mcp_url) = spawn_dev(spec, Some(&upstream), &credentials, &env).await;
    let client = mcp_client(&mcp_url, &[("x-api-key", KEY)]).await;
    let mut shown = String::new();
    let mut run = async |args: Value| -> Value {
        let (err, out) = call(&client, "api_execute", args).await;
        assert!(!err, "{out}\n{}", dev.log());
        shown.push_str(&out.to_string());
        out
    };

    // apiKey in the query: on the URL sent, never on one shown; the echo is scrubbed.
    let out = run(json!({"operationId": "queryOnly", "query": {"q": "x"}})).await;
    assert!(
        out["body"]["uri"].as_str().unwrap().contains("[redacted]"),
        "{out}"
    );
    let dry = run(json!({"operationId": "queryOnly", "query": {"q": "x"}, "dryRun": true})).await;
    assert!(
        !dry["request"]["url"].as_str().unwrap().contains("api_key"),
        "{dry}"
    );
    // apiKey in a header and in a cookie, together.
    run(json!({"operationId": "headerAndCookie"})).await;
    // Alternatives: mutualTLS cannot be supplied, bearer is the first that can.
    run(json!({"operationId": "bearerOrBasic"})).await;
    run(json!({"operationId": "open"})).await;
    run(json!({"operationId": "basicOnly"})).await;
    run(json!({"operationId": "mtlsOnly"})).await;

    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 6, "{seen:?}");
    assert_eq!(seen[0].uri, format!("/a?q=x&api_key={QUERY_KEY}"));
    assert_eq!(header(&seen[0], "x-api-token"), None);
    assert_eq!(header(&seen[1], "x-api-token"), Some(HEADER_KEY));
    assert_eq!(
        header(&seen[1], "cookie"),
        Some(&*format!("session={COOKIE_KEY}"))
    );
    assert_eq!(seen[1].uri, "/b");
    assert_eq!(
        header(&seen[2], "authorization"),
        Some(&*format!("Bearer {BEARER}"))
    );
    let oauth = format!("Bearer {OAUTH_TOKEN}");
    for s in [&seen[0], &seen[1], &seen[3], &seen[5]] {
        assert_eq!(header(s, "authorization"), Some(&*oauth), "{}", s.uri);
    }
    for s in [&seen[3], &seen[5]] {
        assert!(s.uri == "/d" || s.uri == "/f");
        for h in ["cookie", "x-api-token"] {
            assert_eq!(header(s, h), None, "{} got {h}", s.uri);
        }
        assert!(!s.uri.contains("api_key"));
    }
    let basic = base64::engine::general_purpose::STANDARD.encode(BASIC);
    assert_eq!(
        header(&seen[4], "authorization"),
        Some(&*format!("Basic {basic}"))
    );

    // api_schema: what each operation needs and whether apigate supplies it; supplied, the
    // compact view says only that, the full view names the schemes.
    let (_, schema) = call(&client, "api_schema", json!({"operationId": "queryOnly"})).await;
    assert_eq!(
        schema["security"],
        json!({"needed": true, "supplied": true})
    );
    let (_, schema) = call(
        &client,
        "api_schema",
        json!({"operationId": "queryOnly", "detail": "full"}),
    )
    .await;
    assert_eq!(
        schema["security"]["alternatives"],
        json!([[{"type": "apiKey", "in": "query", "name": "api_key", "scheme": "queryKey", "supplied": true}]])
    );
    assert_eq!(schema["security"]["supplied"], true);
    let (_, schema) = call(&client, "api_schema", json!({"operationId": "mtlsOnly"})).await;
    assert_eq!(schema["security"]["supplied"], false, "{schema}");
    assert!(
        schema["security"]["note"]
            .as_str()
            .unwrap()
            .contains("--upstream-credential"),
        "{schema}"
    );
    let (_, schema) = call(&client, "api_schema", json!({"operationId": "open"})).await;
    assert_eq!(schema["security"], json!({"needed": false}));
    shown.push_str(&schema.to_string());
    client.cancel().await.ok();

    assert!(dev.terminate().await);
    assert_no_credential(&shown);
    assert_no_credential(&dev.stderr());
}

/// A credential for a scheme the spec lacks, or one apigate cannot supply: the binary refuses
/// to start and says why, without the value.
#[tokio::test]
async fn unusable_scheme_credentials_stop_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("schemes.json");
    std::fs::write(&spec, SPEC).unwrap();
    for (arg, says) in [
        (
            "nope=sekrit-0123456789",
            "no security scheme \"nope\"; it has basic, bearer",
        ),
        ("mtls=sekrit-0123456789", "cannot supply"),
        ("basic=sekrit-0123456789", "user:password"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_apigate"))
            .args(["dev", "--spec", spec.to_str().unwrap(), "--api-key", KEY])
            .args(["--listen", "127.0.0.1:0", "--upstream-credential", arg])
            .env_remove("APIGATE_API_KEY")
            .env_remove("MCP_SERVER_API_KEY")
            .output()
            .unwrap();
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{arg}: {stderr}");
        assert!(!stderr.contains("sekrit"), "{stderr}");
    }
}
