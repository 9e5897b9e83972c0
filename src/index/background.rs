//! Switching an index to hybrid ranking without making start-up wait for the model. A static
//! model (the built-in one) embeds every operation at once, in milliseconds. An encoder's vectors
//! come, in this order, from a folder made by `apigate index build` (`--index`), from the
//! vector cache (`--cache-dir`), or from an embedding pass on a background thread that then
//! fills the cache; until then the index ranks lexically. [`Ranking`] is how a server asked to
//! rank (its flags), applied to each index it builds.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use super::embed::ModelFiles;
use super::{EmbedError, Embedder, Index, ModelId, Ranker, Tuning, VectorError, Vectors, vectors};

/// How a server ranks, as its flags say: the ranker, the model's folder (`None`: the static
/// model built into the binary), and where vectors are read and cached. Applied to every index
/// the server builds, at start-up and on each reload ([`Ranking::start`]).
#[derive(Debug, Clone)]
pub struct Ranking {
    pub ranker: Ranker,
    /// `--embedding-model`: another model's folder.
    pub model_dir: Option<PathBuf>,
    pub dirs: VectorDirs,
}

/// Why ranking could not start as asked.
#[derive(Debug, thiserror::Error)]
pub enum RankingError {
    #[error(
        "--index holds vectors for hybrid ranking: drop --ranker lexical \
         (--no-embedding-model), or drop --index"
    )]
    LexicalWithIndex,
    #[error("--ranker dense is for measuring (`apigate eval`); servers rank hybrid or lexical")]
    DenseServer,
    #[error(
        "--index holds an encoder's vectors (`apigate index build --embedding-model \
         DIR`): give the same --embedding-model DIR, or drop --index (the built-in \
         model embeds the spec at start-up, in milliseconds)"
    )]
    StaticWithIndex,
    #[error("{origin}")]
    Model {
        origin: &'static str,
        #[source]
        source: EmbedError,
    },
}

impl Ranking {
    /// The ranking knobs: the built-in static model's own when it is the hybrid ranker's model
    /// ([`Tuning::static_model`]), else the defaults.
    pub fn tuning(&self) -> Tuning {
        if self.ranker == Ranker::Hybrid && self.model_dir.is_none() {
            Tuning::static_model()
        } else {
            Tuning::default()
        }
    }

    /// Where the model comes from, for messages.
    pub fn model_origin(&self) -> &'static str {
        if self.model_dir.is_some() {
            "--embedding-model"
        } else {
            "the built-in embedding model"
        }
    }

    /// The model's files: `--embedding-model`'s, else the built-in model's; `None` when the
    /// ranker is lexical.
    pub fn model_files(&self) -> Result<Option<ModelFiles>, RankingError> {
        if self.ranker == Ranker::Lexical {
            return Ok(None);
        }
        match &self.model_dir {
            Some(dir) => ModelFiles::read(dir)
                .map(Some)
                .map_err(|source| RankingError::Model {
                    origin: "--embedding-model",
                    source,
                }),
            None => Ok(Some(ModelFiles::builtin())),
        }
    }

    /// Starts semantic ranking for `index` (at once with a static model or from disk, or in
    /// the background), or says once that ranking is lexical.
    pub fn start(&self, index: &Arc<Index>) -> Result<(), RankingError> {
        match self.ranker {
            Ranker::Lexical if self.dirs.prebuilt.is_some() => {
                return Err(RankingError::LexicalWithIndex);
            }
            Ranker::Dense => return Err(RankingError::DenseServer),
            _ => {}
        }
        let Some(files) = self.model_files()? else {
            tracing::info!("ranker: lexical (--ranker lexical)");
            return Ok(());
        };
        if files.is_static() && self.dirs.prebuilt.is_some() {
            return Err(RankingError::StaticWithIndex);
        }
        // An encoder's files are only read now; it is built in the background unless its
        // vectors are on disk already. A static model embeds the spec in milliseconds.
        tracing::debug!(model = %files.id(), "embedding model found");
        start(index.clone(), files, self.dirs.clone()).map_err(|source| RankingError::Model {
            origin: self.model_origin(),
            source,
        })?;
        Ok(())
    }
}

/// Where vectors are looked for and kept.
#[derive(Debug, Clone, Default)]
pub struct VectorDirs {
    /// A folder from `apigate index build` (read only).
    pub prebuilt: Option<PathBuf>,
    /// The cache, read and written.
    pub cache: Option<PathBuf>,
}

impl VectorDirs {
    /// The vectors for `index` under `embedder`, if a folder holds them. A damaged file is
    /// logged and ignored (it will be recomputed).
    pub fn load(&self, index: &Index, embedder: &Embedder) -> Option<Vectors> {
        self.load_for(index, embedder.hash(), embedder.dim())
    }

    /// [`VectorDirs::load`] for the model whose files hash to `hash` and whose vectors have
    /// `dim` dimensions (known before the model is built).
    pub(crate) fn load_for(&self, index: &Index, hash: &str, dim: usize) -> Option<Vectors> {
        let key = vectors::cache_key(hash, index.embedding_texts());
        for dir in self.prebuilt.iter().chain(&self.cache) {
            match vectors::load(dir, &key, index.len()) {
                Ok(Some(v)) if v.dim() == dim => return Some(v),
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "ignoring cached vectors"),
            }
        }
        if let Some(dir) = &self.prebuilt {
            tracing::warn!(
                dir = %dir.display(),
                "the --index folder holds no vectors for this spec and model (rebuild it with `apigate index build`); computing them"
            );
        }
        None
    }
}

/// Embeds every operation of `index`; `progress` is told how many are done.
pub(crate) fn compute(
    index: &Index,
    embedder: &Embedder,
    progress: &dyn Fn(usize),
) -> Result<Vectors, EmbedError> {
    let rows = embedder.embed_all(index.embedding_texts(), progress)?;
    Ok(Vectors::new(embedder.dim(), rows)?)
}

/// Writes `vectors` for `index` under `embedder` into `dir`.
pub fn save(
    dir: &Path,
    index: &Index,
    embedder: &Embedder,
    vectors: &Vectors,
) -> Result<PathBuf, VectorError> {
    let key = vectors::cache_key(embedder.hash(), index.embedding_texts());
    vectors::save(dir, &key, vectors)
}

/// Makes `index` hybrid now, on this thread: with vectors from `dirs`, else computed (and
/// cached; `progress` is told how many operations are done). For the CLI (`search`, `eval`);
/// servers use [`start`].
pub fn enable_now(
    index: &Index,
    embedder: &Arc<Embedder>,
    dirs: &VectorDirs,
    progress: &dyn Fn(usize),
) -> Result<(), EmbedError> {
    if embedder.is_static() {
        // Milliseconds: nothing to report, nothing to cache.
        return Ok(index.enable_dense(embedder.clone(), compute(index, embedder, &|_| {})?)?);
    }
    let vectors = match dirs.load(index, embedder) {
        Some(v) => v,
        None => {
            let v = compute(index, embedder, progress)?;
            if let Some(dir) = &dirs.cache
                && let Err(e) = save(dir, index, embedder, &v)
            {
                tracing::warn!(error = %e, "could not cache the operation vectors");
            }
            v
        }
    };
    Ok(index.enable_dense(embedder.clone(), vectors)?)
}

/// Makes `index` hybrid: at once when `dirs` hold its vectors (the model is then built now and
/// warmed up on a background thread), else after building the model and an embedding pass on
/// a background thread, so start-up only waits for reading and hashing the model's files.
/// Returns that thread's handle; the server does not wait for it.
pub fn start(
    index: Arc<Index>,
    files: ModelFiles,
    dirs: VectorDirs,
) -> Result<Option<std::thread::JoinHandle<()>>, EmbedError> {
    let model = files.id();
    if files.is_static() {
        // Microseconds per operation: hybrid from the first request, no cache needed.
        let started = Instant::now();
        let embedder = Arc::new(Embedder::from_files(files)?);
        enable_now(&index, &embedder, &dirs, &|_| {})?;
        tracing::info!(
            operations = index.len(),
            %model,
            ms = started.elapsed().as_millis() as u64,
            "ranker: hybrid (operations embedded)"
        );
        return Ok(None);
    }
    if let Some(v) = dirs.load_for(&index, &model.hash, files.dim()) {
        let embedder = Arc::new(Embedder::from_files(files)?);
        match index.enable_dense(embedder.clone(), v) {
            Ok(()) => {
                tracing::info!(
                    operations = index.len(),
                    %model,
                    "ranker: hybrid (operation vectors loaded from disk)"
                );
                // The first forward pass is several times slower than the next ones (buffers,
                // the matrix library's threads): pay it now, not in the first query.
                let warm = std::thread::Builder::new()
                    .name("apigate-embed".into())
                    .spawn(move || {
                        if let Err(e) = embedder.embed_batch(&["warm up"]) {
                            tracing::warn!(error = %e, "the embedding model failed to run");
                        }
                        crate::heap::release_freed();
                    });
                return Ok(warm.ok());
            }
            Err(e) => {
                tracing::warn!(error = %e, "cached vectors do not fit; recomputing");
                return Ok(spawn_embedding(index, Ok(embedder), dirs, model));
            }
        }
    }
    Ok(spawn_embedding(index, Err(files), dirs, model))
}

/// Makes `index` (a reload's) hybrid with the model of `previous` (the index it replaces), on
/// this thread: an operation whose embedding text `previous` has keeps its vector, only the
/// others are embedded (a reload that changed a few operations costs a few forward passes, not
/// the whole spec's). Returns how many were embedded; `None` when `previous` is not hybrid
/// (yet), and the caller starts the index as at start-up.
pub fn carry_over(
    previous: &Index,
    index: &Index,
    dirs: &VectorDirs,
) -> Option<Result<usize, EmbedError>> {
    // A child of `index`: reads the previous version's model and vectors in place.
    let dense = previous.dense.load_full()?;
    let (embedder, old) = (&dense.embedder, &dense.vectors);
    let rows: std::collections::HashMap<&str, usize> = previous
        .embedding_texts()
        .iter()
        .enumerate()
        .map(|(i, t)| (t.as_str(), i))
        .collect();
    let texts = index.embedding_texts();
    let missing: Vec<&str> = texts
        .iter()
        .map(String::as_str)
        .filter(|t| !rows.contains_key(t))
        .collect();
    let run = || -> Result<usize, EmbedError> {
        let fresh = embedder.embed_all(&missing, &|_| {})?;
        let fresh: std::collections::HashMap<&str, Vec<f32>> =
            missing.iter().copied().zip(fresh).collect();
        let all = texts
            .iter()
            .map(|t| match rows.get(t.as_str()) {
                Some(&i) => old.row(i).to_vec(),
                None => fresh.get(t.as_str()).cloned().unwrap_or_default(),
            })
            .collect();
        let vectors = Vectors::new(embedder.dim(), all)?;
        if let Some(dir) = &dirs.cache
            && !missing.is_empty()
            && let Err(e) = save(dir, index, embedder, &vectors)
        {
            tracing::warn!(error = %e, "could not cache the operation vectors");
        }
        index.enable_dense(embedder.clone(), vectors)?;
        Ok(missing.len())
    };
    Some(run())
}

/// Builds the model (unless built) and embeds `index` on a background thread.
fn spawn_embedding(
    index: Arc<Index>,
    model_or_files: Result<Arc<Embedder>, ModelFiles>,
    dirs: VectorDirs,
    model: ModelId,
) -> Option<std::thread::JoinHandle<()>> {
    tracing::info!(
        operations = index.len(),
        %model,
        "ranker: lexical until the operations are embedded in the background"
    );
    index.expect_dense(model);
    let spawned = std::thread::Builder::new()
        .name("apigate-embed".into())
        .spawn(move || {
            let embedder = match model_or_files {
                Ok(embedder) => embedder,
                Err(files) => match Embedder::from_files(files) {
                    Ok(e) => Arc::new(e),
                    Err(e) => {
                        tracing::error!(error = %e, "the embedding model does not load; the ranker stays lexical");
                        return;
                    }
                },
            };
            embed_in_background(&index, embedder, &dirs)
        });
    match spawned {
        Ok(handle) => Some(handle),
        Err(e) => {
            tracing::error!(error = %e, "could not start the embedding thread; staying lexical");
            None
        }
    }
}

fn embed_in_background(index: &Index, embedder: Arc<Embedder>, dirs: &VectorDirs) {
    let started = Instant::now();
    let total = index.len();
    let progress = |done: usize| tracing::debug!(done, total, "embedding operations");
    let vectors = match compute(index, &embedder, &progress) {
        Ok(v) => v,
        Err(e) => {
            tracing::error!(error = %e, "embedding the operations failed; the ranker stays lexical");
            return;
        }
    };
    if let Some(dir) = &dirs.cache {
        match save(dir, index, &embedder, &vectors) {
            Ok(path) => tracing::info!(path = %path.display(), "operation vectors cached"),
            Err(e) => tracing::warn!(error = %e, "could not cache the operation vectors"),
        }
    }
    match index.enable_dense(embedder, vectors) {
        Ok(()) => tracing::info!(
            operations = total,
            model = %index.model().map(|m| m.to_string()).unwrap_or_default(),
            seconds = format!("{:.1}", started.elapsed().as_secs_f64()),
            "ranker: hybrid (operations embedded)"
        ),
        Err(e) => tracing::error!(error = %e, "the ranker stays lexical"),
    }
    // The embedding pass's batches are freed: give them back.
    crate::heap::release_freed();
}
