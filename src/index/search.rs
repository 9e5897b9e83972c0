//! Searching an [`Index`]: the query's analysis, the BM25 stage over the lexical fields (the
//! postings of `bm25`, added up as tantivy would), concept coverage, the priors (method
//! intent, deprecation, path shape and depth), the filters, and the order of the hits. Fusion
//! with the dense ranker is in `fusion`.

use super::analyze::Stems;
use super::bm25::Scratch;
use super::fusion::lexical_confidence;
use super::vocab::{self, Analyzed, Intent};
use super::{DocMeta, FIELD_NAMES, Hit, Index, Query, SMALL_INDEX_DOCS};
use crate::spec::Method;

thread_local! {
    /// The stems of the words queries used, per thread.
    static QUERY_STEMS: std::cell::RefCell<Stems> = std::cell::RefCell::new(Stems::new());
    /// The per-document buffers of a query, per thread: sized to the index last searched,
    /// so a query allocates none of them.
    static WORK: std::cell::RefCell<Work> = std::cell::RefCell::new(Work::default());
}

/// The per-document buffers one query works in: the three BM25 accumulators and what
/// [`Index::coverage`] counts with.
#[derive(Default)]
struct Work {
    total: Scratch,
    concept: Scratch,
    group: Scratch,
    /// How many of the query's concepts each document covers.
    covered: Vec<u16>,
    /// The last concept that counted for each document.
    stamp: Vec<u32>,
    /// How many terms of a multi-word alternative each document holds; zero between
    /// alternatives.
    counts: Vec<u16>,
    touched: Vec<u32>,
}

impl Work {
    /// Makes the buffers fit an index of `docs` operations.
    fn fit(&mut self, docs: usize) {
        if self.covered.len() != docs {
            *self = Work {
                total: Scratch::new(docs),
                concept: Scratch::new(docs),
                group: Scratch::new(docs),
                covered: vec![0; docs],
                stamp: vec![u32::MAX; docs],
                counts: vec![0; docs],
                touched: Vec::new(),
            };
        }
    }
}

/// How many words [`QUERY_STEMS`] remembers before it starts over.
const MAX_QUERY_STEMS: usize = 4096;

impl Index {
    /// Ranked operations for `q`, best first, at most `q.limit`. With empty text, every
    /// operation passing the filters in document order (score 0).
    pub fn search(&self, q: &Query<'_>) -> Vec<Hit> {
        self.search_total(q).0
    }

    /// [`Index::search`], plus how many operations matched and passed the filters in all
    /// (before `limit`).
    pub fn search_total(&self, q: &Query<'_>) -> (Vec<Hit>, usize) {
        let analyzed = QUERY_STEMS.with_borrow_mut(|stems| {
            // Queries repeat words: each thread keeps its stems, forgetting them past a bound
            // so that made-up words cannot grow it without end.
            if stems.len() > MAX_QUERY_STEMS {
                *stems = Stems::new();
            }
            vocab::analyze_query(q.text, stems, self.tuning.synonyms)
        });
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
        let mut scored = self.ranked(q, &analyzed);
        let total = scored.len();
        let hits = best_first(&mut scored, q.limit)
            .iter()
            .map(|&(doc, score)| Hit {
                spec: self.docs[doc].spec,
                op: self.docs[doc].op,
                score,
            })
            .collect();
        (hits, total)
    }

    /// Every operation that matched and passed the filters, scored, in no order: the
    /// lexical scores with their priors, fused with the cosines when the query has a vector
    /// and the index is hybrid, then the spec affinity.
    fn ranked(&self, q: &Query<'_>, analyzed: &Analyzed) -> Vec<(usize, f32)> {
        WORK.with_borrow_mut(|work| {
            work.fit(self.docs.len());
            self.ranked_in(q, analyzed, work)
        })
    }

    /// [`Index::ranked`] in the buffers of `work`.
    fn ranked_in(&self, q: &Query<'_>, analyzed: &Analyzed, work: &mut Work) -> Vec<(usize, f32)> {
        let keep = |d: &DocMeta| self.passes(d, q);
        let dense = q.vector.zip(self.dense.load_full());
        self.coverage(analyzed, work);
        let coord = self.coordination(analyzed);
        let mut priors = QueryPriors::default();
        let mut scored: Vec<(usize, f32)> = self.lexical(analyzed, work);
        // Empty when coordination is off, as `lexical_confidence` expects.
        let covered: &[u16] = if self.tuning.coord > 0.0 {
            &work.covered
        } else {
            &[]
        };
        scored.retain_mut(|(doc, score)| {
            let d = &self.docs[*doc];
            if !keep(d) {
                return false;
            }
            let c = covered.get(*doc).copied().unwrap_or(0);
            let query_prior = priors.get(d, |d| self.query_prior(d, analyzed));
            *score *= self.prior(d, query_prior, coord.get(usize::from(c)).copied());
            true
        });
        if let Some((vector, dense)) = dense {
            let confidence = lexical_confidence(covered, analyzed.concepts.len());
            let cosine = dense.vectors.scores(vector);
            scored = self.fuse(scored, &cosine, analyzed, &keep, confidence);
        }
        self.apply_spec_affinity(&mut scored);
        scored
    }

    /// Every document sharing a term with the query, with its BM25 score, in no order: the
    /// clauses of [`Index::clauses`] added up as tantivy's query tree adds them (a sum per
    /// group of clauses; a disjunction-max with tie-breaker 0.1 over a concept's groups; a sum
    /// over concepts), from the postings `bm25` holds.
    fn lexical(&self, analyzed: &Analyzed, work: &mut Work) -> Vec<(usize, f32)> {
        let Work {
            total,
            concept,
            group,
            ..
        } = work;
        total.clear();
        let sum_group = |group: &mut Scratch, clauses: &[Clause<'_>]| {
            group.clear();
            for c in clauses {
                for &(doc, tf_factor) in c.docs {
                    group.see(doc);
                    group.sum[doc as usize] += c.weight * tf_factor;
                }
            }
        };
        for groups in self.clauses(analyzed) {
            if let [clauses] = groups.as_slice() {
                // One group is the concept's score as it is.
                sum_group(group, clauses);
                for &doc in &group.touched {
                    total.see(doc);
                    total.sum[doc as usize] += group.sum[doc as usize];
                }
                continue;
            }
            concept.clear();
            for clauses in &groups {
                sum_group(group, clauses);
                for &doc in &group.touched {
                    let (d, s) = (doc as usize, group.sum[doc as usize]);
                    concept.see(doc);
                    concept.max[d] = f32::max(s, concept.max[d]);
                    concept.sum[d] += s;
                }
            }
            for &doc in &concept.touched {
                let d = doc as usize;
                total.see(doc);
                total.sum[d] += concept.max[d] + (concept.sum[d] - concept.max[d]) * 0.1;
            }
        }
        total
            .touched
            .iter()
            .map(|&doc| (doc as usize, total.sum[doc as usize]))
            .collect()
    }

    /// The BM25 clauses of a query: per concept, groups of (term, field) clauses, one group
    /// for the user's words over every field and one per vocabulary alternative (over
    /// `alternative_fields`, its boosts times `synonym_weight`). Only pairs that occur in the
    /// index become clauses: a query expands to many alternatives, most of which match
    /// nothing. Concepts with no clause are left out.
    fn clauses(&self, analyzed: &Analyzed) -> Vec<Vec<Vec<Clause<'_>>>> {
        let t = &self.tuning;
        let docs = self.docs.len();
        let group = |terms: &[String], fields: usize, outer: f32| -> Option<Vec<Clause<'_>>> {
            let mut clauses = Vec::new();
            for term in terms {
                for (f, boost) in t.fields.iter().enumerate().take(fields) {
                    // In a large index, pairs in most documents add almost nothing to BM25
                    // (their IDF is near zero) but cost the longest postings lists; in a small
                    // one (a spec about one resource, where "pets" is everywhere) they are
                    // cheap and may be all the query has.
                    if *boost <= 0.0 {
                        continue;
                    }
                    let Some(scores) = self.bm25[f].get(term) else {
                        continue;
                    };
                    let df = scores.docs.len();
                    if docs > SMALL_INDEX_DOCS && df as f32 > t.common_df * docs as f32 {
                        continue;
                    }
                    clauses.push(Clause {
                        weight: scores.boosted(outer * boost),
                        docs: &scores.docs,
                    });
                }
            }
            (!clauses.is_empty()).then_some(clauses)
        };
        analyzed
            .concepts
            .iter()
            .map(|c| {
                let mut groups: Vec<_> = group(&c.terms, FIELD_NAMES.len(), 1.0)
                    .into_iter()
                    .collect();
                for alt in &c.alternatives {
                    groups.extend(group(alt, t.alternative_fields, t.synonym_weight));
                }
                groups
            })
            .filter(|groups| !groups.is_empty())
            .collect()
    }

    /// For each document, how many of the query's concepts it covers (any of the user's
    /// terms, or every term of one alternative), into `work.covered`; all zero when
    /// coordination is off.
    fn coverage(&self, analyzed: &Analyzed, work: &mut Work) {
        let Work {
            covered,
            stamp,
            counts,
            touched,
            ..
        } = work;
        covered.fill(0);
        if self.tuning.coord <= 0.0 {
            return;
        }
        stamp.fill(u32::MAX);
        // `counts` is zero again after each alternative: `touched` lists the documents to
        // reset.
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
                for term in alt {
                    for &doc in self.postings.get(term).map_or(&[][..], Vec::as_slice) {
                        let n = &mut counts[doc as usize];
                        if *n == 0 {
                            touched.push(doc);
                        }
                        *n = n.saturating_add(1);
                    }
                }
                for &doc in touched.iter() {
                    let n = std::mem::take(&mut counts[doc as usize]);
                    if usize::from(n) == alt.len() {
                        mark(doc);
                    }
                }
                touched.clear();
            }
        }
    }

    /// The coordination factor of a document covering `n` of the query's concepts, for every
    /// `n`: `(n / concepts) ^ coord`, computed once per query instead of once per match.
    /// Empty when coordination is off.
    fn coordination(&self, analyzed: &Analyzed) -> Vec<f32> {
        let t = &self.tuning;
        if t.coord <= 0.0 {
            return Vec::new();
        }
        let total = analyzed.concepts.len().max(1);
        (0..=analyzed.concepts.len().min(usize::from(u16::MAX)))
            .map(|n| (n as f32 / total as f32).powf(t.coord))
            .collect()
    }

    /// The priors of a lexical match: [`Index::query_prior`], coordination (`coord`, the
    /// factor of the share of the query's concepts it covers, from
    /// [`Index::coordination`]) and path depth.
    fn prior(&self, d: &DocMeta, query_prior: f32, coord: Option<f32>) -> f32 {
        let t = &self.tuning;
        let mut factor = query_prior;
        if t.coord > 0.0 {
            factor *= coord.unwrap_or(0.0);
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
            let fits = if tag.starts_with('/') {
                d.resource == tag
            } else {
                d.tags.contains(&tag)
            };
            if !fits {
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

/// [`Index::query_prior`] of one query, computed once per kind of document: it depends only
/// on the method, deprecation and path shape, of which an index has at most 64 kinds.
struct QueryPriors([Option<f32>; 64]);

impl Default for QueryPriors {
    fn default() -> QueryPriors {
        QueryPriors([None; 64])
    }
}

impl QueryPriors {
    fn get(&mut self, d: &DocMeta, compute: impl FnOnce(&DocMeta) -> f32) -> f32 {
        let kind = (d.method as usize) * 8
            + usize::from(d.deprecated) * 4
            + usize::from(d.templated) * 2
            + usize::from(d.item);
        *self.0[kind % 64].get_or_insert_with(|| compute(d))
    }
}

/// One BM25 clause: a term of a field, its boosted weight and its postings.
struct Clause<'a> {
    weight: f32,
    docs: &'a [(u32, f32)],
}

/// The `limit` best of `scored`, best first; ties in document order, so results are
/// deterministic. Only they are sorted: a query can match most of a large spec.
fn best_first(scored: &mut [(usize, f32)], limit: usize) -> &[(usize, f32)] {
    let order = |a: &(usize, f32), b: &(usize, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    let limit = limit.min(scored.len());
    if limit == 0 {
        return &[];
    }
    if limit < scored.len() {
        scored.select_nth_unstable_by(limit - 1, order);
    }
    let best = &mut scored[..limit];
    best.sort_unstable_by(order);
    best
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Spec;

    #[test]
    fn made_up_words_do_not_grow_the_remembered_stems_without_end() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/petstore.json");
        let bytes = std::fs::read(path).expect("the spec is there");
        let spec = Spec::from_bytes(&bytes, "petstore.json").expect("it parses");
        let index = Index::build(&[&spec]).expect("it indexes");
        let mut most = 0;
        for q in 0..400 {
            let words: Vec<String> = (0..40).map(|w| format!("zq{q}x{w}")).collect();
            index.search(&Query::text(&words.join(" "), 10));
            most = most.max(QUERY_STEMS.with_borrow(Stems::len));
        }
        // 16,000 distinct words went by; at most the bound plus one query's words are kept.
        assert!(most <= MAX_QUERY_STEMS + 48, "{most} words remembered");
        assert!(
            most > MAX_QUERY_STEMS / 2,
            "{most}: the words were remembered at all"
        );
        let hits = index.search(&Query::text("find a pet by its id", 3));
        assert_eq!(hits.len(), 3);
    }
}
