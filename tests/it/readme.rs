//! The README keeps its word (issue 46). Its `console` examples, and those of docs/cli.md, are
//! run as written by trycmd, the way clap and cargo check their docs: a command whose output
//! drifts from what the page shows fails here. "Production, step by step" is run command by
//! command against a throwaway database (the Petstore of `examples/petstore-upstream.rs` and
//! a local stand-in for GitHub as the upstreams), and each command is checked to be the
//! README's own line.

use regex::Regex;
use serde_json::{Value, json};

use crate::db::TestDb;
use crate::support::*;

/// The binary the pages' `$ apigate …` lines run.
fn bin() -> std::path::PathBuf {
    std::env::var_os("APIGATE_TEST_BIN")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_apigate").into())
        .into()
}

fn manifest(path: &str) -> String {
    format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))
}

/// Every ```console block of README.md and docs/cli.md: each `$ apigate …` line is run from
/// the repository's root, and what it prints (stdout and stderr) must be what follows it
/// (`...` and `[..]` stand for lines or text that vary; `? failed` for a command that fails).
#[test]
fn the_pages_console_examples_are_what_the_commands_print() {
    let cases = trycmd::TestCases::new();
    cases.register_bin("apigate", bin());
    // The commands shown depend on no variable (`search` says `--ranker lexical`); a
    // variable set around the tests that a flag reads shows in a usage line, where the page
    // says `[..]`.
    for (name, value) in [("NO_COLOR", "1"), ("RUST_LOG", "warn")] {
        cases.env(name, value);
    }
    cases
        .case(manifest("README.md"))
        .case(manifest("docs/cli.md"));
}

/// The README's shell lines of a fenced block that contains `marker`, without comments.
fn readme_block(marker: &str) -> Vec<String> {
    let readme = std::fs::read_to_string(manifest("README.md")).unwrap();
    let block = readme
        .split("```")
        .find(|b| b.contains(marker))
        .unwrap_or_else(|| panic!("no README block holds {marker:?}"));
    block
        .lines()
        .skip(1)
        .map(|l| l.split("  #").next().unwrap_or(l).trim_end().to_string())
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

/// Asserts that the README's block holds `line` as written.
fn in_readme(block: &[String], line: &str) {
    assert!(
        block.iter().any(|l| l == line),
        "the README's production steps no longer say `{line}`:\n{}",
        block.join("\n")
    );
}

/// "Production, step by step", from an empty database to an agent call and the audit row.
#[tokio::test]
async fn production_step_by_step_works_as_written() {
    let steps = readme_block("apigate config claude --session-token > .mcp.json");
    // 1. The database: the test's own (the README makes it with `createdb`), migrated by
    //    `apigate migrate`.
    let db = TestDb::new().await;
    let env = [("DATABASE_URL", db.url.as_str())];
    in_readme(&steps, "apigate migrate");
    let (ok, _, err) = run_apigate(&["migrate"], &env).await;
    assert!(ok, "{err}");

    // 2. The APIs of examples/apigate.toml, each upstream a local server in its place.
    in_readme(&steps, "cargo run --example petstore-upstream &");
    in_readme(
        &steps,
        "apigate serve --config examples/apigate.toml 2> apigate.log &",
    );
    let petstore = serve_app(crate::petstore_upstream::app()).await;
    let github = Upstream::start().await;
    let config = std::fs::read_to_string(manifest("examples/apigate.toml")).unwrap();
    for needed in ["http://127.0.0.1:4010", "https://api.github.com", "\"../"] {
        assert!(config.contains(needed), "examples/apigate.toml: {needed}");
    }
    let config = config
        .replace("http://127.0.0.1:4010", &format!("http://{petstore}"))
        .replace("https://api.github.com", &github.url())
        .replace("\"../", &format!("\"{}/", env!("CARGO_MANIFEST_DIR")));
    let dir = tempfile::tempdir().unwrap();
    let config_path = dir.path().join("apigate.toml");
    std::fs::write(&config_path, config).unwrap();
    let config_path = config_path.to_str().unwrap();
    let (server, url) = Proc::spawn_with_env(
        "serve",
        &["serve", "--config", config_path, "--listen", "127.0.0.1:0"],
        &env,
        "apigate serve",
    )
    .await;
    let url = url.trim_end_matches(';').to_string();
    // With no key yet, the start-up hint names the features of both APIs.
    let features =
        "apigate.discover,apigate.schema,apigate.execute,petstore.execute,github.execute";
    assert!(
        server.stderr().contains(&format!("--features {features}`")),
        "{}",
        server.log()
    );

    // 3. A key and a session, taken from what the commands print as the README's `grep`s do.
    in_readme(&steps, &format!("FEATURES={features}"));
    let key_line = "export APIGATE_API_KEY=$(apigate keys create --name agent --features $FEATURES | grep -o 'agk_[A-Za-z0-9_]*')";
    in_readme(&steps, key_line);
    let session_line = "export APIGATE_SESSION_TOKEN=$(apigate sessions create --user alice --features $FEATURES | grep -o 'sess_[0-9a-f]*')";
    in_readme(&steps, session_line);
    let (ok, out, err) = run_apigate(
        &["keys", "create", "--name", "agent", "--features", features],
        &env,
    )
    .await;
    assert!(ok, "{err}");
    let key = only_match(&out, r"agk_[A-Za-z0-9_]*");
    let (ok, out, err) = run_apigate(
        &[
            "sessions",
            "create",
            "--user",
            "alice",
            "--features",
            features,
        ],
        &env,
    )
    .await;
    assert!(ok, "{err}");
    let token = only_match(&out, r"sess_[0-9a-f]*");

    // 4. The client's configuration, its variables expanded as Claude Code does, at this
    //    server's address; then the agent's first calls.
    in_readme(&steps, "apigate config claude --session-token > .mcp.json");
    let (ok, out, err) = run_apigate(&["config", "claude", "--session-token"], &[]).await;
    assert!(ok, "{err}");
    let snippet: Value = serde_json::from_str(&out).unwrap();
    let entry = &snippet["mcpServers"]["apigate"];
    assert_eq!(entry["url"], "http://127.0.0.1:3001/mcp");
    let headers: Vec<(String, String)> = entry["headers"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(name, value)| {
            let value = value
                .as_str()
                .unwrap()
                .replace("${APIGATE_API_KEY}", &key)
                .replace("${APIGATE_SESSION_TOKEN}", &token);
            (name.clone(), value)
        })
        .collect();
    let headers: Vec<(&str, &str)> = headers
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let client = mcp_client(&url, &headers).await;
    let found = call_ok(
        &client,
        "api_discover",
        json!({"query": "find a pet by its id"}),
    )
    .await;
    let ids: Vec<&str> = found["results"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["operationId"].as_str())
        .collect();
    assert!(ids.contains(&"petstore:getPetById"), "{found}");
    let pet = execute_ok(
        &client,
        json!({"operationId": "petstore:getPetById", "pathParams": {"petId": 1}}),
    )
    .await;
    assert_eq!(pet["body"]["name"], "doggie", "{pet}");

    // 5. The audit, with the columns docs/cli.md shows.
    in_readme(&steps, "apigate audit --user alice");
    let (ok, out, err) = run_apigate(&["audit", "--user", "alice"], &env).await;
    assert!(ok, "{err}");
    let header = out.lines().next().unwrap_or_default();
    assert_eq!(
        columns(header),
        columns(&docs_table_header("AT (UTC)")),
        "docs/cli.md's `apigate audit` columns:\n{out}"
    );
    assert!(
        out.lines()
            .any(|l| l.contains("api_execute") && l.contains("GET /pet/{petId}")),
        "{out}"
    );
    let (ok, out, err) = run_apigate(&["sessions", "list", "--user", "alice"], &env).await;
    assert!(ok, "{err}");
    assert_eq!(
        columns(out.lines().next().unwrap_or_default()),
        columns(&docs_table_header("ID  ")),
        "docs/cli.md's `apigate sessions list` columns:\n{out}"
    );

    // A session without `petstore.execute` is told why it sees no pets, with no API named.
    let (ok, out, err) = run_apigate(
        &[
            "sessions",
            "create",
            "--user",
            "bob",
            "--features",
            "apigate.discover,apigate.schema,apigate.execute,github.execute",
        ],
        &env,
    )
    .await;
    assert!(ok, "{err}");
    let bob = only_match(&out, r"sess_[0-9a-f]*");
    let client = mcp_client(&url, &[("x-api-key", &key), ("x-session-token", &bob)]).await;
    let found = call_ok(
        &client,
        "api_discover",
        json!({"query": "find a pet by its id", "api": "petstore"}),
    )
    .await;
    assert_eq!(found["results"], json!([]), "{found}");
    let note = found["note"].as_str().unwrap_or_default();
    assert!(
        found["hidden"].as_u64().unwrap_or(0) > 0 && note.contains("`NAME.execute`"),
        "{found}"
    );
    drop(server);
}

/// The one match of `pattern` in `text`.
fn only_match(text: &str, pattern: &str) -> String {
    let re = Regex::new(pattern).unwrap();
    let found: Vec<&str> = re.find_iter(text).map(|m| m.as_str()).collect();
    assert_eq!(found.len(), 1, "{pattern} in:\n{text}");
    found[0].to_string()
}

/// A table's column names: its header split at runs of two or more spaces.
fn columns(header: &str) -> Vec<String> {
    Regex::new(r"\s{2,}")
        .unwrap()
        .split(header.trim())
        .map(str::to_string)
        .collect()
}

/// The header line of the table in docs/cli.md that starts with `start`.
fn docs_table_header(start: &str) -> String {
    let docs = std::fs::read_to_string(manifest("docs/cli.md")).unwrap();
    docs.lines()
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("docs/cli.md has no table starting {start:?}"))
        .to_string()
}
