//! The APIs behind one server and their lifecycle: the config file that names them
//! (`config`), loading them (`load`: documents, upstream clients, rules, one index), each API
//! as the tools use it ([`Api`]: its name, spec, upstream client and permission rules), the
//! set the engine serves ([`Apis`]: every API and one pooled index over their operations),
//! the set served now ([`Served`], swapped whole), and reloading it without a restart
//! (`reload`).
//!
//! With one API (`--spec`), operation ids are shown as the spec writes them. With several
//! (`--config`), ids are qualified as `NAME:operationId`, a call reaches only its own API's
//! upstream with only that API's credentials, and an operation needs, beyond its own
//! features, one that names its API: `NAME.execute` (or `NAME.*`, `*`) or `NAME:operationId`.

pub mod config;
pub mod load;
pub mod reload;

use std::sync::Arc;

use crate::auth::{PermissionRules, Principal};
use crate::index::Index;
use crate::spec::{Operation, Spec};
use crate::types::Tool;
use crate::upstream::Upstream;

/// One API: what its calls are checked against and sent through.
#[derive(Clone)]
pub struct Api {
    /// `[a-z0-9_-]+`; empty for the single API of `--spec`.
    pub name: String,
    pub spec: Arc<Spec>,
    pub upstream: Upstream,
    /// Config rules (method + path glob → features), on top of `x-required-features`.
    pub rules: PermissionRules,
    /// When its document was loaded, and why the last reload kept it, if it did.
    pub loaded: Loaded,
}

crate::debug_fields!(Api { name, loaded, .. });

/// An error as `/health` may show it to anyone: the folders in `dirs` taken out of the paths it
/// names (as `/health` names a spec by its file name alone), control characters escaped, at
/// most 400 characters.
pub fn public_error(text: &str, dirs: &[Option<&std::path::Path>]) -> String {
    let mut text = text.to_string();
    for dir in dirs.iter().flatten() {
        let dir = dir.display().to_string();
        if !dir.is_empty() {
            text = text.replace(&format!("{}/", dir.trim_end_matches('/')), "");
        }
    }
    crate::printable::cell(&text, 400)
}

/// When an API's document was loaded, for `/health`.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub at: chrono::DateTime<chrono::Utc>,
    /// Why the last reload left this version serving (its document did not load).
    pub error: Option<String>,
}

impl Loaded {
    /// Loaded now, without error.
    pub fn now() -> Loaded {
        Loaded {
            at: chrono::Utc::now(),
            error: None,
        }
    }
}

impl Api {
    /// An unnamed API: the one of `--spec`.
    pub fn single(spec: Arc<Spec>, upstream: Upstream) -> Api {
        Api {
            name: String::new(),
            spec,
            upstream,
            rules: PermissionRules::default(),
            loaded: Loaded::now(),
        }
    }
}

/// The APIs one server serves, and the index ranking all their operations together (its hit
/// `spec` is a position in `list`).
#[derive(Clone)]
pub struct Apis {
    pub list: Vec<Api>,
    pub index: Arc<Index>,
    /// Unique per set built in this process: what was computed for one set (who may see
    /// which operation) is never taken for another.
    pub version: u64,
}

/// The APIs served now: read once per call (a call in flight finishes on the version it
/// started with), replaced whole by a reload, which wakes its watchers.
pub struct Served {
    current: arc_swap::ArcSwap<Apis>,
    changed: tokio::sync::watch::Sender<()>,
}

impl Served {
    pub fn new(apis: Apis) -> Served {
        Served {
            current: arc_swap::ArcSwap::from_pointee(apis),
            changed: tokio::sync::watch::Sender::new(()),
        }
    }

    /// The APIs served now.
    pub fn get(&self) -> Arc<Apis> {
        self.current.load_full()
    }

    /// Serves `apis` from the next call on.
    pub fn replace(&self, apis: Apis) {
        self.current.store(Arc::new(apis));
        self.changed.send_replace(());
    }

    /// Wakes on each [`Served::replace`].
    pub fn watch(&self) -> tokio::sync::watch::Receiver<()> {
        self.changed.subscribe()
    }
}

/// The next [`Apis::version`].
fn next_version() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

crate::debug_fields!(Apis { list, .. });

/// A reference to one operation: `apis.list[api].spec.operations[op]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OpRef {
    pub api: usize,
    pub op: usize,
}

impl Apis {
    /// One API.
    pub fn single(api: Api, index: Arc<Index>) -> Apis {
        Apis::new(vec![api], index)
    }

    /// `list`, ranked by `index` (built over their specs in this order).
    pub fn new(list: Vec<Api>, index: Arc<Index>) -> Apis {
        Apis {
            list,
            index,
            version: next_version(),
        }
    }

    /// What the tools call the APIs: the one API's title, else the APIs' names.
    pub fn title(&self) -> String {
        match self.list.as_slice() {
            [one] => one.spec.title.clone(),
            many => many
                .iter()
                .map(|a| a.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        }
    }

    /// The APIs' names, in order (`""` for the one of `--spec`): what stored credentials name.
    pub fn names(&self) -> Vec<String> {
        self.list.iter().map(|a| a.name.clone()).collect()
    }

    /// How many operations the APIs have in all.
    pub fn operations(&self) -> usize {
        self.list.iter().map(|a| a.spec.operations.len()).sum()
    }

    /// Whether operation ids are shown as `NAME:operationId`: with more than one API.
    pub fn qualified(&self) -> bool {
        self.list.len() > 1
    }

    /// The API named `name`.
    pub fn position(&self, name: &str) -> Option<usize> {
        self.list.iter().position(|a| a.name == name)
    }

    /// The operation `r` points at.
    pub fn operation(&self, r: OpRef) -> Option<&Operation> {
        self.list.get(r.api)?.spec.operations.get(r.op)
    }

    /// An operation's id as results show it: `NAME:operationId` with more than one API.
    pub fn shown_id(&self, r: OpRef) -> String {
        let Some(op) = self.operation(r) else {
            return String::new();
        };
        if self.qualified() {
            format!("{}:{}", self.list[r.api].name, op.id)
        } else {
            op.id.clone()
        }
    }

    /// The API an operation id names by its `NAME:` prefix, and the id without it. `None`
    /// for the API when the id has no prefix naming one of them (an unqualified id, or one
    /// API only: a spec's own ids may hold colons).
    pub fn split_id<'a>(&self, id: &'a str) -> (Option<usize>, &'a str) {
        if self.qualified()
            && let Some((name, rest)) = id.split_once(':')
            && let Some(api) = self.position(name)
        {
            return (Some(api), rest);
        }
        (None, id)
    }

    /// Whether the principal holds a feature naming the API of `r` (always, with one API):
    /// `NAME.execute` (so `NAME.*` and `*`) or `NAME:operationId`.
    pub fn api_allows(&self, principal: &Principal, r: OpRef) -> bool {
        if !self.qualified() {
            return true;
        }
        self.api_features(r)
            .is_some_and(|names| names.iter().any(|f| principal.features.allows(f)))
    }

    /// The features naming the API of `r`, any one of which [`Apis::api_allows`] needs with
    /// several APIs: `NAME.execute` and `NAME:operationId`. `None` for an unknown `r`.
    pub fn api_features(&self, r: OpRef) -> Option<[String; 2]> {
        let (api, op) = (self.list.get(r.api)?, self.operation(r)?);
        Some([
            format!("{}.execute", api.name),
            format!("{}:{}", api.name, op.id),
        ])
    }
}

/// The features a key or session needs to use every API of `names` (the APIs served, as
/// `Apis::names` gives them), comma-separated: the three tools', and with several APIs each
/// one's `NAME.execute` (one API needs none of its own).
pub fn features_for(names: &[String]) -> String {
    let mut features: Vec<String> = Tool::ALL.iter().map(|t| t.feature().to_string()).collect();
    if names.len() > 1 {
        features.extend(names.iter().map(|n| format!("{n}.execute")));
    }
    features.join(",")
}
