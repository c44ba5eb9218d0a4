//! Per-key retry backoff: one failing batch (or application) waits, the others go on.

use std::collections::{BTreeSet, HashMap};
use std::hash::Hash;
use std::time::Duration;

use tokio::time::Instant;

/// The first retry after a failed write; it doubles while failures go on, up to `RETRY_MAX`.
pub const RETRY_FIRST: Duration = Duration::from_secs(1);
pub const RETRY_MAX: Duration = Duration::from_secs(30);

#[derive(Debug)]
pub struct Backoff<K> {
    /// Per key: when it may run again, and the delay that was used.
    entries: HashMap<K, (Instant, Duration)>,
}

impl<K> Default for Backoff<K> {
    fn default() -> Self {
        Self { entries: HashMap::new() }
    }
}

impl<K: Eq + Hash + Clone + Ord> Backoff<K> {
    /// Whether `key` must still wait at `now`.
    pub fn waiting(&self, key: &K, now: Instant) -> bool {
        self.entries.get(key).is_some_and(|(at, _)| *at > now)
    }

    /// Record the result of a run of `key` at `now`: a failure doubles its delay, a success
    /// clears it.
    pub fn record(&mut self, key: &K, failed: bool, now: Instant) {
        if !failed {
            self.entries.remove(key);
            return;
        }
        let delay = self.entries.get(key).map_or(RETRY_FIRST, |(_, previous)| (*previous * 2).min(RETRY_MAX));
        self.entries.insert(key.clone(), (now + delay, delay));
    }

    /// How long until the first waiting key may run again. Keys whose time has come are not
    /// counted: the pass that just ended ran them (or they are gone), and a zero here would
    /// spin the engine.
    pub fn next(&self, now: Instant) -> Option<Duration> {
        self.entries.values().filter(|(at, _)| *at > now).map(|(at, _)| *at - now).min()
    }

    /// Drop keys that no longer exist (a batch that ended).
    pub fn forget_except(&mut self, keys: &BTreeSet<K>) {
        self.entries.retain(|key, _| keys.contains(key));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn one_failing_key_waits_doubling_while_others_run() {
        let mut backoff = Backoff::default();
        let start = Instant::now();
        backoff.record(&"a", true, start);
        assert!(backoff.waiting(&"a", start));
        assert!(!backoff.waiting(&"b", start), "another key is not held back");
        assert_eq!(backoff.next(start), Some(RETRY_FIRST));
        assert!(!backoff.waiting(&"a", start + RETRY_FIRST));
        backoff.record(&"a", true, start + RETRY_FIRST);
        assert_eq!(backoff.next(start + RETRY_FIRST), Some(RETRY_FIRST * 2));
        for _ in 0..10 {
            backoff.record(&"a", true, start);
        }
        assert_eq!(backoff.next(start), Some(RETRY_MAX), "capped");
        backoff.record(&"a", false, start);
        assert_eq!(backoff.next(start), None, "a success clears the key");
        backoff.record(&"b", true, start);
        assert_eq!(backoff.next(start + RETRY_FIRST * 2), None, "a key whose time has come is no reason to wake");
    }

    #[tokio::test(start_paused = true)]
    async fn ended_keys_are_forgotten() {
        let mut backoff = Backoff::default();
        let now = Instant::now();
        backoff.record(&"gone", true, now);
        backoff.record(&"open", true, now);
        backoff.forget_except(&BTreeSet::from(["open"]));
        assert!(!backoff.waiting(&"gone", now));
        assert!(backoff.waiting(&"open", now));
    }
}
