//! Signed identity assertions end to end: an upstream API (an axum app in the test) that
//! fetches apigate's `/.well-known/jwks.json` over HTTP and verifies every assertion it gets
//! (signature, `kid`, `aud`, `iss`, `exp`, `htm`/`htu` against the request it received, `jti`
//! never seen before), then records who called. Serve mode over a real Postgres with two
//! users' sessions; key rotation; tampered and foreign tokens refused; the assertion never in
//! results, dry runs or the binary's logs.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use apigate::auth::identity::{DRY_RUN_PLACEHOLDER, Identity, create_key_file};
use apigate::auth::{Auth, AuthConfig, NewKey, NewSession, RateLimit};
use apigate::http::{HttpOptions, KeyCheck};
use apigate::tools::Access;
use axum::Router;
use axum::extract::{Request, State};
use axum::response::IntoResponse;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::{Value, json};
use sqlx::Row;

use crate::db::TestDb;
use crate::support::{
    KEY, Server, engine_args, execute_ok, flags, mcp_client, spawn_dev, spec_path,
};

const HEADER: &str = "x-apigate-identity";

/// One request the verifying upstream received, and what it made of its assertion.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    /// Path and query as received.
    uri: String,
    token: Option<String>,
    /// The verified claims, or why verification failed.
    verdict: Result<Value, String>,
}

#[derive(Default)]
struct VerifierState {
    /// apigate's JWKS URL (known once apigate listens).
    jwks_url: Mutex<String>,
    /// The issuer the assertions must name.
    issuer: Mutex<String>,
    seen: Mutex<Vec<Seen>>,
    jtis: Mutex<HashSet<String>>,
}

/// The upstream API: verifies the assertion of every request, then echoes the request
/// (headers included, so an echoed assertion must be scrubbed by apigate).
struct Verifier {
    addr: SocketAddr,
    state: Arc<VerifierState>,
}

impl Verifier {
    async fn start() -> Verifier {
        let state: Arc<VerifierState> = Arc::default();
        let app = Router::new()
            .fallback(verify_and_echo)
            .with_state(state.clone());
        let addr = crate::support::serve_app(app).await;
        Verifier { addr, state }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Trust the keys (and the issuer) of the apigate at `base`.
    fn trust(&self, base: &str) {
        *self.state.jwks_url.lock().unwrap() = format!("{base}/.well-known/jwks.json");
        *self.state.issuer.lock().unwrap() = base.to_string();
    }

    fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }

    /// Verifies `token` as this upstream would for `method` on `path` (no query).
    async fn verify(&self, token: &str, method: &str, path: &str) -> Result<Value, String> {
        let host = self.addr.to_string();
        verify(&self.state, token, method, &host, path).await
    }
}

async fn verify_and_echo(
    State(state): State<Arc<VerifierState>>,
    request: Request,
) -> axum::response::Response {
    let method = request.method().to_string();
    let uri = request
        .uri()
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    let path = request.uri().path().to_string();
    let host = crate::support::header_text(request.headers(), "host");
    let token = request
        .headers()
        .get(HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let verdict = match &token {
        None => Err("no assertion".to_string()),
        Some(t) => verify(&state, t, &method, &host, &path).await,
    };
    if let Ok(claims) = &verdict {
        let jti = claims["jti"].as_str().unwrap_or_default().to_string();
        let fresh = state.jtis.lock().unwrap().insert(jti);
        assert!(fresh, "a jti came twice");
    }
    let headers: serde_json::Map<String, Value> = request
        .headers()
        .iter()
        .map(|(n, v)| {
            (
                n.as_str().to_string(),
                Value::String(String::from_utf8_lossy(v.as_bytes()).into_owned()),
            )
        })
        .collect();
    state.seen.lock().unwrap().push(Seen {
        method: method.clone(),
        uri: uri.clone(),
        token,
        verdict,
    });
    axum::Json(
        json!({"id": 7, "name": "rex", "echo": {"method": method, "uri": uri, "headers": headers}}),
    )
    .into_response()
}

/// What an API does with an assertion (docs/identity.md): the key named by `kid` from the
/// JWKS fetched over HTTP, EdDSA only, `iss`, `aud` = its own origin, `exp` (no leeway: the
/// clocks are the same here), and the request it came with.
async fn verify(
    state: &VerifierState,
    token: &str,
    method: &str,
    host: &str,
    path: &str,
) -> Result<Value, String> {
    let jwks_url = state.jwks_url.lock().unwrap().clone();
    let issuer = state.issuer.lock().unwrap().clone();
    let response = reqwest::get(&jwks_url).await.map_err(|e| e.to_string())?;
    if response.status() != 200 {
        return Err(format!("JWKS answered {}", response.status()));
    }
    let jwks: JwkSet = response.json().await.map_err(|e| e.to_string())?;
    let header = jsonwebtoken::decode_header(token).map_err(|e| e.to_string())?;
    let kid = header.kid.ok_or("no kid")?;
    let jwk = jwks.find(&kid).ok_or(format!("unknown kid {kid}"))?;
    let key = DecodingKey::from_jwk(jwk).map_err(|e| e.to_string())?;
    let mut validation = Validation::new(Algorithm::EdDSA);
    validation.leeway = 0;
    validation.set_audience(&[format!("http://{host}")]);
    validation.set_issuer(&[issuer]);
    validation.set_required_spec_claims(&["exp", "iat", "iss", "aud", "jti"]);
    let claims = jsonwebtoken::decode::<Value>(token, &key, &validation)
        .map_err(|e| e.to_string())?
        .claims;
    if claims["htm"] != method {
        return Err(format!("htm {} for a {method}", claims["htm"]));
    }
    let htu = format!("http://{host}{path}");
    if claims["htu"] != htu.as_str() {
        return Err(format!("htu {} for {htu}", claims["htu"]));
    }
    let lifetime = claims["exp"].as_i64().unwrap_or(i64::MAX) - claims["iat"].as_i64().unwrap_or(0);
    if !(1..=60).contains(&lifetime) {
        return Err(format!("lives {lifetime} s"));
    }
    Ok(claims)
}

/// One apigate in-process, wired as `serve` (with `auth`) or `dev` (without) wire it, signing
/// with `keys` (the first signs).
struct Gate(Server);

impl Gate {
    async fn start(upstream: &str, keys: &[PathBuf], auth: Option<&Auth>) -> Gate {
        let mut engine = engine_args(&spec_path("petstore-3.0.json"), Some(upstream.into()))
            .build()
            .await
            .expect("engine builds");
        let (listener, addr) = Server::listen().await;
        let issuer = format!("http://{addr}");
        engine.identity = Some(Arc::new(
            Identity::new(HEADER, &issuer, keys).expect("the keys load"),
        ));
        let keys = match auth {
            Some(auth) => {
                engine.access = Access::Sessions;
                engine.auth = Some(auth.clone());
                KeyCheck::Database(auth.clone())
            }
            None => KeyCheck::Single(KEY.into()),
        };
        let options = HttpOptions::new(keys, "test");
        Gate(Server::serve(listener, engine, options, Default::default()))
    }

    fn base(&self) -> String {
        self.0.url("")
    }
}

fn new_key(dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(name);
    create_key_file(&path).expect("key written");
    path
}

fn get_pet(id: u64) -> Value {
    json!({"operationId": "getPetById", "pathParams": {"petId": id}})
}

/// Each user's calls reach the API as that user (`sub`, tenant, org, roles, session id), the
/// agent's key as the actor, and each `jti` is the audit row's call id.
#[tokio::test]
async fn serve_each_user_is_the_subject_and_the_key_the_actor() {
    let db = TestDb::new().await;
    let auth = Auth::new(
        db.store.clone(),
        AuthConfig {
            session_rate: RateLimit::OFF,
            ..AuthConfig::default()
        },
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let key_file = new_key(dir.path(), "signing.pem");
    let upstream = Verifier::start().await;
    let gate = Gate::start(&upstream.url(), &[key_file], Some(&auth)).await;
    upstream.trust(&gate.base());
    let agent = auth
        .create_key(NewKey {
            name: "support-bot".into(),
            features: vec!["apigate.*".into(), "pets.*".into()],
            ..NewKey::default()
        })
        .await
        .unwrap();
    auth.set_role("clerk", &["pets.read".into()]).await.unwrap();
    let mut sessions = Vec::new();
    for (user, tenant, org) in [("u-1", "acme", "sales"), ("u-2", "globex", "ops")] {
        sessions.push(
            auth.create_session(NewSession {
                user_id: user.into(),
                tenant_id: Some(tenant.into()),
                organization_id: Some(org.into()),
                roles: vec!["clerk".into()],
                features: vec!["apigate.*".into(), "pets.read".into()],
                ..NewSession::default()
            })
            .await
            .unwrap(),
        );
    }
    let mut results = Vec::new();
    for s in &sessions {
        let client = mcp_client(
            &format!("{}/mcp", gate.base()),
            &[("x-api-key", &agent.key), ("x-session-token", &s.token)],
        )
        .await;
        let out = execute_ok(&client, get_pet(7)).await;
        results.push(out.to_string());
        let out = execute_ok(
            &client,
            json!({"operationId": "findPetsByStatus", "query": {"status": ["sold"]}}),
        )
        .await;
        results.push(out.to_string());
        client.cancel().await.ok();
    }
    let seen = upstream.seen();
    assert_eq!(seen.len(), 4, "{seen:#?}");
    for (i, s) in seen.iter().enumerate() {
        let claims = s.verdict.as_ref().unwrap_or_else(|e| panic!("{s:?}: {e}"));
        let session = &sessions[i / 2];
        assert_eq!(claims["sub"], session.user_id.as_str());
        assert_eq!(claims["tenant"], session.tenant_id.as_deref().unwrap());
        assert_eq!(claims["org"], session.organization_id.as_deref().unwrap());
        assert_eq!(claims["roles"], json!(["clerk"]));
        assert_eq!(claims["sid"], session.id.to_string());
        assert_eq!(
            claims["act"],
            json!({"sub": agent.public_id, "name": "support-bot"})
        );
        // The features the call runs with: the key's ∩ the session's.
        assert!(
            claims["features"]
                .as_array()
                .unwrap()
                .contains(&json!("pets.read"))
        );
        // The session token is never in the assertion.
        assert!(!s.token.as_ref().unwrap().contains(&session.token));
        let token = s.token.as_ref().unwrap();
        let payload = token.split('.').nth(1).unwrap();
        let decoded = String::from_utf8(URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
        assert!(
            !decoded.contains(&session.token),
            "the session token is in the assertion"
        );
    }
    assert_eq!(seen[1].method, "GET");
    assert!(seen[1].uri.contains("status=sold"), "{}", seen[1].uri);
    assert_eq!(seen[1].verdict.as_ref().unwrap()["op"], "findPetsByStatus");
    // The echoed assertion is scrubbed from every result.
    for (r, s) in results.iter().zip(&seen) {
        // The upstream did echo the header (so the check below means something).
        assert!(r.contains(HEADER), "no echo: {r}");
        assert!(
            !r.contains(s.token.as_ref().unwrap()),
            "assertion in a result: {r}"
        );
        let signature = s.token.as_ref().unwrap().rsplit('.').next().unwrap();
        assert!(
            !r.contains(signature),
            "assertion signature in a result: {r}"
        );
    }
    // Each jti is the call id of the call's audit row.
    assert_eq!(
        auth.drain_audit(std::time::Duration::from_secs(10)).await,
        0
    );
    let pool = sqlx::PgPool::connect(&db.url).await.unwrap();
    let rows = sqlx::query(
        "SELECT call_id::text AS id, user_id FROM audit_log WHERE tool = 'api_execute'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    pool.close().await;
    let audited: HashSet<(String, String)> = rows
        .iter()
        .map(|r| (r.get::<String, _>("id"), r.get::<String, _>("user_id")))
        .collect();
    for s in &seen {
        let c = s.verdict.as_ref().unwrap();
        let pair = (
            c["jti"].as_str().unwrap().to_string(),
            c["sub"].as_str().unwrap().to_string(),
        );
        assert!(
            audited.contains(&pair),
            "no audit row {pair:?} in {audited:?}"
        );
    }
}

/// Rotation: with keys [old, new] both are published and the old signs; with [new, old] the
/// new signs and tokens of either verify; a token signed with a key not in the JWKS, or with
/// a changed claim, does not.
#[tokio::test]
async fn rotation_publishes_both_and_tampering_fails() {
    let dir = tempfile::tempdir().unwrap();
    let old = new_key(dir.path(), "old.pem");
    let new = new_key(dir.path(), "new.pem");
    let upstream = Verifier::start().await;

    // Step 1: the new key published second.
    let gate = Gate::start(&upstream.url(), &[old.clone(), new.clone()], None).await;
    upstream.trust(&gate.base());
    let jwks: Value =
        crate::support::get_json(format!("{}/.well-known/jwks.json", gate.base())).await;
    let kids: Vec<&str> = crate::support::strings(&jwks["keys"], "kid");
    assert_eq!(kids.len(), 2);
    assert!(
        jwks["keys"]
            .as_array()
            .unwrap()
            .iter()
            .all(|k| k.get("d").is_none()),
        "a private key is published"
    );
    let client = mcp_client(&format!("{}/mcp", gate.base()), &[("x-api-key", KEY)]).await;
    execute_ok(&client, get_pet(1)).await;
    client.cancel().await.ok();
    let first = upstream.seen().pop().unwrap();
    let old_token = first.token.clone().unwrap();
    let claims = first.verdict.unwrap();
    assert_eq!(
        jsonwebtoken::decode_header(&old_token)
            .unwrap()
            .kid
            .as_deref(),
        Some(kids[0])
    );
    // Dev mode: no user, the dev key acts on its own.
    assert!(claims.get("sub").is_none(), "{claims}");
    assert_eq!(claims["act"], json!({"sub": "dev", "name": "dev"}));
    drop(gate);

    // Step 2: the new key signs; the old is still published.
    let gate = Gate::start(&upstream.url(), &[new.clone(), old.clone()], None).await;
    upstream.trust(&gate.base());
    let client = mcp_client(&format!("{}/mcp", gate.base()), &[("x-api-key", KEY)]).await;
    execute_ok(&client, get_pet(2)).await;
    client.cancel().await.ok();
    let second = upstream.seen().pop().unwrap();
    assert!(second.verdict.is_ok(), "{second:?}");
    let new_token = second.token.clone().unwrap();
    assert_eq!(
        jsonwebtoken::decode_header(&new_token)
            .unwrap()
            .kid
            .as_deref(),
        Some(kids[1])
    );

    // Step 3: the old key removed: its tokens no longer verify, the new key's do.
    let gate3 = Gate::start(&upstream.url(), std::slice::from_ref(&new), None).await;
    // The verifier still expects step 2's issuer for the token it holds.
    *upstream.state.jwks_url.lock().unwrap() = format!("{}/.well-known/jwks.json", gate3.base());
    let e = upstream
        .verify(&old_token, "GET", "/v2/pet/1")
        .await
        .unwrap_err();
    assert!(e.contains("unknown kid"), "{e}");

    // Negative controls on a token that verifies: a changed claim, a changed method or
    // path, a token from a key nobody published.
    *upstream.state.jwks_url.lock().unwrap() = format!("{}/.well-known/jwks.json", gate.base());
    let path = second.uri.split('?').next().unwrap().to_string();
    upstream
        .verify(&new_token, "GET", &path)
        .await
        .expect("the untouched token verifies");
    let mut parts: Vec<String> = new_token.split('.').map(str::to_string).collect();
    let mut payload: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(&parts[1]).unwrap()).unwrap();
    payload["sub"] = json!("admin");
    parts[1] = URL_SAFE_NO_PAD.encode(payload.to_string());
    let tampered = parts.join(".");
    let e = upstream.verify(&tampered, "GET", &path).await.unwrap_err();
    assert!(e.contains("InvalidSignature"), "{e}");
    let e = upstream
        .verify(&new_token, "DELETE", &path)
        .await
        .unwrap_err();
    assert!(e.contains("htm"), "{e}");
    let e = upstream
        .verify(&new_token, "GET", "/v2/pet/999")
        .await
        .unwrap_err();
    assert!(e.contains("htu"), "{e}");
    let stranger = new_key(dir.path(), "stranger.pem");
    let rogue = Identity::new(HEADER, &gate.base(), &[stranger]).unwrap();
    let url = url::Url::parse(&format!("{}{path}", upstream.url())).unwrap();
    let forged = rogue
        .assertion(
            &apigate::auth::Principal::dev(),
            &apigate::auth::identity::CallFacts {
                call_id: "forged",
                operation: "getPetById",
                method: "GET",
                url: &url,
            },
        )
        .unwrap();
    let e = upstream.verify(&forged, "GET", &path).await.unwrap_err();
    assert!(e.contains("unknown kid"), "{e}");
}

/// A dry run says an assertion will be added and carries none; nothing reaches the API.
/// Without `--identity-header` the JWKS path answers 404 and other `.well-known` paths keep
/// their hint.
#[tokio::test]
async fn dry_runs_carry_no_assertion_and_jwks_is_public() {
    let dir = tempfile::tempdir().unwrap();
    let key = new_key(dir.path(), "k.pem");
    let upstream = Verifier::start().await;
    let gate = Gate::start(&upstream.url(), &[key], None).await;
    upstream.trust(&gate.base());
    let client = mcp_client(&format!("{}/mcp", gate.base()), &[("x-api-key", KEY)]).await;
    let mut args = get_pet(3);
    args["dryRun"] = json!(true);
    let out = execute_ok(&client, args).await;
    assert_eq!(
        out["request"]["headers"][HEADER], DRY_RUN_PLACEHOLDER,
        "{out}"
    );
    assert!(!out.to_string().contains("eyJ"), "{out}");
    assert!(upstream.seen().is_empty(), "a dry run reached the API");
    client.cancel().await.ok();

    // The JWKS needs no key, and says how long it may be cached.
    let resp = reqwest::get(format!("{}/.well-known/jwks.json", gate.base()))
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["cache-control"], "public, max-age=300");
    let other = reqwest::get(format!(
        "{}/.well-known/oauth-authorization-server",
        gate.base()
    ))
    .await
    .unwrap();
    assert_eq!(other.status(), 404);
    assert!(other.text().await.unwrap().contains("does not use OAuth"));
}

/// The binary: `apigate signing-key create`, then `apigate dev --identity-header
/// --signing-key` with debug logs: the issuer defaults to the server's URL, the API verifies
/// the assertion, and no assertion appears in its logs.
#[tokio::test]
async fn the_binary_signs_and_never_logs_an_assertion() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("signing.pem");
    let made = std::process::Command::new(env!("CARGO_BIN_EXE_apigate"))
        .args([
            "signing-key",
            "create",
            "--out",
            key.to_str().unwrap(),
            "--json",
        ])
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let printed: Value = serde_json::from_slice(&made.stdout).unwrap();
    assert!(
        printed.get("jwk").and_then(|j| j.get("d")).is_none(),
        "the private key was printed"
    );
    let again = std::process::Command::new(env!("CARGO_BIN_EXE_apigate"))
        .args(["signing-key", "create", "--out", key.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("never overwrites"));

    let upstream = Verifier::start().await;
    let spec = spec_path("petstore-3.0.json");
    let url = upstream.url();
    let identity = flags(&[
        ("--identity-header", "X-Apigate-Identity"),
        ("--signing-key", key.to_str().unwrap()),
    ]);
    let (mut dev, mcp_url) =
        spawn_dev(&spec, Some(&url), &identity, &[("RUST_LOG", "debug")]).await;
    let base = mcp_url.trim_end_matches("/mcp").to_string();
    upstream.trust(&base);
    let client = mcp_client(&mcp_url, &[("x-api-key", KEY)]).await;
    for id in [1, 2, 3] {
        execute_ok(&client, get_pet(id)).await;
    }
    client.cancel().await.ok();
    let seen = upstream.seen();
    assert_eq!(seen.len(), 3);
    for s in &seen {
        let claims = s
            .verdict
            .as_ref()
            .unwrap_or_else(|e| panic!("{e}\n{}", dev.log()));
        assert_eq!(claims["iss"], base.as_str());
        assert_eq!(
            jsonwebtoken::decode_header(s.token.as_ref().unwrap())
                .unwrap()
                .kid
                .as_deref(),
            printed["kid"].as_str()
        );
    }
    assert!(dev.terminate().await);
    let log = dev.stderr();
    for s in &seen {
        let token = s.token.as_ref().unwrap();
        let signature = token.rsplit('.').next().unwrap();
        assert!(!log.contains(signature), "an assertion in the log:\n{log}");
    }
    assert!(
        !log.contains("eyJ"),
        "something JWT-like in the log:\n{log}"
    );
}
