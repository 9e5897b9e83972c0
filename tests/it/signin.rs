//! People sign in from their MCP client: apigate as an OAuth 2.1 protected resource, against
//! a real authorization server. `oidc-provider` (the certified Node OpenID provider, installed
//! by `scripts/oidc-provider.sh`) runs with three clients (tokens signed RS256, ES256 and
//! EdDSA), resource indicators and PKCE; a person signs in through the real authorization-code
//! flow, driving the provider's own login and consent forms over HTTP. The tokens it issues
//! open `apigate serve`; tokens that must not (another audience, expired, another issuer, a
//! key it does not publish, `alg: none`, HS256, no useful scope, huge, malformed) are refused
//! with the status and `WWW-Authenticate` a client acts on.

use std::collections::HashMap;
use std::process::Stdio;
use std::time::Duration;

use base64::Engine as _;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};

use crate::db::TestDb;
use crate::support::*;

const REDIRECT: &str = "http://127.0.0.1:9/callback";

/// A running `oidc-provider`, and the keys it signs with (so a test can sign what it never
/// would).
pub(crate) struct Idp {
    pub(crate) issuer: String,
    keys: Value,
    _child: tokio::process::Child,
    _dir: tempfile::TempDir,
}

/// `bash scripts/oidc-provider.sh`, once per test process: Node and the provider script.
async fn installed() -> &'static (String, String) {
    static INSTALLED: tokio::sync::OnceCell<(String, String)> = tokio::sync::OnceCell::const_new();
    INSTALLED
        .get_or_init(|| async {
            let out = tokio::process::Command::new("bash")
                .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/oidc-provider.sh"))
                .output()
                .await
                .expect("bash runs");
            assert!(
                out.status.success(),
                "scripts/oidc-provider.sh failed (it needs npm, or root to apt-get install it):\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let text = String::from_utf8_lossy(&out.stdout);
            let (node, script) = text.trim().split_once(' ').expect("NODE SCRIPT");
            (node.to_string(), script.to_string())
        })
        .await
}

/// `application/x-www-form-urlencoded`.
fn form_body(fields: &[(&str, &str)]) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields)
        .finish()
}

impl Idp {
    /// The provider, issuing tokens for `resource` (and for one other resource).
    pub(crate) async fn start(resource: &str) -> Idp {
        let (node, script) = installed().await;
        let dir = tempfile::tempdir().unwrap();
        let keys_file = dir.path().join("keys.json");
        // Port 0: the provider listens where the system says, and names it in its issuer.
        let mut child = tokio::process::Command::new(node)
            .arg(script)
            .env("PORT", "0")
            .env("RESOURCE", resource)
            .env("KEYS_OUT", &keys_file)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("node starts");
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut errors = child.stderr.take().unwrap();
        let (mut lines, mut errors) = tokio::time::timeout(Duration::from_secs(60), async move {
            while let Some(line) = lines.next_line().await.unwrap() {
                if line.contains("listening at") {
                    return (lines, errors);
                }
            }
            let mut why = String::new();
            let _ = errors.read_to_string(&mut why).await;
            panic!("oidc-provider exited before it listened:\n{why}");
        })
        .await
        .expect("oidc-provider listens within 60 s");
        // Keep reading what it prints: a closed pipe would end it at its next notice.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        tokio::spawn(async move { tokio::io::copy(&mut errors, &mut tokio::io::sink()).await });
        let keys: Value = serde_json::from_slice(&std::fs::read(&keys_file).unwrap()).unwrap();
        Idp {
            issuer: keys["issuer"].as_str().unwrap().to_string(),
            keys,
            _child: child,
            _dir: dir,
        }
    }

    /// A person signs in as `user` in `client` for `scope` and `resource`: the authorization
    /// request with PKCE, the provider's login form, its consent form, the code exchanged for
    /// an access token. Cookies and redirects are followed by hand, as a browser would.
    pub(crate) async fn sign_in(
        &self,
        client: &str,
        user: &str,
        scope: &str,
        resource: &str,
    ) -> String {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        // PKCE verifiers are 43 to 128 unreserved characters, whatever the user's name holds.
        let verifier = format!(
            "verifier-{}-0123456789abcdefghijklmnopqrstuvwxyz",
            &hex::encode(Sha256::digest(user.as_bytes()))[..32]
        );
        let challenge = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .encode(Sha256::digest(verifier.as_bytes()));
        let mut cookies: HashMap<String, String> = HashMap::new();
        let mut url = reqwest::Url::parse_with_params(
            &format!("{}/auth", self.issuer),
            &[
                ("client_id", client),
                ("response_type", "code"),
                ("redirect_uri", REDIRECT),
                ("scope", scope),
                ("resource", resource),
                ("code_challenge", &challenge),
                ("code_challenge_method", "S256"),
                ("state", "s1"),
            ],
        )
        .unwrap()
        .to_string();
        let mut form: Option<Vec<(&str, &str)>> = None;
        for _ in 0..12 {
            if url.starts_with(REDIRECT) {
                break;
            }
            let cookie = cookies
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join("; ");
            let request = match form.take() {
                Some(fields) => http
                    .post(&url)
                    .header("content-type", "application/x-www-form-urlencoded")
                    .body(form_body(&fields)),
                None => http.get(&url),
            };
            let response = request.header("cookie", cookie).send().await.unwrap();
            for set in response.headers().get_all("set-cookie") {
                let set = set.to_str().unwrap();
                let pair = set.split(';').next().unwrap();
                if let Some((k, v)) = pair.split_once('=') {
                    cookies.insert(k.to_string(), v.to_string());
                }
            }
            let base = reqwest::Url::parse(&url).unwrap();
            if let Some(location) = response.headers().get("location") {
                url = base.join(location.to_str().unwrap()).unwrap().to_string();
                continue;
            }
            // A page with a form: the login form, then the consent form.
            let page = response.text().await.unwrap();
            let action = page
                .split("action=\"")
                .nth(1)
                .and_then(|s| s.split('"').next())
                .unwrap_or_else(|| panic!("no form on {url}: {page}"))
                .to_string();
            form = Some(if page.contains("name=\"login\"") {
                vec![("prompt", "login"), ("login", user), ("password", "any")]
            } else {
                vec![("prompt", "consent")]
            });
            url = base.join(&action).unwrap().to_string();
        }
        let back = reqwest::Url::parse(&url).unwrap();
        let code = back
            .query_pairs()
            .find(|(k, _)| k == "code")
            .unwrap_or_else(|| panic!("no code in {url}"))
            .1
            .to_string();
        let secret = format!("{client}-secret");
        let token: Value = http
            .post(format!("{}/token", self.issuer))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form_body(&[
                ("grant_type", "authorization_code"),
                ("code", &code),
                ("redirect_uri", REDIRECT),
                ("client_id", client),
                ("client_secret", &secret),
                ("code_verifier", &verifier),
                ("resource", resource),
            ]))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        token["access_token"]
            .as_str()
            .unwrap_or_else(|| panic!("no access token: {token}"))
            .to_string()
    }

    /// A token signed with one of the provider's keys (`alg`), or its unpublished one, with
    /// these claims: what the provider would never issue.
    fn mint(&self, alg: &str, unlisted: bool, claims: &Value) -> String {
        let key = if unlisted {
            &self.keys["unlisted"]
        } else {
            self.keys["keys"]
                .as_array()
                .unwrap()
                .iter()
                .find(|k| k["alg"] == alg)
                .unwrap()
        };
        let der = base64::engine::general_purpose::STANDARD
            .decode(key["der"].as_str().unwrap())
            .unwrap();
        let (algorithm, encoding) = match alg {
            "RS256" => (Algorithm::RS256, EncodingKey::from_rsa_der(&der)),
            "ES256" => (Algorithm::ES256, EncodingKey::from_ec_der(&der)),
            _ => (Algorithm::EdDSA, EncodingKey::from_ed_der(&der)),
        };
        let mut header = Header::new(algorithm);
        header.kid = key["kid"].as_str().map(str::to_string);
        jsonwebtoken::encode(&header, claims, &encoding).unwrap()
    }

    /// Claims as the provider writes them for `resource`, valid for ten minutes.
    fn claims(&self, resource: &str, scope: &str) -> Value {
        let now = chrono::Utc::now().timestamp();
        json!({"iss": self.issuer, "sub": "mallory", "aud": resource, "scope": scope,
            "client_id": "apigate-rs", "iat": now, "exp": now + 600})
    }
}

/// An authorization server and `apigate serve` trusting it, with `extra` flags: apigate on a
/// port chosen up front, so that its /mcp URL (returned, with both processes) is the resource
/// the provider mints tokens for.
pub(crate) async fn serve(db: &TestDb, upstream: &Upstream, extra: &[&str]) -> (Idp, Proc, String) {
    serve_with(db, upstream, |_| {
        extra.iter().map(|a| a.to_string()).collect()
    })
    .await
}

/// [`serve`] with flags that name the provider (its issuer URL is known once it runs).
pub(crate) async fn serve_with(
    db: &TestDb,
    upstream: &Upstream,
    extra: impl FnOnce(&Idp) -> Vec<String>,
) -> (Idp, Proc, String) {
    let port = free_port();
    let resource = format!("http://127.0.0.1:{port}/mcp");
    let idp = Idp::start(&resource).await;
    let spec = spec_path("petstore-3.0.json");
    let listen = format!("127.0.0.1:{port}");
    let up = upstream.url();
    let extra = extra(&idp);
    let mut args = vec![
        "serve",
        "--spec",
        &spec,
        "--upstream",
        &up,
        "--listen",
        &listen,
        "--oauth-issuer",
        &idp.issuer,
    ];
    args.extend(extra.iter().map(String::as_str));
    let (proc, url) = Proc::spawn_with_env(
        "serve",
        &args,
        &[("DATABASE_URL", db.url.as_str())],
        "apigate serve",
    )
    .await;
    let url = url.trim_end_matches(';').to_string();
    assert_eq!(url, resource);
    (idp, proc, url)
}

/// `serve`'s flags for the introspection endpoint `url`, client `apigate-rs`, its secret in
/// `secret_file`.
pub(crate) fn introspection_flags(url: &str, secret_file: &std::path::Path) -> Vec<String> {
    [
        "--oauth-introspection-url",
        url,
        "--oauth-introspection-client-id",
        "apigate-rs",
        "--oauth-introspection-secret-file",
        &secret_file.to_string_lossy(),
    ]
    .map(String::from)
    .to_vec()
}

/// A raw `initialize` on `/mcp` with these headers: status, `WWW-Authenticate`, body.
pub(crate) async fn initialize(url: &str, headers: &[(&str, &str)]) -> (u16, String, Value) {
    let mut request = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .json(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "signin-test", "version": "1"}}}),
        );
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let challenge = response
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let body = response.text().await.unwrap();
    let body = serde_json::from_str(&body).unwrap_or(Value::String(body));
    (status, challenge, body)
}

#[tokio::test]
async fn a_person_signs_in_and_the_token_opens_the_tools() {
    let db = TestDb::new().await;
    let upstream = Upstream::start().await;
    let (idp, mut proc, url) = serve(&db, &upstream, &[]).await;
    let resource = url.clone();
    let base = url.trim_end_matches("/mcp");

    // No credentials: 401, and where to learn to sign in.
    let metadata_url = format!("{base}/.well-known/oauth-protected-resource/mcp");
    let (status, challenge, _) = initialize(&url, &[]).await;
    assert_eq!(status, 401);
    assert_eq!(
        challenge,
        format!("Bearer resource_metadata=\"{metadata_url}\"")
    );
    let metadata = get_json(&metadata_url).await;
    assert_eq!(metadata["resource"], resource.as_str());
    assert_eq!(metadata["authorization_servers"], json!([idp.issuer]));
    assert_eq!(metadata["bearer_methods_supported"], json!(["header"]));
    assert!(
        metadata["scopes_supported"]
            .as_array()
            .unwrap()
            .contains(&json!("apigate:write"))
    );
    assert_eq!(
        get_json(format!("{base}/.well-known/oauth-protected-resource")).await,
        metadata
    );

    // Three people, each through a client whose tokens use another algorithm.
    for (client, user) in [
        ("apigate-rs", "alice"),
        ("apigate-es", "bob"),
        ("apigate-ed", "carol"),
    ] {
        let token = idp
            .sign_in(client, user, "openid apigate:read apigate:write", &resource)
            .await;
        let bearer = format!("Bearer {token}");
        let mcp = mcp_client(&url, &[("authorization", &bearer)]).await;
        // No session token in the schemas: the bearer token is the session.
        for tool in mcp.list_all_tools().await.unwrap() {
            assert!(
                tool.input_schema["properties"]
                    .get("_sessionToken")
                    .is_none()
            );
        }
        let found = call_ok(
            &mcp,
            "api_discover",
            json!({"query": "find pets by status"}),
        )
        .await;
        assert!(!found["results"].as_array().unwrap().is_empty());
        let pets = execute_ok(
            &mcp,
            json!({"operationId": "findPetsByStatus", "query": {"status": ["sold"]}}),
        )
        .await;
        assert_eq!(pets["status"], 200, "{client}: {pets}");
    }

    // A read-only person: discovery yes, execution no (the feature apigate:write grants: the
    // call is refused with 403 insufficient_scope, see step_up.rs).
    let reader = idp
        .sign_in("apigate-rs", "dave", "apigate:read", &resource)
        .await;
    let mcp = mcp_client(&url, &[("authorization", &format!("Bearer {reader}"))]).await;
    call_ok(&mcp, "api_discover", json!({"query": "find pets"})).await;
    let refused = mcp
        .call_tool(
            rmcp::model::CallToolRequestParams::new("api_execute").with_arguments(
                json!({"operationId": "findPetsByStatus", "query": {"status": ["sold"]}})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
        )
        .await
        .expect_err("refused with 403");
    assert!(
        format!("{refused:?}").contains("insufficient_scope")
            && format!("{refused:?}").contains("apigate:write"),
        "{refused:?}"
    );

    // `apigate audit` names the person (sub), the client acting for them, the token's tenant.
    let (ok, out, err) = run_apigate(
        &["audit", "--json", "--limit", "200"],
        &[("DATABASE_URL", db.url.as_str())],
    )
    .await;
    assert!(ok, "{err}");
    let page: Value = serde_json::from_str(&out).unwrap();
    let rows = page["entries"].as_array().unwrap();
    let by = |user: &str| -> Vec<&Value> { rows.iter().filter(|r| r["userId"] == user).collect() };
    assert!(!by("alice").is_empty(), "{out}");
    for row in by("alice") {
        assert_eq!(row["actor"], "oauth:apigate-rs", "{row}");
        assert_eq!(row["tenantId"], "acme", "{row}");
        assert_eq!(row["organizationId"], "acme-eng", "{row}");
    }
    assert!(by("carol").iter().all(|r| r["actor"] == "oauth:apigate-ed"));
    assert!(
        by("dave").iter().any(|r| r["decision"] == "denied"),
        "{out}"
    );

    // /health: the issuer and its keys.
    let health = get_json(format!("{base}/health")).await;
    assert_eq!(health["oauth"]["issuers"][0]["issuer"], idp.issuer.as_str());
    assert_eq!(health["oauth"]["issuers"][0]["keysLoaded"], 3, "{health}");
    assert!(proc.terminate().await, "{}", proc.log());
}

#[tokio::test]
async fn tokens_that_must_not_open_the_server_are_refused() {
    let db = TestDb::new().await;
    let upstream = Upstream::start().await;
    let (idp, mut proc, url) = serve(&db, &upstream, &[]).await;
    let resource = url.clone();
    let refused = |token: String| {
        let url = url.clone();
        async move {
            let bearer = format!("Bearer {token}");
            initialize(&url, &[("authorization", &bearer)]).await
        }
    };

    // A real token, for another API behind the same provider: no passthrough.
    let other = idp
        .sign_in(
            "apigate-rs",
            "erin",
            "apigate:write",
            "http://127.0.0.1:9/other-api",
        )
        .await;
    let secret_part = other[other.len() - 24..].to_string();
    let (status, challenge, body) = refused(other).await;
    assert_eq!(status, 401);
    assert!(
        challenge.starts_with("Bearer error=\"invalid_token\""),
        "{challenge}"
    );
    assert!(challenge.contains("resource_metadata="), "{challenge}");
    assert!(
        body["error"].as_str().unwrap().contains("another resource"),
        "{body}"
    );

    let now = chrono::Utc::now().timestamp();
    let mut expired = idp.claims(&resource, "apigate:write");
    expired["exp"] = json!(now - 3600);
    expired["iat"] = json!(now - 7200);
    let mut foreign = idp.claims(&resource, "apigate:write");
    foreign["iss"] = json!("http://127.0.0.1:9/not-trusted");
    let good = idp.claims(&resource, "apigate:write");
    let mut many_scopes = good.clone();
    many_scopes["scope"] = json!(
        (0..300)
            .map(|i| format!("s{i}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let mut early = good.clone();
    early["nbf"] = json!(now + 600);
    let none = format!(
        "{}.{}.",
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#),
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(good.to_string())
    );
    let hs256 = jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        &good,
        &EncodingKey::from_secret(idp.keys["keys"][0]["der"].as_str().unwrap().as_bytes()),
    )
    .unwrap();
    let cases = [
        ("expired", idp.mint("RS256", false, &expired), "expired"),
        (
            "another issuer",
            idp.mint("RS256", false, &foreign),
            "not trusted",
        ),
        (
            "an unpublished key",
            idp.mint("RS256", true, &good),
            "does not publish",
        ),
        ("alg none", none, "none"),
        ("HS256", hs256, "HS256"),
        ("not a JWT", "abc".to_string(), "not a JWT"),
        (
            "300 scopes",
            idp.mint("RS256", false, &many_scopes),
            "more than 256 scopes",
        ),
        (
            "not yet valid",
            idp.mint("RS256", false, &early),
            "not valid yet",
        ),
        ("huge", "a".repeat(20_000), "bytes"),
    ];
    for (what, token, says) in cases {
        let (status, challenge, body) = refused(token).await;
        assert_eq!(status, 401, "{what}: {body}");
        assert!(
            challenge.contains("error=\"invalid_token\""),
            "{what}: {challenge}"
        );
        let message = body["error"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{what}: {message}");
    }
    // Signed by the provider's own ES256 and EdDSA keys, the same claims pass; so do clocks
    // that disagree by less than a minute (expired 30 s ago, valid from 30 s on).
    for alg in ["ES256", "EdDSA"] {
        let (status, _, body) = refused(idp.mint(alg, false, &good)).await;
        assert_eq!(status, 200, "{alg}: {body}");
    }
    let mut skewed = good.clone();
    skewed["exp"] = json!(now - 30);
    skewed["nbf"] = json!(now + 30);
    let (status, _, body) = refused(idp.mint("RS256", false, &skewed)).await;
    assert_eq!(status, 200, "skew: {body}");
    // A token whose scopes grant no tool: 403 and the scope to ask for (step-up).
    let admin_only = idp
        .sign_in("apigate-rs", "frank", "apigate:admin", &resource)
        .await;
    let (status, challenge, _) = refused(admin_only).await;
    assert_eq!(status, 403);
    assert!(
        challenge.starts_with(
            "Bearer error=\"insufficient_scope\", scope=\"apigate:read apigate:write\""
        ),
        "{challenge}"
    );
    // A server key alone in `--auth both` (the default with an issuer) still works as before.
    let (status, _, _) = initialize(&url, &[("x-api-key", "ak_not-a-key")]).await;
    assert_eq!(status, 401);
    assert!(proc.is_running(), "{}", proc.log());
    // No token, nor a piece of one, in the log.
    assert!(!proc.log().contains(&secret_part), "{}", proc.log());
    assert!(proc.terminate().await, "{}", proc.log());
}

#[tokio::test]
async fn issuer_keys_that_cannot_be_had_fail_closed_without_a_500() {
    use axum::routing::get;
    let db = TestDb::new().await;
    let upstream = Upstream::start().await;
    // JWKS endpoints that are down, slow, and huge.
    let app = axum::Router::new()
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(30)).await;
                "{}"
            }),
        )
        .route(
            "/huge",
            get(|| async { format!("{{\"keys\": [\"{}\"]}}", "k".repeat(2_000_000)) }),
        );
    let jwks = serve_app(app).await;
    let dead = format!("http://127.0.0.1:{}/jwks", free_port());
    for (what, jwks_url, says) in [
        ("down", dead, "/jwks"),
        ("slow", format!("http://{jwks}/slow"), "no answer within"),
        ("huge", format!("http://{jwks}/huge"), "byte limit"),
    ] {
        let (idp, mut proc, url) = serve(&db, &upstream, &["--oauth-jwks-url", &jwks_url]).await;
        let resource = url.clone();
        let token = idp.mint("RS256", false, &idp.claims(&resource, "apigate:write"));
        let (status, _, body) =
            initialize(&url, &[("authorization", &format!("Bearer {token}"))]).await;
        assert_eq!(status, 503, "{what}: {body}");
        let message = body["error"].as_str().unwrap_or_default();
        assert!(
            message.contains("could not be fetched"),
            "{what}: {message}"
        );
        let health = get_json(url.replace("/mcp", "/health")).await;
        let error = health["oauth"]["issuers"][0]["lastError"]
            .as_str()
            .unwrap_or_default();
        assert!(error.contains(says), "{what}: {health}");
        assert!(proc.terminate().await, "{}", proc.log());
    }
}

#[tokio::test]
async fn oauth_check_shows_what_an_issuers_tokens_map_to() {
    let idp = Idp::start("http://127.0.0.1:3001/mcp").await;
    let (ok, out, err) = run_apigate(
        &[
            "oauth",
            "check",
            "--oauth-issuer",
            &idp.issuer,
            "--oauth-scope-features",
            "apigate:read=apigate.discover,apigate.schema",
            "--json",
        ],
        &[],
    )
    .await;
    assert!(ok, "{err}");
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["issuers"][0]["issuer"], idp.issuer.as_str());
    assert_eq!(
        report["issuers"][0]["jwksUrl"],
        format!("{}/jwks", idp.issuer)
    );
    assert_eq!(report["issuers"][0]["keys"].as_array().unwrap().len(), 3);
    assert_eq!(
        report["scopes"],
        json!({"apigate:read": ["apigate.discover", "apigate.schema"]})
    );
    // An issuer that does not answer: exit 1 and why.
    let (ok, out, _) = run_apigate(
        &[
            "oauth",
            "check",
            "--oauth-issuer",
            &format!("http://127.0.0.1:{}", free_port()),
        ],
        &[],
    )
    .await;
    assert!(!ok);
    assert!(out.contains("keys      none"), "{out}");
}

#[tokio::test]
async fn auth_modes_decide_which_credentials_open_the_server() {
    let db = TestDb::new().await;
    let upstream = Upstream::start().await;
    let narrow = cli_key(&db.url, "narrow-agent", "apigate.discover,apigate.schema").await;
    let narrow = narrow["key"].as_str().unwrap().to_string();

    // `both` (the default with an issuer): a key alone as before; a key and a token together
    // get what both grant.
    let (idp, mut proc, url) = serve(&db, &upstream, &[]).await;
    let resource = url.clone();
    let (status, _, body) = initialize(&url, &[("x-api-key", &narrow)]).await;
    assert_eq!(status, 200, "{body}");
    let writer = idp
        .sign_in("apigate-rs", "gina", "apigate:write", &resource)
        .await;
    let bearer = format!("Bearer {writer}");
    let alone = mcp_client(&url, &[("authorization", &bearer)]).await;
    let pets = json!({"operationId": "findPetsByStatus", "query": {"status": ["sold"]}});
    assert_eq!(execute_ok(&alone, pets.clone()).await["status"], 200);
    // The reload route wants apigate.admin, which this token's scopes do not grant.
    let reload = reqwest::Client::new()
        .post(url.replace("/mcp", "/admin/v1/reload"))
        .header("authorization", &bearer)
        .send()
        .await
        .unwrap();
    assert_eq!(reload.status(), 403);
    let both = mcp_client(&url, &[("authorization", &bearer), ("x-api-key", &narrow)]).await;
    call_ok(&both, "api_discover", json!({"query": "find pets"})).await;
    let (failed, refused) = call(&both, "api_execute", pets.clone()).await;
    assert!(failed, "{refused}");
    assert_eq!(refused["missing"], "apigate.execute", "{refused}");
    assert!(proc.terminate().await, "{}", proc.log());

    // `oauth`: a key alone is not enough; the answer says where to sign in.
    let (idp, mut proc, url) = serve(&db, &upstream, &["--auth", "oauth"]).await;
    let resource = url.clone();
    let (status, challenge, _) = initialize(&url, &[("x-api-key", &narrow)]).await;
    assert_eq!(status, 401);
    assert!(challenge.contains("resource_metadata="), "{challenge}");
    let token = idp
        .sign_in("apigate-es", "hana", "apigate:read", &resource)
        .await;
    let (status, _, body) =
        initialize(&url, &[("authorization", &format!("Bearer {token}"))]).await;
    assert_eq!(status, 200, "{body}");
    assert!(proc.terminate().await, "{}", proc.log());

    // Without an issuer `--auth oauth` cannot start, and says why.
    let spec = spec_path("petstore-3.0.json");
    let (ok, _, err) = run_apigate(
        &["serve", "--spec", &spec, "--auth", "oauth"],
        &[("DATABASE_URL", db.url.as_str())],
    )
    .await;
    assert!(!ok);
    assert!(err.contains("--auth oauth needs --oauth-issuer"), "{err}");
}

/// What validating a bearer token costs a request once the issuer's keys are cached, per
/// algorithm, in the build under test; beside it, the server key's warm check
/// (`auth_cost` in `tests/it/auth.rs`, same command). `cargo test --test it -- --ignored
/// --nocapture token_cost`; the release numbers come from `cargo bench --bench oauth`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "measurement; prints numbers"]
async fn token_cost() {
    use apigate::auth::oauth::{OAuthSettings, ResourceServer};
    let resource = "http://127.0.0.1:3001/mcp";
    let idp = Idp::start(resource).await;
    let server = ResourceServer::start(OAuthSettings {
        issuers: vec![(idp.issuer.clone(), None)],
        audience: resource.into(),
        scopes: OAuthSettings::default_scopes(),
        tenant_claim: "tenant".into(),
        organization_claim: "org".into(),
        roles_claim: "roles".into(),
        introspection: None,
    })
    .await
    .unwrap();
    let claims = idp.claims(resource, "openid apigate:read apigate:write");
    let n = 5_000u32;
    for alg in ["RS256", "ES256", "EdDSA"] {
        let token = idp.mint(alg, false, &claims);
        server.verify(&token).await.unwrap();
        let t = std::time::Instant::now();
        for _ in 0..n {
            server.verify(&token).await.unwrap();
        }
        println!(
            "bearer token {alg}: {:?}/request (keys cached)",
            t.elapsed() / n
        );
    }

    // The person behind the token: recorded and their credentials loaded once per cache
    // lifetime (the first call), then a cache hit.
    let db = TestDb::new().await;
    let auth = apigate::auth::Auth::new(db.store.clone(), Default::default())
        .await
        .unwrap();
    let verified = server
        .verify(&idp.mint("EdDSA", false, &claims))
        .await
        .unwrap();
    let t = std::time::Instant::now();
    auth.signed_in(&verified, verified.principal(None))
        .await
        .unwrap();
    let first = t.elapsed();
    let t = std::time::Instant::now();
    for _ in 0..n {
        auth.signed_in(&verified, verified.principal(None))
            .await
            .unwrap();
    }
    println!(
        "the person's row: first call {first:?}, then {:?}/request (cached)",
        t.elapsed() / n
    );

    // An opaque token: a round trip to the issuer's introspection endpoint, then reused.
    let secret = std::sync::Arc::new(zeroize::Zeroizing::new("apigate-rs-secret".to_string()));
    let introspecting = ResourceServer::start(OAuthSettings {
        issuers: vec![(idp.issuer.clone(), None)],
        audience: resource.into(),
        scopes: OAuthSettings::default_scopes(),
        tenant_claim: "tenant".into(),
        organization_claim: "org".into(),
        roles_claim: "roles".into(),
        introspection: Some(apigate::auth::oauth::IntrospectionSettings {
            url: format!("{}/token/introspection", idp.issuer)
                .parse()
                .unwrap(),
            client_id: "apigate-rs".into(),
            client_secret: secret,
        }),
    })
    .await
    .unwrap();
    let rounds = 50u32;
    let mut uncached = std::time::Duration::ZERO;
    for i in 0..rounds {
        let opaque = idp
            .sign_in("apigate-op", &format!("p{i}"), "apigate:write", resource)
            .await;
        let t = std::time::Instant::now();
        introspecting.verify(&opaque).await.unwrap();
        uncached += t.elapsed();
        if i == rounds - 1 {
            let t = std::time::Instant::now();
            for _ in 0..n {
                introspecting.verify(&opaque).await.unwrap();
            }
            println!(
                "opaque token: {:?} asking the issuer (mean of {rounds}), then {:?}/request (answer reused)",
                uncached / rounds,
                t.elapsed() / n
            );
        }
    }
}
