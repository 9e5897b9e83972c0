//! Reloading the APIs without a restart. A [`Reloader`] loads every document beside the
//! running ones (`Loader::load`: the config file read again, an unchanged document
//! kept, a broken one leaving its previous version serving with the error beside it), builds
//! the index, and swaps the new set in at once: a call in flight finishes on the version it
//! started with, the next one sees the new. Reloads run one at a time. The triggers: `SIGHUP`,
//! `POST /admin/v1/reload` (at most one a second), a change on disk of the config file or a
//! spec file (debounced: the file must hold still for a second), and for a URL spec its
//! `poll` interval. What the admin route answers for a [`ReloadError`] is `http`'s to say.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::Served;
use super::load::{LoadError, Loader};
use crate::auth::{Auth, KeyPrincipal};
use crate::types::Code;

/// How often files are looked at, and how long a changed file must hold still.
const WATCH_EVERY: Duration = Duration::from_secs(1);
/// How often a config without a URL to poll is looked at again.
const NO_POLL_RECHECK: Duration = Duration::from_secs(30);
/// The fewest seconds between two reloads asked through the admin route.
const ADMIN_INTERVAL: Duration = Duration::from_secs(1);

/// Reloads the APIs one server serves.
pub struct Reloader {
    served: Arc<Served>,
    loader: Loader,
    /// The database side (production, or dev with a database): reloads are audited, and the
    /// names served recorded.
    auth: Option<Auth>,
    running: tokio::sync::Mutex<()>,
    last_admin: Mutex<Option<Instant>>,
}

/// Why a reload through the admin route was refused.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("a reload ran less than a second ago; try again in a second")]
    TooSoon,
    #[error("the APIs did not reload; the running version keeps serving: {0}")]
    Failed(String),
}

impl Reloader {
    pub fn new(served: Arc<Served>, loader: Loader, auth: Option<Auth>) -> Arc<Reloader> {
        Arc::new(Reloader {
            served,
            loader,
            auth,
            running: tokio::sync::Mutex::new(()),
            last_admin: Mutex::new(None),
        })
    }

    /// Loads the APIs again and serves them; on failure the running ones keep serving and
    /// carry the error (`/health`). Returns what changed. Audited (production) as `key`'s
    /// when a key asked, else as `trigger`'s.
    pub async fn reload(
        &self,
        trigger: &str,
        key: Option<&KeyPrincipal>,
    ) -> Result<Value, ReloadError> {
        let outcome = self.load_and_swap(trigger).await;
        if let Some(auth) = &self.auth {
            if outcome.is_ok() {
                auth.record_served_apis(&self.served.get().names()).await;
            }
            let (target, refused) = match &outcome {
                Ok(report) => (changed(report), None),
                Err(_) => (None, Some(Code::ReloadFailed)),
            };
            auth.record_reload(key, trigger, target, refused).await;
        }
        outcome
    }

    async fn load_and_swap(&self, trigger: &str) -> Result<Value, ReloadError> {
        let _one = self.running.lock().await;
        let current = self.served.get();
        match self.loader.load(Some(&current)).await {
            Ok(apis) => {
                let report: Vec<Value> = apis
                    .list
                    .iter()
                    .map(|a| {
                        let before = current.position(&a.name).map(|i| &current.list[i]);
                        let state = match (&a.loaded.error, before) {
                            (Some(_), _) => "kept",
                            (None, Some(b)) if Arc::ptr_eq(&b.spec, &a.spec) => "unchanged",
                            (None, Some(_)) => "reloaded",
                            (None, None) => "added",
                        };
                        json!({"name": a.name, "state": state, "operations": a.spec.operations.len(),
                            "error": a.loaded.error})
                    })
                    .collect();
                let removed: Vec<&str> = current
                    .list
                    .iter()
                    .filter(|a| apis.position(&a.name).is_none())
                    .map(|a| a.name.as_str())
                    .collect();
                tracing::info!(trigger, apis = %serde_json::to_string(&report).unwrap_or_default(), ?removed, "APIs reloaded");
                metrics::counter!("apigate_reloads_total", "outcome" => "ok").increment(1);
                self.served.replace(apis);
                let answer = json!({"apis": report, "removed": removed});
                // Loading parsed whole documents: give what it freed back (see `heap`), and
                // the previous version's memory once no call holds it.
                drop(current);
                crate::heap::release_freed();
                Ok(answer)
            }
            Err(e) => {
                let error = crate::error_chain(&e);
                tracing::warn!(trigger, error = %error, "the APIs did not reload; the running version keeps serving");
                metrics::counter!("apigate_reloads_total", "outcome" => "failed").increment(1);
                let mut kept = (*current).clone();
                let dirs = [self.loader.config_path().and_then(std::path::Path::parent)];
                // Anyone may read /health: a config error shows the file's name, the line
                // and a category, never the text (a broken line may hold a secret), a
                // variable's name or a secret file's path. The log and the admin route have
                // the whole message.
                let public = match &e {
                    LoadError::Config(config) => config.public(),
                    _ => error.clone(),
                };
                let shown =
                    super::public_error(&format!("the last reload failed: {public}"), &dirs);
                for api in &mut kept.list {
                    api.loaded.error = Some(shown.clone());
                }
                self.served.replace(kept);
                drop(current);
                crate::heap::release_freed();
                Err(ReloadError::Failed(error))
            }
        }
    }

    /// [`Reloader::reload`] for the admin route, asked by `key` (none in dev): at most one a
    /// second; a refused one is audited too.
    pub async fn reload_now(&self, key: Option<&KeyPrincipal>) -> Result<Value, ReloadError> {
        let too_soon = {
            let mut last = self
                .last_admin
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let too_soon = last.is_some_and(|t| t.elapsed() < ADMIN_INTERVAL);
            if !too_soon {
                *last = Some(Instant::now());
            }
            too_soon
        };
        if too_soon {
            if let Some(auth) = &self.auth {
                auth.record_reload(key, "admin", None, Some(Code::RateLimited))
                    .await;
            }
            return Err(ReloadError::TooSoon);
        }
        self.reload("admin", key).await
    }

    /// Starts the triggers (`SIGHUP`, files on disk, URL polls) until `shutdown`.
    pub fn watch(self: &Arc<Reloader>, shutdown: CancellationToken) {
        #[cfg(unix)]
        {
            let me = self.clone();
            let stop = shutdown.clone();
            tokio::spawn(async move {
                let Ok(mut hup) =
                    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
                else {
                    tracing::warn!("cannot listen for SIGHUP; reload with the admin route");
                    return;
                };
                loop {
                    tokio::select! {
                        () = stop.cancelled() => return,
                        got = hup.recv() => if got.is_none() { return },
                    }
                    let _ = me.reload("SIGHUP", None).await;
                }
            });
        }
        let me = self.clone();
        let stop = shutdown.clone();
        tokio::spawn(async move { me.watch_files(stop).await });
        let me = self.clone();
        tokio::spawn(async move { me.poll_urls(shutdown).await });
    }

    /// The files a change of which reloads: the config file and every spec that is a file.
    fn files(&self) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = self
            .loader
            .config_path()
            .map(PathBuf::from)
            .into_iter()
            .collect();
        if let Ok(configs) = self.loader.configs() {
            files.extend(
                configs
                    .iter()
                    .filter(|c| !c.spec.starts_with("http://") && !c.spec.starts_with("https://"))
                    .map(|c| PathBuf::from(&c.spec)),
            );
        }
        files
    }

    async fn watch_files(&self, stop: CancellationToken) {
        let stamp = |files: &[PathBuf]| -> Vec<Option<(SystemTime, u64)>> {
            files
                .iter()
                .map(|f| {
                    let m = std::fs::metadata(f).ok()?;
                    Some((m.modified().ok()?, m.len()))
                })
                .collect()
        };
        let mut files = self.files();
        let mut seen = stamp(&files);
        while tick(&stop, WATCH_EVERY).await {
            let now = stamp(&files);
            if now == seen {
                continue;
            }
            // Debounce: wait until the files hold still for a whole interval.
            let mut settled = now;
            loop {
                if !tick(&stop, WATCH_EVERY).await {
                    return;
                }
                let again = stamp(&files);
                if again == settled {
                    break;
                }
                settled = again;
            }
            let _ = self.reload("file", None).await;
            files = self.files();
            seen = stamp(&files);
        }
    }

    /// Reloads every shortest `poll` interval of the URL specs (read again each round: a
    /// reload may change it); a URL that answers 304 to its ETag costs no download.
    async fn poll_urls(&self, stop: CancellationToken) {
        if self.loader.config_path().is_none() {
            // `--spec URL` has no `poll`.
            return;
        }
        loop {
            let every = self
                .loader
                .configs()
                .ok()
                .into_iter()
                .flatten()
                .filter(|c| c.spec.starts_with("http://") || c.spec.starts_with("https://"))
                .filter_map(|c| c.poll)
                .min();
            let Some(every) = every else {
                // No URL to poll (yet): look at the config again later.
                if !tick(&stop, NO_POLL_RECHECK).await {
                    return;
                }
                continue;
            };
            if !tick(&stop, every).await {
                return;
            }
            let _ = self.reload("poll", None).await;
        }
    }
}

/// The audit row's target for a reload's report: `apis:` and the APIs added, reloaded or
/// removed (`apis:` alone when nothing changed).
fn changed(report: &Value) -> Option<String> {
    let mut names: Vec<&str> = report["apis"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|a| matches!(a["state"].as_str(), Some("added" | "reloaded")))
        .filter_map(|a| a["name"].as_str())
        .collect();
    names.extend(
        report["removed"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str),
    );
    Some(format!("apis:{}", names.join(",")))
}

/// Waits `every`; false when `stop` came first.
async fn tick(stop: &CancellationToken, every: Duration) -> bool {
    tokio::select! {
        () = stop.cancelled() => false,
        () = tokio::time::sleep(every) => true,
    }
}
