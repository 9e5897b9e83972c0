//! The clap types of the agent monitor: `apigate monitor`'s flags and command (start the
//! reference monitor, print its page link, serve until Ctrl-C / SIGTERM), and the gate's
//! flags that `apigate dev`, `serve` and `stdio` flatten in (`--monitor URL`, …).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use tokio::net::TcpListener;

use crate::monitor::{Monitor, MonitorConfig, MonitorError, RuleSet, ServerConfig};
use crate::types::duration::{human_duration, parse_duration};

/// `apigate monitor` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct MonitorArgs {
    /// Address to listen on (the protocol's port is 37123).
    #[arg(
        long,
        value_name = "ADDR",
        default_value = "127.0.0.1:37123",
        env = "APIGATE_MONITOR_LISTEN"
    )]
    pub listen: SocketAddr,
    /// How long a call waits for a person before it is blocked ("approval timed out").
    /// The agent side must wait at least as long: `apigate … --monitor-timeout`.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub approval_timeout: Duration,
    /// TOML rules file (see examples/monitor-rules.toml). Without it, every mutating
    /// `api_execute` needs approval and everything else is allowed.
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
    /// Append every event and decision to this JSONL file.
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
    /// How many events the in-memory ring keeps.
    #[arg(long, default_value_t = 1000)]
    pub max_events: usize,
}

impl MonitorArgs {
    /// The server's configuration: loads the rules file (or the default rules).
    pub(crate) fn server_config(&self) -> anyhow::Result<ServerConfig> {
        let rules = match &self.rules {
            Some(path) => RuleSet::from_file(path)?,
            None => RuleSet::default_rules(),
        };
        Ok(ServerConfig {
            rules,
            log: self.log.clone(),
            approval_timeout: self.approval_timeout,
            max_events: self.max_events.max(1),
        })
    }
}

/// `apigate monitor`: serves until Ctrl-C or SIGTERM, then shuts down gracefully. The page
/// link, with this run's secret, is printed once on stderr for the person at the terminal.
pub async fn run(args: MonitorArgs) -> anyhow::Result<()> {
    let config = args.server_config()?;
    let listener = TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let rules_source = config.rules.source().to_owned();
    let rule_count = config.rules.specs().len();
    let monitor = crate::monitor::spawn(listener, config).await?;
    eprintln!(
        "apigate monitor listening on {url}\n  dashboard:  {link}\n              (open this link: \
         its secret, new every run, lets the page approve calls; keep it to yourself)\n  \
         endpoint:   {url}/agent-monitor\n  rules:      {rules_source} ({rules})\n  \
         approvals time out after {}",
        human_duration(args.approval_timeout),
        url = monitor.url(),
        link = monitor.page_link(),
        rules = super::help::count(rule_count, "rule", "rules"),
    );
    if !args.listen.ip().is_loopback() {
        eprintln!(
            "warning: {} is not a loopback address: anyone who can reach it can post events, \
             and the page's secret crosses the network in clear text (plain HTTP)",
            args.listen
        );
    }
    shutdown_signal().await;
    eprintln!("apigate monitor: shutting down");
    monitor.shutdown().await
}

async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::warn!(error = %e, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
}

/// The gate's command-line flags, for `apigate dev` and `apigate serve` (`#[command(flatten)]`).
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = super::help::heading::MONITOR)]
pub struct MonitorFlags {
    /// Ask this agent monitor before every tool call (fail-closed), e.g.
    /// http://127.0.0.1:37123 (`apigate monitor` or the VS Code agent-monitor extension).
    #[arg(long = "monitor", value_name = "URL", env = "APIGATE_MONITOR_URL")]
    pub monitor: Option<String>,
    /// How long a tool call waits for the monitor's decision before it is blocked. Raise it
    /// when the monitor asks a person (e.g. 5m).
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "10s",
        value_parser = parse_duration,
        env = "APIGATE_MONITOR_TIMEOUT"
    )]
    pub monitor_timeout: Duration,
    /// `project` in monitor events (default: the spec's title).
    #[arg(long, value_name = "NAME")]
    pub monitor_project: Option<String>,
    /// `worktree` in monitor events (default: the working directory).
    #[arg(long, value_name = "PATH")]
    pub monitor_worktree: Option<String>,
}

impl MonitorFlags {
    /// The gate, or `None` when `--monitor` was not given. `spec_title` becomes the
    /// `project` unless `--monitor-project` says otherwise.
    pub fn build(&self, spec_title: Option<&str>) -> Result<Option<Monitor>, MonitorError> {
        let Some(url) = &self.monitor else {
            return Ok(None);
        };
        let mut cfg = MonitorConfig::new(url.clone());
        cfg.timeout = self.monitor_timeout;
        if let Some(project) = self
            .monitor_project
            .as_deref()
            .or(spec_title)
            .filter(|p| !p.trim().is_empty())
        {
            cfg.project = project.to_owned();
        }
        if let Some(worktree) = &self.monitor_worktree {
            cfg.worktree = worktree.clone();
        }
        Monitor::new(cfg).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_build_the_gate_only_when_asked() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            flags: MonitorFlags,
        }
        let off = Cli::try_parse_from(["x"]).unwrap().flags;
        assert!(off.build(Some("Petstore")).unwrap().is_none());
        let on = Cli::try_parse_from([
            "x",
            "--monitor",
            "http://127.0.0.1:37123",
            "--monitor-timeout",
            "5m",
        ])
        .unwrap()
        .flags;
        let gate = on.build(Some("Petstore")).unwrap().unwrap();
        assert_eq!(gate.endpoint(), "http://127.0.0.1:37123/agent-monitor");
        assert_eq!(gate.config().timeout, Duration::from_secs(300));
        assert_eq!(gate.config().project, "Petstore");
        assert!(Cli::try_parse_from(["x", "--monitor-timeout", "soon"]).is_err());
        let bad = Cli::try_parse_from(["x", "--monitor", "ftp://x"])
            .unwrap()
            .flags;
        assert!(bad.build(None).is_err());
    }

    #[test]
    fn monitor_flags_have_safe_defaults() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            args: MonitorArgs,
        }
        let args = Cli::try_parse_from(["x"]).unwrap().args;
        assert!(args.listen.ip().is_loopback());
        assert_eq!(args.approval_timeout, Duration::from_secs(300));
        let config = args.server_config().unwrap();
        assert_eq!(config.max_events, 1000);
    }
}
