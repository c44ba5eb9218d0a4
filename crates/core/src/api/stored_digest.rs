//! A value the engine's store keeps as its digest instead of itself: a VCAP Secret's
//! `VCAP_SERVICES` (kilobytes of credentials at each of thousands of Secrets), of which the planner
//! only asks whether it is the payload it would write (`vcap::VcapPayload::matches_stored`).
//!
//! The digest is keyed with a key this process draws at random and never shows: a value someone
//! wrote into a Secret (or a file for `capdeck plan -f`) to look like the digest of a payload
//! cannot match it, since nobody outside the process can compute one.

use std::hash::{BuildHasher as _, RandomState};
use std::sync::OnceLock;

use sha2::{Digest, Sha256};

/// What starts a [`stored_digest`]: a NUL, which no JSON (so no `VCAP_SERVICES`) begins with.
pub const STORED_DIGEST_PREFIX: &[u8] = b"\0capdeck-sha256:";

/// This process's key: 128 bits from the standard library's per-process random hasher keys.
fn key() -> &'static [u8; 16] {
    static KEY: OnceLock<[u8; 16]> = OnceLock::new();
    KEY.get_or_init(|| {
        let mut key = [0u8; 16];
        key[..8].copy_from_slice(&RandomState::new().hash_one(0x5eed_u64).to_le_bytes());
        key[8..].copy_from_slice(&RandomState::new().hash_one(0xca7_u64).to_le_bytes());
        key
    })
}

fn keyed(bytes: &[u8]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(key());
    hasher.update(bytes);
    hasher.finalize().into()
}

/// A VCAP Secret's `VCAP_SERVICES` as the engine's store keeps it: the prefix and the keyed
/// SHA-256 of `bytes` (49 bytes), not the payload. Whatever the live value is, even one shaped
/// like a digest, is hashed again.
pub fn stored_digest(bytes: &[u8]) -> Vec<u8> {
    let mut stored = STORED_DIGEST_PREFIX.to_vec();
    stored.extend_from_slice(&keyed(bytes));
    stored
}

/// True when `stored` is this process's [`stored_digest`] of `bytes`.
pub fn is_digest_of(stored: &[u8], bytes: &[u8]) -> bool {
    stored.strip_prefix(STORED_DIGEST_PREFIX).is_some_and(|digest| digest == keyed(bytes))
}

/// True when `bytes` has the shape of a [`stored_digest`] (it holds no credential).
pub fn is_stored_digest(bytes: &[u8]) -> bool {
    bytes.starts_with(STORED_DIGEST_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A digest made without this process's key (as anyone outside it would make one, from the
    /// payload's plain SHA-256 that plans and batch statuses show) matches nothing.
    #[test]
    fn a_digest_made_elsewhere_matches_nothing() {
        let payload = br#"{"xsuaa":[]}"#;
        assert!(is_digest_of(&stored_digest(payload), payload));
        let mut forged = STORED_DIGEST_PREFIX.to_vec();
        forged.extend_from_slice(&Sha256::digest(payload));
        assert!(is_stored_digest(&forged) && !is_digest_of(&forged, payload));
        assert!(!is_digest_of(payload, payload), "a value is not its own digest");
    }
}
