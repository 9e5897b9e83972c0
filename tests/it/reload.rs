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
    // A URL spec, served by the test; it changes when the test says.
    let served: Arc<Mutex<Vec<u8>>> = Arc::new(Mutex::new(petstore_with(&[])));
    let app = Router::new()
        .route(
            "/petstore.json",
            get(|State(s): State<Arc<Mutex<Vec<u8>>>>| async move {
                (
                    [(axum::http::header::CONTENT_TYPE, "application/json")],
                    s.lock().unwrap().clone(),
                )
            }),
        )
        .with_state(served.clone());
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
    // The URL spec was not touched: still its first version.
    assert!(
        !found(&client, "adopt the pet", "remote")
            .await
            .contains(&"remote:adopt".into())
    );

    // 2. The admin route: a reload now, then none within the second.
    served
        .lock()
        .unwrap()
        .clone_from(&petstore_with(&["groom"]));
    let reloaded = post_reload(&base, Some(KEY)).await;
    assert_eq!(reloaded.status(), 200);
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
    let again = post_reload(&base, Some(KEY)).await;
    assert_eq!(again.status(), 429);
    // Without the key the route is closed like the others.
    let anonymous = post_reload(&base, None).await;
    assert_eq!(anonymous.status(), 401);

    // 3. SIGHUP, for the URL spec (no file to watch).
    served
        .lock()
        .unwrap()
        .clone_from(&petstore_with(&["groom", "walk"]));
    let pid = proc.child.id().unwrap().to_string();
    assert!(
        std::process::Command::new("kill")
            .args(["-HUP", &pid])
            .status()
            .unwrap()
            .success()
    );
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
    assert!(proc.terminate().await, "{}", proc.log());
}
