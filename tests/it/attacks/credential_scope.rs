//! Issue 41 §3: stored upstream credentials name the API they are for. A production server
//! (`apigate serve --config`, real Postgres) serves THREE APIs, each with its own recording
//! upstream that keeps every header of every request. Alice's session carries her GitHub token
//! for `github` only; Ivy, signed in through the real `oidc-provider`, has a token stored for
//! `jira` only. Both call every API: no upstream ever sees a value stored for another API, in
//! any header, whole or as any 8-character piece, and the audit says `session` only where the
//! stored headers went out. With several APIs served, headers that name no API (or an API not
//! served) are refused when they are stored, over the CLI and the admin API, with the flag that
//! works and the names to give it.

use std::os::unix::fs::PermissionsExt;
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use serde_json::{Value, json};

use crate::db::TestDb;
use crate::signin::Idp;
use crate::support::*;

const ALICE_GITHUB: &str = "Bearer ghp_AliceGithubOnly0123456789abcdef";
const IVY_JIRA: &str = "ivy-jira-only-token-9876543210zyxw";
const BOOTSTRAP: &str = "bootstrap-key-for-credential-scope";
const APIS: [&str; 3] = ["github", "jira", "weather"];

/// Every request one upstream received: (path, every header as `name: value`).
type Seen = Arc<Mutex<Vec<(String, Vec<String>)>>>;

/// An upstream that records every header of every request and answers `{"ok": true}`.
async fn recorder() -> (std::net::SocketAddr, Seen) {
    let seen: Seen = Arc::default();
    let app = axum::Router::new()
        .fallback(|State(seen): State<Seen>, req: Request| async move {
            let headers = req
                .headers()
                .iter()
                .map(|(n, v)| format!("{n}: {}", String::from_utf8_lossy(v.as_bytes())))
                .collect();
            seen.lock()
                .unwrap()
                .push((req.uri().path().to_string(), headers));
            axum::Json(json!({"ok": true}))
        })
        .with_state(seen.clone());
    (serve_app(app).await, seen)
}

/// A one-operation API: `GET /{name}` (`operationId` `get_{name}`).
fn spec(name: &str) -> Value {
    json!({
        "openapi": "3.0.3",
        "info": {"title": format!("{name} API"), "version": "1"},
        "paths": {format!("/{name}"): {"get": {
            "operationId": format!("get_{name}"),
            "summary": format!("Read the {name} resource"),
            "responses": {"200": {"description": "ok"}}
        }}}
    })
}

/// Whether `text` holds `secret` or any 8-character piece of it.
fn holds(text: &str, secret: &str) -> Option<String> {
    let chars: Vec<char> = secret.chars().collect();
    chars
        .windows(8)
        .map(|w| w.iter().collect::<String>())
        .find(|piece| text.contains(piece.as_str()))
}

/// Every piece of a value `stored` for another API (`(api, value)` pairs) that a request `api`'s
/// upstream received carries, in any header.
fn leaks(api: &str, seen: &Seen, stored: &[(&str, &str)]) -> Vec<String> {
    let mut leaks = Vec::new();
    for (path, headers) in seen.lock().unwrap().iter() {
        for header in headers {
            for (owner, secret) in stored {
                if *owner == api {
                    continue;
                }
                if let Some(piece) = holds(header, secret) {
                    leaks.push(format!(
                        "the {api} upstream received {piece:?} of the value stored for {owner} \
                         (GET {path}, header {header:?})"
                    ));
                }
            }
        }
    }
    leaks
}

/// Asserts that no upstream received a piece of a value stored for another API.
fn assert_only_own(upstreams: &[(std::net::SocketAddr, Seen)], stored: &[(&str, &str)]) {
    let found: Vec<String> = APIS
        .iter()
        .zip(upstreams)
        .flat_map(|(api, (_, seen))| leaks(api, seen, stored))
        .collect();
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// The value of `name` in the requests one upstream received, one per request.
fn values(seen: &Seen, name: &str) -> Vec<String> {
    let prefix = format!("{name}: ");
    seen.lock()
        .unwrap()
        .iter()
        .map(|(_, headers)| {
            headers
                .iter()
                .find_map(|h| h.strip_prefix(&prefix).map(str::to_string))
                .unwrap_or_default()
        })
        .collect()
}

#[tokio::test]
async fn stored_credentials_reach_only_the_api_they_name() {
    let db = TestDb::new().await;
    let mut upstreams = Vec::new();
    for _ in APIS {
        upstreams.push(recorder().await);
    }
    let secret = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, [41u8; 32]);
    let port = free_port();
    let resource = format!("http://127.0.0.1:{port}/mcp");
    let idp = Idp::start(&resource).await;
    let dir = tempfile::tempdir().unwrap();
    let mut config = String::new();
    for (api, (addr, _)) in APIS.iter().zip(&upstreams) {
        let path = dir.path().join(format!("{api}.json"));
        std::fs::write(&path, spec(api).to_string()).unwrap();
        config.push_str(&format!(
            "[[api]]\nname = {api:?}\nspec = {path:?}\nupstream = \"http://{addr}\"\n\n"
        ));
    }
    // Signed-in people may use every API (a feature naming each).
    let write: Vec<String> = ["apigate.discover", "apigate.schema", "apigate.execute"]
        .into_iter()
        .map(String::from)
        .chain(APIS.iter().map(|a| format!("{a}.execute")))
        .collect();
    config.push_str(&format!(
        "[oauth]\nissuers = [{iss:?}]\n\n[oauth.scopes]\n\"apigate:write\" = {write:?}\n",
        iss = idp.issuer,
    ));
    let config_path = dir.path().join("apigate.toml");
    std::fs::write(&config_path, config).unwrap();
    std::fs::set_permissions(&config_path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let env = [
        ("DATABASE_URL", db.url.as_str()),
        ("APIGATE_SECRET_KEY", secret.as_str()),
        ("MCP_SERVER_API_KEY", BOOTSTRAP),
    ];
    let listen = format!("127.0.0.1:{port}");
    let (mut proc, url) = Proc::spawn_with_env(
        "serve",
        &[
            "serve",
            "--config",
            config_path.to_str().unwrap(),
            "--listen",
            &listen,
        ],
        &env,
        "apigate serve",
    )
    .await;
    let url = url.trim_end_matches(';').to_string();
    let base = url.trim_end_matches("/mcp").to_string();

    // Alice's session: her GitHub token, for `github` only.
    let (ok, out, err) = run_apigate(
        &[
            "sessions",
            "create",
            "--user",
            "alice",
            "--features",
            "*",
            "--api",
            "github",
            "--upstream-header",
            &format!("Authorization: {ALICE_GITHUB}"),
            "--json",
        ],
        &env,
    )
    .await;
    assert!(ok, "{err}");
    let alice: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(alice["upstreamApis"], json!(["github"]), "{alice}");
    let alice_token = alice["token"].as_str().unwrap().to_string();
    // Ivy's token for `jira` only, stored before she signs in.
    let (ok, out, err) = run_apigate(
        &[
            "oauth",
            "users",
            "set-upstream",
            "--issuer",
            &idp.issuer,
            "--subject",
            "ivy",
            "--api",
            "jira",
            "--upstream-header",
            &format!("X-Jira-Token: {IVY_JIRA}"),
        ],
        &env,
    )
    .await;
    assert!(ok, "{err}");
    assert!(out.contains("for the API jira"), "{out}");

    let alice_client = mcp_client(
        &url,
        &[("x-api-key", BOOTSTRAP), ("x-session-token", &alice_token)],
    )
    .await;
    let ivy = idp
        .sign_in("apigate-rs", "ivy", "apigate:write", &resource)
        .await;
    let ivy_client = mcp_client(&url, &[("authorization", &format!("Bearer {ivy}"))]).await;
    for api in APIS {
        let args = json!({"operationId": format!("{api}:get_{api}")});
        for client in [&alice_client, &ivy_client] {
            assert_eq!(execute_ok(client, args.clone()).await["status"], 200);
        }
    }

    // Nothing stored for one API reached another, in any header, whole or in part ...
    let stored = [("github", ALICE_GITHUB), ("jira", IVY_JIRA)];
    assert_only_own(&upstreams, &stored);
    // ... while each API's own stored value went to it (the check is not vacuous).
    let [(_, github), (_, jira), (_, weather)] = [&upstreams[0], &upstreams[1], &upstreams[2]];
    assert_eq!(values(github, "authorization"), [ALICE_GITHUB, ""]);
    assert_eq!(values(jira, "x-jira-token"), ["", IVY_JIRA]);
    assert_eq!(values(weather, "authorization"), ["", ""]);

    // Audited: `session` only on the calls that sent a stored header.
    let out = poll(
        "the audit rows of the six calls",
        std::time::Duration::from_secs(10),
        std::time::Duration::from_millis(200),
        || async {
            let (ok, out, err) = run_apigate(&["audit", "--json"], &env).await;
            assert!(ok, "{err}");
            let audit: Value = serde_json::from_str(&out).unwrap();
            let calls: Vec<Value> = audit["entries"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["tool"] == "api_execute")
                .cloned()
                .collect();
            (calls.len() == 6).then_some(calls)
        },
    )
    .await;
    for entry in &out {
        let sources = entry["credentialSources"].to_string();
        let op = entry["operation"].as_str().unwrap_or_default();
        let user = entry["userId"].as_str().unwrap_or_default();
        let sent =
            (user == "alice" && op.contains("github")) || (user == "ivy" && op.contains("jira"));
        assert_eq!(sources.contains("session"), sent, "{entry}");
    }

    // With three APIs served, headers that name none, or an API not served, are refused when
    // stored: over the CLI ...
    for (extra, wants) in [
        (vec![], vec!["--api NAME", "github, jira, weather"]),
        (
            vec!["--api", "billing"],
            vec!["no API named billing", "github, jira, weather"],
        ),
    ] {
        let mut args = vec![
            "sessions",
            "create",
            "--user",
            "bob",
            "--features",
            "*",
            "--upstream-header",
            "Authorization: Bearer bob-token-0123456789",
        ];
        args.extend(extra.iter().copied());
        let (ok, out, err) = run_apigate(&args, &env).await;
        assert!(!ok, "{out}");
        for want in &wants {
            assert!(err.contains(want), "{want:?} not in: {err}");
        }
        assert!(!err.contains("bob-token"), "{err}");
        let mut args = vec![
            "oauth",
            "users",
            "set-upstream",
            "--issuer",
            &idp.issuer,
            "--subject",
            "bob",
            "--upstream-header",
            "X-Token: bob-token-0123456789",
        ];
        args.extend(extra.iter().copied());
        let (ok, _, err) = run_apigate(&args, &env).await;
        assert!(!ok);
        for want in &wants {
            assert!(err.contains(want), "{want:?} not in: {err}");
        }
    }
    // ... and over the admin API.
    let http = reqwest::Client::new();
    let bob = json!({"headers": {"Authorization": "Bearer bob-token-0123456789"}});
    for (method, path, body) in [
        (
            reqwest::Method::POST,
            "sessions",
            json!({"userId": "bob", "features": ["*"], "upstream": bob}),
        ),
        (
            reqwest::Method::PUT,
            "oauth-users/upstream",
            json!({"issuer": idp.issuer, "subject": "bob", "upstream": bob}),
        ),
    ] {
        let answer = http
            .request(method, format!("{base}/admin/v1/{path}"))
            .header("x-api-key", BOOTSTRAP)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), 400, "{path}");
        let text = answer.text().await.unwrap();
        assert!(!text.contains("bob-token"), "{text}");
        let error: Value = serde_json::from_str(&text).unwrap();
        let error = error["error"].as_str().unwrap_or_default();
        assert!(error.contains("\"api\": \"NAME\""), "{text}");
        assert!(error.contains("github, jira, weather"), "{text}");
    }
    // Naming an API stores them for it; a list stores one set per API.
    let created = http
        .post(format!("{base}/admin/v1/sessions"))
        .header("x-api-key", BOOTSTRAP)
        .json(&json!({"userId": "bob", "features": ["*"], "upstream": [
            {"api": "weather", "headers": {"X-Weather-Key": "bob-weather-Hn3xV9sL"}},
            {"api": "github", "headers": {"Authorization": "Bearer bob-github-Q7w2Zp4K"}}
        ]}))
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    let created: Value = created.json().await.unwrap();
    assert_eq!(
        created["upstreamApis"],
        json!(["github", "weather"]),
        "{created}"
    );
    let bob_client = mcp_client(
        &url,
        &[
            ("x-api-key", BOOTSTRAP),
            ("x-session-token", created["token"].as_str().unwrap()),
        ],
    )
    .await;
    for api in APIS {
        let args = json!({"operationId": format!("{api}:get_{api}")});
        assert_eq!(execute_ok(&bob_client, args).await["status"], 200);
    }
    let stored = [
        ("github", "Bearer bob-github-Q7w2Zp4K"),
        ("weather", "bob-weather-Hn3xV9sL"),
        ("github", ALICE_GITHUB),
        ("jira", IVY_JIRA),
    ];
    for (a, x) in stored {
        for (b, y) in stored {
            assert!(a == b || holds(x, y).is_none(), "{x} and {y} share a piece");
        }
    }
    assert_only_own(&upstreams, &stored);
    assert_eq!(values(weather, "x-weather-key")[2], "bob-weather-Hn3xV9sL");

    // Ivy's jira token is deleted alone; a github one stored for her later is kept.
    let (ok, _, err) = run_apigate(
        &[
            "oauth",
            "users",
            "set-upstream",
            "--issuer",
            &idp.issuer,
            "--subject",
            "ivy",
            "--api",
            "github",
            "--upstream-header",
            "X-Ivy-Github: ivy-github-0123456789",
        ],
        &env,
    )
    .await;
    assert!(ok, "{err}");
    let cleared = http
        .delete(format!(
            "{base}/admin/v1/oauth-users/upstream?issuer={}&subject=ivy&api=jira",
            url::form_urlencoded::byte_serialize(idp.issuer.as_bytes()).collect::<String>()
        ))
        .header("x-api-key", BOOTSTRAP)
        .send()
        .await
        .unwrap();
    assert_eq!(cleared.status(), 200);
    let cleared: Value = cleared.json().await.unwrap();
    assert_eq!(cleared["upstreamApis"], json!(["github"]), "{cleared}");
    assert_eq!(
        cleared["upstreamHeaders"],
        json!(["x-ivy-github"]),
        "{cleared}"
    );

    for secret in [ALICE_GITHUB, IVY_JIRA, "bob-token-0123456789"] {
        assert!(!proc.log().contains(secret), "{secret} in the server log");
    }
    assert!(proc.terminate().await, "{}", proc.log());
}

/// With one API (here the plain `--spec` mode) no `--api` is needed: the headers go to it. An
/// `--api` there is refused, since that API has no name.
#[tokio::test]
async fn with_one_api_the_headers_need_no_api() {
    let db = TestDb::new().await;
    let (addr, seen) = recorder().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("one.json");
    std::fs::write(&path, spec("one").to_string()).unwrap();
    let secret = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, [42u8; 32]);
    let env = [
        ("DATABASE_URL", db.url.as_str()),
        ("APIGATE_SECRET_KEY", secret.as_str()),
        ("MCP_SERVER_API_KEY", BOOTSTRAP),
    ];
    let (mut proc, url) =
        spawn_serve(path.to_str().unwrap(), &format!("http://{addr}"), &[], &env).await;
    let create = |extra: &'static [&'static str]| {
        let mut args = vec![
            "sessions",
            "create",
            "--user",
            "carol",
            "--features",
            "*",
            "--upstream-header",
            "X-Carol: carol-token-0123456789",
            "--json",
        ];
        args.extend(extra);
        async move { run_apigate(&args, &env).await }
    };
    let (ok, _, err) = create(&["--api", "github"]).await;
    assert!(!ok);
    assert!(err.contains("leave out --api"), "{err}");
    let (ok, out, err) = create(&[]).await;
    assert!(ok, "{err}");
    let carol: Value = serde_json::from_str(&out).unwrap();
    let client = mcp_client(
        &url,
        &[
            ("x-api-key", BOOTSTRAP),
            ("x-session-token", carol["token"].as_str().unwrap()),
        ],
    )
    .await;
    execute_ok(&client, json!({"operationId": "get_one"})).await;
    assert_eq!(values(&seen, "x-carol"), ["carol-token-0123456789"]);
    assert!(proc.terminate().await, "{}", proc.log());
}
