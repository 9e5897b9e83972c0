//! Ranking operations for a natural-language query: the tantivy index, query building and
//! filters. Imports `spec` only; never axum, rmcp or sqlx.
//!
//! Ranking has two stages. The lexical stage ([`Index::lexical`]) scores every operation that
//! shares a term with the query: a tantivy BM25 search over separate fields (summary,
//! operationId, path, tags, description, parameter names) with per-field boosts, where each
//! query concept is a disjunction of what the user wrote and the vocabulary's alternatives.
//! The second stage adjusts those scores with priors that are not about words (HTTP-method
//! intent, deprecation) and applies the filters. A second ranker (dense embeddings) can be
//! fused at the boundary between the two stages: it only has to produce scores per document.

mod analyze;
pub mod eval;
mod vocab;

use tantivy::query::{BooleanQuery, BoostQuery, DisjunctionMaxQuery, Occur, TermQuery};
use tantivy::schema::{
    FAST, Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::tokenizer::{TextAnalyzer, WhitespaceTokenizer};
use tantivy::{Searcher, TantivyDocument, Term, collector::TopDocs};

use crate::spec::{Operation, Spec};
use analyze::Stems;
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
    /// Field boosts: summary, operationId, path, tags, description, parameters.
    pub fields: [f32; 6],
    pub stemming: bool,
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            synonyms: true,
            synonym_weight: 0.6,
            intent_boost: 0.3,
            deprecated_factor: 0.9,
            fields: [2.5, 2.0, 1.5, 1.0, 0.7, 0.4],
            stemming: true,
        }
    }
}

/// What the second stage needs to know about each document.
struct DocMeta {
    spec: usize,
    op: usize,
    method: String,
    tags: Vec<String>,
    deprecated: bool,
}

/// An in-memory index over the operations of one or more specs. `Send + Sync`: build once,
/// query concurrently.
pub struct Index {
    searcher: Searcher,
    fields: [Field; 6],
    docs: Vec<DocMeta>,
    tuning: Tuning,
}

const FIELD_NAMES: [&str; 6] = ["summary", "id", "path", "tags", "desc", "params"];
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
        for (s, spec) in specs.iter().enumerate() {
            for (o, op) in spec.operations.iter().enumerate() {
                let texts = document_texts(spec, op);
                let mut doc = TantivyDocument::default();
                for (field, text) in fields.iter().zip(texts) {
                    let terms = if tuning.stemming {
                        stems.terms(&text)
                    } else {
                        analyze::words(&text)
                            .into_iter()
                            .filter(|w| !analyze::is_stop(w))
                            .collect()
                    };
                    doc.add_text(*field, terms.join(" "));
                }
                doc.add_u64(ord, docs.len() as u64);
                writer.add_document(doc)?;
                docs.push(DocMeta {
                    spec: s,
                    op: o,
                    method: op.method.clone(),
                    tags: op.tags.iter().map(|t| t.to_lowercase()).collect(),
                    deprecated: op.deprecated,
                });
            }
        }
        writer.commit()?;
        let reader = index.reader()?;
        reader.reload()?;
        Ok(Index {
            searcher: reader.searcher(),
            fields,
            docs,
            tuning,
        })
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
        let mut stems = Stems::new();
        let analyzed = vocab::analyze_query(q.text, &mut stems, self.tuning.synonyms);
        let keep = |d: &DocMeta| self.passes(d, q);
        if analyzed.concepts.is_empty() {
            return self
                .docs
                .iter()
                .filter(|d| keep(d))
                .take(q.limit)
                .map(|d| Hit {
                    spec: d.spec,
                    op: d.op,
                    score: 0.0,
                })
                .collect();
        }
        let mut scored: Vec<(usize, f32)> = self
            .lexical(&analyzed)
            .into_iter()
            .filter(|&(doc, _)| keep(&self.docs[doc]))
            .map(|(doc, score)| (doc, score * self.prior(&self.docs[doc], &analyzed)))
            .collect();
        // Ties keep document order so results are deterministic.
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored
            .into_iter()
            .take(q.limit)
            .map(|(doc, score)| Hit {
                spec: self.docs[doc].spec,
                op: self.docs[doc].op,
                score,
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
        let mut out = Vec::with_capacity(top.len());
        for (score, addr) in top {
            let segment = self.searcher.segment_reader(addr.segment_ord);
            let Ok(column) = segment.fast_fields().u64(ORD) else {
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
        let alternative = |terms: &[String]| -> Box<dyn tantivy::query::Query> {
            let mut clauses: Vec<(Occur, Box<dyn tantivy::query::Query>)> = Vec::new();
            for term in terms {
                for (field, boost) in self.fields.iter().zip(t.fields) {
                    let tq = TermQuery::new(
                        Term::from_field_text(*field, term),
                        IndexRecordOption::WithFreqs,
                    );
                    clauses.push((Occur::Should, Box::new(BoostQuery::new(Box::new(tq), boost))));
                }
            }
            Box::new(BooleanQuery::new(clauses))
        };
        let mut concepts: Vec<(Occur, Box<dyn tantivy::query::Query>)> = Vec::new();
        for c in &analyzed.concepts {
            let mut disjuncts: Vec<Box<dyn tantivy::query::Query>> = Vec::new();
            if !c.terms.is_empty() {
                disjuncts.push(alternative(&c.terms));
            }
            for alt in &c.alternatives {
                disjuncts.push(Box::new(BoostQuery::new(
                    alternative(alt),
                    t.synonym_weight,
                )));
            }
            let q: Box<dyn tantivy::query::Query> = if disjuncts.len() == 1 {
                disjuncts.remove(0)
            } else {
                Box::new(DisjunctionMaxQuery::with_tie_breaker(disjuncts, 0.1))
            };
            concepts.push((Occur::Should, q));
        }
        BooleanQuery::new(concepts)
    }

    /// Non-lexical evidence: method intent and deprecation, as a score multiplier.
    fn prior(&self, d: &DocMeta, analyzed: &Analyzed) -> f32 {
        let t = &self.tuning;
        let mut factor = 1.0;
        if let Some(fit) = intent_fit(&analyzed.intents, &d.method) {
            factor *= 1.0 + t.intent_boost * fit;
        }
        if d.deprecated {
            factor *= t.deprecated_factor;
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
fn document_texts(spec: &Spec, op: &Operation) -> [String; 6] {
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
        op.tags.join(" "),
        op.description.clone().unwrap_or_default(),
        params.join(" "),
    ]
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
