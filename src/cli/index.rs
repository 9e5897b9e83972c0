//! The semantic-ranking options every serving command shares (`--embedding-model`,
//! `--cache-dir`, `--index`), and `apigate index build`, which precomputes the operation
//! vectors for deployments.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;

use crate::index::background::{self, VectorDirs};
use crate::index::{Embedder, Index};
use crate::spec::Spec;

/// Semantic ranking: without a model apigate ranks lexically.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RankingArgs {
    /// A folder with the sentence-embedding model (model.safetensors, tokenizer.json,
    /// config.json; `scripts/fetch-model.sh DIR` fetches all-MiniLM-L6-v2). With it, discovery
    /// ranks by meaning as well as by words (hybrid).
    #[arg(long, env = "APIGATE_EMBEDDING_MODEL", value_name = "DIR")]
    pub embedding_model: Option<PathBuf>,
    /// Where operation vectors are cached across restarts (and shared by replicas).
    /// Default: $XDG_CACHE_HOME/apigate or ~/.cache/apigate.
    #[arg(long, env = "APIGATE_CACHE_DIR", value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// A folder made by `apigate index build`, read before the cache.
    #[arg(long, env = "APIGATE_INDEX", value_name = "DIR")]
    pub index: Option<PathBuf>,
}

impl RankingArgs {
    /// The model, loaded now (a clear error if the folder is wrong), or `None` without
    /// `--embedding-model`.
    pub fn embedder(&self) -> anyhow::Result<Option<Arc<Embedder>>> {
        let Some(dir) = &self.embedding_model else {
            return Ok(None);
        };
        let started = Instant::now();
        let embedder = Embedder::load(dir).context("--embedding-model")?;
        tracing::info!(
            dir = %dir.display(),
            model = embedder.hash(),
            ms = started.elapsed().as_millis() as u64,
            "embedding model loaded"
        );
        Ok(Some(Arc::new(embedder)))
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
        if self.index.is_some() && self.embedding_model.is_none() {
            anyhow::bail!(
                "--index needs --embedding-model (the same model that built it): queries are embedded too"
            );
        }
        match self.embedder()? {
            Some(embedder) => {
                background::start(index.clone(), embedder, self.dirs());
            }
            None => tracing::info!(
                "ranker: lexical (no --embedding-model; see the README's \"Semantic ranking\")"
            ),
        }
        Ok(())
    }
}

/// The bar long CLI work shows on stderr (hidden when stderr is not a terminal).
pub fn progress_bar(operations: usize) -> ProgressBar {
    ProgressBar::new(operations as u64).with_style(
        ProgressStyle::with_template("embedding {bar:40} {pos}/{len} operations, {eta} left")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    )
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
    /// The sentence-embedding model folder (`scripts/fetch-model.sh DIR` fetches it).
    #[arg(long, env = "APIGATE_EMBEDDING_MODEL", value_name = "DIR")]
    pub embedding_model: PathBuf,
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
    let embedder = Embedder::load(&args.embedding_model).context("--embedding-model")?;
    let bar = progress_bar(index.len());
    let embed_started = Instant::now();
    let vectors = tokio::task::block_in_place(|| {
        background::compute(&index, &embedder, &|done| bar.set_position(done as u64))
    })?;
    bar.finish_and_clear();
    let embed_seconds = embed_started.elapsed().as_secs_f64();
    let path = background::save(&args.out, &index, &embedder, &vectors)?;
    let manifest = json!({
        "spec": spec.source,
        "title": spec.title,
        "version": spec.api_version,
        "operations": index.len(),
        "model": embedder.hash(),
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
