//! Issue 26, items 5 and 12: refusals, attacked for real against a production wiring (real
//! HTTP server, rmcp client, real Postgres).
//!
//! - 5: calls with a wrong session token skipped the key's rate limit (400 `UNAUTHORIZED` in
//!   0.66 s, 400 audit rows, no 429). The key's limit is now taken before the session check,
//!   and the refusals one key writes to the audit log are bounded.
//! - 12: admin API refusals (no key, wrong secret, an agent key) left no audit row. Each now
//!   leaves one, and an unauthenticated flood leaves a bounded number.

use std::time::Instant;

use apigate::auth::RateLimit;
use reqwest::StatusCode;
use serde_json::json;

use crate::db::TestDb;
use crate::production::{Options, Prod};
use crate::support::{Upstream, call};

/// The most rows the audit budget (20 at once, then 5 a second) lets one caller write in
/// `started.elapsed()`: each written refusal may follow one summary row.
fn bound(started: Instant) -> i64 {
    2 * (21 + 5 * started.elapsed().as_secs_f64().ceil() as i64)
}

async fn count(database_url: &str, filter: &str) -> i64 {
    let pool = sqlx::PgPool::connect(database_url).await.unwrap();
    let (n,): (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT count(*) FROM audit_log WHERE {filter}"
    )))
    .fetch_one(&pool)
    .await
    .unwrap();
    pool.close().await;
    n
}

#[tokio::test]
async fn wrong_session_tokens_spend_the_key_budget_and_a_bounded_audit() {
    let db = TestDb::new().await;
    let upstream = Upstream::start().await;
    // 100 calls at once, then one a second: however slow the machine, most of 400 calls
    // must meet the limit.
    let opts = Options {
        key_rate: RateLimit {
            per_second: 1.0,
            burst: 100,
        },
        ..Options::petstore()
    };
    let prod = Prod::start(&db.url, &upstream, opts).await;
    let key = prod.agent_key().await;
    let client = prod.client(&key, None).await;
    let wrong = json!({"query": "pets", "_sessionToken": format!("sess_{}", "0".repeat(32))});

    let mut codes = std::collections::BTreeMap::<String, usize>::new();
    let started = Instant::now();
    for _ in 0..400 {
        let (is_error, body) = call(&client, "api_discover", wrong.clone()).await;
        assert!(is_error, "{body}");
        *codes
            .entry(body["code"].as_str().unwrap_or("?").to_string())
            .or_default() += 1;
    }
    assert!(
        codes.get("RATE_LIMITED").is_some_and(|&n| n >= 200),
        "the key's rate limit did not apply to calls with a wrong session token: {codes:?}"
    );
    let rows = count(&db.url, "tool <> 'admin'").await;
    let most = bound(started);
    assert!(
        (20..=most).contains(&rows),
        "{rows} audit rows for 400 refused calls, at most {most} expected ({codes:?})"
    );

    // Once the budget has refilled, the next refusal is written after one row that sums up
    // the refusals not written one by one.
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let (_, body) = call(&client, "api_discover", wrong.clone()).await;
    assert_eq!(body["code"], "UNAUTHORIZED", "{body}");
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let summaries: Vec<(String,)> = sqlx::query_as(
        "SELECT operation FROM audit_log WHERE error_code = 'AUDIT_SUPPRESSED' \
         AND tool = 'api_discover'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    pool.close().await;
    assert!(
        !summaries.is_empty(),
        "no summary of the refusals not written"
    );
    let suppressed: i64 = summaries
        .iter()
        .map(|(s,)| s.split(' ').next().unwrap().parse::<i64>().unwrap())
        .sum();
    let written = count(
        &db.url,
        "tool = 'api_discover' AND error_code <> 'AUDIT_SUPPRESSED'",
    )
    .await;
    assert_eq!(
        suppressed + written,
        401,
        "every refusal is either written or counted: {summaries:?}"
    );
}

#[tokio::test]
async fn admin_api_refusals_are_audited_and_bounded() {
    let (db, _upstream, prod) = Prod::petstore().await;
    let agent = prod.agent_key().await;
    let public_id = agent.split('_').nth(1).unwrap().to_string();
    let wrong_secret = format!("agk_{public_id}_{}", "A".repeat(40));
    let http = reqwest::Client::new();
    let get_keys = |key: Option<&str>| {
        let mut req = http.get(prod.url("/admin/v1/keys"));
        if let Some(k) = key {
            req = req.header("x-api-key", k);
        }
        req.send()
    };

    assert_eq!(
        get_keys(None).await.unwrap().status(),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        get_keys(Some(&wrong_secret)).await.unwrap().status(),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        get_keys(Some(&agent)).await.unwrap().status(),
        StatusCode::FORBIDDEN
    );
    let refusals = "tool = 'admin' AND operation = 'admin.access' AND decision = 'denied' \
                    AND method = 'GET' AND path = '/admin/v1/keys'";
    for (kind, filter) in [
        (
            "no key",
            "actor IS NULL AND target IS NULL AND error_code = 'UNAUTHORIZED'".to_string(),
        ),
        (
            "wrong secret",
            format!("actor IS NULL AND target = 'key:{public_id}' AND error_code = 'UNAUTHORIZED'"),
        ),
        (
            "agent key",
            format!("actor = 'key:{public_id}' AND error_code = 'FORBIDDEN'"),
        ),
    ] {
        assert_eq!(
            count(&db.url, &format!("{refusals} AND {filter}")).await,
            1,
            "{kind}"
        );
    }
    // No part of the wrong secret is stored.
    assert_eq!(
        count(
            &db.url,
            "concat_ws(' ', actor, target, operation, path) LIKE '%AAAAAA%'"
        )
        .await,
        0
    );

    // A flood without a key.
    let started = Instant::now();
    for _ in 0..300 {
        assert_eq!(
            get_keys(None).await.unwrap().status(),
            StatusCode::UNAUTHORIZED
        );
    }
    // Two of the three rows above came from the same shared budget.
    let rows = count(&db.url, "operation = 'admin.access' AND actor IS NULL").await;
    let most = bound(started) + 2;
    assert!(
        (20..=most).contains(&rows),
        "{rows} audit rows for 302 unauthenticated refusals, at most {most} expected"
    );
}
