//! Counts that replicas share, as leases in Postgres (`store/shared.rs`): the MCP sessions
//! and `subscriptions/listen` streams each API key holds on every replica, for
//! `--max-sessions-per-key`. A replica renews its own leases every [`RENEW_EVERY`] while they
//! live (recording again those an outage of Postgres let run out, or that it admitted alone
//! meanwhile under `--limits-unavailable open`) and ends them when they end; the leases of a
//! replica that died run out after [`LEASE_TTL`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::rate::{LimitsUnavailable, SHARED_WAIT};
use crate::store::Store;

/// How long a lease lives without renewal: how long a dead replica's sessions still count.
pub(crate) const LEASE_TTL: Duration = Duration::from_secs(60);

/// How often a replica renews its leases.
pub(crate) const RENEW_EVERY: Duration = Duration::from_secs(20);

/// How often it tries again while Postgres fails (a take or a renewal failed).
const RETRY_EVERY: Duration = Duration::from_secs(1);

/// Why no lease was given.
#[derive(Debug)]
pub enum NoLease {
    /// The holder has this many live leases, the most allowed.
    Full(usize),
    /// Postgres did not answer, and `--limits-unavailable closed` refuses.
    Unavailable,
    /// Postgres did not answer, and `--limits-unavailable open` leaves the count to this
    /// replica alone: the lease is kept here and recorded once Postgres answers again.
    Local(Lease),
}

/// One session's or stream's place in its key's count, held until dropped.
pub struct Lease {
    leases: Arc<Leases>,
    id: String,
}

crate::debug_fields!(Lease { .. });

impl Drop for Lease {
    fn drop(&mut self) {
        self.leases.release(std::mem::take(&mut self.id));
    }
}

/// This replica's leases. Cheap to share (`Arc`).
pub struct Leases {
    store: Store,
    unavailable: LimitsUnavailable,
    /// Lease id → its holder: every lease of a session or stream that lives here, renewed
    /// (and recorded again when an outage let it run out) every [`RENEW_EVERY`].
    mine: Mutex<HashMap<String, String>>,
    /// Postgres failed a take or a renewal since the last renewal went through.
    failing: AtomicBool,
}

crate::debug_fields!(Leases { .. });

impl Leases {
    pub(crate) fn new(store: Store, unavailable: LimitsUnavailable) -> Leases {
        Leases {
            store,
            unavailable,
            mine: Mutex::default(),
            failing: AtomicBool::new(false),
        }
    }

    fn mine(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.mine
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A new lease for `holder` unless it holds `max` on all replicas together; it ends when
    /// dropped.
    pub async fn take(self: &Arc<Self>, holder: &str, max: usize) -> Result<Lease, NoLease> {
        let id = Uuid::new_v4().to_string();
        let taken = tokio::time::timeout(
            SHARED_WAIT,
            self.store.lease_take(&id, holder, max, LEASE_TTL),
        )
        .await;
        match taken {
            Ok(Ok(held)) if held < max => Ok(self.keep(id, holder)),
            Ok(Ok(held)) => Err(NoLease::Full(held)),
            Ok(Err(e)) => Err(self.down(id, holder, &e.to_string())),
            Err(_) => Err(self.down(id, holder, "no answer within 1 s")),
        }
    }

    fn keep(self: &Arc<Self>, id: String, holder: &str) -> Lease {
        self.mine().insert(id.clone(), holder.to_string());
        Lease {
            leases: self.clone(),
            id,
        }
    }

    fn down(self: &Arc<Self>, id: String, holder: &str, why: &str) -> NoLease {
        // Once per outage (the renewal clears `failing` when Postgres answers again), not once
        // per refused session.
        if !self.failing.swap(true, Ordering::AcqRel) {
            tracing::warn!(error = %why, mode = ?self.unavailable,
                "the session counts shared in Postgres cannot be checked (--limits-unavailable)");
        }
        match self.unavailable {
            LimitsUnavailable::Closed => NoLease::Unavailable,
            LimitsUnavailable::Open => NoLease::Local(self.keep(id, holder)),
        }
    }

    /// Ends the lease `id` in the background: the caller does not wait for the database, and
    /// a lease that cannot be deleted runs out after [`LEASE_TTL`].
    fn release(self: &Arc<Self>, id: String) {
        if self.mine().remove(&id).is_none() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let leases = self.clone();
        runtime.spawn(async move {
            if let Err(e) = leases.store.lease_release(&[id]).await {
                tracing::debug!(error = %e, "could not end a session lease; it runs out by itself");
            }
        });
    }

    /// Renews this replica's leases every [`RENEW_EVERY`] until `shutdown`, then ends them
    /// all (a replica that stops frees its count at once).
    pub async fn renew(self: Arc<Self>, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(RETRY_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut renewed_at = tokio::time::Instant::now();
        loop {
            tokio::select! {
                () = shutdown.cancelled() => break,
                _ = tick.tick() => {}
            }
            // Every period; and every second while Postgres has been failing (a take or a
            // renewal saw it), so that once it is back the sessions that live here count
            // again within a second.
            let failing = self.failing.load(Ordering::Acquire);
            if !failing && renewed_at.elapsed() < RENEW_EVERY {
                continue;
            }
            let (ids, holders): (Vec<String>, Vec<String>) = self
                .mine()
                .iter()
                .map(|(id, holder)| (id.clone(), holder.clone()))
                .unzip();
            let renewed: Result<(), String> = if ids.is_empty() {
                Ok(())
            } else {
                match tokio::time::timeout(
                    SHARED_WAIT,
                    self.store.lease_renew(&ids, &holders, LEASE_TTL),
                )
                .await
                {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(e)) => Err(e.to_string()),
                    Err(_) => Err("no answer within 1 s".to_string()),
                }
            };
            match renewed {
                Ok(()) => {
                    renewed_at = tokio::time::Instant::now();
                    self.failing.store(false, Ordering::Release);
                }
                Err(e) => {
                    if !failing {
                        tracing::warn!(error = %e, "could not renew this replica's session leases; trying every second");
                    }
                    self.failing.store(true, Ordering::Release);
                }
            }
        }
        let ids: Vec<String> = self.mine().drain().map(|(id, _)| id).collect();
        if !ids.is_empty()
            && let Err(e) = self.store.lease_release(&ids).await
        {
            tracing::debug!(error = %e, "could not end this replica's session leases");
        }
    }
}
