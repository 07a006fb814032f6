//! API tokens: random secrets shown once and stored only as a SHA-256 hash. Tokens carry 256 bits
//! of entropy, so a fast unsalted hash is enough: nothing can be guessed or looked up from it.

use sha2::{Digest, Sha256};

/// Every token starts with this, so leaked tokens are easy to spot in logs and by scanners.
pub const TOKEN_PREFIX: &str = "tnt_";

/// How long a token works when its creator does not say.
pub const DEFAULT_VALID_DAYS: u32 = 90;

/// The longest a token may be valid: a year, so every token is renewed at least yearly.
pub const MAX_VALID_DAYS: u32 = 365;

/// A new random token, e.g. `tnt_3f9c…` (64 hex digits after the prefix).
pub fn generate() -> String {
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes).expect("the operating system's random source is available");
    format!("{TOKEN_PREFIX}{}", hex::encode(bytes))
}

/// The stored form of a token.
pub fn hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_unique_prefixed_and_hash_stably() {
        let a = generate();
        let b = generate();
        assert_ne!(a, b);
        assert!(a.starts_with(TOKEN_PREFIX) && a.len() == TOKEN_PREFIX.len() + 64);
        assert_eq!(hash(&a), hash(&a));
        assert_ne!(hash(&a), hash(&b));
        assert_eq!(hash("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    }
}
