//! The options `dev`, `stdio` and `serve` share, and what they build from them: the HTTP
//! listener, the database access (permissions, rate limits, the sealing key), and the start-up
//! banner. The engine they describe is built in `load.rs`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use super::monitor::MonitorFlags;
use crate::apis::config::ClientCredentialsFile;
use crate::apis::load::Loader;
use crate::apis::reload::Reloader;
use crate::auth::sealed::{KeySource, SecretKeys};
use crate::auth::{Auth, AuthConfig, LimitsUnavailable, PermissionRules, RateLimit};
use crate::http::{self, Allowed, HttpOptions, KeyCheck};
use crate::store::Store;
use crate::tools::Engine;
use crate::tools::args::InputLimits;
use crate::upstream::MAX_READ_BYTES_CAP;

use super::help::heading;

/// Options of every command that runs the tools.
#[derive(Debug, clap::Args)]
pub struct EngineArgs {
    /// The OpenAPI document: a file path or an http(s) URL.
    #[arg(long, value_name = "FILE|URL", required_unless_present = "config",
          help_heading = heading::ESSENTIALS)]
    pub spec: Option<String>,
    /// Several APIs: an `apigate.toml` with one `[[api]]` table per API (name, spec,
    /// upstream, credentials by env:VAR or file:PATH reference, timeouts, rules). Instead of
    /// --spec and the flags about one API.
    #[arg(long, value_name = "FILE", help_heading = heading::ESSENTIALS, conflicts_with_all = [
        "spec", "upstream", "upstream_headers", "upstream_credentials",
        "upstream_oauth_token_url",
    ])]
    pub config: Option<PathBuf>,
    /// Response bodies beyond this many bytes are cut (valid JSON, marked `truncated`).
    #[arg(long, default_value_t = crate::upstream::DEFAULT_MAX_BODY_BYTES,
          help_heading = heading::LIMITS)]
    pub max_response_bytes: usize,
    /// Response bodies are read up to this many bytes: so that `select` and a cut of whole
    /// items see more than --max-response-bytes (beyond it a text body is cut on reading), and
    /// a binary answer (a download) comes back whole (beyond it, it is described, never cut).
    #[arg(long, default_value_t = crate::upstream::DEFAULT_MAX_READ_BYTES,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=MAX_READ_BYTES_CAP),
          help_heading = heading::LIMITS)]
    pub max_read_bytes: usize,
    /// The most memory one `api_execute` call may take: every page it reads (counted after
    /// its Content-Encoding is undone), its parsed JSON (112 bytes per value beside its text)
    /// and its `select` result. Past it the call stops early and says where and why
    /// (`pages.stoppedBecause`, or a note on a cut body); the server goes on.
    #[arg(long, default_value_t = crate::upstream::DEFAULT_MAX_CALL_BYTES,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1024..=16 * MAX_READ_BYTES_CAP),
          help_heading = heading::LIMITS)]
    pub max_call_bytes: usize,
    /// The most memory all `api_execute` calls together may take at once, counted as
    /// --max-call-bytes counts one call's: a call that finds none left stops early and says
    /// so, and the others go on.
    #[arg(long, default_value_t = crate::upstream::DEFAULT_MAX_BYTES_IN_FLIGHT,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1024..=64 * MAX_READ_BYTES_CAP),
          help_heading = heading::LIMITS)]
    pub max_bytes_in_flight: usize,
    #[command(flatten)]
    pub binary: BinaryArgs,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(flatten)]
    pub spec_limits: SpecLimitArgs,
    /// Send API calls here instead of the spec's server URL. User info
    /// (http://user:password@host) is sent as `Authorization: Basic …` and redacted like any
    /// credential.
    #[arg(long, value_name = "URL", help_heading = heading::UPSTREAM)]
    pub upstream: Option<String>,
    /// A header added to every upstream request, e.g. "Authorization: Bearer …" (repeatable).
    /// Never shown to the agent, in dry runs or in logs.
    #[arg(long = "upstream-header", value_name = "NAME: VALUE", help_heading = heading::UPSTREAM)]
    pub upstream_headers: Vec<String>,
    /// A credential for the spec's security scheme SCHEME, placed where the scheme says
    /// (apiKey header, query or cookie; http bearer or basic as user:password; oauth2 as a
    /// bearer token), only on the operations that require it. VALUE may be env:VAR
    /// (repeatable).
    #[arg(long = "upstream-credential", value_name = "SCHEME=VALUE", help_heading = heading::UPSTREAM)]
    pub upstream_credentials: Vec<String>,
    #[command(flatten)]
    pub oauth: OAuthArgs,
    /// Total time allowed for one upstream request (30s, 2m; a bare number is seconds).
    #[arg(long, default_value = "30s", value_parser = crate::types::duration::parse_duration,
          help_heading = heading::UPSTREAM)]
    pub upstream_timeout: Duration,
    /// Time allowed to connect to the upstream (10s, 500ms; a bare number is seconds).
    #[arg(long, default_value = "10s", value_parser = crate::types::duration::parse_duration,
          help_heading = heading::UPSTREAM)]
    pub connect_timeout: Duration,
    #[command(flatten)]
    pub monitor: MonitorFlags,
    #[command(flatten)]
    pub ranking: super::index::RankingArgs,
}

/// What loading a spec may read.
#[derive(Debug, Clone, Copy, clap::Args)]
#[command(next_help_heading = heading::LIMITS)]
pub struct SpecLimitArgs {
    /// Most bytes of a spec (file or URL) and the documents its `$ref`s name, together; read
    /// streaming, a larger one is refused before it is parsed (parsed, a document takes up to
    /// some 30 times its size in memory).
    #[arg(long, default_value_t = crate::spec::DEFAULT_MAX_SPEC_BYTES,
          value_parser = clap::value_parser!(u64).range(1..=MAX_SPEC_BYTES_CAP))]
    pub max_spec_bytes: u64,
}

/// The most `--max-spec-bytes` may be (1 GiB).
const MAX_SPEC_BYTES_CAP: u64 = 1 << 30;

impl Default for SpecLimitArgs {
    fn default() -> Self {
        SpecLimitArgs {
            max_spec_bytes: crate::spec::DEFAULT_MAX_SPEC_BYTES,
        }
    }
}

/// How binary responses come back: images as MCP image content, the rest as resource links
/// the same API key reads with `resources/read`.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = heading::LIMITS)]
pub struct BinaryArgs {
    /// PNG, JPEG, GIF and WebP responses up to this many bytes come back as MCP image
    /// content; larger ones as a resource link.
    #[arg(long, default_value_t = crate::tools::binary_out::DEFAULT_MAX_IMAGE_BYTES,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=MAX_READ_BYTES_CAP))]
    pub max_image_bytes: usize,
    /// How long a binary response stays readable through its resource link (10m, 1h; a bare
    /// number is seconds).
    #[arg(long, default_value = "10m", value_parser = crate::types::duration::parse_duration)]
    pub response_ttl: Duration,
    /// The most bytes of binary responses held per caller (signed-in person, user session,
    /// else API key); the oldest go first.
    #[arg(long, default_value_t = crate::held::DEFAULT_MAX_HELD_BYTES,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=16 * MAX_READ_BYTES_CAP))]
    pub max_held_bytes: usize,
    /// The most bytes of binary responses held for all keys, sessions and signed-in people
    /// together (in Postgres, the whole table); anyone's oldest go first.
    #[arg(long, default_value_t = crate::held::DEFAULT_MAX_HELD_TOTAL_BYTES,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=64 * MAX_READ_BYTES_CAP))]
    pub max_held_total_bytes: usize,
}

impl Default for BinaryArgs {
    fn default() -> Self {
        BinaryArgs {
            max_image_bytes: crate::tools::binary_out::DEFAULT_MAX_IMAGE_BYTES,
            response_ttl: crate::held::DEFAULT_RESPONSE_TTL,
            max_held_bytes: crate::held::DEFAULT_MAX_HELD_BYTES,
            max_held_total_bytes: crate::held::DEFAULT_MAX_HELD_TOTAL_BYTES,
        }
    }
}

/// OAuth 2.0 client credentials for the upstream (RFC 6749 §4.4).
#[derive(clap::Args, Default)]
#[command(next_help_heading = heading::UPSTREAM)]
pub struct OAuthArgs {
    /// Fetch an access token here (client credentials grant, client_secret_basic) and send it
    /// as `Authorization: Bearer …` on every call; cached, refreshed before it expires, and
    /// fetched again once when the API answers 401.
    #[arg(long, value_name = "URL", requires = "upstream_oauth_client_id")]
    pub upstream_oauth_token_url: Option<String>,
    /// The OAuth client id.
    #[arg(long, value_name = "ID", requires = "upstream_oauth_token_url")]
    pub upstream_oauth_client_id: Option<String>,
    /// The OAuth client secret (prefer the environment variable: flags show in `ps`).
    #[arg(
        long,
        value_name = "SECRET",
        env = "APIGATE_UPSTREAM_OAUTH_CLIENT_SECRET",
        hide_env_values = true
    )]
    pub upstream_oauth_client_secret: Option<String>,
    /// The `scope` to ask for.
    #[arg(long, value_name = "SCOPE", requires = "upstream_oauth_token_url")]
    pub upstream_oauth_scope: Option<String>,
    /// The `audience` to ask for (Auth0, Okta and others want one).
    #[arg(long, value_name = "AUDIENCE", requires = "upstream_oauth_token_url")]
    pub upstream_oauth_audience: Option<String>,
}

impl std::fmt::Debug for OAuthArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthArgs")
            .field("token_url", &self.upstream_oauth_token_url.is_some())
            .field("client_id", &self.upstream_oauth_client_id)
            .finish_non_exhaustive()
    }
}

impl OAuthArgs {
    pub(super) fn settings(&self) -> anyhow::Result<Option<ClientCredentialsFile>> {
        let Some(url) = &self.upstream_oauth_token_url else {
            return Ok(None);
        };
        let Some(secret) = self.upstream_oauth_client_secret.clone() else {
            anyhow::bail!(
                "--upstream-oauth-token-url needs the client secret: set \
                 APIGATE_UPSTREAM_OAUTH_CLIENT_SECRET (or --upstream-oauth-client-secret)"
            );
        };
        Ok(Some(ClientCredentialsFile {
            token_url: url.clone(),
            client_id: self.upstream_oauth_client_id.clone().unwrap_or_default(),
            client_secret: secret,
            scope: self.upstream_oauth_scope.clone(),
            audience: self.upstream_oauth_audience.clone(),
        }))
    }
}

/// HTTP options shared by `dev` and `serve`.
#[derive(Debug, clap::Args)]
pub struct HttpArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:3001", help_heading = heading::ESSENTIALS)]
    pub listen: SocketAddr,
    /// Stateless Streamable HTTP (no Mcp-Session-Id): for replicas behind a load balancer.
    #[arg(long, help_heading = heading::ESSENTIALS)]
    pub stateless: bool,
    /// Extra `Host` values to serve (name or name:port), e.g. behind a proxy (repeatable).
    #[arg(long = "allowed-host", help_heading = heading::HTTP)]
    pub allowed_hosts: Vec<String>,
    /// Browser origins allowed to call (scheme://host[:port|:*]) (repeatable).
    #[arg(long = "allowed-origin", help_heading = heading::HTTP)]
    pub allowed_origins: Vec<String>,
    /// Largest request body accepted, in bytes.
    #[arg(long, default_value_t = http::DEFAULT_MAX_BODY_BYTES, help_heading = heading::LIMITS)]
    pub max_body_bytes: usize,
    /// Live MCP sessions and `subscriptions/listen` streams one API key may hold (Streamable
    /// HTTP; legacy SSE streams apart); beyond it `initialize` and `subscriptions/listen` get
    /// 429. A key's listen streams also hold at most half of --max-connections.
    #[arg(long, default_value_t = http::DEFAULT_MAX_SESSIONS_PER_KEY, help_heading = heading::LIMITS)]
    pub max_sessions_per_key: usize,
    /// Messages a legacy SSE session queues in each direction; beyond it POST /message gets 429.
    #[arg(long, default_value_t = http::DEFAULT_SSE_QUEUE, help_heading = heading::LIMITS)]
    pub sse_queue: usize,
    /// A connection must send a request's complete header within this time (slow clients,
    /// idle keep-alive connections) or it is closed.
    #[arg(long, default_value = "10s", value_parser = crate::types::duration::parse_duration,
          help_heading = heading::LIMITS)]
    pub header_read_timeout: Duration,
    /// Connections open at once; more are closed as they arrive.
    #[arg(long, default_value_t = 1024, help_heading = heading::LIMITS)]
    pub max_connections: usize,
    /// On SIGTERM or Ctrl-C: no new connections, `/ready` answers 503, and the requests in
    /// flight get this long to finish before the MCP sessions and their streams are ended.
    #[arg(long, default_value = "25s", value_parser = crate::types::duration::parse_duration,
          help_heading = heading::HTTP)]
    pub drain_timeout: Duration,
    /// Also serve /metrics without a key on this address, for a Prometheus scraper (on the
    /// main address /metrics needs the API key).
    #[arg(long, value_name = "ADDR", help_heading = heading::HTTP)]
    pub metrics_listen: Option<SocketAddr>,
}

impl HttpArgs {
    pub fn allowed(&self) -> Allowed {
        let mut allowed = Allowed::default();
        allowed.hosts.extend(self.allowed_hosts.iter().cloned());
        allowed.origins = self.allowed_origins.clone();
        allowed
    }

    /// The HTTP options these flags set; `keys` and `mode` come from the command.
    pub fn options(&self, keys: KeyCheck, mode: &'static str) -> HttpOptions {
        HttpOptions {
            stateless: self.stateless,
            allowed: self.allowed(),
            max_body_bytes: self.max_body_bytes,
            max_sessions_per_key: self.max_sessions_per_key,
            max_connections: self.max_connections,
            sse_queue: self.sse_queue,
            drain_timeout: self.drain_timeout,
            ..HttpOptions::new(keys, mode)
        }
    }

    /// The listener of `--listen`, and the address it got (port 0 picks one).
    pub async fn bind(&self) -> anyhow::Result<(tokio::net::TcpListener, SocketAddr)> {
        let listener = tokio::net::TcpListener::bind(self.listen)
            .await
            .with_context(|| format!("cannot listen on {}", self.listen))?;
        let addr = listener.local_addr()?;
        Ok((listener, addr))
    }

    /// The start-up `dev` and `serve` share once their engine is built: the reloader and its
    /// triggers (SIGHUP, the files, URL polls, `POST /admin/v1/reload`), the router with
    /// `options`, and serving until SIGTERM or SIGINT has drained the requests in flight.
    pub async fn run(
        &self,
        engine: Arc<Engine>,
        loader: Loader,
        listener: tokio::net::TcpListener,
        options: HttpOptions,
    ) -> anyhow::Result<()> {
        let shutdown = CancellationToken::new();
        http::cancel_on_signal(shutdown.clone());
        let database = engine.auth.clone();
        let reloader = Reloader::new(engine.served(), loader, database.clone());
        reloader.watch(shutdown.clone());
        let router = http::router(
            engine,
            HttpOptions {
                database,
                reload: Some(reloader),
                ..options
            },
            shutdown.clone(),
        );
        self.serve(listener, router, shutdown).await
    }

    /// Serves `router` on `listener` (and /metrics on `--metrics-listen`) until `shutdown`.
    pub async fn serve(
        &self,
        listener: tokio::net::TcpListener,
        router: axum::Router,
        shutdown: CancellationToken,
    ) -> anyhow::Result<()> {
        let limits = http::ConnLimits {
            header_read_timeout: self.header_read_timeout,
            max_connections: self.max_connections,
            // The drain, then a moment for the sessions' streams to send their end.
            shutdown_grace: self.drain_timeout + Duration::from_secs(2),
        };
        if let Some(addr) = self.metrics_listen {
            let metrics = tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("cannot listen on {addr} (--metrics-listen)"))?;
            if !addr.ip().is_loopback() {
                tracing::warn!(%addr, "/metrics is served without a key beyond loopback");
            }
            tracing::info!(%addr, "/metrics without a key on --metrics-listen");
            tokio::spawn(http::serve(
                metrics,
                http::metrics_router(),
                shutdown.clone(),
                limits,
            ));
        }
        http::serve(listener, router, shutdown, limits).await?;
        Ok(())
    }
}

/// Options shared by every command that uses the database from a server.
#[derive(Debug, clap::Args)]
pub struct AccessArgs {
    /// Permission rules: a TOML file of `[[rule]]` tables (`method`, `path` glob, `features`)
    /// that operations need on top of their `x-required-features`.
    #[arg(long, value_name = "FILE", help_heading = heading::KEYS)]
    pub permissions: Option<PathBuf>,
    /// Tool calls per second allowed per server key (token bucket; 0 = no limit).
    #[arg(long, default_value_t = 50.0, help_heading = heading::KEYS)]
    pub key_rate: f64,
    /// Burst allowed per server key.
    #[arg(long, default_value_t = 100, help_heading = heading::KEYS)]
    pub key_burst: u32,
    /// Tool calls per second allowed per user session (0 = no limit).
    #[arg(long, default_value_t = 10.0, help_heading = heading::KEYS)]
    pub session_rate: f64,
    /// Burst allowed per user session.
    #[arg(long, default_value_t = 30, help_heading = heading::KEYS)]
    pub session_burst: u32,
    /// When Postgres does not answer a rate check (the limits replicas share live there):
    /// `closed` refuses the call, `open` lets each replica apply the limits alone.
    #[arg(long, value_enum, default_value_t = LimitsWhenDown::Closed, help_heading = heading::KEYS)]
    pub limits_unavailable: LimitsWhenDown,
    #[command(flatten, next_help_heading = heading::KEYS)]
    pub secret_key: SecretKeyArgs,
}

/// `--limits-unavailable`: [`crate::auth::LimitsUnavailable`] on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LimitsWhenDown {
    Closed,
    Open,
}

/// The key that seals sessions' upstream credentials at rest (AES-256-GCM).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SecretKeyArgs {
    /// A file holding the secret key as base64 of 32 random bytes (`openssl rand -base64 32`);
    /// default: the APIGATE_SECRET_KEY variable. Needed for sessions that carry upstream
    /// credentials.
    #[arg(long, value_name = "FILE", global = true)]
    pub secret_key_file: Option<PathBuf>,
    /// The previous key's file while rotating keys (it only decrypts); default: the
    /// APIGATE_SECRET_KEY_PREVIOUS variable.
    #[arg(long, value_name = "FILE", global = true)]
    pub previous_secret_key_file: Option<PathBuf>,
}

impl SecretKeyArgs {
    /// The configured keys, or `None` when no key is configured.
    pub fn load(&self) -> anyhow::Result<Option<Arc<SecretKeys>>> {
        let source = KeySource {
            file: self.secret_key_file.as_deref(),
            previous_file: self.previous_secret_key_file.as_deref(),
            ..KeySource::default()
        }
        .with_env();
        Ok(SecretKeys::load(&source)?.map(Arc::new))
    }
}

impl AccessArgs {
    pub fn rules(&self) -> anyhow::Result<PermissionRules> {
        match &self.permissions {
            None => Ok(PermissionRules::default()),
            Some(path) => {
                let text = std::fs::read_to_string(path)
                    .with_context(|| format!("reading permission rules {}", path.display()))?;
                PermissionRules::from_toml(&text).with_context(|| format!("in {}", path.display()))
            }
        }
    }

    /// Connects, migrates and starts the auth core (with its revocation listener).
    pub async fn auth(&self, database_url: &str) -> anyhow::Result<Auth> {
        let store = Store::connect(database_url).await?;
        store
            .migrate()
            .await
            .context("applying database migrations")?;
        let bootstrap_key = std::env::var("MCP_SERVER_API_KEY")
            .ok()
            .filter(|k| !k.trim().is_empty());
        let cfg = AuthConfig {
            bootstrap_key,
            key_rate: RateLimit {
                per_second: self.key_rate,
                burst: self.key_burst,
            },
            session_rate: RateLimit {
                per_second: self.session_rate,
                burst: self.session_burst,
            },
            limits_unavailable: match self.limits_unavailable {
                LimitsWhenDown::Closed => LimitsUnavailable::Closed,
                LimitsWhenDown::Open => LimitsUnavailable::Open,
            },
            secret_keys: self.secret_key.load()?,
            ..AuthConfig::default()
        };
        if let Some(keys) = &cfg.secret_keys {
            tracing::info!(key_id = %keys.current_id(),
                "sessions' upstream credentials are sealed with the configured secret key");
        }
        Ok(Auth::new(store, cfg).await?)
    }
}

/// Size caps on the tools' arguments (`tools::args::InputLimits`), as flags.
#[derive(Debug, Clone, Copy, clap::Args)]
#[command(next_help_heading = heading::LIMITS)]
pub struct LimitArgs {
    /// Longest `path` argument, in bytes.
    #[arg(long, default_value_t = InputLimits::default().max_path_bytes)]
    pub max_path_bytes: usize,
    /// Longest `api_discover` query, in characters.
    #[arg(long, default_value_t = InputLimits::default().max_query_chars)]
    pub max_query_chars: usize,
    /// Longest operationId, tag, media type, and path, query or header parameter value (as
    /// JSON text), in bytes.
    #[arg(long, default_value_t = InputLimits::default().max_value_bytes)]
    pub max_value_bytes: usize,
    /// Most pages one `api_execute` call may follow (`pages`); each is one upstream request.
    #[arg(long, default_value_t = InputLimits::default().max_pages)]
    pub max_pages: usize,
    /// Most bytes one `api_execute` call may upload (a binary body or multipart files, counted
    /// decoded). Base64 in the JSON-RPC request is also bounded by --max-body-bytes.
    #[arg(long, default_value_t = InputLimits::default().max_request_bytes)]
    pub max_request_bytes: usize,
}

impl Default for LimitArgs {
    fn default() -> LimitArgs {
        let InputLimits {
            max_path_bytes,
            max_query_chars,
            max_value_bytes,
            max_pages,
            max_request_bytes,
        } = InputLimits::default();
        LimitArgs {
            max_path_bytes,
            max_query_chars,
            max_value_bytes,
            max_pages,
            max_request_bytes,
        }
    }
}

impl From<LimitArgs> for InputLimits {
    fn from(a: LimitArgs) -> InputLimits {
        let LimitArgs {
            max_path_bytes,
            max_query_chars,
            max_value_bytes,
            max_pages,
            max_request_bytes,
        } = a;
        InputLimits {
            max_path_bytes,
            max_query_chars,
            max_value_bytes,
            max_pages,
            max_request_bytes,
        }
    }
}

/// The first line a server prints: what it serves, where, how, and which ranker answers
/// (with the model's name and hash).
pub fn banner(command: &str, engine: &Engine, url: &str, stateless: bool) -> String {
    let apis = engine.apis();
    let title = match apis.title() {
        t if t.is_empty() => "API".to_string(),
        t => t,
    };
    let mode = if stateless { " (stateless)" } else { "" };
    let ranking = match (apis.index.ranker(), apis.index.model()) {
        (crate::index::Ranker::Hybrid, Some(model)) => format!("ranker: hybrid, model {model}"),
        (_, Some(model)) => {
            format!("ranker: lexical until model {model} has embedded the operations")
        }
        _ => "ranker: lexical".to_string(),
    };
    format!(
        "apigate {command}: {title} ({}) at {url}{mode} ({ranking})",
        super::help::count(apis.operations(), "operation", "operations")
    )
}
