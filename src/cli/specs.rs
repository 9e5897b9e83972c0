//! `apigate check`, `search`, `schema` and `eval`: the spec and index, from the command line.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use serde_json::{Value, json};

use crate::index::{Index, Query};
use crate::spec::Spec;

#[derive(Debug, clap::Args)]
pub struct SpecCheckArgs {
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
    pub method: Option<crate::spec::Method>,
    /// Only operations with this tag.
    #[arg(long)]
    pub tag: Option<String>,
    /// How many results.
    #[arg(long, default_value_t = 10)]
    pub limit: usize,
    /// Print JSON ({"results": [...], "total": N}) instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub ranking: super::index::RankingArgs,
    /// What you want to do, in plain words.
    #[arg(required = true, num_args = 1..)]
    pub query: Vec<String>,
}

#[derive(Debug, clap::Args)]
pub struct SchemaCommandArgs {
    /// The OpenAPI document (path or URL).
    #[arg(long)]
    pub spec: String,
    /// An operationId, or "METHOD /path".
    pub operation: String,
    /// Print exactly what `api_schema` returns (JSON) instead of a summary.
    #[arg(long)]
    pub json: bool,
    /// With --json: the full response schemas (`api_schema`'s `include: ["responses"]`).
    #[arg(long)]
    pub full_responses: bool,
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
    /// Weight of the dense score in hybrid ranking, pooled or not (default: the production
    /// values).
    #[arg(long)]
    pub dense_weight: Option<f32>,
    /// Change a ranking knob for this measurement, `NAME=VALUE` (the fields of
    /// `index::Tuning`, `fields.N` for a field boost; `true`/`false` or 1/0 for a switch);
    /// repeatable. To measure what an idea is worth, switch it off. An unknown knob, or one
    /// of the dropped experiments, is an error.
    #[arg(long = "set", value_name = "NAME=VALUE")]
    pub set: Vec<String>,
    #[command(flatten)]
    pub ranking: super::index::RankingArgs,
    /// Print the report as JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Print each query's ranking instead (one JSON object a line: the query, the rank of
    /// its first expected operation, and its top 10 with their scores), to compare rankings
    /// before and after a change.
    #[arg(long, conflicts_with = "json")]
    pub per_query: bool,
}

pub async fn check(args: SpecCheckArgs) -> anyhow::Result<ExitCode> {
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
    let mut out = String::new();
    if args.json {
        writeln!(out, "{}", Value::Array(rows))?;
    } else {
        for r in &rows {
            let warnings = r["warnings"].as_array().map_or(0, Vec::len);
            if r["ok"] == true {
                writeln!(
                    out,
                    "ok     {:<8} {:>5} operations  {:>3} warnings  {}",
                    r["version"].as_str().unwrap_or_default(),
                    r["operations"].as_u64().unwrap_or_default(),
                    warnings,
                    r["file"].as_str().unwrap_or_default()
                )?;
                for w in r["warnings"].as_array().into_iter().flatten() {
                    writeln!(out, "         warning: {}", w.as_str().unwrap_or_default())?;
                }
            } else {
                writeln!(out, "error  {}", r["error"].as_str().unwrap_or_default())?;
            }
        }
    }
    super::print(&out)?;
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
    let mut vector = None;
    if let Some(embedder) = args.ranking.embedder()? {
        let dirs = args.ranking.dirs();
        let progress = super::progress::Progress::embedding(index.len());
        tokio::task::block_in_place(|| {
            crate::index::background::enable_now(&index, &embedder, &dirs, &|done| {
                progress.set(done)
            })
        })?;
        progress.finish();
        vector = index.query_vector(&text);
    }
    let (hits, total) = index.search_total(&Query {
        text: &text,
        method: args.method,
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
    let mut out = String::new();
    if args.json {
        writeln!(out, "{}", json!({"results": results, "total": total}))?;
    } else {
        for (i, r) in results.iter().enumerate() {
            let summary: String = r["summary"]
                .as_str()
                .unwrap_or_default()
                .chars()
                .take(70)
                .collect();
            writeln!(
                out,
                "{:>2}. {:>6.2}  {:<7} {:<50}  {}",
                i + 1,
                r["score"].as_f64().unwrap_or_default(),
                r["method"].as_str().unwrap_or_default(),
                r["path"].as_str().unwrap_or_default(),
                summary
            )?;
            writeln!(
                out,
                "              {}",
                r["operationId"].as_str().unwrap_or_default()
            )?;
        }
        if results.is_empty() {
            writeln!(out, "no operation matches")?;
        }
    }
    super::print(&out)?;
    Ok(ExitCode::SUCCESS)
}

pub async fn schema(args: SchemaCommandArgs) -> anyhow::Result<ExitCode> {
    let spec = Spec::load(&args.spec).await?;
    let wanted = args.operation.trim();
    let op = match spec.get(wanted) {
        Some(op) => op,
        None => {
            let (method, path) = wanted.split_once(' ').with_context(|| {
                format!("{wanted:?} is not an operationId of {}; give an operationId or \"METHOD /path\"", spec.source)
            })?;
            let method: crate::spec::Method = method.parse()?;
            spec.find(method, path.trim())
                .map(|(op, _)| op)
                .with_context(|| format!("no operation {wanted:?} in {}", spec.source))?
        }
    };
    let detail = if args.full_responses {
        crate::spec::Detail::Full
    } else {
        crate::spec::Detail::Compact
    };
    let described = serde_json::to_value(spec.describe(op, detail))?;
    if args.json {
        super::print(&format!("{}\n", serde_json::to_string_pretty(&described)?))?;
    } else {
        super::print(&schema_text(&described))?;
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn eval(args: EvalArgs) -> anyhow::Result<ExitCode> {
    let mut options = super::eval::Options::lexical(args.pooled);
    // What the server would use with the same flags: hybrid unless --ranker says otherwise.
    options.ranker = args.ranking.ranker();
    options.tuning = args.ranking.tuning();
    if let Some(w) = args.dense_weight {
        options.tuning = options.tuning.with_dense_weight(w);
    }
    options.tuning = options.tuning.with_settings(&args.set).context("--set")?;
    if options.ranker != crate::index::Ranker::Lexical {
        let embedder = args
            .ranking
            .embedder()?
            .context("--ranker dense|hybrid needs an embedding model")?;
        options.model = Some((embedder, args.ranking.dirs()));
        let progress = super::progress::Progress::embedding(0);
        // One bar (or run of plain lines) per index that has to be embedded (its vectors were
        // not cached).
        options.progress = Some(std::sync::Arc::new(move |done, total| {
            progress.update(done, total)
        }));
    }
    let report = super::eval::run(&args.specs_dir, &args.queries, options).await?;
    if args.per_query {
        let mut out = String::new();
        for r in &report.results {
            writeln!(out, "{}", serde_json::to_string(r)?)?;
        }
        super::print(&out)?;
    } else if args.json {
        super::print(&format!("{}\n", serde_json::to_string(&report)?))?;
    } else {
        super::print(&super::eval::table(&report))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `api_schema`'s answer as text: the request line, the parameters and body an agent fills
/// in, and the responses.
fn schema_text(d: &Value) -> String {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let kind = |schema: &Value| match &schema["type"] {
        Value::String(t) if t == "array" => match schema["items"]["type"].as_str() {
            Some(item) => format!("array of {item}"),
            None => "array".into(),
        },
        Value::String(t) => t.clone(),
        Value::Array(ts) => ts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join("|"),
        _ if schema.get("enum").is_some() => "enum".into(),
        _ => "any".into(),
    };
    let one_line = |s: &str| -> String {
        let line = s.split_whitespace().collect::<Vec<_>>().join(" ");
        if line.chars().count() > 80 {
            format!("{}…", line.chars().take(79).collect::<String>())
        } else {
            line
        }
    };
    let mut out = format!(
        "{} {}  ({})\n",
        text(&d["method"]),
        text(&d["path"]),
        text(&d["operationId"])
    );
    if let Some(s) = d["summary"].as_str().or(d["description"].as_str()) {
        out.push_str(&format!("{}\n", one_line(s)));
    }
    if d["deprecated"] == true {
        out.push_str("deprecated\n");
    }
    if let Some(url) = d["serverUrl"].as_str() {
        out.push_str(&format!("server: {url}\n"));
    }
    let params = d["parameters"].as_array().cloned().unwrap_or_default();
    if !params.is_empty() {
        out.push_str("\nparameters:\n");
        for p in &params {
            out.push_str(&format!(
                "  {:<24} {:<7} {:<9} {:<14} {}\n",
                text(&p["name"]),
                text(&p["in"]),
                if p["required"] == true {
                    "required"
                } else {
                    "optional"
                },
                kind(&p["schema"]),
                one_line(p["description"].as_str().unwrap_or_default())
            ));
        }
    }
    if let Some(body) = d["requestBody"].as_object() {
        out.push_str(&format!(
            "\nrequest body ({}, {}):\n",
            body.get("contentType")
                .and_then(Value::as_str)
                .unwrap_or("no content type"),
            if body.get("required") == Some(&Value::Bool(true)) {
                "required"
            } else {
                "optional"
            }
        ));
        let schema = body.get("schema").cloned().unwrap_or_default();
        let required: Vec<&str> = schema["required"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        match schema["properties"].as_object() {
            Some(props) => {
                for (name, p) in props {
                    out.push_str(&format!(
                        "  {:<24} {:<9} {:<14} {}\n",
                        name,
                        if required.contains(&name.as_str()) {
                            "required"
                        } else {
                            "optional"
                        },
                        kind(p),
                        one_line(p["description"].as_str().unwrap_or_default())
                    ));
                }
            }
            None => out.push_str(&format!("  {}\n", kind(&schema))),
        }
    }
    if let Some(responses) = d["responses"].as_object() {
        out.push_str("\nresponses:\n");
        for (status, r) in responses {
            out.push_str(&format!(
                "  {:<8} {}\n",
                status,
                one_line(r["description"].as_str().unwrap_or_default())
            ));
        }
    }
    out.push_str("\n--json prints the full schemas (what api_schema returns)\n");
    out.lines()
        .map(str::trim_end)
        .fold(String::new(), |mut text, line| {
            text.push_str(line);
            text.push('\n');
            text
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_text_shows_what_a_call_needs() {
        let d = json!({
            "operationId": "addPet", "method": "POST", "path": "/pet",
            "summary": "Add a new pet", "serverUrl": "https://petstore.example/v2",
            "parameters": [{"name": "trace", "in": "header", "required": false,
                "schema": {"type": "array", "items": {"type": "string"}}}],
            "requestBody": {"required": true, "contentType": "application/json",
                "schema": {"type": "object", "required": ["name"],
                    "properties": {"name": {"type": "string", "description": "The\npet's name"},
                        "status": {"enum": ["available", "sold"]}}}},
            "responses": {"200": {"description": "OK"}, "405": {"description": "Invalid input"}}
        });
        let text = schema_text(&d);
        assert!(
            text.starts_with("POST /pet  (addPet)\nAdd a new pet\n"),
            "{text}"
        );
        for part in [
            "trace",
            "array of string",
            "request body (application/json, required)",
            "name",
            "The pet's name",
            "status",
            "enum",
            "405      Invalid input",
        ] {
            assert!(text.contains(part), "{part:?} is missing from\n{text}");
        }
    }
}
