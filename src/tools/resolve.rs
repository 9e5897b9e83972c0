//! Which operation a call names, and whether its caller may see or use it: an id (bare,
//! `NAME:operationId`, or with `api`) or a route found in the APIs; the closest operations the
//! caller may see when none matches; the operation's permission (its features, the rules, and
//! with several APIs a feature naming its API); and which operations each set of grants may
//! see, remembered per set.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::args::Target;
use super::error::ToolError;
use crate::apis::{Apis, OpRef};
use crate::auth::{Features, Principal};
use crate::index::Query;
use crate::spec::{OperationName, Resolved, Violation};
use crate::types::Code;
use crate::types::Tool;

/// An operation the arguments name, found in one API.
pub(crate) struct Found {
    pub api: usize,
    pub resolved: Resolved,
}

impl Found {
    pub(super) fn at(&self) -> OpRef {
        OpRef {
            api: self.api,
            op: self.resolved.index,
        }
    }
}

/// The position of the API `name`, or `INVALID_ARGUMENTS` at `/api` listing the names of the
/// APIs the principal may see (an API it holds no feature for is never named).
pub(super) fn api_named(
    visibility: &Visibility,
    apis: &Apis,
    principal: &Principal,
    name: &str,
) -> Result<usize, ToolError> {
    apis.position(name).ok_or_else(|| {
        let names = seen_apis(visibility, apis, principal);
        let message = if !apis.qualified() {
            "this server serves one API: leave `api` out".to_string()
        } else if names.is_empty() {
            format!("there is no API {name:?} this caller may use")
        } else {
            format!(
                "there is no API {name:?}; the APIs are {}",
                names.join(", ")
            )
        };
        ToolError::invalid(message.clone(), vec![at("/api", &message)])
    })
}

/// The names of the APIs of which the principal may see at least one operation.
fn seen_apis<'a>(visibility: &Visibility, apis: &'a Apis, principal: &Principal) -> Vec<&'a str> {
    let seen = visible(visibility, apis, principal, None);
    apis.list
        .iter()
        .enumerate()
        .filter(|(i, a)| !a.name.is_empty() && (0..a.spec.operations.len()).any(|op| seen(*i, op)))
        .map(|(_, a)| a.name.as_str())
        .collect()
}

fn at(pointer: &str, message: &str) -> Violation {
    Violation {
        pointer: pointer.into(),
        message: message.into(),
    }
}

/// The operation `target` names: in the API of `api` or of the id's `NAME:` prefix, else in
/// the one API that has it among those the principal may see. An id that several of those
/// have is ambiguous: the caller names the API. An API the principal holds no feature for
/// is never counted nor named: a bare id it shares with a visible API is the visible one's.
pub(super) fn find(
    visibility: &Visibility,
    apis: &Apis,
    principal: &Principal,
    target: &Target,
) -> Result<Option<Found>, ToolError> {
    let name = target.operation_name()?;
    let named = target
        .api
        .as_deref()
        .map(|n| api_named(visibility, apis, principal, n))
        .transpose()?;
    let (prefixed, name) = match name {
        OperationName::Id(id) => {
            let (api, bare) = apis.split_id(id);
            (api, OperationName::Id(bare))
        }
        route => (None, route),
    };
    if let (Some(a), Some(b)) = (named, prefixed)
        && a != b
    {
        let message = format!(
            "`api` says {:?} but the operationId names {:?}",
            apis.list[a].name, apis.list[b].name
        );
        return Err(ToolError::invalid(
            message.clone(),
            vec![at("/api", &message)],
        ));
    }
    let explicit = named.or(prefixed);
    let found: Vec<Found> = match explicit {
        Some(api) => vec![api],
        None => (0..apis.list.len()).collect(),
    }
    .into_iter()
    .filter_map(|api| {
        let resolved = apis.list[api].spec.resolve(&name)?;
        Some(Found { api, resolved })
    })
    .collect();
    if explicit.is_some() {
        return Ok(found.into_iter().next());
    }
    // Without an API named: the operations the caller may see, else those of APIs it holds
    // a feature for (their refusal says which feature is missing); never another API's.
    let (seen, allowed): (Vec<Found>, Vec<Found>) = found
        .into_iter()
        .filter(|f| apis.api_allows(principal, f.at()))
        .partition(|f| may_see(apis, principal, f.at()));
    let mut found = if seen.is_empty() { allowed } else { seen };
    if found.len() > 1 {
        let names: Vec<String> = found.iter().map(|f| apis.shown_id(f.at())).collect();
        let message = format!(
            "several APIs have this operation ({}); name one: NAME:operationId, or `api`",
            names.join(", ")
        );
        return Err(ToolError::invalid(
            message.clone(),
            vec![at("/api", &message)],
        ));
    }
    Ok(found.pop())
}

/// Whether discovery shows the operation to the principal: it may execute it, and (several
/// APIs) holds a feature naming its API.
pub(super) fn may_see(apis: &Apis, principal: &Principal, r: OpRef) -> bool {
    let (Some(api), Some(op)) = (apis.list.get(r.api), apis.operation(r)) else {
        return false;
    };
    principal.may_see(op.method, &op.path, &op.required_features, &api.rules)
        && apis.api_allows(principal, r)
}

/// The found operation, if the principal may execute it; else `UNKNOWN_OPERATION` (with the
/// closest operations it may see) or `FORBIDDEN`.
pub(super) fn permitted(
    visibility: &Visibility,
    apis: &Apis,
    principal: &Principal,
    args: &Target,
    found: Option<Found>,
) -> Result<Found, ToolError> {
    let Some(found) = found else {
        let (what, hint) = match args.operation_name()? {
            OperationName::Id(id) => (format!("operationId {id:?}"), id.to_string()),
            OperationName::Route { method, path } => (format!("{method} {path}"), path.to_string()),
        };
        return Err(unknown_operation(visibility, apis, principal, &what, &hint));
    };
    let api = &apis.list[found.api];
    let op = &api.spec.operations[found.resolved.index];
    principal
        .may_execute(op.method, &op.path, &op.required_features, &api.rules)
        .map_err(ToolError::from)?;
    if !apis.api_allows(principal, found.at()) {
        return Err(ToolError::from(crate::auth::AuthError::Forbidden {
            missing: format!("{}.execute", api.name),
        }));
    }
    Ok(found)
}

fn unknown_operation(
    visibility: &Visibility,
    apis: &Apis,
    principal: &Principal,
    what: &str,
    hint: &str,
) -> ToolError {
    let words: String = hint
        .chars()
        .map(|c| if c.is_alphanumeric() { c } else { ' ' })
        .collect();
    let allowed = visible(visibility, apis, principal, None);
    let hits = apis.index.search(&Query {
        text: &words,
        method: None,
        tag: None,
        limit: 5,
        allowed: Some(&allowed),
        vector: None,
    });
    let closest: Vec<Value> = hits
        .iter()
        .map(|h| OpRef {
            api: h.spec,
            op: h.op,
        })
        .filter_map(|r| Some((r, apis.operation(r)?)))
        .map(|(r, o)| {
            let mut hit =
                json!({"operationId": apis.shown_id(r), "method": o.method, "path": o.path});
            if apis.qualified() {
                hit["api"] = Value::String(apis.list[r.api].name.clone());
            }
            hit
        })
        .collect();
    ToolError::new(
        Code::UnknownOperation,
        format!("{what} is not an operation of this API; use api_discover to find one (closest matches are listed)"),
    )
    .with("closest", Value::Array(closest))
}

/// Which operations the principal may see (discovery shows only what it may execute), of the
/// API at position `only` if given.
pub(super) fn visible(
    visibility: &Visibility,
    apis: &Apis,
    principal: &Principal,
    only: Option<usize>,
) -> impl Fn(usize, usize) -> bool + Sync + use<> {
    let seen = visibility.of(apis, principal);
    move |api, i| {
        only.is_none_or(|o| o == api)
            && seen
                .get(api)
                .and_then(|ops| ops.get(i))
                .copied()
                .unwrap_or(false)
    }
}

/// For each set of grants (features, read-only) a caller held, which operations it may see:
/// `Principal::may_see` of every operation, asked once per set instead of once per search
/// match (that was a tenth of a search of the GitHub spec). Sets are few (the keys' and
/// roles'); past [`Visibility::MAX_SETS`] the memory starts over.
#[derive(Default)]
pub(crate) struct Visibility {
    /// By read-only, then the version of the APIs and the features.
    sets: [Mutex<HashMap<(u64, Features), Seen>>; 2],
}

/// Per API, per operation: may it be seen.
type Seen = Arc<[Box<[bool]>]>;

impl Visibility {
    const MAX_SETS: usize = 256;

    fn of(&self, apis: &Apis, principal: &Principal) -> Seen {
        let sets = &self.sets[usize::from(principal.read_only)];
        let key = (apis.version, principal.features.clone());
        if let Some(seen) = lock(sets).get(&key) {
            return seen.clone();
        }
        let seen: Seen = apis
            .list
            .iter()
            .enumerate()
            .map(|(api, a)| {
                (0..a.spec.operations.len())
                    .map(|op| may_see(apis, principal, OpRef { api, op }))
                    .collect()
            })
            .collect();
        let mut sets = lock(sets);
        // The sets of APIs a reload replaced are never asked for again.
        sets.retain(|(version, _), _| *version == apis.version);
        if sets.len() >= Visibility::MAX_SETS {
            sets.clear();
        }
        sets.insert(key, seen.clone());
        seen
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Operations an empty discovery left out because the caller may not see them: how many, and
/// why, in words that name no API (an API the caller holds no feature for is never named).
pub(crate) struct Hidden {
    pub count: usize,
    pub note: String,
}

/// Why `count` operations the principal may not see (`hidden`: they, or the first of them)
/// are hidden from it: the feature that would show them, most general first; `matching`: they
/// match a query, else they exist. `None` when there are none.
pub(super) fn why_hidden(
    apis: &Apis,
    principal: &Principal,
    count: usize,
    hidden: &[OpRef],
    matching: bool,
) -> Option<Hidden> {
    if count == 0 || hidden.is_empty() {
        return None;
    }
    let (they, what) = match (count, matching) {
        (1, true) => (
            "it",
            "1 operation matches that this caller may not see".to_string(),
        ),
        (1, false) => (
            "it",
            "1 operation exists that this caller may not see".to_string(),
        ),
        (n, true) => (
            "them",
            format!("{n} operations match that this caller may not see"),
        ),
        (n, false) => (
            "them",
            format!("{n} operations exist that this caller may not see"),
        ),
    };
    let why = if !principal.features.allows(Tool::Execute.feature()) {
        format!(
            "discovery lists only operations the caller may execute, and its key or session \
             lacks `apigate.execute`; a key and session holding it would show {they}"
        )
    } else if hidden.iter().any(|r| !apis.api_allows(principal, *r)) {
        format!(
            "with several APIs an operation also needs a feature naming its API \
             (`NAME.execute`, `NAME.*` or `NAME:operationId`, NAME being the API's name), \
             on the key and on the session; one of those would show {they}"
        )
    } else if principal.read_only
        && hidden
            .iter()
            .filter_map(|r| apis.operation(*r))
            .any(|o| !o.method.is_safe())
    {
        format!("this caller is read-only, and {they} may change data")
    } else {
        let mut missing: Vec<&str> = Vec::new();
        for r in hidden {
            let (Some(api), Some(op)) = (apis.list.get(r.api), apis.operation(*r)) else {
                continue;
            };
            let lacked = principal
                .missing_to_execute(op.method, &op.path, &op.required_features, &api.rules)
                .unwrap_or_default();
            for f in lacked {
                if !missing.contains(&f) && missing.len() < 5 {
                    missing.push(f);
                }
            }
        }
        if missing.is_empty() {
            format!("{they} need features this caller does not hold")
        } else {
            let names: Vec<String> = missing.iter().map(|f| format!("`{f}`")).collect();
            format!(
                "{they} need features this caller does not hold: {}",
                names.join(", ")
            )
        }
    };
    Some(Hidden {
        count,
        note: format!("{what}: {why}"),
    })
}
