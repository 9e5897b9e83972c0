//! Token buckets per server key, per session, per signed-in person (exact issuer and `sub`),
//! and per (public id, source address) for argon2 verifications. A call takes from all its
//! buckets at once or from none, so a call its own bucket refuses spends nothing of a bucket
//! it shares with others (a key's, shared by the key's sessions and people).
//!
//! With a database ([`Limiter::shared`], production) the buckets that count are in Postgres,
//! shared by every replica (`store/shared.rs`, GCRA): N replicas together admit what one
//! would. The in-process buckets stay in front as a filter that never refuses what the
//! shared ones would admit (they only count calls the shared ones took), so a flood of
//! refused calls costs no query once a replica alone has seen a bucket's worth. When
//! Postgres does not answer within [`SHARED_WAIT`], [`LimitsUnavailable`] decides: refuse
//! (the default) or fall back to the in-process buckets alone.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Deserialize;
use sha2::{Digest, Sha256};

use crate::store::{SharedBucket, Store};

/// A bucket's shape: `burst` calls at once, refilled at `per_second`. `per_second = 0` turns the
/// limit off.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct RateLimit {
    pub per_second: f64,
    pub burst: u32,
}

impl RateLimit {
    pub const OFF: RateLimit = RateLimit {
        per_second: 0.0,
        burst: 0,
    };

    fn is_off(&self) -> bool {
        self.per_second <= 0.0 || self.burst == 0
    }
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn refill(&mut self, limit: RateLimit, now: Instant) {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * limit.per_second).min(f64::from(limit.burst));
        self.at = now;
    }

    fn wait_for_one(&self, limit: RateLimit) -> Duration {
        let missing = (1.0 - self.tokens).max(0.0);
        Duration::from_secs_f64(missing / limit.per_second)
    }
}

/// What the caller is limited as.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Subject {
    Key(String),
    Session(String),
    /// A signed-in person ([`super::Person::key`]), limited as a session is.
    Person(String),
    /// argon2id verifications for one public id from one source (cache misses only): a
    /// legitimate key needs one per cache lifetime, so this only bites someone guessing
    /// secrets for a known id, and only at their own address.
    Verify {
        public_id: String,
        source: Option<Source>,
    },
}

impl Subject {
    /// What names this subject's bucket in the shared table: a SHA-256, so the table holds
    /// no key id, session id or person, and no subject can pose as another.
    fn digest(&self, namespace: &str) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(namespace.as_bytes());
        h.update(b"\0");
        let (kind, value, source) = match self {
            Subject::Key(v) => ("key", v.as_str(), None),
            Subject::Session(v) => ("session", v.as_str(), None),
            Subject::Person(v) => ("person", v.as_str(), None),
            Subject::Verify { public_id, source } => {
                ("verify", public_id.as_str(), source.map(|s| s.to_string()))
            }
        };
        h.update(kind.as_bytes());
        h.update(b"\0");
        // Lengths first: no two (value, source) pairs hash the same bytes.
        h.update((value.len() as u64).to_be_bytes());
        h.update(value.as_bytes());
        if let Some(source) = source {
            h.update(source.as_bytes());
        }
        h.finalize().into()
    }
}

/// Where a request came from, as the throttle of guessed secrets counts it: an IPv4 address,
/// or the /64 network of an IPv6 address (one host usually holds a whole /64, so counting
/// single IPv6 addresses would give it billions of budgets). An IPv4 address mapped into IPv6
/// counts as the IPv4 address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Source(IpAddr);

impl Source {
    pub fn of(ip: IpAddr) -> Source {
        match ip {
            IpAddr::V4(v4) => Source(IpAddr::V4(v4)),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Source(IpAddr::V4(v4)),
                None => {
                    let network = u128::from(v6) & !((1u128 << 64) - 1);
                    Source(IpAddr::V6(Ipv6Addr::from(network)))
                }
            },
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            IpAddr::V4(v4) => write!(f, "{v4}"),
            IpAddr::V6(v6) => write!(f, "{v6}/64"),
        }
    }
}

const PRUNE_ABOVE: usize = 10_000;

/// How long a shared check waits for Postgres before [`LimitsUnavailable`] decides.
pub(crate) const SHARED_WAIT: Duration = Duration::from_secs(1);

/// What a rate check does when the shared buckets cannot be read (`--limits-unavailable`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LimitsUnavailable {
    /// Refuse the call: a limit that cannot be checked does not hold.
    #[default]
    Closed,
    /// Admit what this replica's own buckets admit: each replica limits alone until the
    /// database answers again (N replicas admit up to N times the limit).
    Open,
}

/// Why a check refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// A bucket is empty; it holds a call again after this long.
    Wait(Duration),
    /// The shared buckets did not answer and [`LimitsUnavailable::Closed`] refuses.
    Unavailable,
}

/// The shared side of a [`Limiter`].
#[derive(Debug)]
struct Shared {
    store: Store,
    /// Keeps the subjects of limiters with the same kinds of subject apart in one table.
    namespace: &'static str,
    unavailable: LimitsUnavailable,
    /// Seconds since the epoch of the last warning that the shared buckets did not answer
    /// (at most one a minute).
    warned_at: AtomicU64,
}

impl Shared {
    /// Counts a check the shared buckets could not answer; warns at most once a minute.
    fn warn_unavailable(&self, why: &str) {
        metrics::counter!("apigate_rate_checks_unavailable_total").increment(1);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let last = self.warned_at.load(Ordering::Relaxed);
        if now.saturating_sub(last) >= 60
            && self
                .warned_at
                .compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            tracing::warn!(
                error = %why,
                mode = ?self.unavailable,
                "the rate limits shared in Postgres cannot be checked (--limits-unavailable)"
            );
        }
    }
}

#[derive(Debug)]
pub(crate) struct Limiter {
    key: RateLimit,
    session: RateLimit,
    verify: RateLimit,
    buckets: Mutex<HashMap<Subject, Bucket>>,
    shared: Option<Shared>,
}

impl Limiter {
    /// Buckets of this process alone.
    pub(crate) fn new(key: RateLimit, session: RateLimit, verify: RateLimit) -> Limiter {
        Limiter {
            key,
            session,
            verify,
            buckets: Mutex::new(HashMap::new()),
            shared: None,
        }
    }

    /// The same limits, counted in `store` for every replica that uses it; `namespace`
    /// names this limiter's buckets there.
    pub(crate) fn shared(
        self,
        store: Store,
        namespace: &'static str,
        unavailable: LimitsUnavailable,
    ) -> Limiter {
        Limiter {
            shared: Some(Shared {
                store,
                namespace,
                unavailable,
                warned_at: AtomicU64::new(0),
            }),
            ..self
        }
    }

    fn limit_for(&self, s: &Subject) -> RateLimit {
        match s {
            Subject::Key(_) => self.key,
            Subject::Session(_) | Subject::Person(_) => self.session,
            Subject::Verify { .. } => self.verify,
        }
    }

    /// Takes one call from every subject's bucket, or none and why.
    pub(crate) async fn take(&self, subjects: &[Subject]) -> Result<(), Refused> {
        let Some(shared) = &self.shared else {
            return self.reserve(subjects, true).map_err(Refused::Wait);
        };
        // This process's buckets count only calls the shared ones took: when they refuse,
        // the shared ones would too, and no query is needed.
        self.peek(subjects)?;
        let digests: Vec<(&Subject, [u8; 32])> = subjects
            .iter()
            .filter(|s| !self.limit_for(s).is_off())
            .map(|s| (s, s.digest(shared.namespace)))
            .collect();
        if digests.is_empty() {
            return Ok(());
        }
        let buckets: Vec<SharedBucket> = digests
            .iter()
            .map(|(s, digest)| {
                let limit = self.limit_for(s);
                SharedBucket {
                    subject: *digest,
                    period: 1.0 / limit.per_second,
                    burst: f64::from(limit.burst),
                }
            })
            .collect();
        let why = match tokio::time::timeout(SHARED_WAIT, shared.store.rate_take(&buckets)).await {
            Ok(Ok(None)) => {
                // May find a bucket here empty after a race with this process's other calls:
                // the shared buckets decided.
                let _ = self.reserve(subjects, true);
                return Ok(());
            }
            Ok(Ok(Some(refusal))) => {
                // This process's bucket of each subject the shared ones refused is as empty
                // as theirs: the next look ([`Limiter::peek`]) refuses without a query.
                for (subject, wait) in &refusal.buckets {
                    if let Some((s, _)) = digests.iter().find(|(_, d)| d == subject) {
                        self.empty_until(s, *wait);
                    }
                }
                return Err(Refused::Wait(refusal.wait()));
            }
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("no answer within {} s", SHARED_WAIT.as_secs()),
        };
        shared.warn_unavailable(&why);
        match shared.unavailable {
            LimitsUnavailable::Closed => Err(Refused::Unavailable),
            LimitsUnavailable::Open => self.reserve(subjects, true).map_err(Refused::Wait),
        }
    }

    /// Whether every subject's bucket in this process holds a call, taking none: a cheap
    /// first look (no query), which the [`Limiter::take`] that follows confirms.
    pub(crate) fn peek(&self, subjects: &[Subject]) -> Result<(), Refused> {
        self.reserve(subjects, false).map_err(Refused::Wait)
    }

    /// Empties `subject`'s bucket in this process so that it holds a call again after `wait`.
    fn empty_until(&self, subject: &Subject, wait: Duration) {
        let limit = self.limit_for(subject);
        let now = Instant::now();
        let mut buckets = match self.buckets.lock() {
            Ok(b) => b,
            Err(poisoned) => poisoned.into_inner(),
        };
        let b = buckets.entry(subject.clone()).or_insert(Bucket {
            tokens: f64::from(limit.burst),
            at: now,
        });
        b.refill(limit, now);
        b.tokens = b
            .tokens
            .min(1.0 - wait.as_secs_f64().min(1e9) * limit.per_second);
    }

    fn reserve(&self, subjects: &[Subject], take: bool) -> Result<(), Duration> {
        let now = Instant::now();
        let mut buckets = match self.buckets.lock() {
            Ok(b) => b,
            Err(poisoned) => poisoned.into_inner(),
        };
        if buckets.len() > PRUNE_ABOVE {
            // Full buckets carry no state worth keeping.
            buckets.retain(|s, b| {
                let limit = self.limit_for(s);
                let mut b = *b;
                b.refill(limit, now);
                b.tokens < f64::from(limit.burst)
            });
        }
        let mut wait = Duration::ZERO;
        for s in subjects {
            let limit = self.limit_for(s);
            if limit.is_off() {
                continue;
            }
            let b = buckets.entry(s.clone()).or_insert(Bucket {
                tokens: f64::from(limit.burst),
                at: now,
            });
            b.refill(limit, now);
            if b.tokens < 1.0 {
                wait = wait.max(b.wait_for_one(limit));
            }
        }
        if wait > Duration::ZERO {
            return Err(wait);
        }
        if !take {
            return Ok(());
        }
        for s in subjects {
            if let Some(b) = buckets.get_mut(s) {
                b.tokens -= 1.0;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_group_ipv6_by_network() {
        let v6 = |s: &str| Source::of(s.parse::<IpAddr>().unwrap());
        assert_eq!(v6("2001:db8:1:2:aaaa::1"), v6("2001:db8:1:2:ffff:1:2:3"));
        assert_ne!(v6("2001:db8:1:2::1"), v6("2001:db8:1:3::1"));
        assert_eq!(v6("::ffff:192.0.2.1"), v6("192.0.2.1"));
        assert_ne!(v6("192.0.2.1"), v6("192.0.2.2"));
        assert_eq!(v6("2001:db8:1:2::9").to_string(), "2001:db8:1:2::/64");
        assert_eq!(v6("192.0.2.1").to_string(), "192.0.2.1");
    }

    #[tokio::test]
    async fn burst_then_refusal_then_other_subjects_unaffected() {
        let l = Limiter::new(
            RateLimit {
                per_second: 0.001,
                burst: 2,
            },
            RateLimit::OFF,
            RateLimit::OFF,
        );
        let a = [Subject::Key("a".into())];
        assert!(l.take(&a).await.is_ok());
        assert!(l.take(&a).await.is_ok());
        let Err(Refused::Wait(wait)) = l.take(&a).await else {
            panic!("refused")
        };
        assert!(wait > Duration::from_secs(100));
        assert!(l.take(&[Subject::Key("b".into())]).await.is_ok());
        for _ in 0..100 {
            assert!(l.take(&[Subject::Session("s".into())]).await.is_ok());
        }
    }

    #[tokio::test]
    async fn a_subject_refused_by_its_own_bucket_spends_nothing_shared() {
        // Everyone's calls take from the key's bucket too, at once with their own.
        let l = Limiter::new(
            RateLimit {
                per_second: 0.001,
                burst: 20,
            },
            RateLimit {
                per_second: 0.001,
                burst: 5,
            },
            RateLimit::OFF,
        );
        let key = Subject::Key("k".into());
        let mallory = [Subject::Person("mallory".into()), key.clone()];
        let mut refused = 0;
        for _ in 0..100 {
            refused += usize::from(l.take(&mallory).await.is_err());
        }
        assert_eq!(refused, 95);
        let ivy = [Subject::Person("ivy".into()), key.clone()];
        for _ in 0..5 {
            assert!(l.take(&ivy).await.is_ok());
        }
        // Peeking takes nothing.
        for _ in 0..50 {
            assert!(l.peek(std::slice::from_ref(&key)).is_ok());
        }
    }

    #[tokio::test]
    async fn refusal_consumes_nothing() {
        let verify = [Subject::Verify {
            public_id: "abcdefgh".into(),
            source: None,
        }];
        let unlimited = Limiter::new(
            RateLimit::OFF,
            RateLimit::OFF,
            RateLimit {
                per_second: 0.001,
                burst: 10,
            },
        );
        for _ in 0..10 {
            assert!(unlimited.take(&verify).await.is_ok());
        }
        assert!(unlimited.take(&verify).await.is_err());
        // The same public id from an address has its own budget.
        let elsewhere = [Subject::Verify {
            public_id: "abcdefgh".into(),
            source: Some(Source::of([192, 0, 2, 7].into())),
        }];
        assert!(unlimited.take(&elsewhere).await.is_ok());

        let l = Limiter::new(
            RateLimit {
                per_second: 0.001,
                burst: 5,
            },
            RateLimit {
                per_second: 0.001,
                burst: 1,
            },
            RateLimit::OFF,
        );
        let both = [Subject::Key("k".into()), Subject::Session("s".into())];
        assert!(l.take(&both).await.is_ok());
        assert!(l.take(&both).await.is_err());
        assert!(l.take(&both).await.is_err());
        // The key bucket lost only the one token taken with the successful call.
        for _ in 0..4 {
            assert!(l.take(&[Subject::Key("k".into())]).await.is_ok());
        }
        assert!(l.take(&[Subject::Key("k".into())]).await.is_err());
    }
}
