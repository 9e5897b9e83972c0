//! Query-embedding latency with the real model, as percentiles (criterion reports means):
//! every dev-set query embedded uncached several times, then served from the query cache,
//! and a hybrid search on the GitHub index given the vector.
//! `cargo run --release --example embed_latency -- [MODEL_DIR] [SPECS_DIR] [QUERIES]`
//! (defaults /var/tmp/apigate-model, tests/data/specs, tests/data/queries/dev.jsonl).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use apigate::cli::eval;
use apigate::index::background::{self, VectorDirs};
use apigate::index::{Embedder, Index, Query};
use apigate::spec::Spec;

fn percentiles(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let at = |p: f64| samples[((samples.len() - 1) as f64 * p).round() as usize];
    println!(
        "{name:<34} n={:<5} p50 {:>8.3} ms  p99 {:>8.3} ms  max {:>8.3} ms",
        samples.len(),
        at(0.5).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
        at(1.0).as_secs_f64() * 1e3
    );
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize, d: &str| PathBuf::from(args.get(i).map_or(d, String::as_str));
    let model = arg(0, "/var/tmp/apigate-model");
    let specs = arg(1, concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/specs"));
    let queries = arg(
        2,
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/queries/dev.jsonl"),
    );

    let started = Instant::now();
    let embedder = std::sync::Arc::new(Embedder::load(&model)?);
    println!(
        "model load: {:.0} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
    let queries: Vec<String> = eval::read_queries(&queries)
        .await?
        .into_iter()
        .map(|q| q.query)
        .collect();

    // The first forward pass pays one-time costs (allocations, thread pool start).
    let started = Instant::now();
    embedder.embed_batch(&["warm up"])?;
    println!(
        "first query: {:.1} ms",
        started.elapsed().as_secs_f64() * 1e3
    );

    let mut uncached = Vec::new();
    for _ in 0..5 {
        for q in &queries {
            let t = Instant::now();
            embedder.embed_batch(&[q.as_str()])?;
            uncached.push(t.elapsed());
        }
    }
    percentiles("query embedding, uncached", uncached);

    for q in &queries {
        embedder.embed_query(q)?;
    }
    let mut cached = Vec::new();
    for _ in 0..20 {
        for q in &queries {
            let t = Instant::now();
            embedder.embed_query(q)?;
            cached.push(t.elapsed());
        }
    }
    percentiles("query embedding, cached", cached);

    let spec = Spec::load(&specs.join("github-rest-3.0.json").to_string_lossy()).await?;
    let index = Index::build(&[&spec])?;
    let lexical: Vec<Duration> = (0..5)
        .flat_map(|_| &queries)
        .map(|q| {
            let t = Instant::now();
            std::hint::black_box(index.search(&Query::text(q, 10)));
            t.elapsed()
        })
        .collect();
    percentiles("GitHub search, lexical", lexical);
    let dirs = VectorDirs {
        prebuilt: None,
        cache: Some(std::env::temp_dir().join("apigate-bench-vectors")),
    };
    background::enable_now(&index, &embedder, &dirs, &|_| {})?;
    let hybrid: Vec<Duration> = (0..5)
        .flat_map(|_| &queries)
        .map(|q| {
            let v = embedder.embed_query(q).expect("cached");
            let t = Instant::now();
            std::hint::black_box(index.search(&Query {
                vector: Some(&v),
                ..Query::text(q, 10)
            }));
            t.elapsed()
        })
        .collect();
    percentiles("GitHub search, hybrid (vector given)", hybrid);
    Ok(())
}
