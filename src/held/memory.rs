//! Held responses in this process's memory: a moka cache of the bytes (time to live
//! `--response-ttl`, weighted by size, bounded by `--max-held-total-bytes` for all owners, least
//! recently used first), and per owner the ids in the order they were held, to drop an owner's
//! oldest beyond `--max-held-bytes`.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use super::{Held, HeldConfig, HeldMeta};

struct Entry {
    owner: String,
    held: Held,
}

pub(super) struct Memory {
    cache: moka::sync::Cache<String, Arc<Entry>>,
    /// Per owner: (id, size), oldest first.
    order: Mutex<HashMap<String, VecDeque<(String, usize)>>>,
    max_per_owner: usize,
}

impl Memory {
    pub(super) fn new(cfg: HeldConfig) -> Memory {
        let max_total = u64::try_from(cfg.max_total_bytes).unwrap_or(u64::MAX);
        Memory {
            cache: moka::sync::Cache::builder()
                .time_to_live(cfg.ttl)
                .weigher(|_, e: &Arc<Entry>| u32::try_from(e.held.bytes.len()).unwrap_or(u32::MAX))
                .max_capacity(max_total)
                // Plain LRU: TinyLFU could refuse a new entry at once, and its link would lead
                // nowhere.
                .eviction_policy(moka::policy::EvictionPolicy::lru())
                .build(),
            order: Mutex::new(HashMap::new()),
            max_per_owner: cfg.max_bytes_per_owner,
        }
    }

    pub(super) fn hold(&self, owner: &str, meta: HeldMeta, bytes: bytes::Bytes) {
        let (id, size) = (meta.id.clone(), meta.size);
        let Ok(mut order) = self.order.lock() else {
            return;
        };
        let queue = order.entry(owner.to_string()).or_default();
        // Expired or evicted entries no longer count.
        queue.retain(|(id, _)| self.cache.contains_key(id));
        queue.push_back((id.clone(), size));
        let mut total: usize = queue.iter().map(|(_, s)| s).sum();
        while total > self.max_per_owner {
            let Some((old, old_size)) = queue.pop_front() else {
                break;
            };
            self.cache.invalidate(&old);
            total -= old_size;
        }
        order.retain(|_, q| !q.is_empty());
        self.cache.insert(
            id,
            Arc::new(Entry {
                owner: owner.to_string(),
                held: Held { meta, bytes },
            }),
        );
    }

    pub(super) fn read(&self, owner: &str, id: &str) -> Option<Held> {
        let entry = self.cache.get(id)?;
        let now = chrono::Utc::now();
        (entry.owner == owner && entry.held.meta.expires_at > now).then(|| entry.held.clone())
    }

    pub(super) fn list(&self, owner: &str) -> Vec<HeldMeta> {
        let ids: Vec<String> = match self.order.lock() {
            Ok(order) => order
                .get(owner)
                .map(|q| q.iter().map(|(id, _)| id.clone()).collect())
                .unwrap_or_default(),
            Err(_) => Vec::new(),
        };
        ids.iter()
            .filter_map(|id| self.read(owner, id))
            .map(|h| h.meta)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn meta(id: &str, size: usize) -> HeldMeta {
        HeldMeta {
            id: id.into(),
            content_type: "application/zip".into(),
            sha256: String::new(),
            size,
            expires_at: chrono::Utc::now() + chrono::Duration::minutes(5),
        }
    }

    #[test]
    fn the_oldest_go_first_and_owners_are_apart() {
        let m = Memory::new(HeldConfig {
            ttl: Duration::from_secs(60),
            max_bytes_per_owner: 10,
            max_total_bytes: 40,
        });
        m.hold("a", meta("1", 4), bytes::Bytes::from_static(b"1111"));
        m.hold("a", meta("2", 4), bytes::Bytes::from_static(b"2222"));
        m.hold("b", meta("3", 4), bytes::Bytes::from_static(b"3333"));
        assert!(m.read("b", "1").is_none(), "another owner's id");
        m.hold("a", meta("4", 4), bytes::Bytes::from_static(b"4444"));
        assert!(m.read("a", "1").is_none(), "the oldest was dropped");
        assert_eq!(&m.read("a", "2").unwrap().bytes[..], b"2222");
        let ids: Vec<_> = m.list("a").into_iter().map(|h| h.id).collect();
        assert_eq!(ids, ["2", "4"]);
        assert_eq!(m.list("b").len(), 1);
    }
}
