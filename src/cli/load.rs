//! What `dev`, `stdio` and `serve` serve, from their options: what to load and how (the
//! `apis::load::Loader` of the flags and the environment, which a reload uses again) and the
//! engine over the APIs it loads, with its monitor gate and limits.

use crate::apis::config::{ApiConfig, SignInFile};
use crate::apis::load::{Loader, Source, UpstreamDefaults};
use crate::auth::PermissionRules;
use crate::tools::Engine;

use super::args::EngineArgs;

impl EngineArgs {
    /// The one API the flags describe (`--spec` and the flags about its upstream).
    fn flags_api(&self, spec: &str) -> anyhow::Result<ApiConfig> {
        Ok(ApiConfig {
            name: String::new(),
            spec: spec.to_string(),
            upstream: self.upstream.clone(),
            upstream_headers: self.upstream_headers.clone(),
            upstream_credentials: self.upstream_credentials.clone(),
            oauth: self.oauth.settings()?,
            upstream_timeout: None,
            connect_timeout: None,
            max_response_bytes: None,
            max_read_bytes: None,
            poll: None,
            ref_origins: Vec::new(),
            rules: Vec::new(),
        })
    }

    /// What to load and how: the config file, or `--spec` and its flags (with
    /// `APIGATE_UPSTREAM_HEADERS`); `extra_rules` (`--permissions`) go to every API.
    pub fn loader(&self, extra_rules: PermissionRules) -> anyhow::Result<Loader> {
        let source = match (&self.config, &self.spec) {
            (Some(path), _) => Source::File(path.clone()),
            (None, Some(spec)) => Source::Flags {
                api: Box::new(self.flags_api(spec)?),
                env_headers: std::env::var("APIGATE_UPSTREAM_HEADERS").ok(),
            },
            (None, None) => anyhow::bail!("give --spec FILE|URL, or --config apigate.toml"),
        };
        Ok(Loader {
            source,
            defaults: UpstreamDefaults {
                max_response_bytes: self.max_response_bytes,
                max_read_bytes: self.max_read_bytes,
                connect_timeout: self.connect_timeout,
                upstream_timeout: self.upstream_timeout,
            },
            max_spec_bytes: self.spec_limits.max_spec_bytes,
            ranking: self.ranking.ranking(),
            extra_rules,
        })
    }

    /// Loads the APIs, builds the index, the upstream clients and the monitor gate.
    pub async fn build(&self) -> anyhow::Result<Engine> {
        Ok(self.start(PermissionRules::default()).await?.engine)
    }

    /// [`EngineArgs::build`] with `extra_rules` for every API; also the loader a reload uses
    /// and the sign-in settings of the same read of the config file.
    pub async fn start(&self, extra_rules: PermissionRules) -> anyhow::Result<Started> {
        let loader = self.loader(extra_rules)?;
        let file = loader.read()?;
        let apis = loader.load_from(file.apis, None).await?;
        let title = match apis.list.as_slice() {
            [one] => Some(one.spec.title.clone()).filter(|t| !t.is_empty()),
            _ => None,
        };
        let monitor = self.monitor.build(title.as_deref())?;
        if let Some(m) = &monitor {
            tracing::info!(url = %m.endpoint(), "agent-monitor gate on: every tool call needs its approval");
        }
        let mut engine = Engine::serving(apis, monitor);
        engine.limits = self.limits.into();
        engine.held = crate::held::HeldResponses::in_memory(crate::held::HeldConfig {
            ttl: self.binary.response_ttl,
            max_bytes_per_owner: self.binary.max_held_bytes,
            max_total_bytes: self.binary.max_held_total_bytes,
        });
        engine.binary.max_image_bytes = self.binary.max_image_bytes;
        engine.budgets = crate::tools::Budgets {
            max_call_bytes: self.max_call_bytes,
            in_flight: crate::upstream::InFlight::new(self.max_bytes_in_flight),
        };
        // Most of what loading the document took is free now (the spec keeps only what its
        // operations reach): give it back.
        crate::heap::release_freed();
        Ok(Started {
            engine,
            loader,
            sign_in: file.sign_in,
        })
    }
}

/// What [`EngineArgs::start`] built.
pub struct Started {
    pub engine: Engine,
    pub loader: Loader,
    /// The config file's `[oauth]` table, read with its APIs (`serve` signs people in with it;
    /// a reload does not change it).
    pub sign_in: Option<SignInFile>,
}
