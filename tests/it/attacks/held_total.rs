//! Issue 41, item 14: held responses in Postgres had a bound per owner and none in total, and
//! every key, session and signed-in person is an owner: many owners added up without limit.
//! Attacked for real against a production wiring (real HTTP server, rmcp clients, real
//! Postgres, a real axum upstream answering in bytes): ten owners each hold what their own
//! bound allows, and the table stays within `--max-held-total-bytes`, anyone's oldest dropped
//! first.

use apigate::auth::NewSession;

use super::people::{download, downloads_upstream};
use crate::db::TestDb;
use crate::production::{Options, Prod};
use crate::support::{engine_args, key_holding, resource_uris, session_token, spec_path};

/// What one download holds (`people::downloads_upstream`).
const ONE: usize = 4096;

#[tokio::test]
async fn many_owners_together_stay_within_the_total_bound() {
    let db = TestDb::new().await;
    let (upstream, _) = downloads_upstream().await;
    let mut args = engine_args(&spec_path("downloads.json"), Some(upstream));
    args.binary.max_held_bytes = 2 * ONE;
    args.binary.max_held_total_bytes = 4 * ONE;
    let prod = Prod::start_with(&db.url, args, Options::stateless()).await;
    let mut last = None;
    for n in 0..10 {
        let key = key_holding(&prod.auth, &format!("agent-{n}"), &["apigate.*"]).await;
        let session = NewSession {
            user_id: format!("u-{n}"),
            features: vec!["apigate.*".into()],
            ..NewSession::default()
        };
        let token = session_token(&prod.auth, session).await;
        let client = prod.client(&key, Some(&token)).await;
        for i in 0..2 {
            download(&client, &format!("owner{n}-{i}")).await;
        }
        last = Some((client, key, token));
    }
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let (total, rows): (i64, i64) =
        sqlx::query_as("SELECT coalesce(sum(size), 0)::bigint, count(*) FROM held_responses")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert!(
        total <= (4 * ONE) as i64,
        "ten owners hold {total} bytes in {rows} rows, over the 4 x {ONE} total"
    );
    // The newest stay: the last owner still reads both of its own.
    let (client, ..) = last.unwrap();
    assert_eq!(resource_uris(&client).await.len(), 2);
}
