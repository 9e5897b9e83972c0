//! The operator's command line, run as the `apigate` binary against a real Postgres and a real
//! `apigate serve`: "what did the agent do for alice today" (`sessions list`, `audit`, and the
//! same over `/admin/v1`), the start-up warning when no client can connect, the
//! `x-session-token` client snippets, quiet exits on a closed pipe, and logs fit for a file.

use std::process::Stdio;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::db::TestDb;
use crate::support::{
    Proc, Upstream, call, cli_key, execute_ok, mcp_client, run_apigate, spawn_serve, spec_path,
};

/// Runs `apigate ARGS` to completion with `DATABASE_URL` (when given) and nothing else from
/// the test environment; returns (success, stdout, stderr).
async fn apigate(args: &[&str], database_url: Option<&str>) -> (bool, String, String) {
    let env: Vec<(&str, &str)> = database_url
        .map(|url| ("DATABASE_URL", url))
        .into_iter()
        .collect();
    run_apigate(args, &env).await
}

/// `apigate ARGS --json` that must succeed, parsed.
async fn apigate_json(args: &[&str], database_url: &str) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let (ok, stdout, stderr) = apigate(&all, Some(database_url)).await;
    assert!(ok, "apigate {all:?} failed:\n{stderr}");
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("apigate {all:?}: {e}\n{stdout}"))
}

/// Starts `apigate serve` on the petstore spec against `upstream`, with only `env` set.
async fn serve(database_url: &str, upstream: &Upstream, env: &[(&str, &str)]) -> (Proc, String) {
    // The defaults a user gets: no RUST_LOG, no NO_COLOR.
    let mut all_env = vec![
        ("DATABASE_URL", database_url),
        ("RUST_LOG", ""),
        ("NO_COLOR", ""),
    ];
    all_env.extend_from_slice(env);
    let petstore = spec_path("petstore-3.0.json");
    let upstream_url = upstream.url();
    spawn_serve(&petstore, &upstream_url, &[], &all_env).await
}

#[tokio::test]
async fn an_operator_sees_what_the_agent_did_for_alice() {
    let db = TestDb::new().await;
    let url = db.url.as_str();
    let upstream = Upstream::start().await;
    let agent = cli_key(
        url,
        "agent",
        "apigate.discover,apigate.schema,apigate.execute",
    )
    .await;
    let agent_key = agent["key"].as_str().unwrap().to_string();
    let backend = cli_key(url, "backend", "apigate.admin").await;
    let admin_key = backend["key"].as_str().unwrap().to_string();
    let session = |user: &'static str| {
        let url = url.to_string();
        async move {
            apigate_json(
                &[
                    "sessions",
                    "create",
                    "--user",
                    user,
                    "--tenant",
                    "acme",
                    "--features",
                    "apigate.*",
                ],
                &url,
            )
            .await
        }
    };
    let old = session("alice").await;
    let alice = session("alice").await;
    let bob = session("bob").await;
    let old_id = old["id"].as_str().unwrap();
    apigate_json(&["sessions", "revoke", old_id], url).await;
    let tokens: Vec<String> = [&old, &alice, &bob]
        .iter()
        .map(|s| s["token"].as_str().unwrap().to_string())
        .collect();

    let (server, mcp_url) = serve(url, &upstream, &[]).await;
    let alice_client = mcp_client(
        &mcp_url,
        &[("x-api-key", &agent_key), ("x-session-token", &tokens[1])],
    )
    .await;
    let (err, _) = call(
        &alice_client,
        "api_discover",
        json!({"query": "find a pet"}),
    )
    .await;
    assert!(!err);
    execute_ok(&alice_client, json!({"method": "GET", "path": "/pet/7"})).await;
    let bob_client = mcp_client(
        &mcp_url,
        &[("x-api-key", &agent_key), ("x-session-token", &tokens[2])],
    )
    .await;
    call(
        &bob_client,
        "api_discover",
        json!({"query": "store orders"}),
    )
    .await;

    // Audit rows are written off the call path: wait until all three are there.
    let mut alice_rows = Value::Null;
    for _ in 0..100 {
        alice_rows = apigate_json(&["audit", "--user", "alice", "--since", "1h"], url).await;
        if alice_rows["entries"].as_array().unwrap().len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let entries = alice_rows["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "{alice_rows:#}\n{}", server.log());
    // Newest first: the execute, then the discover.
    assert_eq!(entries[0]["tool"], "api_execute");
    assert_eq!(entries[0]["method"], "GET");
    assert_eq!(entries[0]["path"], "/pet/{petId}");
    assert_eq!(entries[0]["upstreamStatus"], 200);
    assert_eq!(entries[0]["decision"], "allowed");
    assert_eq!(entries[0]["sessionId"], alice["id"]);
    assert_eq!(entries[1]["tool"], "api_discover");
    assert!(entries.iter().all(|e| e["userId"] == "alice"));
    assert_eq!(alice_rows["nextCursor"], Value::Null);

    let (ok, table, stderr) = apigate(&["audit", "--user", "alice"], Some(url)).await;
    assert!(ok, "{stderr}");
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("AT (UTC)"), "{table}");
    assert!(lines[1].contains("api_execute") && lines[1].contains("GET /pet/{petId}"));
    assert!(
        lines[1].contains("allowed") && lines[1].contains("200"),
        "{table}"
    );
    assert_eq!(lines.len(), 3, "{table}");

    let discovers = apigate_json(&["audit", "--tool", "api_discover"], url).await;
    let users: Vec<&str> = crate::support::strings(&discovers["entries"], "userId");
    assert_eq!(users, ["bob", "alice"]);

    // Paging: one row at a time, following nextCursor, reaches every row once.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut args = vec!["audit", "--limit", "1"];
        if let Some(c) = &cursor {
            args.extend(["--cursor", c.as_str()]);
        }
        let page = apigate_json(&args, url).await;
        let entries = page["entries"].as_array().unwrap();
        assert!(entries.len() <= 1);
        seen.extend(entries.iter().map(|e| e["id"].as_i64().unwrap()));
        match page["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    // Three tool calls, and six admin actions of the CLI above (two keys and three sessions
    // created, one session revoked).
    assert_eq!(seen.len(), 9, "{seen:?}");
    assert!(seen.windows(2).all(|w| w[0] > w[1]), "{seen:?}");

    // Sessions: active ones by default, every one with --all, never a token.
    let active = apigate_json(&["sessions", "list", "--user", "alice"], url).await;
    let ids: Vec<&Value> = active["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["id"])
        .collect();
    assert_eq!(ids, [&alice["id"]]);
    assert_eq!(active["sessions"][0]["status"], "active");
    assert_eq!(active["sessions"][0]["tenantId"], "acme");
    let all = apigate_json(&["sessions", "list", "--user", "alice", "--all"], url).await;
    let statuses: Vec<&str> = crate::support::strings(&all["sessions"], "status");
    assert_eq!(statuses, ["active", "revoked"]);
    let everyone = apigate_json(&["sessions", "list"], url).await;
    assert_eq!(everyone["sessions"].as_array().unwrap().len(), 2);
    let (ok, table, stderr) = apigate(&["sessions", "list", "--all"], Some(url)).await;
    assert!(ok, "{stderr}");
    assert!(table.starts_with("ID"), "{table}");
    assert_eq!(table.lines().count(), 4, "{table}");
    for out in [&table, &all.to_string(), &everyone.to_string()] {
        assert!(!out.contains("sess_"), "a session token is listed: {out}");
        for t in &tokens {
            assert!(!out.contains(&t[5..]), "a session token is listed: {out}");
        }
    }

    // The same over the admin API, with an admin key.
    let base = mcp_url.trim_end_matches("/mcp").to_string();
    let get = |path: String, key: String| async move {
        let resp = reqwest::Client::new()
            .get(path)
            .header("x-api-key", key)
            .send()
            .await
            .unwrap();
        let status = resp.status();
        let text = resp.text().await.unwrap();
        (status, serde_json::from_str::<Value>(&text).unwrap())
    };
    let (st, body) = get(
        format!("{base}/admin/v1/sessions?user=alice&all=true"),
        admin_key.clone(),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{body}");
    assert_eq!(body["sessions"], all["sessions"]);
    assert!(!body.to_string().contains("token"), "{body}");
    let (st, page1) = get(
        format!("{base}/admin/v1/audit?user=alice&limit=1"),
        admin_key.clone(),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{page1}");
    assert_eq!(page1["entries"][0]["tool"], "api_execute");
    let cursor = page1["nextCursor"].as_str().unwrap();
    let (st, page2) = get(
        format!("{base}/admin/v1/audit?user=alice&limit=1&cursor={cursor}"),
        admin_key.clone(),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{page2}");
    assert_eq!(page2["entries"][0]["tool"], "api_discover");
    assert_eq!(page2["nextCursor"], Value::Null);
    for bad in [
        "limit=0",
        "limit=5000",
        "cursor=abc",
        "since=yesterday",
        "bogus=1",
    ] {
        let (st, body) = get(format!("{base}/admin/v1/audit?{bad}"), admin_key.clone()).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "{bad}: {body}");
        assert_eq!(body["code"], "INVALID_ARGUMENTS", "{bad}: {body}");
    }
    // The agent's own key is not an admin key.
    let (st, body) = get(format!("{base}/admin/v1/audit"), agent_key.clone()).await;
    assert_eq!(st, StatusCode::FORBIDDEN, "{body}");

    // Bad command-line values are refused with what to type instead.
    let (ok, _, stderr) = apigate(&["audit", "--since", "yesterday"], Some(url)).await;
    assert!(!ok);
    assert!(stderr.contains("--since takes a duration"), "{stderr}");
    let (ok, _, stderr) = apigate(&["sessions", "list", "--limit", "0"], Some(url)).await;
    assert!(!ok);
    assert!(stderr.contains("limit 0 is out of range"), "{stderr}");
}

#[tokio::test]
async fn serve_warns_when_no_client_can_connect() {
    let db = TestDb::new().await;
    let upstream = Upstream::start().await;
    let (mut server, _) = serve(&db.url, &upstream, &[]).await;
    let log = server.stderr();
    assert!(log.contains("no client can connect"), "{log}");
    assert!(log.contains("apigate keys create"), "{log}");
    // Logs are for files here: no colours, no migration notices, no rmcp parameter dumps.
    assert!(
        !log.contains('\u{1b}'),
        "ANSI escapes in a piped log:\n{log}"
    );
    assert!(!log.contains("_sqlx_migrations"), "{log}");
    server.terminate().await;

    // With the bootstrap key, or with a key in the database, there is nothing to warn about.
    let (mut server, _) = serve(
        &db.url,
        &upstream,
        &[("MCP_SERVER_API_KEY", "bootstrap-key-0123456789")],
    )
    .await;
    assert!(!server.stderr().contains("no client can connect"));
    server.terminate().await;
    apigate_json(&["keys", "create", "--name", "agent"], &db.url).await;
    let (mut server, mcp_url) = serve(&db.url, &upstream, &[]).await;
    assert!(
        !server.stderr().contains("no client can connect"),
        "{}",
        server.log()
    );
    // An MCP session starts without rmcp logging the client's initialize parameters.
    let created = apigate_json(
        &[
            "sessions",
            "create",
            "--user",
            "u",
            "--features",
            "apigate.*",
        ],
        &db.url,
    )
    .await;
    let key = cli_key(&db.url, "a2", "apigate.*").await;
    let client = mcp_client(
        &mcp_url,
        &[
            ("x-api-key", key["key"].as_str().unwrap()),
            ("x-session-token", created["token"].as_str().unwrap()),
        ],
    )
    .await;
    // Close the session (DELETE) rather than drop it, so shutdown has no open stream to wait
    // for.
    client.cancel().await.unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let log = server.stderr();
    assert!(!log.contains("client_info"), "{log}");
    assert!(!log.contains("protocol_version"), "{log}");
    server.terminate().await;
}

#[tokio::test]
async fn config_prints_the_session_token_header_variant() {
    let (ok, out, err) = apigate(&["config", "claude", "--session-token"], None).await;
    assert!(ok, "{err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        doc["mcpServers"]["apigate"]["headers"],
        json!({"x-api-key": "${APIGATE_API_KEY}", "x-session-token": "${APIGATE_SESSION_TOKEN}"})
    );
    let token = "sess_0123456789abcdef0123456789abcdef";
    let (ok, out, err) = apigate(
        &[
            "config",
            "opencode",
            "--key",
            "k1",
            "--session-token",
            token,
        ],
        None,
    )
    .await;
    assert!(ok, "{err}");
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        doc["mcp"]["apigate"]["headers"],
        json!({"x-api-key": "k1", "x-session-token": token})
    );
    // Without the flag the snippet has no session header (dev mode has no sessions).
    let (_, out, _) = apigate(&["config", "claude"], None).await;
    assert!(!out.contains("x-session-token"), "{out}");
}

/// `apigate … | head -1`: the reader goes away after one line. The command exits 0 without
/// a panic or an error message. The output is far larger than a pipe's buffer, so the write
/// that meets the closed pipe is certain, whatever the timing.
#[tokio::test]
async fn a_closed_pipe_ends_a_command_quietly() {
    let github = spec_path("github-rest-3.0.json");
    let cases: [&[&str]; 1] = [&["search", "--spec", &github, "--limit", "1000", "repos"]];
    for args in cases {
        let mut child = Command::new(env!("CARGO_BIN_EXE_apigate"))
            .args(args)
            .env("RUST_LOG", "warn")
            .env("APIGATE_RANKER", "lexical")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .await
            .unwrap();
        assert!(!first.is_empty(), "{args:?} printed nothing");
        // The reader is dropped here: the pipe is closed.
        let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
            .await
            .unwrap()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}:\n{stderr}");
        assert!(!stderr.contains("Broken pipe"), "{args:?}:\n{stderr}");
        assert!(out.status.success(), "{args:?}: {:?}\n{stderr}", out.status);
    }
}

/// The README's `apigate sessions create --user alice`: without `--features` or `--roles` it is
/// refused (such a session could call no tool) with the command that works, and that command
/// makes a session that discovers, reads a schema and executes.
#[tokio::test]
async fn a_session_without_features_is_refused_with_the_command_that_works() {
    let db = TestDb::new().await;
    let url = db.url.as_str();
    let upstream = Upstream::start().await;
    let (ok, out, err) = apigate(&["sessions", "create", "--user", "alice"], Some(url)).await;
    assert!(!ok, "a session with no features was created: {out}");
    let suggested = err
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("apigate sessions create"))
        .unwrap_or_else(|| panic!("no command to run in:\n{err}"));
    assert!(suggested.contains("--user alice"), "{suggested}");
    // Nothing was stored.
    let listed = apigate_json(&["sessions", "list"], url).await;
    assert_eq!(listed["sessions"].as_array().unwrap().len(), 0, "{listed}");

    let words: Vec<&str> = suggested.split_whitespace().skip(1).collect();
    let session = apigate_json(&words, url).await;
    let key = cli_key(
        url,
        "agent",
        "apigate.discover,apigate.schema,apigate.execute",
    )
    .await;
    let (mut server, mcp_url) = serve(url, &upstream, &[]).await;
    let client = mcp_client(
        &mcp_url,
        &[
            ("x-api-key", key["key"].as_str().unwrap()),
            ("x-session-token", session["token"].as_str().unwrap()),
        ],
    )
    .await;
    for (tool, args) in [
        ("api_discover", json!({"query": "find a pet by id"})),
        ("api_schema", json!({"operationId": "getPetById"})),
        ("api_execute", json!({"method": "GET", "path": "/pet/7"})),
    ] {
        let (is_error, result) = call(&client, tool, args).await;
        assert!(!is_error, "{tool}: {result}");
    }
    client.cancel().await.unwrap();
    server.terminate().await;
}
