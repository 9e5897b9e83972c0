//! Several APIs behind one server (`--config apigate.toml`): one set of three tools over a
//! GitHub-, a Stripe- and a Petstore-shaped upstream, each a real local HTTP server that
//! records what it receives. Discovery spans the APIs and says which each result belongs to;
//! ids are `NAME:operationId`; a call reaches only its own API's upstream with only its own
//! API's credentials; features name APIs.

use std::os::unix::fs::PermissionsExt;

use apigate::auth::{Features, Principal};
use apigate::tools::Access;
use rmcp::RoleClient;
use rmcp::service::RunningService;
use serde_json::{Value, json};

use crate::fixture_api::FixtureApi;
use crate::support::*;

const GITHUB_AUTH: &str = "token gh-secret-0123456789";
const STRIPE_AUTH: &str = "Bearer sk_test_stripe-secret-abcdef";
const PETSTORE_KEY: &str = "petstore-secret-key-42";

/// Three recording upstreams and the config file naming them.
struct Three {
    github: FixtureApi,
    stripe: FixtureApi,
    petstore: Upstream,
    dir: tempfile::TempDir,
}

impl Three {
    async fn start() -> Three {
        let (github, stripe, petstore) = (
            FixtureApi::start().await,
            FixtureApi::start().await,
            Upstream::start().await,
        );
        let dir = tempfile::tempdir().unwrap();
        for (file, secret) in [
            ("github.secret", GITHUB_AUTH),
            ("stripe.secret", STRIPE_AUTH),
            ("petstore.secret", PETSTORE_KEY),
        ] {
            let path = dir.path().join(file);
            std::fs::write(&path, format!("{secret}\n")).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let three = Three {
            github,
            stripe,
            petstore,
            dir,
        };
        three.write_config("");
        three
    }

    fn config(&self) -> std::path::PathBuf {
        self.dir.path().join("apigate.toml")
    }

    /// Writes the config file (mode 600), `extra` appended.
    fn write_config(&self, extra: &str) {
        let text = format!(
            r#"
[[api]]
name = "github"
spec = "{github_spec}"
upstream = "{github}"
upstream-headers = {{ Authorization = "file:github.secret" }}

[[api]]
name = "stripe"
spec = "{stripe_spec}"
upstream = "{stripe}"
upstream-headers = {{ Authorization = "file:stripe.secret" }}

[[api]]
name = "petstore"
spec = "{petstore_spec}"
upstream = "{petstore}"
upstream-headers = {{ api_key = "file:petstore.secret" }}
{extra}"#,
            github_spec = spec_path("github-rest-3.0.json"),
            stripe_spec = spec_path("stripe.json"),
            petstore_spec = spec_path("petstore-3.0.json"),
            github = self.github.url(),
            stripe = self.stripe.url(),
            petstore = self.petstore.url(),
        );
        let path = self.config();
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    }

    fn args(&self) -> apigate::cli::args::EngineArgs {
        let mut args = engine_args("", None);
        args.spec = None;
        args.upstream_headers.clear();
        args.config = Some(self.config());
        args
    }

    /// A dev server over the three APIs whose calls act as `principal`.
    async fn serve_as(&self, principal: Principal) -> Server {
        let mut engine = self.args().build().await.expect("the engine builds");
        engine.access = Access::Fixed(principal);
        Server::start_engine(engine, |o| o.stateless = true, Default::default()).await
    }

    /// Three upstreams, a dev server over them acting as `principal`, and a client of it.
    async fn serving(principal: Principal) -> (Three, Server, RunningService<RoleClient, ()>) {
        let three = Three::start().await;
        let server = three.serve_as(principal).await;
        let client = server.client().await;
        (three, server, client)
    }

    /// What each upstream received so far: GitHub, Stripe, Petstore.
    fn counts(&self) -> (usize, usize, usize) {
        (
            self.github.requests().len(),
            self.stripe.requests().len(),
            self.petstore.requests().len(),
        )
    }
}

/// A dev principal holding only `features`.
fn holding(features: &[&str]) -> Principal {
    let mut principal = Principal::dev();
    principal.features = Features::new(features);
    principal
}

fn ids(result: &Value) -> Vec<String> {
    result["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["operationId"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn discovery_spans_the_apis_and_names_each_results_api() {
    let (_three, server, client) = Three::serving(Principal::dev()).await;
    let found = call_ok(
        &client,
        "api_discover",
        json!({"query": "list the issues of a repository"}),
    )
    .await;
    // The id names the API (`NAME:`), once: no separate `api` field repeats it.
    let first = &found["results"][0];
    assert_eq!(
        first["operationId"], "github:issues/list-for-repo",
        "{found}"
    );
    assert!(first.get("api").is_none(), "{found}");
    let found = call_ok(&client, "api_discover", json!({"query": "refund a charge"})).await;
    let first = &found["results"][0];
    assert!(
        first["operationId"]
            .as_str()
            .unwrap()
            .starts_with("stripe:")
            && first["operationId"].as_str().unwrap().contains("Refund"),
        "{found}"
    );
    // `api` keeps one API's operations.
    let found = call_ok(
        &client,
        "api_discover",
        json!({"query": "list", "api": "petstore", "limit": 50}),
    )
    .await;
    let results = found["results"].as_array().unwrap();
    assert!(!results.is_empty());
    assert!(ids(&found).iter().all(|id| id.starts_with("petstore:")));
    // An API that is not there is refused with the names that are.
    let refused = call_err(
        &client,
        "api_discover",
        json!({"query": "list", "api": "gitlab"}),
        "INVALID_ARGUMENTS",
    )
    .await;
    let text = refused.to_string();
    assert!(text.contains("github, stripe, petstore"), "{text}");
    // The tools say which APIs they serve, in schemas a client reads without a warning.
    let tools = client.list_all_tools().await.unwrap();
    assert_clients_read_schemas(&tools);
    let discover = tools.iter().find(|t| t.name == "api_discover").unwrap();
    assert!(
        discover
            .description
            .as_deref()
            .unwrap_or_default()
            .contains("github, stripe, petstore"),
        "{discover:?}"
    );
    // /health lists each API.
    let health = get_json(server.url("/health")).await;
    let names: Vec<&str> = strings(&health["specs"], "name");
    assert_eq!(names, ["github", "stripe", "petstore"], "{health}");
}

#[tokio::test]
async fn each_call_reaches_only_its_own_upstream_with_only_its_credentials() {
    let (three, _server, client) = Three::serving(Principal::dev()).await;
    // GitHub: the GitHub upstream alone, with GitHub's credential alone.
    let issues = execute_ok(
        &client,
        json!({"operationId": "github:issues/list-for-repo",
            "pathParams": {"owner": "octo", "repo": "demo"}, "query": {"per_page": 2}}),
    )
    .await;
    assert_eq!(issues["status"], 200, "{issues}");
    assert_eq!(three.counts(), (1, 0, 0));
    let sent = &three.github.headers()[0];
    assert_eq!(header_text(sent, "authorization"), GITHUB_AUTH);
    // Stripe, named by `api` and its bare id.
    let charges = execute_ok(
        &client,
        json!({"api": "stripe", "operationId": "GetCharges", "query": {"limit": 1}}),
    )
    .await;
    assert_eq!(charges["status"], 200, "{charges}");
    assert_eq!(three.counts(), (1, 1, 0));
    let sent = &three.stripe.headers()[0];
    assert_eq!(header_text(sent, "authorization"), STRIPE_AUTH);
    assert!(sent.get("api_key").is_none());
    // Petstore, named by method and path with `api`.
    let pets = execute_ok(
        &client,
        json!({"api": "petstore", "method": "GET", "path": "/pet/findByStatus",
            "query": {"status": ["available"]}}),
    )
    .await;
    assert_eq!(pets["status"], 200, "{pets}");
    assert_eq!(three.counts(), (1, 1, 1));
    let sent = &three.petstore.requests()[0].headers;
    assert_eq!(header_text(sent, "api_key"), PETSTORE_KEY);
    assert!(sent.get("authorization").is_none(), "{sent:?}");
    // No upstream ever saw another API's secret, in any header.
    let mut all: Vec<String> = Vec::new();
    for (who, maps) in [
        ("github", three.github.headers()),
        ("stripe", three.stripe.headers()),
        (
            "petstore",
            three
                .petstore
                .requests()
                .into_iter()
                .map(|r| r.headers)
                .collect(),
        ),
    ] {
        for m in maps {
            for (name, value) in &m {
                all.push(format!("{who} {name}: {}", value.to_str().unwrap_or("")));
            }
        }
    }
    for line in &all {
        let (who, _) = line.split_once(' ').unwrap();
        for (owner, secret) in [
            ("github", "gh-secret"),
            ("stripe", "stripe-secret"),
            ("petstore", PETSTORE_KEY),
        ] {
            if owner != who {
                assert!(
                    !line.contains(secret),
                    "{owner}'s secret reached {who}: {line}"
                );
            }
        }
    }
    // A dry run of one API sends nothing anywhere and shows its qualified id.
    let dry = execute_ok(
        &client,
        json!({"operationId": "stripe:PostCharges", "body": {"amount": 100, "currency": "usd"},
            "dryRun": true}),
    )
    .await;
    assert_eq!(dry["operationId"], "stripe:PostCharges", "{dry}");
    assert_eq!(three.counts(), (1, 1, 1));
}

#[tokio::test]
async fn operations_are_named_by_qualified_id_api_or_route() {
    let (_three, _server, client) = Three::serving(Principal::dev()).await;
    let schema = call_ok(
        &client,
        "api_schema",
        json!({"operationId": "github:issues/list-for-repo"}),
    )
    .await;
    assert_eq!(schema["operationId"], "github:issues/list-for-repo");
    assert_eq!(schema["path"], "/repos/{owner}/{repo}/issues");
    // A bare id only one API has needs no prefix.
    let schema = call_ok(&client, "api_schema", json!({"operationId": "GetCharges"})).await;
    assert_eq!(schema["operationId"], "stripe:GetCharges");
    // `api` and the prefix must agree.
    call_err(
        &client,
        "api_schema",
        json!({"operationId": "stripe:GetCharges", "api": "github"}),
        "INVALID_ARGUMENTS",
    )
    .await;
    // A route in one API's words, and the same route asked of another API.
    let schema = call_ok(
        &client,
        "api_schema",
        json!({"api": "petstore", "method": "GET", "path": "/pet/42"}),
    )
    .await;
    assert_eq!(schema["operationId"], "petstore:getPetById");
    let missing = call_err(
        &client,
        "api_schema",
        json!({"api": "github", "method": "GET", "path": "/pet/42"}),
        "UNKNOWN_OPERATION",
    )
    .await;
    // The closest operations it suggests are qualified too.
    let closest = missing["closest"].as_array().unwrap();
    assert!(
        closest
            .iter()
            .all(|c| c["operationId"].as_str().unwrap().contains(':')),
        "{missing}"
    );
}

#[tokio::test]
async fn a_caller_sees_and_calls_only_the_apis_its_features_name() {
    let (three, _server, client) = Three::serving(holding(&[
        "apigate.discover",
        "apigate.schema",
        "apigate.execute",
        "github.*",
        "stripe:GetCharges",
    ]))
    .await;
    for query in [
        "find pets by status",
        "list charges",
        "create a charge",
        "list issues",
    ] {
        let found = call_ok(
            &client,
            "api_discover",
            json!({"query": query, "limit": 50}),
        )
        .await;
        for id in ids(&found) {
            assert!(
                id.starts_with("github:") || id == "stripe:GetCharges",
                "{query:?} showed {id}"
            );
        }
    }
    let found = call_ok(&client, "api_discover", json!({"query": "list charges"})).await;
    assert!(
        ids(&found).contains(&"stripe:GetCharges".to_string()),
        "{found}"
    );
    // Petstore is out of sight: unknown to api_schema, forbidden to api_execute.
    call_err(
        &client,
        "api_schema",
        json!({"operationId": "petstore:findPetsByStatus"}),
        "UNKNOWN_OPERATION",
    )
    .await;
    let refused = execute_err(
        &client,
        json!({"operationId": "petstore:findPetsByStatus", "query": {"status": "sold"}}),
        "FORBIDDEN",
    )
    .await;
    assert_eq!(refused["missing"], "petstore.execute", "{refused}");
    execute_err(
        &client,
        json!({"operationId": "stripe:PostCharges", "body": {"amount": 1, "currency": "usd"}}),
        "FORBIDDEN",
    )
    .await;
    let charges = execute_ok(
        &client,
        json!({"operationId": "stripe:GetCharges", "query": {"limit": 1}}),
    )
    .await;
    assert_eq!(charges["status"], 200);
    assert_eq!(three.counts(), (0, 1, 0));
}

/// `apigate dev --config CONFIG`, which must fail: its stderr.
async fn refused(config: &std::path::Path) -> String {
    let (ok, _, stderr) = run_apigate(&dev_config(config), &[("APIGATE_RANKER", "lexical")]).await;
    assert!(!ok, "{stderr}");
    stderr
}

#[tokio::test]
async fn a_config_file_that_is_wrong_is_refused_with_what_to_fix() {
    let three = Three::start().await;
    for (extra, expected) in [
        (
            "\n[[api]]\nname = \"github\"\nspec = \"x.json\"\n",
            "two [[api]] tables have this name",
        ),
        (
            "\n[[api]]\nname = \"git:hub\"\nspec = \"x.json\"\n",
            "it prefixes operation ids as NAME:operationId",
        ),
        (
            "\n[[api]]\nname = \"x\"\nspec = \"x.json\"\nretries = 3\n",
            "unknown field `retries`",
        ),
        (
            "\n[[api]]\nname = \"x\"\nspec = \"x.json\"\nupstream-headers = { Authorization = \"Bearer inline\" }\n",
            "never inline",
        ),
    ] {
        three.write_config(extra);
        let stderr = refused(&three.config()).await;
        assert!(stderr.contains(expected), "{extra}: {stderr}");
        assert!(!stderr.contains("Bearer inline"), "{stderr}");
    }
    // Credential settings in a file others may read.
    three.write_config("");
    std::fs::set_permissions(three.config(), std::fs::Permissions::from_mode(0o644)).unwrap();
    let stderr = refused(&three.config()).await;
    assert!(stderr.contains("chmod 600"), "{stderr}");
}

#[tokio::test]
async fn discover_without_a_query_maps_the_apis_in_their_own_words() {
    let (_three, _server, client) = Three::serving(Principal::dev()).await;
    let shown = call_ok(&client, "api_discover", json!({})).await;
    let map = &shown["overview"];
    let names: Vec<&str> = strings(map, "api");
    assert_eq!(names, ["github", "stripe", "petstore"], "{map}");
    assert!(
        serde_json::to_vec(map).unwrap().len() <= 4096,
        "{} bytes",
        map.to_string().len()
    );
    let github = &map[0];
    assert_eq!(github["operations"], 1223);
    assert!(github["moreGroups"].as_u64().unwrap() > 0, "{github}");
    let groups = github["groups"].as_array().unwrap();
    let counts: Vec<u64> = groups
        .iter()
        .map(|g| g["operations"].as_u64().unwrap())
        .collect();
    assert!(
        counts.windows(2).all(|w| w[0] >= w[1]),
        "largest first: {counts:?}"
    );
    assert!(groups.iter().any(|g| g["name"] == "issues"), "{github}");
    // Stripe's spec has no tags: its groups are the resources of its paths, which `tag` takes.
    let stripe = &map[1];
    let resources = strings(&stripe["groups"], "name");
    assert!(resources.contains(&"/charges"), "{stripe}");
    let charges = call_ok(
        &client,
        "api_discover",
        json!({"api": "stripe", "tag": "/charges", "query": "", "limit": 50}),
    )
    .await;
    let paths = strings(&charges["results"], "path");
    assert!(!paths.is_empty());
    assert!(
        paths.iter().all(|p| p.starts_with("/v1/charges")),
        "{paths:?}"
    );
    // One API's map.
    let one = call_ok(&client, "api_discover", json!({"api": "petstore"})).await;
    let map = one["overview"].as_array().unwrap();
    assert_eq!(map.len(), 1);
    let mut groups = strings(&map[0]["groups"], "name");
    groups.sort_unstable();
    assert_eq!(groups, ["pet", "store", "user"]);
}

#[tokio::test]
async fn every_result_names_its_api_and_its_qualified_id() {
    let (three, _server, client) = Three::serving(Principal::dev()).await;
    // Each result, however the operation was named, says both as discovery does.
    let named = |r: &Value, api: &str, id: &str| {
        assert_eq!(r["operationId"], format!("{api}:{id}"), "{r}");
        assert_eq!(r["api"], api, "{r}");
    };
    let charges = execute_ok(
        &client,
        json!({"api": "stripe", "operationId": "GetCharges", "query": {"limit": 1}}),
    )
    .await;
    assert_eq!(charges["status"], 200, "{charges}");
    named(&charges, "stripe", "GetCharges");
    let pets = execute_ok(
        &client,
        json!({"api": "petstore", "method": "GET", "path": "/pet/findByStatus",
            "query": {"status": ["available"]}}),
    )
    .await;
    named(&pets, "petstore", "findPetsByStatus");
    let dry = execute_ok(
        &client,
        json!({"operationId": "github:issues/list-for-repo",
            "pathParams": {"owner": "octo", "repo": "demo"}, "dryRun": true}),
    )
    .await;
    named(&dry, "github", "issues/list-for-repo");
    assert_eq!(three.counts(), (0, 1, 1));
    let schema = call_ok(&client, "api_schema", json!({"operationId": "GetCharges"})).await;
    named(&schema, "stripe", "GetCharges");
    // Errors about one operation name it so too.
    let refused = execute_err(
        &client,
        json!({"operationId": "getPetById", "pathParams": {"petId": "not-a-number"}}),
        "INVALID_ARGUMENTS",
    )
    .await;
    named(&refused, "petstore", "getPetById");
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("petstore:getPetById"),
        "{refused}"
    );
    let missing = call_err(
        &client,
        "api_schema",
        json!({"api": "github", "method": "GET", "path": "/pet/42"}),
        "UNKNOWN_OPERATION",
    )
    .await;
    let closest = missing["closest"].as_array().unwrap();
    assert!(!closest.is_empty(), "{missing}");
    for hit in closest {
        let (api, id) = hit["operationId"]
            .as_str()
            .unwrap()
            .split_once(':')
            .unwrap();
        named(hit, api, id);
    }
    // A discovery hit names its API by its id alone (`NAME:operationId`): the ten hits of a
    // result do not repeat it beside (issue 42's compact ids).
    let found = call_ok(&client, "api_discover", json!({"query": "refund a charge"})).await;
    for hit in found["results"].as_array().unwrap() {
        let (api, _) = hit["operationId"]
            .as_str()
            .unwrap()
            .split_once(':')
            .unwrap();
        assert!(["github", "stripe", "petstore"].contains(&api), "{hit}");
        assert!(hit.get("api").is_none(), "{hit}");
    }
}

#[tokio::test]
async fn one_api_has_a_map_too_and_keeps_its_plain_ids() {
    let (_upstream, _server, client) = petstore_client(true).await;
    let map = call_ok(&client, "api_discover", json!({"query": "  "})).await;
    let apis = map["overview"].as_array().unwrap();
    assert_eq!(apis.len(), 1);
    assert!(apis[0].get("api").is_none(), "{map}");
    let pet = &apis[0]["groups"][0];
    assert_eq!(pet["name"], "pet");
    assert_eq!(pet["description"], "Everything about your Pets");
    let found = call_ok(
        &client,
        "api_discover",
        json!({"query": "find pets by status"}),
    )
    .await;
    assert_eq!(found["results"][0]["operationId"], "findPetsByStatus");
    assert!(found["results"][0].get("api").is_none());
    // Nor do its results.
    for args in [
        json!({"operationId": "findPetsByStatus", "query": {"status": ["sold"]}}),
        json!({"operationId": "findPetsByStatus", "query": {"status": ["sold"]}, "dryRun": true}),
    ] {
        let done = execute_ok(&client, args).await;
        assert_eq!(done["operationId"], "findPetsByStatus", "{done}");
        assert!(done.get("api").is_none(), "{done}");
    }
    let schema = call_ok(&client, "api_schema", json!({"operationId": "getPetById"})).await;
    assert!(schema.get("api").is_none(), "{schema}");
    call_err(
        &client,
        "api_discover",
        json!({"query": "pets", "api": "petstore"}),
        "INVALID_ARGUMENTS",
    )
    .await;
}

#[tokio::test]
async fn an_apis_own_rules_apply_to_its_operations_only() {
    let three = Three::start().await;
    // The last table is petstore's: deleting a pet needs a feature of its own.
    three.write_config(
        "\n[[api.rule]]\nmethod = \"DELETE\"\npath = \"/pet/*\"\nfeatures = [\"pets.delete\"]\n",
    );
    let principal = holding(&[
        "apigate.*",
        "github.execute",
        "stripe.execute",
        "petstore.execute",
    ]);
    let server = three.serve_as(principal).await;
    let client = server.client().await;
    let refused = execute_err(
        &client,
        json!({"operationId": "petstore:deletePet", "pathParams": {"petId": 1}}),
        "FORBIDDEN",
    )
    .await;
    assert_eq!(refused["missing"], "pets.delete", "{refused}");
    let found = call_ok(
        &client,
        "api_discover",
        json!({"query": "delete a pet", "api": "petstore", "limit": 50}),
    )
    .await;
    assert!(
        !ids(&found).contains(&"petstore:deletePet".to_string()),
        "{found}"
    );
    assert!(
        ids(&found).contains(&"petstore:getPetById".to_string()),
        "{found}"
    );
    // The rule is petstore's: GitHub's DELETE of a similar path is not touched by it.
    let dry = execute_ok(
        &client,
        json!({"operationId": "github:repos/delete", "pathParams": {"owner": "o", "repo": "r"},
            "dryRun": true}),
    )
    .await;
    assert_eq!(dry["dryRun"], true, "{dry}");
    assert_eq!(three.counts(), (0, 0, 0));
}

/// A caller whose features name none of the APIs finds nothing, and is told why: how many
/// operations it may not see and the feature that would show them, naming no API (issue 46).
#[tokio::test]
async fn an_empty_discovery_says_what_permissions_hid() {
    let (_three, _server, client) = Three::serving(holding(&[
        "apigate.discover",
        "apigate.schema",
        "apigate.execute",
    ]))
    .await;
    let found = call_ok(
        &client,
        "api_discover",
        json!({"query": "find pets by status"}),
    )
    .await;
    assert_eq!(found["results"], json!([]), "{found}");
    assert_eq!(found["total"], 0, "{found}");
    let hidden = found["hidden"].as_u64().unwrap_or(0);
    assert!(hidden > 0, "{found}");
    let note = found["note"].as_str().unwrap_or_default();
    assert!(
        note.starts_with(&format!(
            "{hidden} operations match that this caller may not see"
        )) && note.contains("`NAME.execute`"),
        "{note}"
    );
    // The overview is empty for the same reason, and says so with every operation counted.
    let map = call_ok(&client, "api_discover", json!({})).await;
    assert_eq!(map["overview"], json!([]), "{map}");
    let note = map["note"].as_str().unwrap_or_default();
    assert!(
        map["hidden"].as_u64().unwrap_or(0) > 1000
            && note.contains("operations exist that this caller may not see")
            && note.contains("`NAME.execute`"),
        "{map}"
    );
    // Neither names an API the caller holds no feature for.
    for text in [found.to_string(), map.to_string()] {
        for api in ["github", "stripe", "petstore"] {
            assert!(!text.contains(api), "{api} named in {text}");
        }
    }
    // A caller that may see some of the APIs gets the usual answer: no note.
    let (_three, _server, client) = Three::serving(holding(&[
        "apigate.discover",
        "apigate.execute",
        "github.*",
    ]))
    .await;
    let found = call_ok(&client, "api_discover", json!({"query": "list issues"})).await;
    assert!(
        found.get("note").is_none() && found.get("hidden").is_none(),
        "{found}"
    );
}

/// Without `apigate.execute` discovery shows nothing at all, and says which feature it lacks.
#[tokio::test]
async fn an_empty_discovery_without_execute_names_that_feature() {
    let (_three, _server, client) =
        Three::serving(holding(&["apigate.discover", "github.*", "stripe.*"])).await;
    let found = call_ok(&client, "api_discover", json!({"query": "list issues"})).await;
    assert_eq!(found["results"], json!([]), "{found}");
    let note = found["note"].as_str().unwrap_or_default();
    assert!(note.contains("lacks `apigate.execute`"), "{found}");
}
