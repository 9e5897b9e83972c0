//! The accept loop: HTTP/1.1 connections with a header-read timeout (slowloris), a cap on open
//! connections, `TCP_NODELAY`, the peer address for handlers (`ConnectInfo`), and a graceful
//! shutdown that gives up after a deadline.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// How connections are accepted and how long they may take.
#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    /// A connection must deliver a request's complete header within this time, or it is closed
    /// (also ends idle keep-alive connections).
    pub header_read_timeout: Duration,
    /// Connections open at once; beyond it new connections are closed at once.
    pub max_connections: usize,
    /// On shutdown, how long open requests and streams may take to finish.
    pub shutdown_grace: Duration,
}

impl Default for ConnLimits {
    fn default() -> Self {
        ConnLimits {
            header_read_timeout: Duration::from_secs(10),
            max_connections: 1024,
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

/// Serves `router` on `listener` until `shutdown` is cancelled, then drains for at most
/// `limits.shutdown_grace`.
///
/// Accepted sockets get `TCP_NODELAY`: SSE responses (stateful `/mcp`, `/sse`) go out as
/// several small writes, and with Nagle's algorithm against the client's delayed ACK each
/// response waited ~40 ms for nothing. Only HTTP/1.1 is spoken: every MCP client uses it, and
/// HTTP/2 without TLS would need its own slow-client defences.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    shutdown: CancellationToken,
    limits: ConnLimits,
) -> std::io::Result<()> {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            () = shutdown.cancelled() => break,
        };
        let (tcp, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of file descriptors and the like: wait instead of spinning.
                tracing::warn!(error = %e, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            metrics::counter!("apigate_connections_refused_total").increment(1);
            tracing::warn!(
                max = limits.max_connections,
                "refused a connection: --max-connections are open"
            );
            drop(tcp);
            continue;
        };
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY on a connection");
        }
        let service = router
            .clone()
            .map_request(move |mut request: axum::extract::Request<_>| {
                request.extensions_mut().insert(ConnectInfo(peer));
                request
            });
        // No upgrades: apigate serves no WebSocket or other upgraded protocol.
        let connection = graceful
            .watch(http.serve_connection(TokioIo::new(tcp), TowerToHyperService::new(service)));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, %peer, "connection ended with an error");
            }
            drop(slot);
        });
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(limits.shutdown_grace) => {
            tracing::warn!(
                grace = ?limits.shutdown_grace,
                "connections still open after the shutdown grace period; closing them"
            );
        }
    }
    Ok(())
}

/// The peer of a request served by [`serve`].
pub fn peer(extensions: &axum::http::Extensions) -> Option<SocketAddr> {
    extensions.get::<ConnectInfo<SocketAddr>>().map(|c| c.0)
}
