//! A signed-in person is a user session all the way through: their own upstream credentials
//! (stored by the operator under the token's issuer and `sub`, before or after they first sign
//! in) go out on their calls and on nobody else's; their MCP session is theirs alone; they are
//! listed (`apigate oauth users list`, `apigate sessions list`) and audited (actor the token's
//! client, user the `sub`), a reload they ask for too; and the server's sign-in settings come
//! from the config file's `[oauth]` table. Opaque tokens are checked by asking the issuer
//! (RFC 7662 introspection). Against the real `oidc-provider` of `signin.rs`.

use base64::Engine as _;
use serde_json::{Value, json};

use crate::db::TestDb;
use crate::signin::{Idp, initialize, introspection_flags, serve_with};
use crate::support::*;

/// A raw JSON-RPC POST to `/mcp`: status, the session id it names, body text.
async fn post(url: &str, headers: &[(&str, &str)], message: Value) -> (u16, String, String) {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .json(&message);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let session = header_text(response.headers(), "mcp-session-id");
    (status, session, response.text().await.unwrap())
}

fn initialize_message() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "signin-users-test", "version": "1"}}})
}

/// The `x-api-token` header of each request the upstream received for `/pet/findByStatus`.
fn tokens_sent(upstream: &Upstream) -> Vec<String> {
    upstream
        .requests()
        .iter()
        .filter(|r| r.uri.contains("findByStatus"))
        .map(|r| header_text(&r.headers, "x-api-token"))
        .collect()
}

#[tokio::test]
async fn a_signed_in_persons_own_credentials_session_and_audit_follow_their_sub() {
    let db = TestDb::new().await;
    let upstream = Upstream::start().await;
    let secret = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
    let port = free_port();
    let resource = format!("http://127.0.0.1:{port}/mcp");
    let idp = Idp::start(&resource).await;
    // The sign-in settings from the config file: no --oauth-* flag. `apigate:read` maps to
    // discovery alone here (the default table would add the schema).
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("apigate.toml");
    std::fs::write(
        &config,
        format!(
            "[[api]]\nname = \"petstore\"\nspec = {spec:?}\nupstream = {up:?}\n\n\
             [oauth]\nissuers = [{iss:?}]\n\n[oauth.scopes]\n\
             \"apigate:read\" = [\"apigate.discover\"]\n\
             \"apigate:write\" = [\"apigate.discover\", \"apigate.schema\", \"apigate.execute\"]\n\
             \"apigate:admin\" = [\"apigate.admin\"]\n",
            spec = spec_path("petstore-3.0.json"),
            up = upstream.url(),
            iss = idp.issuer,
        ),
    )
    .unwrap();
    let env = [
        ("DATABASE_URL", db.url.as_str()),
        ("APIGATE_SECRET_KEY", secret.as_str()),
    ];
    let listen = format!("127.0.0.1:{port}");
    let config_arg = config.to_str().unwrap();
    let (mut proc, url) = Proc::spawn_with_env(
        "serve",
        &["serve", "--config", config_arg, "--listen", &listen],
        &env,
        "apigate serve",
    )
    .await;
    let url = url.trim_end_matches(';').to_string();
    assert_eq!(url, resource);
    let base = url.trim_end_matches("/mcp").to_string();

    // The operator stores ivy's own token before she ever signs in.
    let (ok, out, err) = run_apigate(
        &[
            "oauth",
            "users",
            "set-upstream",
            "--issuer",
            &format!("{}/", idp.issuer),
            "--subject",
            "ivy",
            "--upstream-header",
            "X-Api-Token: ivy-upstream-secret",
        ],
        &env,
    )
    .await;
    assert!(ok, "{err}");
    assert!(out.contains("stored 1 upstream header(s) for ivy"), "{out}");
    assert!(!out.contains("ivy-upstream-secret"), "{out}");

    let ivy = idp
        .sign_in("apigate-rs", "ivy", "apigate:write", &resource)
        .await;
    let jack = idp
        .sign_in("apigate-ed", "jack", "apigate:write", &resource)
        .await;
    let (ivy_bearer, jack_bearer) = (format!("Bearer {ivy}"), format!("Bearer {jack}"));
    let pets = json!({"operationId": "findPetsByStatus", "query": {"status": ["sold"]}});
    let ivy_client = mcp_client(&url, &[("authorization", &ivy_bearer)]).await;
    let jack_client = mcp_client(&url, &[("authorization", &jack_bearer)]).await;
    assert_eq!(execute_ok(&ivy_client, pets.clone()).await["status"], 200);
    assert_eq!(execute_ok(&jack_client, pets.clone()).await["status"], 200);
    // Hers on her call; nothing on his.
    assert_eq!(tokens_sent(&upstream), ["ivy-upstream-secret", ""]);

    // Her MCP session is hers: his token with her session id finds nothing.
    let (status, session, body) = post(
        &url,
        &[("authorization", &ivy_bearer)],
        initialize_message(),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert!(!session.is_empty());
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let hers = [
        ("authorization", ivy_bearer.as_str()),
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-11-25"),
    ];
    let (status, _, _) = post(&url, &hers, initialized).await;
    assert_eq!(status, 202);
    let (status, _, body) = post(&url, &hers, list.clone()).await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("api_execute"), "{body}");
    let his = [
        ("authorization", jack_bearer.as_str()),
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-11-25"),
    ];
    let (status, _, body) = post(&url, &his, list).await;
    assert_eq!(status, 404, "{body}");

    // Over the admin API: jack gets a token of his own, ivy loses hers; both at their next call.
    let admin = cli_key(&db.url, "operator", "apigate.admin").await;
    let admin = admin["key"].as_str().unwrap().to_string();
    let http = reqwest::Client::new();
    let put = http
        .put(format!("{base}/admin/v1/oauth-users/upstream"))
        .header("x-api-key", &admin)
        .json(&json!({"issuer": idp.issuer, "subject": "jack",
            "upstream": {"headers": {"X-Api-Token": "jack-upstream-secret"}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(put.status(), 200);
    let jack_row: Value = put.json().await.unwrap();
    assert_eq!(jack_row["upstreamHeaders"], json!(["x-api-token"]));
    assert_eq!(jack_row["clientId"], "apigate-ed");
    let who = |subject: &str| {
        url::form_urlencoded::Serializer::new(String::new())
            .append_pair("issuer", &idp.issuer)
            .append_pair("subject", subject)
            .finish()
    };
    let cleared = http
        .delete(format!(
            "{base}/admin/v1/oauth-users/upstream?{}",
            who("ivy")
        ))
        .header("x-api-key", &admin)
        .send()
        .await
        .unwrap();
    assert_eq!(cleared.status(), 200);
    let nobody = http
        .delete(format!(
            "{base}/admin/v1/oauth-users/upstream?{}",
            who("nobody")
        ))
        .header("x-api-key", &admin)
        .send()
        .await
        .unwrap();
    assert_eq!(nobody.status(), 404);
    // Not a credential store for someone who is not a person of a trusted-looking issuer.
    let bad = http
        .put(format!("{base}/admin/v1/oauth-users/upstream"))
        .header("x-api-key", &admin)
        .json(&json!({"issuer": "not a url", "subject": "x",
            "upstream": {"headers": {"X-Api-Token": "t"}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    // Nor under a subject no token could carry: a line break (a forged log or table row), or
    // over 256 characters.
    for subject in ["ivy\nadmin", &"s".repeat(300)] {
        let bad = http
            .put(format!("{base}/admin/v1/oauth-users/upstream"))
            .header("x-api-key", &admin)
            .json(&json!({"issuer": idp.issuer, "subject": subject,
                "upstream": {"headers": {"X-Api-Token": "t"}}}))
            .send()
            .await
            .unwrap();
        assert_eq!(bad.status(), 400, "{subject:?}");
    }
    assert_eq!(execute_ok(&ivy_client, pets.clone()).await["status"], 200);
    assert_eq!(execute_ok(&jack_client, pets.clone()).await["status"], 200);
    assert_eq!(
        tokens_sent(&upstream),
        ["ivy-upstream-secret", "", "", "jack-upstream-secret"]
    );

    // `[oauth.scopes]` of the file: apigate:read grants discovery, not the schema.
    let reader = idp
        .sign_in("apigate-es", "lena", "apigate:read", &resource)
        .await;
    let reader = mcp_client(&url, &[("authorization", &format!("Bearer {reader}"))]).await;
    call_ok(&reader, "api_discover", json!({"query": "find pets"})).await;
    // Step-up: the HTTP 403 names the scope that grants it, and the client says so.
    let refused = reader
        .call_tool(
            rmcp::model::CallToolRequestParams::new("api_schema".to_string()).with_arguments(
                json!({"operationId": "findPetsByStatus"})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            ),
        )
        .await
        .expect_err("a step-up challenge");
    let refused = format!("{refused:?}");
    assert!(
        refused.contains("insufficient_scope") && refused.contains("apigate.schema"),
        "{refused}"
    );

    // A person whose token grants apigate.admin reloads the APIs, audited as their client.
    let kim = idp
        .sign_in(
            "apigate-rs",
            "kim",
            "apigate:write apigate:admin",
            &resource,
        )
        .await;
    let reload = http
        .post(format!("{base}/admin/v1/reload"))
        .header("authorization", format!("Bearer {kim}"))
        .send()
        .await
        .unwrap();
    assert_eq!(reload.status(), 200, "{}", reload.text().await.unwrap());
    // Without it, refused and audited as the same client.
    let refused = http
        .post(format!("{base}/admin/v1/reload"))
        .header("authorization", &jack_bearer)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);

    // Listed: who signed in, through which client, with which stored headers (names only).
    let (ok, out, err) = run_apigate(&["oauth", "users", "list", "--json"], &env).await;
    assert!(ok, "{err}");
    let users: Value = serde_json::from_str(&out).unwrap();
    let by_subject = |sub: &str| {
        users["users"]
            .as_array()
            .unwrap()
            .iter()
            .find(|u| u["subject"] == sub)
            .unwrap_or_else(|| panic!("{sub} not listed: {users}"))
            .clone()
    };
    let ivy_row = by_subject("ivy");
    assert_eq!(ivy_row["issuer"], idp.issuer.as_str());
    assert_eq!(ivy_row["clientId"], "apigate-rs");
    assert!(ivy_row["lastSeen"].is_string(), "{ivy_row}");
    assert_eq!(ivy_row["upstreamHeaders"], json!([]));
    assert_eq!(
        by_subject("jack")["upstreamHeaders"],
        json!(["x-api-token"])
    );
    assert_eq!(by_subject("lena")["clientId"], "apigate-es");
    let (ok, out, err) = run_apigate(&["sessions", "list"], &env).await;
    assert!(ok, "{err}");
    assert!(
        out.contains("Signed in with a bearer token") && out.contains("jack"),
        "{out}"
    );
    let (ok, out, _) = run_apigate(&["sessions", "list", "--user", "ivy", "--json"], &env).await;
    assert!(ok);
    let listed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(listed["oauthUsers"][0]["subject"], "ivy", "{listed}");
    assert_eq!(listed["oauthUsers"].as_array().unwrap().len(), 1);

    // Audited: the client acting, the person it acted for, where the credentials came from;
    // the stored values nowhere.
    // (Rows are written behind the calls: wait for the last one.)
    let out = poll(
        "no audit row of the refused reload",
        std::time::Duration::from_secs(10),
        std::time::Duration::from_millis(200),
        || async {
            let (ok, out, err) = run_apigate(&["audit", "--limit", "100", "--json"], &env).await;
            assert!(ok, "{err}");
            out.contains("\"/admin/v1/reload\"").then_some(out)
        },
    )
    .await;
    let audit: Value = serde_json::from_str(&out).unwrap();
    let entries = audit["entries"].as_array().unwrap();
    let ivy_calls: Vec<&Value> = entries
        .iter()
        .filter(|e| e["userId"] == "ivy" && e["tool"] == "api_execute")
        .collect();
    assert_eq!(ivy_calls.len(), 2, "{audit}");
    assert!(ivy_calls.iter().all(|e| e["actor"] == "oauth:apigate-rs"));
    assert!(
        ivy_calls
            .iter()
            .any(|e| e["credentialSources"] == json!(["session"])),
        "{audit}"
    );
    let admin_rows = |operation: &str| -> Vec<&Value> {
        entries
            .iter()
            .filter(|e| e["operation"] == operation)
            .collect()
    };
    let reloads = admin_rows("apis.reload");
    assert_eq!(reloads.len(), 1, "{audit}");
    assert_eq!(reloads[0]["actor"], "oauth:apigate-rs");
    let refusals: Vec<&Value> = admin_rows("admin.access")
        .into_iter()
        .filter(|e| e["path"] == "/admin/v1/reload")
        .collect();
    assert_eq!(refusals.len(), 1, "{audit}");
    assert_eq!(refusals[0]["actor"], "oauth:apigate-ed");
    assert_eq!(admin_rows("oauth_user.upstream.set").len(), 2, "{audit}");
    assert_eq!(admin_rows("oauth_user.upstream.clear").len(), 1, "{audit}");
    for secret in ["ivy-upstream-secret", "jack-upstream-secret"] {
        assert!(!out.contains(secret));
        assert!(!proc.log().contains(secret), "{secret} in the server log");
    }
    assert!(proc.terminate().await, "{}", proc.log());
}

#[tokio::test]
async fn opaque_tokens_are_checked_by_introspection() {
    let db = TestDb::new().await;
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let secret_file = dir.path().join("introspection.secret");
    std::fs::write(&secret_file, "apigate-rs-secret\n").unwrap();
    let (idp, mut proc, url) = serve_with(&db, &upstream, |idp| {
        introspection_flags(&format!("{}/token/introspection", idp.issuer), &secret_file)
    })
    .await;
    let resource = url.clone();

    // An opaque token from the real flow opens the tools, with the claims its issuer reports.
    let opaque = idp
        .sign_in("apigate-op", "olga", "apigate:write", &resource)
        .await;
    assert_ne!(opaque.split('.').count(), 3, "not opaque: {opaque}");
    let client = mcp_client(&url, &[("authorization", &format!("Bearer {opaque}"))]).await;
    let pets = json!({"operationId": "findPetsByStatus", "query": {"status": ["sold"]}});
    assert_eq!(execute_ok(&client, pets.clone()).await["status"], 200);

    // Refused: a string the issuer never issued, a token revoked before its first use, an
    // opaque token for another resource. Each a 401 invalid_token.
    let revoked = idp
        .sign_in("apigate-op", "olga", "apigate:write", &resource)
        .await;
    let revocation = reqwest::Client::new()
        .post(format!("{}/token/revocation", idp.issuer))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(
            url::form_urlencoded::Serializer::new(String::new())
                .append_pair("token", &revoked)
                .append_pair("client_id", "apigate-op")
                .append_pair("client_secret", "apigate-op-secret")
                .finish(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(revocation.status(), 200);
    let other = idp
        .sign_in(
            "apigate-op",
            "olga",
            "apigate:write",
            "http://127.0.0.1:9/other-api",
        )
        .await;
    for (token, why) in [
        ("never-issued-0123456789", "not active"),
        (revoked.as_str(), "not active"),
        (other.as_str(), "issued for another resource"),
    ] {
        let (status, challenge, _) =
            initialize(&url, &[("authorization", &format!("Bearer {token}"))]).await;
        assert_eq!(status, 401, "{why}");
        assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
        assert!(challenge.contains(why), "{challenge}");
    }
    // JWTs are still verified locally.
    let jwt = idp
        .sign_in("apigate-rs", "piet", "apigate:read", &resource)
        .await;
    let (status, _, body) = initialize(&url, &[("authorization", &format!("Bearer {jwt}"))]).await;
    assert_eq!(status, 200, "{body}");
    assert!(!proc.log().contains(&opaque), "a token in the log");
    assert!(
        !proc.log().contains("apigate-rs-secret"),
        "the client secret in the log"
    );
    assert!(proc.terminate().await, "{}", proc.log());

    // An introspection endpoint that does not answer: 503, never a 500 or a pass.
    let dead = format!("http://127.0.0.1:{}/introspect", free_port());
    let (_idp, mut proc, url) =
        serve_with(&db, &upstream, |_| introspection_flags(&dead, &secret_file)).await;
    let (status, _, body) =
        initialize(&url, &[("authorization", "Bearer opaque-0123456789")]).await;
    assert_eq!(status, 503, "{body}");
    assert!(proc.terminate().await, "{}", proc.log());
}

/// A flood of made-up opaque tokens must not become a flood at the issuer: at most 16
/// introspection requests are in flight, whatever arrives; the rest wait, and what waits over
/// 5 s gets 503. (The endpoint answers in 3 s, inside apigate's 5 s, so each request it counts
/// has ended before apigate frees its slot.)
#[tokio::test]
async fn made_up_opaque_tokens_cannot_flood_the_issuer() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[derive(Default)]
    struct Seen {
        now: AtomicUsize,
        most: AtomicUsize,
    }
    // A slow introspection endpoint: 40 tokens need three rounds of 16, 3 s each.
    let seen = Arc::new(Seen::default());
    let app = axum::Router::new().route(
        "/introspect",
        axum::routing::post({
            let seen = seen.clone();
            move || {
                let seen = seen.clone();
                async move {
                    // Counted out when the request ends, answered or dropped by apigate.
                    struct InFlight(Arc<Seen>);
                    impl Drop for InFlight {
                        fn drop(&mut self) {
                            self.0.now.fetch_sub(1, Ordering::SeqCst);
                        }
                    }
                    let now = seen.now.fetch_add(1, Ordering::SeqCst) + 1;
                    seen.most.fetch_max(now, Ordering::SeqCst);
                    let _in_flight = InFlight(seen);
                    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
                    axum::Json(json!({"active": false}))
                }
            }
        }),
    );
    let slow = serve_app(app).await;
    let db = TestDb::new().await;
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let secret_file = dir.path().join("introspection.secret");
    std::fs::write(&secret_file, "s3cret\n").unwrap();
    let introspection = format!("http://{slow}/introspect");
    let (_idp, mut proc, url) = serve_with(&db, &upstream, |_| {
        introspection_flags(&introspection, &secret_file)
    })
    .await;
    let calls = (0..40).map(|i| {
        let url = url.clone();
        async move {
            let token = format!("Bearer made-up-token-{i:04}");
            initialize(&url, &[("authorization", &token)]).await.0
        }
    });
    let statuses = futures::future::join_all(calls).await;
    // Not active (401), over the address's share (429) or no slot within 5 s (503); never a
    // 500, never a pass.
    assert!(
        statuses.iter().all(|s| [401, 429, 503].contains(s)),
        "{statuses:?}"
    );
    assert!(
        statuses.contains(&503) || statuses.contains(&429),
        "{statuses:?}"
    );
    let most = seen.most.load(Ordering::SeqCst);
    assert!(
        (1..=16).contains(&most),
        "{most} introspection requests at once"
    );
    assert!(proc.terminate().await, "{}", proc.log());
}
