//! In-process token buckets per server key, per session, per signed-in person (exact issuer
//! and `sub`), and per (public id, source address) for argon2 verifications. A call takes from
//! all its buckets at once or from none, so a call its own bucket refuses spends nothing of a
//! bucket it shares with others (a key's, shared by the key's sessions and people). Each instance limits on its own; with N replicas behind a load
//! balancer the effective limit is at most N times the setting.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::Deserialize;

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

#[derive(Debug)]
pub(crate) struct Limiter {
    key: RateLimit,
    session: RateLimit,
    verify: RateLimit,
    buckets: Mutex<HashMap<Subject, Bucket>>,
}

impl Limiter {
    pub(crate) fn new(key: RateLimit, session: RateLimit, verify: RateLimit) -> Limiter {
        Limiter {
            key,
            session,
            verify,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    fn limit_for(&self, s: &Subject) -> RateLimit {
        match s {
            Subject::Key(_) => self.key,
            Subject::Session(_) | Subject::Person(_) => self.session,
            Subject::Verify { .. } => self.verify,
        }
    }

    /// Takes one token from every subject's bucket, or none and the time until all have one.
    pub(crate) fn take(&self, subjects: &[Subject]) -> Result<(), Duration> {
        self.reserve(subjects, true)
    }

    /// Whether every subject's bucket holds a token, taking none.
    pub(crate) fn peek(&self, subjects: &[Subject]) -> Result<(), Duration> {
        self.reserve(subjects, false)
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

    #[test]
    fn burst_then_refusal_then_other_subjects_unaffected() {
        let l = Limiter::new(
            RateLimit {
                per_second: 0.001,
                burst: 2,
            },
            RateLimit::OFF,
            RateLimit::OFF,
        );
        let a = [Subject::Key("a".into())];
        assert!(l.take(&a).is_ok());
        assert!(l.take(&a).is_ok());
        let wait = l.take(&a).unwrap_err();
        assert!(wait > Duration::from_secs(100));
        assert!(l.take(&[Subject::Key("b".into())]).is_ok());
        for _ in 0..100 {
            assert!(l.take(&[Subject::Session("s".into())]).is_ok());
        }
    }

    #[test]
    fn a_subject_refused_by_its_own_bucket_spends_nothing_shared() {
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
        let refused = (0..100).filter(|_| l.take(&mallory).is_err()).count();
        assert_eq!(refused, 95);
        let ivy = [Subject::Person("ivy".into()), key.clone()];
        for _ in 0..5 {
            assert!(l.take(&ivy).is_ok());
        }
        // Peeking takes nothing.
        for _ in 0..50 {
            assert!(l.peek(std::slice::from_ref(&key)).is_ok());
        }
    }

    #[test]
    fn refusal_consumes_nothing() {
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
            assert!(unlimited.take(&verify).is_ok());
        }
        assert!(unlimited.take(&verify).is_err());
        // The same public id from an address has its own budget.
        let elsewhere = [Subject::Verify {
            public_id: "abcdefgh".into(),
            source: Some(Source::of([192, 0, 2, 7].into())),
        }];
        assert!(unlimited.take(&elsewhere).is_ok());

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
        assert!(l.take(&both).is_ok());
        assert!(l.take(&both).is_err());
        assert!(l.take(&both).is_err());
        // The key bucket lost only the one token taken with the successful call.
        for _ in 0..4 {
            assert!(l.take(&[Subject::Key("k".into())]).is_ok());
        }
        assert!(l.take(&[Subject::Key("k".into())]).is_err());
    }
}
