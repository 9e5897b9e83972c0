//! Loading the APIs one server serves ([`Loader`]): the config file's (read again on each
//! load), or the one API of `--spec` and its flags; each document, its upstream client and
//! rules, and one index over them all, ranked as the server was asked to. A reload
//! (`reload.rs`) loads beside the running set: an unchanged document keeps its loaded version,
//! a broken one keeps the previous version with the error beside it, and the index is built
//! again only when a document changed.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::config::{ApiConfig, ConfigFile, ConfigFileError};
use super::{Api, Apis, Loaded};
use crate::auth::{PermissionRules, RuleError};
use crate::index::Index;
use crate::index::background::{Ranking, RankingError};
use crate::spec::{Spec, SpecError};
use crate::upstream::{
    ConfigError, MAX_READ_BYTES_CAP, SchemeCredential, SchemeCredentials, Upstream, UpstreamConfig,
    UpstreamError,
};

/// How often a line says the operations are still being embedded.
const STILL_EMBEDDING_EVERY: Duration = Duration::from_secs(5);

/// What to load and how: built once from the command line and the environment, used at
/// start-up and by every reload.
pub struct Loader {
    pub source: Source,
    /// What an API's own settings leave out: the flags'.
    pub defaults: UpstreamDefaults,
    /// `--max-spec-bytes`: one document and what its `$ref`s name.
    pub max_spec_bytes: u64,
    pub ranking: Ranking,
    /// `--permissions FILE`'s rules, added to every API's own.
    pub extra_rules: PermissionRules,
}

/// Where the APIs are described.
pub enum Source {
    /// A config file (`--config apigate.toml`), read again on each load.
    File(PathBuf),
    /// The one API of `--spec` and the flags about its upstream, with the headers of
    /// `APIGATE_UPSTREAM_HEADERS` (which belong to it alone, never to several APIs).
    Flags {
        api: Box<ApiConfig>,
        env_headers: Option<String>,
    },
}

/// The upstream settings of the flags, for an API whose config leaves them out.
#[derive(Debug, Clone, Copy)]
pub struct UpstreamDefaults {
    pub max_response_bytes: usize,
    pub max_read_bytes: usize,
    pub connect_timeout: Duration,
    pub upstream_timeout: Duration,
}

/// Why the APIs did not load. The `Display` of each says where; its source says why.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    Config(#[from] ConfigFileError),
    #[error("loading the spec{api}")]
    Spec {
        /// ` of api "NAME"`, or nothing for the one API of `--spec`.
        api: String,
        #[source]
        source: SpecError,
    },
    #[error("loading the spec of api {0:?}: the server answered 304 Not Modified to a plain GET")]
    NotModified(String),
    #[error("in the rules of api {api:?}")]
    Rules {
        api: String,
        #[source]
        source: RuleError,
    },
    #[error("{context}{api}")]
    Upstream {
        api: String,
        context: &'static str,
        #[source]
        source: ConfigError,
    },
    #[error("the upstream client{api}")]
    Client {
        api: String,
        #[source]
        source: UpstreamError,
    },
    #[error("building the search index: {0}")]
    Index(String),
    #[error(transparent)]
    Ranking(#[from] RankingError),
}

/// ` of api "NAME"` for messages, or nothing for the one API of `--spec`.
fn shown_api(name: &str) -> String {
    match name {
        "" => String::new(),
        name => format!(" of api {name:?}"),
    }
}

impl Loader {
    /// The config file, if the APIs come from one.
    pub fn config_path(&self) -> Option<&Path> {
        match &self.source {
            Source::File(path) => Some(path),
            Source::Flags { .. } => None,
        }
    }

    /// What the source says now: the config file, read again each time (its APIs and its
    /// `[oauth]`), or the one API of `--spec`.
    pub fn read(&self) -> Result<ConfigFile, ConfigFileError> {
        match &self.source {
            Source::File(path) => ConfigFile::read(path),
            Source::Flags { api, .. } => Ok(ConfigFile {
                apis: vec![(**api).clone()],
                sign_in: None,
            }),
        }
    }

    /// The APIs to serve, as [`Loader::read`] finds them now.
    pub fn configs(&self) -> Result<Vec<ApiConfig>, ConfigFileError> {
        Ok(self.read()?.apis)
    }

    /// [`Loader::load_from`] the APIs the source names now.
    pub async fn load(&self, previous: Option<&Apis>) -> Result<Apis, LoadError> {
        self.load_from(self.configs()?, previous).await
    }

    /// Loads the APIs `configs` names: each document, its upstream client and rules, and one index over them
    /// all (started on the ranker the flags ask for). With the `previous` APIs (a reload), a
    /// document whose bytes did not change keeps its loaded version, one that does not load
    /// keeps the previous version with the error beside it, and the index is built again only
    /// when a document changed. Fails when the config does not load, or a new API's document
    /// does not.
    pub async fn load_from(
        &self,
        configs: Vec<ApiConfig>,
        previous: Option<&Apis>,
    ) -> Result<Apis, LoadError> {
        let mut list = Vec::with_capacity(configs.len());
        for c in &configs {
            let old = previous.and_then(|p| Some(&p.list[p.position(&c.name)?]));
            let policy = crate::spec::FetchPolicy {
                max_bytes: self.max_spec_bytes,
                ref_origins: c.ref_origins.clone(),
            };
            let old_spec = old.map(|o| o.spec.as_ref());
            let loading = Spec::load_unless(&c.spec, old_spec, &policy).await;
            // With no `upstream` fixing where calls go, the origins a new version would send
            // to that the running one never did (its credentials would follow the document).
            let moved_to = match (&loading, old) {
                (Ok(Some(spec)), Some(old))
                    if c.upstream.is_none() && spec.sha256 != old.spec.sha256 =>
                {
                    moved(old, spec)
                }
                _ => None,
            };
            let (spec, loaded) = match (loading, old) {
                // The same bytes (not parsed again), or the URL answered 304 Not Modified to
                // the previous version's ETag.
                (Ok(new), Some(old))
                    if new.as_ref().is_none_or(|s| s.sha256 == old.spec.sha256) =>
                {
                    (
                        old.spec.clone(),
                        Loaded {
                            error: None,
                            ..old.loaded.clone()
                        },
                    )
                }
                // A new version that sends to an origin the running one never sent to, with no
                // `upstream` fixing where calls go: its configured and stored credentials would
                // follow the document to that host. Kept until the operator says so.
                (Ok(Some(_)), Some(old)) if moved_to.is_some() => {
                    let new_origins = moved_to.unwrap_or_default();
                    tracing::warn!(api = %c.name, origins = %new_origins, "reload: the document's servers moved to another origin; the previous version keeps serving");
                    (
                        old.spec.clone(),
                        Loaded {
                            error: Some(
                                "the new version of the document sends calls to an origin the \
                                 running one does not (the log names it); the previous version \
                                 serves, so that credentials do not follow a document to a new \
                                 host: set `upstream` (or --upstream) to the origin calls should \
                                 go to, or restart apigate to accept the document's servers"
                                    .into(),
                            ),
                            ..old.loaded.clone()
                        },
                    )
                }
                (Ok(Some(spec)), _) => {
                    log_warnings(&c.name, &spec);
                    (Arc::new(spec), Loaded::now())
                }
                (Err(e), Some(old)) => {
                    tracing::warn!(api = %c.name, error = %e, "reload: the document did not load; the previous version keeps serving");
                    let dirs = [
                        std::path::Path::new(&c.spec).parent(),
                        self.config_path().and_then(std::path::Path::parent),
                    ];
                    let error = crate::apis::public_error(
                        &format!("the document did not load; the previous version serves: {e}"),
                        &dirs,
                    );
                    (
                        old.spec.clone(),
                        Loaded {
                            error: Some(error),
                            ..old.loaded.clone()
                        },
                    )
                }
                // (With a previous version, a 304 was kept above.)
                (Ok(None), _) => return Err(LoadError::NotModified(c.name.clone())),
                (Err(source), None) => {
                    return Err(LoadError::Spec {
                        api: shown_api(&c.name),
                        source,
                    });
                }
            };
            let upstream = self.upstream_for(c, &spec)?;
            let rules = PermissionRules::compile(c.rules.clone())
                .map_err(|source| LoadError::Rules {
                    api: c.name.clone(),
                    source,
                })?
                .and(&self.extra_rules);
            list.push(Api {
                name: c.name.clone(),
                spec,
                upstream,
                rules,
                loaded,
            });
        }
        let same_specs = previous.is_some_and(|p| {
            p.list.len() == list.len()
                && p.list
                    .iter()
                    .zip(&list)
                    .all(|(a, b)| Arc::ptr_eq(&a.spec, &b.spec))
        });
        let index = match previous {
            Some(p) if same_specs => p.index.clone(),
            _ => {
                let specs: Vec<Arc<Spec>> = list.iter().map(|a| a.spec.clone()).collect();
                let before = previous.map(|p| p.index.clone());
                let dirs = self.ranking.dirs.clone();
                let tuning = self.ranking.tuning();
                let (index, carried) = tokio::task::spawn_blocking(move || {
                    let refs: Vec<&Spec> = specs.iter().map(|s| s.as_ref()).collect();
                    let index = Index::build_with(&refs, tuning)
                        .map_err(|e| LoadError::Index(crate::error_chain(&e)))?;
                    // A reload of a hybrid index keeps the vectors of unchanged operations
                    // and embeds the rest before the swap.
                    let carried = before
                        .and_then(|b| crate::index::background::carry_over(&b, &index, &dirs));
                    Ok::<_, LoadError>((index, carried))
                })
                .await
                .map_err(|e| LoadError::Index(e.to_string()))??;
                let index = Arc::new(index);
                match carried {
                    Some(Ok(embedded)) => tracing::info!(
                        operations = index.len(),
                        embedded,
                        "ranker: hybrid (the previous version's vectors reused)"
                    ),
                    not_carried => {
                        if let Some(Err(e)) = not_carried {
                            tracing::warn!(error = %e, "reusing the previous vectors failed; embedding again");
                        }
                        self.ranking.start(&index)?;
                        report_embedding(&index);
                    }
                }
                index
            }
        };
        warn_shared_origins(&list);
        Ok(Apis::new(list, index))
    }

    /// The upstream client of one API: its settings, the flags' where it has none.
    fn upstream_for(&self, c: &ApiConfig, spec: &Spec) -> Result<Upstream, LoadError> {
        let config = |context: &'static str| {
            move |source: ConfigError| LoadError::Upstream {
                api: shown_api(&c.name),
                context,
                source,
            }
        };
        let mut headers = Vec::new();
        for h in &c.upstream_headers {
            headers.push(UpstreamConfig::parse_header(h).map_err(config("in --upstream-header"))?);
        }
        // The environment's headers belong to the one API of --spec, never to several.
        if let Source::Flags {
            env_headers: Some(env),
            ..
        } = &self.source
        {
            headers.extend(
                UpstreamConfig::headers_from_env(env)
                    .map_err(config("in APIGATE_UPSTREAM_HEADERS"))?,
            );
        }
        let base_url = match &c.upstream {
            // The error names the value without its user info or query.
            Some(u) => Some(UpstreamConfig::parse_base_url(u).map_err(config("upstream"))?),
            None => None,
        };
        let schemes = c
            .upstream_credentials
            .iter()
            .map(|v| SchemeCredential::parse(v, &spec.security_schemes))
            .collect::<Result<Vec<_>, _>>()
            .map_err(config("upstream credentials"))?;
        let oauth = match &c.oauth {
            Some(o) => Some(
                crate::upstream::OAuthConfig::new(
                    &o.token_url,
                    o.client_id.clone(),
                    o.client_secret.clone(),
                    o.scope.clone(),
                    o.audience.clone(),
                )
                .map_err(config("upstream OAuth"))?,
            ),
            None => None,
        };
        let d = &self.defaults;
        let max_body_bytes = c.max_response_bytes.unwrap_or(d.max_response_bytes);
        let upstream = Upstream::new(UpstreamConfig {
            base_url,
            headers,
            oauth,
            schemes: SchemeCredentials::new(schemes),
            connect_timeout: c.connect_timeout.unwrap_or(d.connect_timeout),
            timeout: c.upstream_timeout.unwrap_or(d.upstream_timeout),
            max_body_bytes,
            // Never less than what is shown.
            max_read_bytes: c
                .max_read_bytes
                .unwrap_or(d.max_read_bytes)
                .clamp(1, MAX_READ_BYTES_CAP as usize)
                .max(max_body_bytes),
            ..UpstreamConfig::default()
        })
        .map_err(|source| LoadError::Client {
            api: shown_api(&c.name),
            source,
        })?;
        // The URLs calls go under, as the requests are built (`--upstream` with the spec
        // server's path, `/v2` of the Petstore, where it applies).
        let urls = crate::upstream::server_urls(upstream.config(), spec);
        let target = match (urls.first(), urls.len()) {
            (Some(url), 1) => shown_target(url),
            (Some(url), n) => format!("{} (and {} more server URLs)", shown_target(url), n - 1),
            (None, _) => match &upstream.config().base_url {
                Some(u) => shown_target(u.as_str()),
                None => spec.servers.first().map_or_else(
                    || "nowhere: the spec names no server; start with --upstream URL".to_string(),
                    |s| shown_target(s),
                ),
            },
        };
        tracing::info!(api = %c.name, %target, "API calls go to {target}");
        if upstream.oauth().is_some() {
            tracing::info!(
                api = %c.name,
                "API calls carry an OAuth client-credentials token, fetched on the first call"
            );
        }
        let schemes: Vec<&str> = upstream
            .config()
            .schemes
            .iter()
            .map(|c| c.scheme.as_str())
            .collect();
        if !schemes.is_empty() {
            tracing::info!(api = %c.name, schemes = %schemes.join(", "), "credentials for security schemes, sent on the operations that need them");
        }
        Ok(upstream)
    }
}

/// While `index` is embedded in the background (the server answers lexically meanwhile),
/// says every few seconds that the work goes on: between the start and the end lines of the
/// embedding pass nothing else would, on a terminal or off one. Stops when the index is hybrid,
/// replaced, or its embedding thread (which holds it) ended without making it hybrid.
fn report_embedding(index: &Arc<Index>) {
    if index.ranker() == crate::index::Ranker::Hybrid || index.model().is_none() {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let weak = Arc::downgrade(index);
    let started = std::time::Instant::now();
    runtime.spawn(async move {
        let mut tick = tokio::time::interval(STILL_EMBEDDING_EVERY);
        tick.tick().await;
        loop {
            tick.tick().await;
            let Some(index) = weak.upgrade() else { return };
            // The server's own reference, the embedding thread's and this one.
            if index.ranker() == crate::index::Ranker::Hybrid || Arc::strong_count(&index) < 3 {
                return;
            }
            tracing::info!(
                operations = index.len(),
                seconds = started.elapsed().as_secs(),
                "still embedding the operations in the background; ranking by words until then"
            );
        }
    });
}

/// Logs that a spec has warnings (each at debug level).
fn log_warnings(api: &str, spec: &Spec) {
    for w in &spec.warnings {
        tracing::debug!(warning = %w, "spec warning");
    }
    if !spec.warnings.is_empty() {
        tracing::info!(
            api = %api,
            count = spec.warnings.len(),
            "the spec has warnings; `apigate check` lists them"
        );
    }
}

/// Logs, at start-up, APIs that send to the same origin with different credentials: allowed
/// (two tenants of one service), but worth a look.
fn warn_shared_origins(list: &[Api]) {
    for (i, a) in list.iter().enumerate() {
        for b in &list[i + 1..] {
            let (Some(x), Some(y)) = (origin_of(a), origin_of(b)) else {
                continue;
            };
            if x == y && !a.upstream.same_credentials(&b.upstream) {
                tracing::warn!(
                    first = %a.name,
                    second = %b.name,
                    origin = %x,
                    "two APIs call the same origin with different credentials; each call \
                     carries only its own API's"
                );
            }
        }
    }
}

/// Where an API's calls go: `--upstream`'s origin, else its spec's first server's.
fn origin_of(api: &Api) -> Option<String> {
    let url = match &api.upstream.config().base_url {
        Some(u) => u.clone(),
        None => url::Url::parse(api.spec.servers.first()?).ok()?,
    };
    Some(url.origin().ascii_serialization())
}

/// A server URL for a log line: scheme, host, port and path, never user info or a query.
fn shown_target(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(u) => format!(
            "{}{}",
            u.origin().ascii_serialization(),
            u.path().trim_end_matches('/')
        ),
        Err(_) => "a relative server URL (give --upstream)".into(),
    }
}

/// The origins `spec` would send to that `old` never did (comma-separated), if any.
fn moved(old: &Api, spec: &Spec) -> Option<String> {
    let cfg = old.upstream.config();
    let before = crate::upstream::server_origins(cfg, &old.spec);
    let after = crate::upstream::server_origins(cfg, spec);
    let new: Vec<&str> = after
        .iter()
        .filter(|o| !before.contains(*o))
        .map(String::as_str)
        .collect();
    (!new.is_empty()).then(|| new.join(", "))
}
