//! Step-up authorization against a real authorization server (`oidc-provider`, as in
//! `signin.rs`): a person whose token lacks the scope a tool call needs gets HTTP `403` with
//! `WWW-Authenticate: Bearer error="insufficient_scope", scope="…", resource_metadata="…"`
//! before the call runs, so that their MCP client can ask them for that scope; the same
//! person signed in with the scope gets through. An operation's own features, when a scope
//! grants them, are asked for the same way; a lack no scope grants stays a `FORBIDDEN` tool
//! error.

use rmcp::model::CallToolRequestParams;
use serde_json::{Value, json};

use crate::db::TestDb;
use crate::signin::serve;
use crate::support::*;

/// A raw Streamable HTTP session of the bearer token's person: `initialize`, then
/// `notifications/initialized`. Its `Mcp-Session-Id`.
async fn session(url: &str, bearer: &str) -> String {
    let http = reqwest::Client::new();
    let response = http
        .post(url)
        .header("authorization", bearer)
        .header("accept", "application/json, text/event-stream")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "step-up-test", "version": "1"}}}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let id = response.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();
    response.text().await.unwrap();
    let sent = http
        .post(url)
        .header("authorization", bearer)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &id)
        .header("mcp-protocol-version", "2025-11-25")
        .json(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status(), 202);
    id
}

/// A raw `tools/call` in `session`: the status, `WWW-Authenticate` and the body (JSON when it
/// is, else its text).
async fn raw_call(
    url: &str,
    bearer: &str,
    session: &str,
    tool: &str,
    args: Value,
) -> (u16, String, Value) {
    let response = reqwest::Client::new()
        .post(url)
        .header("authorization", bearer)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-11-25")
        .json(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": tool, "arguments": args}}))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let challenge = response
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let text = response.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, challenge, body)
}

/// `apigate audit --json` of the database: its entries.
async fn audit(db: &TestDb) -> Vec<Value> {
    let (ok, out, err) = run_apigate(
        &["audit", "--json", "--limit", "200"],
        &[("DATABASE_URL", db.url.as_str())],
    )
    .await;
    assert!(ok, "{err}");
    let page: Value = serde_json::from_str(&out).unwrap();
    page["entries"].as_array().unwrap().clone()
}

#[tokio::test]
async fn a_token_without_the_scope_a_tool_needs_is_asked_for_it() {
    let db = TestDb::new().await;
    let upstream = Upstream::start().await;
    let (idp, mut proc, url) = serve(&db, &upstream, &[]).await;
    let metadata = format!(
        "{}/.well-known/oauth-protected-resource/mcp",
        url.trim_end_matches("/mcp")
    );
    // A real sign-in for reading only: discovery and schemas, no execution.
    let reader = idp
        .sign_in("apigate-rs", "erin", "openid apigate:read", &url)
        .await;
    let bearer = format!("Bearer {reader}");
    let id = session(&url, &bearer).await;
    let find = json!({"operationId": "findPetsByStatus", "query": {"status": ["sold"]}});
    let (status, challenge, body) = raw_call(&url, &bearer, &id, "api_execute", find.clone()).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(
        challenge,
        format!(
            "Bearer error=\"insufficient_scope\", scope=\"apigate:write\", \
             resource_metadata=\"{metadata}\", \
             error_description=\"api_execute of findPetsByStatus needs apigate.execute\""
        )
    );
    assert_eq!(body["code"], "FORBIDDEN", "{body}");
    assert_eq!(body["missing"], "apigate.execute", "{body}");
    assert_eq!(body["scope"], "apigate:write", "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("apigate:write"),
        "{body}"
    );
    // It never ran.
    assert!(upstream.requests().is_empty());
    // A tool the token's scopes do grant runs in the same session as before.
    let (status, _, found) = raw_call(
        &url,
        &bearer,
        &id,
        "api_discover",
        json!({"query": "find pets"}),
    )
    .await;
    assert_eq!(status, 200, "{found}");

    // A real MCP client (rmcp's) gets the challenge as the call's error.
    let mcp = mcp_client(&url, &[("authorization", &bearer)]).await;
    let Value::Object(args) = find.clone() else {
        unreachable!()
    };
    let failed = mcp
        .call_tool(CallToolRequestParams::new("api_execute").with_arguments(args))
        .await
        .expect_err("a 403 is no result");
    let shown = format!("{failed:?}");
    assert!(
        shown.contains("insufficient_scope") && shown.contains("apigate:write"),
        "{shown}"
    );
    call_ok(&mcp, "api_discover", json!({"query": "find pets"})).await;
    // So does one over the legacy SSE transport: its POST /message is refused the same way.
    let base = url.trim_end_matches("/mcp");
    let sse = sse_client(base, &[("authorization", &bearer)]).await;
    let Value::Object(args) = find.clone() else {
        unreachable!()
    };
    let failed = sse
        .call_tool(CallToolRequestParams::new("api_execute").with_arguments(args))
        .await
        .expect_err("a 403 is no result");
    assert!(format!("{failed:?}").contains("403"), "{failed:?}");
    assert!(upstream.requests().is_empty());

    // The same person signed in again with the scope asked for: the call runs.
    let writer = idp
        .sign_in(
            "apigate-rs",
            "erin",
            "openid apigate:read apigate:write",
            &url,
        )
        .await;
    let mcp = mcp_client(&url, &[("authorization", &format!("Bearer {writer}"))]).await;
    let pets = execute_ok(&mcp, find).await;
    assert_eq!(pets["status"], 200, "{pets}");
    assert_eq!(upstream.requests().len(), 1);

    // The refusals are audited as the pipeline's are: denied, FORBIDDEN, the operation.
    let entries = audit(&db).await;
    let refused: Vec<&Value> = entries
        .iter()
        .filter(|e| e["userId"] == "erin" && e["decision"] == "denied")
        .collect();
    assert_eq!(refused.len(), 3, "{entries:?}");
    for row in refused {
        assert_eq!(row["tool"], "api_execute", "{row}");
        assert_eq!(row["errorCode"], "FORBIDDEN", "{row}");
        assert_eq!(row["operation"], "findPetsByStatus", "{row}");
        assert_eq!(row["actor"], "oauth:apigate-rs", "{row}");
    }
    assert!(proc.terminate().await, "{}", proc.log());
}

#[tokio::test]
async fn an_operations_own_scope_is_asked_for_and_a_lack_no_scope_grants_is_a_tool_error() {
    let db = TestDb::new().await;
    let upstream = Upstream::start().await;
    // Deleting a pet needs pets.delete, which the scope pets:admin grants; adding one needs
    // pets.create, which no scope grants.
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("permissions.toml");
    std::fs::write(
        &rules,
        "[[rule]]\nmethod = \"DELETE\"\npath = \"/pet/{petId}\"\nfeatures = [\"pets.delete\"]\n\n\
         [[rule]]\nmethod = \"POST\"\npath = \"/pet\"\nfeatures = [\"pets.create\"]\n",
    )
    .unwrap();
    let rules = rules.to_string_lossy().to_string();
    let (idp, mut proc, url) = serve(
        &db,
        &upstream,
        &[
            "--permissions",
            &rules,
            "--oauth-scope-features",
            "apigate:read=apigate.discover,apigate.schema",
            "--oauth-scope-features",
            "apigate:write=apigate.discover,apigate.schema,apigate.execute",
            "--oauth-scope-features",
            "pets:admin=pets.delete",
        ],
    )
    .await;
    let metadata = format!(
        "{}/.well-known/oauth-protected-resource/mcp",
        url.trim_end_matches("/mcp")
    );
    let delete = json!({"operationId": "deletePet", "pathParams": {"petId": 7}});
    let challenge = |scope: &str, needs: &str| {
        format!(
            "Bearer error=\"insufficient_scope\", scope=\"{scope}\", \
             resource_metadata=\"{metadata}\", \
             error_description=\"api_execute of deletePet needs {needs}\""
        )
    };

    // A writer lacks the operation's scope only.
    let writer = idp
        .sign_in("apigate-es", "frank", "apigate:read apigate:write", &url)
        .await;
    let bearer = format!("Bearer {writer}");
    let id = session(&url, &bearer).await;
    let (status, got, body) = raw_call(&url, &bearer, &id, "api_execute", delete.clone()).await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(got, challenge("pets:admin", "pets.delete"));
    assert_eq!(body["missing"], "pets.delete", "{body}");
    // A reader lacks both: one challenge names the scope for each.
    let reader = idp
        .sign_in("apigate-es", "frank", "apigate:read", &url)
        .await;
    let reading = format!("Bearer {reader}");
    let id = session(&url, &reading).await;
    let (status, got, _) = raw_call(&url, &reading, &id, "api_execute", delete.clone()).await;
    assert_eq!(status, 403);
    assert_eq!(
        got,
        challenge("apigate:write pets:admin", "apigate.execute, pets.delete")
    );
    assert!(upstream.requests().is_empty());

    // No scope grants pets.create: asking the person would not help, so the call goes on
    // and the pipeline refuses it as before.
    let mcp = mcp_client(&url, &[("authorization", &bearer)]).await;
    let refused = execute_err(
        &mcp,
        json!({"operationId": "addPet", "body": {"name": "Rex", "photoUrls": []}}),
        "FORBIDDEN",
    )
    .await;
    assert_eq!(refused["missing"], "pets.create", "{refused}");

    // Signed in with the operation's scope too: the delete reaches the API.
    let admin = idp
        .sign_in(
            "apigate-es",
            "frank",
            "apigate:read apigate:write pets:admin",
            &url,
        )
        .await;
    let mcp = mcp_client(&url, &[("authorization", &format!("Bearer {admin}"))]).await;
    let deleted = execute_ok(&mcp, delete).await;
    assert_eq!(deleted["status"], 200, "{deleted}");
    let sent = upstream.requests();
    assert_eq!(sent.len(), 1);
    assert_eq!(
        (sent[0].method.as_str(), sent[0].uri.as_str()),
        ("DELETE", "/v2/pet/7")
    );
    assert!(proc.terminate().await, "{}", proc.log());
}
