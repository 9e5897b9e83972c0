//! `api_discover` without a query: a map of the APIs the caller may use, for a model that does
//! not know their words yet. Each API's title, description and operation count, and its tags
//! (or, for a spec without tags, the resources its paths are about: `/charges`, which the
//! `tag` filter takes too) with counts and a description,
//! largest first; the whole within [`MAX_OVERVIEW_BYTES`], the groups left out counted.

use std::collections::HashMap;

use super::output::{ApiOverview, GroupOverview};
use crate::apis::Apis;

/// The most bytes the overview takes as JSON.
pub const MAX_OVERVIEW_BYTES: usize = 4096;

/// The overview of the APIs (of `only`, if given) as the caller sees them (`seen(api, op)`).
pub(super) fn overview(
    apis: &Apis,
    seen: &dyn Fn(usize, usize) -> bool,
    only: Option<usize>,
) -> Vec<ApiOverview> {
    let mut out: Vec<ApiOverview> = apis
        .list
        .iter()
        .enumerate()
        .filter(|&(i, _)| only.is_none_or(|o| o == i))
        .filter_map(|(i, api)| {
            let visible: Vec<_> = api
                .spec
                .operations
                .iter()
                .enumerate()
                .filter(|&(op, _)| seen(i, op))
                .map(|(_, o)| o)
                .collect();
            if visible.is_empty() {
                return None;
            }
            let tagged = visible.iter().any(|o| !o.tags.is_empty());
            let mut counts: HashMap<String, usize> = HashMap::new();
            for o in &visible {
                if tagged {
                    for t in &o.tags {
                        *counts.entry(t.clone()).or_default() += 1;
                    }
                } else {
                    let resource = o.resource();
                    if !resource.is_empty() {
                        *counts.entry(resource).or_default() += 1;
                    }
                }
            }
            let described = api.spec.tag_descriptions();
            let mut groups: Vec<GroupOverview> = counts
                .into_iter()
                .map(|(name, operations)| GroupOverview {
                    description: described.get(&name).cloned(),
                    name,
                    operations,
                })
                .collect();
            groups.sort_by(|a, b| b.operations.cmp(&a.operations).then(a.name.cmp(&b.name)));
            Some(ApiOverview {
                api: apis.qualified().then(|| api.name.clone()),
                title: api.spec.title.clone(),
                description: Some(api.spec.description.clone()).filter(|d| !d.is_empty()),
                operations: visible.len(),
                groups,
                more_groups: None,
            })
        })
        .collect();
    fit(&mut out, MAX_OVERVIEW_BYTES);
    out
}

/// Drops groups (the smallest first, from the API with the most) until the JSON fits `max`
/// bytes; then descriptions of groups; counts what was left out.
fn fit(apis: &mut [ApiOverview], max: usize) {
    let size = |apis: &[ApiOverview]| serde_json::to_vec(apis).map_or(0, |v| v.len());
    while size(apis) > max {
        let Some(a) = apis
            .iter_mut()
            .filter(|a| !a.groups.is_empty())
            .max_by_key(|a| a.groups.len())
        else {
            break;
        };
        a.groups.pop();
        a.more_groups = Some(a.more_groups.unwrap_or(0) + 1);
    }
}
