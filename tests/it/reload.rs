//! Reloading the APIs without a restart, against the real binary (`apigate dev --config`):
//! a spec file changed on disk, `POST /admin/v1/reload`, `SIGHUP` for a URL spec, and a
//! document that does not load, which leaves the previous version serving with the error in
//! `/health`. Calls keep working throughout.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use serde_json::{Value, json};

use crate::support::*;

/// A spec the test serves over HTTP, and the status of each answer (200 or 304).
#[derive(Clone, Default)]
struct Served {
    bytes: Arc<Mutex<Vec<u8>>>,
    answers: Arc<Mutex<Vec<u16>>>,
}

/// `GET` of the served spec, with an `ETag` (its length) and 304 to a matching
/// `If-None-Match`.
async fn serve_spec(
    State(served): State<Served>,
    headers: axum::http::HeaderMap,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let bytes = served.bytes.lock().unwrap().clone();
    let etag = format!("\"{}\"", bytes.len());
    let asked = headers.get("if-none-match").and_then(|v| v.to_str().ok());
    if asked == Some(etag.as_str()) {
        served.answers.lock().unwrap().push(304);
        return axum::http::StatusCode::NOT_MODIFIED.into_response();
    }
    served.answers.lock().unwrap().push(200);
    (
        [
            (
                axum::http::header::CONTENT_TYPE,
                "application/json".to_string(),
            ),
            (axum::http::header::ETAG, etag),
        ],
        bytes,
    )
        .into_response()
}

/// The petstore spec with one more operation, `POST /pet/{petId}/NAME` (`operationId` NAME).
fn petstore_with(extra: &[&str]) -> Vec<u8> {
    let text = std::fs::read_to_string(spec_path("petstore-3.0.json")).unwrap();
    let mut spec: Value = serde_json::from_str(&text).unwrap();
    for name in extra {
        spec["paths"][format!("/pet/{{petId}}/{name}")] = json!({"post": {
            "tags": ["pet"],
            "summary": format!("{name} the pet with this id"),
            "operationId": name,
            "parameters": [{"name": "petId", "in": "path", "required": true,
                "schema": {"type": "integer"}}],
            "responses": {"200": {"description": "done"}}
        }});
    }
    serde_json::to_vec_pretty(&spec).unwrap()
}

/// Replaces a file at once (written beside it, then renamed), as editors and deploys do.
fn replace(path: &Path, bytes: &[u8]) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

/// The ids `api_discover` finds for `query` in `api`.
async fn found(client: &rmcp::Peer<rmcp::RoleClient>, query: &str, api: &str) -> Vec<String> {
    let result = call_ok(
        client,
        "api_discover",
        json!({"query": query, "api": api, "limit": 50}),
    )
    .await;
    strings(&result["results"], "operationId")
        .into_iter()
        .map(str::to_string)
        .collect()
}

/// Polls until `api_discover` finds `id` (or fails after 20 s).
async fn until_found(client: &rmcp::Peer<rmcp::RoleClient>, query: &str, api: &str, id: &str) {
    poll(
        &format!("{id} never showed up for {query:?}"),
        Duration::from_secs(20),
        Duration::from_millis(200),
        || async {
            found(client, query, api)
                .await
                .contains(&id.to_string())
                .then_some(())
        },
    )
    .await;
}

/// `apigate dev --config CONFIG` on a fresh port: the process and its MCP URL.
async fn spawn_config(config: &Path) -> (Proc, String) {
    Proc::spawn_with_env("dev", &dev_config(config), &[], "apigate dev:").await
}

/// `POST /admin/v1/reload`, with the test key or without.
async fn post_reload(base: &str, key: Option<&str>) -> reqwest::Response {
    let mut request = reqwest::Client::new().post(format!("{base}/admin/v1/reload"));
    if let Some(key) = key {
        request = request.header("x-api-key", key);
    }
    request.send().await.unwrap()
}

fn api_health<'a>(health: &'a Value, name: &str) -> &'a Value {
    health["specs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in {health}"))
}

#[tokio::test]
async fn every_trigger_reloads_and_a_broken_document_keeps_the_previous_version() {
    let upstream = Upstream::start().await;
    // A URL spec, served by the test with an ETag; it changes when the test says. Each
    // request's answer is recorded: 200 or 304.
    let served = Served::default();
    served.bytes.lock().unwrap().clone_from(&petstore_with(&[]));
    let app = Router::new()
        .route("/petstore.json", get(serve_spec))
        .with_state(served.clone());
    let Served {
        bytes: served,
        answers,
    } = served;
    let specs = serve_app(app).await;
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("petstore.json");
    std::fs::write(&local, petstore_with(&[])).unwrap();
    let config = dir.path().join("apigate.toml");
    std::fs::write(
        &config,
        format!(
            "[[api]]\nname = \"local\"\nspec = \"petstore.json\"\nupstream = \"{up}\"\n\n\
             [[api]]\nname = \"remote\"\nspec = \"http://{specs}/petstore.json\"\n\
             upstream = \"{up}\"\npoll = \"1h\"\n",
            up = upstream.url(),
        ),
    )
    .unwrap();
    let (mut proc, url) = spawn_config(&config).await;
    let base = url.trim_end_matches("/mcp").to_string();
    let client = mcp_client(&url, &[("x-api-key", KEY)]).await;
    let health = get_json(format!("{base}/health")).await;
    let first_sha = api_health(&health, "local")["sha256"].clone();
    assert!(api_health(&health, "local")["lastError"].is_null());

    // 1. The file changes on disk: the watcher reloads it.
    replace(&local, &petstore_with(&["adopt"]));
    until_found(&client, "adopt the pet", "local", "local:adopt").await;
    let health = get_json(format!("{base}/health")).await;
    assert_ne!(api_health(&health, "local")["sha256"], first_sha);
    // The URL spec was not touched: still its first version, and the reload asked with its
    // ETag and downloaded nothing.
    assert!(
        !found(&client, "adopt the pet", "remote")
            .await
            .contains(&"remote:adopt".into())
    );
    assert_eq!(answers.lock().unwrap().as_slice(), [200, 304]);

    // 2. The admin route: a reload now, then none within the second.
    served
        .lock()
        .unwrap()
        .clone_from(&petstore_with(&["groom"]));
    let reloaded = post_reload(&base, Some(KEY)).await;
    assert_eq!(reloaded.status(), 200);
    // At once, within the second that admits one reload (after the search below, a loaded
    // machine could be past it).
    let again = post_reload(&base, Some(KEY)).await;
    assert_eq!(again.status(), 429);
    let report: Value = reloaded.json().await.unwrap();
    let states: Vec<(&str, &str)> = report["apis"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| (a["name"].as_str().unwrap(), a["state"].as_str().unwrap()))
        .collect();
    assert!(states.contains(&("remote", "reloaded")), "{report}");
    assert!(
        found(&client, "groom the pet", "remote")
            .await
            .contains(&"remote:groom".into())
    );
    // Without the key the route is closed like the others.
    let anonymous = post_reload(&base, None).await;
    assert_eq!(anonymous.status(), 401);

    // 3. SIGHUP, for the URL spec (no file to watch).
    served
        .lock()
        .unwrap()
        .clone_from(&petstore_with(&["groom", "walk"]));
    signal_hup(&proc);
    until_found(&client, "walk the pet", "remote", "remote:walk").await;

    // 4. A broken document: the previous version keeps serving, and /health says why.
    replace(&local, b"{\"openapi\": \"3.0.0\", \"paths\": ");
    let broken = poll(
        "/health shows the failed reload",
        Duration::from_secs(20),
        Duration::from_millis(200),
        || async {
            let health = get_json(format!("{base}/health")).await;
            let error = api_health(&health, "local")["lastError"].clone();
            error.as_str().map(str::to_string)
        },
    )
    .await;
    assert!(broken.contains("did not load"), "{broken}");
    // Anyone may read /health: the file is named, its folder is not.
    assert!(broken.contains("petstore.json"), "{broken}");
    let folder = dir.path().display().to_string();
    assert!(!broken.contains(&folder), "{broken}");
    assert!(
        found(&client, "adopt the pet", "local")
            .await
            .contains(&"local:adopt".into())
    );
    let pets = execute_ok(
        &client,
        json!({"operationId": "local:findPetsByStatus", "query": {"status": ["sold"]}}),
    )
    .await;
    assert_eq!(pets["status"], 200, "{pets}");
    assert!(proc.is_running(), "{}", proc.log());
    // Fixed: it serves the new version and the error is gone.
    replace(&local, &petstore_with(&["adopt", "feed"]));
    until_found(&client, "feed the pet", "local", "local:feed").await;
    let health = get_json(format!("{base}/health")).await;
    assert!(
        api_health(&health, "local")["lastError"].is_null(),
        "{health}"
    );
    assert!(proc.terminate().await, "{}", proc.log());
}

#[tokio::test]
async fn a_config_that_breaks_on_reload_leaves_the_running_apis_serving() {
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("petstore.json"), petstore_with(&[])).unwrap();
    let config = dir.path().join("apigate.toml");
    let good = format!(
        "[[api]]\nname = \"pets\"\nspec = \"petstore.json\"\nupstream = \"{}\"\n",
        upstream.url()
    );
    std::fs::write(&config, &good).unwrap();
    let (mut proc, url) = spawn_config(&config).await;
    let base = url.trim_end_matches("/mcp").to_string();
    let client = mcp_client(&url, &[("x-api-key", KEY)]).await;
    // A key that does not exist, and a second API with the name of the first.
    for broken in [format!("{good}retries = 3\n"), format!("{good}\n{good}")] {
        replace(&config, broken.as_bytes());
        let error = poll(
            "/health shows the failed reload",
            Duration::from_secs(20),
            Duration::from_millis(200),
            || async {
                let health = get_json(format!("{base}/health")).await;
                health["specs"][0]["lastError"].as_str().map(str::to_string)
            },
        )
        .await;
        assert!(error.contains("the last reload failed"), "{error}");
        assert!(
            !error.contains(&dir.path().display().to_string()),
            "{error}"
        );
        let pets = execute_ok(
            &client,
            json!({"operationId": "findPetsByStatus", "query": {"status": ["sold"]}}),
        )
        .await;
        assert_eq!(pets["status"], 200);
        replace(&config, good.as_bytes());
        poll(
            "the error clears once the config is good again",
            Duration::from_secs(20),
            Duration::from_millis(200),
            || async {
                let health = get_json(format!("{base}/health")).await;
                health["specs"][0]["lastError"].is_null().then_some(())
            },
        )
        .await;
    }
    assert!(proc.log().contains("did not reload"), "{}", proc.log());
    assert!(proc.terminate().await, "{}", proc.log());
}

#[tokio::test]
async fn in_production_only_an_admin_key_may_reload() {
    let db = crate::db::TestDb::new().await;
    let url = db.url.as_str();
    let upstream = Upstream::start().await;
    let agent = cli_key(url, "agent", "apigate.discover,apigate.execute").await;
    let admin = cli_key(url, "ops", "apigate.admin").await;
    let petstore = spec_path("petstore-3.0.json");
    let (mut proc, mcp_url) =
        spawn_serve(&petstore, &upstream.url(), &[], &[("DATABASE_URL", url)]).await;
    let base = mcp_url.trim_end_matches("/mcp");
    let refused = post_reload(base, agent["key"].as_str()).await;
    assert_eq!(refused.status(), 403);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["missing"], "apigate.admin", "{body}");
    let forged = post_reload(base, Some("ak_not-a-key-of-this-server")).await;
    assert_eq!(forged.status(), 401);
    let reloaded = post_reload(base, admin["key"].as_str()).await;
    assert_eq!(reloaded.status(), 200);
    let report: Value = reloaded.json().await.unwrap();
    assert_eq!(report["apis"][0]["state"], "unchanged", "{report}");
    let storm = post_reload(base, admin["key"].as_str()).await;
    assert_eq!(storm.status(), 429);
    signal_hup(&proc);

    // Every one is audited: who asked (the key, or the signal), and how it went.
    let admin_id = format!("key:{}", admin["publicId"].as_str().unwrap());
    let agent_id = format!("key:{}", agent["publicId"].as_str().unwrap());
    let expected = vec![
        json!(["admin.access", "denied", "FORBIDDEN", agent_id, null]),
        json!(["apis.reload", "allowed", null, admin_id, "apis:"]),
        json!(["apis.reload", "denied", "RATE_LIMITED", admin_id, null]),
        json!(["apis.reload", "allowed", null, "SIGHUP", "apis:"]),
    ];
    let rows = poll(
        "four audit rows of the reload route and the signal",
        Duration::from_secs(20),
        Duration::from_millis(200),
        || async {
            let rows = admin_rows(url).await;
            (rows.len() >= expected.len()).then_some(rows)
        },
    )
    .await;
    assert_eq!(rows, expected);
    assert!(proc.terminate().await, "{}", proc.log());
}

/// Sends `SIGHUP` to the server.
fn signal_hup(proc: &Proc) {
    let pid = proc.child.id().unwrap().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-HUP", &pid])
            .status()
            .unwrap()
            .success()
    );
}

/// The audit rows of admin actions other than creating keys: operation, decision, code,
/// actor, target.
async fn admin_rows(database_url: &str) -> Vec<Value> {
    let pool = sqlx::PgPool::connect(database_url).await.unwrap();
    let rows: Vec<(Value,)> = sqlx::query_as(
        "SELECT json_build_array(operation, decision, error_code, actor, target) FROM audit_log \
         WHERE tool = 'admin' AND operation <> 'key.create' ORDER BY id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    pool.close().await;
    rows.into_iter().map(|(r,)| r).collect()
}

/// A client on protocol 2025-11-25 (a session with its own stream, as Claude Code and
/// OpenCode use) that reports each `notifications/tools/list_changed`.
#[derive(Clone)]
struct ListChanged(tokio::sync::mpsc::UnboundedSender<()>);

impl rmcp::ClientHandler for ListChanged {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        rmcp::model::ClientConfig::default()
            .with_protocol_version(rmcp::model::ProtocolVersion::V_2025_11_25)
    }

    async fn on_tool_list_changed(
        &self,
        _context: rmcp::service::NotificationContext<rmcp::RoleClient>,
    ) {
        let _ = self.0.send(());
    }
}

/// A protocol 2026-07-28 `subscriptions/listen` request for `toolsListChanged`, over raw
/// HTTP: its answer is an SSE stream that stays open.
struct Listen {
    response: reqwest::Response,
    /// Everything the stream sent so far.
    seen: String,
}

/// A `subscriptions/listen` request (protocol 2026-07-28) to `url` with `key`, for changes
/// of the tool list.
pub(crate) fn listen_request(url: &str, key: &str) -> reqwest::RequestBuilder {
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "listener", "version": "1"},
    });
    reqwest::Client::new()
        .post(url)
        .header("x-api-key", key)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", "subscriptions/listen")
        .json(
            &json!({"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen",
            "params": {"notifications": {"toolsListChanged": true}, "_meta": meta}}),
        )
}

impl Listen {
    /// Opens the stream and waits for the server's acknowledgment.
    async fn open(url: &str) -> Listen {
        let response = listen_request(url, KEY).send().await.unwrap();
        assert_eq!(response.status(), 200);
        let mut listen = Listen {
            response,
            seen: String::new(),
        };
        listen
            .until("notifications/subscriptions/acknowledged")
            .await;
        listen
    }

    /// Reads the stream until it has sent `text` (20 s at most).
    async fn until(&mut self, text: &str) {
        let read = async {
            while !self.seen.contains(text) {
                let chunk = self
                    .response
                    .chunk()
                    .await
                    .unwrap()
                    .expect("the stream ended");
                self.seen.push_str(&String::from_utf8_lossy(&chunk));
            }
        };
        tokio::time::timeout(Duration::from_secs(20), read)
            .await
            .unwrap_or_else(|_| panic!("no {text} within 20 s: {}", self.seen));
    }
}

/// The names the `api` argument of `api_discover` lists (none: the argument is not shown).
async fn api_names(client: &rmcp::Peer<rmcp::RoleClient>) -> Vec<String> {
    let tools = client.list_all_tools().await.unwrap();
    let discover = tools.iter().find(|t| t.name == "api_discover").unwrap();
    let api = &discover.input_schema["properties"]["api"];
    api["enum"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|n| n.as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn adding_an_api_changes_the_tool_list_and_open_sessions_hear_of_it() {
    use rmcp::ServiceExt;
    use rmcp::transport::StreamableHttpClientTransport;
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("petstore.json"), petstore_with(&[])).unwrap();
    let api = |name: &str| {
        format!(
            "[[api]]\nname = \"{name}\"\nspec = \"petstore.json\"\nupstream = \"{}\"\n\n",
            upstream.url()
        )
    };
    let config = dir.path().join("apigate.toml");
    std::fs::write(&config, api("pets") + &api("shop")).unwrap();
    let (mut proc, url) = spawn_config(&config).await;

    // A session of an MCP client from before 2026-07-28, and a 2026-07-28 listen stream.
    let (tx, mut heard) = tokio::sync::mpsc::unbounded_channel();
    let headers = [(
        axum::http::header::HeaderName::from_static("x-api-key"),
        axum::http::header::HeaderValue::from_static(KEY),
    )]
    .into_iter()
    .collect();
    let transport = StreamableHttpClientTransport::with_client(
        reqwest::Client::new(),
        StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(headers),
    );
    let session = ListChanged(tx).serve(transport).await.unwrap();
    assert_eq!(api_names(session.peer()).await, ["pets", "shop"]);
    let mut stream = Listen::open(&url).await;

    // A reload that changes only operations changes no tool: nothing is sent for it.
    replace(
        &dir.path().join("petstore.json"),
        &petstore_with(&["adopt"]),
    );
    until_found(session.peer(), "adopt the pet", "pets", "pets:adopt").await;
    assert!(heard.try_recv().is_err(), "a list-changed without a change");
    // A third API: the `api` argument lists it.
    replace(
        &config,
        (api("pets") + &api("shop") + &api("zoo")).as_bytes(),
    );
    tokio::time::timeout(Duration::from_secs(20), heard.recv())
        .await
        .expect("the session heard of the new tool list within 20 s")
        .unwrap();
    stream.until("notifications/tools/list_changed").await;
    assert_eq!(api_names(session.peer()).await, ["pets", "shop", "zoo"]);

    assert!(proc.terminate().await, "{}", proc.log());
}

#[tokio::test]
async fn one_api_publishes_no_api_argument() {
    let upstream = Upstream::start().await;
    let petstore = spec_path("petstore-3.0.json");
    let (mut proc, url) = spawn_dev(&petstore, Some(&upstream.url()), &[], &[]).await;
    let client = mcp_client(&url, &[("x-api-key", KEY)]).await;
    for tool in client.list_all_tools().await.unwrap() {
        assert!(
            tool.input_schema["properties"].get("api").is_none(),
            "{}",
            tool.name
        );
    }
    // It is still accepted, with the API's name or not.
    let found = call_ok(&client, "api_discover", json!({"query": "find pets"})).await;
    assert!(!found["results"].as_array().unwrap().is_empty());
    assert!(proc.terminate().await, "{}", proc.log());
}
