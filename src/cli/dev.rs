//! `apigate dev` (HTTP, one API key, no database) and `apigate stdio`, and the engine
//! options they share with `serve`.

use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use rmcp::ServiceExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::args::{AccessArgs, EngineArgs, HttpArgs, banner};
use crate::apis::reload::Reloader;
use crate::http::KeyCheck;
use crate::mcp::McpServer;

#[derive(Debug, clap::Args)]
// The flags' order is the help's: the essentials, then the groups of `args::heading`.
pub struct DevArgs {
    #[command(flatten)]
    pub engine: EngineArgs,
    #[command(flatten)]
    pub http: HttpArgs,
    /// The API key clients must send in `x-api-key` (else APIGATE_API_KEY,
    /// MCP_SERVER_API_KEY, .mcp.json, or a generated one).
    #[arg(long, help_heading = super::help::heading::ESSENTIALS)]
    pub api_key: Option<String>,
    /// Optional: check the dev key against this database once at start-up and apply its
    /// permissions (and write the audit log).
    #[arg(long, env = "DATABASE_URL", hide_env_values = true, value_name = "URL",
          help_heading = super::help::heading::KEYS)]
    pub database_url: Option<String>,
    #[command(flatten)]
    pub access: AccessArgs,
    #[command(flatten)]
    pub identity: super::identity::IdentityArgs,
    /// Lets `api_execute` upload files from this folder by name (`{"file": "NAME"}` as the
    /// body or a multipart file field), so large files need not pass through the model. Only
    /// names inside it are read (no absolute path, `..` or symbolic link out), each within
    /// --max-request-bytes. Development only: `serve` has no such flag.
    #[arg(long, value_name = "DIR", help_heading = super::help::heading::ESSENTIALS)]
    pub upload_dir: Option<std::path::PathBuf>,
    /// Also write every binary response to a new file in this folder (a generated name,
    /// mode 0600, never overwriting) and return its path. Each file is removed after
    /// --response-ttl; see --max-download-bytes.
    #[arg(long, value_name = "DIR", help_heading = super::help::heading::ESSENTIALS)]
    pub download_dir: Option<std::path::PathBuf>,
    /// The most bytes apigate's files in --download-dir hold together: the oldest are removed
    /// to make room, and a larger answer is not written there (it still comes back as a
    /// resource link).
    #[arg(long, default_value_t = crate::tools::binary_out::DEFAULT_MAX_DOWNLOAD_BYTES,
          value_parser = clap::value_parser!(u64).range(1..),
          help_heading = super::help::heading::LIMITS)]
    pub max_download_bytes: u64,
}

#[derive(Debug, clap::Args)]
pub struct StdioArgs {
    #[command(flatten)]
    pub engine: EngineArgs,
}

/// Where the dev key came from.
#[derive(Debug, PartialEq, Eq)]
pub enum DevKeySource {
    Flag,
    Env(&'static str),
    McpJson,
    Generated,
}

/// Resolves the dev key: flag, APIGATE_API_KEY, MCP_SERVER_API_KEY, `.mcp.json` (an entry
/// whose url points at `listen`), else a new random key.
pub(crate) fn resolve_key(
    flag: Option<&str>,
    listen: SocketAddr,
    mcp_json: &Path,
) -> (String, DevKeySource) {
    if let Some(k) = flag.map(str::trim).filter(|k| !k.is_empty()) {
        return (k.to_string(), DevKeySource::Flag);
    }
    for var in ["APIGATE_API_KEY", "MCP_SERVER_API_KEY"] {
        if let Ok(k) = std::env::var(var)
            && !k.trim().is_empty()
        {
            return (k.trim().to_string(), DevKeySource::Env(var));
        }
    }
    let found = McpJsonKeys::read(mcp_json, listen);
    if let Some(k) = found.matching {
        return (k, DevKeySource::McpJson);
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
        DevKeySource::Generated,
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

pub(crate) async fn run_dev(args: DevArgs) -> anyhow::Result<ExitCode> {
    let super::load::Started {
        mut engine, loader, ..
    } = args.engine.start(args.access.rules()?).await?;
    if let Some(dir) = &args.download_dir {
        use crate::tools::binary_out::{DownloadDir, download_dir};
        let path = download_dir(dir)?;
        tracing::info!(dir = %path.display(), max_bytes = args.max_download_bytes, "binary responses are also written to --download-dir");
        let dir = std::sync::Arc::new(DownloadDir::new(
            path,
            args.max_download_bytes,
            args.engine.binary.response_ttl,
        ));
        dir.sweep_in_background();
        engine.binary.download_dir = Some(dir);
    }
    let (listener, addr) = args.http.bind().await?;
    let (key, source) = resolve_key(args.api_key.as_deref(), addr, Path::new(".mcp.json"));
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
        DevKeySource::Generated => {
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
                DevKeySource::Flag => "--api-key".to_string(),
                DevKeySource::Env(v) => v.to_string(),
                DevKeySource::McpJson => ".mcp.json".to_string(),
                DevKeySource::Generated => unreachable!(),
            }
        ),
    }
    if !addr.ip().is_loopback() {
        tracing::warn!(%addr, "listening beyond loopback; add the public host name with --allowed-host");
    }
    let options = args.http.options(KeyCheck::Single(key), "development");
    args.http.run(engine, loader, listener, options).await?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) async fn run_stdio(args: StdioArgs) -> anyhow::Result<ExitCode> {
    let super::load::Started { engine, loader, .. } = args.engine.start(Default::default()).await?;
    let engine = Arc::new(engine);
    // A reload on SIGHUP or a changed file; stdio has no admin route.
    let stop = CancellationToken::new();
    let _stop_watching = stop.clone().drop_guard();
    Reloader::new(engine.served(), loader, None).watch(stop);
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
    use std::time::Duration;

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
        assert_eq!(d.max_download_bytes, 1 << 30);
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
