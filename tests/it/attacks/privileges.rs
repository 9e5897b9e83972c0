//! Issue 15, items 13–17: privileges in production (`apigate serve`) mode, attacked for real:
//! server keys and sessions in a real Postgres, apigate's real HTTP server (with the client's
//! source address, as `serve` runs it), rmcp's MCP client, a recording upstream, and the admin
//! API over HTTP.
//!
//! - 13: a call's features are the key's ∩ the session's.
//! - 14: the `x-session-token` header pins the session; `_sessionToken` cannot override it.
//! - 15: read-only callers cannot send a method override (headers or `_method`).
//! - 16: wrong secrets from one address do not lock a key out at another.
//! - 17: admin actions are audited; read-only admin keys only read; no key grants beyond its own.

use std::net::IpAddr;

use apigate::auth::{AuthConfig, NewSession, PermissionRules, RateLimit};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::db::TestDb;
use crate::production::{BOOTSTRAP, Prod, schemas_requiring_the_session_token};
use crate::support::{
    Upstream, assert_tool_error, call, call_err, call_ok, engine_args, execute_err, execute_ok,
    key_holding, owned, session_token,
};

/// A small pet API: `GET /pet/{petId}` declares every method-override header and a `_method`
/// query parameter (as some real APIs do); `DELETE /pet/{petId}` needs `pets.admin`.
fn pets_spec() -> tempfile::NamedTempFile {
    let pet_id =
        json!({"name": "petId", "in": "path", "required": true, "schema": {"type": "integer"}});
    let header = |name: &str| {
        json!({"name": name, "in": "header", "description": "Tunnels another HTTP method through GET",
            "schema": {"type": "string"}})
    };
    let doc = json!({
        "openapi": "3.0.0",
        "info": {"title": "Pets with method override", "version": "1.0.0"},
        "servers": [{"url": "http://pets.example/v2"}],
        "paths": {"/pet/{petId}": {
            "get": {
                "operationId": "getPetById",
                "summary": "Find a pet by its id",
                "parameters": [
                    pet_id,
                    header("X-HTTP-Method-Override"),
                    header("X-HTTP-Method"),
                    header("X-Method-Override"),
                    {"name": "_method", "in": "query", "schema": {"type": "string"}},
                ],
                "responses": {"200": {"description": "the pet",
                    "content": {"application/json": {"schema": {"type": "object"}}}}},
            },
            "delete": {
                "operationId": "deletePet",
                "summary": "Delete a pet",
                "x-required-features": ["pets.admin"],
                "parameters": [pet_id],
                "responses": {"200": {"description": "deleted"}},
            },
        }},
    });
    let file = tempfile::Builder::new().suffix(".json").tempfile().unwrap();
    std::fs::write(file.path(), doc.to_string()).unwrap();
    file
}

/// One production instance in-process, wired as `apigate serve` wires it (including the
/// client's socket address reaching the handlers), and the spec file it was started on.
struct Gate {
    prod: Prod,
    _spec: Option<tempfile::NamedTempFile>,
}

impl std::ops::Deref for Gate {
    type Target = Prod;
    fn deref(&self) -> &Prod {
        &self.prod
    }
}

impl Gate {
    /// A test database, a recording upstream, and a gate on both serving [`pets_spec`] with
    /// these permission rules.
    async fn pets_with(rules: &str) -> (TestDb, Upstream, Gate) {
        let db = TestDb::new().await;
        let upstream = Upstream::start().await;
        let spec = pets_spec();
        let path = spec.path().to_str().unwrap();
        let gate = Gate::start_with(&db, &upstream, path, rules, AuthConfig::default()).await;
        let _spec = Some(spec);
        (db, upstream, Gate { _spec, ..gate })
    }

    /// [`Gate::pets_with`] without rules.
    async fn pets() -> (TestDb, Gate) {
        let (db, _upstream, gate) = Gate::pets_with("").await;
        (db, gate)
    }

    /// With `cfg` (its bootstrap key is always [`BOOTSTRAP`]).
    async fn start_with(
        db: &TestDb,
        upstream: &Upstream,
        spec: &str,
        rules: &str,
        cfg: AuthConfig,
    ) -> Gate {
        let args = engine_args(spec, Some(upstream.url()));
        let rules = PermissionRules::from_toml(rules).expect("rules parse");
        let prod = Prod::launch(&db.url, args, rules, cfg, false).await;
        Gate { prod, _spec: None }
    }

    async fn key(&self, features: &[&str]) -> String {
        key_holding(&self.auth, "agent", features).await
    }

    async fn session(&self, features: &[&str], read_only: bool) -> String {
        let session = NewSession {
            user_id: "u-42".into(),
            features: owned(features),
            read_only,
            ..NewSession::default()
        };
        session_token(&self.auth, session).await
    }
}

fn get_pet(id: i64) -> Value {
    json!({"operationId": "getPetById", "pathParams": {"petId": id}})
}

fn delete_pet(id: i64) -> Value {
    json!({"operationId": "deletePet", "pathParams": {"petId": id}})
}

// ---- 13 ----------------------------------------------------------------------------------------

/// A key holding only `apigate.discover` (or nothing) with a `*` session used to run
/// `api_execute`: the session's features alone counted. Now the key bounds the call.
#[tokio::test]
async fn a_narrow_key_bounds_a_wide_session() {
    let (_db, upstream, gate) = Gate::pets_with("").await;
    let everything = gate.session(&["*"], false).await;
    let find_a_pet = || json!({"query": "find a pet"});

    // Only apigate.discover: discovery works, execution does not.
    let discover_only = gate.key(&["apigate.discover"]).await;
    let client = gate.client(&discover_only, Some(&everything)).await;
    call_ok(&client, "api_discover", find_a_pet()).await;
    let r = execute_err(&client, get_pet(1), "FORBIDDEN").await;
    assert_eq!(r["missing"], "apigate.execute", "{r}");
    let (err, r) = call(&client, "api_schema", json!({"operationId": "getPetById"})).await;
    assert!(err, "{r}");
    assert_eq!(r["missing"], "apigate.schema", "{r}");
    client.cancel().await.unwrap();

    // No features at all: not even discovery.
    let nothing = gate.key(&[]).await;
    let client = gate.client(&nothing, Some(&everything)).await;
    let (err, r) = call(&client, "api_discover", find_a_pet()).await;
    assert!(err, "{r}");
    assert_eq!(r["missing"], "apigate.discover", "{r}");
    client.cancel().await.unwrap();

    // The three tools but not pets.admin: the session's `*` does not lend it.
    let tools_only = gate.key(&["apigate.*"]).await;
    let client = gate.client(&tools_only, Some(&everything)).await;
    execute_ok(&client, get_pet(2)).await;
    let (err, r) = call(&client, "api_execute", delete_pet(2)).await;
    assert!(err, "{r}");
    assert_eq!(r["missing"], "pets.admin", "{r}");
    // Nor does discovery show what the pair cannot run.
    let delete = json!({"query": "delete a pet", "limit": 50});
    let (_, r) = call(&client, "api_discover", delete).await;
    assert!(!r.to_string().contains("deletePet"), "{r}");
    client.cancel().await.unwrap();

    // The other way round: a wide key does not widen a narrow session.
    let wide = gate.key(&["*"]).await;
    let narrow = gate.session(&["apigate.*"], false).await;
    let client = gate.client(&wide, Some(&narrow)).await;
    let (err, r) = call(&client, "api_execute", delete_pet(3)).await;
    assert!(err, "{r}");
    assert_eq!(r["missing"], "pets.admin", "{r}");
    client.cancel().await.unwrap();

    let deletes = || {
        upstream
            .requests()
            .iter()
            .filter(|r| r.method == "DELETE")
            .count()
    };
    assert_eq!(deletes(), 0, "a forbidden DELETE reached the API");
    // Both wide: it runs (the checks above are not refusing everything).
    let client = gate.client(&wide, Some(&everything)).await;
    execute_ok(&client, delete_pet(4)).await;
    assert_eq!(deletes(), 1);
    client.cancel().await.unwrap();
}

// ---- 14 ----------------------------------------------------------------------------------------

/// With the session in `x-session-token`, the tools do not ask for `_sessionToken` (a model
/// fills "required" fields with placeholders), and a different token in the arguments cannot
/// replace the read-only session the header pins: before, it did, and a DELETE ran.
#[tokio::test]
async fn the_session_header_cannot_be_overridden_by_an_argument() {
    let (_db, upstream, gate) = Gate::pets_with("").await;
    let key = gate.key(&["*"]).await;
    let reader = gate.session(&["*"], true).await;
    let writer = gate.session(&["*"], false).await;

    let pinned = gate.client(&key, Some(&reader)).await;
    let tools = pinned.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 3);
    for t in &tools {
        let schema = Value::Object((*t.input_schema).clone());
        let required = schema["required"].as_array().cloned().unwrap_or_default();
        assert!(
            !required.contains(&json!("_sessionToken")),
            "{} requires _sessionToken although the connection carries x-session-token \
             (a model fills it with a placeholder): {schema}",
            t.name
        );
        assert!(
            schema["properties"].get("_sessionToken").is_none(),
            "{} offers _sessionToken on a connection that has the header: {schema}",
            t.name
        );
    }
    // Without the header the argument stays required (the same server, another connection).
    let unpinned = gate.client(&key, None).await;
    schemas_requiring_the_session_token(&unpinned).await;
    unpinned.cancel().await.unwrap();

    // A call as the schema now describes it runs as the header's session.
    execute_ok(&pinned, get_pet(1)).await;
    // The same token in the argument is fine.
    let mut same = get_pet(2);
    same["_sessionToken"] = json!(reader);
    execute_ok(&pinned, same).await;

    // The attack: a read-write token in the argument, over a connection pinned read-only.
    let before = upstream.requests().len();
    let mut escalate = delete_pet(7);
    escalate["_sessionToken"] = json!(writer);
    let outcome = call(&pinned, "api_execute", escalate).await;
    let overrode = "the argument overrode the header's read-only session";
    let r = assert_tool_error(outcome, "UNAUTHORIZED", &overrode);
    let message = r["error"].as_str().unwrap();
    assert!(message.contains("x-session-token"), "{r}");
    assert!(!r.to_string().contains(&writer), "the token is echoed: {r}");
    assert!(!r.to_string().contains(&reader), "the token is echoed: {r}");
    assert_eq!(
        upstream.requests().len(),
        before,
        "the DELETE reached the API"
    );

    // A placeholder sent anyway is refused the same way, with what to do about it.
    for placeholder in [
        "<your session token>",
        "sess_0123456789abcdef0123456789abcdef",
    ] {
        let mut args = json!({"query": "find a pet"});
        args["_sessionToken"] = json!(placeholder);
        let r = call_err(&pinned, "api_discover", args, "UNAUTHORIZED").await;
        assert!(r["error"].as_str().unwrap().contains("omit"), "{r}");
    }
    pinned.cancel().await.unwrap();
}

// ---- 15 ----------------------------------------------------------------------------------------

/// A read-only caller could send a GET the spec declares with `X-HTTP-Method-Override:
/// DELETE`, which many frameworks execute as a DELETE.
#[tokio::test]
async fn read_only_callers_cannot_override_the_method() {
    let (_db, upstream, gate) = Gate::pets_with(
        "[[rule]]\nmethod = \"DELETE\"\npath = \"/pet/**\"\nfeatures = [\"pets.delete\"]\n",
    )
    .await;
    let key = gate.key(&["*"]).await;
    let reader = gate.session(&["*"], true).await;
    let client = gate.client(&key, Some(&reader)).await;

    // The plain GET works.
    execute_ok(&client, get_pet(1)).await;
    let before = upstream.requests().len();
    assert_eq!(before, 1);

    let mut attempts: Vec<Value> = Vec::new();
    for name in [
        "X-HTTP-Method-Override",
        "x-http-method-override",
        "X-HTTP-Method",
        "X-Method-Override",
    ] {
        let mut args = get_pet(1);
        args["headers"] = json!({ name: "DELETE" });
        attempts.push(args);
    }
    let mut by_query = get_pet(1);
    by_query["query"] = json!({"_method": "DELETE"});
    attempts.push(by_query);
    // Whatever the value: a read-only caller may not tunnel a method at all.
    let mut lower = get_pet(1);
    lower["headers"] = json!({"X-HTTP-Method-Override": "delete"});
    attempts.push(lower);
    for args in attempts {
        let r = execute_err(&client, args.clone(), "FORBIDDEN").await;
        assert_eq!(r["readOnly"], true, "{args}: {r}");
        assert!(r["error"].as_str().unwrap().contains("override"), "{r}");
    }
    let overridden: Vec<String> = upstream
        .requests()
        .iter()
        .filter(|r| {
            r.uri.contains("_method")
                || r.headers.keys().any(|h| {
                    matches!(
                        h.as_str(),
                        "x-http-method-override" | "x-http-method" | "x-method-override"
                    )
                })
        })
        .map(|r| format!("{} {} {:?}", r.method, r.uri, r.headers))
        .collect();
    assert!(
        overridden.is_empty(),
        "method overrides reached the API: {overridden:?}"
    );
    assert_eq!(upstream.requests().len(), before);
    client.cancel().await.unwrap();

    // A caller that may write still needs what the tunnelled method needs: the rule on
    // DELETE and deletePet's x-required-features.
    let writer = gate.session(&["apigate.*"], false).await;
    let client = gate.client(&key, Some(&writer)).await;
    let mut args = get_pet(1);
    args["headers"] = json!({"X-HTTP-Method-Override": "DELETE"});
    execute_err(&client, args.clone(), "FORBIDDEN").await;
    assert_eq!(upstream.requests().len(), before);
    // …and with them, it is sent as declared.
    let admin = gate
        .session(&["apigate.*", "pets.admin", "pets.delete"], false)
        .await;
    let mut with_token = args.clone();
    with_token["_sessionToken"] = json!(admin);
    let client2 = gate.client(&key, None).await;
    execute_ok(&client2, with_token).await;
    let sent = upstream.requests().pop().unwrap();
    assert_eq!(sent.headers["x-http-method-override"], "DELETE");
    client.cancel().await.unwrap();
    client2.cancel().await.unwrap();
}

// ---- 16 ----------------------------------------------------------------------------------------

/// An `initialize` with `key` from the client's own source address `from`.
async fn initialize_from(gate: &Gate, from: IpAddr, key: &str) -> StatusCode {
    let client = reqwest::Client::builder()
        .local_address(from)
        .build()
        .unwrap();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    client
        .post(gate.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .header("x-api-key", key)
        .json(&init)
        .send()
        .await
        .unwrap()
        .status()
}

/// After a restart, ten wrong secrets for a known public id locked the real key out with
/// 429 for everyone. The throttle is per public id and source address: the attacker at
/// 127.0.0.2 is throttled; the key's owner at 127.0.0.1 is not.
#[tokio::test]
async fn wrong_secrets_from_one_address_do_not_lock_out_another() {
    let db = TestDb::new().await;
    let upstream = Upstream::start().await;
    let spec = pets_spec();
    let spec = spec.path().to_str().unwrap();
    let legit: IpAddr = [127, 0, 0, 1].into();
    let attacker: IpAddr = [127, 0, 0, 2].into();

    // Ten verifications at once per (public id, address), and (for the test) no refill in
    // its lifetime, so the count does not depend on how fast argon2 runs here.
    let cfg = || AuthConfig {
        verify_rate: RateLimit {
            per_second: 0.001,
            burst: 10,
        },
        ..AuthConfig::default()
    };
    let first = Gate::start_with(&db, &upstream, spec, "", cfg()).await;
    let key = first.key(&["*"]).await;
    assert_eq!(initialize_from(&first, legit, &key).await, StatusCode::OK);
    drop(first);
    // The restart: the new instance has verified nothing yet.
    let gate = Gate::start_with(&db, &upstream, spec, "", cfg()).await;

    let public_id = key.split('_').nth(1).unwrap();
    let mut statuses = Vec::new();
    for i in 0..12 {
        let guess = format!("agk_{public_id}_{}", format!("guess{i:02}").repeat(6));
        statuses.push(initialize_from(&gate, attacker, &guess).await);
    }
    assert_eq!(
        statuses[..10],
        [StatusCode::UNAUTHORIZED; 10],
        "{statuses:?}"
    );
    assert_eq!(
        statuses[10..],
        [StatusCode::TOO_MANY_REQUESTS; 2],
        "{statuses:?}"
    );

    // The owner, elsewhere, gets in.
    assert_eq!(
        initialize_from(&gate, legit, &key).await,
        StatusCode::OK,
        "wrong guesses from {attacker} locked the key out for {legit}"
    );
    // The attacker stays throttled.
    let guess = format!("agk_{public_id}_{}", "guess99".repeat(6));
    assert_eq!(
        initialize_from(&gate, attacker, &guess).await,
        StatusCode::TOO_MANY_REQUESTS
    );
}

// ---- 17 ----------------------------------------------------------------------------------------

/// Creating and revoking keys and sessions and setting roles over the admin API write audit
/// rows naming who did what to what, never a key or a token.
#[tokio::test]
async fn admin_actions_are_audited_without_secrets() {
    use reqwest::Method as M;
    let (db, gate) = Gate::pets().await;

    let body = Some(json!({"name": "backend", "features": ["*"]}));
    let backend = gate.admin_ok(M::POST, "/keys", BOOTSTRAP, body, 201).await;
    let backend_key = backend["key"].as_str().unwrap().to_string();
    let actor = format!("key:{}", backend["publicId"].as_str().unwrap());
    let by_backend = |method: M, path: String, body: Option<Value>, want: u16| {
        let (gate, key) = (&gate, &backend_key);
        async move { gate.admin_ok(method, &path, key, body, want).await }
    };

    let body = json!({"name": "agent", "features": ["apigate.*"]});
    let agent = by_backend(M::POST, "/keys".into(), Some(body), 201).await;
    let body = json!({"features": ["apigate.*", "pets.read"]});
    by_backend(M::PUT, "/roles/clerk".into(), Some(body), 200).await;
    let body = json!({"userId": "u-1", "roles": ["clerk"]});
    let s1 = by_backend(M::POST, "/sessions".into(), Some(body), 201).await;
    let body = json!({"userId": "u-2"});
    let s2 = by_backend(M::POST, "/sessions".into(), Some(body), 201).await;
    let body = json!({"token": s1["token"]});
    by_backend(M::POST, "/sessions/revoke".into(), Some(body), 200).await;
    let s2_id = s2["id"].as_str().unwrap();
    by_backend(M::DELETE, format!("/sessions/{s2_id}"), None, 200).await;
    let agent_public = agent["publicId"].as_str().unwrap();
    by_backend(M::DELETE, format!("/keys/{agent_public}"), None, 200).await;

    let page = by_backend(M::GET, "/audit?tool=admin".into(), None, 200).await;
    let entries = page["entries"].as_array().unwrap();
    let got: Vec<(String, String, String, String)> = entries
        .iter()
        .rev()
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or("-").to_string();
            (s("actor"), s("operation"), s("target"), s("decision"))
        })
        .collect();
    let s1_id = s1["id"].as_str().unwrap();
    let want: Vec<(String, String, String, String)> = [
        ("bootstrap", "key.create", format!("key:{}", &actor[4..])),
        (&actor, "key.create", format!("key:{agent_public}")),
        (&actor, "role.set", "role:clerk".to_string()),
        (&actor, "session.create", format!("session:{s1_id}")),
        (&actor, "session.create", format!("session:{s2_id}")),
        (&actor, "session.revoke", format!("session:{s1_id}")),
        (&actor, "session.revoke", format!("session:{s2_id}")),
        (&actor, "key.revoke", format!("key:{agent_public}")),
    ]
    .into_iter()
    .map(|(a, o, t)| (a.to_string(), o.to_string(), t, "allowed".to_string()))
    .collect();
    assert_eq!(got, want, "{page}");
    for e in entries {
        assert_eq!(e["tool"], "admin", "{e}");
    }

    // No secret in the audit log, read back whole from the database.
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let whole: Vec<String> = sqlx::query_scalar("SELECT row_to_json(a)::text FROM audit_log a")
        .fetch_all(&pool)
        .await
        .unwrap();
    pool.close().await;
    let whole = whole.join("\n");
    let agent_key = agent["key"].as_str().unwrap();
    for secret in [
        backend_key.as_str(),
        agent_key,
        s1["token"].as_str().unwrap(),
        s2["token"].as_str().unwrap(),
        BOOTSTRAP,
    ] {
        // The secret part of a key (after its public id) and whole tokens never appear.
        let tail = &secret[secret.len() - 16..];
        assert!(
            !whole.contains(tail),
            "a secret is in the audit log:\n{whole}"
        );
    }

    // The CLI's actions are audited too, as `cli`.
    let cli = apigate::auth::Admin::new(gate.auth.store().clone());
    let out = apigate::cli::admin::roles(
        &cli,
        apigate::cli::admin::RolesCommand::Set {
            name: "viewer".into(),
            features: vec!["apigate.discover".into()],
            json: true,
        },
    )
    .await
    .unwrap();
    assert!(out.contains("viewer"), "{out}");
    let page = by_backend(M::GET, "/audit?tool=admin&limit=1".into(), None, 200).await;
    let last = &page["entries"][0];
    assert_eq!(
        (&last["actor"], &last["operation"], &last["target"]),
        (&json!("cli"), &json!("role.set"), &json!("role:viewer")),
        "{page}"
    );
}

/// A read-only admin key could create keys (and mint `*`). Now it may only read.
#[tokio::test]
async fn a_read_only_admin_key_may_only_read() {
    use reqwest::Method as M;
    let (_db, gate) = Gate::pets().await;
    let body = Some(json!({"name": "auditor", "features": ["*"], "readOnly": true}));
    let auditor = gate.admin_ok(M::POST, "/keys", BOOTSTRAP, body, 201).await;
    let auditor_key = auditor["key"].as_str().unwrap();
    let victim = gate.key(&["apigate.*"]).await;
    let victim_public = victim.split('_').nth(1).unwrap();
    let session = gate
        .auth
        .create_session(NewSession {
            user_id: "u-1".into(),
            ..NewSession::default()
        })
        .await
        .unwrap();

    // Reading works.
    for path in ["/keys", "/sessions", "/roles", "/audit"] {
        gate.admin_ok(M::GET, path, auditor_key, None, 200).await;
    }
    // Every change is refused, with a reason.
    let changes: Vec<(M, String, Option<Value>)> = vec![
        (
            M::POST,
            "/keys".into(),
            Some(json!({"name": "minted", "features": ["*"]})),
        ),
        (M::DELETE, format!("/keys/{victim_public}"), None),
        (M::POST, "/sessions".into(), Some(json!({"userId": "u-9"}))),
        (M::DELETE, format!("/sessions/{}", session.id), None),
        (
            M::POST,
            "/sessions/revoke".into(),
            Some(json!({"token": session.token})),
        ),
        (
            M::PUT,
            "/roles/clerk".into(),
            Some(json!({"features": ["*"]})),
        ),
    ];
    for (method, path, body) in changes {
        let r = gate.admin_ok(method, &path, auditor_key, body, 403).await;
        assert_eq!(r["code"], "FORBIDDEN", "{path} with a read-only key: {r}");
        assert!(r["error"].as_str().unwrap().contains("read-only"), "{r}");
    }
    // Nothing changed.
    let (_, keys) = gate.admin(M::GET, "/keys", auditor_key, None).await;
    let keys = keys["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert!(keys.iter().all(|k| k["revokedAt"].is_null()), "{keys:?}");
    let (_, roles) = gate.admin(M::GET, "/roles", auditor_key, None).await;
    assert_eq!(roles["roles"], json!([]));
    assert!(
        gate.auth
            .authenticate_session(&apigate::auth::KeyPrincipal::dev(), &session.token)
            .await
            .is_ok()
    );
    // The refusals are in the audit log.
    let (_, page) = gate
        .admin(M::GET, "/audit?tool=admin", auditor_key, None)
        .await;
    let denied = page["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["decision"] == "denied"
                && e["actor"] == format!("key:{}", auditor["publicId"].as_str().unwrap())
        })
        .count();
    assert_eq!(denied, 6, "{page}");
}

/// Nobody creates a key or session, or sets a role, with features beyond their own.
#[tokio::test]
async fn admin_keys_cannot_grant_beyond_their_own_features() {
    use reqwest::Method as M;
    let (_db, gate) = Gate::pets().await;
    gate.auth.set_role("root", &["*".into()]).await.unwrap();
    gate.auth
        .set_role("reader", &["apigate.discover".into()])
        .await
        .unwrap();
    let body =
        json!({"name": "helpdesk", "features": ["apigate.admin", "apigate.discover", "pets.*"]});
    let limited = gate
        .admin_ok(M::POST, "/keys", BOOTSTRAP, Some(body), 201)
        .await;
    let helpdesk = limited["key"].as_str().unwrap();

    // (what is asked, the feature it lacks)
    let key = |body: Value| (M::POST, "/keys", body);
    let session = |body: Value| (M::POST, "/sessions", body);
    let escalations = [
        (key(json!({"name": "x", "features": ["*"]})), "*"),
        (
            key(json!({"name": "x", "features": ["apigate.execute"]})),
            "apigate.execute",
        ),
        (
            key(json!({"name": "x", "features": ["apigate.*"]})),
            "apigate.*",
        ),
        (key(json!({"name": "x", "roles": ["root"]})), "*"),
        (
            session(json!({"userId": "u", "features": ["billing.read"]})),
            "billing.read",
        ),
        (session(json!({"userId": "u", "roles": ["root"]})), "*"),
        ((M::PUT, "/roles/reader", json!({"features": ["*"]})), "*"),
        (
            (
                M::PUT,
                "/roles/new",
                json!({"features": ["apigate.admin", "crm.*"]}),
            ),
            "crm.*",
        ),
    ];
    for ((method, path, body), missing) in escalations {
        let what = format!("{method} {path} {body}");
        let r = gate.admin_ok(method, path, helpdesk, Some(body), 403).await;
        assert_eq!(r["code"], "FORBIDDEN", "{r}");
        assert_eq!(r["missing"], missing, "{what}: {r}");
        assert!(
            r["error"].as_str().unwrap().contains(missing),
            "the message names what is lacking: {r}"
        );
    }
    // Within its own features it works (including a narrower wildcard and a role it covers).
    let (method, path, body) = key(
        json!({"name": "ok", "features": ["apigate.discover", "pets.read", "pets.photos.*"], "roles": ["reader"]}),
    );
    gate.admin_ok(method, path, helpdesk, Some(body), 201).await;
    let (method, path, body) = session(json!({"userId": "u", "features": ["pets.*"]}));
    gate.admin_ok(method, path, helpdesk, Some(body), 201).await;
    // Nothing more was created, and the roles are as they were.
    let (_, keys) = gate.admin(M::GET, "/keys", helpdesk, None).await;
    assert_eq!(keys["keys"].as_array().unwrap().len(), 2, "{keys}");
    let (_, roles) = gate.admin(M::GET, "/roles", helpdesk, None).await;
    let roles = roles["roles"].as_array().unwrap();
    assert_eq!(roles.len(), 2, "{roles:?}");
    let reader = roles.iter().find(|r| r["name"] == "reader").unwrap();
    assert_eq!(reader["features"], json!(["apigate.discover"]));
}
