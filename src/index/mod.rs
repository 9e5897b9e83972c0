//! Ranking operations for a natural-language query: the tantivy index, query building and
//! filters. Imports `spec` only; never axum, rmcp or sqlx.
//!
//! Ranking has two stages. The lexical stage (`Index::lexical`) scores every operation that
//! shares a term with the query: a tantivy BM25 search over separate fields (summary or the
//! description's first sentence, operationId, path, tags and API title, description,
//! parameter and body property names) with per-field boosts, where each query concept is a
//! disjunction of what the user wrote and the vocabulary's alternatives (`vocab`). The second
//! stage adjusts those scores with evidence that is not about single words (HTTP-method
//! intent, collection vs item path, path depth, how many query concepts an operation covers,
//! deprecation, and in a pooled index which API fits the query) and applies the filters.
//!
//! The dense ranker (`embed`, `vectors`) is optional and arrives late: an index starts
//! lexical, and `Index::enable_dense` switches it to hybrid once the operation vectors are
//! loaded or computed (`background`). A hybrid query carries its own vector
//! (`Index::query_vector`); its ranking is a weighted sum of the lexical score (over the best
//! one) and the cosine similarity (`Tuning::dense_weight`), where the lexical side counts only
//! as much as the query's words were found in the spec at all (`Index::fuse`).

mod analyze;
pub mod background;
pub mod embed;
pub mod eval;
pub mod learned;
pub mod vectors;
mod vocab;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use arc_swap::ArcSwapOption;

use tantivy::query::{BooleanQuery, BoostQuery, DisjunctionMaxQuery, Occur, TermQuery};
use tantivy::schema::{FAST, Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions};
use tantivy::tokenizer::{TextAnalyzer, WhitespaceTokenizer};
use tantivy::{Searcher, TantivyDocument, Term, collector::TopDocs};

use crate::spec::{Operation, Spec};
use analyze::Stems;
pub use embed::{EmbedError, Embedder, ModelId};
pub use vectors::{VectorError, Vectors};
use vocab::{Analyzed, Intent};

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
    /// Only operations with this HTTP method (case-insensitive).
    pub method: Option<&'a str>,
    /// Only operations with this tag (case-insensitive).
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

/// Ranking knobs. [`Tuning::default`] is what production uses; eval can switch ideas off to
/// measure what each contributes.
#[derive(Debug, Clone, Copy)]
pub struct Tuning {
    pub synonyms: bool,
    /// Weight of a vocabulary alternative relative to the user's own words.
    pub synonym_weight: f32,
    /// Score multiplier for a full match of the method intent: `1 + intent_boost * fit`.
    pub intent_boost: f32,
    /// Score multiplier for deprecated operations.
    pub deprecated_factor: f32,
    /// Multiplier `1 + shape_boost * fit` for the path shape the query implies: creating and
    /// listing (plural nouns, "all", "which") act on collections (`/pets`), updating and
    /// deleting on items (`/pets/{id}`).
    pub shape_boost: f32,
    /// Score divisor `1 + depth_penalty * segments`: sub-resources rank a little below the
    /// resource itself.
    pub depth_penalty: f32,
    /// Coordination: scores are multiplied by `(matched concepts / concepts) ^ coord`, so an
    /// operation that covers more of the query beats one that matches a single word often.
    pub coord: f32,
    /// In a pooled index, scores are multiplied by `(spec's strength / best strength) ^
    /// spec_affinity`, where a spec's strength is the mean of its five best scores: the API
    /// that answers the query best as a whole lends weight to its operations. No effect with
    /// one spec.
    pub spec_affinity: f32,
    /// Field boosts: summary, operationId, path, tags (with the API's title), description,
    /// parameters, and what the spec says around the operation (`knowledge`: parameter and
    /// body-property descriptions, enum values, the tags' descriptions). 0 leaves a field
    /// out.
    pub fields: [f32; 7],
    pub stemming: bool,
    /// Vocabulary alternatives are looked up in the first this-many fields only (the short,
    /// precise ones); the user's own words in all of them.
    pub alternative_fields: usize,
    /// A (term, field) pair found in more than this share of documents is not searched
    /// (coverage still counts it), in indexes of more than `SMALL_INDEX_DOCS` operations.
    pub common_df: f32,
    /// Hybrid ranking: `(1 - w) * lexical / best lexical + w * cosine`. 1 ranks by the
    /// embedding alone.
    pub dense_weight: f32,
    /// Dense candidates: the this-many operations closest to the query (the others get no
    /// dense score).
    pub dense_candidates: usize,
    /// The second stage's rerank looks at the first stage's this-many best operations.
    pub rerank_depth: usize,
    /// Rerank: multiplier `1 + resource_boost` when the query names the resource the
    /// operation acts on (the nouns of the path's last literal segment).
    pub resource_boost: f32,
    /// Rerank: the fused (hybrid) score is multiplied by `(covered concepts / concepts) ^
    /// rerank_coverage`; the lexical score already is (`coord`), the cosine is not.
    pub rerank_coverage: f32,
    /// Rerank: multiplier `1 + dense_rank_boost / (1 + dense rank)` (rank 0 = nearest).
    pub dense_rank_boost: f32,
    /// Rerank: divisor `1 + literal_penalty` when an operation covers a single concept of a
    /// query of three or more.
    pub literal_penalty: f32,
    /// Spec affinity: a spec's strength is the mean of its this-many best scores.
    pub affinity_top: usize,
    /// Pooled routing: scores are multiplied by `(route / best route) ^ spec_route`, where a
    /// spec's route is the IDF-weighted share of the query's concepts it has words for at all
    /// (rare words such as "pod" or "playlist" name the API). No effect with one spec.
    pub spec_route: f32,
    /// 1 adds the names of the schemas an operation takes and returns, as words
    /// (`PodDisruptionBudget` → "Pod Disruption Budget"), to the text it is embedded by.
    pub embed_schema_names: f32,
    /// 1 reorders the first stage's best `rerank_depth` operations by the learned linear
    /// model of `learned.rs` (weights trained by `scripts/train-rerank.py`); 0 leaves them.
    pub learned_rerank: f32,
    /// Spec affinity: a spec's strength is divided by `operations ^ affinity_size` (a large
    /// API has more chances of a strong match by accident).
    pub affinity_size: f32,
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            synonyms: true,
            synonym_weight: 0.8,
            intent_boost: 0.5,
            deprecated_factor: 0.9,
            shape_boost: 0.1,
            depth_penalty: 0.05,
            coord: 0.5,
            spec_affinity: 1.0,
            fields: [2.5, 2.0, 1.5, 1.0, 0.7, 0.4, 0.0],
            stemming: true,
            alternative_fields: 6,
            common_df: 0.5,
            dense_weight: 0.45,
            dense_candidates: 50,
            rerank_depth: 20,
            resource_boost: 0.0,
            rerank_coverage: 0.0,
            dense_rank_boost: 0.0,
            literal_penalty: 0.0,
            affinity_top: 5,
            embed_schema_names: 0.0,
            spec_route: 0.0,
            learned_rerank: 0.0,
            affinity_size: 0.05,
        }
    }
}

impl Tuning {
    /// Sets one knob by name (`apigate eval --set NAME=VALUE`, the eval example's `--try`):
    /// the names are the fields', `fields.N` for a field boost.
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        let num = || -> Result<f32, String> {
            value
                .parse::<f32>()
                .map_err(|_| format!("{name}: {value:?} is not a number"))
        };
        match name {
            "synonyms" => self.synonyms = num()? != 0.0,
            "stemming" => self.stemming = num()? != 0.0,
            "synonym_weight" => self.synonym_weight = num()?,
            "intent_boost" => self.intent_boost = num()?,
            "deprecated_factor" => self.deprecated_factor = num()?,
            "shape_boost" => self.shape_boost = num()?,
            "depth_penalty" => self.depth_penalty = num()?,
            "coord" => self.coord = num()?,
            "spec_affinity" => self.spec_affinity = num()?,
            "alternative_fields" => self.alternative_fields = num()? as usize,
            "common_df" => self.common_df = num()?,
            "dense_weight" => self.dense_weight = num()?,
            "dense_candidates" => self.dense_candidates = num()? as usize,
            "rerank_depth" => self.rerank_depth = num()? as usize,
            "resource_boost" => self.resource_boost = num()?,
            "rerank_coverage" => self.rerank_coverage = num()?,
            "dense_rank_boost" => self.dense_rank_boost = num()?,
            "literal_penalty" => self.literal_penalty = num()?,
            "affinity_top" => self.affinity_top = (num()? as usize).max(1),
            "embed_schema_names" => self.embed_schema_names = num()?,
            "spec_route" => self.spec_route = num()?,
            "learned_rerank" => self.learned_rerank = num()?,
            "affinity_size" => self.affinity_size = num()?,
            _ => match name
                .strip_prefix("fields.")
                .and_then(|i| i.parse::<usize>().ok())
            {
                Some(i) if i < self.fields.len() => self.fields[i] = num()?,
                _ => return Err(format!("{name:?} is not a ranking knob")),
            },
        }
        Ok(())
    }
}

/// Up to this many operations, no query word is dropped for being common (see `common_df`).
const SMALL_INDEX_DOCS: usize = 300;

/// What the second stage needs to know about each document.
struct DocMeta {
    spec: usize,
    op: usize,
    method: String,
    tags: Vec<String>,
    deprecated: bool,
    /// The path ends with a `{parameter}` (one item rather than a collection).
    item: bool,
    /// The path has `{parameters}` at all (RPC-style paths have none).
    templated: bool,
    segments: usize,
    /// The nouns of the path's last literal segment (stemmed; verbs of RPC-style names such
    /// as `chat.postMessage` left out): the resource the operation acts on.
    resource: Vec<String>,
}

/// An in-memory index over the operations of one or more specs. `Send + Sync`: build once,
/// query concurrently.
pub struct Index {
    searcher: Searcher,
    fields: [Field; 7],
    /// For each field, the terms it holds and in how many documents.
    field_terms: [HashMap<String, u32>; 7],
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

/// The first stage's ranking of one query, and what it was made of.
struct Stage {
    /// Every matching operation that passed the filters, best first.
    scored: Vec<(usize, f32)>,
    /// The lexical scores with their priors, before fusion, best first (kept only for the
    /// learned rerank's features).
    lexical: Vec<(usize, f32)>,
    /// The cosine of every operation, when the ranking is hybrid.
    cosine: Option<Vec<f32>>,
    covered: Vec<u16>,
    /// [`lexical_confidence`].
    confidence: f32,
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

const FIELD_NAMES: [&str; 7] = [
    "summary",
    "id",
    "path",
    "tags",
    "desc",
    "params",
    "knowledge",
];
/// The `knowledge` field: searched with its own boost, but not counted as covering a query
/// concept (it is long and says much about neighbouring resources).
const KNOWLEDGE: usize = 6;
const TOKENIZER: &str = "apigate_terms";
const ORD: &str = "ord";

impl Index {
    /// Indexes every operation of `specs` (one spec, or several for a pooled index).
    pub fn build(specs: &[&Spec]) -> Result<Index, IndexError> {
        Index::build_with(specs, Tuning::default())
    }

    /// [`Index::build`] with explicit ranking knobs.
    pub fn build_with(specs: &[&Spec], tuning: Tuning) -> Result<Index, IndexError> {
        let mut builder = Schema::builder();
        let text = TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(TOKENIZER)
                .set_index_option(IndexRecordOption::WithFreqs),
        );
        let fields = FIELD_NAMES.map(|name| builder.add_text_field(name, text.clone()));
        let ord = builder.add_u64_field(ORD, FAST);
        let index = tantivy::Index::create_in_ram(builder.build());
        // Documents are analyzed by `analyze` before they reach tantivy; its tokenizer only
        // splits on the spaces between already-final terms.
        index.tokenizers().register(
            TOKENIZER,
            TextAnalyzer::builder(WhitespaceTokenizer::default()).build(),
        );
        let mut writer = index.writer_with_num_threads(1, 32 << 20)?;
        let mut stems = Stems::new();
        let mut docs = Vec::new();
        let mut field_terms: [HashMap<String, u32>; 7] = Default::default();
        let mut postings: HashMap<String, Vec<u32>> = HashMap::new();
        let mut embedding_texts = Vec::new();
        for (s, spec) in specs.iter().enumerate() {
            let tag_descriptions = if tuning.fields[KNOWLEDGE] > 0.0 {
                tag_descriptions(spec)
            } else {
                HashMap::new()
            };
            for (o, op) in spec.operations.iter().enumerate() {
                let texts = document_texts(spec, op, &tag_descriptions, &tuning);
                let mut embedded = embedding_text(&texts);
                if tuning.embed_schema_names > 0.0 {
                    let names = schema_names(spec, op);
                    if !names.is_empty() {
                        embedded.push_str(". ");
                        embedded.push_str(&names.join(", "));
                    }
                }
                embedding_texts.push(embedded);
                let mut doc = TantivyDocument::default();
                let mut all_terms = HashSet::new();
                for (f, ((field, text), known)) in
                    fields.iter().zip(texts).zip(&mut field_terms).enumerate()
                {
                    if f == KNOWLEDGE && tuning.fields[KNOWLEDGE] <= 0.0 {
                        continue;
                    }
                    let terms = if tuning.stemming {
                        stems.terms(&text)
                    } else {
                        analyze::words(&text)
                            .into_iter()
                            .filter(|w| !analyze::is_stop(w))
                            .collect()
                    };
                    doc.add_text(*field, terms.join(" "));
                    let distinct: HashSet<&String> = terms.iter().collect();
                    for term in distinct {
                        *known.entry(term.clone()).or_default() += 1;
                    }
                    if f != KNOWLEDGE {
                        all_terms.extend(terms);
                    }
                }
                for term in all_terms {
                    postings.entry(term).or_default().push(docs.len() as u32);
                }
                doc.add_u64(ord, docs.len() as u64);
                writer.add_document(doc)?;
                docs.push(DocMeta {
                    spec: s,
                    op: o,
                    method: op.method.to_string(),
                    tags: op.tags.iter().map(|t| t.to_lowercase()).collect(),
                    deprecated: op.deprecated,
                    item: op.path.trim_end_matches('/').ends_with('}'),
                    templated: op.path.contains('{'),
                    segments: op.path.split('/').filter(|s| !s.is_empty()).count(),
                    resource: resource_terms(&op.path, &mut stems),
                });
            }
        }
        writer.commit()?;
        let reader = index.reader()?;
        reader.reload()?;
        Ok(Index {
            searcher: reader.searcher(),
            fields,
            field_terms,
            postings,
            docs,
            tuning,
            embedding_texts,
            dense: ArcSwapOption::empty(),
            coming: ArcSwapOption::empty(),
        })
    }

    /// The text the dense ranker embeds for each operation, in document order.
    pub fn embedding_texts(&self) -> &[String] {
        &self.embedding_texts
    }

    /// Switches to hybrid ranking with `vectors` (one per document, by `embedder`).
    pub fn enable_dense(
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
    pub fn expect_dense(&self, model: ModelId) {
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

    /// The embedding of a recent query, if the index is hybrid and has it cached: costs no
    /// model run, so it may be called on the async runtime.
    pub fn cached_query_vector(&self, text: &str) -> Option<Arc<[f32]>> {
        self.dense.load().as_ref()?.embedder.cached_query(text)
    }

    /// The embedding of a query for [`Query::vector`]: `None` while the index is lexical, for
    /// blank text, or if the model fails (logged; the query then ranks lexically). Costs a
    /// forward pass of the model (milliseconds) unless the query was seen recently: call it
    /// off the async runtime.
    pub fn query_vector(&self, text: &str) -> Option<Arc<[f32]>> {
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

    /// Number of indexed operations.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// Ranked operations for `q`, best first, at most `q.limit`. With empty text, every
    /// operation passing the filters in document order (score 0).
    pub fn search(&self, q: &Query<'_>) -> Vec<Hit> {
        self.search_total(q).0
    }

    /// [`Index::search`], plus how many operations matched and passed the filters in all
    /// (before `limit`).
    pub fn search_total(&self, q: &Query<'_>) -> (Vec<Hit>, usize) {
        let mut stems = Stems::new();
        let analyzed = vocab::analyze_query(q.text, &mut stems, self.tuning.synonyms);
        let keep = |d: &DocMeta| self.passes(d, q);
        let dense = q.vector.zip(self.dense.load_full());
        if analyzed.concepts.is_empty() && dense.is_none() {
            let all: Vec<&DocMeta> = self.docs.iter().filter(|d| keep(d)).collect();
            let hits = all
                .iter()
                .take(q.limit)
                .map(|d| Hit {
                    spec: d.spec,
                    op: d.op,
                    score: 0.0,
                })
                .collect();
            return (hits, all.len());
        }
        let learned = self.tuning.learned_rerank > 0.0;
        let mut stage = self.first_stage(q, &analyzed, learned);
        if learned && let Some(model) = learned::model() {
            let features = self.features(&stage, &analyzed);
            let depth = features.len();
            let mut order: Vec<(usize, f32)> = stage.scored[..depth]
                .iter()
                .zip(&features)
                .map(|(&(doc, _), f)| (doc, model.score(f)))
                .collect();
            order.sort_by(|a, b| b.1.total_cmp(&a.1));
            // The stage's scores stay, in order: only which operation holds each changes.
            for (slot, (doc, _)) in stage.scored[..depth].iter_mut().zip(order) {
                slot.0 = doc;
            }
        }
        let scored = stage.scored;
        let total = scored.len();
        let hits = scored
            .into_iter()
            .take(q.limit)
            .map(|(doc, score)| Hit {
                spec: self.docs[doc].spec,
                op: self.docs[doc].op,
                score,
            })
            .collect();
        (hits, total)
    }

    /// The first `rerank_depth` operations of the first stage for `q`, best first, with the
    /// learned rerank's features (what `examples/eval.rs --features` dumps to train it).
    pub fn candidates(&self, q: &Query<'_>) -> Vec<(Hit, learned::Features)> {
        let mut stems = Stems::new();
        let analyzed = vocab::analyze_query(q.text, &mut stems, self.tuning.synonyms);
        let stage = self.first_stage(q, &analyzed, true);
        let features = self.features(&stage, &analyzed);
        stage
            .scored
            .iter()
            .zip(features)
            .map(|(&(doc, score), f)| {
                let d = &self.docs[doc];
                (
                    Hit {
                        spec: d.spec,
                        op: d.op,
                        score,
                    },
                    f,
                )
            })
            .collect()
    }

    /// Every operation that matched and passed the filters, scored and sorted (ties in
    /// document order), with what the learned rerank's features are made of (the lexical
    /// scores only when `features`).
    fn first_stage(&self, q: &Query<'_>, analyzed: &Analyzed, features: bool) -> Stage {
        let keep = |d: &DocMeta| self.passes(d, q);
        let dense = q.vector.zip(self.dense.load_full());
        let covered = self.coverage(analyzed);
        let mut scored: Vec<(usize, f32)> = self
            .lexical(analyzed)
            .into_iter()
            .filter(|&(doc, _)| keep(&self.docs[doc]))
            .map(|(doc, score)| {
                let c = covered.get(doc).copied().unwrap_or(0);
                (doc, score * self.prior(&self.docs[doc], analyzed, c))
            })
            .collect();
        let lexical = if features {
            let mut lexical = scored.clone();
            lexical.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            lexical
        } else {
            Vec::new()
        };
        let confidence = lexical_confidence(&covered, analyzed.concepts.len());
        let mut cosine = None;
        if let Some((vector, dense)) = dense {
            let cos = dense.vectors.scores(vector);
            scored = self.fuse(scored, &cos, analyzed, &keep, confidence);
            self.rerank(&mut scored, analyzed, &covered, Some(&cos));
            cosine = Some(cos);
        } else {
            self.rerank(&mut scored, analyzed, &covered, None);
        }
        self.apply_spec_route(&mut scored, analyzed);
        self.apply_spec_affinity(&mut scored);
        // Ties keep document order so results are deterministic.
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        Stage {
            scored,
            lexical,
            cosine,
            covered,
            confidence,
        }
    }

    /// The learned rerank's features (`learned::FEATURES`) of the stage's first
    /// `rerank_depth` operations.
    fn features(&self, stage: &Stage, analyzed: &Analyzed) -> Vec<learned::Features> {
        let depth = self.tuning.rerank_depth.min(stage.scored.len());
        let top = stage.scored.first().map_or(0.0, |x| x.1);
        let lexical_top = stage.lexical.first().map_or(0.0, |x| x.1);
        let lexical: HashMap<usize, (usize, f32)> = stage
            .lexical
            .iter()
            .enumerate()
            .map(|(rank, &(doc, score))| (doc, (rank, score)))
            .collect();
        let dense_rank = stage.cosine.as_deref().map_or_else(HashMap::new, |cos| {
            dense_ranks(cos, self.tuning.dense_candidates)
        });
        let best_cosine = stage
            .cosine
            .as_deref()
            .and_then(|cos| cos.iter().copied().reduce(f32::max))
            .unwrap_or(0.0);
        let query_terms = query_terms(analyzed);
        let concepts = analyzed.concepts.len();
        let reciprocal = |rank: Option<usize>| rank.map_or(0.0, |r| 1.0 / (1.0 + r as f32));
        stage.scored[..depth]
            .iter()
            .enumerate()
            .map(|(rank, &(doc, score))| {
                let d = &self.docs[doc];
                let (lexical_rank, lexical_score) = match lexical.get(&doc) {
                    Some(&(r, s)) => (Some(r), s),
                    None => (None, 0.0),
                };
                let lexical_norm = if lexical_top > 0.0 {
                    lexical_score / lexical_top
                } else {
                    0.0
                };
                let cosine = stage.cosine.as_ref().map_or(0.0, |c| c[doc]);
                let coverage = match stage.covered.get(doc) {
                    Some(&c) if concepts > 0 => (f32::from(c) / concepts as f32).min(1.0),
                    _ => 0.0,
                };
                [
                    if top > 0.0 { score / top } else { 0.0 },
                    reciprocal(Some(rank)),
                    lexical_norm,
                    reciprocal(lexical_rank),
                    cosine,
                    if stage.cosine.is_some() {
                        cosine - best_cosine
                    } else {
                        0.0
                    },
                    reciprocal(dense_rank.get(&doc).copied()),
                    coverage,
                    intent_fit(&analyzed.intents, &d.method).unwrap_or(0.0),
                    f32::from(u8::from(
                        d.resource.iter().any(|r| query_terms.contains(r.as_str())),
                    )),
                    d.segments as f32 / 5.0,
                    stage.confidence * lexical_norm,
                    (1.0 - stage.confidence) * cosine,
                ]
            })
            .collect()
    }

    /// Every document sharing a term with the query, with its BM25 score.
    fn lexical(&self, analyzed: &Analyzed) -> Vec<(usize, f32)> {
        let query = self.tantivy_query(analyzed);
        let limit = self.docs.len().max(1);
        let top = match self
            .searcher
            .search(&query, &TopDocs::with_limit(limit).order_by_score())
        {
            Ok(top) => top,
            Err(e) => {
                tracing::warn!(error = %e, "search failed");
                return Vec::new();
            }
        };
        // Open the ORD column once per segment, not once per hit: opening looks the column
        // up in the segment's columnar dictionary and decodes its header, and a query can
        // hit most of the 1,223 GitHub operations (under load that was a large share of
        // api_discover's CPU).
        let columns: Vec<_> = self
            .searcher
            .segment_readers()
            .iter()
            .map(|segment| segment.fast_fields().u64(ORD).ok())
            .collect();
        let mut out = Vec::with_capacity(top.len());
        for (score, addr) in top {
            let Some(Some(column)) = columns.get(addr.segment_ord as usize) else {
                continue;
            };
            if let Some(ord) = column.first(addr.doc_id) {
                out.push((ord as usize, score));
            }
        }
        out
    }

    fn tantivy_query(&self, analyzed: &Analyzed) -> BooleanQuery {
        let t = &self.tuning;
        // Only (term, field) pairs that occur in the index become clauses: a query expands to
        // many alternatives, most of which match nothing.
        let alternative =
            |terms: &[String], fields: usize| -> Option<Box<dyn tantivy::query::Query>> {
                let mut clauses: Vec<(Occur, Box<dyn tantivy::query::Query>)> = Vec::new();
                for term in terms {
                    for ((field, boost), known) in self
                        .fields
                        .iter()
                        .zip(t.fields)
                        .zip(&self.field_terms)
                        .take(fields)
                    {
                        // Absent pairs match nothing. In a large index, pairs in most
                        // documents add almost nothing to BM25 (their IDF is near zero) but
                        // cost the longest postings lists; in a small one (a spec about one
                        // resource, where "pets" is everywhere) they are cheap and may be all
                        // the query has.
                        let docs = self.docs.len();
                        if boost <= 0.0 {
                            continue;
                        }
                        match known.get(term) {
                            Some(&df)
                                if docs <= SMALL_INDEX_DOCS
                                    || df as f32 <= t.common_df * docs as f32 => {}
                            _ => continue,
                        }
                        let tq = TermQuery::new(
                            Term::from_field_text(*field, term),
                            IndexRecordOption::WithFreqs,
                        );
                        clauses.push((
                            Occur::Should,
                            Box::new(BoostQuery::new(Box::new(tq), boost)),
                        ));
                    }
                }
                (!clauses.is_empty()).then(|| Box::new(BooleanQuery::new(clauses)) as Box<_>)
            };
        let mut concepts: Vec<(Occur, Box<dyn tantivy::query::Query>)> = Vec::new();
        for c in &analyzed.concepts {
            let mut disjuncts: Vec<Box<dyn tantivy::query::Query>> = Vec::new();
            disjuncts.extend(alternative(&c.terms, FIELD_NAMES.len()));
            for alt in &c.alternatives {
                if let Some(q) = alternative(alt, t.alternative_fields) {
                    disjuncts.push(Box::new(BoostQuery::new(q, t.synonym_weight)));
                }
            }
            let q: Box<dyn tantivy::query::Query> = if disjuncts.is_empty() {
                continue;
            } else if disjuncts.len() == 1 {
                disjuncts.remove(0)
            } else {
                Box::new(DisjunctionMaxQuery::with_tie_breaker(disjuncts, 0.1))
            };
            concepts.push((Occur::Should, q));
        }
        BooleanQuery::new(concepts)
    }

    /// Hybrid scores: the lexical scores (with their priors) over the best of them, times
    /// `confidence` ([`lexical_confidence`]), plus the cosine similarities (with the method
    /// and shape priors) of the query's `dense_candidates` nearest operations, weighted by
    /// `dense_weight`. The cosine is used as it is, not rescaled per query: when the nearest
    /// operation is not near, the dense side stays small and the lexical order stands. The
    /// confidence works the other way: when the spec has words for only part of the query
    /// ("claw back the money", "bands that sound like …"), the best lexical match is a guess
    /// from the rest, and meaning counts for more.
    fn fuse(
        &self,
        lexical: Vec<(usize, f32)>,
        cosine: &[f32],
        analyzed: &Analyzed,
        keep: &dyn Fn(&DocMeta) -> bool,
        confidence: f32,
    ) -> Vec<(usize, f32)> {
        let w = self.tuning.dense_weight.clamp(0.0, 1.0);
        let mut near: Vec<(usize, f32)> = cosine
            .iter()
            .enumerate()
            .filter(|&(doc, _)| keep(&self.docs[doc]))
            .map(|(doc, &c)| (doc, c * self.query_prior(&self.docs[doc], analyzed)))
            .collect();
        near.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        near.truncate(self.tuning.dense_candidates);
        let mut fused: HashMap<usize, f32> = HashMap::with_capacity(lexical.len() + near.len());
        let top = lexical.iter().map(|x| x.1).fold(0.0f32, f32::max);
        if top > 0.0 {
            for (doc, s) in lexical {
                *fused.entry(doc).or_default() += confidence * (1.0 - w) * s / top;
            }
        }
        for (doc, s) in near {
            *fused.entry(doc).or_default() += w * s.max(0.0);
        }
        fused.into_iter().filter(|&(_, s)| s > 0.0).collect()
    }

    /// The second look at the first stage's `rerank_depth` best: evidence about the whole
    /// query and the operation's resource that single-word scores miss (see the `Tuning`
    /// fields it names).
    fn rerank(
        &self,
        scored: &mut [(usize, f32)],
        analyzed: &Analyzed,
        covered: &[u16],
        cosine: Option<&[f32]>,
    ) {
        let t = &self.tuning;
        let active = t.resource_boost != 0.0
            || t.literal_penalty != 0.0
            || (cosine.is_some() && (t.rerank_coverage != 0.0 || t.dense_rank_boost != 0.0));
        if !active || scored.is_empty() {
            return;
        }
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let depth = t.rerank_depth.min(scored.len());
        let query_terms = query_terms(analyzed);
        let concepts = analyzed.concepts.len();
        let dense_rank: HashMap<usize, usize> = match cosine {
            Some(cos) if t.dense_rank_boost != 0.0 => dense_ranks(cos, t.rerank_depth),
            _ => HashMap::new(),
        };
        for (doc, score) in scored[..depth].iter_mut() {
            let d = &self.docs[*doc];
            let c = covered.get(*doc).copied().unwrap_or(0);
            if t.resource_boost != 0.0
                && d.resource.iter().any(|r| query_terms.contains(r.as_str()))
            {
                *score *= 1.0 + t.resource_boost;
            }
            if t.literal_penalty != 0.0 && concepts >= 3 && c <= 1 && !covered.is_empty() {
                *score /= 1.0 + t.literal_penalty;
            }
            if cosine.is_some() && t.rerank_coverage != 0.0 && concepts > 0 && !covered.is_empty() {
                *score *= (f32::from(c) / concepts as f32)
                    .min(1.0)
                    .powf(t.rerank_coverage);
            }
            if let Some(&r) = dense_rank.get(doc) {
                *score *= 1.0 + t.dense_rank_boost / (1.0 + r as f32);
            }
        }
    }

    fn apply_spec_affinity(&self, scored: &mut [(usize, f32)]) {
        let k = self.tuning.affinity_top.max(1);
        let Some(last) = self.docs.last() else { return };
        if self.tuning.spec_affinity <= 0.0 || last.spec == 0 {
            return;
        }
        let mut per_spec: Vec<Vec<f32>> = vec![Vec::new(); last.spec + 1];
        for &(doc, score) in scored.iter() {
            per_spec[self.docs[doc].spec].push(score);
        }
        let mut size = vec![0usize; last.spec + 1];
        for d in &self.docs {
            size[d.spec] += 1;
        }
        let strength: Vec<f32> = per_spec
            .iter_mut()
            .zip(&size)
            .map(|(v, &n)| {
                v.sort_by(|a, b| b.total_cmp(a));
                v.iter().take(k).sum::<f32>() / k as f32
                    * (n.max(1) as f32).powf(-self.tuning.affinity_size)
            })
            .collect();
        let top = strength.iter().copied().fold(0.0f32, f32::max);
        if top <= 0.0 {
            return;
        }
        for (doc, score) in scored.iter_mut() {
            *score *= (strength[self.docs[*doc].spec] / top).powf(self.tuning.spec_affinity);
        }
    }

    /// Pooled routing (`Tuning::spec_route`): which APIs have words for the query's concepts,
    /// the rarer the word across APIs the more it says.
    fn apply_spec_route(&self, scored: &mut [(usize, f32)], analyzed: &Analyzed) {
        let Some(last) = self.docs.last() else { return };
        let specs = last.spec + 1;
        if self.tuning.spec_route <= 0.0 || specs == 1 {
            return;
        }
        let mut route = vec![0.0f32; specs];
        for c in &analyzed.concepts {
            let mut has = vec![false; specs];
            let mark = |has: &mut Vec<bool>, terms: &mut dyn Iterator<Item = &String>| {
                for t in terms {
                    for &doc in self.postings.get(t).map_or(&[][..], Vec::as_slice) {
                        has[self.docs[doc as usize].spec] = true;
                    }
                }
            };
            mark(&mut has, &mut c.terms.iter());
            if !has.iter().any(|&h| h) {
                mark(
                    &mut has,
                    &mut c.alternatives.iter().filter(|a| a.len() == 1).flatten(),
                );
            }
            let n = has.iter().filter(|&&h| h).count();
            if n == 0 {
                continue;
            }
            let idf = (specs as f32 / n as f32).ln();
            for (s, h) in has.iter().enumerate() {
                if *h {
                    route[s] += idf;
                }
            }
        }
        let top = route.iter().copied().fold(0.0f32, f32::max);
        if top <= 0.0 {
            return;
        }
        for (doc, score) in scored.iter_mut() {
            *score *= (route[self.docs[*doc].spec] / top).powf(self.tuning.spec_route);
        }
    }

    /// Non-lexical evidence: method intent and deprecation, as a score multiplier.
    /// For each document, how many of the query's concepts it covers (any of the user's
    /// terms, or every term of one alternative). Empty when coordination is off.
    fn coverage(&self, analyzed: &Analyzed) -> Vec<u16> {
        if self.tuning.coord <= 0.0 {
            return Vec::new();
        }
        let mut covered = vec![0u16; self.docs.len()];
        let mut stamp = vec![u32::MAX; self.docs.len()];
        let mut counts: HashMap<u32, usize> = HashMap::new();
        for (ci, c) in analyzed.concepts.iter().enumerate() {
            let ci = ci as u32;
            let mut mark = |doc: u32| {
                let d = doc as usize;
                if stamp[d] != ci {
                    stamp[d] = ci;
                    covered[d] += 1;
                }
            };
            let singles = c.terms.iter().chain(
                c.alternatives
                    .iter()
                    .filter(|a| a.len() == 1)
                    .flat_map(|a| a.iter()),
            );
            for term in singles {
                for &doc in self.postings.get(term).map_or(&[][..], Vec::as_slice) {
                    mark(doc);
                }
            }
            for alt in c.alternatives.iter().filter(|a| a.len() > 1) {
                counts.clear();
                for term in alt {
                    for &doc in self.postings.get(term).map_or(&[][..], Vec::as_slice) {
                        *counts.entry(doc).or_default() += 1;
                    }
                }
                for (&doc, &n) in &counts {
                    if n == alt.len() {
                        mark(doc);
                    }
                }
            }
        }
        covered
    }

    fn prior(&self, d: &DocMeta, analyzed: &Analyzed, covered: u16) -> f32 {
        let t = &self.tuning;
        let mut factor = self.query_prior(d, analyzed);
        if t.coord > 0.0 {
            let total = analyzed.concepts.len().max(1);
            factor *= (f32::from(covered) / total as f32).powf(t.coord);
        }
        factor / (1.0 + t.depth_penalty * d.segments as f32)
    }

    /// The priors that do not depend on which words matched: method intent, deprecation,
    /// collection vs item.
    fn query_prior(&self, d: &DocMeta, analyzed: &Analyzed) -> f32 {
        let t = &self.tuning;
        let mut factor = 1.0;
        if let Some(fit) = intent_fit(&analyzed.intents, &d.method) {
            factor *= 1.0 + t.intent_boost * fit;
        }
        if d.deprecated {
            factor *= t.deprecated_factor;
        }
        if d.templated {
            let wants_collection = match analyzed.intents.first() {
                Some(Intent::Create) => Some(true),
                Some(Intent::Update | Intent::Delete) => Some(false),
                _ if analyzed.singular => Some(false),
                _ if analyzed.plural => Some(true),
                _ => None,
            };
            if wants_collection == Some(!d.item) {
                factor *= 1.0 + t.shape_boost;
            }
        }
        factor
    }

    fn passes(&self, d: &DocMeta, q: &Query<'_>) -> bool {
        if let Some(m) = q.method
            && !d.method.eq_ignore_ascii_case(m.trim())
        {
            return false;
        }
        if let Some(tag) = q.tag {
            let tag = tag.trim().to_lowercase();
            if !d.tags.contains(&tag) {
                return false;
            }
        }
        if let Some(allowed) = q.allowed
            && !allowed(d.spec, d.op)
        {
            return false;
        }
        true
    }
}

/// Every term of the query: the user's and those of the vocabulary's alternatives.
fn query_terms(analyzed: &Analyzed) -> HashSet<&str> {
    analyzed
        .concepts
        .iter()
        .flat_map(|c| c.terms.iter().chain(c.alternatives.iter().flatten()))
        .map(String::as_str)
        .collect()
}

/// The rank (0 = nearest) of the `depth` operations nearest the query, ties in document order.
fn dense_ranks(cosine: &[f32], depth: usize) -> HashMap<usize, usize> {
    let mut order: Vec<usize> = (0..cosine.len()).collect();
    order.sort_by(|&a, &b| cosine[b].total_cmp(&cosine[a]).then(a.cmp(&b)));
    order
        .into_iter()
        .take(depth)
        .enumerate()
        .map(|(r, d)| (d, r))
        .collect()
}

/// The share of the query's concepts that the operation covering most of them covers (1 when
/// coverage is not counted, or the query has no concepts): how far the lexical ranking can
/// be trusted.
fn lexical_confidence(covered: &[u16], concepts: usize) -> f32 {
    match covered.iter().max() {
        Some(&best) if concepts > 0 => (f32::from(best) / concepts as f32).min(1.0),
        _ => 1.0,
    }
}

/// How well `method` fits the query's intents: the first intent counts fully, later ones at
/// half weight. `None` when the query expresses no intent.
fn intent_fit(intents: &[Intent], method: &str) -> Option<f32> {
    intents
        .iter()
        .enumerate()
        .map(|(i, intent)| intent.fit(method) * if i == 0 { 1.0 } else { 0.5 })
        .reduce(f32::max)
}

/// The text of each field for one operation, in `FIELD_NAMES` order.
fn document_texts(
    spec: &Spec,
    op: &Operation,
    tag_descriptions: &HashMap<String, String>,
    tuning: &Tuning,
) -> [String; 7] {
    let summary = match &op.summary {
        Some(s) if !s.trim().is_empty() => s.clone(),
        _ => op
            .description
            .as_deref()
            .map(first_sentence)
            .unwrap_or_default()
            .to_string(),
    };
    let path: Vec<&str> = op
        .path
        .split('/')
        .filter(|s| !s.is_empty() && !s.starts_with('{'))
        .collect();
    let mut params: Vec<String> = op.parameters.iter().map(|p| p.name.clone()).collect();
    if let Some(body) = op.request_body.as_ref().and_then(|b| b.preferred()) {
        let schema = spec.follow(&body.schema);
        if let Some(props) = schema.get("properties").and_then(|p| p.as_object()) {
            params.extend(props.keys().take(40).cloned());
        }
    }
    [
        summary,
        op.id.clone(),
        path.join(" "),
        format!("{} {}", op.tags.join(" "), spec.title),
        op.description.clone().unwrap_or_default(),
        params.join(" "),
        if tuning.fields[KNOWLEDGE] > 0.0 {
            knowledge_text(spec, op, tag_descriptions)
        } else {
            String::new()
        },
    ]
}

/// Each tag's description (`tags: [{name, description}]`), by name.
fn tag_descriptions(spec: &Spec) -> HashMap<String, String> {
    let mut out = HashMap::new();
    for t in spec.root()["tags"].as_array().into_iter().flatten() {
        if let (Some(name), Some(d)) = (t["name"].as_str(), t["description"].as_str()) {
            out.insert(name.to_string(), first_sentence(d).to_string());
        }
    }
    out
}

/// What the spec says around an operation, beyond its own summary and description: the
/// descriptions and enum values of its parameters, the names of the schemas it takes and
/// returns (`PodDisruptionBudget`, `XCom`) with their descriptions and their properties'
/// descriptions, and its tags' descriptions. First sentences only, bounded.
fn knowledge_text(spec: &Spec, op: &Operation, tags: &HashMap<String, String>) -> String {
    const MAX_PROPERTIES: usize = 40;
    let mut out: Vec<String> = Vec::new();
    let push = |out: &mut Vec<String>, text: &str| {
        let t = first_sentence(text);
        if !t.is_empty() {
            out.push(t.chars().take(200).collect());
        }
    };
    let enums = |out: &mut Vec<String>, schema: &serde_json::Value| {
        let schema = spec.follow(schema);
        let values = schema["enum"]
            .as_array()
            .or_else(|| spec.follow(&schema["items"])["enum"].as_array());
        for v in values.into_iter().flatten().take(20) {
            if let Some(v) = v.as_str() {
                out.push(v.to_string());
            }
        }
    };
    for p in &op.parameters {
        if let Some(d) = &p.description {
            push(&mut out, d);
        }
        enums(&mut out, &p.schema);
    }
    let schema_text = |out: &mut Vec<String>, schema: &serde_json::Value, props: bool| {
        // The schema's own name, from its `$ref` (or its items' `$ref`).
        for r in [&schema["$ref"], &schema["items"]["$ref"]] {
            if let Some(name) = r.as_str().and_then(|r| r.rsplit(['/', '.']).next()) {
                out.push(name.to_string());
            }
        }
        let mut node = spec.follow(schema);
        if node["type"] == "array" {
            node = spec.follow(&node["items"]);
        }
        for key in ["title", "description"] {
            if let Some(d) = node[key].as_str() {
                push(out, d);
            }
        }
        if !props {
            return;
        }
        if let Some(properties) = node["properties"].as_object() {
            for (_, v) in properties.iter().take(MAX_PROPERTIES) {
                let v = spec.follow(v);
                if let Some(d) = v["description"].as_str() {
                    push(out, d);
                }
                enums(out, v);
            }
        }
    };
    if let Some(body) = op.request_body.as_ref().and_then(|b| b.preferred()) {
        schema_text(&mut out, &body.schema, true);
    }
    for r in &op.responses {
        if r.status.starts_with('2')
            && let Some(schema) = &r.schema
        {
            schema_text(&mut out, schema, false);
            break;
        }
    }
    for t in &op.tags {
        if let Some(d) = tags.get(t) {
            out.push(d.clone());
        }
    }
    out.join(" ")
}

/// The names of the schemas an operation's request body and first 2xx response refer to
/// (through `$ref`, or their items' `$ref`), as words: `…v1beta1.PodDisruptionBudget` →
/// "pod disruption budget". Generic names (`Error`, `Object`) are rare in `$ref`s and kept.
fn schema_names(spec: &Spec, op: &Operation) -> Vec<String> {
    let mut refs: Vec<&serde_json::Value> = Vec::new();
    if let Some(body) = op.request_body.as_ref().and_then(|b| b.preferred()) {
        refs.push(&body.schema);
    }
    if let Some(schema) = op
        .responses
        .iter()
        .find(|r| r.status.starts_with('2'))
        .and_then(|r| r.schema.as_ref())
    {
        refs.push(schema);
    }
    let mut out: Vec<String> = Vec::new();
    for schema in refs {
        for r in [&schema["$ref"], &schema["items"]["$ref"]] {
            if let Some(name) = r.as_str().and_then(|r| r.rsplit(['/', '.']).next()) {
                let words = analyze::words(name).join(" ");
                if !words.is_empty() && !out.contains(&words) {
                    out.push(words);
                }
            }
        }
    }
    let _ = spec;
    out
}

/// The nouns of a path's last literal segment, stemmed (see [`DocMeta::resource`]).
fn resource_terms(path: &str, stems: &mut Stems) -> Vec<String> {
    let last = path
        .split('/')
        .rev()
        .find(|s| !s.is_empty() && !s.starts_with('{'))
        .unwrap_or("");
    let intents = &vocab::vocab().intents;
    stems
        .terms(last)
        .into_iter()
        .filter(|t| !intents.contains_key(t))
        .collect()
}

/// What the dense ranker embeds for one operation (from [`document_texts`]): the summary,
/// the description's first sentence when it says more than the summary, the path's words,
/// the tags and the API's title. Whole descriptions, or their first 300 characters, were
/// tried and ranked worse (they are long and wander). The vector cache key hashes these
/// texts, so a change here never reuses old vectors.
fn embedding_text(texts: &[String; 7]) -> String {
    let [summary, _, path, tags, description, _, _] = texts;
    let summary = summary.trim();
    let first = first_sentence(description).trim();
    let first = if first == summary { "" } else { first };
    format!("{summary}. {first} {}. {}", path.trim(), tags.trim())
}

/// The first sentence of a description (up to the first `. ` or line break).
fn first_sentence(text: &str) -> &str {
    let text = text.trim();
    let end = text
        .find(". ")
        .map(|i| i + 1)
        .into_iter()
        .chain(text.find('\n'))
        .min()
        .unwrap_or(text.len());
    &text[..end]
}

#[cfg(test)]
mod tests;
