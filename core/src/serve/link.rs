//! Approval links: the capability a person's phone carries to resolve one request.
//!
//! A token is `EXPIRY.HMAC` where `EXPIRY` is Unix seconds and `HMAC` is the lowercase hex
//! HMAC-SHA256, under the server's key, of a domain tag, the request id, its `scope_hash`, the
//! expiry and the link's decision (`approve` or `deny`). So a token for request A does not open
//! B, a token whose request's scope changed does not verify, a deny link cannot approve, and a
//! changed expiry breaks the MAC. The compare is constant-time (`Mac::verify_slice`). Single
//! use is the request's: once it is resolved, every link for it is refused.

use std::io::Write;
use std::path::Path;

use hmac::{Hmac, Mac};
use sha2::Sha256;

const DOMAIN: &[u8] = b"turngate-approval-link-v1\0";
const KEY_LEN: usize = 32;

/// What a link does when its page's button is pressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkDecision {
    /// Resolve the request `allow_once`.
    Approve,
    /// Resolve the request `deny`.
    Deny,
}

impl LinkDecision {
    /// The wire name (`approve`, `deny`).
    pub const fn as_str(self) -> &'static str {
        match self {
            LinkDecision::Approve => "approve",
            LinkDecision::Deny => "deny",
        }
    }

    /// Parse the wire name; anything else is `None`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "approve" => Some(LinkDecision::Approve),
            "deny" => Some(LinkDecision::Deny),
            _ => None,
        }
    }
}

/// Why a link token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    /// Malformed, forged, for another request or scope, or for the other decision.
    #[error("the approval link is not valid")]
    Invalid,
    /// A genuine token past its expiry.
    #[error("the approval link has expired")]
    Expired,
}

/// Signs and verifies approval-link tokens with the server's key.
pub struct LinkSigner {
    key: [u8; KEY_LEN],
}

impl std::fmt::Debug for LinkSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LinkSigner(..)")
    }
}

/// `n` random bytes from the OS, as lowercase hex.
pub fn random_hex(n: usize) -> std::io::Result<String> {
    let mut bytes = vec![0u8; n];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(e.to_string()))?;
    Ok(crate::approval::scope::to_hex(&bytes))
}

/// Read a secret kept 0600 at `path`, or create one (`n` random bytes, hex) when there is
/// none. A secret file readable by group or others is refused: it may have leaked.
pub fn load_or_create_secret(path: &Path, n: usize) -> std::io::Result<String> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
    match std::fs::symlink_metadata(path) {
        Ok(meta) => {
            // SAFETY: geteuid cannot fail.
            let me = unsafe { libc::geteuid() };
            if !meta.is_file() || meta.uid() != me {
                return Err(std::io::Error::other(format!(
                    "{} is not a regular file owned by this user (uid {me}); refusing to use \
                     it as a secret",
                    path.display()
                )));
            }
            if meta.permissions().mode() & 0o077 != 0 {
                return Err(std::io::Error::other(format!(
                    "{} is readable by others (mode {:o}); refusing to use it (chmod 600 it or \
                     delete it to make a new one)",
                    path.display(),
                    meta.permissions().mode() & 0o777
                )));
            }
            let text = std::fs::read_to_string(path)?;
            let text = text.trim().to_owned();
            if text.len() < 32 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(std::io::Error::other(format!(
                    "{} does not hold a hex secret",
                    path.display()
                )));
            }
            Ok(text)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let secret = random_hex(n)?;
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(path)?;
            file.write_all(secret.as_bytes())?;
            file.sync_all()?;
            Ok(secret)
        }
        Err(e) => Err(e),
    }
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()))
        .collect()
}

impl LinkSigner {
    /// The signer whose key is kept (0600) at `path`, created at first use.
    pub fn load_or_create(path: &Path) -> std::io::Result<Self> {
        let hex = load_or_create_secret(path, KEY_LEN)?;
        let bytes = unhex(&hex).ok_or_else(|| std::io::Error::other("bad link key"))?;
        let key: [u8; KEY_LEN] = bytes
            .get(..KEY_LEN)
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| std::io::Error::other("the link key is too short"))?;
        Ok(LinkSigner { key })
    }

    /// A signer with `key` (tests).
    pub fn with_key(key: [u8; KEY_LEN]) -> Self {
        LinkSigner { key }
    }

    fn mac(
        &self,
        request_id: &str,
        scope_hash: &str,
        expiry: u64,
        decision: LinkDecision,
    ) -> Hmac<Sha256> {
        // HMAC pads a key shorter than the hash's block (64 bytes) with zeros, so the key in a
        // zeroed block is the same key, through the infallible fixed-size constructor.
        let mut block = [0u8; 64];
        block[..KEY_LEN].copy_from_slice(&self.key);
        let mut mac = <Hmac<Sha256> as hmac::digest::KeyInit>::new(&block.into());
        for part in [
            DOMAIN,
            request_id.as_bytes(),
            b"\0",
            scope_hash.as_bytes(),
            b"\0",
            expiry.to_string().as_bytes(),
            b"\0",
            decision.as_str().as_bytes(),
        ] {
            mac.update(part);
        }
        mac
    }

    /// The token for `decision` on `request_id` with `scope_hash`, valid until `expiry`.
    pub fn sign(
        &self,
        request_id: &str,
        scope_hash: &str,
        expiry: u64,
        decision: LinkDecision,
    ) -> String {
        let tag = self
            .mac(request_id, scope_hash, expiry, decision)
            .finalize()
            .into_bytes();
        format!("{expiry}.{}", crate::approval::scope::to_hex(&tag))
    }

    /// Check `token` for `decision` on `request_id` with the request's current
    /// `scope_hash`, at `now` (Unix seconds). Returns the token's expiry.
    pub fn verify(
        &self,
        token: &str,
        request_id: &str,
        scope_hash: &str,
        decision: LinkDecision,
        now: u64,
    ) -> Result<u64, LinkError> {
        let (expiry, tag) = token.split_once('.').ok_or(LinkError::Invalid)?;
        if expiry.is_empty() || !expiry.bytes().all(|b| b.is_ascii_digit()) || expiry.len() > 20 {
            return Err(LinkError::Invalid);
        }
        let expiry: u64 = expiry.parse().map_err(|_| LinkError::Invalid)?;
        let tag = unhex(tag).ok_or(LinkError::Invalid)?;
        self.mac(request_id, scope_hash, expiry, decision)
            .verify_slice(&tag)
            .map_err(|_| LinkError::Invalid)?;
        if now >= expiry {
            return Err(LinkError::Expired);
        }
        Ok(expiry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn signer() -> LinkSigner {
        LinkSigner::with_key([7; 32])
    }

    #[test]
    fn the_mac_is_rfc_hmac_sha256_of_the_key() {
        // The zero-padded block constructor is HMAC with the 32-byte key itself.
        let key = [7u8; 32];
        let mut a = <Hmac<Sha256> as Mac>::new_from_slice(&key).unwrap_or_else(|e| panic!("{e}"));
        for part in [
            DOMAIN, b"apr_a", b"\0", b"s", b"\0", b"100", b"\0", b"approve",
        ] {
            a.update(part);
        }
        let tag = crate::approval::scope::to_hex(&a.finalize().into_bytes());
        assert_eq!(
            signer().sign("apr_a", "s", 100, LinkDecision::Approve),
            format!("100.{tag}")
        );
    }

    #[test]
    fn a_token_opens_only_its_request_scope_and_decision() {
        let s = signer();
        let t = s.sign("apr_a", "scope1", 100, LinkDecision::Approve);
        assert_eq!(
            s.verify(&t, "apr_a", "scope1", LinkDecision::Approve, 50),
            Ok(100)
        );
        assert_eq!(
            s.verify(&t, "apr_b", "scope1", LinkDecision::Approve, 50),
            Err(LinkError::Invalid)
        );
        assert_eq!(
            s.verify(&t, "apr_a", "scope2", LinkDecision::Approve, 50),
            Err(LinkError::Invalid)
        );
        assert_eq!(
            s.verify(&t, "apr_a", "scope1", LinkDecision::Deny, 50),
            Err(LinkError::Invalid)
        );
        assert_eq!(
            s.verify(&t, "apr_a", "scope1", LinkDecision::Approve, 100),
            Err(LinkError::Expired)
        );
    }

    #[test]
    fn forged_and_modified_tokens_are_refused() {
        let s = signer();
        let t = s.sign("apr_a", "scope1", 100, LinkDecision::Approve);
        let (_, tag) = t.split_once('.').unwrap_or_default();
        // A later expiry with the same tag.
        let stretched = format!("999999.{tag}");
        assert_eq!(
            s.verify(&stretched, "apr_a", "scope1", LinkDecision::Approve, 50),
            Err(LinkError::Invalid)
        );
        // One flipped hex digit.
        let mut flipped = t.clone().into_bytes();
        let last = flipped.len() - 1;
        flipped[last] = if flipped[last] == b'0' { b'1' } else { b'0' };
        let flipped = String::from_utf8(flipped).unwrap_or_default();
        assert_eq!(
            s.verify(&flipped, "apr_a", "scope1", LinkDecision::Approve, 50),
            Err(LinkError::Invalid)
        );
        // Another key's token.
        let other =
            LinkSigner::with_key([8; 32]).sign("apr_a", "scope1", 100, LinkDecision::Approve);
        assert_eq!(
            s.verify(&other, "apr_a", "scope1", LinkDecision::Approve, 50),
            Err(LinkError::Invalid)
        );
        for garbage in [
            "", ".", "100.", ".abcd", "100.zz", "-1.00", "100.abc", "1e3.00",
        ] {
            assert_eq!(
                s.verify(garbage, "apr_a", "scope1", LinkDecision::Approve, 50),
                Err(LinkError::Invalid),
                "{garbage}"
            );
        }
    }

    #[test]
    fn the_key_file_is_created_0600_and_a_readable_one_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("link.key");
        let a = load_or_create_secret(&path, 32).unwrap_or_else(|e| panic!("{e}"));
        let mode = std::fs::metadata(&path)
            .map(|m| m.permissions().mode() & 0o777)
            .unwrap_or(0);
        assert_eq!(mode, 0o600);
        assert_eq!(load_or_create_secret(&path, 32).ok(), Some(a));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(load_or_create_secret(&path, 32).is_err());
    }
}
