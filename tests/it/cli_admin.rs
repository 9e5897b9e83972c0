//! The admin CLI commands (`keys`, `sessions`, `roles`, `migrate`) against a real database.

use apigate::auth::{Admin, Auth, AuthConfig, KeyPrincipal};
use apigate::cli::admin::{
    DbArgs, KeysCommand, MigrateArgs, RolesCommand, SessionsCommand, keys, roles, run_migrate,
    sessions,
};
use serde_json::Value;

use crate::db::TestDb;

#[tokio::test]
async fn cli_commands_print_json_and_tables() {
    let db = TestDb::new().await;
    // Migrating an up-to-date database again is a no-op.
    run_migrate(MigrateArgs {
        db: DbArgs {
            database_url: Some(db.url.clone()),
        },
    })
    .await
    .unwrap();
    let admin = Admin::new(db.store.clone());

    let out = roles(
        &admin,
        RolesCommand::Set {
            name: "viewer".into(),
            features: vec!["apigate.discover".into(), "apigate.schema".into()],
            json: true,
        },
    )
    .await
    .unwrap();
    let role: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(role["name"], "viewer");
    let out = roles(&admin, RolesCommand::List { json: false })
        .await
        .unwrap();
    assert!(out.starts_with("NAME"), "{out}");
    assert!(out.contains("apigate.discover,apigate.schema"), "{out}");

    let out = keys(
        &admin,
        KeysCommand::Create {
            name: "ci".into(),
            features: vec!["apigate.discover".into()],
            roles: vec!["viewer".into()],
            read_only: true,
            json: true,
        },
    )
    .await
    .unwrap();
    let created: Value = serde_json::from_str(&out).unwrap();
    let full_key = created["key"].as_str().unwrap().to_string();
    for field in [
        "id",
        "key",
        "name",
        "publicId",
        "features",
        "roles",
        "readOnly",
        "createdAt",
    ] {
        assert!(created.get(field).is_some(), "{field} missing from {out}");
    }
    assert_eq!(created["readOnly"], true);

    // The key works, with its role's features.
    let auth = Auth::new(db.store.clone(), AuthConfig::default())
        .await
        .unwrap();
    let k = auth.authenticate_key(&full_key).await.unwrap();
    assert!(k.features.allows("apigate.schema"));

    let table = keys(&admin, KeysCommand::List { json: false })
        .await
        .unwrap();
    assert!(table.contains("ci") && table.contains("active"), "{table}");
    assert!(
        !table.contains(&full_key[13..]),
        "the secret leaked into the list"
    );
    let listed: Value = serde_json::from_str(
        &keys(&admin, KeysCommand::List { json: true })
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(listed.as_array().unwrap().len(), 1);
    assert_eq!(listed[0]["createdBy"], "cli");

    let human = keys(
        &admin,
        KeysCommand::Create {
            name: "human".into(),
            features: vec![],
            roles: vec![],
            read_only: false,
            json: false,
        },
    )
    .await
    .unwrap();
    assert!(
        human.contains("agk_") && human.contains("shown only now"),
        "{human}"
    );

    let out = keys(
        &admin,
        KeysCommand::Revoke {
            id: created["id"].as_str().unwrap().into(),
            json: false,
        },
    )
    .await
    .unwrap();
    assert!(out.starts_with("Revoked server key"), "{out}");
    // The CLI has no cache to clear: the running instance learns of it by NOTIFY.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    while auth.authenticate_key(&full_key).await.is_ok() {
        assert!(
            std::time::Instant::now() < deadline,
            "revocation not seen within 1 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    let out = sessions(
        &admin,
        SessionsCommand::Create {
            user: "u-7".into(),
            tenant: Some("t".into()),
            organization: None,
            roles: vec!["viewer".into()],
            features: vec![],
            read_only: false,
            ttl_minutes: Some(15),
            upstream_headers: vec![],
            api: None,
            secret_key: Default::default(),
            json: true,
        },
    )
    .await
    .unwrap();
    let s: Value = serde_json::from_str(&out).unwrap();
    for field in ["id", "token", "expiresAt", "userId"] {
        assert!(s.get(field).is_some(), "{field} missing from {out}");
    }
    let token = s["token"].as_str().unwrap().to_string();
    let p = auth
        .authenticate_session(&KeyPrincipal::dev(), &token)
        .await
        .unwrap();
    assert_eq!(p.user_id.as_deref(), Some("u-7"));

    let out = sessions(
        &admin,
        SessionsCommand::Revoke {
            token_or_id: token.clone(),
            json: true,
        },
    )
    .await
    .unwrap();
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["id"], s["id"]);
    let err = sessions(
        &admin,
        SessionsCommand::Revoke {
            token_or_id: "nope".into(),
            json: false,
        },
    )
    .await
    .unwrap_err();
    assert!(
        format!("{err:#}").contains("neither a session token"),
        "{err:#}"
    );

    // Errors carry the cause.
    let err = keys(
        &admin,
        KeysCommand::Create {
            name: "x".into(),
            features: vec![],
            roles: vec!["ghost".into()],
            read_only: false,
            json: false,
        },
    )
    .await
    .unwrap_err();
    assert!(
        format!("{err:#}").contains("unknown role(s): ghost"),
        "{err:#}"
    );
}

#[tokio::test]
async fn cli_without_database_url_says_what_to_do() {
    let err = run_migrate(MigrateArgs {
        db: DbArgs { database_url: None },
    })
    .await
    .unwrap_err();
    assert!(
        format!("{err:#}").contains("DATABASE_URL is not set"),
        "{err:#}"
    );
}
