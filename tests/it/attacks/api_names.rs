//! Issue 41, item 16: with several APIs, a caller learns no API it holds no feature for,
//! attacked for real: `apigate dev --config` (the binary) over two APIs that both have `echo`,
//! each its own real upstream, with a server key from Postgres that names only `alpha`. Before
//! the fix a bare `echo` was "several APIs have this operation (alpha:echo, beta:echo)".

use serde_json::{Value, json};

use crate::db::TestDb;
use crate::support::{Proc, call_shown, cli_key, mcp_client, serve_app};

/// An API whose operations are `ops` (operationId, path, summary), each a GET.
fn spec(title: &str, ops: &[(&str, &str, &str)]) -> String {
    let mut paths = serde_json::Map::new();
    for (id, path, summary) in ops {
        paths.insert(
            path.to_string(),
            json!({"get": {"operationId": id, "summary": summary,
                "responses": {"200": {"description": "ok"}}}}),
        );
    }
    json!({"openapi": "3.0.3", "info": {"title": title, "version": "1"}, "paths": paths})
        .to_string()
}

/// An upstream answering every GET with `{"from": NAME}`.
async fn upstream(name: &'static str) -> String {
    let app =
        axum::Router::new().fallback(move || async move { axum::Json(json!({"from": name})) });
    format!("http://{}", serve_app(app).await)
}

#[tokio::test]
async fn a_caller_is_never_shown_an_api_it_holds_no_feature_for() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("alpha.json"),
        spec("Alpha", &[("echo", "/echo", "Echo the request")]),
    )
    .unwrap();
    std::fs::write(
        dir.path().join("beta.json"),
        spec(
            "Beta",
            &[
                ("echo", "/echo", "Echo the request"),
                (
                    "listSecretInvoices",
                    "/invoices",
                    "List the secret invoices",
                ),
            ],
        ),
    )
    .unwrap();
    let config = dir.path().join("apigate.toml");
    std::fs::write(
        &config,
        format!(
            "[[api]]\nname = \"alpha\"\nspec = \"alpha.json\"\nupstream = {:?}\n\n\
             [[api]]\nname = \"beta\"\nspec = \"beta.json\"\nupstream = {:?}\n",
            upstream("alpha").await,
            upstream("beta").await,
        ),
    )
    .unwrap();
    let key = cli_key(&db.url, "alpha-only", "apigate.*,alpha.execute").await;
    let key = key["key"].as_str().expect("the new key").to_string();
    let (mut proc, url) = Proc::spawn_with_env(
        "dev",
        &[
            "dev",
            "--config",
            config.to_str().unwrap(),
            "--api-key",
            &key,
            "--listen",
            "127.0.0.1:0",
        ],
        &[("DATABASE_URL", db.url.as_str())],
        "apigate dev:",
    )
    .await;
    let client = mcp_client(&url, &[("x-api-key", &key)]).await;

    // A bare `echo` is alpha's: the only API the key may use has it.
    let (err, shown, text) =
        call_shown(&client, "api_execute", json!({"operationId": "echo"})).await;
    assert!(!err, "{text}");
    assert_eq!(shown["body"], json!({"from": "alpha"}), "{text}");
    let (err, shown, text) =
        call_shown(&client, "api_schema", json!({"operationId": "echo"})).await;
    assert!(!err, "{text}");
    assert_eq!(shown["operationId"], "alpha:echo", "{text}");

    // Errors name no API but alpha: a near miss of beta's operation, an unknown `api`, a route.
    for (tool, args) in [
        ("api_execute", json!({"operationId": "listSecretInvoice"})),
        ("api_schema", json!({"operationId": "invoices"})),
        (
            "api_discover",
            json!({"query": "secret invoices", "api": "gamma"}),
        ),
        ("api_execute", json!({"method": "GET", "path": "/invoices"})),
        (
            "api_execute",
            json!({"operationId": "echo", "api": "gamma"}),
        ),
    ] {
        let (err, shown, text) = call_shown(&client, tool, args.clone()).await;
        assert!(err, "{tool} {args}: {text}");
        assert!(!text.contains("beta"), "{tool} {args} named beta: {text}");
        assert!(
            !text.contains("Invoices"),
            "{tool} {args} showed beta's operation: {text}"
        );
        let _: &Value = &shown;
    }
    client.cancel().await.unwrap();
    assert!(proc.terminate().await, "{}", proc.log());
}
