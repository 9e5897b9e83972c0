//! Index benchmarks on the GitHub spec: parse + build (goal < 1 s), build alone, one query
//! (goal < 1 ms). `cargo bench --bench index`; the spec directory can be overridden with
//! `APIGATE_SPECS`.

use std::hint::black_box;
use std::time::Duration;

use apigate::index::{Index, Query};
use apigate::spec::Spec;
use criterion::{Criterion, criterion_group, criterion_main};

fn github_bytes() -> Vec<u8> {
    let dir = std::env::var("APIGATE_SPECS")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/specs").into());
    let path = format!("{dir}/github-rest-3.0.json");
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"))
}

fn bench(c: &mut Criterion) {
    let bytes = github_bytes();
    let mut g = c.benchmark_group("github");
    g.sample_size(10).measurement_time(Duration::from_secs(10));
    g.bench_function("parse+index", |b| {
        b.iter(|| {
            let spec = Spec::from_bytes(black_box(&bytes), "github-rest-3.0.json").unwrap();
            Index::build(&[&spec]).unwrap()
        })
    });
    let spec = Spec::from_bytes(&bytes, "github-rest-3.0.json").unwrap();
    g.bench_function("index", |b| {
        b.iter(|| Index::build(&[black_box(&spec)]).unwrap())
    });
    g.finish();

    let index = Index::build(&[&spec]).unwrap();
    c.bench_function("github/query", |b| {
        b.iter(|| {
            index.search(black_box(&Query::text(
                "close an issue someone opened on my repo",
                10,
            )))
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
