//! The latency an identity assertion adds to an upstream call: building the claims and
//! signing them (EdDSA, jsonwebtoken over aws-lc-rs), as `tools::ops` does for every call
//! with `--identity-header`. Goal: well under 0.1 ms. `cargo bench --bench identity`.

use std::hint::black_box;

use apigate::auth::identity::{CallFacts, Identity, create_key_file};
use apigate::auth::{Features, Principal};
use criterion::{Criterion, criterion_group, criterion_main};

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("signing.pem");
    create_key_file(&path).expect("a key");
    let identity = Identity::new("X-Apigate-Identity", "https://apigate.example", &[path])
        .expect("the key loads");
    let who = Principal {
        user_id: Some("u-42".into()),
        tenant_id: Some("acme".into()),
        organization_id: Some("sales".into()),
        session_id: Some(uuid::Uuid::new_v4()),
        key_label: "key:1a2b3c4d".into(),
        key_name: "support-bot".into(),
        roles: vec!["clerk".into()],
        features: Features::new(["apigate.*", "pets.read", "store.read"]),
        ..Principal::dev()
    };
    let url = url::Url::parse("https://api.example.com/v2/pet/7?fields=name").expect("a URL");
    let call_id = uuid::Uuid::new_v4().to_string();
    c.bench_function("identity/assertion", |b| {
        b.iter(|| {
            identity
                .header_value(
                    black_box(&who),
                    &CallFacts {
                        call_id: &call_id,
                        operation: "getPetById",
                        method: "GET",
                        url: black_box(&url),
                    },
                )
                .expect("signed")
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
