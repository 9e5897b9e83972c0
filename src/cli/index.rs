//! The semantic-ranking options every serving command shares (`--embedding-model`,
//! `--cache-dir`, `--index`), and `apigate index build`, which precomputes the operation
//! vectors for deployments.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use serde_json::json;

use crate::index::background::{self, VectorDirs};
use crate::index::embed::ModelFiles;
use crate::index::{Embedder, Index, Ranker};
use crate::spec::Spec;

/// Semantic ranking: hybrid (words and meaning) with the model the repository ships, unless
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
    /// A folder with the sentence-embedding model (model.safetensors, tokenizer.json,
    /// config.json). Default: the shipped `minilm-api`, looked for beside the installed binary
    /// (`../share/apigate/models/minilm-api`), in /usr/share/apigate/models/minilm-api, then in
    /// the repository the binary was built from.
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

/// The folder name of the model the repository ships.
pub(crate) const SHIPPED_MODEL: &str = "minilm-api";

/// Where the shipped model is looked for, in this order: beside the installed binary
/// (`BIN/../share/apigate/models/minilm-api`, as a package or `make install` lays it out),
/// the Docker image's /usr/share/apigate/models/minilm-api, and the repository the binary was
/// built from (`cargo run`, and `cargo install --path .` while the checkout exists).
pub(crate) fn shipped_model_places() -> Vec<PathBuf> {
    let mut places = Vec::new();
    if let Ok(exe) = std::env::current_exe()
        && let Some(bin) = exe.parent()
    {
        places.push(bin.join("../share/apigate/models").join(SHIPPED_MODEL));
    }
    places.push(Path::new("/usr/share/apigate/models").join(SHIPPED_MODEL));
    places.push(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("models")
            .join(SHIPPED_MODEL),
    );
    places
}

/// The first of [`shipped_model_places`] that holds the model's files.
pub(crate) fn shipped_model() -> Option<PathBuf> {
    shipped_model_places().into_iter().find(|dir| {
        crate::index::embed::MODEL_FILES
            .iter()
            .all(|f| dir.join(f).is_file())
    })
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

    /// The model folder to load: `--embedding-model`, else the shipped one; `None` when the
    /// ranker is lexical.
    pub fn model_dir(&self) -> anyhow::Result<Option<PathBuf>> {
        if self.ranker() == Ranker::Lexical {
            return Ok(None);
        }
        if let Some(dir) = &self.embedding_model {
            return Ok(Some(dir.clone()));
        }
        match shipped_model() {
            Some(dir) => Ok(Some(dir)),
            None => {
                let places: Vec<String> = shipped_model_places()
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect();
                anyhow::bail!(
                    "the shipped embedding model ({SHIPPED_MODEL}) is in none of {}; give \
                     --embedding-model DIR (a copy of the repository's models/{SHIPPED_MODEL}), \
                     or --ranker lexical to rank by words only",
                    places.join(", ")
                )
            }
        }
    }

    /// The model, loaded now (a clear error if the folder is wrong or missing), or `None` for
    /// the lexical ranker.
    pub fn embedder(&self) -> anyhow::Result<Option<Arc<Embedder>>> {
        let Some(dir) = self.model_dir()? else {
            return Ok(None);
        };
        let started = Instant::now();
        let embedder = Embedder::load(&dir).with_context(|| self.model_origin(&dir))?;
        tracing::info!(
            dir = %dir.display(),
            model = %embedder.id(),
            ms = started.elapsed().as_millis() as u64,
            "embedding model loaded"
        );
        Ok(Some(Arc::new(embedder)))
    }

    /// What an error about the model folder `dir` names it as.
    fn model_origin(&self, dir: &Path) -> String {
        if self.embedding_model.is_some() {
            "--embedding-model".to_string()
        } else {
            format!("the shipped model in {}", dir.display())
        }
    }

    pub fn dirs(&self) -> VectorDirs {
        VectorDirs {
            prebuilt: self.index.clone(),
            cache: self.cache_dir.clone().or_else(default_cache_dir),
        }
    }

    /// Starts semantic ranking for `index` (at once from disk, or in the background), or says
    /// once that ranking is lexical.
    pub fn start(&self, index: &Arc<Index>) -> anyhow::Result<()> {
        match self.ranker() {
            Ranker::Lexical if self.index.is_some() => anyhow::bail!(
                "--index holds vectors for hybrid ranking: drop --ranker lexical \
                 (--no-embedding-model), or drop --index"
            ),
            Ranker::Dense => anyhow::bail!(
                "--ranker dense is for measuring (`apigate eval`); servers rank hybrid or lexical"
            ),
            _ => {}
        }
        let Some(dir) = self.model_dir()? else {
            tracing::info!("ranker: lexical (--ranker lexical)");
            return Ok(());
        };
        // Only the files are read now; the model is built in the background unless its
        // vectors are on disk already.
        let files = ModelFiles::read(&dir).with_context(|| self.model_origin(&dir))?;
        tracing::info!(dir = %dir.display(), model = %files.id(), "embedding model found");
        background::start(index.clone(), files, self.dirs())
            .with_context(|| self.model_origin(&dir))?;
        Ok(())
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
    /// The sentence-embedding model folder. Default: the shipped `minilm-api`, found as
    /// `dev` finds it; `serve`/`dev --index` must then use the same model.
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

    /// Run from the repository, the shipped model is found without a flag, and a lexical
    /// ranker loads none.
    #[test]
    fn the_shipped_model_is_found_from_the_repository() {
        let found = shipped_model().expect("models/minilm-api in this checkout");
        assert!(found.ends_with("models/minilm-api"), "{}", found.display());
        assert_eq!(RankingArgs::lexical().model_dir().unwrap(), None);
        let given = RankingArgs {
            embedding_model: Some(PathBuf::from("/elsewhere")),
            ranker: Some(Ranker::Hybrid),
            ..RankingArgs::default()
        };
        assert_eq!(
            given.model_dir().unwrap(),
            Some(PathBuf::from("/elsewhere"))
        );
    }
}
