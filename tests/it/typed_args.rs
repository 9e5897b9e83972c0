//! The tools' arguments on their one typed path, through the real server over Streamable HTTP
//! against a recording upstream: every argument violation at once in one shape, unknown
//! arguments refused by every tool, a concrete path and `pathParams` that disagree refused
//! (the same value twice accepted), and the fuzz target's entry point agreeing with the server.

use apigate::auth::Principal;
use serde_json::{Value, json};

use crate::support::{
    Server, Upstream, call, call_err, call_ok, engine_args, execute_err, execute_ok,
    petstore_client, spec_path,
};

fn pointers(r: &Value) -> Vec<&str> {
    let mut p = crate::support::strings(&r["violations"], "pointer");
    p.sort();
    p
}

#[tokio::test]
async fn a_concrete_path_and_path_params_must_agree() {
    let (upstream, _server, client) = petstore_client(false).await;

    let r = execute_err(
        &client,
        json!({"method": "GET", "path": "/pet/42", "pathParams": {"petId": 7}}),
        "INVALID_ARGUMENTS",
    )
    .await;
    assert_eq!(pointers(&r), ["/pathParams/petId"]);
    let message = r["violations"][0]["message"].as_str().unwrap();
    assert!(
        message.contains('7') && message.contains("\"42\""),
        "{message}"
    );
    assert!(upstream.requests().is_empty(), "nothing was sent");

    // The same value both ways (as a number or as text) is one value.
    for same in [json!(42), json!("42")] {
        let r = execute_ok(
            &client,
            json!({"method": "GET", "path": "/pet/42", "pathParams": {"petId": same}}),
        )
        .await;
        assert_eq!(r["status"], 200);
    }
    let sent: Vec<String> = upstream.requests().iter().map(|r| r.uri.clone()).collect();
    assert_eq!(sent, ["/v2/pet/42", "/v2/pet/42"]);
}

#[tokio::test]
async fn every_tool_reports_every_argument_problem_in_one_shape() {
    let (upstream, _server, client) = petstore_client(false).await;

    // api_schema refuses an unknown argument, as api_discover and api_execute do.
    let r = call_err(
        &client,
        "api_schema",
        json!({"operationId": "getPetById", "verbose": true}),
        "INVALID_ARGUMENTS",
    )
    .await;
    assert_eq!(pointers(&r), ["/verbose"]);
    assert!(r["error"].as_str().unwrap().contains("operationId"), "{r}");

    let (err, r) = call(
        &client,
        "api_discover",
        json!({"query": 5, "limit": 0, "method": "FETCH", "sort": "asc"}),
    )
    .await;
    assert!(err);
    assert_eq!(pointers(&r), ["/limit", "/method", "/query", "/sort"]);
    let method = r["violations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["pointer"] == "/method")
        .unwrap();
    for m in [
        "GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD", "PATCH", "TRACE",
    ] {
        assert!(method["message"].as_str().unwrap().contains(m), "{method}");
    }

    let (err, r) = call(
        &client,
        "api_execute",
        json!({"operationId": "getPetById", "pathParams": [1], "dryRun": "yes", "bodyy": {}}),
    )
    .await;
    assert!(err);
    assert_eq!(pointers(&r), ["/bodyy", "/dryRun", "/pathParams"]);

    // Header refusals and operation-schema problems carry violations too.
    let r = execute_err(
        &client,
        json!({"operationId": "getPetById", "pathParams": {"petId": 1},
            "headers": {"Authorization": "Bearer stolen", "Cookie": "a=b"}}),
        "INVALID_ARGUMENTS",
    )
    .await;
    assert_eq!(pointers(&r), ["/headers/Authorization", "/headers/Cookie"]);
    let (err, r) = call(
        &client,
        "api_execute",
        json!({"operationId": "findPetsByStatus", "query": {"status": ["lost"]}}),
    )
    .await;
    assert!(err);
    let message = r["violations"][0]["message"].as_str().unwrap();
    for allowed in ["available", "pending", "sold"] {
        assert!(message.contains(allowed), "every allowed value: {message}");
    }
    // A null argument is an absent one.
    execute_ok(&client, json!({"operationId": "getPetById", "pathParams": {"petId": 3}, "query": null, "dryRun": null})).await;
    assert!(
        upstream.requests().len() == 1,
        "only the valid call was sent"
    );
}

/// The fuzz target's entry point is the server's own: the same arguments give the same
/// request, and the same refusals.
#[tokio::test]
async fn plan_execute_is_the_servers_path() {
    let upstream = Upstream::start().await;
    let engine = engine_args(&spec_path("petstore-3.0.json"), Some(upstream.url()))
        .build()
        .await
        .unwrap();
    let dev = Principal::dev();
    let plan = |args: Value| {
        let Value::Object(map) = args else {
            unreachable!()
        };
        engine.plan_execute(&dev, map)
    };
    let planned = plan(json!({"method": "GET", "path": "/pet/9"})).unwrap();
    assert_eq!(
        planned.request.view()["url"],
        format!("{}/v2/pet/9", upstream.url())
    );
    assert_eq!(planned.call.path_params["petId"], 9);
    let e = plan(json!({"method": "GET", "path": "/pet/9", "pathParams": {"petId": 8}}))
        .err()
        .unwrap();
    assert_eq!(e.code.as_str(), "INVALID_ARGUMENTS");
    let e = plan(json!({"operationId": "nope"})).err().unwrap();
    assert_eq!(e.code.as_str(), "UNKNOWN_OPERATION");
    let reader = Principal {
        read_only: true,
        ..Principal::dev()
    };
    let Value::Object(map) = json!({"operationId": "deletePet", "pathParams": {"petId": 1}}) else {
        unreachable!()
    };
    let e = engine.plan_execute(&reader, map).err().unwrap();
    assert_eq!(e.code.as_str(), "FORBIDDEN");
}

/// `api_schema` is compact by default: parameters and body with their first sentences, the
/// success body as an outline of its field names, the other statuses a line each, and `more`
/// naming the `detail` that shows the rest; `detail: "full"` (or the older `include`) gives
/// the full response schemas, `detail` naming a part gives that part whole.
#[tokio::test]
async fn api_schema_is_compact_unless_asked_for_detail() {
    let (_upstream, _server, client) = petstore_client(false).await;
    let d = call_ok(
        &client,
        "api_schema",
        json!({"operationId": "findPetsByStatus"}),
    )
    .await;
    let ok = &d["responses"]["200"];
    assert!(ok.get("schema").is_none(), "{ok}");
    assert_eq!(
        ok["fields"], "[{id, name, status, category{id, name}, photoUrls[], tags[{id, name}]}]",
        "{ok}"
    );
    assert_eq!(d["responses"]["400"], "Invalid status value");
    assert!(
        d["more"].as_str().unwrap().contains("\"responses.200\""),
        "{d}"
    );
    assert_eq!(d["select"], "[].{name: name, id: id}");
    // What a call needs is all there.
    assert_eq!(d["parameters"][0]["name"], "status");
    assert!(d["parameters"][0]["schema"]["items"]["enum"].is_array());

    let full = call_ok(
        &client,
        "api_schema",
        json!({"operationId": "findPetsByStatus", "detail": "full"}),
    )
    .await;
    assert_eq!(full["responses"]["200"]["schema"]["type"], "array");
    assert!(full.get("more").is_none());
    for include in ["responses", "descriptions"] {
        let same = call_ok(
            &client,
            "api_schema",
            json!({"operationId": "findPetsByStatus", "include": [include]}),
        )
        .await;
        assert_eq!(same, full, "include gives the full view");
    }
    call_err(
        &client,
        "api_schema",
        json!({"operationId": "findPetsByStatus", "include": ["everything"]}),
        "INVALID_ARGUMENTS",
    )
    .await;
    // One part, whole: a field of the answer's items, a parameter.
    let part = call_ok(
        &client,
        "api_schema",
        json!({"operationId": "findPetsByStatus", "detail": "responses.200.category"}),
    )
    .await;
    assert_eq!(part["detail"], "responses.200.category");
    assert!(part["part"]["properties"]["name"].is_object(), "{part}");
    let part = call_ok(
        &client,
        "api_schema",
        json!({"operationId": "findPetsByStatus", "detail": "status"}),
    )
    .await;
    assert_eq!(part["part"], full["parameters"][0]);
    let refused = call_err(
        &client,
        "api_schema",
        json!({"operationId": "findPetsByStatus", "detail": "colour"}),
        "INVALID_ARGUMENTS",
    )
    .await;
    let message = refused["error"].as_str().unwrap();
    assert!(
        message.contains("a parameter (status)") && message.contains("(200, 400)"),
        "{message}"
    );
}

/// Each tool publishes an `outputSchema`, and what it returns (results, dry runs and errors)
/// validates against it, so a client that checks `structuredContent` accepts every answer.
#[tokio::test]
async fn results_match_the_published_output_schemas() {
    let (_upstream, _server, client) = petstore_client(false).await;
    let tools = client.list_all_tools().await.unwrap();
    let validator = |name: &str| {
        let tool = tools.iter().find(|t| t.name == name).unwrap();
        let schema = Value::Object((*tool.output_schema.clone().expect("an outputSchema")).clone());
        jsonschema::validator_for(&schema).unwrap()
    };
    let calls = [
        ("api_discover", json!({"query": "find pets by status"})),
        ("api_discover", json!({"query": 1})),
        ("api_schema", json!({"operationId": "addPet"})),
        (
            "api_schema",
            json!({"operationId": "addPet", "include": ["responses"]}),
        ),
        (
            "api_schema",
            json!({"operationId": "addPet", "detail": "full"}),
        ),
        (
            "api_schema",
            json!({"operationId": "addPet", "detail": "requestBody.category"}),
        ),
        (
            "api_schema",
            json!({"operationId": "addPet", "detail": "colour"}),
        ),
        ("api_schema", json!({"operationId": "nope"})),
        ("api_execute", json!({"method": "GET", "path": "/pet/5"})),
        (
            "api_execute",
            json!({"method": "GET", "path": "/pet/5", "select": "name"}),
        ),
        (
            "api_execute",
            json!({"method": "GET", "path": "/pet/5", "dryRun": true}),
        ),
        (
            "api_execute",
            json!({"operationId": "getPetById", "pathParams": {"petId": 500}}),
        ),
        ("api_execute", json!({"operationId": "getPetById"})),
    ];
    for (tool, args) in calls {
        let (_, content) = call(&client, tool, args.clone()).await;
        let errors: Vec<String> = validator(tool)
            .iter_errors(&content)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{tool} {args}: {errors:?}\n{content}");
    }
    let execute = tools.iter().find(|t| t.name == "api_execute").unwrap();
    let description = execute.description.as_deref().unwrap_or_default();
    assert!(
        description.contains("GET, HEAD or OPTIONS only read"),
        "{description}"
    );
}

/// A call that gets no answer says where it went, whether it may have been applied (POST and
/// PATCH are not idempotent), and, when it went to the spec's own server, that --upstream
/// points it elsewhere.
#[tokio::test]
async fn lost_answers_say_where_and_whether_to_retry() {
    let closed = crate::support::free_port();
    let target = format!("http://127.0.0.1:{closed}");
    let server = Server::start(
        engine_args(&spec_path("petstore-3.0.json"), Some(target.clone())),
        false,
    )
    .await;
    let client = server.client().await;
    let r = execute_err(
        &client,
        json!({"operationId": "addPet", "body": {"name": "Rex", "photoUrls": []}}),
        "UPSTREAM_ERROR",
    )
    .await;
    assert_eq!(r["target"], target);
    assert_eq!(r["mayHaveBeenApplied"], true);
    assert!(
        r["error"].as_str().unwrap().contains("not idempotent"),
        "{r}"
    );
    assert!(!r["error"].as_str().unwrap().contains("--upstream"), "{r}");

    let (err, r) = call(
        &client,
        "api_execute",
        json!({"operationId": "getPetById", "pathParams": {"petId": 1}}),
    )
    .await;
    assert!(err);
    assert!(r.get("mayHaveBeenApplied").is_none(), "{r}");

    // Without --upstream the calls go to the spec's server, which is not reachable here.
    let server = Server::start(engine_args(&spec_path("petstore-3.0.json"), None), false).await;
    let client = server.client().await;
    let (err, r) = call(
        &client,
        "api_execute",
        json!({"operationId": "getPetById", "pathParams": {"petId": 1}}),
    )
    .await;
    assert!(err, "{r}");
    assert_eq!(r["target"], "http://petstore.swagger.io");
    assert!(
        r["error"].as_str().unwrap().contains("--upstream URL"),
        "{r}"
    );
}

/// `contentType` and `accept` outside what the operation offers are refused before anything
/// is sent, with the choices.
#[tokio::test]
async fn media_types_outside_the_offer_are_refused_with_the_choices() {
    let (upstream, _server, client) = petstore_client(false).await;
    let (err, r) = call(
        &client,
        "api_execute",
        json!({"operationId": "addPet", "body": {"name": "Rex", "photoUrls": []},
            "contentType": "text/csv", "accept": "image/gif"}),
    )
    .await;
    assert!(err);
    assert_eq!(pointers(&r), ["/accept", "/contentType"]);
    let text = r.to_string();
    assert!(
        text.contains("application/xml") && text.contains("application/json"),
        "{text}"
    );
    let r = execute_ok(
        &client,
        json!({"operationId": "addPet", "body": {"name": "Rex", "photoUrls": []},
            "contentType": "application/json", "dryRun": true}),
    )
    .await;
    assert_eq!(r["request"]["contentType"], "application/json");
    assert!(upstream.requests().is_empty());
}

/// `api_execute` is destructive only for unsafe methods: each result's `_meta` says whether
/// the call only read (MCP annotations are per tool, `_meta` is per result).
#[tokio::test]
async fn results_say_whether_the_call_only_read() {
    use rmcp::model::CallToolRequestParams;
    let (_upstream, _server, client) = petstore_client(false).await;
    let meta = |args: Value| {
        let client = client.peer().clone();
        async move {
            let Value::Object(map) = args else { panic!() };
            let result = client
                .call_tool(CallToolRequestParams::new("api_execute").with_arguments(map))
                .await
                .unwrap();
            assert_ne!(result.is_error, Some(true), "{result:?}");
            result
                .meta
                .and_then(|m| m.0.get("apigate/readOnly").cloned())
        }
    };
    assert_eq!(
        meta(json!({"method": "GET", "path": "/pet/5"})).await,
        Some(json!(true))
    );
    assert_eq!(
        meta(json!({"operationId": "deletePet", "pathParams": {"petId": 5}})).await,
        Some(json!(false))
    );
    assert_eq!(
        meta(json!({"method": "GET", "path": "/pet/5", "dryRun": true})).await,
        None,
        "a dry run calls nothing"
    );
}
