//! The audit writer: one `audit_log` row per tool call, and no row lost to a database outage.
//!
//! A row is written at once when the database answers. When it does not (connection refused,
//! reset or broken off, pool timeout: anything but the server refusing the statement), the
//! row is kept in memory, in order, and a background task writes the
//! held rows once the database is back, retrying with a capped backoff. The row carries the
//! time of the call (`at`), so a late write does not change when the call happened, and the
//! call's id (`call_id`, unique), so a write retried after one whose answer was lost (the
//! connection broke after the insert committed) does not leave the row twice. At most
//! [`MAX_HELD_ROWS`] rows are held; beyond that new rows are dropped and counted
//! (`apigate_audit_rows_dropped_total`). Rows still held when the process exits are lost and
//! logged ([`AuditWriter::drain`] waits for them at shutdown).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::store::{AuditEntry, Store, StoreError};

/// How many rows may wait in memory for the database.
pub(crate) const MAX_HELD_ROWS: usize = 100_000;
const RETRY_FIRST: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(2);

/// Writes audit rows, holding them while the database is unreachable.
pub(crate) struct AuditWriter {
    store: Store,
    held: Arc<Held>,
    task: JoinHandle<()>,
}

/// The rows waiting for the database, oldest first. Only the background task removes rows.
struct Held {
    rows: Mutex<VecDeque<AuditEntry>>,
    wake: Notify,
}

impl Held {
    fn lock(&self) -> MutexGuard<'_, VecDeque<AuditEntry>> {
        // The queue holds plain rows: a panic elsewhere leaves it usable.
        self.rows.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn len(&self) -> usize {
        self.lock().len()
    }

    fn push(&self, entry: AuditEntry) {
        let held = {
            let mut rows = self.lock();
            if rows.len() >= MAX_HELD_ROWS {
                drop(rows);
                metrics::counter!("apigate_audit_rows_dropped_total").increment(1);
                tracing::error!(
                    tool = %entry.tool,
                    "audit row dropped: {MAX_HELD_ROWS} rows already wait for the database"
                );
                return;
            }
            rows.push_back(entry);
            rows.len()
        };
        metrics::gauge!("apigate_audit_rows_held").set(held as f64);
        self.wake.notify_one();
    }
}

impl AuditWriter {
    /// Starts the background task that writes held rows.
    pub(crate) fn start(store: Store) -> AuditWriter {
        let held = Arc::new(Held {
            rows: Mutex::new(VecDeque::new()),
            wake: Notify::new(),
        });
        let task = tokio::spawn(write_held_rows(store.clone(), held.clone()));
        AuditWriter { store, held, task }
    }

    /// Writes the row now, or holds it when the database cannot be reached (or other rows
    /// already wait, so that rows keep their order). Never fails the call.
    pub(crate) async fn record(&self, entry: AuditEntry) {
        if self.held.len() == 0 {
            match self.store.insert_audit(&entry).await {
                Ok(()) => return,
                Err(e) if e.is_pool_closed() || e.is_refused_statement() => {
                    tracing::warn!(error = %e, tool = %entry.tool, "could not write the audit row");
                    return;
                }
                Err(e) => {
                    tracing::warn!(error = %e, tool = %entry.tool,
                        "the database is unreachable; the audit row is held until it is back");
                }
            }
        }
        self.held.push(entry);
    }

    /// Holds the row for the background writer, without waiting (from a `Drop`): the
    /// shutdown's [`AuditWriter::drain`] waits for it like any held row.
    pub(crate) fn record_later(&self, entry: AuditEntry) {
        self.held.push(entry);
    }

    /// Waits until every held row is written, at most `limit`; returns how many are left.
    pub(crate) async fn drain(&self, limit: Duration) -> usize {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let left = self.held.len();
            if left == 0 || tokio::time::Instant::now() >= deadline {
                return left;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for AuditWriter {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Writes held rows oldest first; while the database is away, retries the oldest with a
/// backoff doubling from [`RETRY_FIRST`] to [`RETRY_MAX`].
async fn write_held_rows(store: Store, held: Arc<Held>) {
    let mut wait = RETRY_FIRST;
    loop {
        let Some(entry) = held.lock().front().cloned() else {
            held.wake.notified().await;
            continue;
        };
        match store.insert_audit(&entry).await {
            Ok(()) => {
                wait = RETRY_FIRST;
                let left = {
                    let mut rows = held.lock();
                    rows.pop_front();
                    rows.len()
                };
                metrics::gauge!("apigate_audit_rows_held").set(left as f64);
                if left == 0 {
                    tracing::info!("the database is back; every held audit row is written");
                }
            }
            Err(e) if e.is_pool_closed() => {
                tracing::error!(
                    rows = held.len(),
                    "the database pool closed with audit rows still held; they are lost"
                );
                return;
            }
            Err(e) if !e.is_refused_statement() => {
                tracing::debug!(error = %e, rows = held.len(), retry_in = ?wait,
                    "held audit rows wait for the database");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(RETRY_MAX);
            }
            Err(e) => {
                log_dropped(&e, &entry);
                held.lock().pop_front();
            }
        }
    }
}

fn log_dropped(e: &StoreError, entry: &AuditEntry) {
    metrics::counter!("apigate_audit_rows_dropped_total").increment(1);
    tracing::error!(error = %e, tool = %entry.tool, "a held audit row was refused by the database; dropped");
}
