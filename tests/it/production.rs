//! Production mode end to end: `apigate serve`'s router (server keys and sessions in a real
//! Postgres, the admin API, audit) over the real Streamable HTTP transport with rmcp's client,
//! two instances sharing one database, the binary refusing an unreachable database, and
//! `/health` following a database cut through a TCP proxy.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use apigate::auth::{Auth, AuthConfig, NewSession, PermissionRules, RateLimit};
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

use crate::db::TestDb;
use crate::support::{
    CutProxy, Server, Upstream, assert_fields, assert_tool_error, call, call_err, call_ok,
    engine_args, execute_err, execute_ok, key_holding, owned, poll, run_apigate, session_token,
    spec_path, sse_endpoint, strings,
};

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

    /// [`Options::petstore`], stateless (what replicas behind a load balancer run).
    pub(crate) fn stateless() -> Options {
        Options {
            stateless: true,
            ..Options::petstore()
        }
    }
}

/// One `apigate serve` instance in-process, wired as `src/cli/serve.rs` wires it, with its own
/// pool on the database at `database_url`.
pub(crate) struct Prod {
    pub addr: SocketAddr,
    pub auth: Auth,
    /// Serves until dropped.
    _server: Server,
}

impl Prod {
    pub(crate) async fn start(database_url: &str, upstream: &Upstream, opts: Options) -> Prod {
        let args = engine_args(&opts.spec, Some(upstream.url()));
        Prod::start_with(database_url, args, opts).await
    }

    /// A test database, the recording petstore upstream, and one instance on both (the
    /// database lives as long as the returned [`TestDb`]).
    pub(crate) async fn petstore() -> (TestDb, Upstream, Prod) {
        let db = TestDb::new().await;
        let upstream = Upstream::start().await;
        let prod = Prod::start(&db.url, &upstream, Options::petstore()).await;
        (db, upstream, prod)
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
        engine.add_rules(rules);
        engine.auth = Some(auth.clone());
        engine.held = engine.held.in_database(auth.store().clone());
        let (listener, addr) = Server::listen().await;
        let options = HttpOptions {
            stateless,
            max_body_bytes: 256 * 1024,
            admin: Some(http::admin::router(auth.clone())),
            database: Some(auth.clone()),
            ..HttpOptions::new(KeyCheck::Database(auth.clone()), "production")
        };
        let server = Server::serve(listener, engine, options, Default::default());
        Prod {
            addr,
            auth,
            _server: server,
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
        let features = AGENT_FEATURES;
        key_holding(&self.auth, "agent", &features).await
    }

    /// A session of user `u-42` in tenant `acme`; its token.
    pub(crate) async fn session(&self, features: &[&str], read_only: bool) -> String {
        let session = NewSession {
            user_id: "u-42".into(),
            tenant_id: Some("acme".into()),
            features: owned(features),
            read_only,
            ..NewSession::default()
        };
        session_token(&self.auth, session).await
    }

    /// A client with a new [`Prod::agent_key`] and a new session holding `features` in its
    /// `x-session-token` header: (the client, the key, the session's token).
    pub(crate) async fn agent_client(&self, features: &[&str]) -> (Client, String, String) {
        let key = self.agent_key().await;
        let token = self.session(features, false).await;
        (self.client(&key, Some(&token)).await, key, token)
    }

    /// A request to the admin API (`path` under `/admin/v1`) with `key`: its status and its
    /// body as JSON (the text as a JSON string when it is not JSON).
    pub(crate) async fn admin(
        &self,
        method: reqwest::Method,
        path: &str,
        key: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut req = reqwest::Client::new()
            .request(method, self.url(&format!("/admin/v1{path}")))
            .header("x-api-key", key);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        let text = resp.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// [`Prod::admin`], asserting the status is `want`; returns the body.
    pub(crate) async fn admin_ok(
        &self,
        method: reqwest::Method,
        path: &str,
        key: &str,
        body: Option<Value>,
        want: u16,
    ) -> Value {
        let (status, body) = self.admin(method, path, key, body).await;
        assert_eq!(status, want, "{path}: {body}");
        body
    }
}

const AGENT_FEATURES: [&str; 5] = [
    "apigate.discover",
    "apigate.schema",
    "apigate.execute",
    "pets.*",
    "store.*",
];

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

/// The input schemas of the tools `client` lists, each asserted to require `_sessionToken`.
pub(crate) async fn schemas_requiring_the_session_token(client: &Client) -> Vec<Value> {
    let tools = client.list_all_tools().await.unwrap();
    crate::support::assert_clients_read_schemas(&tools);
    let schemas = tools
        .iter()
        .map(|t| Value::Object((*t.input_schema).clone()));
    let schemas: Vec<Value> = schemas.collect();
    for schema in &schemas {
        let required = schema["required"].as_array();
        let required = required.unwrap_or_else(|| panic!("nothing required: {schema}"));
        assert!(required.contains(&json!("_sessionToken")), "{schema}");
    }
    schemas
}

fn with_token(mut args: Value, token: &str) -> Value {
    args["_sessionToken"] = json!(token);
    args
}

/// [`initialize`] with `key`, asserting a JSON 401 `UNAUTHORIZED`; returns the body.
async fn unauthorized(server: &Prod, key: Option<&str>) -> Value {
    let (status, body) = initialize(server, key).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(body["code"], "UNAUTHORIZED", "{body}");
    body
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
    let (_db, _upstream, server) = Prod::petstore().await;
    let key = server.agent_key().await;
    let (status, body) = initialize(&server, Some(&key)).await;
    assert_eq!(status, 200, "{body}");

    unauthorized(&server, None).await;

    // The right public id with a wrong secret.
    let mut wrong = key.clone();
    let last = wrong.pop().unwrap();
    wrong.push(if last == 'a' { 'b' } else { 'a' });
    let body = unauthorized(&server, Some(&wrong)).await;
    assert!(!body.to_string().contains(&key), "{body}");

    let revoked = server.agent_key().await;
    let (status, _) = initialize(&server, Some(&revoked)).await;
    assert_eq!(status, 200);
    let public_id = revoked.split('_').nth(1).unwrap();
    server.auth.revoke_key(public_id).await.unwrap();
    let body = unauthorized(&server, Some(&revoked)).await;
    assert!(
        body["error"].as_str().unwrap().contains("revoked"),
        "{body}"
    );

    // The admin API answers the same way.
    let (status, body) = server
        .admin(reqwest::Method::GET, "/keys", &revoked, None)
        .await;
    assert_eq!(status, 401);
    assert_eq!(body["code"], "UNAUTHORIZED");
}

#[tokio::test]
async fn tier2_session_tokens_are_required_and_checked() {
    let (db, _upstream, server) = Prod::petstore().await;
    let key = server.agent_key().await;
    let client = server.client(&key, None).await;

    // Every tool declares `_sessionToken`, as required.
    assert_eq!(client.list_all_tools().await.unwrap().len(), 3);
    for schema in schemas_requiring_the_session_token(&client).await {
        let declared = &schema["properties"]["_sessionToken"];
        assert_eq!(declared["type"], "string", "{schema}");
    }

    let discover = |token: Option<&str>| {
        let args = json!({"query": "find pets by status"});
        call(
            &client,
            "api_discover",
            token.map_or(args.clone(), |t| with_token(args, t)),
        )
    };
    let r = assert_tool_error(discover(None).await, "UNAUTHORIZED", &"no token");
    assert!(
        r["error"].as_str().unwrap().contains("_sessionToken"),
        "{r}"
    );

    for bad in ["not-a-token", "sess_0123456789abcdef0123456789abcdef"] {
        let r = assert_tool_error(discover(Some(bad)).await, "UNAUTHORIZED", &bad);
        assert!(!r.to_string().contains(bad), "the token is echoed: {r}");
    }

    // Expired: the session's expiry moved into the past before its first use.
    let expired = server
        .auth
        .create_session(NewSession {
            user_id: "u-expired".into(),
            features: owned(&["apigate.*"]),
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
    let outcome = discover(Some(&expired.token)).await;
    assert_tool_error(outcome, "SESSION_EXPIRED", &"an expired session");

    // Revoked after it worked once (and was cached).
    let token = server.session(&["apigate.*"], false).await;
    let (err, r) = discover(Some(&token)).await;
    assert!(!err, "{r}");
    server
        .auth
        .revoke_session(&apigate::auth::SessionRef::parse(&token).unwrap())
        .await
        .unwrap();
    let r = assert_tool_error(discover(Some(&token)).await, "UNAUTHORIZED", &"revoked");
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
    // Without apigate.execute; all tools but neither pets.admin nor store.write; all of them;
    // all tools, read-only.
    let viewer = server
        .session(&["apigate.discover", "apigate.schema"], false)
        .await;
    let user = server.session(&["apigate.*"], false).await;
    let admin = server
        .session(&["apigate.*", "pets.admin", "store.*"], false)
        .await;
    let reader = server.session(&["apigate.*"], true).await;
    let run =
        |tool: &'static str, args: Value, token: &str| call(&client, tool, with_token(args, token));

    // FORBIDDEN, naming what is missing: (session, call, the field that says so, its value).
    let pet = |op: &str, id: u32| json!({"operationId": op, "pathParams": {"petId": id}});
    let order =
        json!({"method": "POST", "path": "/store/order", "body": {"petId": 1, "quantity": 1}});
    let new_pet =
        json!({"method": "POST", "path": "/pet", "body": {"name": "Fido", "photoUrls": []}});
    let before = upstream.requests().len();
    for (token, args, field, missing) in [
        (
            &viewer,
            pet("getPetById", 1),
            "missing",
            json!("apigate.execute"),
        ),
        (&user, pet("deletePet", 1), "missing", json!("pets.admin")),
        (&user, order, "missing", json!("store.write")),
        (&reader, new_pet, "readOnly", json!(true)),
    ] {
        let r = assert_tool_error(
            run("api_execute", args.clone(), token).await,
            "FORBIDDEN",
            &args,
        );
        assert_eq!(r[field], missing, "{r}");
        if let Some(feature) = missing.as_str() {
            assert!(r["error"].as_str().unwrap().contains(feature), "{r}");
        }
    }
    let (err, r) = run("api_schema", json!({"operationId": "deletePet"}), &user).await;
    assert!(err, "a forbidden operation's schema is shown: {r}");
    assert_eq!(upstream.requests().len(), before, "nothing reached the API");

    // Discovery hides what the session may not execute, and shows it to a session holding the
    // features: (session, query, shown, hidden).
    let (delete, place, add) = (
        "delete a pet",
        "place an order for a pet",
        "add a new pet to the store",
    );
    let none: &[&str] = &[];
    for (token, query, shown, hidden) in [
        (&user, delete, &["getPetById"][..], &["deletePet"][..]),
        (&user, place, &["getOrderById"][..], &["placeOrder"][..]),
        (&admin, delete, &["deletePet"][..], none),
        (&admin, place, &["placeOrder"][..], none),
        (&reader, add, none, &["addPet"][..]),
    ] {
        let (err, r) = run("api_discover", json!({"query": query, "limit": 50}), token).await;
        assert!(!err, "{r}");
        let ids = strings(&r["results"], "operationId");
        assert!(!ids.is_empty(), "{query}: {r}");
        assert!(shown.iter().all(|id| ids.contains(id)), "{query}: {ids:?}");
        assert!(
            !hidden.iter().any(|id| ids.contains(id)),
            "{query}: {ids:?}"
        );
    }
    let (err, r) = run("api_execute", pet("deletePet", 7), &admin).await;
    assert!(!err, "{r}");
    assert_eq!(upstream.requests().pop().unwrap().uri, "/v2/pet/7");
    // A read-only session may read.
    let (err, r) = run("api_execute", pet("getPetById", 3), &reader).await;
    assert!(!err, "{r}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn session_token_header_keeps_the_token_out_of_arguments() {
    let (_db, upstream, server) = Prod::petstore().await;
    let (client, key, token) = server.agent_client(&["apigate.*"]).await;
    call_ok(
        &client,
        "api_discover",
        json!({"query": "find a pet by id"}),
    )
    .await;
    let r = execute_ok(&client, get_pet(5)).await;
    assert_eq!(r["body"]["id"], 5);
    // An argument that differs from the header is refused: it never replaces the header.
    let other_token = "sess_0123456789abcdef0123456789abcdef";
    let pets = json!({"query": "pets", "_sessionToken": other_token});
    call_err(&client, "api_discover", pets, "UNAUTHORIZED").await;
    client.cancel().await.unwrap();

    // Whichever way it came, the token never reaches the API.
    let other = server.client(&key, None).await;
    let new_pet =
        json!({"method": "POST", "path": "/pet", "body": {"name": "Fido", "photoUrls": []}});
    execute_ok(&other, with_token(new_pet, &token)).await;
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

fn get_pet(id: u32) -> Value {
    json!({"operationId": "getPetById", "pathParams": {"petId": id}})
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
    let (client, key, _) = server.agent_client(&["apigate.*"]).await;
    let pets = || json!({"query": "pets"});
    // The connection's `initialize` carried the session's x-session-token: it was one of the
    // session's three (so that one session opening connections cannot drain its key's bucket).
    for _ in 0..2 {
        call_ok(&client, "api_discover", pets()).await;
    }
    let r = call_err(&client, "api_discover", pets(), "RATE_LIMITED").await;
    assert!(r["retryAfterMs"].as_u64().unwrap() > 0, "{r}");
    // Another session over the same key has its own bucket.
    let fresh = server.session(&["apigate.*"], false).await;
    let other = server.client(&key, None).await;
    call_ok(&other, "api_discover", with_token(pets(), &fresh)).await;
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
    let (db, _upstream, server) = Prod::petstore().await;
    let key = server.agent_key().await;
    let token = server.session(&["apigate.*"], false).await;
    let viewer = server.session(&["apigate.discover"], false).await;
    let client = server.client(&key, None).await;
    const MARKER: &str = "Zanzibar-audit-marker";

    // allowed
    let user = json!({"operationId": "getUserByName", "pathParams": {"username": MARKER}});
    execute_ok(&client, with_token(user, &token)).await;
    // denied: no token; a feature lacking
    let (err, _) = call(&client, "api_discover", json!({"query": MARKER})).await;
    assert!(err);
    let add = json!({"operationId": "addPet", "body": {"name": MARKER, "photoUrls": []}});
    let (err, _) = call(&client, "api_execute", with_token(add, &viewer)).await;
    assert!(err);
    // failed: arguments that do not validate
    let bad_id = json!({"operationId": "getPetById", "pathParams": {"petId": MARKER}});
    execute_err(&client, with_token(bad_id, &token), "INVALID_ARGUMENTS").await;
    client.cancel().await.unwrap();

    let rows = audit_rows(&db.url).await;
    let fields: Vec<&Value> = rows.iter().map(|(f, _)| f).collect();
    assert_eq!(rows.len(), 4, "{fields:?}");
    let (a, d1, d2, f) = (fields[0], fields[1], fields[2], fields[3]);
    assert_fields(
        a,
        json!({"tool": "api_execute", "decision": "allowed", "operation": "getUserByName",
            "method": "GET", "path": "/user/{username}", "upstream_status": 200,
            "user_id": "u-42", "tenant_id": "acme"}),
    );
    assert!(
        a["session_id"].is_string() && a["key_id"].is_string(),
        "{a}"
    );
    assert_fields(
        d1,
        json!({"decision": "denied", "error_code": "UNAUTHORIZED", "tool": "api_discover",
            "session_id": null}),
    );
    assert!(d1["key_id"].is_string(), "{d1}");
    assert_fields(
        d2,
        json!({"decision": "denied", "error_code": "FORBIDDEN", "operation": "addPet",
            "method": "POST", "upstream_status": null}),
    );
    assert_fields(
        f,
        json!({"decision": "failed", "error_code": "INVALID_ARGUMENTS",
            "operation": "getPetById", "path": "/pet/{petId}"}),
    );
    // Never argument values, tokens or keys.
    for (_, whole) in &rows {
        assert!(!whole.contains(MARKER), "{whole}");
        assert!(!whole.contains(&token) && !whole.contains(&key), "{whole}");
    }
}

/// [`poll`] every 20 ms for at most a second: what a change made through one instance may
/// take to reach another.
async fn within_a_second<T, F: std::future::Future<Output = Option<T>>>(
    what: &str,
    check: impl FnMut() -> F,
) -> T {
    let second = Duration::from_secs(1);
    poll(what, second, Duration::from_millis(20), check).await
}

#[tokio::test]
async fn two_instances_share_sessions_and_revocations() {
    use reqwest::Method as M;

    let db = TestDb::new().await;
    let upstream = Upstream::start().await;
    let a = Prod::start(&db.url, &upstream, Options::stateless()).await;
    let b = Prod::start(&db.url, &upstream, Options::stateless()).await;

    // The backend's admin key and the agent's key, both created through A.
    let backend = json!({"name": "backend", "features": ["apigate.*"]});
    let created = a
        .admin_ok(M::POST, "/keys", BOOTSTRAP, Some(backend), 201)
        .await;
    let admin_key = created["key"].as_str().unwrap().to_string();
    let agent = json!({"name": "agent", "features": ["apigate.*"]});
    let created = a
        .admin_ok(M::POST, "/keys", &admin_key, Some(agent), 201)
        .await;
    let agent_key = created["key"].as_str().unwrap().to_string();
    let agent_key_id = created["id"].as_str().unwrap().to_string();

    // A session created through A works on B.
    let u7 =
        json!({"userId": "u-7", "tenantId": "acme", "features": ["apigate.*"], "ttlMinutes": 30});
    let session = a
        .admin_ok(M::POST, "/sessions", &admin_key, Some(u7), 201)
        .await;
    let token = session["token"].as_str().unwrap().to_string();
    let client = b.client(&agent_key, Some(&token)).await;
    let r = execute_ok(&client, get_pet(11)).await;
    assert_eq!(r["body"]["id"], 11);
    client.cancel().await.unwrap();

    // A role changed through A reaches B's cached session within a second.
    let discover_only = json!({"features": ["apigate.discover"]});
    a.admin_ok(M::PUT, "/roles/clerk", &admin_key, Some(discover_only), 200)
        .await;
    let u8 = json!({"userId": "u-8", "roles": ["clerk"]});
    let clerk = a
        .admin_ok(M::POST, "/sessions", &admin_key, Some(u8), 201)
        .await;
    let clerk_token = clerk["token"].as_str().unwrap().to_string();
    let client = b.client(&agent_key, Some(&clerk_token)).await;
    let (err, r) = call(&client, "api_execute", get_pet(12)).await;
    assert!(err);
    assert_eq!(r["missing"], "apigate.execute", "{r}");
    let all = json!({"features": ["apigate.*"]});
    a.admin_ok(M::PUT, "/roles/clerk", &admin_key, Some(all), 200)
        .await;
    within_a_second("B still applies the old role", || async {
        let (err, _) = call(&client, "api_execute", get_pet(12)).await;
        (!err).then_some(())
    })
    .await;

    // A session revoked through A is refused by B within a second.
    let revoke = json!({"token": clerk_token});
    a.admin_ok(M::POST, "/sessions/revoke", &admin_key, Some(revoke), 200)
        .await;
    let r = within_a_second("B still accepts a session revoked through A", || async {
        let (err, r) = call(&client, "api_discover", json!({"query": "pets"})).await;
        err.then_some(r)
    })
    .await;
    assert_eq!(r["code"], "UNAUTHORIZED", "{r}");
    client.cancel().await.unwrap();

    // The key, verified and cached by B, is revoked through A: B refuses it within a second.
    assert_eq!(initialize(&b, Some(&agent_key)).await.0, 200);
    let (status, _) = a
        .admin(
            M::DELETE,
            &format!("/keys/{agent_key_id}"),
            &admin_key,
            None,
        )
        .await;
    assert_eq!(status, 200);
    let body = within_a_second(
        "instance B still accepts a key revoked through A",
        || async {
            let (status, body) = initialize(&b, Some(&agent_key)).await;
            (status == 401).then_some(body)
        },
    )
    .await;
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
    let spec = spec_path("petstore-3.0.json");
    let database = format!("postgres://apigate:hunter2@127.0.0.1:{port}/apigate");
    let serve = ["serve", "--spec", &spec, "--listen", "127.0.0.1:0"];
    let (ok, _, stderr) = run_apigate(&serve, &[("DATABASE_URL", &database)]).await;
    assert!(!ok);
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
    let (minute, every) = (Duration::from_secs(60), Duration::from_millis(100));
    poll(&format!("/health is not {want}"), minute, every, || async {
        let (status, body) = health(server).await;
        (status == want).then_some(body)
    })
    .await
}

#[tokio::test]
async fn health_follows_the_database_and_recovers() {
    let db = TestDb::new().await;
    let upstream = Upstream::start().await;
    let (proxy, url) = CutProxy::for_database(&db.url).await;
    let server = Prod::start(&url, &upstream, Options::petstore()).await;
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
    let pets = || json!({"query": "pets", "_sessionToken": token});
    let client = server.client(&key, None).await;
    call_ok(&client, "api_discover", pets()).await;
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
    let still = "a revoked session still works after the database came back";
    let r = poll(
        still,
        Duration::from_secs(5),
        Duration::from_millis(50),
        || async {
            let (err, r) = call(&client, "api_discover", pets()).await;
            err.then_some(r)
        },
    )
    .await;
    assert_eq!(r["code"], "UNAUTHORIZED", "{r}");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn a_legacy_sse_stream_takes_messages_only_from_the_key_that_opened_it() {
    let (_db, _upstream, server) = Prod::petstore().await;
    let owner = server.agent_key().await;
    let other = server.agent_key().await;
    let http = reqwest::Client::new();
    let mut stream = http
        .get(server.url("/sse"))
        .header("x-api-key", &owner)
        .send()
        .await
        .unwrap();
    // The first event names the message endpoint.
    let endpoint = sse_endpoint(&mut stream).await;
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let ping_with = |key: &str| {
        let request = http.post(server.url(&endpoint)).header("x-api-key", key);
        request.json(&ping).send()
    };
    let r = ping_with(&other).await.unwrap();
    assert_eq!(r.status(), 404, "another key must not reach this stream");
    assert_eq!(ping_with(&owner).await.unwrap().status(), 202);
}
