//! Fusion: how a hybrid query's lexical scores and cosine similarities become one score
//! ([`Index::fuse`], weighted by how far the query's words were found in the spec at all),
//! and how, in a pooled index, the API that answers best as a whole lends weight to its
//! operations (spec affinity).

use std::collections::HashMap;

use super::vocab::Analyzed;
use super::{DocMeta, Index};

impl Index {
    /// Hybrid scores: the lexical scores (with their priors) over the best of them, times
    /// `confidence` ([`lexical_confidence`]), plus the cosine similarities (with the method
    /// and shape priors) of the query's `dense_candidates` nearest operations, weighted by
    /// `dense_weight`. The cosine is used as it is, not rescaled per query: when the nearest
    /// operation is not near, the dense side stays small and the lexical order stands. The
    /// confidence works the other way: when the spec has words for only part of the query
    /// ("claw back the money", "bands that sound like …"), the best lexical match is a guess
    /// from the rest, and meaning counts for more.
    pub(super) fn fuse(
        &self,
        lexical: Vec<(usize, f32)>,
        cosine: &[f32],
        analyzed: &Analyzed,
        keep: &dyn Fn(&DocMeta) -> bool,
        confidence: f32,
    ) -> Vec<(usize, f32)> {
        let w = if self.is_pooled() {
            self.tuning.pooled_dense_weight
        } else {
            self.tuning.dense_weight
        }
        .clamp(0.0, 1.0);
        let mut near: Vec<(usize, f32)> = cosine
            .iter()
            .enumerate()
            .filter(|&(doc, _)| keep(&self.docs[doc]))
            .map(|(doc, &c)| (doc, c * self.query_prior(&self.docs[doc], analyzed)))
            .collect();
        // The nearest `dense_candidates` (ties by document, a total order): selected in linear
        // time, not by sorting every operation (a sort of GitHub's 1,223 was a tenth of a
        // static-model discover's CPU).
        let nearer = |a: &(usize, f32), b: &(usize, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        let k = self.tuning.dense_candidates;
        if near.len() > k {
            near.select_nth_unstable_by(k, nearer);
            near.truncate(k);
        }
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

    /// In a pooled index, each score times `(its spec's strength / the best strength) ^
    /// spec_affinity`: a spec's strength is the mean of its `affinity_top` best scores,
    /// discounted by its size (`affinity_size`). No effect with one spec.
    pub(super) fn apply_spec_affinity(&self, scored: &mut [(usize, f32)]) {
        let k = self.tuning.affinity_top.max(1);
        let Some(last) = self.docs.last() else { return };
        if self.tuning.spec_affinity <= 0.0 || !self.is_pooled() {
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
}

/// The share of the query's concepts that the operation covering most of them covers (1 when
/// coverage is not counted, or the query has no concepts): how far the lexical ranking can
/// be trusted.
pub(super) fn lexical_confidence(covered: &[u16], concepts: usize) -> f32 {
    match covered.iter().max() {
        Some(&best) if concepts > 0 => (f32::from(best) / concepts as f32).min(1.0),
        _ => 1.0,
    }
}
