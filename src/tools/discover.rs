//! `api_discover`: ranked search over the operations the caller may use, the map of the APIs
//! when no words or filters are given (`overview.rs`), how many hits are shown by default,
//! and, when nothing is found, whether permissions hid operations that match.

use super::args::DiscoverArgs;
use super::error::ToolError;
use super::output::{DiscoverHit, DiscoverResult, Output};
use super::resolve::{Visibility, visible, why_hidden};
use crate::apis::{Apis, OpRef};
use crate::auth::Principal;
use crate::index::Query;
use crate::spec::Operation;

/// Runs `api_discover` for `principal`.
pub(super) async fn discover(
    visibility: &Visibility,
    apis: &Apis,
    principal: &Principal,
    d: DiscoverArgs,
) -> Result<Output, ToolError> {
    let only = d.api.as_deref().and_then(|n| apis.position(n));
    let allowed = visible(visibility, apis, principal, only);
    if d.query.trim().is_empty() && d.tag.is_none() && d.method.is_none() {
        let overview = super::overview::overview(apis, &allowed, only);
        let total = overview.iter().map(|a| a.operations).sum();
        // Nothing to show: say whether permissions hid what there is.
        let hidden = if total == 0 {
            let unseen: Vec<OpRef> = apis
                .list
                .iter()
                .enumerate()
                .filter(|&(api, _)| only.is_none_or(|o| o == api))
                .flat_map(|(api, a)| (0..a.spec.operations.len()).map(move |op| OpRef { api, op }))
                .filter(|r| !allowed(r.api, r.op))
                .collect();
            why_hidden(apis, principal, unseen.len(), &unseen, false)
        } else {
            None
        };
        return Ok(Output::Discover(DiscoverResult {
            results: Vec::new(),
            total,
            overview: Some(overview),
            hidden: hidden.as_ref().map(|h| h.count),
            note: hidden.map(|h| h.note),
        }));
    }
    let vector = query_vector(apis, &d.query).await;
    // The caller's search, or (to say what permissions hid) the same over every operation.
    let search = |allowed: &(dyn Fn(usize, usize) -> bool + Sync)| {
        apis.index.search_total(&Query {
            text: d.query.trim(),
            method: d.method,
            tag: d.tag.as_deref(),
            limit: d.limit(),
            allowed: Some(allowed),
            vector: vector.as_deref(),
        })
    };
    let (hits, total) = search(&allowed);
    let shown = if d.limit.is_some() {
        hits.len()
    } else {
        let scores: Vec<f32> = hits.iter().map(|h| h.score).collect();
        shown_by_default(&scores)
    };
    let mut previous: Option<&[String]> = None;
    let mut results = Vec::with_capacity(shown);
    for h in &hits[..shown] {
        let r = OpRef {
            api: h.spec,
            op: h.op,
        };
        let Some(op) = apis.operation(r) else {
            continue;
        };
        let repeated = previous == Some(op.tags.as_slice());
        previous = Some(op.tags.as_slice());
        results.push(DiscoverHit {
            operation_id: apis.shown_id(r),
            method: op.method,
            path: op.path.clone(),
            summary: short_summary(op),
            tags: if repeated {
                Vec::new()
            } else {
                op.tags.clone()
            },
            mutating: op.mutating(),
        });
    }
    // Nothing found: say whether permissions hid operations that match.
    let hidden = if results.is_empty() {
        let in_scope = |api: usize, _: usize| only.is_none_or(|o| o == api);
        let (all_hits, all_total) = search(&in_scope);
        let unseen: Vec<OpRef> = all_hits
            .iter()
            .map(|h| OpRef {
                api: h.spec,
                op: h.op,
            })
            .filter(|r| !allowed(r.api, r.op))
            .collect();
        why_hidden(
            apis,
            principal,
            all_total.saturating_sub(total),
            &unseen,
            true,
        )
    } else {
        None
    };
    Ok(Output::Discover(DiscoverResult {
        results,
        total,
        overview: None,
        hidden: hidden.as_ref().map(|h| h.count),
        note: hidden.map(|h| h.note),
    }))
}

/// The query's embedding when the index is hybrid: here with a static model (microseconds),
/// else from the cache of recent queries or on a blocking thread (an encoder's forward pass
/// takes milliseconds of CPU).
async fn query_vector(apis: &Apis, text: &str) -> Option<std::sync::Arc<[f32]>> {
    if apis.index.ranker() != crate::index::Ranker::Hybrid {
        return None;
    }
    if apis.index.embeds_cheaply() {
        return apis.index.query_vector(text);
    }
    if let Some(v) = apis.index.cached_query_vector(text) {
        return Some(v);
    }
    let index = apis.index.clone();
    let text = text.to_string();
    tokio::task::spawn_blocking(move || index.query_vector(&text))
        .await
        .ok()
        .flatten()
}

/// A short one-line summary for discovery results.
fn short_summary(op: &Operation) -> String {
    let text = op
        .summary
        .as_deref()
        .or(op.description.as_deref())
        .unwrap_or_default();
    let first = text.split_inclusive(". ").next().unwrap_or(text).trim();
    if first.chars().count() > 160 {
        let mut s: String = first.chars().take(160).collect();
        s.push('…');
        s
    } else {
        first.to_string()
    }
}

/// Without `limit`, `api_discover` shows the hits that score at least this share of the best
/// one: when the best hits are clear, the rest are left out. On the four query sets of
/// `tests/data` (440 queries, per spec and pooled) this keeps 94 % (words only) and 96 %
/// (hybrid) of the operations the top 10 finds, showing 6 hits in 10 (BENCHMARKS.md, issue 42;
/// `index::the_default_hits_keep_what_the_top_ten_finds`).
const CLEAR_SHARE: f32 = 0.6;
/// ... and at least this many (all there are, when fewer).
const MIN_HITS: usize = 3;

/// How many hits `api_discover` shows when the caller gave no `limit`, of those a search found
/// (`scores`: best first, at most the default `limit`): the ones scoring at least
/// [`CLEAR_SHARE`] of the best, at least [`MIN_HITS`]. When the best hits are clear, the rest
/// are left out; `limit` shows them. Hits without scores (filters and no words) are all shown.
pub fn shown_by_default(scores: &[f32]) -> usize {
    let Some(&best) = scores.first().filter(|s| **s > 0.0) else {
        return scores.len();
    };
    let close = scores
        .iter()
        .take_while(|s| **s >= CLEAR_SHARE * best)
        .count();
    close.max(MIN_HITS).min(scores.len())
}

#[cfg(test)]
mod tests {
    use super::shown_by_default;

    #[test]
    fn the_default_shows_the_hits_close_to_the_best() {
        // Clear: the rest score under 60 % of the best; three are shown all the same.
        assert_eq!(shown_by_default(&[90.0, 50.0, 40.0, 30.0, 20.0]), 3);
        // Close ones stay, down to 60 % of the best.
        let close = [100.0, 90.0, 80.0, 70.0, 61.0, 59.0, 50.0];
        assert_eq!(shown_by_default(&close), 5);
        // Fewer than three: all of them; no scores (filters only): all of them.
        assert_eq!(shown_by_default(&[5.0, 1.0]), 2);
        assert_eq!(shown_by_default(&[0.0; 10]), 10);
        assert_eq!(shown_by_default(&[]), 0);
    }
}
