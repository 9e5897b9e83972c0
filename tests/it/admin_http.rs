//! `/admin/v1/*` over real HTTP (axum on 127.0.0.1:0, reqwest), and the admin OpenAPI document.

use apigate::auth::{Auth, AuthConfig, KeyPrincipal, NewKey};
use apigate::spec::Method;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::db::TestDb;

const BOOTSTRAP: &str = "bootstrap-admin-key-for-tests";

struct Server {
    base: String,
    auth: Auth,
    _db: TestDb,
}

async fn start() -> Server {
    let db = TestDb::new().await;
    let auth = Auth::new(
        db.store.clone(),
        AuthConfig {
            bootstrap_key: Some(BOOTSTRAP.into()),
            ..AuthConfig::default()
        },
    )
    .await
    .unwrap();
    let app = apigate::http::admin::router(auth.clone());
    let addr = crate::support::serve_app(app).await;
    Server {
        base: format!("http://{addr}/admin/v1"),
        auth,
        _db: db,
    }
}

async fn call(
    method: reqwest::Method,
    url: &str,
    key: Option<&str>,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut req = reqwest::Client::new().request(method, url);
    if let Some(k) = key {
        req = req.header("x-api-key", k);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status();
    let text = resp.text().await.unwrap();
    let json = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, json)
}

#[tokio::test]
async fn admin_api_needs_an_admin_key() {
    let s = start().await;
    let keys = format!("{}/keys", s.base);

    let (st, body) = call(reqwest::Method::GET, &keys, None, None).await;
    assert_eq!(st, StatusCode::UNAUTHORIZED);
    assert_eq!(body["code"], "UNAUTHORIZED");
    assert!(body["error"].is_string());

    let (st, _) = call(reqwest::Method::GET, &keys, Some("agk_wrong"), None).await;
    assert_eq!(st, StatusCode::UNAUTHORIZED);

    // A key without apigate.admin is forbidden, and told what it lacks. (`apigate.*` would
    // include apigate.admin.)
    let plain = s
        .auth
        .create_key(NewKey {
            name: "agent".into(),
            features: vec!["apigate.discover".into(), "apigate.execute".into()],
            ..NewKey::default()
        })
        .await
        .unwrap();
    let (st, body) = call(reqwest::Method::GET, &keys, Some(&plain.key), None).await;
    assert_eq!(st, StatusCode::FORBIDDEN);
    assert_eq!(body["code"], "FORBIDDEN");
    assert_eq!(body["missing"], "apigate.admin");
}

#[tokio::test]
async fn keys_and_sessions_round_trip_over_http() {
    let s = start().await;
    let keys = format!("{}/keys", s.base);

    // The bootstrap key creates the first admin key.
    let (st, admin) = call(
        reqwest::Method::POST,
        &keys,
        Some(BOOTSTRAP),
        Some(json!({"name": "backend", "features": ["apigate.*"]})),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{admin}");
    let admin_key = admin["key"].as_str().unwrap().to_string();
    assert!(admin_key.starts_with("agk_"));

    // Bad input is a JSON 400.
    let (st, body) = call(
        reqwest::Method::POST,
        &keys,
        Some(&admin_key),
        Some(json!({"name": "x", "features": ["not valid"]})),
    )
    .await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    assert_eq!(body["code"], "INVALID_ARGUMENTS");
    let (st, body) = call(
        reqwest::Method::POST,
        &keys,
        Some(&admin_key),
        Some(json!({"nom": "x"})),
    )
    .await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    assert_eq!(body["code"], "INVALID_ARGUMENTS");

    // An agent key, created with the admin key.
    let (st, agent) = call(
        reqwest::Method::POST,
        &keys,
        Some(&admin_key),
        Some(json!({"name": "opencode", "readOnly": true})),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED);
    assert_eq!(agent["readOnly"], true);

    let (st, list) = call(reqwest::Method::GET, &keys, Some(&admin_key), None).await;
    assert_eq!(st, StatusCode::OK);
    let list = list["keys"].as_array().unwrap();
    assert_eq!(list.len(), 2);
    assert!(list.iter().all(|k| k.get("key").is_none()));
    assert_eq!(list[0]["createdBy"], "bootstrap");
    let admin_public = admin["publicId"].as_str().unwrap();
    assert_eq!(list[1]["createdBy"], format!("key:{admin_public}"));

    // Roles and sessions.
    let (st, role) = call(
        reqwest::Method::PUT,
        &format!("{}/roles/viewer", s.base),
        Some(&admin_key),
        Some(json!({"features": ["apigate.discover", "apigate.schema"]})),
    )
    .await;
    assert_eq!(st, StatusCode::OK, "{role}");
    let (st, sess) = call(
        reqwest::Method::POST,
        &format!("{}/sessions", s.base),
        Some(&admin_key),
        Some(json!({"userId": "u-1", "tenantId": "t-1", "roles": ["viewer"], "ttlMinutes": 30})),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{sess}");
    let token = sess["token"].as_str().unwrap().to_string();
    assert!(sess["expiresAt"].is_string());
    let p = s
        .auth
        .authenticate_session(&KeyPrincipal::dev(), &token)
        .await
        .unwrap();
    assert!(p.may_use_tool("api_schema").is_ok());
    assert!(p.may_use_tool("api_execute").is_err());

    // Tokens are refused in URLs; revoked by POSTing the token.
    let (st, _) = call(
        reqwest::Method::DELETE,
        &format!("{}/sessions/{token}", s.base),
        Some(&admin_key),
        None,
    )
    .await;
    assert_eq!(st, StatusCode::BAD_REQUEST);
    let (st, _) = call(
        reqwest::Method::POST,
        &format!("{}/sessions/revoke", s.base),
        Some(&admin_key),
        Some(json!({"token": token})),
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    assert!(
        s.auth
            .authenticate_session(&KeyPrincipal::dev(), &token)
            .await
            .is_err()
    );

    // And by id.
    let (_, sess2) = call(
        reqwest::Method::POST,
        &format!("{}/sessions", s.base),
        Some(&admin_key),
        Some(json!({"userId": "u-2"})),
    )
    .await;
    let (st, _) = call(
        reqwest::Method::DELETE,
        &format!("{}/sessions/{}", s.base, sess2["id"].as_str().unwrap()),
        Some(&admin_key),
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK);

    // Revoking the admin key through itself locks it out.
    let (st, r) = call(
        reqwest::Method::DELETE,
        &format!("{keys}/{}", admin["id"].as_str().unwrap()),
        Some(&admin_key),
        None,
    )
    .await;
    assert_eq!(st, StatusCode::OK);
    assert!(r["revokedAt"].is_string());
    let (st, _) = call(reqwest::Method::GET, &keys, Some(&admin_key), None).await;
    assert_eq!(st, StatusCode::UNAUTHORIZED);
    let (st, body) = call(
        reqwest::Method::DELETE,
        &format!("{keys}/{}", uuid::Uuid::new_v4()),
        Some(BOOTSTRAP),
        None,
    )
    .await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    assert_eq!(body["code"], "NOT_FOUND");
}

/// The published admin document (parsed strictly, as OpenAPI 3.0, by `openapiv3`) documents
/// every `/admin/v1` route the server mounts with its method, and nothing the server lacks;
/// every operation has an operationId, a summary and `x-required-features`.
#[test]
fn admin_document_matches_the_mounted_routes() {
    use openapiv3::{OpenAPI, ReferenceOr};

    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/openapi/apigate-admin.yaml"
    ))
    .unwrap();
    let doc: OpenAPI = yaml_serde::from_str(&text)
        .unwrap_or_else(|e| panic!("openapi/apigate-admin.yaml is not valid OpenAPI 3.0: {e}"));
    assert!(doc.openapi.starts_with("3.0."), "{}", doc.openapi);
    let mut documented = Vec::new();
    for (path, item) in &doc.paths.paths {
        let ReferenceOr::Item(item) = item else {
            panic!("{path} is a $ref; document the route in place");
        };
        for (method, op) in item.iter() {
            let route = format!("{} {path}", method.to_uppercase());
            assert!(op.operation_id.is_some(), "{route} has no operationId");
            assert!(op.summary.is_some(), "{route} has no summary");
            assert_eq!(
                op.extensions.get("x-required-features"),
                Some(&json!(["apigate.admin"])),
                "{route}"
            );
            documented.push(route);
        }
    }
    let mut mounted: Vec<String> = apigate::http::admin::mounted()
        .into_iter()
        .map(|(method, path)| format!("{method} {path}"))
        .collect();
    documented.sort();
    mounted.sort();
    let undocumented: Vec<_> = mounted.iter().filter(|r| !documented.contains(r)).collect();
    let unmounted: Vec<_> = documented.iter().filter(|r| !mounted.contains(r)).collect();
    assert!(
        undocumented.is_empty() && unmounted.is_empty(),
        "mounted but not documented: {undocumented:?}; documented but not mounted: {unmounted:?}"
    );
}

/// Every documented route answers on the real router (401 without a key: it is mounted and
/// guarded), and a path the document does not name is 404.
#[tokio::test]
async fn every_documented_route_is_served() {
    let s = start().await;
    let root = s.base.trim_end_matches("/admin/v1").to_string();
    for (method, path) in apigate::http::admin::mounted() {
        let concrete = path
            .replace("{id}", &uuid::Uuid::new_v4().to_string())
            .replace("{name}", "viewer");
        let (st, body) = call(method.clone(), &format!("{root}{concrete}"), None, None).await;
        assert_eq!(st, StatusCode::UNAUTHORIZED, "{method} {path}: {body}");
    }
    let (st, _) = call(
        reqwest::Method::GET,
        &format!("{}/not-a-route", s.base),
        Some(BOOTSTRAP),
        None,
    )
    .await;
    assert_eq!(st, StatusCode::NOT_FOUND);
}

/// apigate indexes its own admin document: every operation loads with its required feature,
/// concrete paths resolve to the right template, and arguments validate against the schemas.
#[tokio::test]
async fn apigate_loads_its_own_admin_spec() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/apigate-admin.yaml");
    let spec = apigate::spec::Spec::load(path).await.unwrap();
    assert!(spec.warnings.is_empty(), "{:?}", spec.warnings);
    assert_eq!(spec.operations.len(), 13);
    for op in &spec.operations {
        assert_eq!(op.required_features, ["apigate.admin"], "{}", op.id);
    }

    let id = uuid::Uuid::new_v4();
    let (op, values) = spec
        .find(Method::Delete, &format!("/admin/v1/sessions/{id}"))
        .unwrap();
    assert_eq!(op.id, "revokeSession");
    assert_eq!(values, [("id".to_string(), id.to_string())]);
    let (op, _) = spec
        .find(Method::Post, "/admin/v1/sessions/revoke")
        .unwrap();
    assert_eq!(op.id, "revokeSessionByToken");

    let create = spec.get("createSession").unwrap();
    let mut ok = json!({"body": {"userId": "u1", "roles": ["viewer"], "ttlMinutes": 30}});
    assert!(spec.validate(create, &mut ok).is_empty());
    let mut bad = json!({"body": {"ttlMinutes": 0, "extra": true}});
    let violations = spec.validate(create, &mut bad);
    assert!(violations.len() >= 3, "{violations:?}");

    let set_role = spec.get("setRole").unwrap();
    let mut bad = json!({"pathParams": {"name": "viewer"}, "body": {"features": ["a b"]}});
    assert!(!spec.validate(set_role, &mut bad).is_empty());
    let mut ok =
        json!({"pathParams": {"name": "viewer"}, "body": {"features": ["billing.*", "*"]}});
    let violations = spec.validate(set_role, &mut ok);
    assert!(violations.is_empty(), "{violations:?}");
}

/// The admin operations are found by what an agent would ask, and a principal's permissions
/// filter what discovery shows.
#[tokio::test]
async fn apigate_indexes_its_own_admin_spec() {
    use apigate::auth::{Features, PermissionRules, Principal};
    use apigate::index::{Index, Query};

    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/apigate-admin.yaml");
    let spec = apigate::spec::Spec::load(path).await.unwrap();
    let index = Index::build(&[&spec]).unwrap();
    assert_eq!(index.len(), 13);
    let top = |text: &str| {
        let hits = index.search(&Query::text(text, 3));
        spec.operations[hits[0].op].id.clone()
    };
    assert_eq!(top("create an API key for an agent"), "createKey");
    assert_eq!(top("list server keys"), "listKeys");
    assert_eq!(top("start a session for a user"), "createSession");
    assert_eq!(top("change the features of a role"), "setRole");

    // A read-only admin principal sees only the read operations.
    let rules = PermissionRules::default();
    let reader = Principal {
        features: Features::new(["apigate.*"]),
        read_only: true,
        ..Principal::dev()
    };
    let allowed = |_: usize, op: usize| {
        let op = &spec.operations[op];
        reader.may_see(op.method, &op.path, &op.required_features, &rules)
    };
    let q = Query {
        allowed: Some(&allowed),
        ..Query::text("keys sessions roles", 10)
    };
    let mut seen: Vec<_> = index
        .search(&q)
        .iter()
        .map(|h| spec.operations[h.op].id.as_str())
        .collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            "listAudit",
            "listKeys",
            "listOAuthUsers",
            "listRoles",
            "listSessions"
        ]
    );
}
