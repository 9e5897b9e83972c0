//! Runs the retrieval evaluation on the curated specs until `apigate eval` exists:
//! `cargo run --release --example eval -- [--pooled] [--json] [--ablate] [--ranks]
//! [--specs DIR] [--queries FILE] [--ranker lexical|dense|hybrid --model DIR]
//! [--base knob=value,…] [--try knob=value,… …]`.

use std::path::PathBuf;

use std::sync::Arc;

use apigate::cli::eval;
use apigate::index::background::VectorDirs;
use apigate::index::{Embedder, Ranker, Tuning};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |f: &str| args.iter().any(|a| a == f);
    let value = |f: &str, d: &str| {
        args.iter()
            .position(|a| a == f)
            .and_then(|i| args.get(i + 1))
            .cloned()
            .unwrap_or_else(|| d.to_string())
    };
    let specs = PathBuf::from(value(
        "--specs",
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/specs"),
    ));
    let queries = PathBuf::from(value(
        "--queries",
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/queries/dev.jsonl"),
    ));
    let pooled = flag("--pooled");
    let ranker: Ranker = value("--ranker", "lexical")
        .parse()
        .map_err(anyhow::Error::msg)?;
    let model = match ranker {
        Ranker::Lexical => None,
        _ => {
            let dir = PathBuf::from(value("--model", "/var/tmp/apigate-model"));
            let dirs = VectorDirs {
                prebuilt: None,
                cache: Some(PathBuf::from(value("--cache", "/var/tmp/apigate-cache"))),
            };
            Some((Arc::new(Embedder::load(&dir)?), dirs))
        }
    };
    let options = |pooled: bool, tuning: Tuning| eval::Options {
        pooled,
        ranker,
        tuning,
        model: model.clone(),
        progress: None,
    };
    if flag("--time") {
        let path = specs.join("github-rest-3.0.json");
        let bytes = std::fs::read(&path)?;
        let t0 = std::time::Instant::now();
        let spec = apigate::spec::Spec::from_bytes(&bytes, "github")?;
        let t1 = std::time::Instant::now();
        let index = apigate::index::Index::build(&[&spec])?;
        let t2 = std::time::Instant::now();
        println!("parse {:?} index {:?}", t1 - t0, t2 - t1);
        let qs = eval::read_queries(&queries).await?;
        for (name, t) in [
            ("default", Tuning::default()),
            (
                "no coord",
                Tuning {
                    coord: 0.0,
                    ..Tuning::default()
                },
            ),
            (
                "no synonyms",
                Tuning {
                    synonyms: false,
                    ..Tuning::default()
                },
            ),
            (
                "all pairs",
                Tuning {
                    common_df: 1.0,
                    ..Tuning::default()
                },
            ),
            ("default again", Tuning::default()),
        ] {
            let index = apigate::index::Index::build_with(&[&spec], t)?;
            let start = std::time::Instant::now();
            let mut n = 0;
            for _ in 0..20 {
                for q in &qs {
                    std::hint::black_box(index.search(&apigate::index::Query::text(&q.query, 10)));
                    n += 1;
                }
            }
            println!("{name}: {:?} per query", start.elapsed() / n);
        }
        drop(index);
        return Ok(());
    }
    if flag("--sweep") {
        return sweep(&args, &specs, ranker, model.clone(), flag("--pooled")).await;
    }
    if flag("--ablate") {
        let queries_list = eval::read_queries(&queries).await?;
        let mut files: Vec<String> = std::fs::read_dir(&specs)?
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|f| f.ends_with(".json") || f.ends_with(".yaml"))
            .collect();
        files.sort();
        let mut loaded = Vec::new();
        for f in &files {
            loaded.push(apigate::spec::Spec::load(&specs.join(f).to_string_lossy()).await?);
        }
        let base = knobs(Tuning::default(), &value("--base", ""))?;
        let mut variants: Vec<(String, Tuning)> = vec![
            ("default".into(), base),
            (
                "no synonyms".into(),
                Tuning {
                    synonyms: false,
                    ..base
                },
            ),
            (
                "no method intent".into(),
                Tuning {
                    intent_boost: 0.0,
                    ..base
                },
            ),
            (
                "no deprecated penalty".into(),
                Tuning {
                    deprecated_factor: 1.0,
                    ..base
                },
            ),
            (
                "no path shape".into(),
                Tuning {
                    shape_boost: 0.0,
                    ..base
                },
            ),
            (
                "no stemming".into(),
                Tuning {
                    stemming: false,
                    ..base
                },
            ),
            (
                "flat field weights".into(),
                Tuning {
                    fields: [1.0; apigate::index::FIELD_COUNT],
                    ..base
                },
            ),
        ];
        // Extra variants: `--try name=value,...` over numeric knobs.
        for spec in args
            .iter()
            .skip_while(|a| *a != "--try")
            .skip(1)
            .take_while(|a| !a.starts_with("--"))
        {
            variants.push((spec.clone(), knobs(base, spec)?));
        }
        for pooled in [false, true] {
            if pooled && !flag("--pooled") {
                continue;
            }
            println!("{}", if pooled { "pooled" } else { "per spec" });
            for (name, t) in &variants {
                let r = eval::evaluate(&files, &loaded, &queries_list, &options(pooled, *t))?;
                let m = &r.overall;
                println!(
                    "  {name:<30} R@1 {:.3}  R@5 {:.3}  MRR@10 {:.3}  All@5 {:.3}",
                    m.recall_1, m.recall_5, m.mrr_10, m.all_5
                );
            }
        }
        return Ok(());
    }
    let tuning = knobs(Tuning::default(), &value("--base", ""))?;
    let report = eval::run(&specs, &queries, options(pooled, tuning)).await?;
    if flag("--json") {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", eval::table(&report));
    }
    if flag("--ranks") {
        for q in &report.results {
            println!(
                "[{}] {} {} {:?}\n      {}",
                q.rank.map_or("-".into(), |k| k.to_string()),
                q.id,
                q.kind,
                q.query,
                q.top.join("\n      ")
            );
        }
    }
    Ok(())
}

/// `--sweep --queries A,B,C [--base …] [--try V1 V2 …] [--pooled]`: every variant (the base
/// first) on every query file, per spec (and pooled), one line each, then the files together
/// (weighted by queries). Specs are loaded once per file.
async fn sweep(
    args: &[String],
    specs: &std::path::Path,
    ranker: Ranker,
    model: Option<(Arc<Embedder>, VectorDirs)>,
    pooled: bool,
) -> anyhow::Result<()> {
    let value = |f: &str| arg(args, f);
    let base = knobs(Tuning::default(), &value("--base"))?;
    let mut variants = vec![("base".to_string(), base)];
    for v in args
        .iter()
        .skip_while(|a| *a != "--try")
        .skip(1)
        .take_while(|a| !a.starts_with("--"))
    {
        variants.push((v.clone(), knobs(base, v)?));
    }
    let sets = load_sets(specs, &value("--queries")).await?;
    for (name, t) in &variants {
        for p in [false, true] {
            if p && !pooled {
                continue;
            }
            let (mut n, mut r1, mut r5, mut mrr) = (0.0, 0.0, 0.0, 0.0);
            let mut line = String::new();
            for (set, files, loaded, queries) in &sets {
                let options = eval::Options {
                    pooled: p,
                    ranker,
                    tuning: *t,
                    model: model.clone(),
                    progress: None,
                };
                let r = eval::evaluate(files, loaded, queries, &options)?;
                let m = &r.overall;
                let q = m.queries as f64;
                n += q;
                r1 += q * m.recall_1;
                r5 += q * m.recall_5;
                mrr += q * m.mrr_10;
                line.push_str(&format!(
                    " | {set} {:.3}/{:.3}/{:.3}",
                    m.recall_1, m.recall_5, m.mrr_10
                ));
            }
            println!(
                "{:<6} {:<40} ALL {:.3}/{:.3}/{:.3}{line}",
                if p { "pooled" } else { "spec" },
                name,
                r1 / n,
                r5 / n,
                mrr / n
            );
        }
    }
    Ok(())
}

/// `base` with `knob=value,…` applied: the names of `apigate eval --set`, or short ones.
fn knobs(base: Tuning, spec: &str) -> anyhow::Result<Tuning> {
    let mut settings = Vec::new();
    for kv in spec.split(',') {
        let Some((k, v)) = kv.split_once('=') else {
            continue;
        };
        let name = match k {
            "syn" => "synonym_weight".to_string(),
            "intent" => "intent_boost".into(),
            "dep" => "deprecated_factor".into(),
            "shape" => "shape_boost".into(),
            "depth" => "depth_penalty".into(),
            "cdf" => "common_df".into(),
            "altf" => "alternative_fields".into(),
            "aff" => "spec_affinity".into(),
            "dw" => "dense_weight".into(),
            "dc" => "dense_candidates".into(),
            f if f.starts_with('f') && f[1..].parse::<usize>().is_ok() => {
                format!("fields.{}", &f[1..])
            }
            other => other.to_string(),
        };
        settings.push(format!("{name}={v}"));
    }
    Ok(base.with_settings(&settings)?)
}

/// The value after flag `f`, or "".
fn arg(args: &[String], f: &str) -> String {
    args.iter()
        .position(|a| a == f)
        .and_then(|i| args.get(i + 1))
        .cloned()
        .unwrap_or_default()
}

/// One query file: its name (the file stem), the specs its queries name (sorted), those
/// specs loaded, and the queries.
type QuerySet = (
    String,
    Vec<String>,
    Vec<apigate::spec::Spec>,
    Vec<eval::EvalQuery>,
);

/// The query files of a comma-separated list, each with its specs loaded once.
async fn load_sets(specs: &std::path::Path, list: &str) -> anyhow::Result<Vec<QuerySet>> {
    let mut sets = Vec::new();
    for file in list.split(',').filter(|f| !f.is_empty()) {
        let queries = eval::read_queries(std::path::Path::new(file)).await?;
        let mut files: Vec<String> = queries.iter().map(|q| q.spec.clone()).collect();
        files.sort();
        files.dedup();
        let mut loaded = Vec::new();
        for f in &files {
            loaded.push(apigate::spec::Spec::load(&specs.join(f).to_string_lossy()).await?);
        }
        let name = std::path::Path::new(file)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        sets.push((name, files, loaded, queries));
    }
    Ok(sets)
}
