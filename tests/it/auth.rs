//! Server keys, sessions, permissions, rate limits, audit and cross-instance invalidation,
//! against a real Postgres (one fresh database per test, see `db.rs`).

use apigate::spec::Method;
use std::time::{Duration, Instant};

use apigate::auth::{
    AdminError, Auth, AuthConfig, AuthError, KeyPrincipal, NewKey, NewSession, PermissionRules,
    RateLimit, SessionRef,
};
use apigate::store::{Decision, Store};
use sqlx::ConnectOptions;

use crate::db::TestDb;

async fn auth(db: &TestDb) -> Auth {
    Auth::new(db.store.clone(), AuthConfig::default())
        .await
        .unwrap()
}

fn key(name: &str, features: &[&str]) -> NewKey {
    NewKey {
        name: name.into(),
        features: features.iter().map(|s| s.to_string()).collect(),
        ..NewKey::default()
    }
}

fn session(user: &str, features: &[&str]) -> NewSession {
    NewSession {
        user_id: user.into(),
        features: features.iter().map(|s| s.to_string()).collect(),
        ..NewSession::default()
    }
}

fn code<T: std::fmt::Debug>(r: Result<T, AuthError>) -> &'static str {
    code_of(&r.expect_err("expected an error"))
}

/// The code an agent sees for an auth failure.
fn code_of(e: &AuthError) -> &'static str {
    apigate::tools::ToolError::from(e.clone()).code.as_str()
}

/// Runs SQL on the test database behind the core's back (to age a session).
async fn exec(db: &TestDb, sql: &str) {
    let mut c = db
        .url
        .parse::<sqlx::postgres::PgConnectOptions>()
        .unwrap()
        .connect()
        .await
        .unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_string()))
        .execute(&mut c)
        .await
        .unwrap();
}

/// Polls until `f` returns true or `bound` passes; returns whether it became true.
async fn eventually<F, Fut>(bound: Duration, mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + bound;
    loop {
        if f().await {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn server_keys_missing_wrong_revoked() {
    let db = TestDb::new().await;
    let auth = auth(&db).await;

    assert_eq!(code(auth.authenticate_key("").await), "UNAUTHORIZED");
    assert_eq!(code(auth.authenticate_key("hello").await), "UNAUTHORIZED");

    let created = auth.create_key(key("agent", &["apigate.*"])).await.unwrap();
    assert!(
        created
            .key
            .starts_with(&format!("agk_{}_", created.public_id))
    );
    let k = auth.authenticate_key(&created.key).await.unwrap();
    assert_eq!(k.key_id, Some(created.id));
    assert!(k.features.allows("apigate.execute"));
    // Served from the cache the second time; same answer.
    assert_eq!(
        auth.authenticate_key(&created.key).await.unwrap().key_id,
        Some(created.id)
    );

    // Right public id, wrong secret.
    let mut wrong = created.key.clone();
    let last = wrong.pop().unwrap();
    wrong.push(if last == 'a' { 'b' } else { 'a' });
    assert_eq!(code(auth.authenticate_key(&wrong).await), "UNAUTHORIZED");
    // Unknown public id.
    let unknown = format!("agk_zzzzzzzz_{}", &created.key[13..]);
    assert_eq!(code(auth.authenticate_key(&unknown).await), "UNAUTHORIZED");

    // The list never shows the secret.
    let listed = auth.list_keys().await.unwrap();
    assert_eq!(listed.len(), 1);
    let json = serde_json::to_string(&listed).unwrap();
    assert!(!json.contains(&created.key[13..]), "{json}");

    // Revoked by public id: refused at once on this instance, even though it was cached.
    let r = auth.revoke_key(&created.public_id).await.unwrap();
    assert_eq!(r.id, created.id);
    let e = auth.authenticate_key(&created.key).await.unwrap_err();
    assert_eq!(code_of(&e), "UNAUTHORIZED");
    assert!(e.to_string().contains("revoked"), "{e}");
    assert!(auth.list_keys().await.unwrap()[0].revoked_at.is_some());

    assert!(matches!(
        auth.revoke_key(&uuid::Uuid::new_v4().to_string()).await,
        Err(AdminError::NotFound(_))
    ));
    assert!(matches!(
        auth.revoke_key("not an id").await,
        Err(AdminError::Invalid(_))
    ));
}

#[tokio::test]
async fn bootstrap_key_is_accepted_and_compared_exactly() {
    let db = TestDb::new().await;
    let auth = Auth::new(
        db.store.clone(),
        AuthConfig {
            bootstrap_key: Some("bootstrap-secret-123".into()),
            ..AuthConfig::default()
        },
    )
    .await
    .unwrap();
    let k = auth.authenticate_key("bootstrap-secret-123").await.unwrap();
    assert!(k.is_bootstrap());
    assert!(k.features.allows("apigate.admin"));
    assert_eq!(
        code(auth.authenticate_key("bootstrap-secret-12").await),
        "UNAUTHORIZED"
    );
    assert_eq!(
        code(auth.authenticate_key("bootstrap-secret-1234").await),
        "UNAUTHORIZED"
    );
}

#[tokio::test]
async fn sessions_unknown_expired_revoked() {
    let db = TestDb::new().await;
    let auth = auth(&db).await;
    let agent = KeyPrincipal::dev();

    assert_eq!(
        code(auth.authenticate_session(&agent, "").await),
        "UNAUTHORIZED"
    );
    assert_eq!(
        code(auth.authenticate_session(&agent, "sess_nope").await),
        "UNAUTHORIZED"
    );
    let unknown = format!("sess_{}", "0".repeat(32));
    assert_eq!(
        code(auth.authenticate_session(&agent, &unknown).await),
        "UNAUTHORIZED"
    );

    let s = auth
        .create_session(NewSession {
            tenant_id: Some("t1".into()),
            organization_id: Some("o1".into()),
            ..session("user-1", &["apigate.discover"])
        })
        .await
        .unwrap();
    assert!(s.token.starts_with("sess_") && s.token.len() == 37);
    let ttl = s.expires_at - chrono::Utc::now();
    assert!(ttl > chrono::Duration::minutes(119) && ttl <= chrono::Duration::minutes(120));
    let p = auth.authenticate_session(&agent, &s.token).await.unwrap();
    assert_eq!(p.session_id, Some(s.id));
    assert_eq!(p.user_id.as_deref(), Some("user-1"));
    assert_eq!(p.tenant_id.as_deref(), Some("t1"));
    assert_eq!(p.organization_id.as_deref(), Some("o1"));

    // Only the digest is stored.
    let stored: Vec<u8> = sqlx::query_scalar("SELECT token_digest FROM api_keys WHERE id = $1")
        .bind(s.id)
        .fetch_one(
            &mut db
                .url
                .parse::<sqlx::postgres::PgConnectOptions>()
                .unwrap()
                .connect()
                .await
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(stored.len(), 32);

    // Expired (aged in the database; the cached entry is checked against its expiry too).
    exec(
        &db,
        &format!(
            "UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE id = '{}'",
            s.id
        ),
    )
    .await;
    let fresh = Auth::new(db.store.clone(), AuthConfig::default())
        .await
        .unwrap();
    assert_eq!(
        code(fresh.authenticate_session(&agent, &s.token).await),
        "SESSION_EXPIRED"
    );

    // Revoked, by token.
    let s2 = auth.create_session(session("user-2", &[])).await.unwrap();
    auth.authenticate_session(&agent, &s2.token).await.unwrap();
    auth.revoke_session(&SessionRef::parse(&s2.token).unwrap())
        .await
        .unwrap();
    let e = auth
        .authenticate_session(&agent, &s2.token)
        .await
        .unwrap_err();
    assert_eq!(code_of(&e), "UNAUTHORIZED");
    assert!(e.to_string().contains("revoked"));

    // Revoked, by id.
    let s3 = auth.create_session(session("user-3", &[])).await.unwrap();
    auth.revoke_session(&SessionRef::Id(s3.id)).await.unwrap();
    assert_eq!(
        code(auth.authenticate_session(&agent, &s3.token).await),
        "UNAUTHORIZED"
    );

    // Validation.
    assert!(matches!(
        auth.create_session(session("", &[])).await,
        Err(AdminError::Invalid(_))
    ));
    assert!(matches!(
        auth.create_session(NewSession {
            ttl_minutes: Some(0),
            ..session("u", &[])
        })
        .await,
        Err(AdminError::Invalid(_))
    ));
    let short = auth
        .create_session(NewSession {
            ttl_minutes: Some(5),
            ..session("u", &[])
        })
        .await
        .unwrap();
    assert!(short.expires_at - chrono::Utc::now() <= chrono::Duration::minutes(5));
}

#[tokio::test]
async fn permissions_features_roles_wildcards_read_only() {
    let db = TestDb::new().await;
    let auth = auth(&db).await;
    let agent = KeyPrincipal::dev();
    let rules = PermissionRules::from_toml(
        "[[rule]]\nmethod = \"DELETE\"\npath = \"/invoices/**\"\nfeatures = [\"billing.admin\"]\n",
    )
    .unwrap();

    // A session lacking a feature: the error names it.
    let s = auth
        .create_session(session("u", &["apigate.discover", "apigate.schema"]))
        .await
        .unwrap();
    let p = auth.authenticate_session(&agent, &s.token).await.unwrap();
    assert!(p.may_use_tool("api_discover").is_ok());
    match p.may_use_tool("api_execute") {
        Err(AuthError::Forbidden { missing }) => assert_eq!(missing, "apigate.execute"),
        other => panic!("{other:?}"),
    }

    // Unknown roles are refused (typos would otherwise silently grant nothing).
    assert!(matches!(
        auth.create_session(NewSession { roles: vec!["nope".into()], ..session("u", &[]) }).await,
        Err(AdminError::Invalid(m)) if m.contains("nope")
    ));

    // Wildcards through a role.
    auth.set_role("accountant", &["apigate.*".into(), "billing.*".into()])
        .await
        .unwrap();
    let s = auth
        .create_session(NewSession {
            roles: vec!["accountant".into()],
            ..session("u", &["crm.read"])
        })
        .await
        .unwrap();
    let p = auth.authenticate_session(&agent, &s.token).await.unwrap();
    let need = |f: &str| vec![f.to_string()];
    assert!(p.may_use_tool("api_execute").is_ok());
    assert!(
        p.may_execute(
            Method::Get,
            "/invoices",
            &need("billing.invoices.read"),
            &rules
        )
        .is_ok()
    );
    assert!(
        p.may_execute(Method::Get, "/contacts", &need("crm.read"), &rules)
            .is_ok()
    );
    assert!(
        p.may_execute(Method::Delete, "/invoices/{id}", &[], &rules)
            .is_ok()
    );
    match p.may_execute(Method::Get, "/stock", &need("inventory.read"), &rules) {
        Err(AuthError::Forbidden { missing }) => assert_eq!(missing, "inventory.read"),
        other => panic!("{other:?}"),
    }

    // A role change reaches sessions already cached.
    auth.set_role("accountant", &["apigate.*".into(), "billing.read".into()])
        .await
        .unwrap();
    let p = auth.authenticate_session(&agent, &s.token).await.unwrap();
    match p.may_execute(Method::Delete, "/invoices/{id}", &[], &rules) {
        Err(AuthError::Forbidden { missing }) => assert_eq!(missing, "billing.admin"),
        other => panic!("{other:?}"),
    }
    let roles = auth.list_roles().await.unwrap();
    assert_eq!(roles.len(), 1);
    assert_eq!(roles[0].features, ["apigate.*", "billing.read"]);

    // A read-only session may not POST, whatever its features.
    let ro = auth
        .create_session(NewSession {
            read_only: true,
            ..session("u", &["*"])
        })
        .await
        .unwrap();
    let p = auth.authenticate_session(&agent, &ro.token).await.unwrap();
    assert!(p.read_only);
    assert!(p.may_execute(Method::Get, "/invoices", &[], &rules).is_ok());
    let e = p
        .may_execute(Method::Post, "/invoices", &[], &rules)
        .unwrap_err();
    assert_eq!(code_of(&e), "FORBIDDEN");
    assert!(matches!(e, AuthError::ReadOnly { .. }));
    assert!(!p.may_see(Method::Post, "/invoices", &[], &rules));

    // A read-only key makes every session over it read-only.
    let ro_key = auth
        .create_key(NewKey {
            read_only: true,
            ..key("ro-agent", &[])
        })
        .await
        .unwrap();
    let k = auth.authenticate_key(&ro_key.key).await.unwrap();
    let full = auth.create_session(session("u", &["*"])).await.unwrap();
    let p = auth.authenticate_session(&k, &full.token).await.unwrap();
    assert_eq!(p.key_id, Some(ro_key.id));
    assert!(p.may_execute(Method::Delete, "/x", &[], &rules).is_err());
}

#[tokio::test]
async fn rate_limit_trips_per_session_and_per_key() {
    let db = TestDb::new().await;
    let slow = RateLimit {
        per_second: 0.001,
        burst: 2,
    };
    let auth = Auth::new(
        db.store.clone(),
        AuthConfig {
            key_rate: RateLimit {
                per_second: 0.001,
                burst: 5,
            },
            session_rate: slow,
            ..AuthConfig::default()
        },
    )
    .await
    .unwrap();
    let agent = KeyPrincipal::dev();
    let a = auth.create_session(session("a", &[])).await.unwrap();
    let b = auth.create_session(session("b", &[])).await.unwrap();
    let pa = auth.authenticate_session(&agent, &a.token).await.unwrap();
    let pb = auth.authenticate_session(&agent, &b.token).await.unwrap();
    auth.check_rate(&pa).await.unwrap();
    auth.check_rate(&pa).await.unwrap();
    let e = auth.check_rate(&pa).await.unwrap_err();
    assert_eq!(code_of(&e), "RATE_LIMITED");
    assert!(matches!(e, AuthError::RateLimited { retry_after_ms } if retry_after_ms > 1000));
    // Another session has its own bucket, but the key's bucket is shared (5 in all, 2 used).
    auth.check_rate(&pb).await.unwrap();
    auth.check_rate(&pb).await.unwrap();
    auth.check_rate(&agent.principal()).await.unwrap();
    assert_eq!(
        code(auth.check_rate(&agent.principal()).await),
        "RATE_LIMITED"
    );
}

#[tokio::test]
async fn guessing_secrets_is_throttled_without_locking_out_the_key() {
    let db = TestDb::new().await;
    let auth = Auth::new(
        db.store.clone(),
        AuthConfig {
            verify_rate: RateLimit {
                per_second: 0.001,
                burst: 10,
            },
            ..AuthConfig::default()
        },
    )
    .await
    .unwrap();
    let k = auth.create_key(key("agent", &["*"])).await.unwrap();
    auth.authenticate_key(&k.key).await.unwrap();

    // Wrong secrets for a known public id each cost an argon2 run, so only a few are tried:
    // ten verifications per public id at once (the real key used one).
    let mut codes = Vec::new();
    for i in 0..11 {
        let guess = format!("agk_{}_{}", k.public_id, format!("guess{i:02}").repeat(5));
        codes.push(code(auth.authenticate_key(&guess).await));
    }
    assert_eq!(codes[..9], ["UNAUTHORIZED"; 9]);
    assert_eq!(codes[9..], ["RATE_LIMITED"; 2]);

    // The real key still works, also after its cache entry is gone (a role change drops them).
    auth.set_role("any", &[]).await.unwrap();
    assert_eq!(
        auth.authenticate_key(&k.key).await.unwrap().key_id,
        Some(k.id)
    );
}

#[tokio::test]
async fn audit_rows_are_written_without_arguments() {
    let db = TestDb::new().await;
    let auth = auth(&db).await;
    let s = auth
        .create_session(session("user-9", &["*"]))
        .await
        .unwrap();
    let p = auth
        .authenticate_session(&KeyPrincipal::dev(), &s.token)
        .await
        .unwrap();

    let mut e = p.audit_entry("api_execute", Decision::Allowed);
    e.operation = Some("createInvoice".into());
    e.method = Some("POST".into());
    e.path = Some("/invoices/{id}".into());
    e.upstream_status = Some(201);
    e.duration_ms = 42;
    auth.record_audit(e).await;
    let mut denied = p.audit_entry("api_execute", Decision::Denied);
    denied.error_code = Some(apigate::types::Code::Forbidden);
    auth.record_audit(denied).await;

    // Tool calls only: creating the session wrote an admin row.
    let calls = |rows: Vec<apigate::store::AuditRow>| -> Vec<apigate::store::AuditRow> {
        rows.into_iter().filter(|r| r.tool != "admin").collect()
    };
    let rows = calls(db.store.audit_page(&Default::default(), 10).await.unwrap());
    assert_eq!(rows.len(), 2);
    let (d, a) = (&rows[0], &rows[1]);
    assert_eq!(a.session_id, Some(s.id));
    assert_eq!(a.user_id.as_deref(), Some("user-9"));
    assert_eq!(a.tool, "api_execute");
    assert_eq!(a.operation.as_deref(), Some("createInvoice"));
    assert_eq!(a.path.as_deref(), Some("/invoices/{id}"));
    assert_eq!(a.decision, "allowed");
    assert_eq!(a.upstream_status, Some(201));
    assert_eq!(a.duration_ms, 42);
    assert_eq!(d.decision, "denied");
    assert_eq!(d.error_code.as_deref(), Some("FORBIDDEN"));

    // A row written twice (a retry after a write whose answer was lost) stays one row, with
    // the time of the call.
    let mut twice = p.audit_entry("api_schema", Decision::Allowed);
    twice.at = chrono::Utc::now() - chrono::Duration::minutes(5);
    db.store.insert_audit(&twice).await.unwrap();
    db.store.insert_audit(&twice).await.unwrap();
    let rows = calls(db.store.audit_page(&Default::default(), 10).await.unwrap());
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0].tool, "api_schema");
    assert_eq!(rows[0].at.timestamp_micros(), twice.at.timestamp_micros());

    // A failing database never fails the call.
    db.store.close().await;
    auth.record_audit(p.audit_entry("api_discover", Decision::Allowed))
        .await;
}

#[tokio::test]
async fn two_instances_share_sessions_and_revocations() {
    let db = TestDb::new().await;
    let a = auth(&db).await;
    // The second instance has its own pool, as another replica would.
    let b = Auth::new(
        Store::connect(&db.url).await.unwrap(),
        AuthConfig::default(),
    )
    .await
    .unwrap();

    // A session created through A works on B.
    let s = a
        .create_session(session("u", &["apigate.discover"]))
        .await
        .unwrap();
    let agent = KeyPrincipal::dev();
    let p = b.authenticate_session(&agent, &s.token).await.unwrap();
    assert_eq!(p.session_id, Some(s.id));

    // A key verified (and cached) on B, revoked through A: refused by B within 1 s.
    let k = a.create_key(key("agent", &["*"])).await.unwrap();
    b.authenticate_key(&k.key).await.unwrap();
    b.authenticate_key(&k.key).await.unwrap();
    a.revoke_key(&k.id.to_string()).await.unwrap();
    let refused = eventually(Duration::from_secs(1), || async {
        b.authenticate_key(&k.key).await.is_err()
    })
    .await;
    assert!(refused, "B still accepted the key 1 s after A revoked it");
    assert_eq!(code(b.authenticate_key(&k.key).await), "UNAUTHORIZED");

    // The same for a session cached on B.
    a.revoke_session(&SessionRef::Id(s.id)).await.unwrap();
    let refused = eventually(Duration::from_secs(1), || async {
        b.authenticate_session(&agent, &s.token).await.is_err()
    })
    .await;
    assert!(
        refused,
        "B still accepted the session 1 s after A revoked it"
    );

    // A revocation made without any Auth (the CLI path) reaches both.
    let k2 = a.create_key(key("agent-2", &["*"])).await.unwrap();
    a.authenticate_key(&k2.key).await.unwrap();
    b.authenticate_key(&k2.key).await.unwrap();
    apigate::auth::Admin::new(Store::connect(&db.url).await.unwrap())
        .revoke_key(&k2.public_id)
        .await
        .unwrap();
    for inst in [&a, &b] {
        let refused = eventually(Duration::from_secs(1), || async {
            inst.authenticate_key(&k2.key).await.is_err()
        })
        .await;
        assert!(
            refused,
            "an instance still accepted a key revoked from the CLI path"
        );
    }
}

#[tokio::test]
async fn an_unreachable_database_is_named_and_reported() {
    let err = Store::connect("postgres://postgres@127.0.0.1:1/nothing")
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("127.0.0.1:1"), "{msg}");
    assert!(err.is_unavailable());

    // A database that goes away mid-flight: UNAVAILABLE, not UNAUTHORIZED.
    let db = TestDb::new().await;
    let auth = auth(&db).await;
    let k = auth.create_key(key("agent", &["*"])).await.unwrap();
    db.store.close().await;
    assert_eq!(code(auth.authenticate_key(&k.key).await), "UNAVAILABLE");
}

/// Prints the cost of tier-1 authentication with a cold cache (database + argon2id) and a warm
/// one. `cargo test --release --test it -- --ignored --nocapture auth_cost`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement; prints numbers"]
async fn auth_cost() {
    let db = TestDb::new().await;
    let auth = auth(&db).await;
    let mut keys = Vec::new();
    for i in 0..10 {
        keys.push(
            auth.create_key(key(&format!("k{i}"), &["*"]))
                .await
                .unwrap()
                .key,
        );
    }
    let t = Instant::now();
    for k in &keys {
        auth.authenticate_key(k).await.unwrap();
    }
    let cold = t.elapsed() / keys.len() as u32;

    let n = 10_000u32;
    let t = Instant::now();
    for _ in 0..n {
        auth.authenticate_key(&keys[0]).await.unwrap();
    }
    let warm = t.elapsed() / n;

    let s = auth.create_session(session("u", &["*"])).await.unwrap();
    let agent = KeyPrincipal::dev();
    let t = Instant::now();
    auth.authenticate_session(&agent, &s.token).await.unwrap();
    let session_cold = t.elapsed();
    let t = Instant::now();
    for _ in 0..n {
        auth.authenticate_session(&agent, &s.token).await.unwrap();
    }
    let session_warm = t.elapsed() / n;
    println!(
        "server key: cold (db + argon2id) {cold:?}/call, warm (cache) {warm:?}/call; \
         session: cold (db) {session_cold:?}, warm {session_warm:?}/call"
    );
}
