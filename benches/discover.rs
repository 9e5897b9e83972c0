//! What one `api_discover` costs, in parts (issue 29): `Index::search_total` alone, then
//! `Engine::call` (argument checks, the caller's visibility filter, the search, the result
//! built and serialized as the MCP answer's text) on Petstore and GitHub, with the queries
//! `scripts/cpu.sh` sends over HTTP. `cargo bench --bench discover`.

use std::hint::black_box;
use std::sync::Arc;

use apigate::cli::{Cli, Command};
use apigate::index::{Index, Query};
use apigate::spec::Spec;
use apigate::tools::{Caller, Engine, Tool};
use clap::Parser;
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Map, Value, json};

const CASES: [(&str, &str, &str); 2] = [
    ("petstore", "openapi/petstore.json", "find a pet by its id"),
    (
        "github",
        "tests/data/specs/github-rest-3.0.json",
        "list open issues in a repository",
    ),
];

/// The engine `apigate dev` builds for `spec`, words only, from the command line as a user
/// writes it (so with the binary's own defaults).
fn engine(rt: &tokio::runtime::Runtime, spec: &str) -> Engine {
    let argv = [
        "apigate",
        "dev",
        "--spec",
        spec,
        "--upstream",
        "http://127.0.0.1:9",
        "--ranker",
        "lexical",
    ];
    let Command::Dev(dev) = Cli::try_parse_from(argv)
        .expect("the arguments parse")
        .command
    else {
        unreachable!("`apigate dev` parses as Dev")
    };
    rt.block_on(dev.engine.build()).expect("the engine builds")
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    for (name, file, query) in CASES {
        let path = format!("{}/{file}", env!("CARGO_MANIFEST_DIR"));
        let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
        let spec = Spec::from_bytes(&bytes, file).expect("the spec parses");
        let index = Index::build(&[&spec]).expect("the index builds");
        c.bench_function(&format!("discover/{name}/search"), |b| {
            b.iter(|| index.search_total(black_box(&Query::text(query, 10))))
        });
        let engine = Arc::new(engine(&rt, &path));
        let caller = Caller::default();
        let tool = Ok(Tool::Discover);
        let args: Map<String, Value> = match json!({"query": query, "limit": 10}) {
            Value::Object(m) => m,
            _ => unreachable!(),
        };
        c.bench_function(&format!("discover/{name}/engine_call"), |b| {
            b.iter(|| {
                let outcome = rt.block_on(engine.call(&caller, &tool, black_box(args.clone())));
                let result = apigate::mcp::call_tool_result(&tool, outcome);
                serde_json::to_vec(&result).expect("the result serializes")
            })
        });
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
