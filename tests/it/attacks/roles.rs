//! Issue 26, item 11: a limited admin rewrote roles it did not fully hold. `PUT /roles/super []`
//! emptied the role of the `*` key, which lost its admin access. Now an admin may only create
//! or change a role whose features, before and after the change, it fully holds (every key
//! and session holding the role holds them). Attacked over the admin HTTP API of a production
//! wiring with real Postgres.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use apigate::auth::NewKey;

use crate::production::Prod;
use crate::support::owned;

async fn key(prod: &Prod, features: &[&str], roles: &[&str]) -> String {
    let key = NewKey {
        name: "k".into(),
        features: owned(features),
        roles: owned(roles),
        ..NewKey::default()
    };
    prod.auth.create_key(key).await.unwrap().key
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
    let (db, _upstream, prod) = Prod::petstore().await;
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

    let put_role = |role: &str, features: Value, want: u16| {
        let (prod, limited, path) = (&prod, &limited, format!("/roles/{role}"));
        let body = Some(json!({"features": features}));
        async move { prod.admin_ok(Method::PUT, &path, limited, body, want).await }
    };
    // Emptying (or narrowing) a role that holds what the admin lacks takes it from others;
    // widening one with a feature the admin lacks hands it to every member.
    for (role, features, missing) in [
        ("super", json!([]), None),
        ("super", json!(["pets.read"]), None),
        ("clerk", json!(["pets.read"]), None),
        (
            "viewer",
            json!(["pets.read", "billing.*"]),
            Some("billing.*"),
        ),
    ] {
        let body = put_role(role, features, 403).await;
        assert_eq!(body["code"], "FORBIDDEN", "{role}: {body}");
        if let Some(missing) = missing {
            assert_eq!(body["missing"], missing, "{body}");
        }
    }

    assert_eq!(role_features(&prod, "super").await, ["*"]);
    assert_eq!(
        role_features(&prod, "clerk").await,
        ["pets.read", "billing.read"]
    );
    assert_eq!(role_features(&prod, "viewer").await, ["pets.read"]);
    // The `*` key keeps its admin access.
    let (st, _) = prod.admin(Method::GET, "/keys", &root, None).await;
    assert_eq!(st, StatusCode::OK);

    // Within what it holds, before and after, it may change and create roles.
    put_role("viewer", json!(["pets.read", "pets.photos.*"]), 200).await;
    put_role("pets-admin", json!(["pets.*"]), 200).await;

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
