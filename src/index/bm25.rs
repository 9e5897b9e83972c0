//! The BM25 stage from postings held in memory: for every (field, term) of the index, the
//! term's weight and, for each document holding it, its term-frequency factor, read once from
//! tantivy when the index is built. A query then adds the clause scores up the way tantivy's
//! query tree would (the same clauses, boosts, sums in the same order and the same
//! disjunction-max), so scores and rankings are tantivy's to the bit; what a query no longer
//! pays for is the tree: a weight, a scorer and a 4,096-slot union buffer per clause, and the
//! term-dictionary lookups behind them (issue 29: most of `api_discover`'s CPU).
//!
//! The formulas are tantivy 0.27's `Bm25Weight` (`query/bm25.rs`), copied as written: the
//! tests check every posting of an index against tantivy's own `Bm25Weight::score`.

use std::collections::HashMap;

use tantivy::fieldnorm::FieldNormReader;
use tantivy::postings::Postings;
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocSet, Searcher, TERMINATED, Term};

use super::{FIELD_COUNT, ORD};

const K1: f32 = 1.2;
const B: f32 = 0.75;

/// One term of one field: its BM25 weight (`idf · (1 + k1)`) and, per document holding it,
/// the document's position in the index and its term-frequency factor.
pub(super) struct TermScores {
    pub weight: f32,
    pub docs: Vec<(u32, f32)>,
}

impl TermScores {
    /// The weight under `boost`: tantivy's `Bm25Weight::boost_by`. A posting's score is this
    /// times its term-frequency factor, as `Bm25Weight::score` computes it.
    pub fn boosted(&self, boost: f32) -> f32 {
        if boost == 1.0 {
            self.weight
        } else {
            self.weight * boost
        }
    }
}

/// For each field, its terms' scores.
pub(super) type FieldScores = [HashMap<String, TermScores>; FIELD_COUNT];

/// Reads every posting of `fields` from `searcher`.
pub(super) fn read(
    searcher: &Searcher,
    fields: &[Field; FIELD_COUNT],
) -> tantivy::Result<FieldScores> {
    let total_docs: u64 = searcher
        .segment_readers()
        .iter()
        .map(|s| u64::from(s.max_doc()))
        .sum();
    let mut out: FieldScores = Default::default();
    for (field, terms) in fields.iter().zip(&mut out) {
        let mut tokens = 0u64;
        for segment in searcher.segment_readers() {
            tokens += segment.inverted_index(*field)?.total_num_tokens();
        }
        let average_fieldnorm = tokens as f32 / total_docs as f32;
        let cache = tf_cache(average_fieldnorm);
        for segment in searcher.segment_readers() {
            let ords = segment.fast_fields().u64(ORD)?;
            let norms = segment
                .fieldnorms_readers()
                .get_field(*field)?
                .unwrap_or_else(|| FieldNormReader::constant(segment.max_doc(), 1));
            let inverted = segment.inverted_index(*field)?;
            let mut stream = inverted.terms().stream()?;
            while stream.advance() {
                let Ok(text) = std::str::from_utf8(stream.key()) else {
                    continue;
                };
                let info = stream.value();
                let mut postings =
                    inverted.read_postings_from_terminfo(info, IndexRecordOption::WithFreqs)?;
                let entry = terms.entry(text.to_string()).or_insert_with(|| TermScores {
                    weight: 0.0,
                    docs: Vec::new(),
                });
                let mut doc = postings.doc();
                while doc != TERMINATED {
                    if let Some(ord) = ords.first(doc) {
                        let tf = postings.term_freq() as f32;
                        let norm = cache[usize::from(norms.fieldnorm_id(doc))];
                        entry.docs.push((ord as u32, tf / (tf + norm)));
                    }
                    doc = postings.advance();
                }
            }
        }
        // The document frequency over all segments, as `Searcher::doc_freq` counts it.
        for (text, scores) in terms.iter_mut() {
            let df = searcher.doc_freq(&Term::from_field_text(*field, text))?;
            scores.weight = idf(df, total_docs) * (1.0 + K1);
            scores.docs.sort_unstable_by_key(|&(ord, _)| ord);
        }
    }
    Ok(out)
}

/// tantivy's `idf`.
fn idf(doc_freq: u64, doc_count: u64) -> f32 {
    let x = ((doc_count - doc_freq.min(doc_count)) as f32 + 0.5) / (doc_freq as f32 + 0.5);
    (1.0 + x).ln()
}

/// tantivy's `compute_tf_cache`: `k1 · (1 − b + b · fieldnorm / average)` per fieldnorm id.
fn tf_cache(average_fieldnorm: f32) -> [f32; 256] {
    let mut cache = [0.0f32; 256];
    for (id, slot) in cache.iter_mut().enumerate() {
        let fieldnorm = FieldNormReader::id_to_fieldnorm(id as u8);
        *slot = K1 * (1.0 - B + B * fieldnorm as f32 / average_fieldnorm);
    }
    cache
}

/// Per-document accumulators of one query, reused clause after clause: `score` holds a sum
/// (or a disjunction's max and sum) for the documents `seen` marks with the current stamp.
#[derive(Default)]
pub(super) struct Scratch {
    stamp: Vec<u32>,
    now: u32,
    pub sum: Vec<f32>,
    pub max: Vec<f32>,
    pub touched: Vec<u32>,
}

impl Scratch {
    pub fn new(docs: usize) -> Scratch {
        Scratch {
            stamp: vec![0; docs],
            now: 0,
            sum: vec![0.0; docs],
            max: vec![0.0; docs],
            touched: Vec::new(),
        }
    }

    /// Starts a new accumulation: every document counts as unseen.
    pub fn clear(&mut self) {
        if self.now == u32::MAX {
            // After four billion accumulations the stamps start over.
            self.stamp.fill(0);
            self.now = 0;
        }
        self.now += 1;
        self.touched.clear();
    }

    /// Whether `doc` was seen since [`Scratch::clear`]; marks it seen (with zeroed
    /// accumulators) if not.
    #[inline]
    pub fn see(&mut self, doc: u32) -> bool {
        let d = doc as usize;
        if self.stamp[d] == self.now {
            return true;
        }
        self.stamp[d] = self.now;
        self.sum[d] = 0.0;
        self.max[d] = 0.0;
        self.touched.push(doc);
        false
    }
}

#[cfg(test)]
mod tests {
    use tantivy::query::Bm25Weight;

    use super::*;
    use crate::index::Index;
    use crate::spec::Spec;

    #[test]
    fn every_posting_scores_as_tantivy_scores_it() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/specs/stripe.json");
        let bytes = std::fs::read(path).expect("the spec is there");
        let spec = Spec::from_bytes(&bytes, "stripe.json").expect("it parses");
        let (index, searcher, fields) =
            Index::build_parts(&[&spec], Default::default()).expect("it indexes");
        let searcher = &searcher;
        let total_docs: u64 = searcher
            .segment_readers()
            .iter()
            .map(|s| u64::from(s.max_doc()))
            .sum();
        let mut checked = 0usize;
        for (f, field) in fields.iter().enumerate() {
            let tokens: u64 = searcher
                .segment_readers()
                .iter()
                .map(|s| s.inverted_index(*field).unwrap().total_num_tokens())
                .sum();
            let average = tokens as f32 / total_docs as f32;
            for segment in searcher.segment_readers() {
                let ords = segment.fast_fields().u64(ORD).unwrap();
                let norms = segment
                    .fieldnorms_readers()
                    .get_field(*field)
                    .unwrap()
                    .unwrap();
                let inverted = segment.inverted_index(*field).unwrap();
                let mut stream = inverted.terms().stream().unwrap();
                while stream.advance() {
                    let text = std::str::from_utf8(stream.key()).unwrap();
                    let term = Term::from_field_text(*field, text);
                    let ours = &index.bm25[f][text];
                    let theirs =
                        Bm25Weight::for_terms(searcher, std::slice::from_ref(&term)).unwrap();
                    let mut postings = inverted
                        .read_postings_from_terminfo(stream.value(), IndexRecordOption::WithFreqs)
                        .unwrap();
                    let mut doc = postings.doc();
                    while doc != TERMINATED {
                        let ord = ords.first(doc).unwrap() as u32;
                        let (_, tf_factor) =
                            ours.docs[ours.docs.binary_search_by_key(&ord, |&(o, _)| o).unwrap()];
                        for boost in [1.0f32, 3.0, 0.35, 0.35 * 2.5] {
                            assert_eq!(
                                (ours.boosted(boost) * tf_factor).to_bits(),
                                theirs
                                    .boost_by(boost)
                                    .score(norms.fieldnorm_id(doc), postings.term_freq())
                                    .to_bits(),
                                "{text:?} in field {f}, boost {boost} (average {average})"
                            );
                        }
                        checked += 1;
                        doc = postings.advance();
                    }
                }
            }
        }
        assert!(checked > 10_000, "{checked} postings");
    }
}
