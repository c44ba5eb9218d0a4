//! A value the engine's store keeps as its digest instead of itself: a VCAP Secret's
//! `VCAP_SERVICES` (kilobytes of credentials at each of thousands of Secrets), of which the planner
//! only asks whether it is the payload it would write (`vcap::VcapPayload::matches_stored`).

use sha2::{Digest, Sha256};

/// What starts a [`stored_digest`]: a NUL, which no JSON (so no `VCAP_SERVICES`) begins with.
pub const STORED_DIGEST_PREFIX: &[u8] = b"\0capdeck-sha256:";

/// A VCAP Secret's `VCAP_SERVICES` as the engine's store keeps it: the prefix and the SHA-256 of
/// `bytes` (49 bytes), not the payload (kilobytes of credentials at each of thousands of Secrets).
/// Whatever the live value is, even one shaped like a digest, is hashed again: only a value equal
/// to a payload ever matches that payload.
pub fn stored_digest(bytes: &[u8]) -> Vec<u8> {
    let mut stored = STORED_DIGEST_PREFIX.to_vec();
    stored.extend_from_slice(&Sha256::digest(bytes));
    stored
}

/// True when `bytes` is a [`stored_digest`] rather than a value (it holds no credential).
pub fn is_stored_digest(bytes: &[u8]) -> bool {
    bytes.starts_with(STORED_DIGEST_PREFIX)
}
