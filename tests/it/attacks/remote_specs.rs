//! Issue 41, items 10 and 13: documents apigate fetches from URLs. A remote spec's `$ref` to
//! another origin (an "internal" server on another loopback port, holding a secret; a closed
//! port) is not fetched, says "not allowed" the same way for an open and a closed port, and the
//! secret reaches neither `api_schema` nor `/health`; an origin the operator lists
//! (`ref-origins`) is fetched. A URL spec over the size cap is refused with a message that
//! names the flag, while the server's peak memory stays bounded; an unchanged large document
//! is downloaded again on reload but not parsed again. All against `apigate dev --config` (the
//! real binary) and specs served over real HTTP.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use serde_json::{Value, json};

use crate::support::{KEY, Proc, Upstream, call, dev_config, get_json, mcp_client, poll};

/// What the internal server holds: it must never reach an agent or `/health`.
const SECRET: &str = "INTERNAL-SECRET-7f3a9c";

/// A document the test serves, which it can replace, and how many times it was asked for.
#[derive(Clone, Default)]
struct Doc {
    bytes: Arc<Mutex<Vec<u8>>>,
    hits: Arc<AtomicUsize>,
    /// Sent in 64 KiB chunks without a `Content-Length`.
    chunked: Arc<std::sync::atomic::AtomicBool>,
}

impl Doc {
    fn set(&self, value: &Value) {
        *self.bytes.lock().unwrap() = serde_json::to_vec(value).unwrap();
    }

    fn set_bytes(&self, bytes: Vec<u8>) {
        *self.bytes.lock().unwrap() = bytes;
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

async fn serve_doc(State(doc): State<Doc>) -> axum::response::Response {
    use axum::response::IntoResponse;
    doc.hits.fetch_add(1, Ordering::SeqCst);
    let bytes = doc.bytes.lock().unwrap().clone();
    let json = [(axum::http::header::CONTENT_TYPE, "application/json")];
    if doc.chunked.load(Ordering::SeqCst) {
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
            bytes.chunks(64 << 10).map(|c| Ok(c.to_vec())).collect();
        let body = axum::body::Body::from_stream(futures::stream::iter(chunks));
        return (json, body).into_response();
    }
    (json, bytes).into_response()
}

/// Serves `docs` (path → document) on a fresh loopback port; the origin `http://127.0.0.1:P`.
async fn serve_docs(docs: &[(&str, &Doc)]) -> String {
    let mut app = Router::new();
    for (path, doc) in docs {
        app = app.route(path, get(serve_doc).with_state((*doc).clone()));
    }
    format!("http://{}", crate::support::serve_app(app).await)
}

/// A one-operation spec (`getThing`) whose 200 answer's schema is `schema`.
fn spec_with(schema: Value) -> Value {
    json!({
        "openapi": "3.0.3",
        "info": {"title": "things", "version": "1"},
        "paths": {"/things/{id}": {"get": {
            "operationId": "getThing",
            "summary": "Get a thing",
            "parameters": [{"name": "id", "in": "path", "required": true,
                "schema": {"type": "string"}}],
            "responses": {"200": {"description": "the thing",
                "content": {"application/json": {"schema": schema}}}}
        }}}
    })
}

/// `apigate dev --config` of one API `things` on `spec_url` (with `extra` TOML lines).
async fn spawn_with(dir: &Path, spec_url: &str, upstream: &str, extra: &str) -> (Proc, String) {
    let config = dir.join("apigate.toml");
    std::fs::write(
        &config,
        format!(
            "[[api]]\nname = \"things\"\nspec = \"{spec_url}\"\nupstream = \"{upstream}\"\n{extra}"
        ),
    )
    .unwrap();
    Proc::spawn_with_env(
        "dev",
        &dev_config(&config),
        &[("RUST_LOG", "info,apigate::spec=debug")],
        "apigate dev:",
    )
    .await
}

/// `POST /admin/v1/reload` with the test key, one second after the last (the route allows
/// one a second): (status, body).
async fn reload(base: &str) -> (u16, Value) {
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let response = reqwest::Client::new()
        .post(format!("{base}/admin/v1/reload"))
        .header("x-api-key", KEY)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The `things` API's `lastError` in `/health` (public).
async fn last_error(base: &str) -> (Value, String) {
    let health = get_json(format!("{base}/health")).await;
    let error = health["specs"][0]["lastError"].clone();
    (error, health.to_string())
}

/// `text` with every `:PORT` written as `:P`, to compare two messages about different ports.
fn without_ports(text: &str, ports: &[&str]) -> String {
    ports
        .iter()
        .fold(text.to_string(), |t, p| t.replace(&format!(":{p}"), ":P"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_specs_ref_to_another_origin_is_not_fetched() {
    let upstream = Upstream::start().await;
    // The "internal" server, on its own loopback port.
    let secret = Doc::default();
    secret.set(&json!({"Secret": {"type": "object", "description": SECRET}}));
    let internal = serve_docs(&[("/secret.json", &secret)]).await;
    let internal_port = internal.rsplit(':').next().unwrap().to_string();
    let closed_port = crate::support::free_port().to_string();
    // The spec's own origin: the spec and a document beside it (a same-origin ref works).
    let (spec, common) = (Doc::default(), Doc::default());
    common.set(&json!({"Thing": {"type": "object", "properties": {"id": {"type": "string"}}}}));
    spec.set(&spec_with(json!({"$ref": "common.json#/Thing"})));
    let origin = serve_docs(&[("/spec.json", &spec), ("/common.json", &common)]).await;
    let own_port = origin.rsplit(':').next().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let (mut proc, url) = spawn_with(
        dir.path(),
        &format!("{origin}/spec.json"),
        &upstream.url(),
        "",
    )
    .await;
    let base = url.trim_end_matches("/mcp").to_string();
    let client = mcp_client(&url, &[("x-api-key", KEY)]).await;
    let (err, schema) = call(&client, "api_schema", json!({"operationId": "getThing"})).await;
    assert!(!err && schema.to_string().contains("\"id\""), "{schema}");

    // A ref to the internal server (open), then to a closed port: neither is fetched, and
    // the two say the same, apart from the port.
    let mut public = Vec::new();
    let mut operator = Vec::new();
    for port in [&internal_port, &closed_port] {
        spec.set(&spec_with(
            json!({"$ref": format!("http://127.0.0.1:{port}/secret.json#/Secret")}),
        ));
        let (status, body) = reload(&base).await;
        let (error, health) = last_error(&base).await;
        assert!(!health.contains(SECRET), "{health}");
        let args = json!({"operationId": "getThing", "include": ["responses"]});
        let (err, schema) = call(&client, "api_schema", args).await;
        assert!(!err, "{schema}");
        assert!(
            !schema.to_string().contains(SECRET),
            "api_schema shows the internal document: {schema}"
        );
        assert_eq!(secret.hits(), 0, "the internal server was asked");
        // The previous version keeps serving; the operator's answer and /health say why.
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["apis"][0]["state"], "kept", "{body}");
        let error = error.as_str().unwrap_or_default().to_string();
        assert!(error.contains("not allowed"), "{error}");
        let told = body["apis"][0]["error"].as_str().unwrap_or_default();
        assert!(told.contains("not allowed"), "{body}");
        let ports = [port.as_str(), own_port.as_str()];
        public.push(without_ports(&error, &ports));
        operator.push(without_ports(told, &ports));
    }
    assert_eq!(secret.hits(), 0, "the internal server was asked");
    assert_eq!(public[0], public[1], "an open and a closed port differ");
    assert_eq!(operator[0], operator[1], "an open and a closed port differ");
    drop(client);
    assert!(proc.terminate().await, "{}", proc.log());

    // The operator lists the internal origin: now it is fetched (the spec came from loopback,
    // so loopback refs may be allowed).
    spec.set(&spec_with(
        json!({"$ref": format!("{internal}/secret.json#/Secret")}),
    ));
    let extra = format!("ref-origins = [\"{internal}\"]\n");
    let (mut proc, url) = spawn_with(
        dir.path(),
        &format!("{origin}/spec.json"),
        &upstream.url(),
        &extra,
    )
    .await;
    let client = mcp_client(&url, &[("x-api-key", KEY)]).await;
    let args = json!({"operationId": "getThing", "include": ["responses"]});
    let (err, schema) = call(&client, "api_schema", args).await;
    assert!(!err && schema.to_string().contains(SECRET), "{schema}");
    assert_eq!(secret.hits(), 1);
    drop(client);
    assert!(proc.terminate().await, "{}", proc.log());
}

/// The peak resident memory of a process, in bytes (`VmHWM`).
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kb * 1024
}

/// A valid spec of about `bytes` bytes, made of many small schemas (the shape that makes a
/// parsed document some 30 times its size).
fn big_spec(bytes: usize) -> Vec<u8> {
    let mut schemas = serde_json::Map::new();
    let mut i = 0;
    let mut size = 0;
    while size < bytes {
        let name = format!("S{i}");
        let schema = json!({"type": "object", "properties": {"a": {"type": "string"},
            "b": {"type": "integer"}, "c": {"type": "array", "items": {"type": "boolean"}}}});
        size += name.len() + schema.to_string().len() + 4;
        schemas.insert(name, schema);
        i += 1;
    }
    let mut spec = spec_with(json!({"$ref": "#/components/schemas/S0"}));
    spec["components"] = json!({ "schemas": schemas });
    serde_json::to_vec(&spec).unwrap()
}

/// A URL spec that grows to 40 MB (under the old 64 MiB cap, over the new default of 32 MiB)
/// on a reload is refused with a message naming the flag, and the server's peak memory stays
/// far below what parsing it would take. The server runs under a 4 GB address-space limit so
/// the unfixed code cannot take the machine down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_spec_over_the_cap_is_refused_and_memory_stays_bounded() {
    let upstream = Upstream::start().await;
    let spec = Doc::default();
    spec.set(&spec_with(json!({"type": "object"})));
    let origin = serve_docs(&[("/spec.json", &spec)]).await;
    let dir = tempfile::tempdir().unwrap();
    let (mut proc, url) = spawn_with(
        dir.path(),
        &format!("{origin}/spec.json"),
        &upstream.url(),
        "",
    )
    .await;
    let pid = proc.child.id().unwrap();
    let limited = std::process::Command::new("prlimit")
        .args(["--pid", &pid.to_string(), "--as=4000000000"])
        .status()
        .unwrap();
    assert!(limited.success());
    let base = url.trim_end_matches("/mcp").to_string();
    let before = peak_rss(pid);
    spec.set_bytes(big_spec(40_000_000));
    let (status, body) = reload(&base).await;
    let after = peak_rss(pid);
    eprintln!(
        "peak RSS before {} MB, after the 40 MB spec {} MB",
        before >> 20,
        after >> 20
    );
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["apis"][0]["state"], "kept", "{body}");
    let message = body["apis"][0]["error"].as_str().unwrap_or_default();
    assert!(message.contains("--max-spec-bytes"), "{message}");
    let (error, _) = last_error(&base).await;
    assert!(
        error
            .as_str()
            .unwrap_or_default()
            .contains("--max-spec-bytes"),
        "{error}"
    );
    assert!(
        after < before + (100 << 20),
        "the refused document raised the peak from {} MB to {} MB",
        before >> 20,
        after >> 20
    );
    // The same document sent in chunks, without a Content-Length: the read stops at the cap.
    spec.chunked.store(true, Ordering::SeqCst);
    let (status, body) = reload(&base).await;
    let chunked = peak_rss(pid);
    eprintln!("peak RSS after the chunked 40 MB spec {} MB", chunked >> 20);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["apis"][0]["state"], "kept", "{body}");
    let message = body["apis"][0]["error"].as_str().unwrap_or_default();
    assert!(message.contains("--max-spec-bytes"), "{message}");
    assert!(chunked < before + (100 << 20), "{} MB", chunked >> 20);
    assert!(proc.is_running(), "{}", proc.log());
    assert!(proc.terminate().await, "{}", proc.log());
}

/// The number of times the log says a document was parsed.
fn parses(proc: &Proc) -> usize {
    proc.stderr().matches("document parsed").count()
}

/// A reload of an unchanged 5 MB URL spec (served without an `ETag`, so it is downloaded
/// again each time) does not parse it again; a changed one is parsed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchanged_document_is_not_parsed_again() {
    let upstream = Upstream::start().await;
    let spec = Doc::default();
    spec.set_bytes(big_spec(5_000_000));
    let origin = serve_docs(&[("/spec.json", &spec)]).await;
    let dir = tempfile::tempdir().unwrap();
    let (mut proc, url) = spawn_with(
        dir.path(),
        &format!("{origin}/spec.json"),
        &upstream.url(),
        "",
    )
    .await;
    let base = url.trim_end_matches("/mcp").to_string();
    assert_eq!(parses(&proc), 1, "{}", proc.log());
    for _ in 0..3 {
        let (status, body) = reload(&base).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["apis"][0]["state"], "unchanged", "{body}");
    }
    assert_eq!(spec.hits(), 4, "every reload downloads the document");
    assert_eq!(parses(&proc), 1, "an unchanged document was parsed again");
    // A changed document is parsed, once.
    let mut changed = big_spec(5_000_000);
    changed.extend_from_slice(b"\n");
    spec.set_bytes(changed);
    let (status, body) = reload(&base).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["apis"][0]["state"], "reloaded", "{body}");
    poll(
        "the changed document was parsed",
        Duration::from_secs(30),
        Duration::from_millis(50),
        || async { (parses(&proc) == 2).then_some(()) },
    )
    .await;
    assert!(proc.terminate().await, "{}", proc.log());
}

/// The red team's third break: an `[[api]]` with a URL spec, no `upstream` and a configured
/// `Authorization` sent to wherever the document's `servers` say. A new version of the
/// document naming another origin took the credential there at its next poll or reload.
/// Now the running version keeps serving (and says why, without the origin, in `/health`):
/// the other origin never sees a request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reloaded_document_cannot_move_the_credential_to_another_origin() {
    let good = Upstream::start().await;
    let evil = Upstream::start().await;
    let pets = |server: &str| {
        json!({
            "openapi": "3.0.3",
            "info": {"title": "pets", "version": "1"},
            "servers": [{"url": format!("{server}/v2")}],
            "paths": {"/pet/{petId}": {"get": {
                "operationId": "getPetById",
                "parameters": [{"name": "petId", "in": "path", "required": true,
                    "schema": {"type": "integer"}}],
                "responses": {"200": {"description": "a pet"}}
            }}}
        })
    };
    let doc = Doc::default();
    doc.set(&pets(&good.url()));
    let origin = serve_docs(&[("/pets.json", &doc)]).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("apigate.toml");
    std::fs::write(
        &config,
        format!(
            "[[api]]\nname = \"pets\"\nspec = \"{origin}/pets.json\"\n\
             upstream-headers = {{ Authorization = \"env:PETS_AUTH\" }}\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600)).unwrap();
    let token = "Bearer pets-secret-token-4d1b7e";
    let (mut proc, url) = Proc::spawn_with_env(
        "dev",
        &dev_config(&config),
        &[("PETS_AUTH", token)],
        "apigate dev:",
    )
    .await;
    let base = url.trim_end_matches("/mcp").to_string();
    let client = mcp_client(&url, &[("x-api-key", KEY)]).await;
    let get_pet = json!({"operationId": "getPetById", "pathParams": {"petId": 1}});
    let (err, _) = call(&client, "api_execute", get_pet.clone()).await;
    assert!(!err);
    assert_eq!(good.requests().len(), 1);

    // The document now sends calls to another origin.
    doc.set(&pets(&evil.url()));
    let (status, body) = reload(&base).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["apis"][0]["state"], "kept", "{body}");
    let (error, health) = last_error(&base).await;
    let error = error.as_str().unwrap_or_default();
    assert!(
        error.contains("an origin the running one does not"),
        "{health}"
    );
    assert!(!health.contains(&evil.url()), "{health}");

    let (err, _) = call(&client, "api_execute", get_pet).await;
    assert!(!err);
    assert!(evil.requests().is_empty(), "the other origin was called");
    let sent = good.requests();
    assert_eq!(sent.len(), 2);
    assert!(
        sent.iter()
            .all(|r| crate::support::header_text(&r.headers, "authorization") == token)
    );
    assert!(proc.terminate().await, "{}", proc.log());
}
