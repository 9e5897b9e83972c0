//! The semantic-ranking options every serving command shares (`--embedding-model`,
//! `--cache-dir`, `--index`), and `apigate index build`, which precomputes the operation
//! vectors for deployments.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use serde_json::json;

use crate::index::background::{self, Ranking, VectorDirs};
use crate::index::embed::ModelFiles;
use crate::index::{Embedder, Index, Ranker, Tuning};
use crate::spec::Spec;

/// Semantic ranking: hybrid (words and meaning) with the model built into the binary, unless
/// told otherwise.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RankingArgs {
    /// `hybrid` ranks by words and by meaning (the default), `lexical` by words only and loads
    /// no model (`apigate eval` also measures `dense`, meaning only; servers refuse it).
    #[arg(long, env = "APIGATE_RANKER", value_parser = ranker_parser(), help_heading = RANKING)]
    pub ranker: Option<Ranker>,
    /// Rank by words only: the same as `--ranker lexical`.
    #[arg(long, help_heading = RANKING)]
    pub no_embedding_model: bool,
    /// A folder with another embedding model: a sentence encoder (model.safetensors,
    /// tokenizer.json, config.json, e.g. the repository's models/minilm-api) or a static one
    /// (static.bin, tokenizer.json). Default: the static model built into the binary
    /// (static-api, distilled from models/minilm-api).
    #[arg(long, env = "APIGATE_EMBEDDING_MODEL", value_name = "DIR", help_heading = RANKING)]
    pub embedding_model: Option<PathBuf>,
    /// Where operation vectors are cached across restarts (and shared by replicas).
    /// Default: $XDG_CACHE_HOME/apigate or ~/.cache/apigate.
    #[arg(long, env = "APIGATE_CACHE_DIR", value_name = "DIR", help_heading = RANKING)]
    pub cache_dir: Option<PathBuf>,
    /// A folder made by `apigate index build`, read before the cache.
    #[arg(long, env = "APIGATE_INDEX", value_name = "DIR", help_heading = RANKING)]
    pub index: Option<PathBuf>,
}

/// The help heading of the ranking flags.
const RANKING: &str = super::help::heading::RANKING;

fn ranker_parser() -> impl clap::builder::TypedValueParser<Value = Ranker> {
    use clap::builder::PossibleValue;
    use clap::builder::TypedValueParser;
    // `dense` is for `apigate eval` only: not listed, so no server's help offers it.
    clap::builder::PossibleValuesParser::new([
        PossibleValue::new("hybrid"),
        PossibleValue::new("lexical"),
        PossibleValue::new("dense").hide(true),
    ])
    .map(|s| s.parse::<Ranker>().unwrap_or(Ranker::Hybrid))
}

impl RankingArgs {
    /// Words only, no model: what `--ranker lexical` gives.
    pub fn lexical() -> RankingArgs {
        RankingArgs {
            ranker: Some(Ranker::Lexical),
            ..RankingArgs::default()
        }
    }

    /// The ranker asked for: `--no-embedding-model` is `lexical`; without `--ranker`, hybrid.
    pub fn ranker(&self) -> Ranker {
        if self.no_embedding_model {
            Ranker::Lexical
        } else {
            self.ranker.unwrap_or(Ranker::Hybrid)
        }
    }

    /// How a server ranks with these flags.
    pub fn ranking(&self) -> Ranking {
        Ranking {
            ranker: self.ranker(),
            model_dir: self.embedding_model.clone(),
            dirs: self.dirs(),
        }
    }

    /// The ranking knobs these flags rank with ([`Ranking::tuning`]).
    pub fn tuning(&self) -> Tuning {
        self.ranking().tuning()
    }

    /// The model's files ([`Ranking::model_files`]).
    pub fn model_files(&self) -> anyhow::Result<Option<ModelFiles>> {
        Ok(self.ranking().model_files()?)
    }

    /// The model, loaded now (a clear error if the folder is wrong or missing), or `None` for
    /// the lexical ranker.
    pub fn embedder(&self) -> anyhow::Result<Option<Arc<Embedder>>> {
        let ranking = self.ranking();
        let Some(files) = ranking.model_files()? else {
            return Ok(None);
        };
        let started = Instant::now();
        let embedder = Embedder::from_files(files).with_context(|| ranking.model_origin())?;
        tracing::info!(
            model = %embedder.id(),
            ms = started.elapsed().as_millis() as u64,
            "embedding model loaded"
        );
        Ok(Some(Arc::new(embedder)))
    }

    /// Where vectors are read (`--index`) and cached (`--cache-dir`).
    pub fn dirs(&self) -> VectorDirs {
        VectorDirs {
            prebuilt: self.index.clone(),
            cache: self.cache_dir.clone().or_else(default_cache_dir),
        }
    }
}

fn default_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache")))?;
    Some(base.join("apigate"))
}

#[derive(Debug, clap::Args)]
pub struct IndexArgs {
    #[command(subcommand)]
    pub command: IndexCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum IndexCommand {
    /// Embed every operation of a spec now and write the vectors to a folder that
    /// `serve`/`dev --index DIR` load at start-up (hybrid from the first request).
    Build(BuildArgs),
}

#[derive(Debug, clap::Args)]
pub struct BuildArgs {
    /// The OpenAPI document: a file path or an http(s) URL.
    #[arg(long)]
    pub spec: String,
    /// The sentence encoder's folder (e.g. the repository's models/minilm-api);
    /// `serve`/`dev --index` must then use the same `--embedding-model`. The built-in model
    /// needs no prebuilt vectors.
    #[arg(long, env = "APIGATE_EMBEDDING_MODEL", value_name = "DIR")]
    pub embedding_model: Option<PathBuf>,
    /// The folder to write (created if needed).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

pub async fn run(args: IndexArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        IndexCommand::Build(a) => build(a).await,
    }
}

async fn build(args: BuildArgs) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let spec = Spec::load(&args.spec).await?;
    let index = Index::build(&[&spec]).context("building the search index")?;
    if args.embedding_model.is_none() {
        anyhow::bail!(
            "the built-in model embeds a spec at start-up in milliseconds and needs no prebuilt \
             vectors; `index build` is for an encoder: give --embedding-model DIR (e.g. the \
             repository's models/minilm-api)"
        );
    }
    let embedder = RankingArgs {
        embedding_model: args.embedding_model.clone(),
        ..RankingArgs::default()
    }
    .embedder()?
    .context("index build needs an embedding model")?;
    let progress = super::progress::Progress::embedding(index.len());
    let embed_started = Instant::now();
    let vectors = tokio::task::block_in_place(|| {
        background::compute(&index, &embedder, &|done| progress.set(done))
    })?;
    progress.finish();
    let embed_seconds = embed_started.elapsed().as_secs_f64();
    let path = background::save(&args.out, &index, &embedder, &vectors)?;
    let manifest = json!({
        "spec": spec.source,
        "title": spec.title,
        "version": spec.api_version,
        "operations": index.len(),
        "model": embedder.hash(),
        "modelName": embedder.name(),
        "dim": embedder.dim(),
        "vectors": path.file_name().map(|n| n.to_string_lossy().into_owned()),
    });
    let manifest_path = args.out.join("manifest.json");
    std::fs::write(&manifest_path, serde_json::to_vec_pretty(&manifest)?)
        .with_context(|| format!("writing {}", manifest_path.display()))?;
    super::print(&format!(
        "{} operations embedded in {embed_seconds:.1} s ({:.1} per second); wrote {} in {:.1} s\n",
        index.len(),
        index.len() as f64 / embed_seconds.max(1e-9),
        args.out.display(),
        started.elapsed().as_secs_f64()
    ))?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Flags {
        #[command(flatten)]
        ranking: RankingArgs,
    }

    fn ranker(args: &[&str]) -> Ranker {
        let all = std::iter::once("apigate").chain(args.iter().copied());
        Flags::try_parse_from(all).unwrap().ranking.ranker()
    }

    /// The built-in static model ranks with its own knobs; lexical and another model with
    /// the defaults.
    #[test]
    fn the_static_model_has_its_own_knobs() {
        if std::env::var_os("APIGATE_RANKER").is_some()
            || std::env::var_os("APIGATE_EMBEDDING_MODEL").is_some()
        {
            return; // The environment chose; the table below is about flags.
        }
        let tuning = |args: &[&str]| {
            let all = std::iter::once("apigate").chain(args.iter().copied());
            Flags::try_parse_from(all).unwrap().ranking.tuning()
        };
        assert_eq!(tuning(&[]), Tuning::static_model());
        assert_ne!(Tuning::static_model(), Tuning::default());
        assert_eq!(tuning(&["--ranker", "lexical"]), Tuning::default());
        assert_eq!(
            tuning(&["--embedding-model", "models/minilm-api"]),
            Tuning::default()
        );
    }

    /// Hybrid unless told otherwise; both opt-outs mean lexical.
    #[test]
    fn the_ranker_is_hybrid_unless_told_otherwise() {
        if std::env::var_os("APIGATE_RANKER").is_some() {
            return; // The environment chose; the table below is about flags.
        }
        assert_eq!(ranker(&[]), Ranker::Hybrid);
        assert_eq!(ranker(&["--ranker", "lexical"]), Ranker::Lexical);
        assert_eq!(ranker(&["--no-embedding-model"]), Ranker::Lexical);
        assert_eq!(ranker(&["--ranker", "dense"]), Ranker::Dense);
        assert_eq!(ranker(&["--ranker", "hybrid"]), Ranker::Hybrid);
        let all = ["apigate", "--ranker", "words"];
        assert!(Flags::try_parse_from(all).is_err());
    }

    /// Without a flag the built-in model ranks (nothing to find on disk), a folder given is
    /// read, and a lexical ranker loads none.
    #[test]
    fn the_built_in_model_ranks_unless_another_is_given() {
        let builtin = RankingArgs::default().model_files().unwrap().unwrap();
        assert!(builtin.is_static());
        assert_eq!(builtin.id().name, crate::index::embed::BUILTIN_MODEL);
        assert!(RankingArgs::lexical().model_files().unwrap().is_none());
        let given = RankingArgs {
            embedding_model: Some(PathBuf::from("/elsewhere")),
            ranker: Some(Ranker::Hybrid),
            ..RankingArgs::default()
        };
        let err = format!("{:#}", given.model_files().err().unwrap());
        assert!(
            err.contains("--embedding-model") && err.contains("/elsewhere"),
            "{err}"
        );
    }
}
