//! `upstream`: the requests `api_execute` really sends, checked on a real axum upstream that
//! records what arrives (method, raw path and query, headers, body), and the answers it gets
//! back (errors, truncation, timeouts, redirects).

use apigate::spec::Method;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use apigate::spec::Spec;
use apigate::upstream::{CallArgs, Upstream, UpstreamConfig, UpstreamError};
use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

const PETSTORE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/data/specs/petstore-3.0.json"
);

#[derive(Debug, Clone)]
struct Received {
    method: String,
    /// Path and query exactly as they arrived.
    uri: String,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Received {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
    fn body_text(&self) -> String {
        String::from_utf8(self.body.clone()).unwrap()
    }
}

#[derive(Clone)]
struct App {
    seen: Arc<Mutex<Vec<Received>>>,
    /// Where `/away` redirects (another origin).
    other: Arc<Mutex<String>>,
    /// Served at `/spec.json`.
    spec: Arc<Mutex<String>>,
}

struct Server {
    addr: SocketAddr,
    app: App,
}

impl Server {
    async fn start() -> Server {
        let app = App {
            seen: Arc::default(),
            other: Arc::default(),
            spec: Arc::default(),
        };
        let router = Router::new().fallback(handle).with_state(app.clone());
        let addr = crate::support::serve_app(router).await;
        Server { addr, app }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn seen(&self) -> Vec<Received> {
        self.app.seen.lock().unwrap().clone()
    }

    fn last(&self) -> Received {
        self.seen().pop().expect("the upstream received a request")
    }
}

async fn handle(State(app): State<App>, req: Request) -> Response {
    let (parts, body) = req.into_parts();
    let uri = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_default();
    if uri == "/spec.json" {
        let spec = app.spec.lock().unwrap().clone();
        return ([(header::CONTENT_TYPE, "application/json")], spec).into_response();
    }
    let body = axum::body::to_bytes(body, 1 << 20).await.unwrap().to_vec();
    app.seen.lock().unwrap().push(Received {
        method: parts.method.to_string(),
        uri: uri.clone(),
        headers: parts.headers,
        body,
    });
    let path = parts.uri.path();
    let last = path.rsplit('/').next().unwrap_or_default();
    match last {
        "slow" => {
            tokio::time::sleep(Duration::from_secs(30)).await;
            "late".into_response()
        }
        "boom" => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "application/json")],
            r#"{"message":"boom"}"#,
        )
            .into_response(),
        "big" => {
            // 10 MB of JSON, produced as it is read.
            let chunks = (0..10_000u32).map(|i| {
                let mut s = String::with_capacity(1024);
                if i == 0 {
                    s.push('[');
                }
                while s.len() < 1000 {
                    s.push_str(&format!(r#"{{"id":{i},"name":"pet {i}"}},"#));
                }
                if i == 9_999 {
                    s.push_str(r#"{"id":-1}]"#);
                }
                Ok::<_, std::io::Error>(s)
            });
            Response::builder()
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from_stream(futures::stream::iter(chunks)))
                .unwrap()
        }
        "trickle" => {
            // Headers and a first chunk at once, then nothing.
            let chunks = futures::stream::unfold(0u8, |n| async move {
                if n > 0 {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                }
                Some((Ok::<_, std::io::Error>("[1,".to_string()), n + 1))
            });
            Response::builder()
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from_stream(chunks))
                .unwrap()
        }
        "text" => {
            // 1 MB of text with two-byte characters.
            let chunks = (0..1000).map(|_| Ok::<_, std::io::Error>("é".repeat(500)));
            Response::builder()
                .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
                .body(Body::from_stream(futures::stream::iter(chunks)))
                .unwrap()
        }
        "away" => {
            let to = format!("{}/steal", app.other.lock().unwrap());
            (StatusCode::FOUND, [(header::LOCATION, to)]).into_response()
        }
        "echo" => {
            let headers: serde_json::Map<String, Value> = app
                .seen
                .lock()
                .unwrap()
                .last()
                .map(|r| {
                    r.headers
                        .iter()
                        .map(|(k, v)| (k.to_string(), json!(v.to_str().unwrap_or_default())))
                        .collect()
                })
                .unwrap_or_default();
            (
                [(
                    header::HeaderName::from_static("www-authenticate"),
                    "Bearer error=\"invalid_token\" token=\"sk_test_SECRET\"",
                )],
                axum::Json(json!({"headers": headers})),
            )
                .into_response()
        }
        "binary" => (
            [(header::CONTENT_TYPE, "application/octet-stream")],
            vec![0xffu8, 0x00, 0xfe, 0x10],
        )
            .into_response(),
        "diff" => (
            [(header::CONTENT_TYPE, "application/vnd.github.diff")],
            "diff --git a/x b/x\n",
        )
            .into_response(),
        "home" => (StatusCode::FOUND, [(header::LOCATION, "/v2/user/landed")]).into_response(),
        "loop" => (StatusCode::FOUND, [(header::LOCATION, "/v2/user/loop")]).into_response(),
        _ => (
            [
                (header::CONTENT_TYPE, "application/json"),
                (header::SET_COOKIE, "session=s3cret"),
                (header::SERVER, "test/1.0"),
                (
                    header::HeaderName::from_static("x-ratelimit-remaining"),
                    "41",
                ),
            ],
            json!({"ok": true, "uri": uri}).to_string(),
        )
            .into_response(),
    }
}

fn petstore() -> Spec {
    Spec::from_bytes(&std::fs::read(PETSTORE).unwrap(), PETSTORE).unwrap()
}

fn upstream(base: &str) -> Upstream {
    upstream_with(base, |_| {})
}

fn upstream_with(base: &str, f: impl FnOnce(&mut UpstreamConfig)) -> Upstream {
    let mut cfg = UpstreamConfig {
        base_url: Some(UpstreamConfig::parse_base_url(base).unwrap()),
        ..Default::default()
    };
    f(&mut cfg);
    Upstream::new(cfg).unwrap()
}

/// A recording server and an upstream client for it, configured by `f`.
async fn start(f: impl FnOnce(&mut UpstreamConfig)) -> (Server, Upstream) {
    let srv = Server::start().await;
    let up = upstream_with(&srv.url(), f);
    (srv, up)
}

/// A configuration that sends the credential `header` (`Name: value`) with every request.
fn sending(header: &str) -> impl FnOnce(&mut UpstreamConfig) + '_ {
    move |c: &mut UpstreamConfig| c.headers = vec![UpstreamConfig::parse_header(header).unwrap()]
}

/// A curated spec of `tests/data/specs`.
async fn load(name: &str) -> Spec {
    Spec::load(&crate::support::spec_path(name)).await.unwrap()
}

/// An OpenAPI 3.0 document of these paths on `server`.
fn openapi(server: &str, paths: Value) -> Spec {
    let doc = json!({
        "openapi": "3.0.0",
        "info": {"title": "test", "version": "1"},
        "servers": [{"url": server}],
        "paths": paths,
    });
    Spec::from_bytes(doc.to_string().as_bytes(), "test.json").unwrap()
}

/// Request parts as `api_execute` hands them to the upstream after validation.
fn args(v: Value) -> CallArgs {
    let section = |k: &str| {
        v.get(k)
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default()
    };
    CallArgs {
        path_params: section("pathParams"),
        query: section("query"),
        headers: section("headers"),
        body: v.get("body").filter(|b| !b.is_null()).cloned(),
        content_type: v
            .get("contentType")
            .and_then(Value::as_str)
            .map(str::to_string),
        accept: v.get("accept").and_then(Value::as_str).map(str::to_string),
        ..Default::default()
    }
}

/// Prepares and sends `op_id` with `a`.
async fn call(
    up: &Upstream,
    spec: &Spec,
    op_id: &str,
    a: Value,
) -> Result<apigate::upstream::UpstreamResponse, UpstreamError> {
    let op = spec.get(op_id).unwrap();
    let req = up.prepare(spec, op, &args(a))?;
    up.send(&req, &Default::default()).await
}

/// `getUserByName` on the petstore: what the upstream answers depends on the name (`boom`,
/// `slow`, `big`, `away`…).
async fn get_user(
    up: &Upstream,
    name: &str,
) -> Result<apigate::upstream::UpstreamResponse, UpstreamError> {
    call(
        up,
        &petstore(),
        "getUserByName",
        json!({"pathParams": {"username": name}}),
    )
    .await
}

#[tokio::test]
async fn path_parameters_are_encoded_and_cannot_change_the_route() {
    let (srv, up) = start(|_| {}).await;
    let spec = petstore();
    for (value, arrived) in [
        ("a/b", "/v2/user/a%2Fb"),
        ("x?y=1", "/v2/user/x%3Fy%3D1"),
        ("a b#c", "/v2/user/a%20b%23c"),
        ("%2e%2e", "/v2/user/%252e%252e"),
        ("ünï", "/v2/user/%C3%BCn%C3%AF"),
    ] {
        let r = get_user(&up, value).await.unwrap();
        assert_eq!(r.status, 200);
        let got = srv.last();
        assert_eq!((got.method.as_str(), got.uri.as_str()), ("GET", arrived));
    }
    let before = srv.seen().len();
    for value in ["../admin", "..", ".", "a/../../admin", "..\\admin", ""] {
        let e = get_user(&up, value).await.unwrap_err();
        assert!(
            matches!(e, UpstreamError::InvalidArguments(_)),
            "{value:?}: {e:?}"
        );
    }
    // A concrete path matched to its template carries the decoded value: still refused.
    let (op, values) = spec.find(Method::Get, "/user/..%2Fadmin").unwrap();
    let mut a = CallArgs::default();
    a.path_params
        .extend(values.into_iter().map(|(k, v)| (k, Value::String(v))));
    assert!(matches!(
        up.prepare(&spec, op, &a),
        Err(UpstreamError::InvalidArguments(_))
    ));
    // Missing and undeclared path parameters.
    for a in [
        json!({}),
        json!({"pathParams": {"username": "x", "admin": "1"}}),
    ] {
        assert!(matches!(
            call(&up, &spec, "getUserByName", a).await,
            Err(UpstreamError::InvalidArguments(_))
        ));
    }
    assert_eq!(
        srv.seen().len(),
        before,
        "no refused request reached the upstream"
    );
}

const STYLES: &str = r#"{
  "openapi": "3.0.3",
  "info": {"title": "styles", "version": "1"},
  "servers": [{"url": "https://api.example.com/v1"}],
  "paths": {
    "/search/{ids}": {
      "get": {
        "operationId": "search",
        "parameters": [
          {"name": "ids", "in": "path", "required": true, "schema": {"type": "array", "items": {"type": "integer"}}},
          {"name": "q", "in": "query", "schema": {"type": "string"}},
          {"name": "tag", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}},
          {"name": "fields", "in": "query", "explode": false, "schema": {"type": "array", "items": {"type": "string"}}},
          {"name": "filter", "in": "query", "style": "deepObject", "explode": true, "schema": {"type": "object"}},
          {"name": "words", "in": "query", "style": "spaceDelimited", "explode": false, "schema": {"type": "array"}},
          {"name": "pipes", "in": "query", "style": "pipeDelimited", "explode": false, "schema": {"type": "array"}},
          {"name": "point", "in": "query", "schema": {"type": "object",
            "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}}}},
          {"name": "X-Trace", "in": "header", "schema": {"type": "string"}},
          {"name": "X-Tenant", "in": "header", "required": true, "schema": {"type": "string"}}
        ],
        "responses": {"200": {"description": "ok"}}
      }
    }
  }
}"#;

#[tokio::test]
async fn query_parameters_follow_style_and_explode() {
    let (srv, up) = start(|_| {}).await;
    let spec = Spec::from_bytes(STYLES.as_bytes(), "styles.json").unwrap();
    call(
        &up,
        &spec,
        "search",
        json!({
            "pathParams": {"ids": [3, 4]},
            "query": {
                "q": "a&b=c d",
                "tag": ["x", "y"],
                "fields": ["id", "name"],
                "filter": {"status": "open", "owner": {"id": 7}},
                "words": ["hello", "world"],
                "pipes": ["a", "b|c"],
                "point": {"x": 1, "y": 2}
            },
            "headers": {"X-Tenant": "acme", "x-trace": "t-1"}
        }),
    )
    .await
    .unwrap();
    let got = srv.last();
    assert_eq!(
        got.uri,
        "/v1/search/3,4?q=a%26b%3Dc%20d&tag=x&tag=y&fields=id,name\
         &filter[status]=open&filter[owner][id]=7&words=hello%20world&pipes=a|b%7Cc&x=1&y=2"
    );
    assert_eq!(got.header("x-tenant"), Some("acme"));
    assert_eq!(got.header("x-trace"), Some("t-1"));

    // Petstore: an exploded form array.
    let spec = petstore();
    call(
        &up,
        &spec,
        "findPetsByStatus",
        json!({"query": {"status": ["available", "sold"]}}),
    )
    .await
    .unwrap();
    assert_eq!(
        srv.last().uri,
        "/v2/pet/findByStatus?status=available&status=sold"
    );
}

#[tokio::test]
async fn headers_from_the_agent_are_limited_to_declared_ones() {
    let (srv, up) = start(|_| {}).await;
    let spec = petstore();
    let delete = |headers: Value| {
        let a = json!({"pathParams": {"petId": 5}, "headers": headers});
        call(&up, &spec, "deletePet", a)
    };
    // Declared header passes.
    delete(json!({"api_key": "k-123"})).await.unwrap();
    let got = srv.last();
    assert_eq!(
        (got.method.as_str(), got.uri.as_str()),
        ("DELETE", "/v2/pet/5")
    );
    assert_eq!(got.header("api_key"), Some("k-123"));
    let before = srv.seen().len();
    for name in [
        "Authorization",
        "authorization",
        "Cookie",
        "Host",
        "Proxy-Authorization",
        "Connection",
        "Transfer-Encoding",
        "Upgrade",
        "Content-Length",
        "X-Undeclared",
    ] {
        let e = delete(json!({name: "v"})).await.unwrap_err();
        assert!(
            matches!(e, UpstreamError::InvalidArguments(_)),
            "{name}: {e:?}"
        );
        assert!(e.to_string().contains(name), "{name}: {e}");
    }
    // Header injection through the value.
    let e = delete(json!({"api_key": "k\r\nX-Evil: 1"}))
        .await
        .unwrap_err();
    assert!(matches!(e, UpstreamError::InvalidArguments(_)));
    // A required declared header that is missing.
    let styles = Spec::from_bytes(STYLES.as_bytes(), "styles.json").unwrap();
    let e = call(&up, &styles, "search", json!({"pathParams": {"ids": [1]}}))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("X-Tenant"), "{e}");
    assert_eq!(srv.seen().len(), before);
}

#[tokio::test]
async fn credentials_are_injected_and_never_shown() {
    let srv = Server::start().await;
    let up = upstream_with(&srv.url(), |c| {
        c.headers = UpstreamConfig::headers_from_env(
            "Authorization: Bearer sk_test_SECRET\napi_key: KEY_SECRET",
        )
        .unwrap();
    });
    let spec = petstore();
    let op = spec.get("deletePet").unwrap();
    let req = up
        .prepare(&spec, op, &args(json!({"pathParams": {"petId": 9}})))
        .unwrap();
    // The dry run: every detail but the secrets.
    let view = serde_json::to_value(&req).unwrap();
    assert_eq!(view["method"], "DELETE");
    assert_eq!(view["url"], format!("{}/v2/pet/9", srv.url()));
    assert_eq!(view["headers"]["authorization"], "[redacted]");
    assert_eq!(view["headers"]["api_key"], "[redacted]");
    for shown in [view.to_string(), format!("{req:?}"), format!("{up:?}")] {
        assert!(!shown.contains("SECRET"), "{shown}");
    }
    assert!(srv.seen().is_empty(), "a dry run sends nothing");
    up.send(&req, &Default::default()).await.unwrap();
    let got = srv.last();
    assert_eq!(got.header("authorization"), Some("Bearer sk_test_SECRET"));
    assert_eq!(got.header("api_key"), Some("KEY_SECRET"));
    // The agent cannot override a configured credential, even a declared header.
    let mine = json!({"pathParams": {"petId": 9}, "headers": {"api_key": "mine"}});
    let e = call(&up, &spec, "deletePet", mine).await.unwrap_err();
    assert!(matches!(e, UpstreamError::InvalidArguments(_)));
    assert!(!e.to_string().contains("SECRET"));
}

#[tokio::test]
async fn json_and_form_bodies() {
    let (srv, up) = start(|_| {}).await;
    let spec = petstore();
    let pet = json!({"name": "doggie", "photoUrls": ["u"], "tags": [{"id": 1, "name": "t"}]});
    call(&up, &spec, "addPet", json!({"body": pet}))
        .await
        .unwrap();
    let got = srv.last();
    assert_eq!((got.method.as_str(), got.uri.as_str()), ("POST", "/v2/pet"));
    assert_eq!(got.header("content-type"), Some("application/json"));
    assert_eq!(serde_json::from_slice::<Value>(&got.body).unwrap(), pet);

    call(
        &up,
        &spec,
        "updatePetWithForm",
        json!({"pathParams": {"petId": 1}, "body": {"name": "new name", "status": "sold&gone"}}),
    )
    .await
    .unwrap();
    let got = srv.last();
    assert_eq!(
        got.header("content-type"),
        Some("application/x-www-form-urlencoded")
    );
    assert_eq!(got.body_text(), "name=new+name&status=sold%26gone");

    // A body where the operation takes none.
    let e = call(&up, &spec, "getInventory", json!({"body": {"a": 1}}))
        .await
        .unwrap_err();
    assert!(matches!(e, UpstreamError::InvalidArguments(_)));
}

#[tokio::test]
async fn stripe_form_bodies_use_brackets() {
    let (srv, up) = start(sending("Authorization: Bearer sk_test_x")).await;
    let spec = load("stripe.json").await;
    let (op, _) = spec.find(Method::Post, "/v1/customers").unwrap();
    let body = json!({
        "email": "jenny+1@example.com",
        "metadata": {"order_id": "6735"},
        "address": {"line1": "1 Main St", "city": "Paris"},
        "preferred_locales": ["fr", "en"],
        "tax_id_data": [{"type": "eu_vat", "value": "FR123"}],
        "expand": ["tax"]
    });
    let req = up.prepare(&spec, op, &args(json!({"body": body}))).unwrap();
    up.send(&req, &Default::default()).await.unwrap();
    let got = srv.last();
    assert_eq!(got.uri, "/v1/customers");
    assert_eq!(
        got.header("content-type"),
        Some("application/x-www-form-urlencoded")
    );
    let pairs: Vec<(String, String)> = url::form_urlencoded::parse(&got.body)
        .into_owned()
        .collect();
    let expected: Vec<(String, String)> = [
        ("email", "jenny+1@example.com"),
        ("metadata[order_id]", "6735"),
        ("address[line1]", "1 Main St"),
        ("address[city]", "Paris"),
        ("preferred_locales[0]", "fr"),
        ("preferred_locales[1]", "en"),
        ("tax_id_data[0][type]", "eu_vat"),
        ("tax_id_data[0][value]", "FR123"),
        ("expand[0]", "tax"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(pairs, expected);
    assert!(
        got.body_text()
            .starts_with("email=jenny%2B1%40example.com&metadata%5Border_id%5D=6735")
    );
}

#[tokio::test]
async fn slack_form_data_goes_form_encoded_with_configured_token() {
    let (srv, up) = start(sending("token: xoxb-SECRET")).await;
    let spec = load("slack-web-swagger2.json").await;
    let (op, _) = spec.find(Method::Post, "/chat.postMessage").unwrap();
    let req = up
        .prepare(
            &spec,
            op,
            &args(json!({"body": {"channel": "C1", "text": "hello world", "link_names": true}})),
        )
        .unwrap();
    assert!(!req.view().to_string().contains("SECRET"));
    up.send(&req, &Default::default()).await.unwrap();
    let got = srv.last();
    // Swagger `basePath` under the upstream.
    assert_eq!(got.uri, "/api/chat.postMessage");
    assert_eq!(got.header("token"), Some("xoxb-SECRET"));
    assert_eq!(
        got.body_text(),
        "channel=C1&text=hello+world&link_names=true"
    );
}

#[tokio::test]
async fn responses_come_back_with_safe_headers_only() {
    let (_srv, up) = start(|_| {}).await;
    let r = get_user(&up, "amy").await.unwrap();
    assert!(r.ok);
    assert!(!r.truncated);
    assert_eq!(r.body, json!({"ok": true, "uri": "/v2/user/amy"}));
    assert_eq!(r.headers["x-ratelimit-remaining"], "41");
    assert!(r.headers.contains_key("content-type"));
    assert!(!r.headers.contains_key("set-cookie"));
    assert!(!r.headers.contains_key("server"));
    let shown = serde_json::to_value(&r).unwrap();
    for k in ["status", "ok", "headers", "body", "truncated", "durationMs"] {
        assert!(shown.get(k).is_some(), "{k} in {shown}");
    }
}

#[tokio::test]
async fn a_500_is_passed_back() {
    let (_srv, up) = start(|_| {}).await;
    let r = get_user(&up, "boom").await.unwrap();
    assert_eq!(r.status, 500);
    assert!(!r.ok);
    assert_eq!(r.body, json!({"message": "boom"}));
}

#[tokio::test]
async fn a_slow_upstream_times_out() {
    let (_srv, up) = start(|c| c.timeout = Duration::from_millis(300)).await;
    let e = get_user(&up, "slow").await.unwrap_err();
    assert!(
        matches!(e, UpstreamError::Timeout { connect: false, .. }),
        "{e:?}"
    );
}

#[tokio::test]
async fn a_closed_port_is_a_connect_error() {
    let port = crate::support::free_port();
    let up = upstream(&format!("http://127.0.0.1:{port}"));
    let e = call(&up, &petstore(), "getInventory", json!({}))
        .await
        .unwrap_err();
    assert!(matches!(e, UpstreamError::Connect(_)), "{e:?}");
}

#[tokio::test]
async fn a_10_mb_response_is_cut_to_valid_json_within_the_budget() {
    let (srv, up) = start(|_| {}).await;
    let r = get_user(&up, "big").await.unwrap();
    assert_eq!(r.status, 200);
    assert!(r.truncated);
    let items = r.body.as_array().expect("a JSON array");
    assert!(items.len() > 1000, "{}", items.len());
    assert_eq!(items[0], json!({"id": 0, "name": "pet 0"}));
    assert!(r.body.to_string().len() <= 64 * 1024);
    // A smaller budget.
    let up = upstream_with(&srv.url(), |c| c.max_body_bytes = 100);
    let r = get_user(&up, "big").await.unwrap();
    assert!(r.truncated);
    assert!(
        r.body.is_array() && r.body.to_string().len() <= 100,
        "{}",
        r.body
    );
}

#[tokio::test]
async fn redirects_stay_on_the_origin() {
    let srv = Server::start().await;
    let other = Server::start().await;
    *srv.app.other.lock().unwrap() = other.url();
    let up = upstream_with(&srv.url(), sending("Authorization: Bearer SECRET"));
    let e = get_user(&up, "away").await.unwrap_err();
    assert!(matches!(e, UpstreamError::Redirect { .. }), "{e:?}");
    assert!(e.to_string().contains(&other.url()), "{e}");
    assert!(other.seen().is_empty(), "the other origin received nothing");

    let r = get_user(&up, "home").await.unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body["uri"], "/v2/user/landed");
    let seen = srv.seen();
    assert_eq!(seen[seen.len() - 2].uri, "/v2/user/home");
    assert_eq!(
        seen[seen.len() - 1].header("authorization"),
        Some("Bearer SECRET")
    );

    let e = get_user(&up, "loop").await.unwrap_err();
    assert!(matches!(e, UpstreamError::TooManyRedirects(5)), "{e:?}");
}

#[tokio::test]
async fn server_urls_resolve_from_spec_and_upstream() {
    let srv = Server::start().await;
    let spec = petstore();
    // An upstream with a path of its own replaces the spec server's path.
    let up = upstream(&format!("{}/base/", srv.url()));
    call(&up, &spec, "getInventory", json!({})).await.unwrap();
    assert_eq!(srv.last().uri, "/base/store/inventory");

    // Swagger 2.0 host/basePath/schemes, no --upstream: the spec's own server.
    let swagger = json!({
        "swagger": "2.0", "info": {"title": "s", "version": "1"},
        "host": srv.addr.to_string(), "basePath": "/api/", "schemes": ["http"],
        "paths": {"/items/{id}": {"get": {"operationId": "getItem",
            "parameters": [{"name": "id", "in": "path", "required": true, "type": "string"}],
            "responses": {"200": {"description": "ok"}}}}}
    });
    let spec = Spec::from_bytes(swagger.to_string().as_bytes(), "s.json").unwrap();
    let up = Upstream::new(UpstreamConfig::default()).unwrap();
    call(&up, &spec, "getItem", json!({"pathParams": {"id": "7"}}))
        .await
        .unwrap();
    assert_eq!(srv.last().uri, "/api/items/7");

    // A relative server: resolved against the spec's URL, or refused with advice.
    let relative = json!({
        "openapi": "3.0.0", "info": {"title": "r", "version": "1"},
        "servers": [{"url": "/api/v1"}],
        "paths": {"/ping": {"get": {"operationId": "ping", "responses": {"200": {"description": "ok"}}}}}
    })
    .to_string();
    let spec = Spec::from_bytes(relative.as_bytes(), "r.json").unwrap();
    let e = call(&up, &spec, "ping", json!({})).await.unwrap_err();
    assert!(matches!(e, UpstreamError::NoServer(_)));
    assert!(e.to_string().contains("--upstream"), "{e}");
    let with_upstream = upstream(&srv.url());
    call(&with_upstream, &spec, "ping", json!({}))
        .await
        .unwrap();
    assert_eq!(srv.last().uri, "/api/v1/ping");
    *srv.app.spec.lock().unwrap() = relative;
    let spec = Spec::load(&format!("{}/spec.json", srv.url()))
        .await
        .unwrap();
    call(&up, &spec, "ping", json!({})).await.unwrap();
    assert_eq!(srv.last().uri, "/api/v1/ping");
}

#[tokio::test]
async fn dry_runs_send_nothing_and_echoed_credentials_are_scrubbed() {
    let (srv, up) = start(sending("Authorization: Bearer sk_test_SECRET")).await;
    let spec = petstore();
    let op = spec.get("getUserByName").unwrap();
    let a = args(json!({"pathParams": {"username": "echo"}}));
    let request = up.prepare(&spec, op, &a).unwrap();
    let shown = request.view();
    assert_eq!(shown["url"], format!("{}/v2/user/echo", srv.url()));
    assert_eq!(shown["headers"]["authorization"], "[redacted]");
    assert!(srv.seen().is_empty());

    let done = up.send(&request, &Default::default()).await.unwrap();
    let shown = serde_json::to_value(&done).unwrap();
    assert_eq!(
        srv.last().header("authorization"),
        Some("Bearer sk_test_SECRET")
    );
    assert_eq!(shown["body"]["headers"]["authorization"], "[redacted]");
    assert!(!shown.to_string().contains("SECRET"), "{shown}");
}

#[tokio::test]
async fn a_required_credential_header_must_be_configured() {
    let srv = Server::start().await;
    let spec = openapi(
        "https://api.example.com",
        json!({"/me": {"get": {"operationId": "me",
            "parameters": [{"name": "Authorization", "in": "header", "required": true, "schema": {"type": "string"}}],
            "responses": {"200": {"description": "ok"}}}}}),
    );
    let e = call(&upstream(&srv.url()), &spec, "me", json!({}))
        .await
        .unwrap_err();
    assert!(matches!(e, UpstreamError::MissingCredential(_)), "{e:?}");
    assert!(e.to_string().contains("--upstream-header"), "{e}");
    let up = upstream_with(&srv.url(), sending("Authorization: Basic dTpw"));
    call(&up, &spec, "me", json!({})).await.unwrap();
    assert_eq!(srv.last().header("authorization"), Some("Basic dTpw"));
}

#[tokio::test]
async fn a_body_that_stalls_times_out() {
    let (_srv, up) = start(|c| c.timeout = Duration::from_millis(500)).await;
    let e = get_user(&up, "trickle").await.unwrap_err();
    assert!(matches!(e, UpstreamError::Timeout { .. }), "{e:?}");
}

#[tokio::test]
async fn long_text_is_cut_on_a_character_boundary() {
    let (_srv, up) = start(|c| c.max_body_bytes = 1001).await;
    let r = get_user(&up, "text").await.unwrap();
    assert!(r.truncated);
    let text = r.body.as_str().unwrap();
    assert_eq!(text, "é".repeat(500));
}

/// Every operation of every curated spec prepares without panicking, and the URL stays on the
/// configured upstream under the operation's own path.
#[tokio::test]
async fn every_curated_operation_prepares_on_the_upstream() {
    let up = upstream("http://127.0.0.1:9");
    let dir = crate::spec::specs_dir();
    let mut prepared = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.to_string_lossy().to_string();
        if !(name.ends_with(".json") || name.ends_with(".yaml")) {
            continue;
        }
        let spec = Spec::load(&name).await.unwrap();
        for op in &spec.operations {
            let mut a = CallArgs::default();
            for p in &op.parameters {
                let v = json!("v1");
                match p.location {
                    apigate::spec::ParamIn::Path => {
                        a.path_params.insert(p.name.clone(), v);
                    }
                    apigate::spec::ParamIn::Query if p.required => {
                        a.query.insert(p.name.clone(), v);
                    }
                    _ => {}
                }
            }
            if op.request_body.as_ref().is_some_and(|b| b.required) {
                a.body = Some(json!({}));
            }
            match up.prepare(&spec, op, &a) {
                Ok(req) => {
                    prepared += 1;
                    let url = req.url().to_string();
                    assert!(url.starts_with("http://127.0.0.1:9/"), "{}: {url}", op.id);
                    assert_eq!(req.method(), op.method.as_str());
                }
                Err(UpstreamError::InvalidArguments(m) | UpstreamError::MissingCredential(m)) => {
                    // Raw-body operations given an object, required credential headers.
                    assert!(!m.is_empty());
                }
                Err(e) => panic!("{name} {}: {e:?}", op.id),
            }
        }
    }
    assert!(prepared > 3000, "{prepared}");
}

/// A body-less PUT, POST or PATCH says `Content-Length: 0` (GitHub's "star a repository"
/// answers 411 without it); a GET carries no body header at all.
#[tokio::test]
async fn body_less_writes_send_content_length_zero() {
    let (srv, up) = start(|_| {}).await;
    let spec = openapi(
        "https://api.example.com",
        json!({"/user/starred/{repo}": {
            "parameters": [{"name": "repo", "in": "path", "required": true, "schema": {"type": "string"}}],
            "put": {"operationId": "star", "responses": {"204": {"description": "starred"}}},
            "post": {"operationId": "poke", "responses": {"204": {"description": "poked"}}},
            "patch": {"operationId": "touch", "responses": {"204": {"description": "touched"}}},
            "get": {"operationId": "isStarred", "responses": {"204": {"description": "yes"}}}
        }}),
    );
    for id in ["star", "poke", "touch"] {
        call(&up, &spec, id, json!({"pathParams": {"repo": "apigate"}}))
            .await
            .unwrap();
        let got = srv.last();
        assert_eq!(
            got.header("content-length"),
            Some("0"),
            "{id}: {:?}",
            got.headers
        );
        assert!(got.body.is_empty());
    }
    call(
        &up,
        &spec,
        "isStarred",
        json!({"pathParams": {"repo": "apigate"}}),
    )
    .await
    .unwrap();
    let got = srv.last();
    assert_eq!(got.header("content-length"), None, "{:?}", got.headers);
}

/// The agent picks the request body's media type among those declared (a Kubernetes-style
/// merge patch instead of the first-listed JSON Patch) and the response's among those declared
/// or documented (a GitHub-style diff); a binary answer comes back as type, size and digest,
/// its bytes beside.
#[tokio::test]
async fn content_types_and_accept_are_chosen_among_the_declared_ones() {
    let (srv, up) = start(|_| {}).await;
    let spec = openapi(
        "https://api.example.com/v2",
        json!({
            "/scale/{name}": {
                "parameters": [{"name": "name", "in": "path", "required": true, "schema": {"type": "string"}}],
                "patch": {"operationId": "patchScale",
                    "requestBody": {"required": true, "content": {
                        "application/json-patch+json": {"schema": {"type": "array"}},
                        "application/merge-patch+json": {"schema": {"type": "object"}},
                        "application/strategic-merge-patch+json": {"schema": {"type": "object"}}}},
                    "responses": {"200": {"description": "ok"}}}
            },
            "/commits/diff": {
                "get": {"operationId": "getCommit", "responses": {"200": {"description": "ok", "content": {
                    "application/json": {"schema": {"type": "object"}},
                    "application/vnd.github.diff": {"schema": {"type": "string"}}}}}}
            },
            "/assets/binary": {
                "get": {"operationId": "getAsset",
                    "description": "Set `Accept` to [`application/octet-stream`](https://docs.example.com) for the bytes.",
                    "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": {"type": "object"}}}}}}
            }
        }),
    );
    let patch = |body: Value, content_type: &'static str| {
        let a = json!({"pathParams": {"name": "web"}, "body": body, "contentType": content_type});
        call(&up, &spec, "patchScale", a)
    };
    let accepting =
        |op: &'static str, accept: &'static str| call(&up, &spec, op, json!({"accept": accept}));

    let merge = json!({"spec": {"replicas": 3}});
    patch(merge, "application/merge-patch+json").await.unwrap();
    let got = srv.last();
    assert_eq!(
        got.header("content-type"),
        Some("application/merge-patch+json")
    );
    assert_eq!(got.body_text(), r#"{"spec":{"replicas":3}}"#);
    let e = patch(json!({}), "application/xml").await.unwrap_err();
    assert!(e.to_string().contains("contentType"), "{e}");

    let done = accepting("getCommit", "application/vnd.github.diff")
        .await
        .unwrap();
    assert_eq!(
        srv.last().header("accept"),
        Some("application/vnd.github.diff")
    );
    assert_eq!(done.body, json!("diff --git a/x b/x\n"));
    assert!(accepting("getCommit", "image/png").await.is_err());

    // Documented only in the description, and answered in bytes.
    let op = spec.get("getAsset").unwrap();
    assert!(
        op.response_types
            .iter()
            .any(|t| t == "application/octet-stream")
    );
    let done = accepting("getAsset", "application/octet-stream")
        .await
        .unwrap();
    // A binary body is handed on whole beside its description (`tools::binary_out` returns
    // it as a resource), never as base64 in the JSON.
    let sha256 = apigate::upstream::sha256_hex(&[0xff, 0x00, 0xfe, 0x10]);
    assert_eq!(
        done.body,
        json!({"contentType": "application/octet-stream", "bytes": 4, "sha256": sha256})
    );
    assert_eq!(
        &done.binary.expect("bytes").bytes[..],
        &[0xff, 0x00, 0xfe, 0x10]
    );
}
