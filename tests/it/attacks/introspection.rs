//! Issue 41, item 12: a flood of made-up opaque bearer tokens against a slow issuer, attacked
//! for real: `apigate serve` (the binary, Postgres) trusting the real `oidc-provider`, whose
//! introspection endpoint sits behind a proxy that holds every made-up token until the test
//! lets it go (a slow issuer; apigate gives up on each after its 5 s fetch timeout) and passes
//! the rest through at once. Before the fix the flood filled the 16
//! introspection slots and a valid opaque token waited its 5 s and got 503.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::db::TestDb;
use crate::signin::{initialize, introspection_flags, serve_with};
use crate::support::{Upstream, poll, serve_app};

/// What the proxy saw: introspection requests of made-up tokens in flight now, and in all.
#[derive(Default)]
struct Seen {
    now: AtomicUsize,
    total: AtomicUsize,
}

/// The proxy in front of the provider's `/token/introspection` (set in `target` once the
/// provider runs): made-up tokens (`made-up-…`) wait until `release` is cancelled, then
/// everything is passed on as it came (the client's Basic credentials too).
async fn slow_issuer(
    target: Arc<OnceLock<String>>,
    seen: Arc<Seen>,
    release: CancellationToken,
) -> std::net::SocketAddr {
    let app = axum::Router::new().route(
        "/introspect",
        axum::routing::post(
            move |headers: axum::http::HeaderMap, body: axum::body::Bytes| {
                let (target, seen, release) = (target.clone(), seen.clone(), release.clone());
                async move {
                    let introspection = target.get().cloned().unwrap_or_default();
                    struct InFlight(Arc<Seen>);
                    impl Drop for InFlight {
                        fn drop(&mut self) {
                            self.0.now.fetch_sub(1, Ordering::SeqCst);
                        }
                    }
                    let made_up = url::form_urlencoded::parse(&body)
                        .any(|(k, v)| k == "token" && v.starts_with("made-up-"));
                    let _in_flight = made_up.then(|| {
                        seen.now.fetch_add(1, Ordering::SeqCst);
                        seen.total.fetch_add(1, Ordering::SeqCst);
                        InFlight(seen.clone())
                    });
                    if made_up {
                        release.cancelled().await;
                    }
                    let mut forward = reqwest::Client::new().post(&introspection).body(body);
                    for name in ["authorization", "content-type"] {
                        if let Some(v) = headers.get(name) {
                            forward = forward.header(name, v.as_bytes());
                        }
                    }
                    match forward.send().await {
                        Ok(r) => {
                            let status = r.status().as_u16();
                            let text = r.text().await.unwrap_or_default();
                            (
                                axum::http::StatusCode::from_u16(status)
                                    .unwrap_or(axum::http::StatusCode::BAD_GATEWAY),
                                [(axum::http::header::CONTENT_TYPE, "application/json")],
                                text,
                            )
                        }
                        Err(e) => (
                            axum::http::StatusCode::BAD_GATEWAY,
                            [(axum::http::header::CONTENT_TYPE, "text/plain")],
                            e.to_string(),
                        ),
                    }
                }
            },
        ),
    );
    serve_app(app).await
}

/// A client whose requests come from the loopback address `from`.
fn client_from(from: IpAddr) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(from)
        .build()
        .unwrap()
}

/// `initialize` with `Authorization: Bearer TOKEN` through `client`: status (0 when no answer
/// came).
async fn initialize_with(client: &reqwest::Client, url: &str, token: &str) -> u16 {
    let response = client
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("authorization", format!("Bearer {token}"))
        .json(
            &serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "flood", "version": "1"}}}),
        )
        .send()
        .await;
    response.map(|r| r.status().as_u16()).unwrap_or(0)
}

/// 120 made-up opaque tokens from 30 loopback addresses hold the slow issuer while a person
/// whose opaque token was active before signs in again (past the 30 s its active answer is
/// reused): the person gets through, and the flood is refused (401, 429 or 503), never let in.
///
/// The issuer holds the made-up tokens until the person has had an answer, so every slot
/// unknown tokens may take is held when the person comes, however slowly this machine runs.
#[tokio::test]
async fn a_flood_of_made_up_opaque_tokens_does_not_lock_out_a_known_token() {
    let db = TestDb::new().await;
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let secret_file = dir.path().join("introspection.secret");
    std::fs::write(&secret_file, "apigate-rs-secret\n").unwrap();
    let seen = Arc::new(Seen::default());
    let target = Arc::new(OnceLock::new());
    let release = CancellationToken::new();
    // Let the held tokens go however the test ends.
    let _release = release.clone().drop_guard();
    let proxy = slow_issuer(target.clone(), seen.clone(), release.clone()).await;
    let (idp, mut proc, url) = serve_with(&db, &upstream, |_| {
        introspection_flags(&format!("http://{proxy}/introspect"), &secret_file)
    })
    .await;
    target
        .set(format!("{}/token/introspection", idp.issuer))
        .unwrap();

    let opaque = idp
        .sign_in("apigate-op", "olga", "apigate:write", &url)
        .await;
    assert_ne!(opaque.split('.').count(), 3, "not opaque: {opaque}");
    let bearer = format!("Bearer {opaque}");
    let (status, _, body) = initialize(&url, &[("authorization", &bearer)]).await;
    assert_eq!(status, 200, "{body}");
    // Past the 30 s an active answer is reused: the next use asks the issuer again.
    tokio::time::sleep(Duration::from_secs(31)).await;

    // The clients first: building 120 of them while the flood runs would spread it out.
    let sources: Vec<_> = (0..30u8)
        .map(|i| client_from(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2 + i))))
        .collect();
    let flood: Vec<_> = (0..120)
        .map(|i| {
            let (url, client) = (url.clone(), sources[i % sources.len()].clone());
            tokio::spawn(async move {
                initialize_with(&client, &url, &format!("made-up-token-{i:04}-0123456789")).await
            })
        })
        .collect();
    // Every slot an unknown token may take is held at the issuer (16 in flight, 4 of them
    // kept for tokens active before).
    poll(
        "12 made-up tokens at the issuer at once",
        Duration::from_secs(30),
        Duration::from_millis(20),
        || {
            let seen = seen.clone();
            async move { (seen.now.load(Ordering::SeqCst) >= 12).then_some(()) }
        },
    )
    .await;
    let (status, _, body) = initialize(&url, &[("authorization", &bearer)]).await;
    let (held, sent) = (
        seen.now.load(Ordering::SeqCst),
        seen.total.load(Ordering::SeqCst),
    );
    release.cancel();
    assert_eq!(
        status,
        200,
        "a known token during the flood ({held} made-up tokens at the issuer, {sent} sent): {body}\n{}",
        proc.log()
    );
    let mut statuses = Vec::new();
    for call in flood {
        statuses.push(call.await.unwrap());
    }
    assert!(
        statuses.iter().all(|s| [401, 429, 503].contains(s)),
        "{statuses:?}\n{}",
        proc.log()
    );
    assert!(proc.terminate().await, "{}", proc.log());
}
