//! Binary request bodies (issue 27, item 4) through the real server and a real upstream that
//! records what it received, multipart parts parsed by `multer` (the parser axum's own
//! `Multipart` extractor uses): whole binary bodies (`application/octet-stream`,
//! `application/zip`, `image/jpeg`, GitHub's release asset upload) arrive byte for byte with
//! their media type; multipart file parts arrive with their bytes, filename and part type
//! (OpenAPI 3.0 and Swagger 2.0 `type: file`); `apigate dev --upload-dir` sends a file by
//! name; a dry run describes the bytes instead of showing them; and every bad input (malformed
//! base64, bytes to a text media type, header injection through a filename or part type, a
//! name leaving the upload folder, more than `--max-request-bytes`) is `INVALID_ARGUMENTS`
//! at its pointer with nothing sent.

use std::sync::{Arc, Mutex};

use apigate::http::ConnLimits;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use rand::RngCore;
use serde_json::{Value, json};
use sha2::Digest;

use crate::support::{
    KEY, Server, call, engine_args, execute_ok, mcp_client, spawn_dev, spec_path,
};

const UPLOADS: &str = "uploads-3.0.json";

/// One multipart part as `multer` read it.
#[derive(Debug, Clone)]
struct Part {
    name: String,
    filename: Option<String>,
    content_type: Option<String>,
    bytes: Bytes,
}

/// One request as the upstream received it.
#[derive(Debug, Clone)]
struct Got {
    method: String,
    uri: String,
    content_type: Option<String>,
    body: Bytes,
    /// The parts, when the body was `multipart/form-data`.
    parts: Vec<Part>,
}

/// An upstream API that records every request (multipart bodies parsed into parts) and
/// answers `{"stored": true}`.
struct Recorder {
    addr: std::net::SocketAddr,
    got: Arc<Mutex<Vec<Got>>>,
}

impl Recorder {
    async fn start() -> Recorder {
        let got: Arc<Mutex<Vec<Got>>> = Arc::default();
        let app = Router::new().fallback(record).with_state(got.clone());
        let addr = crate::support::serve_app(app).await;
        Recorder { addr, got }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn requests(&self) -> Vec<Got> {
        self.got.lock().unwrap().clone()
    }

    /// The one request received since the last call, which clears the record.
    fn take_one(&self) -> Got {
        let mut got = self.got.lock().unwrap();
        assert_eq!(got.len(), 1, "one request expected: {got:?}");
        got.remove(0)
    }
}

async fn record(State(got): State<Arc<Mutex<Vec<Got>>>>, request: Request) -> axum::Json<Value> {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, 64 << 20).await.unwrap();
    let content_type = parts
        .headers
        .get(axum::http::header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap().to_string());
    let mut found = Vec::new();
    if let Some(ct) = content_type
        .as_deref()
        .filter(|c| c.starts_with("multipart/"))
    {
        let boundary = multer::parse_boundary(ct).unwrap();
        let stream = futures::stream::once({
            let body = body.clone();
            async move { Ok::<Bytes, std::io::Error>(body) }
        });
        let mut multipart = multer::Multipart::new(stream, boundary);
        while let Some(field) = multipart.next_field().await.unwrap() {
            found.push(Part {
                name: field.name().unwrap_or_default().to_string(),
                filename: field.file_name().map(str::to_string),
                content_type: field.content_type().map(|m| m.to_string()),
                bytes: field.bytes().await.unwrap(),
            });
        }
    }
    got.lock().unwrap().push(Got {
        method: parts.method.to_string(),
        uri: parts.uri.to_string(),
        content_type,
        body,
        parts: found,
    });
    axum::Json(json!({"stored": true}))
}

fn random_bytes(n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    rand::rng().fill_bytes(&mut v);
    v
}

/// apigate on `spec` in front of `upstream`, taking JSON-RPC bodies up to 4 MiB, with
/// `max_request_bytes` as `--max-request-bytes`.
async fn server(spec: &str, upstream: &Recorder, max_request_bytes: Option<usize>) -> Server {
    let mut args = engine_args(&spec_path(spec), Some(upstream.url()));
    if let Some(max) = max_request_bytes {
        args.limits.max_request_bytes = max;
    }
    Server::start_custom(args, |o| o.max_body_bytes = 4 << 20, ConnLimits::default()).await
}

fn pointers(r: &Value) -> Vec<&str> {
    crate::support::strings(&r["violations"], "pointer")
}

#[tokio::test]
async fn binary_bodies_arrive_byte_exact_with_their_media_type() {
    let upstream = Recorder::start().await;
    let server = server(UPLOADS, &upstream, None).await;
    let client = server.client().await;
    let bytes = random_bytes(200 * 1024);
    // (arguments without the body, the base64 engine, the Content-Type the API must see)
    let rows = [
        (
            json!({"operationId": "uploadBlob"}),
            &STANDARD,
            "application/octet-stream",
            "/v1/blobs",
        ),
        (
            json!({"operationId": "putArchive", "pathParams": {"name": "release.zip"}}),
            &STANDARD_NO_PAD,
            "application/zip",
            "/v1/archives/release.zip",
        ),
        (
            json!({"operationId": "uploadImage", "contentType": "image/jpeg"}),
            &STANDARD,
            "image/jpeg",
            "/v1/images",
        ),
        (
            json!({"operationId": "uploadImage"}),
            &STANDARD,
            "image/png",
            "/v1/images",
        ),
    ];
    for (mut args, engine, content_type, path) in rows {
        // 200 KB + 1 byte: the unpadded encoding really lacks its padding.
        let sent = [&bytes[..], &[7u8]].concat();
        args["body"] = json!({"base64": engine.encode(&sent)});
        let (err, r) = call(&client, "api_execute", args.clone()).await;
        assert!(!err, "{args}: {r}");
        assert_eq!(r["status"], 200, "{r}");
        let got = upstream.take_one();
        assert_eq!(got.uri, path);
        assert_eq!(got.content_type.as_deref(), Some(content_type), "{args}");
        assert!(got.body[..] == sent[..], "{args}: the bytes differ");
    }
}

/// An operation whose default media type is JSON but which also takes `image/png` (or
/// `multipart/form-data`): bytes without a `contentType` go to the type that can carry them.
#[tokio::test]
async fn bytes_without_a_content_type_pick_the_type_that_carries_them() {
    let upstream = Recorder::start().await;
    let server = server(UPLOADS, &upstream, None).await;
    let client = server.client().await;
    let png = random_bytes(4096);
    execute_ok(
        &client,
        json!({"operationId": "setAvatar", "body": {"base64": STANDARD.encode(&png)}}),
    )
    .await;
    let got = upstream.take_one();
    assert_eq!(got.content_type.as_deref(), Some("image/png"));
    assert!(got.body[..] == png[..]);
    execute_ok(&client, json!({"operationId": "createPost", "body": {"title": "Hello",
            "cover": {"base64": STANDARD.encode(&png), "filename": "cover.png", "contentType": "image/png"}}})).await;
    let got = upstream.take_one();
    let cover = got.parts.iter().find(|p| p.name == "cover").unwrap();
    assert_eq!(cover.filename.as_deref(), Some("cover.png"));
    assert!(cover.bytes[..] == png[..]);
    // A JSON body stays JSON.
    execute_ok(
        &client,
        json!({"operationId": "createPost", "body": {"title": "Hello"}}),
    )
    .await;
    let got = upstream.take_one();
    assert_eq!(got.content_type.as_deref(), Some("application/json"));
    assert_eq!(&got.body[..], br#"{"title":"Hello"}"#);
}

#[tokio::test]
async fn github_release_asset_upload_arrives_byte_exact() {
    let upstream = Recorder::start().await;
    let server = server("github-rest-3.0.json", &upstream, None).await;
    let client = server.client().await;
    let bytes = random_bytes(200 * 1024);
    execute_ok(
        &client,
        json!({
            "operationId": "repos/upload-release-asset",
            "pathParams": {"owner": "octo", "repo": "hello", "release_id": 1},
            "query": {"name": "hello.zip"},
            "body": {"base64": STANDARD.encode(&bytes)}
        }),
    )
    .await;
    let got = upstream.take_one();
    assert_eq!(got.method, "POST");
    assert_eq!(
        got.uri,
        "/repos/octo/hello/releases/1/assets?name=hello.zip"
    );
    assert_eq!(
        got.content_type.as_deref(),
        Some("application/octet-stream")
    );
    assert!(got.body[..] == bytes[..], "the bytes differ");
}

#[tokio::test]
async fn multipart_files_arrive_with_their_filename_and_part_type() {
    let upstream = Recorder::start().await;
    let server = server(UPLOADS, &upstream, None).await;
    let client = server.client().await;
    let (pdf, a, b) = (
        random_bytes(200 * 1024),
        random_bytes(1000),
        b"plain text\r\n--not-a-boundary\r\n".to_vec(),
    );
    execute_ok(
        &client,
        json!({
            "operationId": "uploadDocument",
            "body": {
                "title": "Quarterly report",
                "tags": ["q3", "finance"],
                "file": {"base64": STANDARD.encode(&pdf), "filename": "report Q3.pdf",
                    "contentType": "application/pdf"},
                "attachments": [
                    {"base64": STANDARD.encode(&a)},
                    {"base64": STANDARD.encode(&b), "filename": "notes.txt",
                        "contentType": "text/plain; charset=utf-8"}
                ]
            }
        }),
    )
    .await;
    let got = upstream.take_one();
    assert!(
        got.content_type
            .as_deref()
            .unwrap()
            .starts_with("multipart/form-data; boundary=")
    );
    let shape: Vec<(&str, Option<&str>, Option<&str>)> = got
        .parts
        .iter()
        .map(|p| {
            (
                p.name.as_str(),
                p.filename.as_deref(),
                p.content_type.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        shape,
        [
            ("title", None, None),
            ("tags", None, Some("application/json")),
            ("file", Some("report Q3.pdf"), Some("application/pdf")),
            (
                "attachments",
                Some("attachments"),
                Some("application/octet-stream")
            ),
            (
                "attachments",
                Some("notes.txt"),
                Some("text/plain; charset=utf-8")
            ),
        ]
    );
    assert_eq!(&got.parts[0].bytes[..], b"Quarterly report");
    assert_eq!(&got.parts[1].bytes[..], br#"["q3","finance"]"#);
    assert!(got.parts[2].bytes[..] == pdf[..], "the file's bytes differ");
    assert!(got.parts[3].bytes[..] == a[..]);
    assert!(got.parts[4].bytes[..] == b[..]);

    // Swagger 2.0: a `type: file` formData parameter is a file part.
    let server = server_swagger(&upstream).await;
    let client = server.client().await;
    let png = random_bytes(5000);
    execute_ok(&client, json!({"operationId": "uploadAvatar", "body": {
            "caption": "me",
            "image": {"base64": STANDARD.encode(&png), "filename": "me.png", "contentType": "image/png"}
        }})).await;
    let got = upstream.take_one();
    assert_eq!(got.uri, "/api/avatar");
    let image = got.parts.iter().find(|p| p.name == "image").unwrap();
    assert_eq!(image.filename.as_deref(), Some("me.png"));
    assert_eq!(image.content_type.as_deref(), Some("image/png"));
    assert!(image.bytes[..] == png[..]);
    let caption = got.parts.iter().find(|p| p.name == "caption").unwrap();
    assert_eq!(
        (&caption.bytes[..], caption.filename.as_deref()),
        (&b"me"[..], None)
    );
}

async fn server_swagger(upstream: &Recorder) -> Server {
    server("uploads-swagger2.json", upstream, None).await
}

#[tokio::test]
async fn a_dry_run_describes_the_bytes_instead_of_showing_them() {
    let upstream = Recorder::start().await;
    let server = server(UPLOADS, &upstream, None).await;
    let client = server.client().await;
    let bytes = random_bytes(200 * 1024);
    let digest = hex::encode(sha2::Sha256::digest(&bytes));
    let r = execute_ok(
        &client,
        json!({"operationId": "uploadBlob", "dryRun": true,
            "body": {"base64": STANDARD.encode(&bytes)}}),
    )
    .await;
    assert!(r.to_string().len() < 2048, "a short result: {r}");
    let body = &r["request"]["body"];
    assert_eq!(body["bytes"], 200 * 1024);
    assert_eq!(body["contentType"], "application/octet-stream");
    assert_eq!(body["sha256"], format!("{}…", &digest[..16]));
    let r = execute_ok(
        &client,
        json!({"operationId": "uploadDocument", "dryRun": true, "body": {
            "title": "t", "file": {"base64": STANDARD.encode(&bytes), "filename": "f.bin"}}}),
    )
    .await;
    assert!(r.to_string().len() < 2048, "a short result: {r}");
    assert_eq!(r["request"]["body"]["title"], "t");
    assert_eq!(r["request"]["body"]["file"]["filename"], "f.bin");
    assert_eq!(r["request"]["body"]["file"]["bytes"], 200 * 1024);
    assert!(upstream.requests().is_empty(), "a dry run sends nothing");
}

/// Calls `api_execute` with `args` and asserts `INVALID_ARGUMENTS` at exactly `pointers`,
/// with `needle` in the violation's message.
async fn refused(
    client: &rmcp::service::Peer<rmcp::service::RoleClient>,
    args: Value,
    expected: &[&str],
    needle: &str,
) {
    let (err, r) = call(client, "api_execute", args.clone()).await;
    assert!(err, "{args} was accepted: {r}");
    assert_eq!(r["code"], "INVALID_ARGUMENTS", "{args}: {r}");
    assert_eq!(pointers(&r), expected, "{args}: {r}");
    assert!(
        r["violations"].to_string().contains(needle),
        "{args}: {needle:?} not in {r}"
    );
}

#[tokio::test]
async fn bad_bytes_are_refused_at_their_pointer_and_nothing_is_sent() {
    let upstream = Recorder::start().await;
    let server = server(UPLOADS, &upstream, Some(1000)).await;
    let client = server.client().await;
    let ok = STANDARD.encode(b"hello");
    let doc = |file: Value| json!({"operationId": "uploadDocument", "body": {"title": "t", "file": file}});
    let blob = |body: Value| json!({"operationId": "uploadBlob", "body": body});
    let note = |ct: &str, body: Value| json!({"operationId": "createNote", "contentType": ct, "body": body});
    let rows: Vec<(Value, Vec<&str>, &str)> = vec![
        // Malformed base64.
        (
            blob(json!({"base64": "!!!not base64"})),
            vec!["/body/base64"],
            "not standard base64",
        ),
        (
            blob(json!({"base64": "a-_b"})),
            vec!["/body/base64"],
            "URL-safe",
        ),
        (
            doc(json!({"base64": "aGk=x"})),
            vec!["/body/file/base64"],
            "not standard base64",
        ),
        (
            json!({"operationId": "uploadDocument", "body": {"title": "t", "file": {"base64": ok},
                "attachments": [{"base64": ok}, {"base64": "%%%"}]}}),
            vec!["/body/attachments/1/base64"],
            "base64",
        ),
        // Header injection through the part's filename or media type.
        (
            doc(json!({"base64": ok, "filename": "a.txt\"\r\nContent-Type: text/html\r\n\r\nboo"})),
            vec!["/body/file/filename"],
            "line breaks",
        ),
        (
            doc(json!({"base64": ok, "filename": "a\"b"})),
            vec!["/body/file/filename"],
            "quotes",
        ),
        (
            doc(json!({"base64": ok, "filename": "x".repeat(256)})),
            vec!["/body/file/filename"],
            "over the limit",
        ),
        (
            doc(json!({"base64": ok, "contentType": "text/plain\r\nX-Evil: 1"})),
            vec!["/body/file/contentType"],
            "not",
        ),
        (
            doc(json!({"base64": ok, "contentType": "pdf"})),
            vec!["/body/file/contentType"],
            "not a media type",
        ),
        (
            doc(json!({"base64": ok, "contentType": format!("a/{}", "b".repeat(300))})),
            vec!["/body/file/contentType"],
            "over the limit",
        ),
        (
            doc(json!({"base64": ok, "file": "x"})),
            vec!["/body/file"],
            "either",
        ),
        (
            blob(json!({"base64": ok, "filename": "x.bin"})),
            vec!["/body/filename"],
            "`contentType` argument",
        ),
        // Bytes in text media types (bytes in a multipart field that is no string:
        // real_bodies.rs).
        (
            note("application/json", json!({"base64": ok})),
            vec!["/body"],
            "text media type",
        ),
        (
            note("application/json", json!({"text": {"base64": ok}})),
            vec!["/body/text"],
            "text media type",
        ),
        (
            note("text/plain", json!({"base64": ok})),
            vec!["/body"],
            "text media type",
        ),
        (
            note("application/x-www-form-urlencoded", json!({"base64": ok})),
            vec!["/body"],
            "text media type",
        ),
        // A file by name, without --upload-dir.
        (
            blob(json!({"file": "report.pdf"})),
            vec!["/body/file"],
            "--upload-dir",
        ),
        // Over --max-request-bytes (1000 here), decoded: one body, or two parts together.
        (
            blob(json!({"base64": STANDARD.encode(random_bytes(1001))})),
            vec!["/body/base64"],
            "--max-request-bytes",
        ),
        (
            json!({"operationId": "uploadDocument", "body": {"title": "t",
                "file": {"base64": STANDARD.encode(random_bytes(600))},
                "attachments": [{"base64": STANDARD.encode(random_bytes(600))}]}}),
            vec!["/body/attachments/0/base64"],
            "--max-request-bytes",
        ),
        (
            json!({"operationId": "uploadDocument", "body": {"title": "t",
                "file": "x".repeat(1001)}}),
            vec!["/body/file"],
            "--max-request-bytes",
        ),
    ];
    for (args, expected, needle) in rows {
        refused(&client, args, &expected, needle).await;
    }
    assert!(
        upstream.requests().is_empty(),
        "nothing was sent: {:?}",
        upstream.requests()
    );
    // The cap is inclusive; validation still applies beside the bytes.
    execute_ok(
        &client,
        blob(json!({"base64": STANDARD.encode(random_bytes(1000))})),
    )
    .await;
    refused(
        &client,
        json!({"operationId": "uploadDocument", "body": {"title": "x".repeat(101), "file": {"base64": ok}}}),
        &["/body/title"],
        "longer than 100",
    )
    .await;
    refused(
        &client,
        json!({"operationId": "uploadDocument", "body": {"title": "t", "file": {"base64": ok},
            "attachments": [{"base64": ok}, {"base64": ok}, {"base64": ok}, {"base64": ok}]}}),
        &["/body/attachments"],
        "more than 3",
    )
    .await;
    assert_eq!(upstream.requests().len(), 1);
}

/// `apigate dev --upload-dir`: a file by name arrives byte for byte as a body and as a part;
/// a name that leaves the folder (`..`, an absolute path, a symbolic link out), a missing file
/// and one over `--max-request-bytes` are refused with nothing sent. `serve` has no such flag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_dir_sends_files_by_name_and_only_from_inside() {
    let upstream = Recorder::start().await;
    let outer = tempfile::tempdir().unwrap();
    let dir = outer.path().join("uploads");
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let big = random_bytes(200 * 1024);
    std::fs::write(dir.join("big.bin"), &big).unwrap();
    let pdf = random_bytes(3000);
    std::fs::write(dir.join("sub/doc.pdf"), &pdf).unwrap();
    std::fs::write(dir.join("huge.bin"), random_bytes(300_001)).unwrap();
    let secret = outer.path().join("secret.txt");
    std::fs::write(&secret, b"do not send").unwrap();
    std::os::unix::fs::symlink(&secret, dir.join("link.txt")).unwrap();
    std::os::unix::fs::symlink(outer.path(), dir.join("up")).unwrap();
    let (spec, up, dir_text) = (
        spec_path(UPLOADS),
        upstream.url(),
        dir.display().to_string(),
    );
    let extra = ["--upload-dir", &dir_text, "--max-request-bytes", "300000"];
    let (_dev, url) = spawn_dev(&spec, Some(&up), &extra, &[]).await;
    let client = mcp_client(&url, &[("x-api-key", KEY)]).await;
    execute_ok(
        &client,
        json!({"operationId": "uploadBlob", "body": {"file": "big.bin"}}),
    )
    .await;
    let got = upstream.take_one();
    assert!(got.body[..] == big[..], "the file's bytes differ");
    execute_ok(&client, json!({"operationId": "uploadDocument", "body": {"title": "t",
            "file": {"file": "sub/doc.pdf", "filename": "doc.pdf", "contentType": "application/pdf"}}})).await;
    let got = upstream.take_one();
    let part = got.parts.iter().find(|p| p.name == "file").unwrap();
    assert_eq!(
        (part.filename.as_deref(), part.content_type.as_deref()),
        (Some("doc.pdf"), Some("application/pdf"))
    );
    assert!(part.bytes[..] == pdf[..]);

    let absolute = secret.display().to_string();
    for (name, needle) in [
        ("../secret.txt", "refused"),
        ("sub/../../secret.txt", "refused"),
        (absolute.as_str(), "refused"),
        ("link.txt", "leads out"),
        ("up/secret.txt", "leads out"),
        ("./big.bin", "refused"),
        ("missing.bin", "no file"),
        ("sub", "not a regular file"),
        ("huge.bin", "--max-request-bytes"),
    ] {
        refused(
            &client,
            json!({"operationId": "uploadBlob", "body": {"file": name}}),
            &["/body/file"],
            needle,
        )
        .await;
    }
    assert!(upstream.requests().is_empty(), "nothing was sent");

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_apigate"))
        .args(["serve", "--spec", &spec, "--upload-dir", &dir_text])
        .env_remove("DATABASE_URL")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--upload-dir"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The JSON-RPC body cap (`--max-body-bytes`) bounds base64 uploads before
/// `--max-request-bytes` does: here 256 KiB of JSON-RPC cannot carry 300 KB of bytes as base64,
/// the request is refused whole, and the API sees nothing.
#[tokio::test]
async fn the_json_rpc_body_cap_bounds_base64_uploads() {
    let upstream = Recorder::start().await;
    let server = Server::start(
        engine_args(&spec_path(UPLOADS), Some(upstream.url())),
        false,
    )
    .await;
    let client = server.client().await;
    let body = json!({"base64": STANDARD.encode(random_bytes(300_000))});
    let Value::Object(args) = json!({"operationId": "uploadBlob", "body": body}) else {
        unreachable!()
    };
    let answer = client
        .call_tool(rmcp::model::CallToolRequestParams::new("api_execute").with_arguments(args))
        .await;
    assert!(
        answer.is_err(),
        "a 400 KB JSON-RPC body passed a 256 KiB cap: {answer:?}"
    );
    assert!(upstream.requests().is_empty());
}
