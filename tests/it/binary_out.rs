//! Binary responses out (issue 27, item 5), end to end over rmcp's client against a real axum
//! upstream answering in bytes (`tests/data/specs/downloads.json`): a 200 KB zip comes back
//! as a `resource_link` whose `resources/read` returns exactly its bytes; a PNG as `image`
//! content; a text body labelled `image/png` as text; unknown, malformed, expired and other
//! keys' ids are resource-not-found (-32002); the per-key bound drops the oldest;
//! `--download-dir` writes exact bytes under a generated name; over `--max-read-bytes` or
//! holding a credential, nothing is returned; and in production a response held through one
//! replica is read through another.

use std::time::Duration;

use apigate::auth::NewSession;
use apigate::http::ConnLimits;
use axum::Router;
use axum::extract::Path;
use axum::http::header;
use axum::response::IntoResponse;
use base64::Engine as _;
use rmcp::ErrorData;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, ErrorCode, ProtocolVersion,
    ReadResourceRequestParams, ResourceContents,
};
use rmcp::service::{Peer, RoleClient, ServiceError};
use serde_json::{Value, json};

use crate::db::TestDb;
use crate::production::{Options, Prod};
use crate::support::{Server, engine_args, key_holding, session_token, spec_path};

/// The bytes of a 200 KB download: deterministic, not text (xorshift).
pub(crate) fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.max(1);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// A real 1×1 PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

const ZIP_LEN: usize = 200 * 1024;

/// The upstream: `/v1/archives/{name}` (a 200 KB zip per name, with a hostile
/// `Content-Disposition`), `/v1/images/{png,liar,big}`, `/v1/files/{secret}`.
async fn start_upstream() -> String {
    async fn archive(Path(name): Path<String>) -> axum::response::Response {
        let seed = name
            .bytes()
            .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
        (
            [
                (header::CONTENT_TYPE, "application/zip"),
                (
                    header::CONTENT_DISPOSITION,
                    "attachment; filename=\"../../escaped.zip\"",
                ),
            ],
            noise(ZIP_LEN, seed),
        )
            .into_response()
    }
    async fn image(Path(name): Path<String>) -> axum::response::Response {
        let png = [(header::CONTENT_TYPE, "image/png")];
        match name.as_str() {
            "png" => (png, PNG.to_vec()).into_response(),
            "liar" => (png, "this is text, not a picture\n".repeat(20)).into_response(),
            "big" => {
                let mut bytes = PNG[..8].to_vec();
                bytes.extend(noise(5000, 3));
                (png, bytes).into_response()
            }
            _ => axum::http::StatusCode::NOT_FOUND.into_response(),
        }
    }
    async fn file(Path(name): Path<String>) -> axum::response::Response {
        let octets = [(header::CONTENT_TYPE, "application/octet-stream")];
        match name.as_str() {
            // The configured upstream credential (`support::engine_args`) inside binary bytes.
            "secret" => {
                let mut bytes = noise(1000, 5);
                bytes.extend_from_slice(b"Bearer upstream-secret-token");
                bytes.extend(noise(1000, 6));
                (octets, bytes).into_response()
            }
            _ => (octets, noise(ZIP_LEN, 9)).into_response(),
        }
    }
    let app = Router::new()
        .route("/v1/archives/{name}", axum::routing::get(archive))
        .route("/v1/images/{name}", axum::routing::get(image))
        .route("/v1/files/{name}", axum::routing::get(file));
    let addr = crate::support::serve_app(app).await;
    format!("http://{addr}/v1")
}

fn args(upstream: &str) -> apigate::cli::args::EngineArgs {
    engine_args(&spec_path("downloads.json"), Some(upstream.to_string()))
}

/// A dev server on the downloads spec with its arguments adjusted, and a client of it.
async fn start(
    upstream: &str,
    adjust: impl FnOnce(&mut apigate::cli::args::EngineArgs),
) -> (Server, rmcp::service::RunningService<RoleClient, ()>) {
    let mut a = args(upstream);
    adjust(&mut a);
    let server = Server::start(a, false).await;
    let client = server.client().await;
    (server, client)
}

/// `api_execute` of `operation` with `name`: the whole MCP result.
async fn execute(client: &Peer<RoleClient>, operation: &str, name: &str) -> CallToolResult {
    let args = json!({"operationId": operation, "pathParams": {"name": name}});
    let Value::Object(map) = args else {
        unreachable!()
    };
    client
        .call_tool(CallToolRequestParams::new("api_execute").with_arguments(map))
        .await
        .expect("tools/call answers")
}

/// The resource link of `downloadArchive` of `name`.
async fn download(client: &Peer<RoleClient>, name: &str) -> String {
    let result = execute(client, "downloadArchive", name).await;
    link(&result).expect("link").0
}

fn structured(result: &CallToolResult) -> &Value {
    assert_ne!(result.is_error, Some(true), "{result:?}");
    result.structured_content.as_ref().expect("structured")
}

/// The result's resource link: (uri, size, mimeType).
fn link(result: &CallToolResult) -> Option<(String, Option<u64>, Option<String>)> {
    result.content.iter().find_map(|c| match c {
        ContentBlock::ResourceLink(r) => Some((r.uri.clone(), r.size, r.mime_type.clone())),
        _ => None,
    })
}

fn has_image(result: &CallToolResult) -> bool {
    result
        .content
        .iter()
        .any(|c| matches!(c, ContentBlock::Image(_)))
}

/// `resources/read` of `uri`: the blob's bytes, or the error.
async fn read(client: &Peer<RoleClient>, uri: &str) -> Result<Vec<u8>, ServiceError> {
    let r = client
        .read_resource(ReadResourceRequestParams::new(uri))
        .await?;
    assert_eq!(r.contents.len(), 1, "{r:?}");
    match &r.contents[0] {
        ResourceContents::BlobResourceContents { blob, uri: u, .. } => {
            assert_eq!(u, uri);
            Ok(base64::engine::general_purpose::STANDARD
                .decode(blob)
                .expect("base64 blob"))
        }
        other => panic!("expected a blob: {other:?}"),
    }
}

/// A read refused as MCP resource-not-found: -32002, which rmcp turns into -32602 (invalid
/// params) for a peer on protocol 2026-07-28 or later, as that version asks.
fn assert_not_found(what: &str, client: &Peer<RoleClient>, r: Result<Vec<u8>, ServiceError>) {
    let version = client
        .peer_info()
        .map(|i| i.protocol_version.clone())
        .unwrap_or_default();
    let expected = if version >= ProtocolVersion::V_2026_07_28 {
        ErrorCode::INVALID_PARAMS
    } else {
        ErrorCode::RESOURCE_NOT_FOUND
    };
    match r {
        Err(ServiceError::McpError(ErrorData { code, message, .. })) => {
            assert_eq!(code, expected, "{what} ({version}): {message}");
            // The same words whatever the reason: nothing says the id exists elsewhere.
            assert!(message.starts_with("no such resource"), "{what}: {message}");
        }
        other => panic!("{what}: expected {expected:?}, got {other:?}"),
    }
}

fn sha256(bytes: &[u8]) -> String {
    apigate::upstream::sha256_hex(bytes)
}

#[tokio::test]
async fn a_200_kb_download_comes_back_as_a_resource_the_key_reads_exactly() {
    let upstream = start_upstream().await;
    for stateless in [false, true] {
        let server = Server::start(args(&upstream), stateless).await;
        let client = server.client().await;
        let expected = noise(ZIP_LEN, {
            "release"
                .bytes()
                .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64))
        });
        let result = execute(&client, "downloadArchive", "release").await;
        let v = structured(&result);
        let body = &v["body"];
        assert_eq!(body["contentType"], "application/zip", "{v}");
        assert_eq!(body["bytes"], ZIP_LEN);
        assert_eq!(body["sha256"], sha256(&expected));
        assert_eq!(body["returnedAs"], "resource_link");
        assert_eq!(v["truncated"], false);
        assert!(body.get("base64").is_none() && body.get("file").is_none());
        let (uri, size, mime) = link(&result).expect("a resource_link");
        assert_eq!(body["uri"], uri.as_str());
        assert!(
            uri.starts_with("apigate://responses/") && uri.len() > 60,
            "{uri}"
        );
        assert_eq!(
            (size, mime.as_deref()),
            (Some(ZIP_LEN as u64), Some("application/zip"))
        );
        // The text block carries no bytes either.
        let text: usize = result
            .content
            .iter()
            .filter_map(|c| c.as_text().map(|t| t.text.len()))
            .sum();
        assert!(text < 4096, "{text} bytes of text");

        let bytes = read(&client, &uri).await.expect("resources/read");
        assert_eq!(sha256(&bytes), sha256(&expected));
        assert_eq!(bytes, expected);
        let listed = client.list_resources(None).await.unwrap().resources;
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].uri, uri);

        // Unknown, malformed and foreign-looking ids: the same not-found.
        let unknown = format!("apigate://responses/{}", "0".repeat(48));
        assert_not_found("unknown", &client, read(&client, &unknown).await);
        assert_not_found("cut", &client, read(&client, &uri[..uri.len() - 1]).await);
        assert_not_found(
            "scheme",
            &client,
            read(&client, &uri.replace("apigate", "file")).await,
        );
        assert_not_found(
            "long",
            &client,
            read(&client, &format!("{uri}{}", "a".repeat(10_000))).await,
        );
        client.cancel().await.unwrap();
    }
}

#[tokio::test]
async fn a_png_comes_back_as_image_content_and_a_lying_header_does_not() {
    let upstream = start_upstream().await;
    let (_server, client) = start(&upstream, |a| a.binary.max_image_bytes = 1000).await;

    let result = execute(&client, "getImage", "png").await;
    let v = structured(&result);
    assert_eq!(v["body"]["returnedAs"], "image", "{v}");
    assert_eq!(v["body"]["sha256"], sha256(PNG));
    assert_eq!(v["body"]["bytes"], PNG.len());
    let image = result
        .content
        .iter()
        .find_map(|c| c.as_image())
        .expect("image content");
    assert_eq!(image.mime_type, "image/png");
    let data = base64::engine::general_purpose::STANDARD
        .decode(&image.data)
        .unwrap();
    assert_eq!(data, PNG);
    assert!(link(&result).is_none());

    // Text sent as image/png is shown as text, not embedded.
    let result = execute(&client, "getImage", "liar").await;
    let v = structured(&result);
    assert!(!has_image(&result) && link(&result).is_none(), "{result:?}");
    assert!(
        v["body"].as_str().unwrap().starts_with("this is text"),
        "{v}"
    );

    // A PNG over --max-image-bytes is a resource.
    let result = execute(&client, "getImage", "big").await;
    let v = structured(&result);
    assert!(!has_image(&result));
    assert_eq!(v["body"]["returnedAs"], "resource_link", "{v}");
    let (uri, _, mime) = link(&result).expect("link");
    assert_eq!(mime.as_deref(), Some("image/png"));
    assert_eq!(read(&client, &uri).await.unwrap().len(), 5008);
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn an_expired_response_is_not_found() {
    let upstream = start_upstream().await;
    let (_server, client) = start(&upstream, |a| {
        a.binary.response_ttl = Duration::from_millis(300)
    })
    .await;
    let result = execute(&client, "downloadArchive", "old").await;
    let (uri, ..) = link(&result).expect("link");
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_not_found("expired", &client, read(&client, &uri).await);
    assert!(crate::support::resource_uris(&client).await.is_empty());
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn the_per_key_bound_drops_the_oldest() {
    let upstream = start_upstream().await;
    // Room for two 200 KB downloads, not three.
    let (_server, client) =
        start(&upstream, |a| a.binary.max_held_bytes = 2 * ZIP_LEN + 1000).await;
    let mut uris = Vec::new();
    for name in ["one", "two", "three"] {
        uris.push(download(&client, name).await);
    }
    assert_oldest_dropped(&client, &client, &uris).await;

    // One response larger than the whole bound is described, not held.
    let (_small, client) = start(&upstream, |a| a.binary.max_held_bytes = 1000).await;
    let result = execute(&client, "downloadArchive", "x").await;
    let v = structured(&result);
    assert!(link(&result).is_none());
    assert!(
        v["body"]["note"]
            .as_str()
            .unwrap()
            .contains("--max-held-bytes"),
        "{v}"
    );
    assert_eq!(v["body"]["bytes"], ZIP_LEN);
}

#[tokio::test]
async fn over_the_read_limit_or_holding_a_credential_nothing_is_returned() {
    let upstream = start_upstream().await;
    let (_server, client) = start(&upstream, |a| a.max_read_bytes = 100_000).await;
    let result = execute(&client, "getFile", "big").await;
    let v = structured(&result);
    assert!(link(&result).is_none() && !has_image(&result), "{result:?}");
    assert_eq!(v["truncated"], true);
    assert!(
        v["body"]["note"]
            .as_str()
            .unwrap()
            .contains("--max-read-bytes"),
        "{v}"
    );
    assert!(v["body"].get("sha256").is_none());

    let result = execute(&client, "getFile", "secret").await;
    let v = structured(&result);
    assert!(link(&result).is_none() && !has_image(&result));
    assert!(
        v["body"]["note"].as_str().unwrap().contains("credential"),
        "{v}"
    );
    assert!(
        !serde_json::to_string(&result)
            .unwrap()
            .contains("upstream-secret-token")
    );
    assert!(crate::support::resource_uris(&client).await.is_empty());
}

#[tokio::test]
async fn the_download_dir_gets_the_exact_bytes_under_a_generated_name() {
    let upstream = start_upstream().await;
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("downloads");
    std::fs::create_dir(&dir).unwrap();
    let mut engine = args(&upstream).build().await.unwrap();
    let path = apigate::tools::binary_out::download_dir(&dir).unwrap();
    engine.binary.download_dir = Some(std::sync::Arc::new(
        apigate::tools::binary_out::DownloadDir::new(path, 1 << 30, Duration::from_secs(600)),
    ));
    let server = Server::start_engine(engine, |_| {}, ConnLimits::default()).await;
    let client = server.client().await;
    let mut paths = Vec::new();
    for _ in 0..2 {
        let result = execute(&client, "downloadArchive", "release").await;
        let v = structured(&result);
        let path = std::path::PathBuf::from(v["body"]["file"].as_str().expect("file"));
        assert_eq!(path.parent(), Some(dir.canonicalize().unwrap().as_path()));
        let name = path.file_name().unwrap().to_str().unwrap();
        assert!(
            name.starts_with("apigate-") && name.ends_with(".zip") && name.len() == 28,
            "{name}"
        );
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(v["body"]["sha256"], sha256(&bytes));
        assert_eq!(bytes.len(), ZIP_LEN);
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // Still a resource too.
        assert!(link(&result).is_some());
        paths.push(path);
    }
    // Two calls, two files: nothing overwritten, nothing named by the upstream.
    assert_ne!(paths[0], paths[1]);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
    assert_eq!(std::fs::read_dir(root.path()).unwrap().count(), 1);
    assert!(!root.path().join("escaped.zip").exists());
    // A folder that is a file, or that does not exist, is refused at start-up.
    let file = root.path().join("file");
    std::fs::write(&file, b"x").unwrap();
    assert!(apigate::tools::binary_out::download_dir(&file).is_err());
    assert!(apigate::tools::binary_out::download_dir(&root.path().join("none")).is_err());
}

/// Production: replicas share one database. A response held through A is read through B with
/// the same key and session (the session owns it: the key alone does not read it); another
/// key's read on B is not-found, and its list is empty.
#[tokio::test]
async fn a_held_response_is_read_through_a_second_replica() {
    let db = TestDb::new().await;
    let upstream = start_upstream().await;
    let start = || async {
        let opts = Options::stateless();
        Prod::start_with(&db.url, args(&upstream), opts).await
    };
    let a = start().await;
    let b = start().await;
    let (agent, session) = key_and_session(&a, "agent").await;
    let (other, _) = key_and_session(&a, "other").await;
    let on_a = a.client(&agent, Some(&session)).await;
    let result = execute(&on_a, "downloadArchive", "release").await;
    let v = structured(&result);
    let (uri, ..) = link(&result).expect("link");
    let expected = v["body"]["sha256"].as_str().unwrap().to_string();

    let on_b = b.client(&agent, Some(&session)).await;
    let bytes = read(&on_b, &uri).await.expect("read through B");
    assert_eq!(bytes.len(), ZIP_LEN);
    assert_eq!(sha256(&bytes), expected);
    assert_eq!(crate::support::resource_uris(&on_b).await.len(), 1);
    let key_alone = b.client(&agent, None).await;
    assert_not_found("the key alone", &key_alone, read(&key_alone, &uri).await);

    let foreign = b.client(&other, None).await;
    assert_not_found("another key", &foreign, read(&foreign, &uri).await);
    assert!(crate::support::resource_uris(&foreign).await.is_empty());

    // One row in the shared table: held once, by A, and read by B from there.
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM held_responses")
        .fetch_one(&sqlx::PgPool::connect(&db.url).await.unwrap())
        .await
        .unwrap();
    assert_eq!(rows, 1);
}

/// GitHub's "download a repository archive (zip)" as an agent calls it through the real
/// GitHub spec: the API redirects (on its own origin here: apigate follows no other) and the
/// archive comes back as a resource whose bytes read back exactly.
#[tokio::test]
async fn a_github_zipball_comes_back_as_a_resource() {
    async fn zipball(
        Path((owner, repo, r#ref)): Path<(String, String, String)>,
    ) -> axum::response::Response {
        axum::response::Redirect::to(&format!("/_codeload/{owner}/{repo}/{ref}.zip"))
            .into_response()
    }
    async fn codeload() -> axum::response::Response {
        (
            [(header::CONTENT_TYPE, "application/zip")],
            noise(ZIP_LEN, 42),
        )
            .into_response()
    }
    let app = Router::new()
        .route(
            "/repos/{owner}/{repo}/zipball/{ref}",
            axum::routing::get(zipball),
        )
        .route(
            "/_codeload/{owner}/{repo}/{file}",
            axum::routing::get(codeload),
        );
    let addr = crate::support::serve_app(app).await;
    let server = Server::start(
        engine_args(
            &spec_path("github-rest-3.0.json"),
            Some(format!("http://{addr}")),
        ),
        false,
    )
    .await;
    let client = server.client().await;
    let args = json!({"operationId": "repos/download-zipball-archive",
        "pathParams": {"owner": "octo", "repo": "hello", "ref": "main"}});
    let Value::Object(map) = args else {
        unreachable!()
    };
    let result = client
        .call_tool(CallToolRequestParams::new("api_execute").with_arguments(map))
        .await
        .unwrap();
    let v = structured(&result);
    assert_eq!(v["status"], 200, "{v}");
    assert_eq!(v["body"]["bytes"], ZIP_LEN);
    let (uri, ..) = link(&result).expect("link");
    let bytes = read(&client, &uri).await.unwrap();
    assert_eq!(bytes, noise(ZIP_LEN, 42));
    assert_eq!(v["body"]["sha256"], sha256(&bytes));
}

/// Production: an expired row is not read (the database's clock decides), and the next write
/// through any replica deletes it.
#[tokio::test]
async fn expired_rows_are_not_read_and_are_purged_on_the_next_write() {
    let db = TestDb::new().await;
    let upstream = start_upstream().await;
    let mut a = args(&upstream);
    a.binary.response_ttl = Duration::from_millis(300);
    let opts = Options::stateless();
    let server = Prod::start_with(&db.url, a, opts).await;
    let (key, session) = key_and_session(&server, "agent").await;
    let client = server.client(&key, Some(&session)).await;
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let ids = || async {
        sqlx::query_scalar::<_, String>("SELECT id FROM held_responses ORDER BY seq")
            .fetch_all(&pool)
            .await
            .unwrap()
    };
    let first = download(&client, "one").await;
    assert_eq!(ids().await.len(), 1);
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_not_found("expired", &client, read(&client, &first).await);
    assert!(crate::support::resource_uris(&client).await.is_empty());
    let second = download(&client, "two").await;
    let left = ids().await;
    assert_eq!(left.len(), 1, "the expired row is gone");
    assert!(second.ends_with(&left[0]));
}

/// Of `uris`, held in that order, the first was dropped (`reader` is told not-found) and the
/// others are held whole and listed (by `lister`).
async fn assert_oldest_dropped(
    reader: &Peer<RoleClient>,
    lister: &Peer<RoleClient>,
    uris: &[String],
) {
    assert_not_found("oldest", reader, read(reader, &uris[0]).await);
    for uri in &uris[1..] {
        assert_eq!(read(reader, uri).await.unwrap().len(), ZIP_LEN);
    }
    assert_eq!(crate::support::resource_uris(lister).await, uris[1..]);
}

/// A key holding every apigate feature, and a session for it, made through `server`.
async fn key_and_session(server: &Prod, name: &str) -> (String, String) {
    let key = key_holding(&server.auth, name, &["apigate.*"]).await;
    let session = NewSession {
        user_id: "u-1".into(),
        features: vec!["apigate.*".into()],
        ..NewSession::default()
    };
    (key, session_token(&server.auth, session).await)
}

/// Production: the per-key bound holds across replicas (each write, on either, drops the key's
/// oldest rows), and another key's responses are not counted against it.
#[tokio::test]
async fn the_per_key_bound_holds_across_replicas() {
    let db = TestDb::new().await;
    let upstream = start_upstream().await;
    let start = || async {
        let mut a = args(&upstream);
        a.binary.max_held_bytes = 2 * ZIP_LEN + 1000;
        let opts = Options::stateless();
        Prod::start_with(&db.url, a, opts).await
    };
    let (a, b) = (start().await, start().await);
    let (key, session) = key_and_session(&a, "agent").await;
    let (other, other_session) = key_and_session(&a, "other").await;
    let on_a = a.client(&key, Some(&session)).await;
    let on_b = b.client(&key, Some(&session)).await;
    let foreign = b.client(&other, Some(&other_session)).await;
    let kept = download(&foreign, "theirs").await;
    let mut uris = Vec::new();
    for (client, name) in [(&on_a, "one"), (&on_b, "two"), (&on_a, "three")] {
        uris.push(download(client, name).await);
    }
    assert_oldest_dropped(&on_b, &on_a, &uris).await;
    assert_eq!(read(&foreign, &kept).await.unwrap().len(), ZIP_LEN);
}
