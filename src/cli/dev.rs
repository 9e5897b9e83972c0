//! `apigate dev` (HTTP, one API key, no database) and `apigate stdio`, and the engine
//! options they share with `serve`.

use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use rmcp::ServiceExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::monitor::MonitorFlags;
use crate::http::{self, Allowed, HttpOptions, KeyCheck};
use crate::index::Index;
use crate::mcp::McpServer;
use crate::spec::Spec;
use crate::tools::Engine;
use crate::upstream::{SchemeCredential, SchemeCredentials, Upstream, UpstreamConfig};

/// Options of every command that runs the tools.
#[derive(Debug, clap::Args)]
pub struct EngineArgs {
    /// The OpenAPI document: a file path or an http(s) URL.
    #[arg(long)]
    pub spec: String,
    /// Send API calls here instead of the spec's server URL. User info
    /// (http://user:password@host) is sent as `Authorization: Basic …` and redacted like any
    /// credential.
    #[arg(long)]
    pub upstream: Option<String>,
    /// A header added to every upstream request, e.g. "Authorization: Bearer …" (repeatable).
    /// Never shown to the agent, in dry runs or in logs.
    #[arg(long = "upstream-header", value_name = "NAME: VALUE")]
    pub upstream_headers: Vec<String>,
    /// A credential for the spec's security scheme SCHEME, placed where the scheme says
    /// (apiKey header, query or cookie; http bearer or basic as user:password; oauth2 as a
    /// bearer token), only on the operations that require it. VALUE may be env:VAR
    /// (repeatable).
    #[arg(long = "upstream-credential", value_name = "SCHEME=VALUE")]
    pub upstream_credentials: Vec<String>,
    #[command(flatten)]
    pub oauth: OAuthArgs,
    /// Total time allowed for one upstream request (30s, 2m; a bare number is seconds).
    #[arg(long, default_value = "30s", value_parser = crate::monitor::parse_duration)]
    pub upstream_timeout: Duration,
    /// Time allowed to connect to the upstream (10s, 500ms; a bare number is seconds).
    #[arg(long, default_value = "10s", value_parser = crate::monitor::parse_duration)]
    pub connect_timeout: Duration,
    /// Response bodies beyond this many bytes are cut (valid JSON, marked `truncated`).
    #[arg(long, default_value_t = crate::upstream::DEFAULT_MAX_BODY_BYTES)]
    pub max_response_bytes: usize,
    /// Response bodies are read up to this many bytes: so that `select` and a cut of whole
    /// items see more than --max-response-bytes (beyond it a text body is cut on reading), and
    /// a binary answer (a download) comes back whole (beyond it, it is described, never cut).
    #[arg(long, default_value_t = crate::upstream::DEFAULT_MAX_READ_BYTES,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=MAX_READ_BYTES_CAP))]
    pub max_read_bytes: usize,
    #[command(flatten)]
    pub binary: BinaryArgs,
    #[command(flatten)]
    pub monitor: MonitorFlags,
    #[command(flatten)]
    pub ranking: super::index::RankingArgs,
    #[command(flatten)]
    pub limits: crate::tools::args::InputLimits,
}

/// The most `--max-read-bytes` may be (1 GiB): a response is held in memory while it is read.
const MAX_READ_BYTES_CAP: u64 = 1 << 30;

/// How binary responses come back: images as MCP image content, the rest as resource links
/// the same API key reads with `resources/read`.
#[derive(Debug, Clone, clap::Args)]
pub struct BinaryArgs {
    /// PNG, JPEG, GIF and WebP responses up to this many bytes come back as MCP image
    /// content; larger ones as a resource link.
    #[arg(long, default_value_t = crate::tools::binary_out::DEFAULT_MAX_IMAGE_BYTES,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=MAX_READ_BYTES_CAP))]
    pub max_image_bytes: usize,
    /// How long a binary response stays readable through its resource link (10m, 1h; a bare
    /// number is seconds).
    #[arg(long, default_value = "10m", value_parser = crate::monitor::parse_duration)]
    pub response_ttl: Duration,
    /// The most bytes of binary responses held per API key; the oldest go first.
    #[arg(long, default_value_t = crate::held::DEFAULT_MAX_HELD_BYTES,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=16 * MAX_READ_BYTES_CAP))]
    pub max_held_bytes: usize,
}

impl Default for BinaryArgs {
    fn default() -> Self {
        BinaryArgs {
            max_image_bytes: crate::tools::binary_out::DEFAULT_MAX_IMAGE_BYTES,
            response_ttl: crate::held::DEFAULT_RESPONSE_TTL,
            max_held_bytes: crate::held::DEFAULT_MAX_HELD_BYTES,
        }
    }
}

/// OAuth 2.0 client credentials for the upstream (RFC 6749 §4.4).
#[derive(clap::Args, Default)]
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
    fn config(&self) -> anyhow::Result<Option<crate::upstream::OAuthConfig>> {
        let Some(url) = &self.upstream_oauth_token_url else {
            return Ok(None);
        };
        let Some(secret) = self.upstream_oauth_client_secret.clone() else {
            anyhow::bail!(
                "--upstream-oauth-token-url needs the client secret: set \
                 APIGATE_UPSTREAM_OAUTH_CLIENT_SECRET (or --upstream-oauth-client-secret)"
            );
        };
        Ok(Some(crate::upstream::OAuthConfig::new(
            url,
            self.upstream_oauth_client_id.clone().unwrap_or_default(),
            secret,
            self.upstream_oauth_scope.clone(),
            self.upstream_oauth_audience.clone(),
        )?))
    }
}

impl EngineArgs {
    /// Loads the spec, builds the index, the upstream client and the monitor gate.
    pub async fn build(&self) -> anyhow::Result<Engine> {
        let spec = Spec::load(&self.spec).await?;
        for w in &spec.warnings {
            tracing::debug!(warning = %w, "spec warning");
        }
        if !spec.warnings.is_empty() {
            tracing::info!(
                count = spec.warnings.len(),
                "the spec has warnings; `apigate check` lists them"
            );
        }
        let index = Arc::new(Index::build(&[&spec]).context("building the search index")?);
        self.ranking.start(&index)?;
        let mut headers = Vec::new();
        for h in &self.upstream_headers {
            headers.push(UpstreamConfig::parse_header(h).context("in --upstream-header")?);
        }
        if let Ok(env) = std::env::var("APIGATE_UPSTREAM_HEADERS") {
            headers.extend(
                UpstreamConfig::headers_from_env(&env).context("in APIGATE_UPSTREAM_HEADERS")?,
            );
        }
        let base_url = match &self.upstream {
            // The error names the value without its user info or query.
            Some(u) => Some(UpstreamConfig::parse_base_url(u)?),
            None => None,
        };
        let schemes = self
            .upstream_credentials
            .iter()
            .map(|c| SchemeCredential::parse(c, &spec.security_schemes))
            .collect::<Result<Vec<_>, _>>()?;
        let upstream = Upstream::new(UpstreamConfig {
            base_url,
            headers,
            oauth: self.oauth.config()?,
            schemes: SchemeCredentials::new(schemes),
            connect_timeout: self.connect_timeout,
            timeout: self.upstream_timeout,
            max_body_bytes: self.max_response_bytes,
            // Never less than what is shown.
            max_read_bytes: self.max_read_bytes.max(self.max_response_bytes),
            ..UpstreamConfig::default()
        })?;
        let target = match &upstream.config().base_url {
            Some(u) => shown_target(u.as_str()),
            None => spec.servers.first().map_or_else(
                || "nowhere: the spec names no server; start with --upstream URL".to_string(),
                |s| shown_target(s),
            ),
        };
        tracing::info!(%target, "API calls go to {target}");
        if upstream.oauth().is_some() {
            tracing::info!(
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
            tracing::info!(schemes = %schemes.join(", "), "credentials for security schemes, sent on the operations that need them");
        }
        let title = (!spec.title.is_empty()).then_some(spec.title.as_str());
        let monitor = self.monitor.build(title)?;
        if let Some(m) = &monitor {
            tracing::info!(url = %m.endpoint(), "agent-monitor gate on: every tool call needs its approval");
        }
        let mut engine = Engine::new(Arc::new(spec), index, upstream, monitor);
        engine.limits = self.limits;
        engine.held = crate::held::HeldResponses::in_memory(crate::held::HeldConfig {
            ttl: self.binary.response_ttl,
            max_bytes_per_owner: self.binary.max_held_bytes,
        });
        engine.binary.max_image_bytes = self.binary.max_image_bytes;
        // Most of what loading the document took is free now (the spec keeps only what its
        // operations reach): give it back.
        crate::heap::release_freed();
        Ok(engine)
    }
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

/// HTTP options shared by `dev` and `serve`.
#[derive(Debug, clap::Args)]
pub struct HttpArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:3001")]
    pub listen: SocketAddr,
    /// Stateless Streamable HTTP (no Mcp-Session-Id): for replicas behind a load balancer.
    #[arg(long)]
    pub stateless: bool,
    /// Extra `Host` values to serve (name or name:port), e.g. behind a proxy (repeatable).
    #[arg(long = "allowed-host")]
    pub allowed_hosts: Vec<String>,
    /// Browser origins allowed to call (scheme://host[:port|:*]) (repeatable).
    #[arg(long = "allowed-origin")]
    pub allowed_origins: Vec<String>,
    /// Largest request body accepted, in bytes.
    #[arg(long, default_value_t = http::DEFAULT_MAX_BODY_BYTES)]
    pub max_body_bytes: usize,
    /// Live MCP sessions one API key may hold (Streamable HTTP; legacy SSE streams apart);
    /// beyond it `initialize` gets 429.
    #[arg(long, default_value_t = http::DEFAULT_MAX_SESSIONS_PER_KEY)]
    pub max_sessions_per_key: usize,
    /// Messages a legacy SSE session queues in each direction; beyond it POST /message gets 429.
    #[arg(long, default_value_t = http::DEFAULT_SSE_QUEUE)]
    pub sse_queue: usize,
    /// A connection must send a request's complete header within this time (slow clients,
    /// idle keep-alive connections) or it is closed.
    #[arg(long, default_value = "10s", value_parser = crate::monitor::parse_duration)]
    pub header_read_timeout: Duration,
    /// Connections open at once; more are closed as they arrive.
    #[arg(long, default_value_t = 1024)]
    pub max_connections: usize,
    /// Also serve /metrics without a key on this address, for a Prometheus scraper (on the
    /// main address /metrics needs the API key).
    #[arg(long, value_name = "ADDR")]
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
            sse_queue: self.sse_queue,
            ..HttpOptions::new(keys, mode)
        }
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
            ..http::ConnLimits::default()
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

#[derive(Debug, clap::Args)]
pub struct DevArgs {
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub http: HttpArgs,
    /// The API key clients must send in `x-api-key` (else APIGATE_API_KEY,
    /// MCP_SERVER_API_KEY, .mcp.json, or a generated one).
    #[arg(long)]
    pub api_key: Option<String>,
    /// Optional: check the dev key against this database once at start-up and apply its
    /// permissions (and write the audit log).
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
    #[command(flatten)]
    pub access: super::serve::AccessArgs,
    #[command(flatten)]
    pub identity: super::identity::IdentityArgs,
    /// Lets `api_execute` upload files from this folder by name (`{"file": "NAME"}` as the
    /// body or a multipart file field), so large files need not pass through the model. Only
    /// names inside it are read (no absolute path, `..` or symbolic link out), each within
    /// --max-request-bytes. Development only: `serve` has no such flag.
    #[arg(long, value_name = "DIR")]
    pub upload_dir: Option<std::path::PathBuf>,
    /// Also write every binary response to a new file in this folder (a generated name,
    /// mode 0600, never overwriting) and return its path.
    #[arg(long, value_name = "DIR")]
    pub download_dir: Option<std::path::PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct StdioArgs {
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// Where the dev key came from.
#[derive(Debug, PartialEq, Eq)]
pub enum KeySource {
    Flag,
    Env(&'static str),
    McpJson,
    Generated,
}

/// Resolves the dev key: flag, APIGATE_API_KEY, MCP_SERVER_API_KEY, `.mcp.json` (an entry
/// whose url points at `listen`), else a new random key.
pub fn resolve_key(flag: Option<&str>, listen: SocketAddr, mcp_json: &Path) -> (String, KeySource) {
    if let Some(k) = flag.map(str::trim).filter(|k| !k.is_empty()) {
        return (k.to_string(), KeySource::Flag);
    }
    for var in ["APIGATE_API_KEY", "MCP_SERVER_API_KEY"] {
        if let Ok(k) = std::env::var(var)
            && !k.trim().is_empty()
        {
            return (k.trim().to_string(), KeySource::Env(var));
        }
    }
    let found = McpJsonKeys::read(mcp_json, listen);
    if let Some(k) = found.matching {
        return (k, KeySource::McpJson);
    }
    for url in &found.elsewhere {
        tracing::warn!(
            file = %mcp_json.display(),
            %url,
            %listen,
            "the .mcp.json entry with an x-api-key points at another address, so its key was not used; \
             fix its url or start with --listen matching it"
        );
    }
    let bytes: [u8; 24] = rand::random();
    (
        format!("agk_dev_{}", hex::encode(bytes)),
        KeySource::Generated,
    )
}

/// The `x-api-key`s of a `.mcp.json`: the one whose url points at this server, and the urls
/// of entries that carry a key but point elsewhere.
#[derive(Debug, Default)]
struct McpJsonKeys {
    matching: Option<String>,
    elsewhere: Vec<String>,
}

impl McpJsonKeys {
    fn read(path: &Path, listen: SocketAddr) -> McpJsonKeys {
        let mut found = McpJsonKeys::default();
        let Some(doc) = std::fs::read_to_string(path)
            .ok()
            .and_then(|text| serde_json::from_str::<Value>(&text).ok())
        else {
            return found;
        };
        let servers = doc.get("mcpServers").and_then(Value::as_object);
        for server in servers.into_iter().flat_map(|s| s.values()) {
            let Some(raw_url) = server.get("url").and_then(Value::as_str) else {
                continue;
            };
            let Some(key) = server
                .get("headers")
                .and_then(|h| h.get("x-api-key"))
                .and_then(Value::as_str)
                .map(str::trim)
            else {
                continue;
            };
            // `${VAR}` placeholders are Claude Code's env expansion: read the variable.
            let key = match key.strip_prefix("${").and_then(|k| k.strip_suffix('}')) {
                Some(var) => std::env::var(var).unwrap_or_default(),
                None => key.to_string(),
            };
            if key.is_empty() {
                continue;
            }
            if points_at(raw_url, listen) {
                found.matching.get_or_insert(key);
            } else {
                found.elsewhere.push(raw_url.to_string());
            }
        }
        found
    }
}

/// Whether `url` reaches a server listening on `listen`.
fn points_at(url: &str, listen: SocketAddr) -> bool {
    let Ok(url) = url::Url::parse(url) else {
        return false;
    };
    let host_ok = match url.host_str() {
        Some("localhost") | Some("127.0.0.1") | Some("[::1]") => true,
        Some(h) => h == listen.ip().to_string(),
        None => false,
    };
    host_ok && url.port_or_known_default() == Some(listen.port())
}

pub async fn run_dev(args: DevArgs) -> anyhow::Result<ExitCode> {
    let mut engine = args.engine.build().await?;
    engine.rules = args.access.rules()?;
    if let Some(dir) = &args.download_dir {
        let dir = crate::tools::binary_out::download_dir(dir)?;
        tracing::info!(dir = %dir.display(), "binary responses are also written to --download-dir");
        engine.binary.download_dir = Some(dir);
    }
    let listener = tokio::net::TcpListener::bind(args.http.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.http.listen))?;
    let addr = listener.local_addr()?;
    let (key, source) = resolve_key(args.api_key.as_deref(), addr, Path::new(".mcp.json"));
    let mut store = None;
    if let Some(url) = &args.database_url {
        let auth = args.access.auth(url).await?;
        let principal = auth.authenticate_key(&key).await.map_err(|e| {
            anyhow::anyhow!(
                "the dev API key is not an active key in DATABASE_URL ({e}); create one with `apigate keys create`, \
                 pass it with --api-key, or unset DATABASE_URL to run without a database"
            )
        })?;
        tracing::info!(key = %principal.label(), "dev key checked against the database; its permissions apply");
        engine.access = crate::tools::Access::Fixed(principal.principal());
        store = Some(auth.store().clone());
        engine.auth = Some(auth);
    }
    engine.identity = args.identity.build(&format!("http://{addr}"))?;
    if let Some(dir) = &args.upload_dir {
        let dir = crate::tools::upload::UploadDir::new(dir)?;
        tracing::info!(dir = %dir.root().display(), max_bytes = engine.limits.max_request_bytes,
            "api_execute may upload files from this folder by name ({{\"file\": \"NAME\"}})");
        engine.upload_dir = Some(Arc::new(dir));
    }
    let engine = Arc::new(engine);
    let url = format!("http://{addr}/mcp");
    eprintln!("{}", banner("dev", &engine, &url, args.http.stateless));
    match source {
        KeySource::Generated => {
            let creds = super::config::Credentials {
                key: Some(&key),
                session_token: None,
            };
            eprintln!(
                "No API key given (--api-key, APIGATE_API_KEY, MCP_SERVER_API_KEY or .mcp.json); generated one for this run."
            );
            eprintln!(
                "\nClaude Code, .mcp.json:\n{}",
                serde_json::to_string_pretty(&super::config::claude("apigate", &url, creds))?
            );
            eprintln!(
                "\nOpenCode, opencode.json:\n{}\n",
                serde_json::to_string_pretty(&super::config::opencode("apigate", &url, creds))?
            );
        }
        other => eprintln!(
            "API key from {}",
            match other {
                KeySource::Flag => "--api-key".to_string(),
                KeySource::Env(v) => v.to_string(),
                KeySource::McpJson => ".mcp.json".to_string(),
                KeySource::Generated => unreachable!(),
            }
        ),
    }
    if !addr.ip().is_loopback() {
        tracing::warn!(%addr, "listening beyond loopback; add the public host name with --allowed-host");
    }
    let shutdown = CancellationToken::new();
    http::cancel_on_signal(shutdown.clone());
    let router = http::router(
        engine,
        HttpOptions {
            store,
            ..args.http.options(KeyCheck::Single(key), "development")
        },
        shutdown.clone(),
    );
    args.http.serve(listener, router, shutdown).await?;
    Ok(ExitCode::SUCCESS)
}

/// The first line a server prints: what it serves, where, how, and which ranker answers
/// (with the model's name and hash).
pub fn banner(command: &str, engine: &crate::tools::Engine, url: &str, stateless: bool) -> String {
    let title = if engine.spec.title.is_empty() {
        "API"
    } else {
        engine.spec.title.as_str()
    };
    let mode = if stateless { " (stateless)" } else { "" };
    let ranking = match (engine.index.ranker(), engine.index.model()) {
        (crate::index::Ranker::Hybrid, Some(model)) => format!("ranker: hybrid, model {model}"),
        (_, Some(model)) => {
            format!("ranker: lexical until model {model} has embedded the operations")
        }
        _ => "ranker: lexical".to_string(),
    };
    format!(
        "apigate {command}: {title} ({} operations) at {url}{mode} ({ranking})",
        engine.spec.operations.len()
    )
}

pub async fn run_stdio(args: StdioArgs) -> anyhow::Result<ExitCode> {
    let engine = Arc::new(args.engine.build().await?);
    let id = format!("stdio-{}", uuid::Uuid::new_v4().simple());
    let server = McpServer::new(engine, Some(id), true)
        .serve(rmcp::transport::stdio())
        .await
        .context("starting the MCP session on stdio")?;
    server.waiting().await.context("the stdio session failed")?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcp_json_key_is_used_only_when_its_url_points_here() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".mcp.json");
        std::fs::write(
            &path,
            r#"{"mcpServers": {
                "other": {"type": "http", "url": "http://127.0.0.1:4000/mcp", "headers": {"x-api-key": "k-other"}},
                "apigate": {"type": "http", "url": "http://localhost:3001/mcp", "headers": {"x-api-key": "k-here"}}
            }}"#,
        )
        .unwrap();
        let here: SocketAddr = "127.0.0.1:3001".parse().unwrap();
        let found = McpJsonKeys::read(&path, here);
        assert_eq!(found.matching.as_deref(), Some("k-here"));
        assert_eq!(found.elsewhere, ["http://127.0.0.1:4000/mcp"]);
        let elsewhere: SocketAddr = "127.0.0.1:3999".parse().unwrap();
        let found = McpJsonKeys::read(&path, elsewhere);
        assert_eq!(found.matching, None);
        assert_eq!(found.elsewhere.len(), 2);
        assert!(
            McpJsonKeys::read(&dir.path().join("missing.json"), here)
                .matching
                .is_none()
        );
    }

    /// The binary-out flags: their defaults, and values past their caps refused.
    #[test]
    fn binary_flags_have_defaults_and_caps() {
        use clap::Parser as _;
        let parse = |extra: &[&str]| {
            let mut all = vec!["apigate", "dev", "--spec", "x.json"];
            all.extend_from_slice(extra);
            match crate::cli::Cli::try_parse_from(all).map(|c| c.command) {
                Ok(crate::cli::Command::Dev(d)) => Ok(d),
                Ok(other) => panic!("{other:?}"),
                Err(e) => Err(e),
            }
        };
        let d = parse(&[]).unwrap();
        assert_eq!(d.engine.max_read_bytes, 16 * 1024 * 1024);
        assert_eq!(d.engine.binary.max_image_bytes, 1024 * 1024);
        assert_eq!(d.engine.binary.max_held_bytes, 64 * 1024 * 1024);
        assert_eq!(d.engine.binary.response_ttl, Duration::from_secs(600));
        assert!(d.download_dir.is_none());
        let d = parse(&[
            "--max-read-bytes",
            "1000",
            "--response-ttl",
            "30s",
            "--download-dir",
            "/tmp",
        ])
        .unwrap();
        assert_eq!(d.engine.max_read_bytes, 1000);
        assert_eq!(d.engine.binary.response_ttl, Duration::from_secs(30));
        for bad in [
            ["--max-read-bytes", "0"],
            ["--max-read-bytes", "2000000000"],
            ["--max-read-bytes", "-1"],
            ["--max-image-bytes", "2000000000"],
            ["--max-held-bytes", "0"],
            ["--response-ttl", "soon"],
        ] {
            assert!(parse(&bad).is_err(), "{bad:?}");
        }
    }
}
