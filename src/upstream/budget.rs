//! The bytes one `api_execute` call may hold, and the bytes all calls together may hold: a
//! [`CallBudget`] is made per call (every page of it, decoded bytes and the parsed body's
//! memory included) and takes its bytes from the server's [`InFlight`] as it goes, so that
//! many calls at once cannot add up past it either. Over a budget, reading stops early and the
//! budget remembers why ([`CallBudget::over`]): the call says where and why, the process goes
//! on. Released when the call ends (the budget is dropped). Pure bookkeeping: no I/O.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Default `--max-call-bytes`: 256 MiB.
pub const DEFAULT_MAX_CALL_BYTES: usize = 256 * 1024 * 1024;

/// Default `--max-bytes-in-flight`: 1 GiB.
pub const DEFAULT_MAX_BYTES_IN_FLIGHT: usize = 1024 * 1024 * 1024;

/// The server's bytes in flight, shared by every call (`--max-bytes-in-flight`), counted in
/// KiB.
#[derive(Debug, Clone)]
pub struct InFlight {
    kib: Arc<Semaphore>,
    limit: usize,
}

impl InFlight {
    pub fn new(limit: usize) -> InFlight {
        let kib = (limit / 1024).clamp(1, Semaphore::MAX_PERMITS);
        InFlight {
            kib: Arc::new(Semaphore::new(kib)),
            limit,
        }
    }

    /// The bytes all calls may hold at once.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes free now.
    pub fn available(&self) -> usize {
        self.kib.available_permits().saturating_mul(1024)
    }

    /// Holds `bytes` of the server's bytes in flight until the permit is dropped, waiting at
    /// most `wait` for them (first come, first served): `None` when they did not come free in
    /// time, or are more than the whole bound.
    pub async fn hold(
        &self,
        bytes: usize,
        wait: std::time::Duration,
    ) -> Option<OwnedSemaphorePermit> {
        if bytes > self.limit {
            return None;
        }
        let kib = u32::try_from(bytes.div_ceil(1024)).ok()?;
        tokio::time::timeout(wait, self.kib.clone().acquire_many_owned(kib))
            .await
            .ok()?
            .ok()
    }
}

impl Default for InFlight {
    fn default() -> InFlight {
        InFlight::new(DEFAULT_MAX_BYTES_IN_FLIGHT)
    }
}

/// Why a call stopped taking bytes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Over {
    #[error(
        "this call's budget of {0} bytes (--max-call-bytes, every page read, decoded and \
         parsed) is spent: ask for fewer pages or a smaller page size"
    )]
    Call(usize),
    #[error(
        "the server holds its most bytes in flight for all calls ({0} bytes, \
         --max-bytes-in-flight): try again when other calls have finished"
    )]
    InFlight(usize),
}

/// The bytes one call may still take: what is left of `--max-call-bytes`, each taken from
/// the server's [`InFlight`] too and held until the budget is dropped.
#[derive(Debug)]
pub struct CallBudget {
    limit: usize,
    taken: usize,
    in_flight: Option<InFlight>,
    /// The KiB taken from `in_flight`.
    held: Option<OwnedSemaphorePermit>,
    /// The first bound passed.
    over: Option<Over>,
}

impl CallBudget {
    /// A budget of `limit` bytes, taken from `in_flight` when there is one.
    pub fn new(limit: usize, in_flight: Option<InFlight>) -> CallBudget {
        CallBudget {
            limit,
            taken: 0,
            in_flight,
            held: None,
            over: None,
        }
    }

    /// No bound (a single request outside `api_execute`: `Upstream::send`, tests).
    pub fn unbounded() -> CallBudget {
        CallBudget::new(usize::MAX, None)
    }

    /// Takes `bytes`, or says which budget it would pass (and remembers it).
    pub fn take(&mut self, bytes: usize) -> Result<(), Over> {
        if let Some(over) = &self.over {
            return Err(over.clone());
        }
        let total = self.taken.saturating_add(bytes);
        if total > self.limit {
            return Err(self.stop(Over::Call(self.limit)));
        }
        if let Some(shared) = &self.in_flight {
            let held = self.held.as_ref().map_or(0, |p| p.num_permits());
            let want = total.div_ceil(1024).saturating_sub(held);
            if want > 0 {
                let Ok(n) = u32::try_from(want) else {
                    return Err(self.stop(Over::InFlight(shared.limit)));
                };
                match shared.kib.clone().try_acquire_many_owned(n) {
                    Ok(p) => match &mut self.held {
                        Some(h) => h.merge(p),
                        None => self.held = Some(p),
                    },
                    Err(_) => return Err(self.stop(Over::InFlight(shared.limit))),
                }
            }
        }
        self.taken = total;
        Ok(())
    }

    /// Takes all that is [`CallBudget::left`] (for work that is counted as it goes, such as a
    /// parse, so that calls at once cannot each count on the same free bytes); what it did
    /// not use goes back with [`CallBudget::give_back`]. Returns the bytes taken.
    pub fn reserve_left(&mut self) -> usize {
        let n = self.left();
        match self.take(n) {
            Ok(()) => n,
            Err(_) => 0,
        }
    }

    /// Gives back `bytes` taken and not used (at most what was taken), and the server's KiB
    /// they held.
    pub fn give_back(&mut self, bytes: usize) {
        self.taken -= bytes.min(self.taken);
        if let Some(held) = &mut self.held {
            let keep = self.taken.div_ceil(1024);
            let extra = held.num_permits().saturating_sub(keep);
            if extra > 0 {
                drop(held.split(extra));
            }
        }
    }

    /// Marks the budget spent (a body was cut because it would have taken more than is
    /// left): by the server's bytes in flight when they were the tighter bound, else by the
    /// call's own. Nothing changes on an unbounded budget.
    pub fn exhaust(&mut self) {
        if self.over.is_some() || self.limit == usize::MAX && self.in_flight.is_none() {
            return;
        }
        let own = self.limit - self.taken;
        let over = match &self.in_flight {
            Some(shared) if shared.available() + self.slack() < own => Over::InFlight(shared.limit),
            _ => Over::Call(self.limit),
        };
        self.over = Some(over);
    }

    fn stop(&mut self, over: Over) -> Over {
        self.over = Some(over.clone());
        over
    }

    /// Bytes that may still be taken (`take` may still refuse them when other calls take
    /// the server's first).
    pub fn left(&self) -> usize {
        if self.over.is_some() {
            return 0;
        }
        let own = self.limit - self.taken;
        match &self.in_flight {
            Some(shared) => own.min(shared.available() + self.slack()),
            None => own,
        }
    }

    /// Bytes of the KiB already held that are not taken yet.
    fn slack(&self) -> usize {
        let held = self.held.as_ref().map_or(0, |p| p.num_permits() * 1024);
        held.saturating_sub(self.taken)
    }

    /// Bytes taken so far.
    pub fn taken(&self) -> usize {
        self.taken
    }

    /// The bound this call passed, if it did.
    pub fn over(&self) -> Option<&Over> {
        self.over.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_takes_from_its_own_budget_and_the_servers() {
        let shared = InFlight::new(10 * 1024);
        let mut a = CallBudget::new(8 * 1024, Some(shared.clone()));
        let mut b = CallBudget::new(8 * 1024, Some(shared.clone()));
        a.take(6000).unwrap();
        assert_eq!(a.taken(), 6000);
        assert_eq!(a.take(4000), Err(Over::Call(8192)));
        // Once over, always over.
        assert_eq!(a.take(1), Err(Over::Call(8192)));
        assert_eq!(a.left(), 0);
        // `a` holds 6 KiB of the server's 10: `b` gets 4.
        b.take(4096).unwrap();
        assert_eq!(b.take(1), Err(Over::InFlight(10 * 1024)));
        drop(a);
        drop(b);
        assert_eq!(shared.available(), 10 * 1024);
        let mut c = CallBudget::new(8 * 1024, Some(shared.clone()));
        c.take(1).unwrap();
        assert_eq!(c.left(), 8 * 1024 - 1);
        assert!(CallBudget::unbounded().take(usize::MAX).is_ok());
        // A reservation holds the server's bytes until what was not used goes back.
        let reserved = c.reserve_left();
        assert_eq!(reserved, 8 * 1024 - 1);
        assert_eq!(shared.available(), 2 * 1024);
        c.give_back(reserved - 1000);
        assert_eq!(c.taken(), 1001);
        assert_eq!(shared.available(), 9 * 1024);
    }
}
