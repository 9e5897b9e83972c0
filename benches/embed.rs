//! Semantic-ranking benchmarks with the real all-MiniLM-L6-v2 model on the GitHub spec:
//! embedding one query (uncached and cached), a batch of 32 operation texts (index-time
//! throughput), and a hybrid `search` given the query vector. `cargo bench --bench embed`;
//! the model folder comes from `APIGATE_EMBEDDING_MODEL` (default /var/tmp/apigate-model,
//! where `scripts/fetch-model.sh` puts it), the specs from `APIGATE_SPECS`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use apigate::index::background::{self, VectorDirs};
use apigate::index::{Embedder, Index, Query};
use apigate::spec::Spec;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn bench(c: &mut Criterion) {
    let model = std::env::var("APIGATE_EMBEDDING_MODEL")
        .unwrap_or_else(|_| "/var/tmp/apigate-model".into());
    let embedder = Arc::new(
        Embedder::load(std::path::Path::new(&model))
            .unwrap_or_else(|e| panic!("{e} (run scripts/fetch-model.sh)")),
    );
    let dir = std::env::var("APIGATE_SPECS")
        .unwrap_or_else(|_| concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/specs").into());
    let bytes = std::fs::read(format!("{dir}/github-rest-3.0.json")).expect("the GitHub spec");
    let spec = Spec::from_bytes(&bytes, "github-rest-3.0.json").unwrap();
    let index = Index::build(&[&spec]).unwrap();

    let query = "close an issue someone opened on my repo";
    let mut g = c.benchmark_group("embed");
    g.sample_size(30).measurement_time(Duration::from_secs(10));
    g.bench_function("query uncached", |b| {
        b.iter(|| embedder.embed_batch(black_box(&[query])).unwrap())
    });
    g.bench_function("query cached", |b| {
        b.iter(|| embedder.embed_query(black_box(query)).unwrap())
    });
    // 32 operation texts as the index embeds them: sorted by length, one padded batch.
    let mut texts: Vec<&str> = index.embedding_texts().iter().map(String::as_str).collect();
    texts.sort_by_key(|t| t.len());
    let batch: Vec<&str> = texts
        .iter()
        .step_by(texts.len() / 32)
        .take(32)
        .copied()
        .collect();
    g.throughput(Throughput::Elements(batch.len() as u64));
    g.sample_size(10);
    g.bench_function("batch of 32 operations", |b| {
        b.iter(|| embedder.embed_batch(black_box(&batch)).unwrap())
    });
    g.finish();

    let cache = std::env::temp_dir().join("apigate-bench-vectors");
    let dirs = VectorDirs {
        prebuilt: None,
        cache: Some(cache),
    };
    background::enable_now(&index, &embedder, &dirs, &|_| {}).unwrap();
    let vector = embedder.embed_query(query).unwrap();
    c.bench_function("github/hybrid query (vector given)", |b| {
        b.iter(|| {
            index.search(black_box(&Query {
                vector: Some(&vector),
                ..Query::text(query, 10)
            }))
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
