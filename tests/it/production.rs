//! Production mode end to end: `apigate serve`'s router (server keys and sessions in a real
//! Postgres, the admin API, audit) over the real Streamable HTTP transport with rmcp's client,
//! two instances sharing one database, the binary refusing an unreachable database, and
//! `/health` following a database cut through a TCP proxy.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use apigate::auth::{Auth, AuthConfig, NewKey, NewSession, PermissionRules, RateLimit};
use apigate::http::{self, HttpOptions, KeyCheck};
use apigate::store::Store;
use apigate::tools::Access;
use reqwest::StatusCode;
use rmcp::ServiceExt;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use sqlx::Row;
use tokio_util::sync::CancellationToken;

use crate::db::TestDb;
use crate::support::{CutProxy, Upstream, call, engine_args, spec_path};

pub(crate) const BOOTSTRAP: &str = "bootstrap-key-for-production-tests";

pub(crate) type Client = RunningService<RoleClient, ()>;

/// How to start one production instance.
pub(crate) struct Options {
    pub spec: String,
    pub rules: PermissionRules,
    pub session_rate: RateLimit,
    pub key_rate: RateLimit,
    pub stateless: bool,
}

impl Options {
    pub(crate) fn petstore() -> Options {
        Options {
            spec: spec_path("petstore-3.0.json"),
            rules: PermissionRules::default(),
            session_rate: RateLimit::OFF,
            key_rate: AuthConfig::default().key_rate,
            stateless: false,
        }
    }
}

/// One `apigate serve` instance in-process, wired as `src/cli/serve.rs` wires it, with its own
/// pool on the database at `database_url`.
pub(crate) struct Prod {
    pub addr: SocketAddr,
    pub auth: Auth,
    shutdown: CancellationToken,
}

impl Prod {
    pub(crate) async fn start(database_url: &str, upstream: &Upstream, opts: Options) -> Prod {
        let args = engine_args(&opts.spec, Some(upstream.url()));
        Prod::start_with(database_url, args, opts).await
    }

    /// [`Prod::start`] with the engine's options given (`opts.spec` is not used).
    pub(crate) async fn start_with(
        database_url: &str,
        args: apigate::cli::args::EngineArgs,
        opts: Options,
    ) -> Prod {
        let cfg = AuthConfig {
            session_rate: opts.session_rate,
            key_rate: opts.key_rate,
            ..AuthConfig::default()
        };
        Prod::launch(database_url, args, opts.rules, cfg, opts.stateless).await
    }

    /// One instance with the whole auth configuration given; its bootstrap key is always
    /// [`BOOTSTRAP`].
    pub(crate) async fn launch(
        database_url: &str,
        args: apigate::cli::args::EngineArgs,
        rules: PermissionRules,
        cfg: AuthConfig,
        stateless: bool,
    ) -> Prod {
        let store = Store::connect(database_url).await.expect("store connects");
        store.migrate().await.expect("migrations apply");
        let auth = Auth::new(
            store,
            AuthConfig {
                bootstrap_key: Some(BOOTSTRAP.into()),
                ..cfg
            },
        )
        .await
        .expect("auth starts");
        let mut engine = args.build().await.expect("engine builds");
        engine.access = Access::Sessions;
        engine.rules = rules;
        engine.auth = Some(auth.clone());
        engine.held = engine.held.in_database(auth.store().clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shutdown = CancellationToken::new();
        let router = http::router(
            Arc::new(engine),
            HttpOptions {
                stateless,
                max_body_bytes: 256 * 1024,
                admin: Some(http::admin::router(auth.clone())),
                database: Some(auth.clone()),
                ..HttpOptions::new(KeyCheck::Database(auth.clone()), "production")
            },
            shutdown.clone(),
        );
        tokio::spawn(http::serve(
            listener,
            router,
            shutdown.clone(),
            http::ConnLimits::default(),
        ));
        Prod {
            addr,
            auth,
            shutdown,
        }
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// An rmcp client sending `key`, and `session_token` as `x-session-token` when given.
    pub(crate) async fn client(&self, key: &str, session_token: Option<&str>) -> Client {
        let mut headers = HashMap::new();
        headers.insert(
            axum::http::HeaderName::from_static("x-api-key"),
            axum::http::HeaderValue::from_str(key).unwrap(),
        );
        if let Some(t) = session_token {
            headers.insert(
                axum::http::HeaderName::from_static("x-session-token"),
                axum::http::HeaderValue::from_str(t).unwrap(),
            );
        }
        let config =
            StreamableHttpClientTransportConfig::with_uri(self.url("/mcp")).custom_headers(headers);
        let transport = StreamableHttpClientTransport::with_client(reqwest::Client::new(), config);
        ().serve(transport).await.expect("MCP client connects")
    }

    /// A server key holding the three tools' features and the petstore's (`pets.*`,
    /// `store.*`): a call gets only what both its key and its session hold.
    pub(crate) async fn agent_key(&self) -> String {
        self.auth
            .create_key(NewKey {
                name: "agent".into(),
                features: vec![
                    "apigate.discover".into(),
                    "apigate.schema".into(),
                    "apigate.execute".into(),
                    "pets.*".into(),
                    "store.*".into(),
                ],
                ..NewKey::default()
            })
            .await
            .unwrap()
            .key
    }

    pub(crate) async fn session(&self, features: &[&str], read_only: bool) -> String {
        self.auth
            .create_session(NewSession {
                user_id: "u-42".into(),
                tenant_id: Some("acme".into()),
                features: features.iter().map(|f| f.to_string()).collect(),
                read_only,
                ..NewSession::default()
            })
            .await
            .unwrap()
            .token
    }
}

impl Drop for Prod {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// A raw `initialize` POST to `/mcp` with `key` (tier 1 only).
async fn initialize(base: &Prod, key: Option<&str>) -> (StatusCode, Value) {
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let mut req = reqwest::Client::new()
        .post(base.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .json(&init);
    if let Some(k) = key {
        req = req.header("x-api-key", k);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status();
    let text = resp.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

fn with_token(mut args: Value, token: &str) -> Value {
    args["_sessionToken"] = json!(token);
    args
}

fn operation_ids(found: &Value) -> Vec<String> {
    found["results"]
        .as_array()
        .unwrap_or_else(|| panic!("no results in {found}"))
        .iter()
        .map(|r| r["operationId"].as_str().unwrap().to_string())
        .collect()
}

/// Every audit row of a tool call (not the admin actions that set the test up), oldest first,
/// with the whole row as JSON text.
async fn audit_rows(database_url: &str) -> Vec<(Value, String)> {
    let pool = sqlx::PgPool::connect(database_url).await.unwrap();
    let rows = sqlx::query(
        "SELECT json_build_object('tool', tool, 'decision', decision, 'error_code', error_code, \
         'operation', operation, 'method', method, 'path', path, 'upstream_status', \
         upstream_status, 'user_id', user_id, 'tenant_id', tenant_id, 'session_id', session_id, \
         'key_id', key_id) AS fields, row_to_json(a)::text AS whole FROM audit_log a WHERE tool <> 'admin' ORDER BY id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    pool.close().await;
    rows.iter()
        .map(|r| (r.get::<Value, _>("fields"), r.get::<String, _>("whole")))
        .collect()
}

#[tokio::test]
async fn tier1_refuses_missing_revoked_and_wrong_keys_with_json_401() {
    let db = TestDb::new().await;
    let upstream = Upstream::start().await;
    let server = Prod::start(&db.url, &upstream, Options::petstore()).await;
    let key = server.agent_key().await;
    let (status, body) = initialize(&server, Some(&key)).await;
    assert_eq!(status, 200, "{body}");

    let (status, body) = initialize(&server, None).await;
    assert_eq!(status, 401);
    assert_eq!(body["code"], "UNAUTHORIZED", "{body}");

    // The right public id with a wrong secret.
    let mut wrong = key.clone();
    let last = wrong.pop().unwrap();
    wrong.push(if last == 'a' { 'b' } else { 'a' });
    let (status, body) = initialize(&server, Some(&wrong)).await;
    assert_eq!(status, 401);
    assert_eq!(body["code"], "UNAUTHORIZED", "{body}");
    assert!(!body.to_string().contains(&key), "{body}");

    let revoked = server.agent_key().await;
    let (status, _) = initialize(&server, Some(&revoked)).await;
    assert_eq!(status, 200);
    let public_id = revoked.split('_').nth(1).unwrap();
    server.auth.revoke_key(public_id).await.unwrap();
    let (status, body) = initialize(&server, Some(&revoked)).await;
    assert_eq!(status, 401);
    assert_eq!(body["code"], "UNAUTHORIZED", "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("revoked"),
        "{body}"
    );

    // The admin API answers the same way.
    let r = reqwest::Client::new()
        .get(server.url("/admin/v1/keys"))
        .header("x-api-key", &revoked)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["code"], "UNAUTHORIZED");
}

#[tokio::test]
async fn tier2_session_tokens_are_required_and_checked() {
    let db = TestDb::new().await;
    let upstream = Upstream::start().await;
    let server = Prod::start(&db.url, &upstream, Options::petstore()).await;
    let key = server.agent_key().await;
    let client = server.client(&key, None).await;

    // Every tool declares `_sessionToken`, as required.
    let tools = client.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 3);
    for t in &tools {
        let schema = Value::Object((*t.input_schema).clone());
        assert_eq!(
            schema["properties"]["_sessionToken"]["type"], "string",
            "{}: {schema}",
            t.name
        );
        assert!(
            schema["required"]
                .as_array()
                .unwrap()
                .contains(&json!("_sessionToken")),
            "{}: {schema}",
            t.name
        );
    }

    let discover = json!({"query": "find pets by status"});
    let (err, r) = call(&client, "api_discover", discover.clone()).await;
    assert!(err);
    assert_eq!(r["code"], "UNAUTHORIZED", "{r}");
    assert!(
        r["error"].as_str().unwrap().contains("_sessionToken"),
        "{r}"
    );

    for bad in ["not-a-token", "sess_0123456789abcdef0123456789abcdef"] {
        let (err, r) = call(&client, "api_discover", with_token(discover.clone(), bad)).await;
        assert!(err);
        assert_eq!(r["code"], "UNAUTHORIZED", "{bad}: {r}");
        assert!(!r.to_string().contains(bad), "the token is echoed: {r}");
    }

    // Expired: the session's expiry moved into the past before its first use.
    let expired = server
        .auth
        .create_session(NewSession {
            user_id: "u-expired".into(),
            features: vec!["apigate.*".into()],
            ..NewSession::default()
        })
        .await
        .unwrap();
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    sqlx::query("UPDATE api_keys SET expires_at = now() - interval '1 minute' WHERE id = $1")
        .bind(expired.id)
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
    let (err, r) = call(
        &client,
        "api_discover",
        with_token(discover.clone(), &expired.token),
    )
    .await;
    assert!(err);
    assert_eq!(r["code"], "SESSION_EXPIRED", "{r}");

    // Revoked after it worked once (and was cached).
    let token = server.session(&["apigate.*"], false).await;
    let (err, r) = call(
        &client,
        "api_discover",
        with_token(discover.clone(), &token),
    )
    .await;
    assert!(!err, "{r}");
    server
        .auth
        .revoke_session(&apigate::auth::SessionRef::parse(&token).unwrap())
        .await
        .unwrap();
    let (err, r) = call(
        &client,
        "api_discover",
        with_token(discover.clone(), &token),
    )
    .await;
    assert!(err);
    assert_eq!(r["code"], "UNAUTHORIZED", "{r}");
    assert!(r["error"].as_str().unwrap().contains("revoked"), "{r}");
    client.cancel().await.unwrap();
}

/// The petstore with `x-required-features: [pets.admin]` on `DELETE /pet/{petId}`.
fn petstore_with_required_features() -> tempfile::NamedTempFile {
    let text = std::fs::read_to_string(spec_path("petstore-3.0.json")).unwrap();
    let mut doc: Value = serde_json::from_str(&text).unwrap();
    doc["paths"]["/pet/{petId}"]["delete"]["x-required-features"] = json!(["pets.admin"]);
    let file = tempfile::Builder::new().suffix(".json").tempfile().unwrap();
    std::fs::write(file.path(), doc.to_string()).unwrap();
    file
}

#[tokio::test]
async fn features_read_only_and_hidden_operations() {
    let db = TestDb::new().await;
    let upstream = Upstream::start().await;
    let spec = petstore_with_required_features();
    let rules = PermissionRules::from_toml(
        "[[rule]]\nmethod = \"POST\"\npath = \"/store/**\"\nfeatures = [\"store.write\"]\n",
    )
    .unwrap();
    let server = Prod::start(
        &db.url,
        &upstream,
        Options {
            spec: spec.path().to_string_lossy().into_owned(),
            rules,
            ..Options::petstore()
        },
    )
    .await;
    let key = server.agent_key().await;
    let client = server.client(&key, None).await;

    // A session without apigate.execute: FORBIDDEN naming the tool's feature.
    let viewer = server
        .session(&["apigate.discover", "apigate.schema"], false)
        .await;
    let (err, r) = call(
        &client,
        "api_execute",
        with_token(
            json!({"operationId": "getPetById", "pathParams": {"petId": 1}}),
            &viewer,
        ),
    )
    .await;
    assert!(err);
    assert_eq!(r["code"], "FORBIDDEN", "{r}");
    assert_eq!(r["missing"], "apigate.execute", "{r}");
    assert!(
        r["error"].as_str().unwrap().contains("apigate.execute"),
        "{r}"
    );

    // All tools but neither pets.admin nor store.write.
    let user = server.session(&["apigate.*"], false).await;
    let before = upstream.requests().len();
    let (err, r) = call(
        &client,
        "api_execute",
        with_token(
            json!({"operationId": "deletePet", "pathParams": {"petId": 1}}),
            &user,
        ),
    )
    .await;
    assert!(err);
    assert_eq!(r["code"], "FORBIDDEN", "{r}");
    assert_eq!(r["missing"], "pets.admin", "{r}");
    let (err, r) = call(
        &client,
        "api_execute",
        with_token(
            json!({"method": "POST", "path": "/store/order", "body": {"petId": 1, "quantity": 1}}),
            &user,
        ),
    )
    .await;
    assert!(err);
    assert_eq!(r["code"], "FORBIDDEN", "{r}");
    assert_eq!(r["missing"], "store.write", "{r}");
    let (err, r) = call(
        &client,
        "api_schema",
        with_token(json!({"operationId": "deletePet"}), &user),
    )
    .await;
    assert!(err, "a forbidden operation's schema is shown: {r}");
    assert_eq!(upstream.requests().len(), before, "nothing reached the API");

    // Discovery hides what the session may not execute.
    let find = |q: &str, token: &str| with_token(json!({"query": q, "limit": 50}), token);
    let (err, r) = call(&client, "api_discover", find("delete a pet", &user)).await;
    assert!(!err, "{r}");
    let ids = operation_ids(&r);
    assert!(!ids.contains(&"deletePet".to_string()), "{ids:?}");
    assert!(ids.contains(&"getPetById".to_string()), "{ids:?}");
    let (err, r) = call(
        &client,
        "api_discover",
        find("place an order for a pet", &user),
    )
    .await;
    assert!(!err, "{r}");
    let ids = operation_ids(&r);
    assert!(!ids.contains(&"placeOrder".to_string()), "{ids:?}");
    assert!(ids.contains(&"getOrderById".to_string()), "{ids:?}");
    // …and shows it to a session holding the features.
    let admin = server
        .session(&["apigate.*", "pets.admin", "store.*"], false)
        .await;
    let (_, r) = call(&client, "api_discover", find("delete a pet", &admin)).await;
    assert!(operation_ids(&r).contains(&"deletePet".to_string()), "{r}");
    let (_, r) = call(
        &client,
        "api_discover",
        find("place an order for a pet", &admin),
    )
    .await;
    assert!(operation_ids(&r).contains(&"placeOrder".to_string()), "{r}");
    let (err, r) = call(
        &client,
        "api_execute",
        with_token(
            json!({"operationId": "deletePet", "pathParams": {"petId": 7}}),
            &admin,
        ),
    )
    .await;
    assert!(!err, "{r}");
    assert_eq!(upstream.requests().pop().unwrap().uri, "/v2/pet/7");

    // A read-only session may read but not POST, and does not discover POST operations.
    let reader = server.session(&["apigate.*"], true).await;
    let (err, r) = call(
        &client,
        "api_execute",
        with_token(
            json!({"operationId": "getPetById", "pathParams": {"petId": 3}}),
            &reader,
        ),
    )
    .await;
    assert!(!err, "{r}");
    let before = upstream.requests().len();
    let (err, r) = call(
        &client,
        "api_execute",
        with_token(
            json!({"method": "POST", "path": "/pet", "body": {"name": "Fido", "photoUrls": []}}),
            &reader,
        ),
    )
    .await;
    assert!(err);
    assert_eq!(r["code"], "FORBIDDEN", "{r}");
    assert_eq!(r["readOnly"], true, "{r}");
    assert_eq!(upstream.requests().len(), before);
    let (_, r) = call(
        &client,
        "api_discover",
        find("add a new pet to the store", &reader),
    )
    .await;
    let ids = operation_ids(&r);
    assert!(!ids.contains(&"addPet".to_string()), "{ids:?}");
    assert!(!ids.is_empty());
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn session_token_header_keeps_the_token_out_of_arguments() {
    let db = TestDb::new().await;
    let upstream = Upstream::start().await;
    let server = Prod::start(&db.url, &upstream, Options::petstore()).await;
    let key = server.agent_key().await;
    let token = server.session(&["apigate.*"], false).await;
    let client = server.client(&key, Some(&token)).await;
    let (err, r) = call(
        &client,
        "api_discover",
        json!({"query": "find a pet by id"}),
    )
    .await;
    assert!(!err, "{r}");
    let (err, r) = call(
        &client,
        "api_execute",
        json!({"operationId": "getPetById", "pathParams": {"petId": 5}}),
    )
    .await;
    assert!(!err, "{r}");
    assert_eq!(r["body"]["id"], 5);
    // An argument that differs from the header is refused: it never replaces the header.
    let (err, r) = call(
        &client,
        "api_discover",
        json!({"query": "pets", "_sessionToken": "sess_0123456789abcdef0123456789abcdef"}),
    )
    .await;
    assert!(err);
    assert_eq!(r["code"], "UNAUTHORIZED", "{r}");
    client.cancel().await.unwrap();

    // Whichever way it came, the token never reaches the API.
    let other = server.client(&key, None).await;
    let (err, r) = call(
        &other,
        "api_execute",
        with_token(
            json!({"method": "POST", "path": "/pet", "body": {"name": "Fido", "photoUrls": []}}),
            &token,
        ),
    )
    .await;
    assert!(!err, "{r}");
    let sent = upstream.requests();
    assert_eq!(sent.len(), 2);
    for req in sent {
        let headers = format!("{:?}", req.headers);
        assert!(!headers.contains(&token), "{headers}");
        assert!(!req.uri.contains(&token));
        assert!(!String::from_utf8_lossy(&req.body).contains(&token));
        assert!(!String::from_utf8_lossy(&req.body).contains("_sessionToken"));
    }
    other.cancel().await.unwrap();
}

#[tokio::test]
async fn session_rate_limit_trips() {
    let db = TestDb::new().await;
    let upstream = Upstream::start().await;
    let server = Prod::start(
        &db.url,
        &upstream,
        Options {
            session_rate: RateLimit {
                per_second: 0.01,
                burst: 3,
            },
            ..Options::petstore()
        },
    )
    .await;
    let key = server.agent_key().await;
    let token = server.session(&["apigate.*"], false).await;
    let client = server.client(&key, Some(&token)).await;
    for _ in 0..3 {
        let (err, r) = call(&client, "api_discover", json!({"query": "pets"})).await;
        assert!(!err, "{r}");
    }
    let (err, r) = call(&client, "api_discover", json!({"query": "pets"})).await;
    assert!(err);
    assert_eq!(r["code"], "RATE_LIMITED", "{r}");
    assert!(r["retryAfterMs"].as_u64().unwrap() > 0, "{r}");
    // Another session over the same key has its own bucket.
    let fresh = server.session(&["apigate.*"], false).await;
    let other = server.client(&key, None).await;
    let (err, r) = call(
        &other,
        "api_discover",
        json!({"query": "pets", "_sessionToken": fresh}),
    )
    .await;
    assert!(!err, "{r}");
    other.cancel().await.unwrap();
    let rows = audit_rows(&db.url).await;
    let limited: Vec<_> = rows
        .iter()
        .filter(|(f, _)| f["error_code"] == "RATE_LIMITED")
        .collect();
    assert_eq!(limited.len(), 1, "{rows:?}");
    assert_eq!(limited[0].0["decision"], "denied");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn audit_rows_for_allowed_denied_and_failed_calls() {
    let db = TestDb::new().await;
    let upstream = Upstream::start().await;
    let server = Prod::start(&db.url, &upstream, Options::petstore()).await;
    let key = server.agent_key().await;
    let token = server.session(&["apigate.*"], false).await;
    let viewer = server.session(&["apigate.discover"], false).await;
    let client = server.client(&key, None).await;
    const MARKER: &str = "Zanzibar-audit-marker";

    // allowed
    let (err, r) = call(
        &client,
        "api_execute",
        with_token(
            json!({"operationId": "getUserByName", "pathParams": {"username": MARKER}}),
            &token,
        ),
    )
    .await;
    assert!(!err, "{r}");
    // denied: no token; a feature lacking
    let (err, _) = call(&client, "api_discover", json!({"query": MARKER})).await;
    assert!(err);
    let (err, _) = call(
        &client,
        "api_execute",
        with_token(
            json!({"operationId": "addPet", "body": {"name": MARKER, "photoUrls": []}}),
            &viewer,
        ),
    )
    .await;
    assert!(err);
    // failed: arguments that do not validate
    let (err, r) = call(
        &client,
        "api_execute",
        with_token(
            json!({"operationId": "getPetById", "pathParams": {"petId": MARKER}}),
            &token,
        ),
    )
    .await;
    assert!(err);
    assert_eq!(r["code"], "INVALID_ARGUMENTS", "{r}");
    client.cancel().await.unwrap();

    let rows = audit_rows(&db.url).await;
    let fields: Vec<&Value> = rows.iter().map(|(f, _)| f).collect();
    assert_eq!(rows.len(), 4, "{fields:?}");
    let (a, d1, d2, f) = (fields[0], fields[1], fields[2], fields[3]);
    assert_eq!(a["tool"], "api_execute");
    assert_eq!(a["decision"], "allowed");
    assert_eq!(a["operation"], "getUserByName");
    assert_eq!(a["method"], "GET");
    assert_eq!(a["path"], "/user/{username}");
    assert_eq!(a["upstream_status"], 200);
    assert_eq!(a["user_id"], "u-42");
    assert_eq!(a["tenant_id"], "acme");
    assert!(
        a["session_id"].is_string() && a["key_id"].is_string(),
        "{a}"
    );
    assert_eq!(d1["decision"], "denied");
    assert_eq!(d1["error_code"], "UNAUTHORIZED");
    assert_eq!(d1["tool"], "api_discover");
    assert!(
        d1["session_id"].is_null() && d1["key_id"].is_string(),
        "{d1}"
    );
    assert_eq!(d2["decision"], "denied");
    assert_eq!(d2["error_code"], "FORBIDDEN");
    assert_eq!(d2["operation"], "addPet", "{d2}");
    assert_eq!(d2["method"], "POST");
    assert!(d2["upstream_status"].is_null());
    assert_eq!(f["decision"], "failed");
    assert_eq!(f["error_code"], "INVALID_ARGUMENTS");
    assert_eq!(f["operation"], "getPetById");
    assert_eq!(f["path"], "/pet/{petId}");
    // Never argument values, tokens or keys.
    for (_, whole) in &rows {
        assert!(!whole.contains(MARKER), "{whole}");
        assert!(!whole.contains(&token) && !whole.contains(&key), "{whole}");
    }
}

#[tokio::test]
async fn two_instances_share_sessions_and_revocations() {
    let db = TestDb::new().await;
    let upstream = Upstream::start().await;
    let stateless = || Options {
        stateless: true,
        ..Options::petstore()
    };
    let a = Prod::start(&db.url, &upstream, stateless()).await;
    let b = Prod::start(&db.url, &upstream, stateless()).await;
    let http = reqwest::Client::new();

    // The backend's admin key and the agent's key, both created through A.
    let r = http
        .post(a.url("/admin/v1/keys"))
        .header("x-api-key", BOOTSTRAP)
        .json(&json!({"name": "backend", "features": ["apigate.*"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let admin_key = r.json::<Value>().await.unwrap()["key"]
        .as_str()
        .unwrap()
        .to_string();
    let r = http
        .post(a.url("/admin/v1/keys"))
        .header("x-api-key", &admin_key)
        .json(&json!({"name": "agent", "features": ["apigate.*"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let created: Value = r.json().await.unwrap();
    let agent_key = created["key"].as_str().unwrap().to_string();
    let agent_key_id = created["id"].as_str().unwrap().to_string();

    // A session created through A works on B.
    let r = http
        .post(a.url("/admin/v1/sessions"))
        .header("x-api-key", &admin_key)
        .json(&json!({"userId": "u-7", "tenantId": "acme", "features": ["apigate.*"], "ttlMinutes": 30}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let session: Value = r.json().await.unwrap();
    let token = session["token"].as_str().unwrap().to_string();
    let client = b.client(&agent_key, Some(&token)).await;
    let (err, r) = call(
        &client,
        "api_execute",
        json!({"operationId": "getPetById", "pathParams": {"petId": 11}}),
    )
    .await;
    assert!(!err, "{r}");
    assert_eq!(r["body"]["id"], 11);
    client.cancel().await.unwrap();

    // A role changed through A reaches B's cached session within a second.
    let r = http
        .put(a.url("/admin/v1/roles/clerk"))
        .header("x-api-key", &admin_key)
        .json(&json!({"features": ["apigate.discover"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = http
        .post(a.url("/admin/v1/sessions"))
        .header("x-api-key", &admin_key)
        .json(&json!({"userId": "u-8", "roles": ["clerk"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 201);
    let clerk: Value = r.json().await.unwrap();
    let clerk_token = clerk["token"].as_str().unwrap().to_string();
    let client = b.client(&agent_key, Some(&clerk_token)).await;
    let execute = json!({"operationId": "getPetById", "pathParams": {"petId": 12}});
    let (err, r) = call(&client, "api_execute", execute.clone()).await;
    assert!(err);
    assert_eq!(r["missing"], "apigate.execute", "{r}");
    let r = http
        .put(a.url("/admin/v1/roles/clerk"))
        .header("x-api-key", &admin_key)
        .json(&json!({"features": ["apigate.*"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        let (err, r) = call(&client, "api_execute", execute.clone()).await;
        if !err {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "B still applies the old role after 1 s: {r}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // A session revoked through A is refused by B within a second.
    let r = http
        .post(a.url("/admin/v1/sessions/revoke"))
        .header("x-api-key", &admin_key)
        .json(&json!({"token": clerk_token}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let deadline = Instant::now() + Duration::from_secs(1);
    loop {
        let (err, r) = call(&client, "api_discover", json!({"query": "pets"})).await;
        if err {
            assert_eq!(r["code"], "UNAUTHORIZED", "{r}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "B still accepts a session revoked through A after 1 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    client.cancel().await.unwrap();

    // The key, verified and cached by B, is revoked through A: B refuses it within a second.
    assert_eq!(initialize(&b, Some(&agent_key)).await.0, 200);
    let r = http
        .delete(a.url(&format!("/admin/v1/keys/{agent_key_id}")))
        .header("x-api-key", &admin_key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let deadline = Instant::now() + Duration::from_secs(1);
    let refused = loop {
        let (status, body) = initialize(&b, Some(&agent_key)).await;
        if status == 401 {
            break Some(body);
        }
        if Instant::now() > deadline {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let body = refused.expect("instance B still accepts a key revoked through A after 1 s");
    assert_eq!(body["code"], "UNAUTHORIZED", "{body}");
    // And A refuses it too, at once.
    assert_eq!(initialize(&a, Some(&agent_key)).await.0, 401);
}

#[tokio::test]
async fn serve_exits_when_the_database_is_unreachable() {
    // A port nothing listens on: a privileged one, since a port freed by a test can be taken
    // by another test's server before apigate tries it.
    let port = 1;
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "something listens on 127.0.0.1:{port}"
    );
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_apigate"))
            .args([
                "serve",
                "--spec",
                &spec_path("petstore-3.0.json"),
                "--listen",
                "127.0.0.1:0",
            ])
            .env(
                "DATABASE_URL",
                format!("postgres://apigate:hunter2@127.0.0.1:{port}/apigate"),
            )
            .env_remove("MCP_SERVER_API_KEY")
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("apigate serve gives up")
    .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("127.0.0.1:{port}")), "{stderr}");
    assert!(stderr.contains("Postgres"), "{stderr}");
    // The reason, once (not the pool's "timed out", not repeated by the cause chain).
    assert!(stderr.contains("refused"), "{stderr}");
    assert_eq!(stderr.matches("refused").count(), 1, "{stderr}");
    assert!(
        !stderr.contains("hunter2"),
        "the password is printed: {stderr}"
    );
}

async fn health(server: &Prod) -> (StatusCode, Value) {
    let r = reqwest::get(server.url("/health")).await.unwrap();
    (r.status(), r.json().await.unwrap())
}

/// Polls `/health` until it answers `want` (at most a minute, so a broken build fails rather
/// than hangs).
async fn wait_for_health(server: &Prod, want: StatusCode) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, body) = health(server).await;
        if status == want {
            return body;
        }
        assert!(Instant::now() < deadline, "/health stays {status}: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn health_follows_the_database_and_recovers() {
    let db = TestDb::new().await;
    let upstream = Upstream::start().await;
    let mut url = url::Url::parse(&db.url).unwrap();
    let target = format!("{}:{}", url.host_str().unwrap(), url.port().unwrap_or(5432));
    let proxy = CutProxy::start(target).await;
    url.set_host(Some("127.0.0.1")).unwrap();
    url.set_port(Some(proxy.addr.port())).unwrap();
    let server = Prod::start(url.as_str(), &upstream, Options::petstore()).await;
    let key = server.agent_key().await;
    let token = server.session(&["apigate.*"], false).await;

    let (status, body) = health(&server).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["database"], "ok");

    proxy.cut();
    let body = wait_for_health(&server, StatusCode::SERVICE_UNAVAILABLE).await;
    assert_eq!(body["database"], "unreachable", "{body}");
    // Credentials cannot be checked meanwhile: 503 UNAVAILABLE, not 401.
    let (status, body) = initialize(&server, Some(&key)).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["code"], "UNAVAILABLE", "{body}");

    proxy.restore();
    let body = wait_for_health(&server, StatusCode::OK).await;
    assert_eq!(body["database"], "ok");
    let client = server.client(&key, None).await;
    let (err, r) = call(
        &client,
        "api_discover",
        json!({"query": "pets", "_sessionToken": token}),
    )
    .await;
    assert!(!err, "{r}");
    client.cancel().await.unwrap();

    // The credential-change listener is back too: a revocation made elsewhere (straight on the
    // database, not through the proxy) reaches this instance.
    let elsewhere = Auth::new(db.store.clone(), AuthConfig::default())
        .await
        .unwrap();
    elsewhere
        .revoke_session(&apigate::auth::SessionRef::parse(&token).unwrap())
        .await
        .unwrap();
    let client = server.client(&key, None).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (err, r) = call(
            &client,
            "api_discover",
            json!({"query": "pets", "_sessionToken": token}),
        )
        .await;
        if err {
            assert_eq!(r["code"], "UNAUTHORIZED", "{r}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "a revoked session still works after the database came back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_legacy_sse_stream_takes_messages_only_from_the_key_that_opened_it() {
    use futures::StreamExt;

    let db = TestDb::new().await;
    let upstream = Upstream::start().await;
    let server = Prod::start(&db.url, &upstream, Options::petstore()).await;
    let owner = server.agent_key().await;
    let other = server.agent_key().await;
    let http = reqwest::Client::new();
    let response = http
        .get(server.url("/sse"))
        .header("x-api-key", &owner)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    // The first event names the message endpoint.
    let mut stream = response.bytes_stream();
    let mut text = String::new();
    while !text.contains("\n\n") {
        let chunk = stream.next().await.unwrap().unwrap();
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let endpoint = text
        .lines()
        .find_map(|l| l.strip_prefix("data:"))
        .unwrap()
        .trim()
        .to_string();
    assert!(endpoint.starts_with("/message?sessionId="), "{endpoint}");
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let r = http
        .post(server.url(&endpoint))
        .header("x-api-key", &other)
        .json(&ping)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404, "another key must not reach this stream");
    let r = http
        .post(server.url(&endpoint))
        .header("x-api-key", &owner)
        .json(&ping)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
}
