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

use crate::http::{self, Allowed, HttpOptions, KeyCheck};
use crate::index::Index;
use crate::mcp::McpServer;
use crate::monitor::MonitorFlags;
use crate::spec::Spec;
use crate::tools::Engine;
use crate::upstream::{Upstream, UpstreamConfig};

/// Options of every command that runs the tools.
#[derive(Debug, clap::Args)]
pub struct EngineArgs {
    /// The OpenAPI document: a file path or an http(s) URL.
    #[arg(long)]
    pub spec: String,
    /// Send API calls here instead of the spec's server URL.
    #[arg(long)]
    pub upstream: Option<String>,
    /// A header added to every upstream request, e.g. "Authorization: Bearer …" (repeatable).
    /// Never shown to the agent, in dry runs or in logs.
    #[arg(long = "upstream-header", value_name = "NAME: VALUE")]
    pub upstream_headers: Vec<String>,
    /// Total time allowed for one upstream request, in seconds.
    #[arg(long, default_value_t = 30)]
    pub upstream_timeout: u64,
    /// Time allowed to connect to the upstream, in seconds.
    #[arg(long, default_value_t = 10)]
    pub connect_timeout: u64,
    /// Response bodies beyond this many bytes are cut (valid JSON, marked `truncated`).
    #[arg(long, default_value_t = 64 * 1024)]
    pub max_response_bytes: usize,
    #[command(flatten)]
    pub monitor: MonitorFlags,
    #[command(flatten)]
    pub ranking: super::index::RankingArgs,
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
            Some(u) => Some(
                UpstreamConfig::parse_base_url(u).with_context(|| format!("--upstream {u:?}"))?,
            ),
            None => None,
        };
        let upstream = Upstream::new(UpstreamConfig {
            base_url,
            headers,
            connect_timeout: Duration::from_secs(self.connect_timeout),
            timeout: Duration::from_secs(self.upstream_timeout),
            max_body_bytes: self.max_response_bytes,
            ..UpstreamConfig::default()
        })?;
        let title = (!spec.title.is_empty()).then_some(spec.title.as_str());
        let monitor = self.monitor.build(title)?;
        if let Some(m) = &monitor {
            tracing::info!(url = %m.endpoint(), "agent-monitor gate on: every tool call needs its approval");
        }
        Ok(Engine::new(Arc::new(spec), index, upstream, monitor))
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
}

impl HttpArgs {
    pub fn allowed(&self) -> Allowed {
        let mut allowed = Allowed::default();
        allowed.hosts.extend(self.allowed_hosts.iter().cloned());
        allowed.origins = self.allowed_origins.clone();
        allowed
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
    if let Some(k) = key_from_mcp_json(mcp_json, listen) {
        return (k, KeySource::McpJson);
    }
    let bytes: [u8; 24] = rand::random();
    (
        format!("agk_dev_{}", hex::encode(bytes)),
        KeySource::Generated,
    )
}

fn key_from_mcp_json(path: &Path, listen: SocketAddr) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    let doc: Value = serde_json::from_str(&text).ok()?;
    for server in doc.get("mcpServers")?.as_object()?.values() {
        let Some(url) = server
            .get("url")
            .and_then(Value::as_str)
            .and_then(|u| url::Url::parse(u).ok())
        else {
            continue;
        };
        let host_ok = match url.host_str() {
            Some("localhost") | Some("127.0.0.1") | Some("[::1]") => true,
            Some(h) => h == listen.ip().to_string(),
            None => false,
        };
        if !host_ok || url.port_or_known_default() != Some(listen.port()) {
            continue;
        }
        let key = server.get("headers")?.get("x-api-key")?.as_str()?.trim();
        // `${VAR}` placeholders are Claude Code's env expansion: read the variable.
        let key = match key.strip_prefix("${").and_then(|k| k.strip_suffix('}')) {
            Some(var) => std::env::var(var).ok()?,
            None => key.to_string(),
        };
        if !key.is_empty() {
            return Some(key);
        }
    }
    None
}

pub async fn run_dev(args: DevArgs) -> anyhow::Result<ExitCode> {
    let mut engine = args.engine.build().await?;
    engine.rules = args.access.rules()?;
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
    let engine = Arc::new(engine);
    let url = format!("http://{addr}/mcp");
    eprintln!("{}", banner("dev", &engine, &url, args.http.stateless));
    match source {
        KeySource::Generated => {
            eprintln!(
                "No API key given (--api-key, APIGATE_API_KEY, MCP_SERVER_API_KEY or .mcp.json); generated one for this run."
            );
            eprintln!(
                "\nClaude Code, .mcp.json:\n{}",
                serde_json::to_string_pretty(&super::config::claude("apigate", &url, Some(&key)))?
            );
            eprintln!(
                "\nOpenCode, opencode.json:\n{}\n",
                serde_json::to_string_pretty(&super::config::opencode(
                    "apigate",
                    &url,
                    Some(&key)
                ))?
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
            keys: KeyCheck::Single(key),
            stateless: args.http.stateless,
            allowed: args.http.allowed(),
            max_body_bytes: args.http.max_body_bytes,
            mode: "development",
            admin: None,
            store,
        },
        shutdown.clone(),
    );
    http::serve(listener, router, shutdown).await?;
    Ok(ExitCode::SUCCESS)
}

/// The first line a server prints: what it serves, where, and how.
pub fn banner(command: &str, engine: &crate::tools::Engine, url: &str, stateless: bool) -> String {
    let title = if engine.spec.title.is_empty() {
        "API"
    } else {
        engine.spec.title.as_str()
    };
    let mode = if stateless { " (stateless)" } else { "" };
    format!(
        "apigate {command}: {title} ({} operations) at {url}{mode}",
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
