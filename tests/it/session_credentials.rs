//! Per-session upstream credentials (issue 18 §1) through the real `apigate` binary, a real
//! Postgres and an echoing upstream: each user's own token reaches the API, the audit says
//! `session`, revocation deletes the credential and stops the token at once, and no planted
//! secret shows up in any form in results, dry runs, listings, logs or the database.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use apigate::auth::sealed::{SecretKeys, generate_key_base64};
use apigate::auth::session_upstream::UpstreamInput;
use apigate::auth::{Auth, AuthConfig, KeyPrincipal, NewSession, SessionRef};
use axum::Router;
use axum::extract::{Request, State};
use axum::response::IntoResponse;
use base64::Engine as _;
use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::Row;

use crate::db::TestDb;
use crate::production::{BOOTSTRAP, Prod};
use crate::support::{cli_key, flags, mcp_client, spawn_serve, spec_path};

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn pct(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// Every form of a secret an echoing API or a careless log could produce.
fn forms(secret: &str) -> Vec<String> {
    let mut out = vec![secret.to_string(), b64(secret), pct(secret)];
    out.push(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(secret));
    out
}

/// Asserts that `text` (what `what` produced) holds no form of any of `secrets`.
fn assert_clean(what: &str, text: &str, secrets: &[String]) {
    for s in secrets {
        for f in forms(s) {
            assert!(
                !text.contains(&f),
                "{what} contains a planted secret (form {f:?}):\n{text}"
            );
        }
    }
}

/// What the echoing upstream saw: (path, Authorization, X-Server-Only).
type Seen = Arc<Mutex<Vec<(String, Option<String>, Option<String>)>>>;

/// An API that records who called and echoes every header it received back in the forms the
/// response scrubbing covers (`upstream/redact.rs`): raw, percent-encoded, JSON-escaped (the
/// body is JSON), the token after the scheme, a Basic credential decoded and its password.
/// (Not base64 of a whole value: the scrubbing does not cover that form; see the report.)
async fn echo(State(seen): State<Seen>, req: Request) -> axum::response::Response {
    let header = |n: &str| {
        req.headers()
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let auth = header("authorization");
    let server_only = header("x-server-only");
    seen.lock()
        .unwrap()
        .push((req.uri().path().to_string(), auth.clone(), server_only));
    let mut echoed = Vec::new();
    for (_, v) in req.headers() {
        let v = v.to_str().unwrap_or_default().to_string();
        let token = v
            .split_once(' ')
            .map(|(_, t)| t.to_string())
            .unwrap_or_default();
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(&token)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .unwrap_or_default();
        let password = decoded.split_once(':').map(|(_, p)| p.to_string());
        echoed.push(json!({
            "raw": v, "pct": pct(&v), "token": token, "tokenPct": pct(&token),
            "decoded": decoded, "password": password,
            "passwordPct": password.as_deref().map(pct),
        }));
    }
    let echo_header = auth.clone().unwrap_or_default();
    (
        [("x-echo", echo_header)],
        axum::Json(json!({"id": 1, "name": "Rex", "photoUrls": [], "echo": echoed})),
    )
        .into_response()
}

async fn echo_upstream() -> (String, Seen) {
    let seen: Seen = Arc::default();
    let app = Router::new().fallback(echo).with_state(seen.clone());
    let addr = crate::support::serve_app(app).await;
    (format!("http://{addr}"), seen)
}

/// Runs `apigate ARGS` with `env` only; (success, stdout, stderr).
async fn apigate(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    crate::support::run_apigate(args, env).await
}

/// `api_execute` as the agent sees it: (isError, structured content, the whole result as text).
async fn call_text(
    client: &rmcp::service::Peer<rmcp::service::RoleClient>,
    args: Value,
) -> (bool, Value, String) {
    crate::support::call_shown(client, "api_execute", args).await
}

#[tokio::test]
async fn each_user_reaches_the_api_with_their_own_token_and_nothing_leaks() {
    let db = TestDb::new().await;
    let url = db.url.as_str();
    let run = uuid::Uuid::new_v4().simple().to_string();
    // Planted secrets, with characters that percent-encoding and base64 change.
    let alice_token = format!("alice+tok/{run}=");
    let bob_password = format!("pw+{run}/bob");
    let bob_basic = b64(&format!("bob:{bob_password}"));
    let server_token = format!("server-tok-{run}");
    let server_only = format!("srv-only-{run}");
    let secrets = vec![
        alice_token.clone(),
        bob_password.clone(),
        bob_basic.clone(),
        server_token.clone(),
        server_only.clone(),
    ];

    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("secret.key");
    std::fs::write(&key_file, generate_key_base64()).unwrap();
    let key_file = key_file.to_str().unwrap().to_string();
    let db_env = [("DATABASE_URL", url)];

    // Without a key, a session with credentials is refused, saying how to configure one.
    let alice_header = format!("Authorization: Bearer {alice_token}");
    let (ok, out, err) = apigate(
        &[
            "sessions",
            "create",
            "--user",
            "alice",
            "--features",
            "apigate.*",
            "--upstream-header",
            &alice_header,
        ],
        &db_env,
    )
    .await;
    assert!(!ok, "{out}");
    assert!(
        err.contains("APIGATE_SECRET_KEY") && err.contains("--secret-key-file"),
        "{err}"
    );
    assert_clean("the refusal", &(out.clone() + &err), &secrets);

    let agent_key = cli_key(
        url,
        "agent",
        "apigate.discover,apigate.schema,apigate.execute",
    )
    .await["key"]
        .as_str()
        .unwrap()
        .to_string();
    let admin_key = cli_key(url, "backend", "apigate.*").await["key"]
        .as_str()
        .unwrap()
        .to_string();

    // Alice's session by the CLI, with her own token.
    let (ok, out, err) = apigate(
        &[
            "sessions",
            "create",
            "--user",
            "alice",
            "--tenant",
            "acme",
            "--organization",
            "acme-eu",
            "--features",
            "apigate.*",
            "--upstream-header",
            &alice_header,
            "--secret-key-file",
            &key_file,
            "--json",
        ],
        &db_env,
    )
    .await;
    assert!(ok, "{err}");
    assert_clean("sessions create", &(out.clone() + &err), &secrets);
    let alice: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(alice["upstreamHeaders"], json!(["authorization"]));
    let alice_session = alice["token"].as_str().unwrap().to_string();

    // The server: configured credentials that the session's replace (Authorization) or not.
    let (upstream_url, seen) = echo_upstream().await;
    let petstore = spec_path("petstore-3.0.json");
    let server_auth = format!("Authorization: Bearer {server_token}");
    let server_extra = format!("X-Server-Only: {server_only}");
    let extra = flags(&[
        ("--upstream-header", &server_auth),
        ("--upstream-header", &server_extra),
        ("--secret-key-file", &key_file),
    ]);
    let (server, mcp_url) = spawn_serve(
        &petstore,
        &upstream_url,
        &extra,
        &[
            ("DATABASE_URL", url),
            // Everything apigate logs, at every level.
            (
                "RUST_LOG",
                "debug,apigate=trace,rmcp=info,hyper=info,h2=info",
            ),
        ],
    )
    .await;
    let base = mcp_url.trim_end_matches("/mcp").to_string();
    let http = reqwest::Client::new();

    // Bob's session over the admin API, with a Basic credential.
    let resp = http
        .post(format!("{base}/admin/v1/sessions"))
        .header("x-api-key", &admin_key)
        .json(&json!({
            "userId": "bob",
            "features": ["apigate.*"],
            "upstream": {"headers": {"Authorization": format!("Basic {bob_basic}")}},
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let text = resp.text().await.unwrap();
    assert_clean("POST /admin/v1/sessions", &text, &secrets);
    let bob: Value = serde_json::from_str(&text).unwrap();
    let bob_session = bob["token"].as_str().unwrap().to_string();
    // Forbidden names and oversized sets are refused, without echoing the value.
    for bad in [
        json!({"Host": format!("evil-{run}")}),
        json!({"Transfer-Encoding": format!("chunked-{run}")}),
        Value::Object(
            (0..17)
                .map(|i| (format!("x-h{i}"), json!(format!("v-{run}"))))
                .collect(),
        ),
    ] {
        let resp = http
            .post(format!("{base}/admin/v1/sessions"))
            .header("x-api-key", &admin_key)
            .json(&json!({"userId": "mallory", "upstream": {"headers": bad}}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
        let text = resp.text().await.unwrap();
        assert!(!text.contains(&run), "{text}");
    }

    // Each user's call reaches the API with that user's own token.
    let alice_client = mcp_client(
        &mcp_url,
        &[
            ("x-api-key", &agent_key),
            ("x-session-token", &alice_session),
        ],
    )
    .await;
    let bob_client = mcp_client(
        &mcp_url,
        &[("x-api-key", &agent_key), ("x-session-token", &bob_session)],
    )
    .await;
    let get = json!({"method": "GET", "path": "/pet/1"});
    let (err, alice_result, alice_text) = call_text(&alice_client, get.clone()).await;
    assert!(!err, "{alice_text}\n{}", server.log());
    let (err, _, bob_text) = call_text(&bob_client, get.clone()).await;
    assert!(!err, "{bob_text}");
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 2, "{seen:?}");
        assert_eq!(
            seen[0].1.as_deref(),
            Some(format!("Bearer {alice_token}").as_str())
        );
        assert_eq!(
            seen[1].1.as_deref(),
            Some(format!("Basic {bob_basic}").as_str())
        );
        // A configured header the session does not replace still goes out.
        assert!(
            seen.iter()
                .all(|s| s.2.as_deref() == Some(server_only.as_str()))
        );
    }
    // The echoing API cannot hand any credential back, in any form, nor the session token.
    assert!(alice_text.contains("[redacted]"), "{alice_text}");
    assert_eq!(alice_result["status"], 200, "{alice_result}");
    for (what, text) in [("alice's result", &alice_text), ("bob's result", &bob_text)] {
        assert_clean(what, text, &secrets);
        assert!(!text.contains(&alice_session) && !text.contains(&bob_session));
    }
    // Dry runs show no credential at all.
    let (err, _, dry) = call_text(
        &alice_client,
        json!({"method": "GET", "path": "/pet/1", "dryRun": true}),
    )
    .await;
    assert!(!err, "{dry}");
    assert_clean("a dry run", &dry, &secrets);
    // (It names the configured credential headers, valueless, as before.)
    assert!(dry.contains(r#""authorization":"[redacted]""#), "{dry}");

    // The audit rows say where the credentials came from, never what they were.
    let mut rows = Value::Null;
    for _ in 0..100 {
        let (ok, out, err) = apigate(&["audit", "--tool", "api_execute", "--json"], &db_env).await;
        assert!(ok, "{err}");
        rows = serde_json::from_str(&out).unwrap();
        if rows["entries"].as_array().unwrap().len() >= 3 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let entries = rows["entries"].as_array().unwrap();
    let real: Vec<&Value> = entries
        .iter()
        .filter(|e| e["upstreamStatus"] == 200)
        .collect();
    assert_eq!(real.len(), 2, "{rows:#}");
    for e in &real {
        assert_eq!(e["credentialSources"], json!(["server", "session"]), "{e}");
    }
    let alice_row = real.iter().find(|e| e["userId"] == "alice").unwrap();
    assert_eq!(alice_row["tenantId"], "acme");
    assert_eq!(alice_row["organizationId"], "acme-eu");
    assert!(alice_row["actor"].as_str().unwrap().starts_with("key:"));
    assert!(alice_row["callId"].is_string());
    // The dry run sent nothing.
    let dry_row = entries
        .iter()
        .find(|e| e["upstreamStatus"].is_null())
        .unwrap();
    assert_eq!(dry_row["credentialSources"], json!([]));
    let (ok, table, _) = apigate(&["audit", "--tool", "api_execute"], &db_env).await;
    assert!(
        ok && table.contains("CREDENTIALS") && table.contains("server,session"),
        "{table}"
    );
    assert_clean("apigate audit --json", &rows.to_string(), &secrets);

    // Listings show header names only.
    let listed = crate::support::send_text(
        http.get(format!("{base}/admin/v1/sessions?all=true"))
            .header("x-api-key", &admin_key),
    )
    .await;
    assert!(
        listed.contains("\"upstreamHeaders\":[\"authorization\"]"),
        "{listed}"
    );
    assert_clean("GET /admin/v1/sessions", &listed, &secrets);
    let (ok, table, err) = apigate(&["sessions", "list", "--all"], &db_env).await;
    assert!(ok, "{err}");
    assert!(
        table.contains("UPSTREAM HEADERS") && table.contains("authorization"),
        "{table}"
    );
    assert_clean("apigate sessions list", &table, &secrets);

    // The database holds no plaintext: the column is sealed, and nothing anywhere holds a form.
    let pool = sqlx::PgPool::connect(url).await.unwrap();
    let sealed: Vec<Vec<u8>> = sqlx::query_scalar(
        "SELECT upstream_headers FROM api_keys WHERE upstream_headers IS NOT NULL",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(sealed.len(), 2);
    let dump: String =
        sqlx::query_scalar("SELECT string_agg(row_to_json(k)::text, E'\\n') FROM api_keys k")
            .fetch_one(&pool)
            .await
            .unwrap();
    let audit_dump: String =
        sqlx::query_scalar("SELECT string_agg(row_to_json(a)::text, E'\\n') FROM audit_log a")
            .fetch_one(&pool)
            .await
            .unwrap();
    for bytes in &sealed {
        let lossy = String::from_utf8_lossy(bytes);
        assert_clean("the sealed column", &lossy, &secrets);
        assert_clean("the sealed column (hex)", &hex::encode(bytes), &secrets);
    }
    assert_clean("api_keys", &dump, &secrets);
    assert_clean("audit_log", &audit_dump, &secrets);

    // Revoking Alice's session: her token stops at once and her credential is deleted.
    let alice_id = alice["id"].as_str().unwrap();
    let resp = http
        .delete(format!("{base}/admin/v1/sessions/{alice_id}"))
        .header("x-api-key", &admin_key)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let (err, result, text) = call_text(&alice_client, get.clone()).await;
    assert!(err, "{text}");
    assert_eq!(result["code"], "UNAUTHORIZED", "{result}");
    assert_eq!(
        seen.lock().unwrap().len(),
        2,
        "the revoked call reached the API"
    );
    let row = sqlx::query(
        "SELECT upstream_headers, upstream_header_names, revoked_at FROM api_keys WHERE id = $1::uuid",
    )
    .bind(alice_id)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(row.get::<Option<Vec<u8>>, _>("upstream_headers").is_none());
    assert!(
        row.get::<Option<Vec<String>>, _>("upstream_header_names")
            .is_none()
    );
    assert!(
        row.get::<Option<chrono::DateTime<chrono::Utc>>, _>("revoked_at")
            .is_some()
    );
    // Bob is unaffected.
    let (err, _, text) = call_text(&bob_client, get.clone()).await;
    assert!(!err, "{text}");
    assert_eq!(
        seen.lock().unwrap().last().unwrap().1.as_deref(),
        Some(format!("Basic {bob_basic}").as_str())
    );

    // Nothing the server logged, at any level, holds a form of a planted secret.
    pool.close().await;
    drop(alice_client);
    drop(bob_client);
    let log = server.stderr();
    assert!(
        log.contains("sealed with the configured secret key"),
        "{log}"
    );
    assert_clean("the server log", &log, &secrets);
    assert!(!log.contains(&alice_session) && !log.contains(&bob_session));
}

/// In-process: expiry purges the credential, a wrong key fails the session's calls closed, a
/// rotated key still opens old sessions, and a server without a key refuses credentials.
#[tokio::test]
async fn expiry_purges_and_keys_rotate() {
    let db = TestDb::new().await;
    let old = [1u8; 32];
    let new = [2u8; 32];
    let auth_with = |keys: Option<SecretKeys>| {
        let store = db.store.clone();
        async move {
            Auth::new(
                store,
                AuthConfig {
                    secret_keys: keys.map(Arc::new),
                    ..AuthConfig::default()
                },
            )
            .await
            .unwrap()
        }
    };
    let auth = auth_with(Some(SecretKeys::from_bytes(&old, None).unwrap())).await;
    let new_session = |user: &str| NewSession {
        user_id: user.into(),
        features: vec!["apigate.*".into()],
        upstream: vec![UpstreamInput {
            api: None,
            headers: vec![("X-User-Token".into(), format!("tok-{user}"))],
        }],
        ..NewSession::default()
    };
    let a = auth.create_session(new_session("a")).await.unwrap();
    let b = auth.create_session(new_session("b")).await.unwrap();
    let key = KeyPrincipal::dev();
    let p = auth.authenticate_session(&key, &a.token).await.unwrap();
    let up = p.upstream.as_ref().unwrap();
    let first = up.all_headers().next().unwrap();
    assert_eq!(first.1.to_str().unwrap(), "tok-a");
    assert!(!format!("{p:?}").contains("tok-a"));

    // Rotation: the new key current, the old one previous, opens both old sessions; a key
    // that knows neither refuses the calls (closed) instead of sending server credentials.
    let rotated = auth_with(Some(SecretKeys::from_bytes(&new, Some(&old)).unwrap())).await;
    assert!(rotated.authenticate_session(&key, &b.token).await.is_ok());
    let c = rotated.create_session(new_session("c")).await.unwrap();
    let only_old = auth_with(Some(SecretKeys::from_bytes(&old, None).unwrap())).await;
    let e = only_old
        .authenticate_session(&key, &c.token)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("APIGATE_SECRET_KEY"), "{e}");
    let none = auth_with(None).await;
    let e = none.authenticate_session(&key, &a.token).await.unwrap_err();
    assert_eq!(
        apigate::tools::ToolError::from(e).code.as_str(),
        "UNAVAILABLE"
    );
    let e = none.create_session(new_session("d")).await.unwrap_err();
    assert!(e.to_string().contains("openssl rand -base64 32"), "{e}");

    // Expiry: the purge deletes the credential (not just refuses it).
    sqlx::query("UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE id = $1")
        .bind(b.id)
        .execute(&sqlx::PgPool::connect(&db.url).await.unwrap())
        .await
        .unwrap();
    // (Each Auth's own purge task may get there first: the column is what counts.)
    auth.purge_expired_credentials().await.unwrap();
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let left: Option<Vec<u8>> =
        sqlx::query_scalar("SELECT upstream_headers FROM api_keys WHERE id = $1")
            .bind(b.id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(left.is_none());
    let still: Option<Vec<u8>> =
        sqlx::query_scalar("SELECT upstream_headers FROM api_keys WHERE id = $1")
            .bind(a.id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(still.is_some());
    // Revoked by token: purged too, and the cached credential is gone with the cache entry.
    auth.revoke_session(&SessionRef::Token(a.token.clone()))
        .await
        .unwrap();
    assert!(auth.authenticate_session(&key, &a.token).await.is_err());
    let gone: Option<Vec<u8>> =
        sqlx::query_scalar("SELECT upstream_headers FROM api_keys WHERE id = $1")
            .bind(a.id)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(gone.is_none());
}

/// Over the admin API of a server with no secret key: a session with credentials is refused
/// with how to configure one; without credentials it is created as before.
#[tokio::test]
async fn a_server_without_a_key_refuses_credentials() {
    let (_db, _upstream, prod) = Prod::petstore().await;
    let http = reqwest::Client::new();
    let resp = http
        .post(prod.url("/admin/v1/sessions"))
        .header("x-api-key", BOOTSTRAP)
        .json(&json!({"userId": "u", "upstream": {"headers": {"Authorization": "Bearer planted-xyz"}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let body: Value = resp.json().await.unwrap();
    let msg = body["error"].as_str().unwrap();
    assert!(
        msg.contains("APIGATE_SECRET_KEY") && !msg.contains("planted-xyz"),
        "{msg}"
    );
    for bad in [
        json!("Bearer planted-xyz"),
        json!({"headers": {"Authorization": 5}}),
        json!({"header": {}}),
    ] {
        let resp = http
            .post(prod.url("/admin/v1/sessions"))
            .header("x-api-key", BOOTSTRAP)
            .json(&json!({"userId": "u", "upstream": bad}))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
        let text = resp.text().await.unwrap();
        assert!(!text.contains("planted-xyz"), "{text}");
    }
    let resp = http
        .post(prod.url("/admin/v1/sessions"))
        .header("x-api-key", BOOTSTRAP)
        .json(&json!({"userId": "u"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::CREATED);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["upstreamHeaders"], json!([]));
}
