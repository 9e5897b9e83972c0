//! Calls as the real specs write them (issue 42, item 3), through the real server and a real
//! upstream that records what it received (multipart bodies parsed by `multer`, the parser
//! axum's `Multipart` uses):
//!
//! - Stripe's `POST /v1/files` declares its `file` field as a plain `{"type": "string"}`, and
//!   Discourse's `POST /uploads.json` as `{}`: both take a file part, which arrives with its
//!   bytes, filename and part type; a field of another type still refuses bytes. The OpenAPI
//!   Specification's own `encoding` example gives a part its media type.
//! - Slack's `chat.postMessage` marks a `token` header required: with a credential configured
//!   for the API, the agent is not asked for it, the configured credential goes out, and an
//!   agent's own `token` is refused (nothing sent); without one, the error names what the
//!   operator configures.
//! - One value where a query parameter takes a list (petstore's `status`, Stripe's `expand[]`
//!   and `types[]`) is a list of one; `"3"` is 3 where the wire is text. A body stays strict.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::support::{
    Server, call_ok, engine_args, execute_err, execute_ok, petstore_client, spec_path, strings,
};

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
    uri: String,
    headers: HeaderMap,
    body: Bytes,
    /// The parts, when the body was `multipart/form-data`.
    parts: Vec<Part>,
}

impl Got {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    fn part(&self, name: &str) -> &Part {
        self.parts
            .iter()
            .find(|p| p.name == name)
            .unwrap_or_else(|| panic!("no part {name:?} in {:?}", self.parts))
    }
}

type Record = Arc<Mutex<Vec<Got>>>;

/// An upstream that records every request and answers as the API would: `POST /v1/files` as
/// Stripe does (a `file` object built from the multipart body it parsed, or Stripe's 400 when
/// the file part is missing), `POST /uploads.json` as Discourse does, anything else
/// `{"ok": true}` (Slack's success shape).
struct Recorder {
    addr: std::net::SocketAddr,
    got: Record,
}

impl Recorder {
    async fn start() -> Recorder {
        let got: Record = Arc::default();
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

async fn parts_of(content_type: &str, body: &Bytes) -> Vec<Part> {
    let Ok(boundary) = multer::parse_boundary(content_type) else {
        return Vec::new();
    };
    let stream = futures::stream::once({
        let body = body.clone();
        async move { Ok::<Bytes, std::io::Error>(body) }
    });
    let mut multipart = multer::Multipart::new(stream, boundary);
    let mut found = Vec::new();
    while let Some(field) = multipart.next_field().await.unwrap() {
        found.push(Part {
            name: field.name().unwrap_or_default().to_string(),
            filename: field.file_name().map(str::to_string),
            content_type: field.content_type().map(|m| m.to_string()),
            bytes: field.bytes().await.unwrap(),
        });
    }
    found
}

async fn record(State(got): State<Record>, request: Request) -> axum::response::Response {
    let (head, body) = request.into_parts();
    let body = axum::body::to_bytes(body, 16 << 20).await.unwrap();
    let content_type = head
        .headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let parts = if content_type.starts_with("multipart/form-data") {
        parts_of(&content_type, &body).await
    } else {
        Vec::new()
    };
    let uri = head.uri.to_string();
    let received = Got {
        uri: uri.clone(),
        headers: head.headers.clone(),
        body,
        parts: parts.clone(),
    };
    got.lock().unwrap().push(received);
    let text = |name: &str| {
        parts
            .iter()
            .find(|p| p.name == name && p.filename.is_none())
            .map(|p| String::from_utf8_lossy(&p.bytes).into_owned())
    };
    let file = parts
        .iter()
        .find(|p| p.name == "file" && p.filename.is_some());
    match (head.uri.path(), file) {
        // Stripe: https://docs.stripe.com/api/files/create
        ("/v1/files", Some(f)) => axum::Json(json!({
            "id": "file_1NqVxS2eZvKYlo2C",
            "object": "file",
            "filename": f.filename,
            "purpose": text("purpose"),
            "size": f.bytes.len(),
            "type": f.filename.as_deref().and_then(|n| n.rsplit_once('.')).map(|(_, e)| e),
        }))
        .into_response(),
        ("/v1/files", None) => (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"error": {"message": "Missing required param: file.",
                "param": "file", "type": "invalid_request_error"}})),
        )
            .into_response(),
        // Discourse: POST /uploads.json answers the upload it stored.
        ("/uploads.json", Some(f)) => axum::Json(json!({
            "id": 7,
            "original_filename": f.filename,
            "filesize": f.bytes.len(),
            "extension": f.filename.as_deref().and_then(|n| n.rsplit_once('.')).map(|(_, e)| e),
        }))
        .into_response(),
        _ => axum::Json(json!({"ok": true})).into_response(),
    }
}

fn pointers(r: &Value) -> Vec<&str> {
    let mut p = strings(&r["violations"], "pointer");
    p.sort();
    p
}

/// apigate on the spec `name` in front of `upstream`, with these `--upstream-header`s.
async fn server(name: &str, upstream: &Recorder, headers: &[&str]) -> Server {
    let mut args = engine_args(&spec_path(name), Some(upstream.url()));
    args.upstream_headers = headers.iter().map(|h| h.to_string()).collect();
    Server::start(args, false).await
}

const STRIPE_KEY: &str = "Authorization: Bearer sk_test_4eC39HqLyjWDarjtT1zdp7dc";

/// Stripe's real `POST /v1/files`: `file` is `{"type": "string"}` (RFC 2388 in words, no
/// `format: binary`). A file part arrives with its bytes, filename and type, `purpose` as a
/// text part, and Stripe's answer comes back; a dry run shows a digest. Bytes for
/// `file_link_data` (an object) are refused at their pointer, with nothing sent.
#[tokio::test]
async fn stripe_takes_a_file_part_for_its_plain_string_file_field() {
    let upstream = Recorder::start().await;
    let server = server("stripe.json", &upstream, &[STRIPE_KEY]).await;
    let client = server.client().await;
    let pdf: Vec<u8> = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj <<>> endobj\n%%EOF\n".to_vec();
    let args = json!({"operationId": "PostFiles", "body": {
        "purpose": "dispute_evidence",
        "file": {"base64": STANDARD.encode(&pdf), "filename": "receipt.pdf",
                 "contentType": "application/pdf"},
    }});

    let mut dry = args.clone();
    dry["dryRun"] = json!(true);
    let shown = execute_ok(&client, dry).await;
    assert_eq!(
        shown["request"]["body"]["file"]["bytes"],
        pdf.len(),
        "{shown}"
    );
    assert_eq!(shown["request"]["body"]["file"]["filename"], "receipt.pdf");
    assert!(upstream.requests().is_empty());

    let r = execute_ok(&client, args).await;
    assert_eq!(r["status"], 200, "{r}");
    assert_eq!(r["body"]["filename"], "receipt.pdf");
    assert_eq!(r["body"]["size"], pdf.len());
    assert_eq!(r["body"]["purpose"], "dispute_evidence");
    let got = upstream.take_one();
    assert!(got.uri.starts_with("/v1/files"), "{}", got.uri);
    let file = got.part("file");
    assert_eq!(&file.bytes[..], &pdf[..]);
    assert_eq!(file.filename.as_deref(), Some("receipt.pdf"));
    assert_eq!(file.content_type.as_deref(), Some("application/pdf"));
    assert_eq!(&got.part("purpose").bytes[..], b"dispute_evidence");
    assert_eq!(got.part("purpose").filename, None);
    assert_eq!(
        got.header("authorization"),
        Some("Bearer sk_test_4eC39HqLyjWDarjtT1zdp7dc")
    );

    // Bytes where the schema is an object stay refused, named at their pointer.
    let r = execute_err(
        &client,
        json!({"operationId": "PostFiles", "body": {"purpose": "dispute_evidence",
            "file": {"base64": STANDARD.encode(&pdf)},
            "file_link_data": {"base64": STANDARD.encode(b"x")}}}),
        "INVALID_ARGUMENTS",
    )
    .await;
    assert_eq!(pointers(&r), ["/body/file_link_data"], "{r}");
    let message = r["violations"][0]["message"].as_str().unwrap();
    assert!(message.contains("not a file field"), "{message}");
    assert!(upstream.requests().is_empty(), "nothing was sent");
}

/// Discourse's real `POST /uploads.json` declares `file` as `{}` (no type at all): a file part
/// goes there. `user_id` (an integer) refuses bytes.
#[tokio::test]
async fn discourse_takes_a_file_part_for_a_field_without_a_type() {
    let upstream = Recorder::start().await;
    let server = server(
        "discourse-3.1.json",
        &upstream,
        &["Api-Key: 714552c6148e1617aeab526d0606184b94a80ec048fc09894ff1a72b740c5f19"],
    )
    .await;
    let client = server.client().await;
    let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    let r = execute_ok(
        &client,
        json!({"operationId": "createUpload", "body": {"type": "composer", "synchronous": true,
            "file": {"base64": STANDARD.encode(&png), "filename": "logo.png",
                     "contentType": "image/png"}}}),
    )
    .await;
    assert_eq!(r["status"], 200, "{r}");
    assert_eq!(r["body"]["original_filename"], "logo.png");
    let got = upstream.take_one();
    let file = got.part("file");
    assert_eq!(&file.bytes[..], &png[..]);
    assert_eq!(file.content_type.as_deref(), Some("image/png"));
    assert_eq!(&got.part("type").bytes[..], b"composer");

    let r = execute_err(
        &client,
        json!({"operationId": "createUpload", "body": {"type": "avatar",
            "user_id": {"base64": STANDARD.encode(&png)}}}),
        "INVALID_ARGUMENTS",
    )
    .await;
    assert_eq!(pointers(&r), ["/body/user_id"], "{r}");
    assert!(upstream.requests().is_empty(), "nothing was sent");
}

/// The Encoding Object example of the OpenAPI Specification (3.0.3, §4.7.15): `profileImage`
/// is `{}` with `contentType: image/png, image/jpeg`; `historyMetadata` is an object whose part
/// is `application/xml; charset=utf-8`. Each takes a file part; a part that names no type of
/// its own goes out as the one its encoding names (when it names one).
#[tokio::test]
async fn an_encoding_content_type_makes_a_file_field_and_types_its_part() {
    const SPEC: &str = r#"{
      "openapi": "3.0.3", "info": {"title": "Encoding example", "version": "1"},
      "paths": {"/profile": {"post": {"operationId": "postProfile",
        "requestBody": {"content": {"multipart/form-data": {
          "schema": {"type": "object", "properties": {
            "id": {"type": "string", "format": "uuid"},
            "address": {"type": "object", "properties": {}},
            "historyMetadata": {"description": "metadata in XML format",
                                "type": "object", "properties": {}},
            "profileImage": {}}},
          "encoding": {
            "historyMetadata": {"contentType": "application/xml; charset=utf-8"},
            "profileImage": {"contentType": "image/png, image/jpeg"}}}}},
        "responses": {"200": {"description": "ok"}}}}}
    }"#;
    let upstream = Recorder::start().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("encoding.json");
    std::fs::write(&path, SPEC).unwrap();
    let args = engine_args(path.to_str().unwrap(), Some(upstream.url()));
    let server = Server::start(args, false).await;
    let client = server.client().await;
    let xml = b"<history><visit at=\"2020-01-01\"/></history>";
    let jpeg = b"\xff\xd8\xff\xe0\0\x10JFIF";
    execute_ok(
        &client,
        json!({"operationId": "postProfile", "body": {
            "id": "a9b9c3e4-6f5e-4b8a-9d2b-6d1f0c2b7e11",
            "historyMetadata": {"base64": STANDARD.encode(xml), "filename": "history.xml"},
            "profileImage": {"base64": STANDARD.encode(jpeg), "filename": "me.jpg",
                             "contentType": "image/jpeg"}}}),
    )
    .await;
    let got = upstream.take_one();
    let history = got.part("historyMetadata");
    assert_eq!(&history.bytes[..], xml);
    assert_eq!(
        history.content_type.as_deref(),
        Some("application/xml; charset=utf-8")
    );
    let image = got.part("profileImage");
    assert_eq!(&image.bytes[..], jpeg);
    assert_eq!(image.content_type.as_deref(), Some("image/jpeg"));
    assert_eq!(
        &got.part("id").bytes[..],
        b"a9b9c3e4-6f5e-4b8a-9d2b-6d1f0c2b7e11"
    );
    // `address` names no media type and is an object: no bytes.
    let r = execute_err(
        &client,
        json!({"operationId": "postProfile", "body": {
            "address": {"base64": STANDARD.encode(xml)}}}),
        "INVALID_ARGUMENTS",
    )
    .await;
    assert_eq!(pointers(&r), ["/body/address"], "{r}");
}

const SLACK: &str = "slack-web-swagger2.json";
const SLACK_TOKEN: &str = "xoxb-17653672481-19874698323-pdFZKVeTuE8sk7oOcBrzbqgy";

/// Slack's `chat.postMessage` marks a `token` header required, and its security is the OAuth
/// scheme `slackAuth` (Slack takes `Authorization: Bearer xoxb-…`). With that credential
/// configured, `api_schema` does not list `token` for the agent (it says the server supplies
/// it), the call needs no token from the agent, the configured credential goes out and no
/// second copy is made; an agent's own `token` header (or `token` query parameter on a GET
/// method) is refused, with nothing sent.
#[tokio::test]
async fn slack_token_comes_from_the_configured_credential_never_from_the_agent() {
    let upstream = Recorder::start().await;
    let auth = format!("Authorization: Bearer {SLACK_TOKEN}");
    let server = server(SLACK, &upstream, &[&auth]).await;
    let client = server.client().await;

    let schema = call_ok(
        &client,
        "api_schema",
        json!({"operationId": "chat_postMessage"}),
    )
    .await;
    let asked: Vec<&str> = strings(&schema["parameters"], "name");
    assert!(!asked.contains(&"token"), "{asked:?}");
    assert_eq!(
        schema["security"]["suppliedParameters"],
        json!([{"in": "header", "name": "token"}]),
        "{}",
        schema["security"]
    );
    assert_eq!(schema["security"]["supplied"], true);

    let r = execute_ok(
        &client,
        json!({"operationId": "chat_postMessage",
               "body": {"channel": "C1H9RESGL", "text": "Here's a message for you"}}),
    )
    .await;
    assert_eq!(r["status"], 200, "{r}");
    let got = upstream.take_one();
    assert_eq!(got.uri, "/api/chat.postMessage");
    assert_eq!(
        got.header("authorization"),
        Some(format!("Bearer {SLACK_TOKEN}").as_str())
    );
    assert_eq!(got.header("token"), None, "no second copy");
    assert_eq!(
        String::from_utf8_lossy(&got.body),
        "channel=C1H9RESGL&text=Here%27s+a+message+for+you"
    );

    // The agent's own token replaces nothing: refused at its pointer, nothing sent.
    let r = execute_err(
        &client,
        json!({"operationId": "chat_postMessage",
               "headers": {"token": "xoxp-someone-elses-token-0123456789"},
               "body": {"channel": "C1H9RESGL", "text": "hi"}}),
        "INVALID_ARGUMENTS",
    )
    .await;
    assert_eq!(pointers(&r), ["/headers/token"], "{r}");
    assert!(
        r["error"].as_str().unwrap().contains("configured"),
        "{}",
        r["error"]
    );
    let r = execute_err(
        &client,
        json!({"method": "GET", "path": "/admin.emoji.list",
               "query": {"token": "xoxp-someone-elses-token-0123456789"}}),
        "INVALID_ARGUMENTS",
    )
    .await;
    assert_eq!(pointers(&r), ["/query/token"], "{r}");
    assert!(upstream.requests().is_empty(), "nothing was sent");

    // A GET method whose `token` query parameter is required: not asked either.
    let r = execute_ok(
        &client,
        json!({"method": "GET", "path": "/admin.emoji.list", "query": {"limit": "5"}}),
    )
    .await;
    assert_eq!(r["status"], 200, "{r}");
    let got = upstream.take_one();
    assert_eq!(got.uri, "/api/admin.emoji.list?limit=5");
    assert_eq!(
        got.header("authorization"),
        Some(format!("Bearer {SLACK_TOKEN}").as_str())
    );
}

/// With no credential configured for Slack, `chat.postMessage` without a token is an error that
/// names what the operator configures (the `slackAuth` scheme, or an `Authorization` header),
/// and nothing is sent. The name alone does not make `token` a credential then: an agent that
/// was given a token may still pass it, as before.
#[tokio::test]
async fn slack_without_a_credential_says_what_the_operator_must_configure() {
    let upstream = Recorder::start().await;
    let server = server(SLACK, &upstream, &[]).await;
    let client = server.client().await;
    let r = execute_err(
        &client,
        json!({"operationId": "chat_postMessage",
               "body": {"channel": "C1H9RESGL", "text": "hi"}}),
        "UPSTREAM_ERROR",
    )
    .await;
    let message = r["error"].as_str().unwrap();
    for needle in [
        "headers.token",
        "--upstream-credential slackAuth=",
        "--upstream-header \"Authorization: Bearer",
        "operator",
    ] {
        assert!(message.contains(needle), "{needle:?} in {message}");
    }
    assert!(upstream.requests().is_empty(), "nothing was sent");

    let r = execute_ok(
        &client,
        json!({"operationId": "chat_postMessage", "headers": {"token": SLACK_TOKEN},
               "body": {"channel": "C1H9RESGL", "text": "hi"}}),
    )
    .await;
    assert_eq!(r["status"], 200, "{r}");
    assert_eq!(upstream.take_one().header("token"), Some(SLACK_TOKEN));
}

/// petstore's `findByStatus` takes `status` as a list (`explode: true`): one value is a list
/// of one, a list still works, and a value outside the enum is still named at its pointer.
#[tokio::test]
async fn one_value_for_a_list_query_parameter_is_a_list_of_one() {
    let (upstream, _server, client) = petstore_client(false).await;
    let r = execute_ok(
        &client,
        json!({"operationId": "findPetsByStatus", "query": {"status": "available"}}),
    )
    .await;
    assert_eq!(r["status"], 200, "{r}");
    let r = execute_ok(
        &client,
        json!({"operationId": "findPetsByStatus", "query": {"status": ["available", "sold"]}}),
    )
    .await;
    assert_eq!(r["status"], 200, "{r}");
    let sent: Vec<String> = upstream.requests().iter().map(|r| r.uri.clone()).collect();
    assert_eq!(
        sent,
        [
            "/v2/pet/findByStatus?status=available",
            "/v2/pet/findByStatus?status=available&status=sold"
        ]
    );
    let r = execute_err(
        &client,
        json!({"operationId": "findPetsByStatus", "query": {"status": "lost"}}),
        "INVALID_ARGUMENTS",
    )
    .await;
    assert_eq!(pointers(&r), ["/query/status/0"], "{r}");
    assert!(
        r["violations"][0]["message"]
            .as_str()
            .unwrap()
            .contains("\"available\""),
        "{r}"
    );
    assert_eq!(upstream.requests().len(), 2);
}

/// Stripe's list parameters are `style: deepObject` arrays (`expand[]`, `types[]`): one value is
/// sent as `expand[0]=…`, and `"3"` for the integer `limit` is 3. A list of objects
/// (`lines` of `GET /v1/credit_notes/preview`) takes no single value, and a body stays strict:
/// one value where `POST /v1/customers`'s form body wants a list is refused, nothing sent.
#[tokio::test]
async fn stripe_list_parameters_take_one_value_and_bodies_stay_strict() {
    let upstream = Recorder::start().await;
    let server = server("stripe.json", &upstream, &[STRIPE_KEY]).await;
    let client = server.client().await;
    let r = execute_ok(
        &client,
        json!({"operationId": "GetCustomers",
               "query": {"expand": "data.default_source", "limit": "3"}}),
    )
    .await;
    assert_eq!(r["status"], 200, "{r}");
    let r = execute_ok(
        &client,
        json!({"operationId": "GetEvents", "query": {"types": "charge.succeeded"}}),
    )
    .await;
    assert_eq!(r["status"], 200, "{r}");
    let sent: Vec<String> = upstream.requests().iter().map(|r| r.uri.clone()).collect();
    assert_eq!(
        sent,
        [
            "/v1/customers?expand[0]=data.default_source&limit=3",
            "/v1/events?types[0]=charge.succeeded"
        ]
    );
    upstream.got.lock().unwrap().clear();

    let r = execute_err(
        &client,
        json!({"operationId": "GetCreditNotesPreview",
               "query": {"invoice": "in_1", "lines": "il_1"}}),
        "INVALID_ARGUMENTS",
    )
    .await;
    assert_eq!(pointers(&r), ["/query/lines"], "{r}");
    let r = execute_err(
        &client,
        json!({"operationId": "PostCustomers",
               "body": {"email": "jenny.rosen@example.com", "expand": "default_source"}}),
        "INVALID_ARGUMENTS",
    )
    .await;
    assert_eq!(pointers(&r), ["/body/expand"], "{r}");
    assert!(upstream.requests().is_empty(), "nothing was sent");
}

/// GitHub's real `POST /orgs/{org}/packages/{package_type}/{package_name}/restore` takes a
/// `token` query parameter ("package token") and its spec declares no security at all: with
/// GitHub's `Authorization` configured, that `token` is still the agent's to give (no flag
/// could send a query credential no scheme places), and it reaches the URL.
#[tokio::test]
async fn a_query_token_no_scheme_places_stays_the_agents() {
    let upstream = Recorder::start().await;
    let server = server(
        "github-rest-3.0.json",
        &upstream,
        &["Authorization: Bearer ghp_16C7e42F292c6912E7710c838347Ae178B4a"],
    )
    .await;
    let client = server.client().await;
    let id = "packages/restore-package-for-org";
    let schema = call_ok(&client, "api_schema", json!({"operationId": id})).await;
    assert!(
        strings(&schema["parameters"], "name").contains(&"token"),
        "{schema}"
    );
    let r = execute_ok(
        &client,
        json!({"operationId": id, "dryRun": true, "query": {"token": "pkg-restore-1"},
               "pathParams": {"org": "octo-org", "package_type": "npm", "package_name": "hello"}}),
    )
    .await;
    let url = r["request"]["url"].as_str().unwrap();
    assert!(
        url.ends_with("/orgs/octo-org/packages/npm/hello/restore?token=pkg-restore-1"),
        "{url}"
    );
}
