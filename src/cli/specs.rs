//! `apigate check`, `search`, `schema` and `eval`: the spec and index, from the command line.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use serde_json::{Value, json};

use crate::index::{Index, Query};
use crate::spec::Spec;

#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// OpenAPI documents (paths or http(s) URLs).
    #[arg(required = true)]
    pub specs: Vec<String>,
    /// One JSON array instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, clap::Args)]
pub struct SearchArgs {
    /// The OpenAPI document (path or URL).
    #[arg(long)]
    pub spec: String,
    /// Only operations with this HTTP method.
    #[arg(long)]
    pub method: Option<String>,
    /// Only operations with this tag.
    #[arg(long)]
    pub tag: Option<String>,
    /// How many results.
    #[arg(long, default_value_t = 10)]
    pub limit: usize,
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub ranking: super::index::RankingArgs,
    /// What you want to do, in plain words.
    #[arg(required = true, num_args = 1..)]
    pub query: Vec<String>,
}

#[derive(Debug, clap::Args)]
pub struct SchemaArgs {
    /// The OpenAPI document (path or URL).
    #[arg(long)]
    pub spec: String,
    /// An operationId, or "METHOD /path".
    pub operation: String,
}

#[derive(Debug, clap::Args)]
pub struct EvalArgs {
    /// Folder holding the spec files the queries name.
    #[arg(long)]
    pub specs_dir: PathBuf,
    /// Query file (JSON lines: id, spec, query, expected, kind).
    #[arg(long)]
    pub queries: PathBuf,
    /// Rank every query against one index holding all specs' operations.
    #[arg(long)]
    pub pooled: bool,
    /// Which ranker to measure; dense and hybrid need --embedding-model.
    #[arg(long, default_value = "lexical", value_parser = ["lexical", "dense", "hybrid"])]
    pub ranker: String,
    /// Weight of the dense score in hybrid ranking (default: the production value).
    #[arg(long)]
    pub dense_weight: Option<f32>,
    #[command(flatten)]
    pub ranking: super::index::RankingArgs,
    #[arg(long)]
    pub json: bool,
}

pub async fn check(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let mut rows = Vec::new();
    for file in &args.specs {
        let row = match Spec::load(file).await {
            Ok(spec) => json!({"file": file, "ok": true, "version": spec.version,
                "operations": spec.operations.len(), "warnings": spec.warnings}),
            Err(e) => json!({"file": file, "ok": false, "version": null, "operations": 0,
                "warnings": [], "error": e.to_string()}),
        };
        rows.push(row);
    }
    let all_ok = rows.iter().all(|r| r["ok"] == true);
    if args.json {
        println!("{}", Value::Array(rows));
    } else {
        for r in &rows {
            let warnings = r["warnings"].as_array().map_or(0, Vec::len);
            if r["ok"] == true {
                println!(
                    "ok     {:<8} {:>5} operations  {:>3} warnings  {}",
                    r["version"].as_str().unwrap_or_default(),
                    r["operations"].as_u64().unwrap_or_default(),
                    warnings,
                    r["file"].as_str().unwrap_or_default()
                );
                for w in r["warnings"].as_array().into_iter().flatten() {
                    println!("         warning: {}", w.as_str().unwrap_or_default());
                }
            } else {
                println!("error  {}", r["error"].as_str().unwrap_or_default());
            }
        }
    }
    Ok(if all_ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

pub async fn search(args: SearchArgs) -> anyhow::Result<ExitCode> {
    let spec = Spec::load(&args.spec).await?;
    let index = Index::build(&[&spec]).context("building the index")?;
    let text = args.query.join(" ");
    let method = args.method.map(|m| m.to_ascii_uppercase());
    let mut vector = None;
    if let Some(embedder) = args.ranking.embedder()? {
        let dirs = args.ranking.dirs();
        let bar = super::index::progress_bar(index.len());
        tokio::task::block_in_place(|| {
            crate::index::background::enable_now(&index, &embedder, &dirs, &|done| {
                bar.set_position(done as u64)
            })
        })?;
        bar.finish_and_clear();
        vector = index.query_vector(&text);
    }
    let (hits, total) = index.search_total(&Query {
        text: &text,
        method: method.as_deref(),
        tag: args.tag.as_deref(),
        limit: args.limit.clamp(1, 1000),
        allowed: None,
        vector: vector.as_deref(),
    });
    let results: Vec<Value> = hits
        .iter()
        .filter_map(|h| spec.operations.get(h.op).map(|op| (op, h.score)))
        .map(|(op, score)| {
            json!({"operationId": op.id, "method": op.method, "path": op.path,
                "summary": op.summary.clone().or_else(|| op.description.clone()).unwrap_or_default(),
                "tags": op.tags, "deprecated": op.deprecated, "score": score})
        })
        .collect();
    if args.json {
        println!("{}", json!({"results": results, "total": total}));
    } else {
        for (i, r) in results.iter().enumerate() {
            let summary: String = r["summary"]
                .as_str()
                .unwrap_or_default()
                .chars()
                .take(70)
                .collect();
            println!(
                "{:>2}. {:>6.2}  {:<7} {:<50}  {}",
                i + 1,
                r["score"].as_f64().unwrap_or_default(),
                r["method"].as_str().unwrap_or_default(),
                r["path"].as_str().unwrap_or_default(),
                summary
            );
            println!(
                "              {}",
                r["operationId"].as_str().unwrap_or_default()
            );
        }
        if results.is_empty() {
            println!("no operation matches");
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn schema(args: SchemaArgs) -> anyhow::Result<ExitCode> {
    let spec = Spec::load(&args.spec).await?;
    let wanted = args.operation.trim();
    let op = match spec.get(wanted) {
        Some(op) => op,
        None => {
            let (method, path) = wanted.split_once(' ').with_context(|| {
                format!("{wanted:?} is not an operationId of {}; give an operationId or \"METHOD /path\"", spec.source)
            })?;
            spec.find(method.trim(), path.trim())
                .map(|(op, _)| op)
                .with_context(|| format!("no operation {wanted:?} in {}", spec.source))?
        }
    };
    println!("{}", serde_json::to_string_pretty(&spec.describe(op))?);
    Ok(ExitCode::SUCCESS)
}

pub async fn eval(args: EvalArgs) -> anyhow::Result<ExitCode> {
    let mut options = crate::index::eval::Options::lexical(args.pooled);
    options.ranker = args.ranker.parse().map_err(anyhow::Error::msg)?;
    if let Some(w) = args.dense_weight {
        options.tuning.dense_weight = w;
    }
    if options.ranker != crate::index::Ranker::Lexical {
        let embedder = args
            .ranking
            .embedder()?
            .context("--ranker dense|hybrid needs --embedding-model DIR")?;
        options.model = Some((embedder, args.ranking.dirs()));
        let bar = super::index::progress_bar(0);
        // One bar per index that has to be embedded (its vectors were not cached).
        options.progress = Some(std::sync::Arc::new(move |done, total| {
            if bar.is_finished() {
                bar.reset();
            }
            bar.set_length(total as u64);
            bar.set_position(done as u64);
            if done == total {
                bar.finish_and_clear();
            }
        }));
    }
    let report = crate::index::eval::run(&args.specs_dir, &args.queries, options).await?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", crate::index::eval::table(&report));
    }
    Ok(ExitCode::SUCCESS)
}
