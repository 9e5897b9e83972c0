//! Issue 41, items 4, 5 and 6: signed-in people stay apart, attacked for real against
//! `apigate serve` (real Postgres, a real axum upstream answering in bytes) and the real
//! `oidc-provider` of `signin.rs`, people signing in through its login form with the subjects
//! the attack needs (its development login takes any name as the account's `sub`).
//!
//! - 4: the `sub` was escaped and cut to 200 characters before it became the identity: two
//!   subjects over 200 characters with a common prefix, and a `sub` with a real TAB and one
//!   with a backslash and a `t`, were one person (each read the other's held responses, used
//!   the other's MCP session, received the other's stored upstream token). Now the identity
//!   is the exact issuer and `sub`, and a `sub` over 255 bytes is refused (401), never cut.
//! - 5: bearer calls first spent a token from a bucket of the OAuth client, shared by every
//!   person of it: one person hammering made another's calls `RATE_LIMITED`. Now a call takes
//!   from its person's bucket (and a key's, with `--auth both`) at once or from none. With
//!   `--auth both`, a person opening MCP sessions over and over spent the shared key's bucket
//!   alone: now the person's bucket too, at once.
//! - 6: with `--auth both` and one agent key, held responses were owned by the key: people
//!   read each other's downloads. Now the person owns them.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, header};
use axum::response::IntoResponse;
use rmcp::model::{CallToolRequestParams, ContentBlock, ReadResourceRequestParams};
use rmcp::service::{Peer, RoleClient, RunningService};
use serde_json::{Value, json};

use crate::db::TestDb;
use crate::signin::{Idp, initialize};
use crate::support::*;

/// The `x-api-token` each download request brought, in order.
pub(super) type Seen = Arc<Mutex<Vec<String>>>;

/// An upstream of `downloads.json`: `/v1/archives/{name}` answers 4 KB of bytes and records
/// the `x-api-token` it received.
pub(super) async fn downloads_upstream() -> (String, Seen) {
    async fn archive(
        State(seen): State<Seen>,
        Path(name): Path<String>,
        headers: HeaderMap,
    ) -> axum::response::Response {
        seen.lock()
            .unwrap()
            .push(header_text(&headers, "x-api-token"));
        let bytes: Vec<u8> = name.bytes().cycle().take(4096).map(|b| b ^ 0x80).collect();
        ([(header::CONTENT_TYPE, "application/zip")], bytes).into_response()
    }
    let seen: Seen = Arc::default();
    let app = Router::new()
        .route("/v1/archives/{name}", axum::routing::get(archive))
        .with_state(seen.clone());
    let addr = serve_app(app).await;
    (format!("http://{addr}/v1"), seen)
}

/// `apigate serve` on the downloads spec trusting a fresh `oidc-provider`, with `extra` flags.
struct Served {
    idp: Idp,
    url: String,
    env: Vec<(&'static str, String)>,
    seen: Seen,
    _proc: Proc,
}

async fn serve(db: &TestDb, extra: &[&str]) -> Served {
    let (upstream, seen) = downloads_upstream().await;
    let port = free_port();
    let resource = format!("http://127.0.0.1:{port}/mcp");
    let idp = Idp::start(&resource).await;
    let secret = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, [9u8; 32]);
    let env = vec![
        ("DATABASE_URL", db.url.clone()),
        ("APIGATE_SECRET_KEY", secret),
    ];
    let spec = spec_path("downloads.json");
    let listen = format!("127.0.0.1:{port}");
    let mut args = vec![
        "serve",
        "--spec",
        &spec,
        "--upstream",
        &upstream,
        "--listen",
        &listen,
        "--oauth-issuer",
        &idp.issuer,
    ];
    args.extend_from_slice(extra);
    let env_refs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let (proc, url) = Proc::spawn_with_env("serve", &args, &env_refs, "apigate serve").await;
    let url = url.trim_end_matches(';').to_string();
    assert_eq!(url, resource);
    Served {
        idp,
        url,
        env,
        seen,
        _proc: proc,
    }
}

impl Served {
    /// `user` signs in through the provider's forms (client `apigate-rs`, read and write).
    async fn token(&self, user: &str) -> String {
        self.idp
            .sign_in("apigate-rs", user, "apigate:write", &self.url)
            .await
    }

    /// An MCP client of `user`, with `extra` headers beside the bearer token.
    async fn client(&self, user: &str, extra: &[(&str, &str)]) -> RunningService<RoleClient, ()> {
        let bearer = format!("Bearer {}", self.token(user).await);
        let mut headers = vec![("authorization", bearer.as_str())];
        headers.extend_from_slice(extra);
        mcp_client(&self.url, &headers).await
    }

    /// `apigate oauth users set-upstream`: `subject` gets `X-Api-Token: token`.
    async fn store_token(&self, subject: &str, token: &str) {
        let env: Vec<(&str, &str)> = self.env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let header = format!("X-Api-Token: {token}");
        let (ok, _, err) = run_apigate(
            &[
                "oauth",
                "users",
                "set-upstream",
                "--issuer",
                &self.idp.issuer,
                "--subject",
                subject,
                "--upstream-header",
                &header,
            ],
            &env,
        )
        .await;
        assert!(ok, "{err}");
    }
}

/// `downloadArchive` of `name`: the resource link's URI.
pub(super) async fn download(client: &Peer<RoleClient>, name: &str) -> String {
    let args = json!({"operationId": "downloadArchive", "pathParams": {"name": name}});
    let Value::Object(map) = args else {
        unreachable!()
    };
    let result = client
        .call_tool(CallToolRequestParams::new("api_execute").with_arguments(map))
        .await
        .expect("tools/call answers");
    assert_ne!(result.is_error, Some(true), "{result:?}");
    result
        .content
        .iter()
        .find_map(|c| match c {
            ContentBlock::ResourceLink(r) => Some(r.uri.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no resource link: {result:?}"))
}

/// Whether `client` can list or read the held response `uri`.
async fn sees(client: &Peer<RoleClient>, uri: &str) -> bool {
    let listed = resource_uris(client).await.iter().any(|u| u == uri);
    let read = client
        .read_resource(ReadResourceRequestParams::new(uri))
        .await
        .is_ok();
    listed || read
}

/// Whether `other_token` may use the MCP session `owner_token` opened.
async fn shares_session(url: &str, owner_token: &str, other_token: &str) -> bool {
    let owner = format!("Bearer {owner_token}");
    let (status, _, body) = initialize(url, &[("authorization", &owner)]).await;
    assert_eq!(status, 200, "{body}");
    // `initialize` of `signin.rs` gives no session id: open one by hand.
    let response = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("authorization", &owner)
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "people", "version": "1"}}}),
        )
        .send()
        .await
        .unwrap();
    let session = header_text(response.headers(), "mcp-session-id");
    assert!(!session.is_empty());
    let other = format!("Bearer {other_token}");
    let post = |bearer: String, message: Value| {
        let session = session.clone();
        async move {
            reqwest::Client::new()
                .post(url)
                .header("accept", "application/json, text/event-stream")
                .header("authorization", bearer)
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", "2025-11-25")
                .json(&message)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    };
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post(owner.clone(), initialized).await, 202);
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    post(other, list).await == 200
}

#[tokio::test]
async fn people_whose_subjects_display_alike_stay_apart() {
    let db = TestDb::new().await;
    let served = serve(&db, &[]).await;
    let prefix = "p".repeat(200);
    let pairs = [
        // Over 200 characters, one prefix: the cut made them one.
        (format!("{prefix}-alice"), format!("{prefix}-bob")),
        // A real TAB, and a backslash and a `t`: the escape made them one.
        ("tab\tperson".to_string(), "tab\\tperson".to_string()),
    ];
    // Every way they were one, for every pair (one run shows all).
    let mut one = Vec::new();
    for (n, (a, b)) in pairs.iter().enumerate() {
        // b's own upstream token, stored by the operator (who may name a subject of at most
        // 200 printable characters: the person with the backslash holds it, not the one with
        // the TAB).
        let secret = match b.chars().count() <= 200 {
            true => format!("upstream-secret-of-b-{n}"),
            false => String::new(),
        };
        if !secret.is_empty() {
            served.store_token(b, &secret).await;
        }
        let (a_token, b_token) = (served.token(a).await, served.token(b).await);
        let a_client = served.client(a, &[]).await;
        let b_client = served.client(b, &[]).await;

        let b_uri = download(&b_client, &format!("b{n}")).await;
        assert_eq!(served.seen.lock().unwrap().last().unwrap(), &secret);
        let a_uri = download(&a_client, &format!("a{n}")).await;
        let to_a = served.seen.lock().unwrap().last().unwrap().clone();
        if !to_a.is_empty() {
            one.push(format!(
                "pair {n}: a ({a:?}) received b's stored upstream token"
            ));
        }
        if sees(&a_client, &b_uri).await {
            one.push(format!("pair {n}: a ({a:?}) reads b's held response"));
        }
        if sees(&b_client, &a_uri).await {
            one.push(format!("pair {n}: b ({b:?}) reads a's held response"));
        }
        assert!(sees(&a_client, &a_uri).await && sees(&b_client, &b_uri).await);
        if shares_session(&served.url, &a_token, &b_token).await {
            one.push(format!("pair {n}: b ({b:?}) uses a's MCP session"));
        }
    }

    // A `sub` over 255 bytes is refused with the reason, never cut.
    let long = served.token(&"q".repeat(300)).await;
    let (status, challenge, body) =
        initialize(&served.url, &[("authorization", &format!("Bearer {long}"))]).await;
    if status != 401 || !challenge.contains("invalid_token") || !body.to_string().contains("255") {
        one.push(format!(
            "a 300-byte sub was not refused: {status} {challenge} {body}"
        ));
    }
    assert!(one.is_empty(), "{one:#?}");
}

#[tokio::test]
async fn one_person_hammering_does_not_drain_another_persons_budget() {
    let db = TestDb::new().await;
    // Five calls per person, twenty per key, refilled too slowly to matter during the test.
    let served = serve(
        &db,
        &[
            "--session-rate",
            "0.001",
            "--session-burst",
            "5",
            "--key-rate",
            "0.001",
            "--key-burst",
            "20",
        ],
    )
    .await;
    let mallory = served.client("mallory", &[]).await;
    let ivy = served.client("ivy", &[]).await;
    let search = json!({"query": "archive"});
    let mut refused = 0;
    for _ in 0..40 {
        let (err, v) = call(&mallory, "api_discover", search.clone()).await;
        if err {
            assert_eq!(v["code"], "RATE_LIMITED", "{v}");
            refused += 1;
        }
    }
    assert_eq!(refused, 35, "mallory's own five calls went through");
    for n in 0..5 {
        let (err, v) = call(&ivy, "api_discover", search.clone()).await;
        assert!(
            !err,
            "ivy's call {n} was refused while mallory hammered: {v}"
        );
    }
}

#[tokio::test]
async fn with_one_agent_key_people_do_not_read_each_others_downloads() {
    let db = TestDb::new().await;
    let served = serve(&db, &["--auth", "both"]).await;
    let agent = cli_key(&db.url, "agent", "*").await;
    let agent = agent["key"].as_str().unwrap().to_string();
    let ivy = served.client("ivy", &[("x-api-key", &agent)]).await;
    let jack = served.client("jack", &[("x-api-key", &agent)]).await;
    let uri = download(&ivy, "ivy-report").await;
    assert!(sees(&ivy, &uri).await);
    assert!(
        !resource_uris(&jack).await.contains(&uri),
        "jack lists ivy's download"
    );
    assert!(!sees(&jack, &uri).await, "jack reads ivy's download");
    // The key alone (no person) does not read it either.
    let key_only = mcp_client(&served.url, &[("x-api-key", &agent)]).await;
    assert!(
        !sees(&key_only, &uri).await,
        "the bare key reads ivy's download"
    );
}

#[tokio::test]
async fn with_one_agent_key_one_person_opening_sessions_does_not_drain_the_key() {
    let db = TestDb::new().await;
    let served = serve(
        &db,
        &[
            "--auth",
            "both",
            "--session-rate",
            "0.001",
            "--session-burst",
            "5",
            "--key-rate",
            "0.001",
            "--key-burst",
            "20",
        ],
    )
    .await;
    let agent = cli_key(&db.url, "agent", "*").await;
    let agent = agent["key"].as_str().unwrap().to_string();
    let mallory = format!("Bearer {}", served.token("mallory").await);
    let mut refused = 0;
    for _ in 0..40 {
        let (status, _, _) = initialize(
            &served.url,
            &[("authorization", &mallory), ("x-api-key", &agent)],
        )
        .await;
        if status == 429 {
            refused += 1;
        }
    }
    assert!(
        refused >= 20,
        "mallory's sessions were not limited: {refused} refused"
    );
    // ivy opens one session and makes four calls: five of her own.
    let bearer = format!("Bearer {}", served.token("ivy").await);
    let (status, _, body) = initialize(
        &served.url,
        &[("authorization", &bearer), ("x-api-key", &agent)],
    )
    .await;
    assert_eq!(
        status, 200,
        "ivy could not open a session while mallory hammered: {body}"
    );
    let ivy = mcp_client(
        &served.url,
        &[("authorization", &bearer), ("x-api-key", &agent)],
    )
    .await;
    let search = json!({"query": "archive"});
    for n in 0..3 {
        let (err, v) = call(&ivy, "api_discover", search.clone()).await;
        assert!(
            !err,
            "ivy's call {n} was refused while mallory hammered: {v}"
        );
    }
}
