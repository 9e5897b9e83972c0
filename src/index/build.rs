//! Building an [`Index`]: each operation's text per lexical field (analyzed by `analyze`
//! before tantivy sees it), the BM25 postings read back from tantivy, the per-term postings
//! coverage reads, what the dense ranker embeds, and the per-document facts (`DocMeta`) the
//! priors and filters use.

use std::collections::{HashMap, HashSet};

use arc_swap::ArcSwapOption;
use tantivy::schema::Field;
use tantivy::schema::{FAST, IndexRecordOption, Schema, TextFieldIndexing, TextOptions};
use tantivy::tokenizer::{TextAnalyzer, WhitespaceTokenizer};
use tantivy::{Searcher, TantivyDocument};

use super::analyze::{self, Stems};
use super::bm25;
use super::{DocMeta, FIELD_COUNT, FIELD_NAMES, Index, IndexError, ORD, TOKENIZER, Tuning};
use crate::spec::{Operation, Spec};

impl Index {
    /// Indexes every operation of `specs` (one spec, or several for a pooled index).
    pub fn build(specs: &[&Spec]) -> Result<Index, IndexError> {
        Index::build_with(specs, Tuning::default())
    }

    /// [`Index::build`] with explicit ranking knobs.
    pub fn build_with(specs: &[&Spec], tuning: Tuning) -> Result<Index, IndexError> {
        Ok(Index::build_parts(specs, tuning)?.0)
    }

    /// The index, and the tantivy index its BM25 postings were read from (which a query no
    /// longer needs: the tests compare against it).
    pub(super) fn build_parts(
        specs: &[&Spec],
        tuning: Tuning,
    ) -> Result<(Index, Searcher, [Field; FIELD_COUNT]), IndexError> {
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
        let mut postings: HashMap<String, Vec<u32>> = HashMap::new();
        let mut embedding_texts = Vec::new();
        for (s, spec) in specs.iter().enumerate() {
            for (o, op) in spec.operations.iter().enumerate() {
                let texts = document_texts(spec, op);
                embedding_texts.push(embedding_text(&texts));
                let mut doc = TantivyDocument::default();
                let mut all_terms = HashSet::new();
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
                    all_terms.extend(terms);
                }
                for term in all_terms {
                    postings.entry(term).or_default().push(docs.len() as u32);
                }
                doc.add_u64(ord, docs.len() as u64);
                writer.add_document(doc)?;
                docs.push(DocMeta {
                    spec: s,
                    op: o,
                    method: op.method,
                    tags: op.tags.iter().map(|t| t.to_lowercase()).collect(),
                    resource: op.resource(),
                    deprecated: op.deprecated,
                    item: op.path.trim_end_matches('/').ends_with('}'),
                    templated: op.path.contains('{'),
                    segments: op.path.split('/').filter(|s| !s.is_empty()).count(),
                });
            }
        }
        writer.commit()?;
        let reader = index.reader()?;
        reader.reload()?;
        let searcher = reader.searcher();
        let bm25 = bm25::read(&searcher, &fields)?;
        let index = Index {
            bm25,
            postings,
            docs,
            tuning,
            embedding_texts,
            dense: ArcSwapOption::empty(),
            coming: ArcSwapOption::empty(),
        };
        Ok((index, searcher, fields))
    }
}

/// The text of each field for one operation, in `FIELD_NAMES` order.
fn document_texts(spec: &Spec, op: &Operation) -> [String; FIELD_COUNT] {
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
    ]
}

/// What the dense ranker embeds for one operation (from [`document_texts`]): the summary,
/// the description's first sentence when it says more than the summary, the path's words,
/// the tags and the API's title. Whole descriptions, or their first 300 characters, were
/// tried and ranked worse (they are long and wander). The vector cache key hashes these
/// texts, so a change here never reuses old vectors.
pub(super) fn embedding_text(texts: &[String; FIELD_COUNT]) -> String {
    let [summary, _, path, tags, description, _] = texts;
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
