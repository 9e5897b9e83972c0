//! A new user's first hour (issue 46), through the real binary: what the commands say when a
//! step goes wrong (a database that does not exist, a required flag left out), how `--help`
//! groups the flags, where calls really go with `--upstream` (against the Petstore of
//! `examples/petstore-upstream.rs`), the monitor's banner, and the plain progress lines of
//! long work off a terminal.

use std::time::Duration;

use serde_json::json;

use crate::db::TestDb;
use crate::petstore_upstream;
use crate::support::*;

/// The Petstore the README's quickstart serves.
pub fn petstore() -> String {
    format!("{}/openapi/petstore.json", env!("CARGO_MANIFEST_DIR"))
}

/// A database that does not exist is named, with the command that makes it; the server's own
/// source line ("at line 948") is not shown, nor is the server said to be unreachable.
#[tokio::test]
async fn a_missing_database_says_how_to_create_it() {
    let db = TestDb::new().await;
    let mut url = url::Url::parse(&db.url).unwrap();
    url.set_path("/apigate_first_hour_missing");
    for args in [
        vec!["migrate"],
        vec!["keys", "list"],
        vec!["serve", "--listen", "127.0.0.1:0"],
    ] {
        let mut args = args;
        let spec = petstore();
        if args[0] == "serve" {
            args.extend(["--spec", spec.as_str()]);
        }
        let (ok, _, err) = run_apigate(&args, &[("DATABASE_URL", url.as_str())]).await;
        assert!(!ok, "{args:?} succeeded");
        assert!(
            err.contains("database apigate_first_hour_missing does not exist")
                && err.contains("create it with `createdb ")
                && err.contains(" apigate_first_hour_missing`"),
            "{args:?}: {err}"
        );
        assert!(
            !err.contains(" at line ") && !err.contains("Is the server running"),
            "{args:?}: {err}"
        );
    }
}

/// `serve` without a database says where the URL comes from (and does not call `--listen`,
/// which has a default, required); `dev` without `--spec` names `--config` too.
#[tokio::test]
async fn a_missing_flag_says_where_else_it_comes_from() {
    let spec = petstore();
    let (ok, _, err) = run_apigate(&["serve", "--spec", &spec], &[]).await;
    assert!(!ok);
    assert!(
        err.contains("--database-url <URL>")
            && err.contains("tip: set DATABASE_URL")
            && err.contains("createdb apigate"),
        "{err}"
    );
    assert!(!err.contains("--listen <"), "{err}");
    let (ok, _, err) = run_apigate(&["dev"], &[]).await;
    assert!(!ok);
    assert!(
        err.contains("--spec <FILE|URL>") && err.contains("--config apigate.toml"),
        "{err}"
    );
}

/// `serve --help`: the essentials first, then one heading per group in a fixed order;
/// `--ranker` lists only what a server accepts; a variable is named, never its value (set or
/// not); `--log-format` is the last option (before the groups) of every command.
#[tokio::test]
async fn help_groups_the_flags_and_shows_no_variable_values() {
    let env = [("APIGATE_CACHE_DIR", "/var/tmp/secret-cache-dir")];
    let (ok, help, _) = run_apigate(&["serve", "--help"], &env).await;
    assert!(ok);
    let at = |text: &str| {
        help.find(text)
            .unwrap_or_else(|| panic!("{text:?} not in serve --help:\n{help}"))
    };
    let order = [
        "--database-url <URL>",
        "--spec <FILE|URL>",
        "--listen <LISTEN>",
        "\nKeys and sessions:\n",
        "\nSign-in (OAuth):\n",
        "\nLimits:\n",
        "\nUpstream:\n",
        "\nAgent monitor:\n",
        "\nRanking:\n",
        "\nHTTP:\n",
    ];
    for pair in order.windows(2) {
        assert!(at(pair[0]) < at(pair[1]), "{pair:?} out of order:\n{help}");
    }
    assert!(at("--database-url <URL>") < at("\nKeys and sessions:\n"));
    assert!(help.contains("[env: APIGATE_MONITOR_URL]"), "{help}");
    assert!(
        !help.contains("=]") && !help.contains("secret-cache-dir"),
        "{help}"
    );
    assert!(
        help.contains("[possible values: hybrid, lexical]")
            && !help.contains("values: lexical, dense"),
        "{help}"
    );
    for command in [
        &["serve"][..],
        &["dev"],
        &["stdio"],
        &["search"],
        &["sessions", "list"],
        &["keys", "create"],
        &["monitor"],
        &["config"],
    ] {
        // `-h`: the short form, one line a flag.
        let mut args = command.to_vec();
        args.push("-h");
        let (ok, help, _) = run_apigate(&args, &[]).await;
        assert!(ok, "{args:?}");
        // The Options section: up to the first heading after it.
        let options = help.split("Options:\n").nth(1).unwrap_or_default();
        let options = options.split("\n\n").next().unwrap_or_default();
        let flags: Vec<&str> = options
            .lines()
            .map(str::trim_start)
            .filter(|l| l.starts_with("--") || l.starts_with("-h, --help"))
            .collect();
        assert!(
            flags.last().is_some_and(|l| l.starts_with("--log-format")),
            "{args:?}: --log-format is not the last option:\n{help}"
        );
    }
    // Listing sessions seals nothing: no secret-key flag there.
    let (_, help, _) = run_apigate(&["sessions", "list", "--help"], &[]).await;
    assert!(!help.contains("secret-key"), "{help}");
    let (_, help, _) = run_apigate(&["sessions", "create", "--help"], &[]).await;
    assert!(help.contains("--secret-key-file"), "{help}");
}

/// `apigate monitor`'s banner counts its rules in the right number (the built-in default is
/// one rule).
#[tokio::test]
async fn the_monitor_banner_counts_rules_in_the_right_number() {
    let (proc, _) = Proc::spawn(
        "monitor",
        &["monitor", "--listen", "127.0.0.1:0"],
        "apigate monitor listening",
    )
    .await;
    let line = poll(
        "no rules line",
        Duration::from_secs(30),
        Duration::from_millis(50),
        || {
            let stderr = proc.stderr();
            async move {
                stderr
                    .lines()
                    .find(|l| l.trim_start().starts_with("rules:"))
                    .map(str::to_string)
            }
        },
    )
    .await;
    assert!(line.ends_with("(1 rule)"), "{line}\n{}", proc.log());
}

/// With `--upstream`, the start-up log and `api_schema`'s `serverUrl` show the URL calls go
/// under (the spec server's `/v2` kept), and `api_execute` reaches the example Petstore.
#[tokio::test]
async fn calls_go_where_the_start_up_line_says() {
    let addr = serve_app(petstore_upstream::app()).await;
    let upstream = format!("http://{addr}");
    let (proc, url) = spawn_dev(&petstore(), Some(&upstream), &[], &[]).await;
    let expected = format!("http://{addr}/v2");
    assert!(
        proc.stderr()
            .contains(&format!("API calls go to {expected} ")),
        "{}",
        proc.log()
    );
    let client = mcp_client(&url, &[("x-api-key", KEY)]).await;
    let schema = call_ok(
        &client,
        "api_schema",
        json!({"operationId": "getPetById", "detail": "full"}),
    )
    .await;
    assert_eq!(schema["serverUrl"], expected.as_str(), "{schema}");
    let pet = execute_ok(&client, json!({"method": "GET", "path": "/pet/1"})).await;
    assert_eq!(pet["status"], 200, "{pet}");
    assert_eq!(pet["body"]["name"], "doggie", "{pet}");
    let sold = execute_ok(
        &client,
        json!({"operationId": "findPetsByStatus", "query": {"status": "sold"}}),
    )
    .await;
    assert_eq!(sold["body"][0]["name"], "goldie", "{sold}");
}

/// Off a terminal (stderr to a pipe here, a file or a CI log elsewhere), embedding the
/// operations with an encoder for `apigate search` says so in plain lines (the built-in
/// static model takes milliseconds and says nothing).
#[tokio::test]
async fn embedding_off_a_terminal_says_how_far_it_is() {
    let cache = tempfile::tempdir().unwrap();
    let cache = cache.path().to_str().unwrap();
    let spec = petstore();
    let encoder = format!("{}/models/minilm-api", env!("CARGO_MANIFEST_DIR"));
    let search = [
        "search",
        "--spec",
        &spec,
        "--embedding-model",
        &encoder,
        "--limit",
        "1",
        "pet by id",
    ];
    let (ok, out, err) = run_apigate(
        &["search", "--spec", &spec, "--limit", "1", "pet by id"],
        &[],
    )
    .await;
    assert!(
        ok && out.contains("/pet/{petId}") && !err.contains("embedded "),
        "{err}"
    );
    let (ok, out, err) = run_apigate(&search, &[("APIGATE_CACHE_DIR", cache)]).await;
    assert!(ok, "{err}");
    assert!(out.contains("/pet/{petId}"), "{out}");
    // The Petstore's 20 operations are one batch: the line that it is done (a larger spec
    // says when it starts and how far it is every few seconds: `cli::progress`).
    assert!(
        err.lines()
            .any(|l| l.starts_with("embedded 20 operations in ")),
        "{err}"
    );
    // Cached now: nothing to embed, nothing said.
    let (ok, _, err) = run_apigate(&search, &[("APIGATE_CACHE_DIR", cache)]).await;
    assert!(ok && !err.contains("embedded "), "{err}");
}
