//! What validating a bearer token costs a request, the issuer's keys cached (the steady
//! state): `ResourceServer::verify` on a token signed ES256, EdDSA and RS256 (2048-bit), as
//! `http::guard` runs it on every request of a signed-in person. Compare with the server key's
//! warm check (`cargo test --release --test it -- --ignored --nocapture auth_cost`).
//! `cargo bench --bench oauth`. The RS256 key comes from `openssl` (skipped without it).

use std::hint::black_box;

use apigate::auth::oauth::{OAuthSettings, ResourceServer};
use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, Ed25519KeyPair, KeyPair,
};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use criterion::{Criterion, criterion_group, criterion_main};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

/// A signing key and its public JWK.
struct Key {
    alg: Algorithm,
    kid: &'static str,
    encoding: EncodingKey,
    jwk: Value,
}

fn keys() -> Vec<Key> {
    let rng = aws_lc_rs::rand::SystemRandom::new();
    let ec = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).expect("an EC key");
    let ec_der = ec.to_pkcs8v1().expect("its PKCS#8");
    let point = ec.public_key().as_ref().to_vec();
    let ed_der = Ed25519KeyPair::generate_pkcs8v1(&rng).expect("an Ed25519 key");
    let ed = Ed25519KeyPair::from_pkcs8(ed_der.as_ref()).expect("it reads back");
    let mut keys = vec![
        Key {
            alg: Algorithm::ES256,
            kid: "ec",
            encoding: EncodingKey::from_ec_der(ec_der.as_ref()),
            jwk: json!({"kty": "EC", "crv": "P-256", "kid": "ec", "alg": "ES256", "use": "sig",
                "x": B64.encode(&point[1..33]), "y": B64.encode(&point[33..65])}),
        },
        Key {
            alg: Algorithm::EdDSA,
            kid: "ed",
            encoding: EncodingKey::from_ed_der(ed_der.as_ref()),
            jwk: json!({"kty": "OKP", "crv": "Ed25519", "kid": "ed", "alg": "EdDSA", "use": "sig",
                "x": B64.encode(ed.public_key().as_ref())}),
        },
    ];
    if let Some(rsa) = rsa_key() {
        keys.push(rsa);
    }
    keys
}

/// A 2048-bit RSA key from `openssl`: PKCS#1 DER for signing, n and e for the JWK.
fn rsa_key() -> Option<Key> {
    let dir = tempfile::tempdir().ok()?;
    let pem = dir.path().join("rsa.pem");
    let run = |args: &[&str]| {
        std::process::Command::new("openssl")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| o.stdout)
    };
    let path = pem.to_str()?;
    run(&["genrsa", "-out", path, "2048"])?;
    let der = run(&["rsa", "-in", path, "-outform", "DER", "-traditional"])?;
    let modulus = String::from_utf8(run(&["rsa", "-in", path, "-noout", "-modulus"])?).ok()?;
    let hex = modulus.trim().strip_prefix("Modulus=")?;
    let n: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16))
        .collect::<Result<_, _>>()
        .ok()?;
    Some(Key {
        alg: Algorithm::RS256,
        kid: "rsa",
        encoding: EncodingKey::from_rsa_der(&der),
        jwk: json!({"kty": "RSA", "kid": "rsa", "alg": "RS256", "use": "sig",
            "n": B64.encode(&n), "e": "AQAB"}),
    })
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let keys = keys();
    let jwks = json!({"keys": keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>()});
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("a port");
    let issuer = format!("http://{}", listener.local_addr().expect("its address"));
    let metadata = json!({"issuer": issuer, "jwks_uri": format!("{issuer}/jwks")});
    let app = axum::Router::new()
        .route(
            "/.well-known/oauth-authorization-server",
            axum::routing::get(move || async move { axum::Json(metadata) }),
        )
        .route(
            "/jwks",
            axum::routing::get(move || async move { axum::Json(jwks) }),
        );
    runtime.spawn(async move { axum::serve(listener, app).await });
    let audience = "https://apigate.example/mcp";
    let server = runtime
        .block_on(ResourceServer::start(OAuthSettings {
            issuers: vec![(issuer.clone(), None)],
            audience: audience.into(),
            scopes: OAuthSettings::default_scopes(),
            tenant_claim: "tenant".into(),
            organization_claim: "org".into(),
            roles_claim: "roles".into(),
            introspection: None,
        }))
        .expect("the resource server starts");
    let now = chrono::Utc::now().timestamp();
    let claims = json!({"iss": issuer, "aud": audience, "sub": "alice", "client_id": "claude-code",
        "scope": "openid apigate:read apigate:write", "tenant": "acme", "org": "acme-eng",
        "roles": ["support"], "iat": now, "exp": now + 3600});
    for key in &keys {
        let mut header = Header::new(key.alg);
        header.kid = Some(key.kid.into());
        let token = jsonwebtoken::encode(&header, &claims, &key.encoding).expect("a token");
        runtime
            .block_on(server.verify(&token))
            .expect("the token verifies");
        c.bench_function(&format!("oauth/verify/{:?}", key.alg), |b| {
            b.iter(|| {
                runtime
                    .block_on(server.verify(black_box(&token)))
                    .expect("verifies")
            })
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
