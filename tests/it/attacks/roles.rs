//! Issue 26, item 11: a limited admin rewrote roles it did not fully hold. `PUT /roles/super []`
//! emptied the role of the `*` key, which lost its admin access. Now an admin may only create
//! or change a role whose features, before and after the change, it fully holds (every key
//! and session holding the role holds them). Attacked over the admin HTTP API of a production
//! wiring with real Postgres.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use apigate::auth::NewKey;

use crate::db::TestDb;
use crate::production::{Options, Prod};
use crate::support::Upstream;

async fn admin(
    prod: &Prod,
    method: Method,
    path: &str,
    key: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut req = reqwest::Client::new()
        .request(method, prod.url(&format!("/admin/v1{path}")))
        .header("x-api-key", key);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status();
    (status, resp.json().await.unwrap_or(Value::Null))
}

async fn key(prod: &Prod, features: &[&str], roles: &[&str]) -> String {
    prod.auth
        .create_key(NewKey {
            name: "k".into(),
            features: features.iter().map(|f| f.to_string()).collect(),
            roles: roles.iter().map(|r| r.to_string()).collect(),
            ..NewKey::default()
        })
        .await
        .unwrap()
        .key
}

async fn role_features(prod: &Prod, name: &str) -> Vec<String> {
    prod.auth
        .list_roles()
        .await
        .unwrap()
        .into_iter()
        .find(|r| r.name == name)
        .map(|r| r.features)
        .unwrap_or_default()
}

#[tokio::test]
async fn a_limited_admin_cannot_rewrite_roles_it_does_not_fully_hold() {
    let db = TestDb::new().await;
    let upstream = Upstream::start().await;
    let prod = Prod::start(&db.url, &upstream, Options::petstore()).await;
    prod.auth.set_role("super", &["*".into()]).await.unwrap();
    prod.auth
        .set_role("clerk", &["pets.read".into(), "billing.read".into()])
        .await
        .unwrap();
    prod.auth
        .set_role("viewer", &["pets.read".into()])
        .await
        .unwrap();
    let root = key(&prod, &[], &["super"]).await;
    let limited = key(&prod, &["apigate.admin", "pets.*"], &[]).await;

    // Emptying (or narrowing) a role that holds what the admin lacks takes it from others.
    for (role, features) in [
        ("super", json!([])),
        ("super", json!(["pets.read"])),
        ("clerk", json!(["pets.read"])),
    ] {
        let (st, body) = admin(
            &prod,
            Method::PUT,
            &format!("/roles/{role}"),
            &limited,
            Some(json!({"features": features})),
        )
        .await;
        assert_eq!(
            st,
            StatusCode::FORBIDDEN,
            "PUT /roles/{role} {features}: {body}"
        );
        assert_eq!(body["code"], "FORBIDDEN", "{body}");
    }
    // Widening one with a feature the admin lacks hands it to every member.
    let (st, body) = admin(
        &prod,
        Method::PUT,
        "/roles/viewer",
        &limited,
        Some(json!({"features": ["pets.read", "billing.*"]})),
    )
    .await;
    assert_eq!(st, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["missing"], "billing.*", "{body}");

    assert_eq!(role_features(&prod, "super").await, ["*"]);
    assert_eq!(
        role_features(&prod, "clerk").await,
        ["pets.read", "billing.read"]
    );
    assert_eq!(role_features(&prod, "viewer").await, ["pets.read"]);
    // The `*` key keeps its admin access.
    let (st, _) = admin(&prod, Method::GET, "/keys", &root, None).await;
    assert_eq!(st, StatusCode::OK);

    // Within what it holds, before and after, it may change and create roles.
    let (st, body) = admin(
        &prod,
        Method::PUT,
        "/roles/viewer",
        &limited,
        Some(json!({"features": ["pets.read", "pets.photos.*"]})),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{body}");
    let (st, body) = admin(
        &prod,
        Method::PUT,
        "/roles/pets-admin",
        &limited,
        Some(json!({"features": ["pets.*"]})),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{body}");

    // The refusals are audited.
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let (refused,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM audit_log WHERE operation = 'role.set' AND decision = 'denied'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    pool.close().await;
    assert_eq!(refused, 4);
}
