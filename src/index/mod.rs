//! Ranking operations for a natural-language query: the index's types and its dense-ranker
//! switch, here; building it (`build`), searching it (`search`) and fusing the lexical and
//! dense scores (`fusion`) in their own files; the knobs in `tuning`. Imports `spec` only;
//! never axum, rmcp or sqlx.
//!
//! Ranking has two stages. The lexical stage (`Index::lexical`, `search`) scores every operation that
//! shares a term with the query: a tantivy BM25 search over separate fields (summary or the
//! description's first sentence, operationId, path, tags and API title, description,
//! parameter and body property names) with per-field boosts, where each query concept is a
//! disjunction of what the user wrote and the vocabulary's alternatives (`vocab`). The second
//! stage adjusts those scores with evidence that is not about single words (HTTP-method
//! intent, collection vs item path, path depth, how many query concepts an operation covers,
//! deprecation, and in a pooled index which API fits the query) and applies the filters.
//!
//! The dense ranker (`embed`, `vectors`) is optional: an index starts lexical, and
//! `Index::enable_dense` switches it to hybrid once the operation vectors are computed (at once
//! with the built-in static model) or loaded (`background`). A hybrid query carries its own vector
//! (`Index::query_vector`); its ranking is a weighted sum of the lexical score (over the best
//! one) and the cosine similarity (`Tuning::dense_weight`), where the lexical side counts only
//! as much as the query's words were found in the spec at all (`Index::fuse`, `fusion`).

mod analyze;
pub mod background;
mod bm25;
mod build;
pub mod embed;
mod fusion;
mod search;
mod tuning;
pub mod vectors;
mod vocab;

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwapOption;

use crate::spec::Method;

pub use embed::{EmbedError, Embedder, ModelId};
pub use tuning::{FIELD_COUNT, Tuning, TuningError};
pub use vectors::{VectorError, Vectors};

/// Why an index could not be built.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("building the search index: {0}")]
    Tantivy(#[from] tantivy::TantivyError),
}

/// A search request.
#[derive(Clone, Copy)]
pub struct Query<'a> {
    /// Natural-language text; may be empty when only filters are given.
    pub text: &'a str,
    /// Only operations with this HTTP method.
    pub method: Option<Method>,
    /// Only operations with this tag (case-insensitive), or, written `/name`, about this
    /// resource (the path's first segment past `api` and a version).
    pub tag: Option<&'a str>,
    /// At most this many hits.
    pub limit: usize,
    /// Operations the caller may use (permissions), by spec position and operation index;
    /// `None` = all.
    pub allowed: Option<&'a (dyn Fn(usize, usize) -> bool + Sync)>,
    /// The query's embedding ([`Index::query_vector`]); with it a hybrid index ranks by both
    /// signals, without it lexically.
    pub vector: Option<&'a [f32]>,
}

impl<'a> Query<'a> {
    /// A query with no filters.
    pub fn text(text: &'a str, limit: usize) -> Query<'a> {
        Query {
            text,
            method: None,
            tag: None,
            limit,
            allowed: None,
            vector: None,
        }
    }
}

impl std::fmt::Debug for Query<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Query")
            .field("text", &self.text)
            .field("method", &self.method)
            .field("tag", &self.tag)
            .field("limit", &self.limit)
            .field("allowed", &self.allowed.is_some())
            .field("vector", &self.vector.is_some())
            .finish()
    }
}

/// One ranked operation: `specs[spec].operations[op]` of the slice given to [`Index::build`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    pub spec: usize,
    pub op: usize,
    pub score: f32,
}

/// Up to this many operations, no query word is dropped for being common (see `common_df`).
const SMALL_INDEX_DOCS: usize = 300;

/// What the second stage needs to know about each document.
struct DocMeta {
    spec: usize,
    op: usize,
    method: Method,
    tags: Vec<String>,
    /// [`crate::spec::Operation::resource`]: a `tag` filter starting with `/` names it.
    resource: String,
    deprecated: bool,
    /// The path ends with a `{parameter}` (one item rather than a collection).
    item: bool,
    /// The path has `{parameters}` at all (RPC-style paths have none).
    templated: bool,
    segments: usize,
}

/// An in-memory index over the operations of one or more specs. `Send + Sync`: build once,
/// query concurrently.
pub struct Index {
    /// For each field, its terms' BM25 weights and postings (read from tantivy at build); a
    /// term's postings count its documents.
    bm25: bm25::FieldScores,
    /// For each term, the documents holding it in any field (ascending), to count how many
    /// query concepts a document covers.
    postings: HashMap<String, Vec<u32>>,
    docs: Vec<DocMeta>,
    tuning: Tuning,
    /// What the dense ranker embeds for each document, in document order.
    embedding_texts: Vec<String>,
    /// The dense ranker, once its vectors are ready.
    dense: ArcSwapOption<Dense>,
    /// The model whose vectors are being computed, until `dense` is set.
    coming: ArcSwapOption<ModelId>,
}

/// The dense ranker: the model (for query vectors) and one vector per document.
struct Dense {
    embedder: Arc<Embedder>,
    vectors: Vectors,
}

/// Which ranking an index uses now, as `/health` and `apigate eval` name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Ranker {
    Lexical,
    Dense,
    Hybrid,
}

impl Ranker {
    pub fn as_str(self) -> &'static str {
        match self {
            Ranker::Lexical => "lexical",
            Ranker::Dense => "dense",
            Ranker::Hybrid => "hybrid",
        }
    }
}

impl std::str::FromStr for Ranker {
    type Err = String;

    fn from_str(s: &str) -> Result<Ranker, String> {
        match s {
            "lexical" => Ok(Ranker::Lexical),
            "dense" => Ok(Ranker::Dense),
            "hybrid" => Ok(Ranker::Hybrid),
            _ => Err(format!("{s:?} is not a ranker: lexical, dense or hybrid")),
        }
    }
}

/// The lexical fields, in the order of [`Tuning::fields`].
const FIELD_NAMES: [&str; FIELD_COUNT] = ["summary", "id", "path", "tags", "desc", "params"];
const TOKENIZER: &str = "apigate_terms";
const ORD: &str = "ord";

impl Index {
    /// The text the dense ranker embeds for each operation, in document order.
    pub fn embedding_texts(&self) -> &[String] {
        &self.embedding_texts
    }

    /// Switches to hybrid ranking with `vectors` (one per document, by `embedder`).
    pub(crate) fn enable_dense(
        &self,
        embedder: Arc<Embedder>,
        vectors: Vectors,
    ) -> Result<(), VectorError> {
        if vectors.len() != self.docs.len() || vectors.dim() != embedder.dim() {
            return Err(VectorError::Mismatch {
                rows: vectors.len(),
                dim: vectors.dim(),
                operations: self.docs.len(),
                model_dim: embedder.dim(),
            });
        }
        self.dense
            .store(Some(Arc::new(Dense { embedder, vectors })));
        Ok(())
    }

    /// Records that `model` is embedding the operations (the index ranks lexically until
    /// [`Index::enable_dense`]), so [`Index::model`] can name it meanwhile.
    pub(crate) fn expect_dense(&self, model: ModelId) {
        self.coming.store(Some(Arc::new(model)));
    }

    /// The model that ranks with the words, or will once its vectors are ready (then
    /// [`Index::ranker`] is still `Lexical`); `None` for a lexical-only index.
    pub fn model(&self) -> Option<ModelId> {
        match self.dense.load().as_ref() {
            Some(dense) => Some(dense.embedder.id()),
            None => self.coming.load().as_deref().cloned(),
        }
    }

    /// `Hybrid` once [`Index::enable_dense`] ran, else `Lexical`.
    pub fn ranker(&self) -> Ranker {
        if self.dense.load().is_some() {
            Ranker::Hybrid
        } else {
            Ranker::Lexical
        }
    }

    /// The index is hybrid with a static model: a query's embedding costs microseconds, so it
    /// may be computed on the async runtime.
    pub(crate) fn embeds_cheaply(&self) -> bool {
        self.dense
            .load()
            .as_ref()
            .is_some_and(|d| d.embedder.is_static())
    }

    /// The embedding of a recent query, if the index is hybrid and has it cached: costs no
    /// model run, so it may be called on the async runtime.
    pub(crate) fn cached_query_vector(&self, text: &str) -> Option<Arc<[f32]>> {
        self.dense.load().as_ref()?.embedder.cached_query(text)
    }

    /// The embedding of a query for [`Query::vector`]: `None` while the index is lexical, for
    /// blank text, or if the model fails (logged; the query then ranks lexically). Costs a
    /// forward pass of the model (milliseconds) unless the query was seen recently: call it
    /// off the async runtime.
    pub(crate) fn query_vector(&self, text: &str) -> Option<Arc<[f32]>> {
        let dense = self.dense.load_full()?;
        if text.trim().is_empty() {
            return None;
        }
        match dense.embedder.embed_query(text) {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::warn!(error = %e, "embedding the query failed; ranking it lexically");
                None
            }
        }
    }

    /// Whether the index holds more than one spec's operations (its documents are in spec
    /// order, so the last names the highest spec).
    pub fn is_pooled(&self) -> bool {
        self.docs.last().is_some_and(|d| d.spec > 0)
    }

    /// Number of indexed operations.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }
}

#[cfg(test)]
mod tests;
