//! What a session's own upstream credentials add to a call (issue 18 §1):
//! `open` — decrypting the sealed headers (AES-256-GCM), once per session-cache fill (at most
//! once a minute per session and instance); `per_call` — putting them into the call's
//! `CallCredentials` (every call); `scrubber` — extending the response scrubber with them
//! (every call, inside `Upstream::send`). And §4: `scheme_per_call` — reading an operation's
//! security requirement and adding the `--upstream-credential` it needs (every call).
//! `cargo bench --bench session_credentials`.

use std::hint::black_box;

use apigate::auth::sealed::SecretKeys;
use apigate::auth::session_upstream::UpstreamInput;
use apigate::upstream::{CallCredentials, Secrets};
use criterion::{Criterion, criterion_group, criterion_main};

fn bench(c: &mut Criterion) {
    let keys = SecretKeys::from_bytes(&[5u8; 32], Some(&[6u8; 32])).unwrap();
    let session = uuid::Uuid::new_v4();
    let up = UpstreamInput {
        api: Some("github".into()),
        headers: vec![
            (
                "Authorization".into(),
                "Bearer eyJhbGciOiJIUzI1NiJ9.user-token-of-some-length".into(),
            ),
            ("X-Tenant-Key".into(), "tenant-key-0123456789".into()),
        ],
    }
    .check()
    .unwrap();
    let sealed = up.seal(&keys, session).unwrap();
    let configured = Secrets::new(["Bearer server-token-0123456789"]).unwrap();

    let mut g = c.benchmark_group("session_credentials");
    g.bench_function("open", |b| {
        b.iter(|| {
            apigate::auth::session_upstream::SessionUpstream::open(
                &keys,
                black_box(session),
                &sealed,
            )
            .unwrap()
        })
    });
    g.bench_function("per_call", |b| {
        b.iter(|| {
            let mut call = CallCredentials::default();
            let to = apigate::auth::session_upstream::CallApi {
                name: "github",
                only: false,
            };
            for (n, v) in black_box(&up).for_call(to) {
                call.set_header(
                    n.clone(),
                    v.clone(),
                    apigate::types::CredentialSource::Session,
                );
            }
            call
        })
    });
    g.bench_function("scrubber", |b| {
        b.iter(|| {
            configured
                .with(
                    black_box(&up)
                        .all_headers()
                        .filter_map(|(_, v)| v.to_str().ok()),
                )
                .unwrap()
        })
    });
    let spec = apigate::spec::Spec::from_bytes(
        &std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/specs/petstore-3.0.json"
        ))
        .unwrap(),
        "petstore-3.0.json",
    )
    .unwrap();
    let schemes = apigate::upstream::SchemeCredentials::new(vec![
        apigate::upstream::SchemeCredential::parse(
            "api_key=special-key-0123456789",
            &spec.security_schemes,
        )
        .unwrap(),
    ]);
    let op = spec.get("getPetById").unwrap();
    g.bench_function("scheme_per_call", |b| {
        b.iter(|| {
            let mut call = CallCredentials::default();
            if let Some(req) =
                apigate::spec::security_alternatives(black_box(&op.security).as_ref())
            {
                schemes.apply(&req, &mut call);
            }
            assert!(!call.is_empty());
            call
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
