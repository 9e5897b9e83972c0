//! Retrieval quality of the index on a query file (`tests/data/queries/dev.jsonl` format): recall@1,
//! recall@5, MRR@10 and all@5, overall, per spec and per kind, for the lexical, dense or
//! hybrid ranker. Loads specs, ranks, and returns a [`Report`]; `apigate eval` prints it with
//! [`table`] or as JSON. A measuring tool, not part of serving: the integration tests and
//! `examples/eval.rs` use it too.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use crate::index::background::{self, VectorDirs};
use crate::index::{Embedder, Index, ModelId, Query, Ranker, Tuning};
use crate::spec::Spec;

/// One line of a query file.
#[derive(Debug, Clone, Deserialize)]
pub struct EvalQuery {
    #[serde(default)]
    pub id: String,
    /// A file name in the specs directory.
    pub spec: String,
    pub query: String,
    /// Every correct operation as `METHOD /path`.
    pub expected: Vec<String>,
    #[serde(default = "unknown_kind")]
    pub kind: String,
}

fn unknown_kind() -> String {
    "-".into()
}

/// The four metrics over a set of queries.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Metrics {
    pub queries: usize,
    #[serde(rename = "recall@1")]
    pub recall_1: f64,
    #[serde(rename = "recall@5")]
    pub recall_5: f64,
    #[serde(rename = "mrr@10")]
    pub mrr_10: f64,
    #[serde(rename = "all@5")]
    pub all_5: f64,
}

/// How one query fared.
#[derive(Debug, Clone, Serialize)]
pub struct QueryResult {
    pub id: String,
    pub spec: String,
    pub kind: String,
    pub query: String,
    /// 1-based rank of the first expected operation within the top 10.
    pub rank: Option<usize>,
    pub all_in_top5: bool,
    /// The top three results as `METHOD /path` (prefixed by the spec file when pooled).
    pub top: Vec<String>,
    /// The whole ranking (at most 10), each result named as in `top`, with its score:
    /// what `apigate eval --per-query` prints, to compare rankings before and after a change.
    pub ranked: Vec<(String, f32)>,
}

/// The whole evaluation: overall metrics flattened at the top level, then per spec and per
/// kind.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub ranker: Ranker,
    /// The embedding model (name and hash of its files) when the ranker uses one.
    pub model: Option<ModelId>,
    #[serde(flatten)]
    pub overall: Metrics,
    pub per_spec: BTreeMap<String, Metrics>,
    pub per_kind: BTreeMap<String, Metrics>,
    #[serde(skip)]
    pub pooled: bool,
    #[serde(skip)]
    pub results: Vec<QueryResult>,
}

/// How to evaluate.
#[derive(Clone)]
pub struct Options {
    /// One index of every spec in the directory instead of one per spec.
    pub pooled: bool,
    pub ranker: Ranker,
    pub tuning: Tuning,
    /// The model and vector folders; needed for the dense and hybrid rankers.
    pub model: Option<(Arc<Embedder>, VectorDirs)>,
    /// Told (done, total) while operations are embedded (vectors not cached yet).
    pub progress: Option<Arc<dyn Fn(usize, usize) + Send + Sync>>,
}

impl Options {
    /// The production lexical ranker.
    pub fn lexical(pooled: bool) -> Options {
        Options {
            pooled,
            ranker: Ranker::Lexical,
            tuning: Tuning::default(),
            model: None,
            progress: None,
        }
    }
}

/// Evaluates `queries_file` against the specs in `specs_dir`: each query against its own
/// spec, or with `pooled` against one index of every spec the query file names (so a set's
/// numbers do not move when the folder gains specs for another set).
pub async fn run(
    specs_dir: &Path,
    queries_file: &Path,
    options: Options,
) -> anyhow::Result<Report> {
    let queries = read_queries(queries_file).await?;
    let mut files: Vec<String> = queries.iter().map(|q| q.spec.clone()).collect();
    files.sort();
    files.dedup();
    let mut specs = Vec::with_capacity(files.len());
    for f in &files {
        let path = specs_dir.join(f);
        let spec = Spec::load(&path.to_string_lossy())
            .await
            .with_context(|| format!("loading {}", path.display()))?;
        specs.push(spec);
    }
    evaluate(&files, &specs, &queries, &options)
}

/// The indexes `options` asks for (one pooled, or one per spec), hybrid when the ranker
/// needs the model.
fn build_indexes(specs: &[Spec], options: &Options, tuning: Tuning) -> anyhow::Result<Vec<Index>> {
    let refs: Vec<&Spec> = specs.iter().collect();
    let indexes: Vec<Index> = if options.pooled {
        vec![Index::build_with(&refs, tuning)?]
    } else {
        refs.iter()
            .map(|s| Index::build_with(&[s], tuning))
            .collect::<Result<_, _>>()?
    };
    if options.ranker != Ranker::Lexical {
        let Some((embedder, dirs)) = &options.model else {
            bail!(
                "the {} ranker needs an embedding model (--embedding-model DIR)",
                options.ranker.as_str()
            );
        };
        for index in &indexes {
            let total = index.len();
            let progress = |done: usize| {
                if let Some(p) = &options.progress {
                    p(done, total);
                }
            };
            background::enable_now(index, embedder, dirs, &progress)?;
        }
    }
    Ok(indexes)
}

/// Ranks `queries` against already-loaded `specs` (named by `files`, same order) and scores
/// the rankings.
pub fn evaluate(
    files: &[String],
    specs: &[Spec],
    queries: &[EvalQuery],
    options: &Options,
) -> anyhow::Result<Report> {
    let pooled = options.pooled;
    let tuning = match options.ranker {
        Ranker::Dense => options.tuning.with_dense_weight(1.0),
        _ => options.tuning,
    };
    let position: HashMap<&str, usize> = files
        .iter()
        .enumerate()
        .map(|(i, f)| (f.as_str(), i))
        .collect();
    let indexes = build_indexes(specs, options, tuning)?;
    let mut results = Vec::with_capacity(queries.len());
    for q in queries {
        let Some(&si) = position.get(q.spec.as_str()) else {
            bail!("query {}: spec {} was not loaded", q.id, q.spec);
        };
        let (index, base) = if pooled {
            (&indexes[0], None)
        } else {
            (&indexes[si], Some(si))
        };
        let vector = match options.ranker {
            Ranker::Lexical => None,
            _ => Some(
                index
                    .query_vector(&q.query)
                    .with_context(|| format!("query {}: no query vector", q.id))?,
            ),
        };
        let hits = index.search(&Query {
            vector: vector.as_deref(),
            ..Query::text(&q.query, 10)
        });
        let name = |spec: usize, op: usize| {
            let s = base.unwrap_or(spec);
            let key = specs[s].operations[op].key();
            if pooled {
                format!("{} {key}", files[s])
            } else {
                key
            }
        };
        let correct = |spec: usize, op: usize| {
            let s = base.unwrap_or(spec);
            s == si && q.expected.contains(&specs[s].operations[op].key())
        };
        let rank = hits
            .iter()
            .position(|h| correct(h.spec, h.op))
            .map(|p| p + 1);
        let top5: Vec<String> = hits
            .iter()
            .take(5)
            .filter(|h| correct(h.spec, h.op))
            .map(|h| specs[base.unwrap_or(h.spec)].operations[h.op].key())
            .collect();
        let all_in_top5 = q.expected.iter().all(|e| top5.contains(e));
        results.push(QueryResult {
            id: q.id.clone(),
            spec: q.spec.clone(),
            kind: q.kind.clone(),
            query: q.query.clone(),
            rank,
            all_in_top5,
            top: hits.iter().take(3).map(|h| name(h.spec, h.op)).collect(),
            ranked: hits.iter().map(|h| (name(h.spec, h.op), h.score)).collect(),
        });
    }
    let group = |key: &dyn Fn(&QueryResult) -> &str| {
        let mut map: BTreeMap<String, Vec<&QueryResult>> = BTreeMap::new();
        for r in &results {
            map.entry(key(r).to_string()).or_default().push(r);
        }
        map.into_iter()
            .map(|(k, rows)| (k, metrics(&rows)))
            .collect::<BTreeMap<_, _>>()
    };
    let model = match options.ranker {
        Ranker::Lexical => None,
        _ => options.model.as_ref().map(|(embedder, _)| embedder.id()),
    };
    Ok(Report {
        ranker: options.ranker,
        model,
        overall: metrics(&results.iter().collect::<Vec<_>>()),
        per_spec: group(&|r| &r.spec),
        per_kind: group(&|r| &r.kind),
        pooled,
        results,
    })
}

fn metrics(rows: &[&QueryResult]) -> Metrics {
    let n = rows.len();
    if n == 0 {
        return Metrics::default();
    }
    let share = |f: &dyn Fn(&QueryResult) -> f64| rows.iter().map(|r| f(r)).sum::<f64>() / n as f64;
    Metrics {
        queries: n,
        recall_1: share(&|r| f64::from(u8::from(r.rank == Some(1)))),
        recall_5: share(&|r| f64::from(u8::from(r.rank.is_some_and(|k| k <= 5)))),
        mrr_10: share(&|r| r.rank.map_or(0.0, |k| 1.0 / k as f64)),
        all_5: share(&|r| f64::from(u8::from(r.all_in_top5))),
    }
}

/// Reads a JSONL query file (blank lines ignored).
pub async fn read_queries(path: &Path) -> anyhow::Result<Vec<EvalQuery>> {
    let text = tokio::fs::read_to_string(path)
        .await
        .with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l)
                .with_context(|| format!("{}:{}: not a query object", path.display(), i + 1))
        })
        .collect()
}

/// The report as a text table: overall, per spec, per kind, then the queries missed at 5.
pub fn table(r: &Report) -> String {
    let mut out = String::new();
    let row = |out: &mut String, name: &str, m: &Metrics| {
        let _ = writeln!(
            out,
            "{name:<34} {:>4}  {:>6.3}  {:>6.3}  {:>6.3}  {:>6.3}",
            m.queries, m.recall_1, m.recall_5, m.mrr_10, m.all_5
        );
    };
    let header = |out: &mut String, title: &str| {
        let _ = writeln!(
            out,
            "{title:<34} {:>4}  {:>6}  {:>6}  {:>6}  {:>6}",
            "n", "R@1", "R@5", "MRR@10", "All@5"
        );
    };
    let mut mode = if r.pooled {
        format!("pooled index, {}", r.ranker.as_str())
    } else {
        format!("per-spec index, {}", r.ranker.as_str())
    };
    if let Some(model) = &r.model {
        let _ = write!(mode, ", model {model}");
    }
    header(&mut out, &format!("overall ({mode})"));
    row(&mut out, "all", &r.overall);
    out.push('\n');
    header(&mut out, "per spec");
    for (k, m) in &r.per_spec {
        row(&mut out, k, m);
    }
    out.push('\n');
    header(&mut out, "per kind");
    for (k, m) in &r.per_kind {
        row(&mut out, k, m);
    }
    let misses: Vec<&QueryResult> = r
        .results
        .iter()
        .filter(|q| q.rank.is_none_or(|k| k > 5))
        .collect();
    if !misses.is_empty() {
        let _ = writeln!(out, "\nnot in the top 5:");
        for q in misses {
            let _ = writeln!(
                out,
                "  [{}] {} {:?} -> {}",
                q.rank.map_or("-".to_string(), |k| k.to_string()),
                q.id,
                q.query,
                q.top.first().map_or("(nothing)", String::as_str)
            );
        }
    }
    out
}
