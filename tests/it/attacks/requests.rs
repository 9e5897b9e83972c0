//! Issue 26, the request an agent shapes, attacked for real: apigate's HTTP server (dev mode,
//! or production over a real Postgres), rmcp's MCP client and a recording upstream. Each test
//! failed before its fix.
//!
//! - 3: `_method` in a form or multipart body is a method override like the query's.
//! - 6: an agent's query parameter named like a query-placed credential is refused.
//! - 7: a free-form object query parameter (`style: form, explode: true`) sends only the names
//!   its schema declares.
//! - 9: a call carrying a signed identity assertion follows no redirect (the assertion names
//!   the URL it was signed for).
//! - 10: `api_schema` of an operation the caller may not see is `UNKNOWN_OPERATION`, as
//!   discovery hides it.

use std::sync::Arc;

use apigate::auth::identity::{Identity, create_key_file};
use apigate::http::{HttpOptions, KeyCheck};
use serde_json::{Value, json};

use crate::db::TestDb;
use crate::production::{Options, Prod};
use crate::support::{
    KEY, Server, Upstream, call, call_ok, engine_args, execute_err, execute_ok, spec_path,
};

const QUERY_KEY: &str = "query-credential-5f2a9c81d7";

/// Items behind an `apiKey` in the query: `GET /items` declares a parameter of the same name
/// (as real APIs that document their key do), a free-form `filter` object and a `page` object
/// with declared fields, both sent as `style: form, explode: true`; `POST /items/{id}` takes a
/// form or multipart body; `DELETE /items/{id}` needs `items.delete`; `GET /secret` needs
/// `items.secret`.
fn items_spec() -> tempfile::NamedTempFile {
    let id = json!({"name": "id", "in": "path", "required": true, "schema": {"type": "integer"}});
    let free_form = json!({"type": "object", "additionalProperties": true});
    let doc = json!({
        "openapi": "3.0.3",
        "info": {"title": "Items", "version": "1"},
        "components": {
            "securitySchemes": {"queryKey": {"type": "apiKey", "in": "query", "name": "api_key"}},
            "schemas": {"Page": {"type": "object",
                "properties": {"number": {"type": "integer"}, "size": {"type": "integer"}}}},
        },
        "security": [{"queryKey": []}],
        "paths": {
            "/items": {"get": {
                "operationId": "listItems",
                "summary": "List items",
                "parameters": [
                    {"name": "api_key", "in": "query", "schema": {"type": "string"}},
                    {"name": "filter", "in": "query", "style": "form", "explode": true,
                     "schema": free_form},
                    {"name": "page", "in": "query", "style": "form", "explode": true,
                     "schema": {"$ref": "#/components/schemas/Page"}},
                ],
                "responses": {"200": {"description": "items"}},
            }},
            "/items/{id}": {
                "post": {
                    "operationId": "updateItem",
                    "summary": "Update an item",
                    "parameters": [id],
                    "requestBody": {"required": true, "content": {
                        "application/x-www-form-urlencoded": {"schema": free_form},
                        "multipart/form-data": {"schema": free_form},
                    }},
                    "responses": {"200": {"description": "updated"}},
                },
                "delete": {
                    "operationId": "deleteItem",
                    "summary": "Delete an item",
                    "x-required-features": ["items.delete"],
                    "parameters": [id],
                    "responses": {"204": {"description": "deleted"}},
                },
            },
            "/secret": {"get": {
                "operationId": "readSecretReport",
                "summary": "Read the secret report",
                "x-required-features": ["items.secret"],
                "responses": {"200": {"description": "the report"}},
            }},
        },
    });
    let file = tempfile::Builder::new().suffix(".json").tempfile().unwrap();
    std::fs::write(file.path(), doc.to_string()).unwrap();
    file
}

/// A dev server on the items spec, with the query credential configured.
async fn dev_items(upstream: &Upstream, spec: &tempfile::NamedTempFile) -> Server {
    let mut args = engine_args(spec.path().to_str().unwrap(), Some(upstream.url()));
    args.upstream_credentials = vec![format!("queryKey={QUERY_KEY}")];
    Server::start(args, false).await
}

/// A production instance on the items spec, and an agent key holding every feature (each
/// call's features are then its session's).
async fn items_gate(
    db: &TestDb,
    upstream: &Upstream,
    spec: &tempfile::NamedTempFile,
) -> (Prod, String) {
    let options = Options {
        spec: spec.path().to_str().unwrap().to_string(),
        ..Options::petstore()
    };
    let gate = Prod::start(&db.url, upstream, options).await;
    let key = crate::support::key_holding(&gate.auth, "agent", &["*"]).await;
    (gate, key)
}

// ---- 3 -----------------------------------------------------------------------------------------

/// A session that may not delete sends `POST` with `_method=DELETE` in a form or multipart body
/// (Rack, Laravel and Symfony then delete); a read-only session may not send one at all.
#[tokio::test]
async fn a_method_override_in_a_form_body_needs_the_method_it_names() {
    let db = TestDb::new().await;
    let upstream = Upstream::start().await;
    let spec = items_spec();
    let (gate, key) = items_gate(&db, &upstream, &spec).await;
    let writer = gate.session(&["apigate.*"], false).await;
    let client = gate.client(&key, Some(&writer)).await;
    let update = |content_type: &str, body: Value| {
        json!({"operationId": "updateItem", "pathParams": {"id": 7},
            "contentType": content_type, "body": body})
    };
    // The plain update is sent.
    execute_ok(
        &client,
        update("application/x-www-form-urlencoded", json!({"name": "x"})),
    )
    .await;
    let sent = upstream.requests().len();
    for (content_type, field) in [
        ("application/x-www-form-urlencoded", "_method"),
        ("application/x-www-form-urlencoded", "_METHOD"),
        ("multipart/form-data", "_method"),
    ] {
        let body = json!({"name": "x", field: "DELETE"});
        let (err, r) = call(&client, "api_execute", update(content_type, body)).await;
        assert!(err, "{content_type} {field}: the override was sent: {r}");
        assert_eq!(r["code"], "FORBIDDEN", "{r}");
        assert_eq!(r["missing"], "items.delete", "{r}");
    }
    assert_eq!(
        upstream.requests().len(),
        sent,
        "an override reached the API"
    );
    client.cancel().await.unwrap();

    // A read-only session may send no override at all.
    let reader = gate.session(&["*"], true).await;
    let client = gate.client(&key, Some(&reader)).await;
    let body = json!({"_method": "GET"});
    execute_err(
        &client,
        update("application/x-www-form-urlencoded", body),
        "FORBIDDEN",
    )
    .await;
    client.cancel().await.unwrap();

    // With the feature, the form is sent as given.
    let deleter = gate.session(&["apigate.*", "items.delete"], false).await;
    let client = gate.client(&key, Some(&deleter)).await;
    let body = json!({"name": "x", "_method": "DELETE"});
    execute_ok(&client, update("application/x-www-form-urlencoded", body)).await;
    let last = upstream.requests().pop().unwrap();
    assert_eq!(String::from_utf8_lossy(&last.body), "name=x&_method=DELETE");
    client.cancel().await.unwrap();
}

// ---- 6 -----------------------------------------------------------------------------------------

/// `?api_key=ATTACKER&api_key=<secret>`: an API that reads the first value runs the call as the
/// attacker's account, one that reads the last may log the agent's value beside the secret.
#[tokio::test]
async fn a_query_parameter_named_like_the_credential_is_refused() {
    let upstream = Upstream::start().await;
    let spec = items_spec();
    let server = dev_items(&upstream, &spec).await;
    let client = server.client().await;
    execute_ok(&client, json!({"operationId": "listItems"})).await;
    let plain = upstream.requests().pop().unwrap();
    assert_eq!(plain.uri, format!("/items?api_key={QUERY_KEY}"));

    let sent = upstream.requests().len();
    for query in [
        json!({"api_key": "ATTACKER"}),
        json!({"filter": {"API_KEY": "ATTACKER"}}),
    ] {
        let (err, r) = call(
            &client,
            "api_execute",
            json!({"operationId": "listItems", "query": query}),
        )
        .await;
        assert!(err, "{query}: sent beside the credential: {r}");
        assert_eq!(r["code"], "INVALID_ARGUMENTS", "{r}");
        assert!(!r.to_string().contains(QUERY_KEY), "{r}");
    }
    assert_eq!(
        upstream.requests().len(),
        sent,
        "the API got a second api_key"
    );
    client.cancel().await.unwrap();
}

// ---- 7 -----------------------------------------------------------------------------------------

/// A free-form `filter` object put arbitrary names into the URL (`_method`, `access_token`,
/// another operation's parameters); a declared `page` object keeps working.
#[tokio::test]
async fn a_free_form_query_object_sends_only_declared_names() {
    let upstream = Upstream::start().await;
    let spec = items_spec();
    let server = dev_items(&upstream, &spec).await;
    let client = server.client().await;
    execute_ok(
        &client,
        json!({"operationId": "listItems", "query": {"page": {"number": 2, "size": 10}}}),
    )
    .await;
    let sent = upstream.requests();
    assert_eq!(
        sent.last().unwrap().uri,
        format!("/items?number=2&size=10&api_key={QUERY_KEY}")
    );
    for query in [
        json!({"filter": {"_method": "DELETE"}}),
        json!({"filter": {"access_token": "x", "admin": "true"}}),
        json!({"page": {"number": 1, "debug": "true"}}),
    ] {
        let (err, r) = call(
            &client,
            "api_execute",
            json!({"operationId": "listItems", "query": query}),
        )
        .await;
        assert!(err, "{query}: undeclared names reached the URL: {r}");
        assert_eq!(r["code"], "INVALID_ARGUMENTS", "{r}");
    }
    assert_eq!(upstream.requests().len(), sent.len());
    client.cancel().await.unwrap();
}

// ---- 9 -----------------------------------------------------------------------------------------

/// A same-origin redirect was followed with the user's credentials and an assertion whose
/// `htu` names the first URL: the API behind the redirect saw an assertion for another route.
#[tokio::test]
async fn a_call_with_an_identity_assertion_follows_no_redirect() {
    let upstream = Upstream::start().await;
    upstream.redirect_to(&format!("{}/v2/user/landed", upstream.url()));
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("signing.pem");
    create_key_file(&key_file).unwrap();
    let mut engine = engine_args(&spec_path("petstore-3.0.json"), Some(upstream.url()))
        .build()
        .await
        .expect("engine builds");
    let (listener, addr) = Server::listen().await;
    engine.identity = Some(Arc::new(
        Identity::new("x-apigate-identity", &format!("http://{addr}"), &[key_file])
            .expect("the key loads"),
    ));
    let options = HttpOptions::new(KeyCheck::Single(KEY.into()), "development");
    let server = Server::serve(listener, engine, options, Default::default());
    let client = server.client().await;
    let r = execute_ok(
        &client,
        json!({"operationId": "getUserByName", "pathParams": {"username": "redirect"}}),
    )
    .await;
    assert_eq!(r["status"], 302, "{r}");
    let seen = upstream.requests();
    assert_eq!(
        seen.iter().map(|s| s.uri.as_str()).collect::<Vec<_>>(),
        ["/v2/user/redirect"],
        "the redirect was followed with the assertion"
    );
    assert!(seen[0].headers.contains_key("x-apigate-identity"));
    client.cancel().await.unwrap();
    drop(server);
}

// ---- 10 ----------------------------------------------------------------------------------------

/// A session without `items.secret` neither finds `readSecretReport` nor learns from
/// `api_schema` that it exists (it said FORBIDDEN, "lacks the feature items.secret").
#[tokio::test]
async fn api_schema_does_not_confirm_a_hidden_operation() {
    let db = TestDb::new().await;
    let upstream = Upstream::start().await;
    let spec = items_spec();
    let (gate, key) = items_gate(&db, &upstream, &spec).await;
    let session = gate.session(&["apigate.*"], false).await;
    let client = gate.client(&key, Some(&session)).await;
    let found = call_ok(
        &client,
        "api_discover",
        json!({"query": "read the secret report"}),
    )
    .await;
    assert!(!found.to_string().contains("readSecretReport"), "{found}");
    for args in [
        json!({"operationId": "readSecretReport"}),
        json!({"method": "GET", "path": "/secret"}),
    ] {
        let (err, r) = call(&client, "api_schema", args.clone()).await;
        assert!(err, "{args}: {r}");
        assert_eq!(r["code"], "UNKNOWN_OPERATION", "{args}: {r}");
        assert!(!r.to_string().contains("items.secret"), "{r}");
        assert!(
            !r["closest"].to_string().contains("readSecretReport"),
            "{args}: {r}"
        );
    }
    // A visible operation's schema is still shown.
    call_ok(&client, "api_schema", json!({"operationId": "listItems"})).await;
    client.cancel().await.unwrap();
}
