//! How many refusals one caller can write to the audit log: a token bucket of refused-call
//! rows per key ([`PER_KEY`]) and one shared by every caller without a verified key
//! ([`UNAUTHENTICATED`]: no key, an unknown key, a wrong secret). Rows of calls that ran are
//! not budgeted here: the key's rate limit, taken before anything else, bounds them.
//!
//! A refusal beyond the budget is not written on its own: it is counted
//! (`apigate_audit_rows_suppressed_total`), the first of a run is logged, and the next refusal
//! the budget admits for the same caller is preceded by one summarising row (error code
//! `AUDIT_SUPPRESSED`, operation `N refused calls not recorded one by one since …`). A flood
//! therefore leaves at most burst + rate × seconds rows per caller, and the operator still
//! sees that it happened and how big it was. With a database the budgets are shared by every
//! replica ([`AuditBudget::shared`]); while it does not answer, each replica keeps its own
//! (the rows wait in memory anyway, `auth/audit.rs`).

use std::collections::HashMap;
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::rate::{Limiter, LimitsUnavailable, RateLimit, Subject};
use crate::store::{AuditEntry, Decision, Store};
use crate::types::Code;

/// Refused-call rows one key may write: 20 at once, then 5 a second.
pub(crate) const PER_KEY: RateLimit = RateLimit {
    per_second: 5.0,
    burst: 20,
};

/// Refused-call rows all callers without a verified key may write together.
pub(crate) const UNAUTHENTICATED: RateLimit = RateLimit {
    per_second: 5.0,
    burst: 20,
};

/// The budget's subject for callers without a verified key.
const ANONYMOUS: &str = "anonymous";

struct Suppressed {
    count: u64,
    since: DateTime<Utc>,
}

pub(crate) struct AuditBudget {
    keys: Limiter,
    anonymous: Limiter,
    /// Per subject: refusals not written since its last written one. Holds at most one
    /// entry per verified key, plus one for every unauthenticated caller together.
    suppressed: Mutex<HashMap<String, Suppressed>>,
}

impl AuditBudget {
    pub(crate) fn new() -> AuditBudget {
        AuditBudget {
            keys: Limiter::new(PER_KEY, RateLimit::OFF, RateLimit::OFF),
            anonymous: Limiter::new(UNAUTHENTICATED, RateLimit::OFF, RateLimit::OFF),
            suppressed: Mutex::new(HashMap::new()),
        }
    }

    /// The same budgets, counted for every replica on `store`.
    pub(crate) fn shared(store: Store) -> AuditBudget {
        let budget = AuditBudget::new();
        let open = LimitsUnavailable::Open;
        AuditBudget {
            keys: budget.keys.shared(store.clone(), "audit", open),
            anonymous: budget.anonymous.shared(store, "audit-anonymous", open),
            ..budget
        }
    }

    /// The rows to write for `entry`: none (suppressed), the entry, or a summary of the
    /// suppressed refusals before it.
    pub(crate) async fn admit(&self, entry: AuditEntry) -> Vec<AuditEntry> {
        if entry.decision != Decision::Denied {
            return vec![entry];
        }
        let (limiter, subject) = match (entry.key_id, &entry.actor) {
            (Some(id), _) => (&self.keys, id.to_string()),
            // A signed-in person: their own budget, not their client's (shared by everyone
            // who signs in through it).
            (None, Some(label)) if label.starts_with("oauth:") && entry.user_id.is_some() => (
                &self.keys,
                format!("{label}\0{}", entry.user_id.as_deref().unwrap_or_default()),
            ),
            // The bootstrap key and the dev key: verified, but no id.
            (None, Some(label)) if !label.starts_with("key:") => (&self.keys, label.clone()),
            _ => (&self.anonymous, ANONYMOUS.to_string()),
        };
        let admitted = limiter.take(&[Subject::Key(subject.clone())]).await.is_ok();
        let mut suppressed = self.suppressed.lock().unwrap_or_else(|p| p.into_inner());
        if !admitted {
            let s = suppressed.entry(subject).or_insert_with(|| Suppressed {
                count: 0,
                since: entry.at,
            });
            s.count += 1;
            metrics::counter!("apigate_audit_rows_suppressed_total").increment(1);
            if s.count == 1 {
                tracing::warn!(
                    caller = %crate::printable::escape(entry.actor.as_deref().unwrap_or(ANONYMOUS)),
                    "too many refused calls to audit one by one; further ones are counted and \
                     summarised in the audit log"
                );
            }
            return Vec::new();
        }
        match suppressed.remove(&subject) {
            None => vec![entry],
            Some(s) => {
                let summary = AuditEntry {
                    operation: Some(format!(
                        "{} refused calls not recorded one by one since {}",
                        s.count,
                        s.since.format("%Y-%m-%d %H:%M:%S UTC")
                    )),
                    method: None,
                    path: None,
                    target: None,
                    error_code: Some(Code::AuditSuppressed),
                    call_id: Uuid::new_v4(),
                    at: Utc::now(),
                    ..entry.clone()
                };
                vec![summary, entry]
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(key_id: Option<Uuid>) -> AuditEntry {
        AuditEntry {
            key_id,
            session_id: None,
            user_id: None,
            tenant_id: None,
            tool: "api_execute".into(),
            operation: None,
            method: None,
            path: None,
            decision: Decision::Denied,
            upstream_status: None,
            duration_ms: 0,
            error_code: Some(Code::Unauthorized),
            at: Utc::now(),
            call_id: Uuid::new_v4(),
            actor: key_id.map(|_| "key:abcdefgh".into()),
            target: None,
            organization_id: None,
            credential_sources: Vec::new(),
        }
    }

    async fn written(budget: &AuditBudget, key: Option<Uuid>, n: usize) -> usize {
        let mut written = 0;
        for _ in 0..n {
            written += budget.admit(refusal(key)).await.len();
        }
        written
    }

    #[tokio::test]
    async fn refusals_beyond_the_burst_are_counted_not_written() {
        let budget = AuditBudget::new();
        let key = Some(Uuid::new_v4());
        let written_by_key = written(&budget, key, 500).await;
        // The burst, plus what the bucket refilled while the loop ran (well under a second).
        assert!((20..40).contains(&written_by_key), "{written_by_key}");
        // Another key has its own budget; unauthenticated callers share one.
        assert_eq!(written(&budget, Some(Uuid::new_v4()), 1).await, 1);
        let anonymous = written(&budget, None, 500).await;
        assert!((20..40).contains(&anonymous), "{anonymous}");
        // Rows of calls that ran are never held back.
        let mut ok = refusal(key);
        ok.decision = Decision::Allowed;
        assert_eq!(budget.admit(ok).await.len(), 1);
    }
}
