//! Limits that replicas share through the one Postgres they use (issue 44): two `Auth`s, two
//! monitor gates and two lease counters on one real database stand for two replicas. Before
//! the limits moved to Postgres each of these admitted its own budget (twice the limit); the
//! database going away refuses (`--limits-unavailable closed`) or falls back to each
//! replica's own limits (`open`). The same across three real processes behind a load
//! balancer: `replicas.rs`.

use std::time::Duration;

use apigate::auth::{
    Auth, AuthConfig, KeyPrincipal, LimitsUnavailable, NewSession, NoLease, RateLimit,
};
use apigate::monitor::{Monitor, MonitorConfig, ToolCall};
use apigate::store::Store;
use apigate::tools::Tool;
use axum::http::StatusCode;
use serde_json::json;

use crate::db::TestDb;
use crate::monitor::{Behavior, Received, test_monitor};
use crate::support::CutProxy;

/// A bucket that refills so slowly that no call of a test is given back.
fn slow(burst: u32) -> RateLimit {
    RateLimit {
        per_second: 0.001,
        burst,
    }
}

async fn replica(
    store: Store,
    key: RateLimit,
    session: RateLimit,
    down: LimitsUnavailable,
) -> Auth {
    Auth::new(
        store,
        AuthConfig {
            key_rate: key,
            session_rate: session,
            limits_unavailable: down,
            ..AuthConfig::default()
        },
    )
    .await
    .unwrap()
}

#[tokio::test]
async fn a_key_limit_holds_across_replicas() {
    let db = TestDb::new().await;
    let off = RateLimit::OFF;
    let closed = LimitsUnavailable::Closed;
    let a = replica(db.store.clone(), slow(5), off, closed).await;
    let b = replica(Store::connect(&db.url).await.unwrap(), slow(5), off, closed).await;
    let key = KeyPrincipal::dev().principal();
    let mut admitted = 0;
    for i in 0..20 {
        let replica = if i % 2 == 0 { &a } else { &b };
        admitted += usize::from(replica.check_rate(&key).await.is_ok());
    }
    // Each process alone admitted 5: 10 in all.
    assert_eq!(
        admitted, 5,
        "a key limited to 5 calls got {admitted} through two replicas"
    );
    let refused = a.check_rate(&key).await.unwrap_err();
    assert!(
        matches!(refused, apigate::auth::AuthError::RateLimited { retry_after_ms } if retry_after_ms > 100_000),
        "{refused:?}"
    );
}

#[tokio::test]
async fn a_session_limit_holds_across_replicas_and_spares_the_key() {
    let db = TestDb::new().await;
    let closed = LimitsUnavailable::Closed;
    let a = replica(db.store.clone(), slow(100), slow(3), closed).await;
    let b = replica(
        Store::connect(&db.url).await.unwrap(),
        slow(100),
        slow(3),
        closed,
    )
    .await;
    let agent = KeyPrincipal::dev();
    let created = a
        .create_session(NewSession {
            user_id: "ivy".into(),
            ..NewSession::default()
        })
        .await
        .unwrap();
    let on_a = a
        .authenticate_session(&agent, &created.token)
        .await
        .unwrap();
    let on_b = b
        .authenticate_session(&agent, &created.token)
        .await
        .unwrap();
    let mut admitted = 0;
    for i in 0..12 {
        let (replica, session) = if i % 2 == 0 { (&a, &on_a) } else { (&b, &on_b) };
        admitted += usize::from(replica.check_rate(session).await.is_ok());
    }
    assert_eq!(
        admitted, 3,
        "a session limited to 3 calls got {admitted} through two replicas"
    );
    // The refused calls took nothing from the key's bucket: 97 remain for everyone else.
    let key = agent.principal();
    let mut key_calls = 0;
    while key_calls < 200 && b.check_rate(&key).await.is_ok() {
        key_calls += 1;
    }
    assert_eq!(key_calls, 97);
}

#[tokio::test]
async fn without_postgres_closed_refuses_and_open_limits_each_replica_alone() {
    let db = TestDb::new().await;
    let (proxy, url) = CutProxy::for_database(&db.url).await;
    let off = RateLimit::OFF;
    let closed = replica(
        Store::connect(&url).await.unwrap(),
        slow(2),
        off,
        LimitsUnavailable::Closed,
    )
    .await;
    let open = replica(
        Store::connect(&url).await.unwrap(),
        slow(2),
        off,
        LimitsUnavailable::Open,
    )
    .await;
    let key = KeyPrincipal::dev().principal();
    closed.check_rate(&key).await.unwrap();
    proxy.refuse();
    let e = closed.check_rate(&key).await.unwrap_err();
    assert!(
        matches!(e, apigate::auth::AuthError::LimitsUnavailable),
        "{e:?}"
    );
    assert!(e.to_string().contains("--limits-unavailable closed"), "{e}");
    // Open: this replica's own bucket of 2 (nothing was taken from it while Postgres answered).
    open.check_rate(&key).await.unwrap();
    open.check_rate(&key).await.unwrap();
    let e = open.check_rate(&key).await.unwrap_err();
    assert!(
        matches!(e, apigate::auth::AuthError::RateLimited { .. }),
        "{e:?}"
    );
    proxy.restore();
    // Back: the shared bucket holds one call (one was taken before the cut) — a retry loop,
    // as the pool reconnects.
    let mut back = None;
    for _ in 0..100 {
        match closed.check_rate(&key).await {
            Err(apigate::auth::AuthError::LimitsUnavailable) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            other => {
                back = Some(other);
                break;
            }
        }
    }
    assert!(matches!(back, Some(Ok(()))), "{back:?}");
}

#[tokio::test]
async fn a_session_cap_holds_across_replicas_and_a_lease_ends_with_its_session() {
    let db = TestDb::new().await;
    let closed = LimitsUnavailable::Closed;
    let off = RateLimit::OFF;
    let a = replica(db.store.clone(), off, off, closed).await;
    let b = replica(Store::connect(&db.url).await.unwrap(), off, off, closed).await;
    let first = a.leases().take("key-fp", 2).await.unwrap();
    let _second = b.leases().take("key-fp", 2).await.unwrap();
    assert!(matches!(
        a.leases().take("key-fp", 2).await,
        Err(NoLease::Full(2))
    ));
    assert!(matches!(
        b.leases().take("key-fp", 2).await,
        Err(NoLease::Full(2))
    ));
    // Another key has its own count.
    let _other = b.leases().take("other-fp", 2).await.unwrap();
    // A session that ends frees its place (the lease is deleted in the background).
    drop(first);
    let mut again = None;
    for _ in 0..100 {
        if let Ok(lease) = b.leases().take("key-fp", 2).await {
            again = Some(lease);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(again.is_some());
}

#[tokio::test]
async fn a_lease_that_ran_out_in_an_outage_is_recorded_again() {
    // The red team's break: Postgres away for longer than a lease lives, the leases of live
    // sessions ran out, and the key opened a cap's worth more on top of them.
    let db = TestDb::new().await;
    let (proxy, url) = CutProxy::for_database(&db.url).await;
    let off = RateLimit::OFF;
    let open = LimitsUnavailable::Open;
    let here = replica(Store::connect(&url).await.unwrap(), off, off, open).await;
    let there = replica(db.store.clone(), off, off, open).await;
    let renewal = tokio_util::sync::CancellationToken::new();
    tokio::spawn(here.leases().renew(renewal.clone()));
    let held = here.leases().take("fp", 2).await.unwrap();
    proxy.refuse();
    // Admitted by this replica alone meanwhile (open): kept, to be recorded.
    let Err(NoLease::Local(alone)) = here.leases().take("fp", 2).await else {
        panic!("Postgres is away: the lease is local");
    };
    // The outage outlived the leases: they ran out, and the purge deleted them.
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    sqlx::query("DELETE FROM session_leases")
        .execute(&pool)
        .await
        .unwrap();
    proxy.restore();
    // Within seconds, not the 20 s renewal period: the replica tries every second while
    // Postgres fails (here its take failed).
    let mut full = false;
    for _ in 0..100 {
        if matches!(there.leases().take("fp", 2).await, Err(NoLease::Full(2))) {
            full = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        full,
        "the two live sessions count again once Postgres is back"
    );
    renewal.cancel();
    drop((held, alone));
}

#[tokio::test]
async fn wrong_session_tokens_are_refused_once_the_key_spent_its_budget_on_another_replica() {
    // The red team's break: replica A had seen none of the key's calls, so its own bucket
    // was full and every call with a wrong token got UNAUTHORIZED at any rate, though the
    // key's shared budget was spent.
    use crate::production::{Options, Prod};
    use crate::support::{Upstream, call};
    let db = TestDb::new().await;
    let upstream = Upstream::start().await;
    let options = || Options {
        key_rate: slow(4),
        ..Options::stateless()
    };
    let a = Prod::start(&db.url, &upstream, options()).await;
    let b = Prod::start(&db.url, &upstream, options()).await;
    let (spender, key, _) = b.agent_client(&["apigate.*"]).await;
    // The key's four calls, spent through B (its `initialize` took one).
    let mut spent = 0;
    while spent < 10
        && !call(&spender, "api_discover", json!({"query": "pets"}))
            .await
            .0
    {
        spent += 1;
    }
    assert!(spent < 4, "{spent}");
    // Stateless calls with no handshake (an `initialize` would be refused: the key is spent).
    let guess = || async {
        let response = reqwest::Client::new()
            .post(format!("http://{}/mcp", a.addr))
            .header("x-api-key", &key)
            .header("x-session-token", "sess_00000000000000000000000000000000")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "api_discover", "arguments": {"query": "pets"}}}))
            .send()
            .await
            .unwrap();
        response.text().await.unwrap()
    };
    // At once, as an attacker would send them: each sees the verdict only if the key's
    // budget let it try.
    let guesses = futures::future::join_all((0..40).map(|_| guess())).await;
    let mut unauthorized = 0;
    for body in guesses {
        if body.contains("UNAUTHORIZED") {
            unauthorized += 1;
        } else {
            assert!(body.contains("RATE_LIMITED"), "{body}");
        }
    }
    assert_eq!(
        unauthorized, 0,
        "{unauthorized} of 40 guesses answered past the key's budget"
    );
}

#[tokio::test]
async fn leases_of_many_replicas_at_once_never_pass_the_cap() {
    let db = TestDb::new().await;
    let off = RateLimit::OFF;
    let mut replicas = Vec::new();
    for _ in 0..4 {
        let store = Store::connect(&db.url).await.unwrap();
        replicas.push(replica(store, off, off, LimitsUnavailable::Closed).await);
    }
    let mut tasks = Vec::new();
    for i in 0..40 {
        let leases = replicas[i % 4].leases();
        tasks.push(tokio::spawn(async move { leases.take("crowded", 7).await }));
    }
    let mut held = Vec::new();
    for t in tasks {
        if let Ok(lease) = t.await.unwrap() {
            held.push(lease);
        }
    }
    assert_eq!(held.len(), 7);
}

/// A monitor that records every event and allows every call.
async fn recording_monitor() -> (String, Received) {
    test_monitor(Behavior::Answer(StatusCode::OK, r#"{"block": false}"#)).await
}

#[tokio::test]
async fn a_monitor_session_is_counted_once_across_replicas() {
    let db = TestDb::new().await;
    let (url, received) = recording_monitor().await;
    let gates: Vec<Monitor> = (0..3)
        .map(|_| Monitor::new(MonitorConfig::new(url.clone())).unwrap())
        .collect();
    for gate in &gates {
        gate.share_stats(db.store.clone(), true);
    }
    let args = json!({"query": "pets"});
    for i in 0..6 {
        let call_id = format!("call-{i}");
        let tool = if i == 5 { Tool::Schema } else { Tool::Discover };
        let call = ToolCall {
            session_id: "key:abc/session:1",
            call_id: &call_id,
            tool,
            args: &args,
            operation: None,
            preview: None,
        };
        gates[i % 3].pre_execute(&call).await.unwrap();
    }
    let events = received.lock().unwrap().clone();
    let counts: Vec<u64> = events
        .iter()
        .filter(|e| e["type"] == "tool.pre_execute")
        .map(|e| e["sessionStats"]["toolCallCount"].as_u64().unwrap())
        .collect();
    // Each replica alone counted 1, 1, 1, 2, 2, 2: a rule `max_tool_calls = 3` never matched.
    assert_eq!(counts, [1, 2, 3, 4, 5, 6]);
    let last = events
        .iter()
        .rfind(|e| e["type"] == "tool.pre_execute")
        .unwrap();
    assert_eq!(last["sessionStats"]["uniqueTools"], 2);
    let started = events
        .iter()
        .filter(|e| e["type"] == "session.started")
        .count();
    assert_eq!(started, 1, "{events:#?}");
    // The session ends once, with the statistics of all three.
    gates[1].session_idle("key:abc/session:1");
    let mut idle = None;
    for _ in 0..100 {
        idle = received
            .lock()
            .unwrap()
            .iter()
            .find(|e| e["type"] == "session.idle")
            .cloned();
        if idle.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let idle = idle.expect("session.idle was sent");
    assert_eq!(idle["finalStats"]["totalToolCalls"], 6);
    assert_eq!(
        idle["finalStats"]["uniqueTools"],
        json!(["api_discover", "api_schema"])
    );
}

#[tokio::test]
async fn a_monitor_gate_blocks_when_its_shared_statistics_cannot_be_counted() {
    let db = TestDb::new().await;
    let (proxy, db_url) = CutProxy::for_database(&db.url).await;
    let (url, received) = recording_monitor().await;
    let gate = Monitor::new(MonitorConfig::new(url)).unwrap();
    gate.share_stats(Store::connect(&db_url).await.unwrap(), true);
    proxy.refuse();
    let args = json!({});
    let call = ToolCall {
        session_id: "s",
        call_id: "c",
        tool: Tool::Discover,
        args: &args,
        operation: None,
        preview: None,
    };
    let blocked = gate.pre_execute(&call).await.unwrap_err();
    assert_eq!(blocked.cause, apigate::monitor::BlockCause::Statistics);
    assert!(
        blocked.reason.contains("--limits-unavailable closed"),
        "{}",
        blocked.reason
    );
    assert!(received.lock().unwrap().is_empty());
}
