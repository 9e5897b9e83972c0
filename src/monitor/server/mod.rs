//! The reference monitor (`apigate monitor`): the protocol's `POST /agent-monitor` endpoint,
//! decisions by [`RuleSet`], human approvals that hold a `tool.pre_execute` answer open, a
//! bounded in-memory event ring (optionally appended to a JSONL file), a JSON API and a live
//! dashboard page (Server-Sent Events) served by the same process. The page and the API need
//! this run's secret (`access`); the protocol endpoint does not.
//!
//! Here: starting and stopping the server and the JSONL log writer. The state is in `state`,
//! the HTTP surface in `routes`, the secret in `access`. The only axum user in `monitor/`;
//! the client half never imports this module.

mod access;
mod routes;
mod state;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::rules::RuleSet;
use access::{LINK_PARAM, RunSecret};
use state::Shared;

/// Everything the server needs (`apigate monitor` builds it from its flags; tests directly).
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub rules: RuleSet,
    pub log: Option<PathBuf>,
    pub approval_timeout: Duration,
    pub max_events: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            rules: RuleSet::default_rules(),
            log: None,
            approval_timeout: Duration::from_secs(300),
            max_events: 1000,
        }
    }
}

/// A monitor running in the background (see [`spawn`]).
pub struct RunningMonitor {
    addr: SocketAddr,
    access: RunSecret,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
    log_task: Option<tokio::task::JoinHandle<()>>,
}

crate::debug_fields!(RunningMonitor { addr, .. });

impl RunningMonitor {
    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR`; the protocol endpoint is `{url}/agent-monitor`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The page's link with this run's secret, `http://ADDR/?token=SECRET`: opening it gives
    /// the browser the cookie the page and its API need. Show it to the person only.
    pub fn page_link(&self) -> String {
        format!("{}/?{LINK_PARAM}={}", self.url(), self.access.secret())
    }

    /// This run's secret, for scripts: `Authorization: Bearer <secret>` on `/api/*`.
    pub fn secret(&self) -> &str {
        self.access.secret()
    }

    /// Blocks every pending approval ("the monitor is shutting down"), ends the event
    /// streams and waits for the server to stop.
    pub async fn shutdown(self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        let served = self.task.await.context("the monitor task panicked")?;
        if let Some(log) = self.log_task {
            log.await.context("the event log writer panicked")?;
        }
        served.context("the monitor server failed")
    }
}

/// Starts the monitor on an already bound listener (tests bind 127.0.0.1:0), with a fresh
/// secret for its page and API.
pub async fn spawn(listener: TcpListener, config: ServerConfig) -> anyhow::Result<RunningMonitor> {
    let addr = listener.local_addr()?;
    let shutdown = CancellationToken::new();
    let (log_tx, log_task) = match &config.log {
        Some(path) => {
            let (tx, task) = open_log(path.clone(), shutdown.clone()).await?;
            (Some(tx), Some(task))
        }
        None => (None, None),
    };
    let shared = Shared::new(
        config.rules,
        config.approval_timeout,
        config.max_events,
        log_tx,
        shutdown.clone(),
    );
    {
        // On shutdown, pending approvals are answered (block) so the server can drain.
        let shared = shared.clone();
        tokio::spawn(async move {
            shared.shutdown().cancelled().await;
            shared.block_all_pending();
        });
    }
    let access = RunSecret::generate(addr.port());
    let app = routes::router(routes::App {
        shared,
        access: access.clone(),
        loopback_only: addr.ip().is_loopback(),
    });
    let stop = shutdown.clone();
    let task = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { stop.cancelled().await })
            .await
    });
    Ok(RunningMonitor {
        addr,
        access,
        shutdown,
        task,
        log_task,
    })
}

async fn open_log(
    path: PathBuf,
    shutdown: CancellationToken,
) -> anyhow::Result<(mpsc::Sender<String>, tokio::task::JoinHandle<()>)> {
    let mut file = tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .await
        .with_context(|| format!("cannot open the event log {}", path.display()))?;
    let (tx, mut rx) = mpsc::channel::<String>(4096);
    let task = tokio::spawn(async move {
        loop {
            let line = tokio::select! {
                line = rx.recv() => line,
                () = shutdown.cancelled() => None,
            };
            let Some(mut line) = line else { break };
            line.push('\n');
            if let Err(e) = file.write_all(line.as_bytes()).await {
                tracing::warn!(error = %e, path = %path.display(), "cannot write the event log");
            }
        }
        // Write what was queued before the shutdown.
        while let Ok(mut line) = rx.try_recv() {
            line.push('\n');
            let _ = file.write_all(line.as_bytes()).await;
        }
        let _ = file.flush().await;
    });
    Ok((tx, task))
}
