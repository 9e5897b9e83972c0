//! Searching an [`Index`]: the query's analysis, the tantivy BM25 stage over the lexical
//! fields, concept coverage, the priors (method intent, deprecation, path shape and depth),
//! the filters, and the order of the hits. Fusion with the dense ranker is in `fusion`.

use std::collections::HashMap;

use tantivy::Term;
use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, BoostQuery, DisjunctionMaxQuery, Occur, TermQuery};
use tantivy::schema::IndexRecordOption;

use super::analyze::Stems;
use super::fusion::lexical_confidence;
use super::vocab::{self, Analyzed, Intent};
use super::{DocMeta, FIELD_NAMES, Hit, Index, ORD, Query, SMALL_INDEX_DOCS};
use crate::spec::Method;

impl Index {
    /// Ranked operations for `q`, best first, at most `q.limit`. With empty text, every
    /// operation passing the filters in document order (score 0).
    pub fn search(&self, q: &Query<'_>) -> Vec<Hit> {
        self.search_total(q).0
    }

    /// [`Index::search`], plus how many operations matched and passed the filters in all
    /// (before `limit`).
    pub(crate) fn search_total(&self, q: &Query<'_>) -> (Vec<Hit>, usize) {
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
        let scored = self.ranked(q, &analyzed);
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

    /// Every operation that matched and passed the filters, scored and sorted (ties in
    /// document order): the lexical scores with their priors, fused with the cosines when
    /// the query has a vector and the index is hybrid, then the spec affinity.
    fn ranked(&self, q: &Query<'_>, analyzed: &Analyzed) -> Vec<(usize, f32)> {
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
        if let Some((vector, dense)) = dense {
            let confidence = lexical_confidence(&covered, analyzed.concepts.len());
            let cosine = dense.vectors.scores(vector);
            scored = self.fuse(scored, &cosine, analyzed, &keep, confidence);
        }
        self.apply_spec_affinity(&mut scored);
        // Ties keep document order so results are deterministic.
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scored
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

    /// The BM25 query: for each concept, the best of the user's words and the vocabulary's
    /// alternatives (weighted by `synonym_weight`), over the fields that hold them.
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

    /// The priors of a lexical match: [`Index::query_prior`], coordination (the share of
    /// the query's concepts it covers) and path depth.
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
    pub(super) fn query_prior(&self, d: &DocMeta, analyzed: &Analyzed) -> f32 {
        let t = &self.tuning;
        let mut factor = 1.0;
        if let Some(fit) = intent_fit(&analyzed.intents, d.method) {
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

    /// Whether an operation passes the query's filters (method, tag, allowed set).
    pub(super) fn passes(&self, d: &DocMeta, q: &Query<'_>) -> bool {
        if let Some(m) = q.method
            && d.method != m
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
fn intent_fit(intents: &[Intent], method: Method) -> Option<f32> {
    intents
        .iter()
        .enumerate()
        .map(|(i, intent)| intent.fit(method) * if i == 0 { 1.0 } else { 0.5 })
        .reduce(f32::max)
}
