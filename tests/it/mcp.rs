//! The MCP server end to end: the real HTTP server, rmcp's client over Streamable HTTP
//! (stateful and stateless), legacy SSE and stdio, against a recording upstream.

use rmcp::ServiceExt;
use serde_json::{Value, json};

use crate::support::{
    KEY, Server, Upstream, call, call_err, call_ok, engine_args, execute_err, execute_ok,
    petstore_client, spec_path, sse_client,
};

async fn petstore_server(upstream: &Upstream, stateless: bool) -> Server {
    Server::start(
        engine_args(&spec_path("petstore-3.0.json"), Some(upstream.url())),
        stateless,
    )
    .await
}

async fn discover_schema_execute(
    client: &rmcp::service::RunningService<rmcp::service::RoleClient, ()>,
    upstream: &Upstream,
) {
    let tools = client.list_all_tools().await.unwrap();
    // Schemas a client reads without a warning: valid 2020-12, standard formats only.
    crate::support::assert_clients_read_schemas(&tools);
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, vec!["api_discover", "api_schema", "api_execute"]);
    let discover = &tools[0];
    assert_eq!(
        discover.annotations.as_ref().unwrap().read_only_hint,
        Some(true)
    );
    assert_eq!(
        tools[2].annotations.as_ref().unwrap().destructive_hint,
        Some(true)
    );
    assert_eq!(
        tools[2].annotations.as_ref().unwrap().open_world_hint,
        Some(true)
    );

    let found = call_ok(
        client,
        "api_discover",
        json!({"query": "find a pet by its id"}),
    )
    .await;
    let ids: Vec<&str> = crate::support::strings(&found["results"], "operationId");
    assert!(ids[..3].contains(&"getPetById"), "{ids:?}");

    let schema = call_ok(client, "api_schema", json!({"operationId": "getPetById"})).await;
    assert_eq!(schema["parameters"][0]["name"], "petId");
    assert_eq!(schema["parameters"][0]["in"], "path");

    let before = upstream.requests().len();
    let result = execute_ok(
        client,
        json!({"operationId": "getPetById", "pathParams": {"petId": 42}}),
    )
    .await;
    assert_eq!(result["status"], 200);
    assert_eq!(result["ok"], true);
    assert_eq!(result["body"]["name"], "Rex");
    let got = upstream.requests();
    assert_eq!(got.len(), before + 1);
    let req = got.last().unwrap();
    assert_eq!(req.method, "GET");
    assert_eq!(req.uri, "/v2/pet/42");
    assert_eq!(
        req.headers.get("authorization").unwrap(),
        "Bearer upstream-secret-token"
    );
    // The upstream credential never reaches the agent.
    assert!(!result.to_string().contains("upstream-secret-token"));
}

#[tokio::test]
async fn streamable_http_stateful_chain() {
    let (upstream, _server, client) = petstore_client(false).await;
    discover_schema_execute(&client, &upstream).await;
    // A concrete path works instead of operationId + pathParams; JSON bodies arrive as sent.
    let r = execute_ok(
        &client,
        json!({"method": "post", "path": "/pet",
        "body": {"name": "Fido", "photoUrls": ["http://x/y.png"], "status": "available"}}),
    )
    .await;
    assert_eq!(r["body"]["id"], 99);
    let req = upstream.requests().pop().unwrap();
    assert_eq!(req.uri, "/v2/pet");
    let sent: Value = serde_json::from_slice(&req.body).unwrap();
    assert_eq!(sent["name"], "Fido");
    assert_eq!(req.headers.get("content-type").unwrap(), "application/json");
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn streamable_http_stateless_chain() {
    let (upstream, _server, client) = petstore_client(true).await;
    discover_schema_execute(&client, &upstream).await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn legacy_sse_chain() {
    let upstream = Upstream::start().await;
    let server = petstore_server(&upstream, false).await;
    let client = sse_client(&server.url(""), &[("x-api-key", KEY)]).await;
    discover_schema_execute(&client, &upstream).await;
    client.cancel().await.unwrap();
    // Unknown sessions and malformed messages get clear answers.
    let http = reqwest::Client::new();
    let r = http
        .post(server.url("/message?sessionId=nope"))
        .header("x-api-key", KEY)
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
    let r = http.get(server.url("/sse")).send().await.unwrap();
    assert_eq!(r.status(), 401);
}

#[tokio::test]
async fn stdio_chain() {
    let upstream = Upstream::start().await;
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_apigate"));
    cmd.args([
        "stdio",
        "--spec",
        &spec_path("petstore-3.0.json"),
        "--upstream",
        &upstream.url(),
        "--upstream-header",
        "Authorization: Bearer upstream-secret-token",
        "--ranker",
        "lexical",
    ]);
    cmd.env("RUST_LOG", "warn");
    let transport = rmcp::transport::TokioChildProcess::new(cmd).unwrap();
    let client = ().serve(transport).await.expect("stdio client initializes");
    discover_schema_execute(&client, &upstream).await;
    client.cancel().await.unwrap();
}

#[tokio::test]
async fn http_guards_answer_before_mcp() {
    let upstream = Upstream::start().await;
    let server = petstore_server(&upstream, false).await;
    let http = reqwest::Client::new();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let post = |key: Option<&str>| {
        let mut b = http
            .post(server.url("/mcp"))
            .header("accept", "application/json, text/event-stream")
            .json(&init);
        if let Some(k) = key {
            b = b.header("x-api-key", k);
        }
        b
    };
    for (key, what) in [(None, "missing"), (Some("wrong-key"), "invalid")] {
        let r = post(key).send().await.unwrap();
        assert_eq!(r.status(), 401);
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["code"], "UNAUTHORIZED");
        assert!(body["error"].as_str().unwrap().contains(what), "{body}");
    }
    // DNS rebinding: a foreign Origin or Host is refused, even with the right key.
    let r = post(Some(KEY))
        .header("origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    let r = post(Some(KEY))
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403);
    // A local origin (a browser page on localhost) and no origin (CLI clients) pass.
    let r = post(Some(KEY))
        .header("origin", format!("http://localhost:{}", server.addr.port()))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    // Bodies over the limit: 413, declared or streamed.
    let big = json!({"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {"pad": "x".repeat(300 * 1024)}});
    let r = http
        .post(server.url("/mcp"))
        .header("x-api-key", KEY)
        .header("accept", "application/json, text/event-stream")
        .json(&big)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    let chunks =
        futures::stream::iter((0..40).map(|_| Ok::<_, std::io::Error>(vec![b' '; 16 * 1024])));
    let r = http
        .post(server.url("/mcp"))
        .header("x-api-key", KEY)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(reqwest::Body::wrap_stream(chunks))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 413);
    // Malformed JSON-RPC gets a JSON-RPC parse error, not a crash.
    let r = http
        .post(server.url("/mcp"))
        .header("x-api-key", KEY)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body("{\"jsonrpc\": \"2.0\", \"id\": 1, ")
        .send()
        .await
        .unwrap();
    assert!(r.status().is_client_error(), "{}", r.status());
    // OAuth discovery and registration probes (what clients try after a 401): a quick 404
    // whose message is what clients show, so it says how to fix the key.
    for (method, path) in [
        (
            reqwest::Method::GET,
            "/.well-known/oauth-protected-resource",
        ),
        (
            reqwest::Method::GET,
            "/.well-known/oauth-authorization-server",
        ),
        (reqwest::Method::POST, "/register"),
    ] {
        let r = http.request(method, server.url(path)).send().await.unwrap();
        assert_eq!(r.status(), 404, "{path}");
        let body: Value = r.json().await.unwrap();
        let message = body["error"].as_str().unwrap_or_default();
        assert!(message.contains("x-api-key"), "{path}: {body}");
    }
    // Health and metrics.
    let health: Value = crate::support::send_json(http.get(server.url("/health"))).await;
    assert_eq!(health["status"], "ok");
    assert_eq!(health["mode"], "development");
    assert_eq!(health["tools"], 3);
    assert_eq!(health["operations"], 20);
    let metrics = crate::support::metrics(&server.url("")).await;
    assert!(metrics.contains("apigate_http_requests_total"), "{metrics}");
    // Still alive after all that.
    let client = server.client().await;
    assert_eq!(client.list_all_tools().await.unwrap().len(), 3);
}

#[tokio::test]
async fn unknown_jsonrpc_methods_get_method_not_found() {
    let upstream = Upstream::start().await;
    let server = petstore_server(&upstream, true).await;
    let http = reqwest::Client::new();
    let r = http
        .post(server.url("/mcp"))
        .header("x-api-key", KEY)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18")
        .json(&json!({"jsonrpc": "2.0", "id": 7, "method": "no/such/method", "params": {}}))
        .send()
        .await
        .unwrap();
    let text = r.text().await.unwrap();
    assert!(text.contains("-32601"), "{text}");
}

#[tokio::test]
async fn tool_errors_carry_stable_codes() {
    let (upstream, _server, client) = petstore_client(false).await;

    call_err(&client, "no_such_tool", json!({}), "UNKNOWN_TOOL").await;

    let r = call_err(
        &client,
        "api_schema",
        json!({"operationId": "getPetByIdd"}),
        "UNKNOWN_OPERATION",
    )
    .await;
    let closest: Vec<&str> = crate::support::strings(&r["closest"], "operationId");
    assert!(closest.contains(&"getPetById"), "{r}");

    let r = execute_err(
        &client,
        json!({"operationId": "getPetById"}),
        "INVALID_ARGUMENTS",
    )
    .await;
    assert!(
        r["violations"][0]["message"]
            .as_str()
            .unwrap()
            .contains("pathParams"),
        "{r}"
    );

    let r = execute_err(
        &client,
        json!({"operationId": "addPet", "body": {"name": 5, "photoUrls": "x", "status": "lost"}}),
        "INVALID_ARGUMENTS",
    )
    .await;
    let pointers: Vec<&str> = crate::support::strings(&r["violations"], "pointer");
    for p in ["/body/name", "/body/photoUrls", "/body/status"] {
        assert!(pointers.contains(&p), "{p} in {pointers:?}");
    }

    let r = execute_err(
        &client,
        json!({"operationId": "getPetById", "pathParams": {"petId": 1},
        "headers": {"Authorization": "Bearer stolen"}}),
        "INVALID_ARGUMENTS",
    )
    .await;
    assert!(
        r["error"].as_str().unwrap().contains("Authorization"),
        "{r}"
    );

    call_err(
        &client,
        "api_discover",
        json!({"query": 5}),
        "INVALID_ARGUMENTS",
    )
    .await;

    // Nothing above reached the upstream.
    assert!(upstream.requests().is_empty());

    // The upstream's failures come back coded.
    let r = execute_err(
        &client,
        json!({"operationId": "getPetById", "pathParams": {"petId": 500}}),
        "UPSTREAM_ERROR",
    )
    .await;
    assert_eq!(r["status"], 500);
    execute_err(
        &client,
        json!({"operationId": "getUserByName", "pathParams": {"username": "slow"}}),
        "UPSTREAM_TIMEOUT",
    )
    .await;
    let r = execute_ok(
        &client,
        json!({"operationId": "getUserByName", "pathParams": {"username": "big"}}),
    )
    .await;
    assert_eq!(r["truncated"], true);
    assert!(r.to_string().len() < 80 * 1024);
    // A 4xx is the API's answer, not a tool failure.
    let (err, r) = call(
        &client,
        "api_execute",
        json!({"method": "GET", "path": "/pet/abc"}),
    )
    .await;
    assert!(err, "non-integer petId fails validation: {r}");
    let (err, r) = call(
        &client,
        "api_execute",
        json!({"method": "GET", "path": "/user/nobody/../../admin"}),
    )
    .await;
    assert!(err, "{r}");
}

#[tokio::test]
async fn path_parameters_cannot_change_the_route() {
    let (upstream, _server, client) = petstore_client(false).await;
    execute_err(
        &client,
        json!({"operationId": "getUserByName", "pathParams": {"username": "../admin"}}),
        "INVALID_ARGUMENTS",
    )
    .await;
    assert!(upstream.requests().is_empty());
    for (value, expected) in [
        ("a/b", "/v2/user/a%2Fb"),
        ("x?y=1", "/v2/user/x%3Fy%3D1"),
        ("#frag", "/v2/user/%23frag"),
        ("..%2F", "/v2/user/..%252F"),
    ] {
        execute_ok(
            &client,
            json!({"operationId": "getUserByName", "pathParams": {"username": value}}),
        )
        .await;
        let got = upstream.requests().pop().unwrap();
        assert_eq!(got.uri, expected, "for {value:?}");
    }
    // A dry run shows the request without sending it, and without the credential.
    let before = upstream.requests().len();
    let r = execute_ok(
        &client,
        json!({"operationId": "getUserByName", "pathParams": {"username": "ann"}, "dryRun": true}),
    )
    .await;
    assert_eq!(upstream.requests().len(), before);
    assert!(r.to_string().contains("/v2/user/ann"), "{r}");
    assert!(!r.to_string().contains("upstream-secret-token"), "{r}");
}

#[tokio::test]
async fn redirects_to_another_host_are_refused() {
    let upstream = Upstream::start().await;
    let other = Upstream::start().await;
    let server = petstore_server(&upstream, false).await;
    let client = server.client().await;
    // Another port on the same machine is another origin.
    upstream.redirect_to(&format!("{}/v2/user/stolen", other.url()));
    execute_err(
        &client,
        json!({"operationId": "getUserByName", "pathParams": {"username": "redirect"}}),
        "UPSTREAM_ERROR",
    )
    .await;
    assert!(other.requests().is_empty());
    // The refused target is named, but a credential the API put into it is not.
    upstream.redirect_to(&format!(
        "{}/v2/user/stolen?t=upstream-secret-token",
        other.url()
    ));
    let (err, r) = call(
        &client,
        "api_execute",
        json!({"operationId": "getUserByName", "pathParams": {"username": "redirect"}}),
    )
    .await;
    assert!(err, "{r}");
    let message = r["error"].as_str().unwrap();
    assert!(
        message.contains("/v2/user/stolen?t=[redacted]"),
        "{message}"
    );
    assert!(!r.to_string().contains("secret-token"), "{r}");
    // A redirect within the same origin is followed.
    upstream.redirect_to(&format!("{}/v2/user/ann", upstream.url()));
    let r = execute_ok(
        &client,
        json!({"operationId": "getUserByName", "pathParams": {"username": "redirect"}}),
    )
    .await;
    assert_eq!(r["body"]["username"], "ann");
}
