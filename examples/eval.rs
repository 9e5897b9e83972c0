//! Runs the retrieval evaluation on the curated specs until `apigate eval` exists:
//! `cargo run --release --example eval -- [--pooled] [--json] [--ablate] [--ranks]
//! [--specs DIR] [--queries FILE]`.

use std::path::PathBuf;

use apigate::index::Tuning;
use apigate::index::eval;

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
    let specs = PathBuf::from(value("--specs", "/work/shared/specs"));
    let queries = PathBuf::from(value("--queries", "/work/shared/queries/dev.jsonl"));
    let pooled = flag("--pooled");
    if flag("--ablate") {
        let base = Tuning::default();
        let variants: Vec<(&str, Tuning)> = vec![
            ("default", base),
            ("no synonyms", Tuning { synonyms: false, ..base }),
            ("no method intent", Tuning { intent_boost: 0.0, ..base }),
            ("no deprecated penalty", Tuning { deprecated_factor: 1.0, ..base }),
            ("no stemming", Tuning { stemming: false, ..base }),
            ("flat field weights", Tuning { fields: [1.0; 6], ..base }),
        ];
        for (name, t) in variants {
            let r = eval::run_with(&specs, &queries, pooled, t).await?;
            let m = &r.overall;
            println!(
                "{name:<24} R@1 {:.3}  R@5 {:.3}  MRR@10 {:.3}  All@5 {:.3}",
                m.recall_1, m.recall_5, m.mrr_10, m.all_5
            );
        }
        return Ok(());
    }
    let report = eval::run(&specs, &queries, pooled).await?;
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
