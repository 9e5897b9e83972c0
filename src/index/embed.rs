//! The embedding model, run in-process, in one of two forms behind one [`Embedder`]:
//!
//! - **static** (the default, built into the binary: `models/static-api`, [`ModelFiles::builtin`]):
//!   one vector per vocabulary token, distilled from the sentence encoder below
//!   (`static_model`); a text costs a tokenisation and a sum. A folder with `static.bin` and
//!   `tokenizer.json` is one too.
//! - **encoder**: all-MiniLM-L6-v2 (a 6-layer BERT) with candle on the CPU, mean pooling over
//!   the attention mask, L2-normalised (the sentence-transformers recipe for this model), from
//!   a folder with `model.safetensors`, `tokenizer.json` and `config.json`
//!   (`scripts/fetch-model.sh` fetches one; `models/minilm-api` is the one the static table is
//!   distilled from). Milliseconds per text.
//!
//! Recent query vectors are cached.

mod static_model;

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use sha2::{Digest, Sha256};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

/// The files an encoder's folder must hold.
pub(crate) const MODEL_FILES: [&str; 3] = ["model.safetensors", "tokenizer.json", "config.json"];

/// The file that makes a folder a static model's (with `tokenizer.json`).
pub(crate) const STATIC_FILE: &str = "static.bin";

/// The name the built-in static model goes by.
pub const BUILTIN_MODEL: &str = "static-api";

/// The built-in model's files, compiled into the binary.
static BUILTIN_TABLE: &[u8] = include_bytes!("../../models/static-api/static.bin");
static BUILTIN_TOKENIZER: &[u8] = include_bytes!("../../models/static-api/tokenizer.json");

/// Tokens per input beyond this are cut (the model's `max_seq_length`).
const MAX_TOKENS: usize = 256;

/// A text is cut to this many bytes before it is tokenised: more than [`MAX_TOKENS`] tokens
/// worth, so a spec's megabyte-long summary costs no more than a sentence.
const MAX_TEXT_BYTES: usize = 8 * 1024;

/// Inputs per forward pass at index time. Inputs are sorted by length first, so a batch pads
/// to a length close to each of its inputs.
pub(crate) const BATCH: usize = 32;

/// Bytes of recent queries and their vectors kept (each entry weighs its text plus its vector).
const QUERY_CACHE_BYTES: u64 = 16 * 1024 * 1024;

/// A query is embedded, and cached, by at most its first this many characters.
pub(crate) const QUERY_KEY_CHARS: usize = 1000;

/// Why the model could not be loaded or run.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error(
        "embedding model folder {dir}: {file} is missing (an encoder's folder holds model.safetensors, tokenizer.json and config.json, as scripts/fetch-model.sh DIR fetches them; a static model's static.bin and tokenizer.json)"
    )]
    Missing { dir: PathBuf, file: &'static str },
    #[error("embedding model: reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("embedding model: config.json is not a BERT config: {0}")]
    Config(serde_json::Error),
    #[error("embedding model: tokenizer: {0}")]
    Tokenizer(String),
    #[error("embedding model: {0}")]
    Candle(#[from] candle_core::Error),
    #[error("embedding model: {0}")]
    Vectors(#[from] super::VectorError),
    #[error("embedding model: {0}")]
    Table(static_model::TableError),
    #[error("embedding model: {path} is not a regular file")]
    NotAFile { path: PathBuf },
    #[error("embedding model: {path} is over {max} bytes; is this folder a model's?")]
    TooLarge { path: PathBuf, max: u64 },
}

/// A model's name (its folder's) and the hash of its files.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ModelId {
    pub name: String,
    pub hash: String,
}

impl std::fmt::Display for ModelId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.name, self.hash)
    }
}

/// A model's files, read and hashed but not yet built into a model: enough to know which
/// model it is (for the vector cache's key) before paying for [`Embedder::from_files`].
pub struct ModelFiles {
    form: Form,
    tokenizer: Cow<'static, [u8]>,
    hash: String,
    name: String,
}

/// What the tokenizer feeds.
enum Form {
    Encoder {
        weights: Vec<u8>,
        config: Config,
    },
    Static {
        table: Cow<'static, [u8]>,
        dim: usize,
    },
}

impl ModelFiles {
    /// The static model compiled into the binary.
    pub fn builtin() -> ModelFiles {
        ModelFiles::new_static(
            Cow::Borrowed(BUILTIN_TABLE),
            Cow::Borrowed(BUILTIN_TOKENIZER),
            BUILTIN_MODEL.to_string(),
        )
    }

    fn new_static(
        table: Cow<'static, [u8]>,
        tokenizer: Cow<'static, [u8]>,
        name: String,
    ) -> ModelFiles {
        let hash = hash_of(&[&table, &tokenizer]);
        // A damaged header is refused when the model is built.
        let dim = static_model::check(&table).map_or(0, |(_, dim)| dim);
        ModelFiles {
            form: Form::Static { table, dim },
            tokenizer,
            hash,
            name,
        }
    }

    /// Reads the files in `dir` (a static model's when it holds `static.bin`, else an
    /// encoder's), hashes them and parses `config.json`.
    pub fn read(dir: &Path) -> Result<ModelFiles, EmbedError> {
        let read = |file: &'static str| read_capped(dir, file);
        let name = dir
            .file_name()
            .map_or_else(|| "model".into(), |n| n.to_string_lossy().into_owned());
        if std::fs::symlink_metadata(dir.join(STATIC_FILE)).is_ok() {
            // The table's header is checked before the tokenizer is read and parsed.
            let table = read(STATIC_FILE)?;
            static_model::check(&table).map_err(EmbedError::Table)?;
            let tokenizer = read("tokenizer.json")?;
            return Ok(ModelFiles::new_static(
                Cow::Owned(table),
                Cow::Owned(tokenizer),
                name,
            ));
        }
        let [weights, tokenizer, config] = MODEL_FILES.map(read);
        let (weights, tokenizer, config) = (weights?, tokenizer?, config?);
        let hash = hash_of(&[&weights, &tokenizer, &config]);
        let config: Config = serde_json::from_slice(&config).map_err(EmbedError::Config)?;
        Ok(ModelFiles {
            form: Form::Encoder { weights, config },
            tokenizer: Cow::Owned(tokenizer),
            hash,
            name,
        })
    }

    /// Which model these files are.
    pub fn id(&self) -> ModelId {
        ModelId {
            name: self.name.clone(),
            hash: self.hash.clone(),
        }
    }

    /// Length of the vectors the model makes.
    pub fn dim(&self) -> usize {
        match &self.form {
            Form::Encoder { config, .. } => config.hidden_size,
            Form::Static { dim, .. } => *dim,
        }
    }

    /// A static model: built in microseconds, and embeds a spec in milliseconds.
    pub fn is_static(&self) -> bool {
        matches!(self.form, Form::Static { .. })
    }
}

/// The most a model folder's file may weigh: an operator's typo (a folder of something else)
/// is refused before it is read into memory.
fn file_cap(file: &str) -> u64 {
    match file {
        "model.safetensors" => 1 << 30,
        STATIC_FILE => 256 << 20,
        "tokenizer.json" => 16 << 20,
        _ => 1 << 20,
    }
}

/// `dir/file`, read if it is a regular file (symlinks followed) within [`file_cap`].
fn read_capped(dir: &Path, file: &'static str) -> Result<Vec<u8>, EmbedError> {
    use std::io::Read as _;
    let path = dir.join(file);
    let meta = match std::fs::metadata(&path) {
        Ok(meta) => meta,
        Err(_) if std::fs::symlink_metadata(&path).is_err() => {
            return Err(EmbedError::Missing {
                dir: dir.to_path_buf(),
                file,
            });
        }
        Err(source) => return Err(EmbedError::Read { path, source }),
    };
    if !meta.is_file() {
        return Err(EmbedError::NotAFile { path });
    }
    let cap = file_cap(file);
    let mut data = Vec::new();
    std::fs::File::open(&path)
        .and_then(|f| f.take(cap + 1).read_to_end(&mut data))
        .map_err(|source| EmbedError::Read {
            path: path.clone(),
            source,
        })?;
    if data.len() as u64 > cap {
        return Err(EmbedError::TooLarge { path, max: cap });
    }
    Ok(data)
}

/// A short hash over files' lengths and bytes.
fn hash_of(files: &[&[u8]]) -> String {
    let mut hasher = Sha256::new();
    for data in files {
        hasher.update((data.len() as u64).to_le_bytes());
        hasher.update(data);
    }
    hex::encode(&hasher.finalize()[..12])
}

/// A loaded model. `Send + Sync`: one per process, shared by the background indexer and
/// every query.
pub struct Embedder {
    engine: Engine,
    tokenizer: Tokenizer,
    dim: usize,
    hash: String,
    name: String,
    queries: moka::sync::Cache<String, Arc<[f32]>>,
}

/// What turns token ids into vectors.
enum Engine {
    Encoder {
        model: Box<BertModel>,
        device: Device,
    },
    Static(static_model::StaticModel),
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("dim", &self.dim)
            .field("name", &self.name)
            .field("hash", &self.hash)
            .finish()
    }
}

impl Embedder {
    /// Loads the model in `dir`. Takes a fraction of a second (the weights are 90 MB).
    pub fn load(dir: &Path) -> Result<Embedder, EmbedError> {
        Embedder::from_files(ModelFiles::read(dir)?)
    }

    /// Builds the model from files already read (the slower half of [`Embedder::load`] for an
    /// encoder).
    pub(crate) fn from_files(files: ModelFiles) -> Result<Embedder, EmbedError> {
        let ModelFiles {
            form,
            tokenizer,
            hash,
            name,
        } = files;
        let mut tokenizer =
            Tokenizer::from_bytes(&tokenizer).map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..TruncationParams::default()
            }))
            .map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        let (engine, dim) = match form {
            Form::Encoder { weights, config } => {
                let device = Device::Cpu;
                let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &device)?;
                let model = BertModel::load(vb, &config)?;
                // The shipped tokenizer.json pads every input to 128 tokens; pad each batch
                // only to its longest input instead.
                tokenizer.with_padding(Some(PaddingParams {
                    strategy: PaddingStrategy::BatchLongest,
                    ..PaddingParams::default()
                }));
                (
                    Engine::Encoder {
                        model: Box::new(model),
                        device,
                    },
                    config.hidden_size,
                )
            }
            Form::Static { table, .. } => {
                let model = static_model::StaticModel::parse(table).map_err(EmbedError::Table)?;
                tokenizer.with_padding(None);
                let dim = model.dim();
                (Engine::Static(model), dim)
            }
        };
        Ok(Embedder {
            engine,
            tokenizer,
            dim,
            hash,
            name,
            queries: moka::sync::Cache::builder()
                .max_capacity(QUERY_CACHE_BYTES)
                .weigher(|key: &String, v: &Arc<[f32]>| {
                    u32::try_from(key.len() + std::mem::size_of_val::<[f32]>(v)).unwrap_or(u32::MAX)
                })
                .build(),
        })
    }

    /// The static model compiled into the binary.
    pub fn builtin() -> Result<Embedder, EmbedError> {
        Embedder::from_files(ModelFiles::builtin())
    }

    /// A static model: embedding costs microseconds, so callers need not move it off the
    /// async runtime or into the background.
    pub fn is_static(&self) -> bool {
        matches!(self.engine, Engine::Static(_))
    }

    /// Length of each vector (384 for all-MiniLM-L6-v2, 256 for the built-in static model).
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// A short hash of the model's files: vectors from another model are never reused.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// The model's name: [`BUILTIN_MODEL`], or its folder's.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Which model this is, as `/health`, the start-up line and `apigate eval` name it.
    pub fn id(&self) -> ModelId {
        ModelId {
            name: self.name.clone(),
            hash: self.hash.clone(),
        }
    }

    /// Unit vectors for `texts`: for an encoder, in one forward pass padded to the longest
    /// input.
    pub fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let texts: Vec<&str> = texts.iter().map(|t| cut(t, MAX_TEXT_BYTES)).collect();
        let (model, device) = match &self.engine {
            Engine::Static(table) => {
                return texts
                    .iter()
                    .map(|t| {
                        let encoding = self
                            .tokenizer
                            .encode_fast(*t, false)
                            .map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
                        Ok(table.embed(encoding.get_ids()))
                    })
                    .collect();
            }
            Engine::Encoder { model, device } => (model, device),
        };
        let encodings = self
            .tokenizer
            .encode_batch(texts, true)
            .map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        let ids = encodings
            .iter()
            .map(|e| Tensor::new(e.get_ids(), device))
            .collect::<Result<Vec<_>, _>>()?;
        let mask = encodings
            .iter()
            .map(|e| Tensor::new(e.get_attention_mask(), device))
            .collect::<Result<Vec<_>, _>>()?;
        let ids = Tensor::stack(&ids, 0)?;
        let mask = Tensor::stack(&mask, 0)?;
        let types = ids.zeros_like()?;
        let hidden = model.forward(&ids, &types, Some(&mask))?;
        let pooled = normalize(&mean_pool(&hidden, &mask)?)?;
        Ok(pooled.to_vec2::<f32>()?)
    }

    /// Unit vectors for many texts, in batches of [`BATCH`] sorted by length; `progress` is
    /// told how many are done after each batch. Results are in the order of `texts`.
    pub(crate) fn embed_all<T: AsRef<str>>(
        &self,
        texts: &[T],
        progress: &dyn Fn(usize),
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts[i].as_ref().len());
        let mut out = vec![Vec::new(); texts.len()];
        let mut done = 0;
        for chunk in order.chunks(BATCH) {
            let batch: Vec<&str> = chunk.iter().map(|&i| texts[i].as_ref()).collect();
            for (&i, v) in chunk.iter().zip(self.embed_batch(&batch)?) {
                out[i] = v;
            }
            done += chunk.len();
            progress(done);
        }
        Ok(out)
    }

    /// The vector of a search query: a static model's computed each time, an encoder's from
    /// the cache of recent queries when it was seen before. The model is uncased, so case does not change the key.
    pub fn embed_query(&self, text: &str) -> Result<Arc<[f32]>, EmbedError> {
        let key = query_key(text);
        if self.is_static() {
            // Cheaper than the cache's bookkeeping; nothing to keep.
            return Ok(self
                .embed_batch(&[key.as_str()])?
                .pop()
                .unwrap_or_default()
                .into());
        }
        if let Some(v) = self.queries.get(&key) {
            return Ok(v);
        }
        let v: Arc<[f32]> = self
            .embed_batch(&[key.as_str()])?
            .pop()
            .unwrap_or_default()
            .into();
        self.queries.insert(key, v.clone());
        Ok(v)
    }

    /// What the cache of recent queries weighs, in bytes (texts and vectors).
    pub fn query_cache_bytes(&self) -> u64 {
        self.queries.run_pending_tasks();
        self.queries.weighted_size()
    }

    /// The vector of a recent query, without running the model.
    pub fn cached_query(&self, text: &str) -> Option<Arc<[f32]>> {
        self.queries.get(&query_key(text))
    }
}

/// `text` up to `max` bytes, at a character boundary.
fn cut(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// What a query is embedded and cached as: trimmed, lower-cased, at most
/// [`QUERY_KEY_CHARS`] characters, so a huge query neither fills the cache nor the model.
fn query_key(text: &str) -> String {
    text.trim()
        .chars()
        .take(QUERY_KEY_CHARS)
        .collect::<String>()
        .to_lowercase()
}

/// Mean of the token vectors `hidden` `[batch, tokens, dim]` over the tokens whose `mask`
/// `[batch, tokens]` is 1: padding does not count.
pub(crate) fn mean_pool(hidden: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
    let mask = mask.to_dtype(hidden.dtype())?;
    let summed = hidden.broadcast_mul(&mask.unsqueeze(2)?)?.sum(1)?;
    let counts = mask.sum_keepdim(1)?.clamp(1e-9, f64::MAX)?;
    summed.broadcast_div(&counts)
}

/// Each row of `x` `[batch, dim]` divided by its Euclidean length.
pub(crate) fn normalize(x: &Tensor) -> candle_core::Result<Tensor> {
    let norms = x.sqr()?.sum_keepdim(1)?.sqrt()?.clamp(1e-12, f64::MAX)?;
    x.broadcast_div(&norms)
}

#[cfg(test)]
mod tests;
