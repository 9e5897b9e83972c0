//! Spec loading against the real documents in `tests/data/specs/` and malformed inputs.

use apigate::spec::Method;
use std::path::PathBuf;

use apigate::spec::{Detail, Dialect, Spec};
use serde_json::json;

pub fn specs_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/specs")
}

pub async fn load(name: &str) -> Spec {
    let path = specs_dir().join(name);
    Spec::load(path.to_str().unwrap()).await.unwrap()
}

#[tokio::test]
async fn every_shared_spec_loads_with_the_documented_operation_count() {
    // From tests/data/specs/README.md.
    let expected = [
        ("github-rest-3.0.json", 1223, Dialect::OpenApi30),
        ("stripe.json", 452, Dialect::OpenApi30),
        ("kubernetes-1.13-swagger2.json", 1014, Dialect::Swagger2),
        ("slack-web-swagger2.json", 174, Dialect::Swagger2),
        ("petstore-3.0.json", 20, Dialect::OpenApi30),
        ("airflow-v1.yaml", 89, Dialect::OpenApi30),
        ("discourse-3.1.json", 84, Dialect::OpenApi31),
        ("spotify.json", 88, Dialect::OpenApi30),
        ("jupyter-server-swagger2.yaml", 32, Dialect::Swagger2),
    ];
    for (file, count, dialect) in expected {
        let spec = load(file).await;
        assert_eq!(spec.operations.len(), count, "{file}");
        assert_eq!(spec.dialect, dialect, "{file}");
        let mut ids: Vec<&str> = spec.operations.iter().map(|o| o.id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), count, "{file}: operation ids are unique");
    }
}

#[tokio::test]
async fn swagger2_servers_bodies_and_synthesized_ids() {
    let slack = load("slack-web-swagger2.json").await;
    assert_eq!(slack.servers, vec!["https://slack.com/api"]);
    let post = slack.get("chat_postMessage").unwrap();
    let body = post.request_body.as_ref().unwrap();
    assert_eq!(
        body.preferred().unwrap().content_type,
        "application/x-www-form-urlencoded"
    );
    assert!(body.preferred().unwrap().schema["properties"]["channel"].is_object());
    assert!(
        slack.warnings.iter().any(|w| w.contains("`type` array")),
        "{:?}",
        slack.warnings
    );

    let jupyter = load("jupyter-server-swagger2.yaml").await;
    let (op, values) = jupyter
        .find(Method::Get, "/api/contents/notes.ipynb")
        .unwrap();
    assert_eq!(op.id, "get_api_contents_by_path");
    assert_eq!(
        values,
        vec![("path".to_string(), "notes.ipynb".to_string())]
    );
    // Stable: loading again gives the same ids.
    let again = load("jupyter-server-swagger2.yaml").await;
    let a: Vec<_> = jupyter.operations.iter().map(|o| &o.id).collect();
    let b: Vec<_> = again.operations.iter().map(|o| &o.id).collect();
    assert_eq!(a, b);
}

#[tokio::test]
async fn validation_reports_every_violation_with_its_pointer() {
    let spec = load("petstore-3.0.json").await;
    let op = spec.get("addPet").unwrap();
    let mut args = json!({"body": {"name": 7, "photoUrls": "nope"}});
    let v = spec.validate(op, &mut args);
    let pointers: Vec<&str> = v.iter().map(|v| v.pointer.as_str()).collect();
    assert!(pointers.contains(&"/body/name"), "{v:?}");
    assert!(pointers.contains(&"/body/photoUrls"), "{v:?}");

    let op = spec.get("getPetById").unwrap();
    let mut args = json!({});
    let v = spec.validate(op, &mut args);
    assert!(v.iter().any(|v| v.message.contains("pathParams")), "{v:?}");
    // Agents often send numbers as strings: coerced, then valid.
    let mut args = json!({"pathParams": {"petId": "42"}});
    assert!(spec.validate(op, &mut args).is_empty());
    assert_eq!(args["pathParams"]["petId"], json!(42));
    let mut args = json!({"pathParams": {"petId": "forty-two"}});
    assert_eq!(spec.validate(op, &mut args)[0].pointer, "/pathParams/petId");
    // Unknown query parameters are reported.
    let op = spec.get("findPetsByStatus").unwrap();
    let mut args = json!({"query": {"status": "available", "colour": "red"}});
    let v = spec.validate(op, &mut args);
    assert!(v.iter().any(|v| v.message.contains("colour")), "{v:?}");
}

#[tokio::test]
async fn nullable_and_recursive_schemas_validate_on_big_specs() {
    let github = load("github-rest-3.0.json").await;
    let op = github.get("issues/update").unwrap();
    let mut ok = json!({"pathParams": {"owner": "o", "repo": "r", "issue_number": 1},
        "body": {"state": "closed", "milestone": null}});
    assert_eq!(github.validate(op, &mut ok), vec![]);
    let mut bad = json!({"pathParams": {"owner": "o", "repo": "r", "issue_number": 1},
        "body": {"state": "shut"}});
    assert_eq!(github.validate(op, &mut bad)[0].pointer, "/body/state");
    let described = serde_json::to_value(github.describe(op, Detail::Compact)).unwrap();
    assert_eq!(described["method"], "PATCH");
    assert!(described.to_string().len() < 64 * 1024);
}

#[tokio::test]
async fn described_schemas_inline_refs_and_mark_cycles() {
    let doc = json!({"openapi": "3.0.3", "info": {"title": "t", "version": "1"},
        "paths": {"/nodes": {"post": {"operationId": "createNode",
            "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Node"}}}},
            "responses": {"201": {"description": "made"}}}}},
        "components": {"schemas": {"Node": {"type": "object", "properties": {
            "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}}}}}}});
    let spec = Spec::from_bytes(doc.to_string().as_bytes(), "nodes.json").unwrap();
    let op = spec.get("createNode").unwrap();
    let d = serde_json::to_value(spec.describe(op, Detail::Compact)).unwrap();
    assert_eq!(
        d["requestBody"]["schema"]["properties"]["children"]["items"],
        json!({"$recursive": "Node"})
    );
    let mut args = json!({"body": {"children": [{"children": [{"children": 3}]}]}});
    assert_eq!(
        spec.validate(op, &mut args)[0].pointer,
        "/body/children/0/children/0/children"
    );
}

#[tokio::test]
async fn external_refs_resolve_relative_to_the_document() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("common")).unwrap();
    std::fs::write(dir.path().join("common/pet.yaml"), "Pet:\n  type: object\n  required: [name]\n  properties:\n    name: {type: string}\n    owner: {$ref: '#/Owner'}\nOwner:\n  type: object\n  properties:\n    pets: {type: array, items: {$ref: '#/Pet'}}\n").unwrap();
    std::fs::write(dir.path().join("api.yaml"), "openapi: 3.0.0\ninfo: {title: ext, version: '1'}\npaths:\n  /pets:\n    post:\n      operationId: addPet\n      requestBody:\n        content:\n          application/json:\n            schema: {$ref: 'common/pet.yaml#/Pet'}\n      responses: {'200': {description: ok}}\n").unwrap();
    let spec = Spec::load(dir.path().join("api.yaml").to_str().unwrap())
        .await
        .unwrap();
    let op = spec.get("addPet").unwrap();
    let mut args = json!({"body": {"owner": {"pets": [{"name": 1}]}}});
    let v = spec.validate(op, &mut args);
    let pointers: Vec<&str> = v.iter().map(|v| v.pointer.as_str()).collect();
    assert_eq!(pointers.len(), 2, "{v:?}");
    assert!(
        pointers.contains(&"/body") && pointers.contains(&"/body/owner/pets/0/name"),
        "{v:?}"
    );
    let d = serde_json::to_value(spec.describe(op, Detail::Compact)).unwrap();
    assert_eq!(
        d["requestBody"]["schema"]["properties"]["owner"]["properties"]["pets"]["items"],
        json!({"$recursive": "Pet"})
    );
}

#[tokio::test]
async fn a_change_to_a_referenced_document_is_a_new_version() {
    // What a reload compares: a document whose referenced file changed is not the same one.
    let dir = tempfile::tempdir().unwrap();
    let pet = dir.path().join("pet.yaml");
    std::fs::write(&pet, "Pet: {type: object}\n").unwrap();
    std::fs::write(dir.path().join("api.yaml"), "openapi: 3.0.0\ninfo: {title: ext, version: '1'}\npaths:\n  /pets:\n    post:\n      operationId: addPet\n      requestBody:\n        content:\n          application/json:\n            schema: {$ref: 'pet.yaml#/Pet'}\n      responses: {'200': {description: ok}}\n").unwrap();
    let api = dir.path().join("api.yaml");
    let load = || async { Spec::load(api.to_str().unwrap()).await.unwrap().sha256 };
    let first = load().await;
    assert_eq!(first, load().await);
    std::fs::write(&pet, "Pet: {type: object, required: [name]}\n").unwrap();
    assert_ne!(first, load().await);
}

#[tokio::test]
async fn malformed_documents_give_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &str, &[&str]); 8] = [
        (
            "truncated.json",
            r#"{"openapi": "3.0.0", "paths": {"/a": {"get": "#,
            &["truncated.json", "invalid JSON", "line 1"],
        ),
        (
            "bad.yaml",
            "openapi: 3.0.0\npaths:\n  /a: [unclosed\n    b: c",
            &["bad.yaml", "invalid YAML"],
        ),
        ("empty.json", "", &["empty.json", "empty"]),
        (
            "nowhere.json",
            r##"{"openapi": "3.0.0", "info": {"title": "t", "version": "1"}, "paths": {"/a": {"get": {"responses": {"200": {"$ref": "#/components/responses/Missing"}}}}}}"##,
            &[
                "nowhere.json",
                "/paths/~1a/get/responses/200",
                "points to nowhere",
            ],
        ),
        (
            "cycle.json",
            r##"{"openapi": "3.0.0", "info": {"title": "t", "version": "1"}, "paths": {}, "components": {"schemas": {"A": {"$ref": "#/components/schemas/B"}, "B": {"$ref": "#/components/schemas/A"}}}}"##,
            &["cycle.json", "/components/schemas/", "cycle"],
        ),
        (
            "notapi.json",
            r#"{"hello": "world"}"#,
            &["notapi.json", "no `openapi` or `swagger`"],
        ),
        (
            "v4.json",
            r#"{"openapi": "4.0.0", "paths": {}}"#,
            &["v4.json", "unsupported"],
        ),
        (
            "missing-file.yaml",
            "openapi: 3.0.0\npaths:\n  /a:\n    get:\n      responses:\n        '200': {$ref: 'other.yaml#/R'}\n",
            &["other.yaml", "cannot read"],
        ),
    ];
    for (name, text, needles) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let err = Spec::load(path.to_str().unwrap())
            .await
            .unwrap_err()
            .to_string();
        for n in needles {
            assert!(err.contains(n), "{name}: {err:?} should contain {n:?}");
        }
    }
    let err = Spec::load(dir.path().join("absent.json").to_str().unwrap())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("absent.json") && err.contains("cannot read"),
        "{err}"
    );
}

#[tokio::test]
async fn openapi_31_type_arrays_and_documents_without_paths() {
    let d = load("discourse-3.1.json").await;
    assert!(d.operations.iter().any(|o| o.path.ends_with(".json")));
    let hooks = r#"{"openapi": "3.1.0", "info": {"title": "hooks", "version": "1"},
        "webhooks": {"newPet": {"post": {"requestBody": {"content": {"application/json": {"schema": {"type": ["object", "null"], "const": null}}}}, "responses": {"200": {"description": "ok"}}}}}}"#;
    let spec = Spec::from_bytes(hooks.as_bytes(), "hooks.json").unwrap();
    assert!(spec.operations.is_empty());
    assert!(spec.warnings.iter().any(|w| w.contains("no `paths`")));
}

/// The compact `api_schema` view of the large operations that used to cost 27–33 KB: GitHub's
/// and Stripe's fit in 6 KB and a quarter of the full view, the request side intact.
#[tokio::test]
async fn compact_schemas_of_large_operations_stay_small() {
    for (file, id, limit) in [
        (
            "github-rest-3.0.json",
            "actions/list-workflow-runs",
            6 * 1024,
        ),
        ("stripe.json", "GetInvoices", 6 * 1024),
        (
            "kubernetes-1.13-swagger2.json",
            "replaceAppsV1NamespacedDeploymentScale",
            6 * 1024,
        ),
    ] {
        let spec = load(file).await;
        let op = spec.get(id).unwrap();
        let compact = serde_json::to_value(spec.describe(op, Detail::Compact)).unwrap();
        let full = serde_json::to_value(spec.describe(op, Detail::Full)).unwrap();
        let (c, f) = (compact.to_string().len(), full.to_string().len());
        assert!(c <= limit && c * 4 <= f, "{id}: {c} bytes of {f}");
        let names = crate::support::strings(&compact["parameters"], "name");
        assert_eq!(
            names,
            crate::support::strings(&full["parameters"], "name"),
            "{id}"
        );
        assert_eq!(
            compact["requestBody"]["schema"]["required"],
            full["requestBody"]["schema"]["required"]
        );
    }
}

/// The compact view shortens descriptions with depth and drops vendor extensions, but every
/// field, type, format, enum and `required` list an agent needs to build the body stays.
#[tokio::test]
async fn the_compact_view_keeps_every_field_and_constraint() {
    let spec = load("kubernetes-1.13-swagger2.json").await;
    let op = spec.get("replaceAppsV1NamespacedDeploymentScale").unwrap();
    let compact = serde_json::to_value(spec.describe(op, Detail::Compact)).unwrap();
    let full = serde_json::to_value(spec.describe(op, Detail::Full)).unwrap();
    let body = &compact["requestBody"]["schema"];
    let meta = &body["properties"]["metadata"];
    let initializers = &meta["properties"]["initializers"];
    assert!(
        meta["description"].is_string(),
        "depth 1 keeps its first sentence"
    );
    let name = meta["properties"]["name"]["description"].as_str().unwrap();
    assert!(name.chars().count() <= 81, "depth 2 is short: {name}");
    let pending = &initializers["properties"]["pending"];
    assert!(pending.get("description").is_none(), "depth 3 has none");
    assert_eq!(pending["items"]["required"], json!(["name"]));
    assert!(pending.get("x-kubernetes-patch-strategy").is_none());
    assert_eq!(
        meta["properties"]["creationTimestamp"]["format"],
        "date-time"
    );
    /// Every leaf with its path (`properties` names, types, formats, enums, `required`), at
    /// every depth, leaving out descriptions, vendor extensions and `uniqueItems` off arrays.
    fn skeleton(v: &serde_json::Value, at: &str, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(map) => {
                let array = map.get("type") == Some(&json!("array"));
                for (k, child) in map {
                    let dropped = k == "description" && child.is_string()
                        || k == "title" && child.is_string()
                        || k.starts_with("x-")
                        || k == "uniqueItems" && !array;
                    if !dropped {
                        skeleton(child, &format!("{at}/{k}"), out);
                    }
                }
            }
            serde_json::Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    skeleton(item, &format!("{at}/{i}"), out);
                }
            }
            leaf => out.push(format!("{at}={leaf}")),
        }
    }
    let (mut a, mut b) = (Vec::new(), Vec::new());
    skeleton(&compact["requestBody"], "", &mut a);
    skeleton(&full["requestBody"], "", &mut b);
    a.sort();
    b.sort();
    assert!(a.iter().any(|l| l.contains("pending/items/required/0=")));
    assert_eq!(
        a, b,
        "the compact body differs from the full one beyond descriptions"
    );
    assert_eq!(compact["responses"]["201"]["fields"], "as 200");
}
