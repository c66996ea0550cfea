//! Redaction of secret-looking substrings in the targets audit events record.
//!
//! An audit row says what was decided (`curl -H 'Authorization: Bearer …' …`), and the store is
//! a plain file: the target is recorded with anything that looks like a credential replaced by
//! `[REDACTED]`. [`Redactor::default`] knows the common shapes; a host with its own token
//! formats passes a function with [`Redactor::new`].

use std::fmt;
use std::sync::{Arc, LazyLock};

use regex::{Regex, RegexSet};

/// What replaces a redacted substring.
pub const REDACTED: &str = "[REDACTED]";

/// The default patterns: each match's last capture group (or the whole match when there is
/// none) is replaced.
static DEFAULT_PATTERNS: LazyLock<(RegexSet, Vec<Option<Regex>>)> = LazyLock::new(|| {
    let patterns = [
        // URL user info: scheme://user:password@host
        r"://[^/@\s:]+:([^/@\s]+)@",
        // Authorization headers and bearer/basic credentials.
        r"(?i)\b(?:bearer|basic|token)\s+([A-Za-z0-9._~+/=-]{8,})",
        // key=value and key: value where the key names a secret.
        r#"(?i)(?:pass(?:word|wd)?|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|auth|credentials?|session)[A-Za-z0-9_-]*\s*[=:]\s*['"]?([^\s'"&]+)"#,
        // --password VALUE, --token VALUE, -p VALUE is too ambiguous to guess.
        r"(?i)--(?:pass(?:word)?|token|secret|api-?key|auth)[A-Za-z0-9-]*[ =]([^\s]+)",
        // Well-known token formats.
        r"\b((?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})",
        r"\b(sk-[A-Za-z0-9_-]{16,})",
        r"\b(xox[abprs]-[A-Za-z0-9-]{10,})",
        r"\b((?:AKIA|ASIA)[0-9A-Z]{16})\b",
        r"\b(eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})",
    ];
    // One scan finds which patterns occur at all; a target without secrets (the common case)
    // costs that scan only.
    let set = RegexSet::new(patterns).unwrap_or_else(|_| RegexSet::empty());
    // Indexed like the set, so a set match names its pattern.
    let each = patterns.iter().map(|p| Regex::new(p).ok()).collect();
    (set, each)
});

type RedactFn = dyn Fn(&str) -> String + Send + Sync;

/// Replaces secret-looking substrings of an audited target. Cheap to clone.
#[derive(Clone)]
pub struct Redactor(Arc<RedactFn>);

impl Redactor {
    /// A redactor that applies `f` to every target before it is recorded.
    pub fn new(f: impl Fn(&str) -> String + Send + Sync + 'static) -> Self {
        Redactor(Arc::new(f))
    }

    /// A redactor that records targets as they are (for tests, or a store that is itself
    /// secret).
    pub fn none() -> Self {
        Redactor::new(str::to_owned)
    }

    /// `text` with its secret-looking substrings replaced.
    pub fn redact(&self, text: &str) -> String {
        (self.0)(text)
    }
}

impl Default for Redactor {
    /// The built-in patterns: URL passwords, bearer tokens, `password=`/`token:`-style
    /// assignments, `--password VALUE`, and GitHub, OpenAI-style, Slack, AWS and JWT tokens.
    fn default() -> Self {
        Redactor::new(redact_default)
    }
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Redactor(..)")
    }
}

/// [`Redactor::default`]'s function.
pub fn redact_default(text: &str) -> String {
    let (set, each) = &*DEFAULT_PATTERNS;
    let mut out = text.to_owned();
    for i in set.matches(text).iter() {
        let Some(re) = each.get(i).and_then(Option::as_ref) else {
            continue;
        };
        let mut next = String::with_capacity(out.len());
        let mut last = 0;
        for caps in re.captures_iter(&out) {
            let Some(m) = caps.iter().skip(1).flatten().last().or_else(|| caps.get(0)) else {
                continue;
            };
            next.push_str(&out[last..m.start()]);
            next.push_str(REDACTED);
            last = m.end();
        }
        next.push_str(&out[last..]);
        out = next;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_replaced_and_the_rest_is_kept() {
        let cases = [
            (
                "curl https://bob:hunter2@example.com/x",
                "curl https://bob:[REDACTED]@example.com/x",
            ),
            (
                "curl -H 'Authorization: Bearer abcdefgh12345678' api",
                "curl -H 'Authorization: [REDACTED] [REDACTED]' api",
            ),
            (
                "mysql --password=s3cretpw db",
                "mysql --password=[REDACTED] db",
            ),
            ("login --token abc123xyz", "login --token [REDACTED]"),
            ("API_KEY=abc123 ./deploy", "API_KEY=[REDACTED] ./deploy"),
            (
                "git push https://ghp_abcdefghijklmnopqrstuvwxyz0123@github.com",
                "git push https://[REDACTED]@github.com",
            ),
            ("echo sk-abcdefghijklmnop1234", "echo [REDACTED]"),
            ("aws AKIAABCDEFGHIJKLMNOP", "aws [REDACTED]"),
        ];
        for (input, want) in cases {
            assert_eq!(redact_default(input), want, "{input}");
        }
        for plain in [
            "ls -la src",
            "/w/src/lib.rs",
            "example.com:443",
            "git status",
        ] {
            assert_eq!(redact_default(plain), plain);
        }
    }

    #[test]
    fn every_default_pattern_compiles() {
        let (set, each) = &*DEFAULT_PATTERNS;
        assert_eq!(set.len(), each.len());
        assert!(each.iter().all(Option::is_some));
    }

    #[test]
    fn a_custom_redactor_replaces_the_default() {
        let r = Redactor::new(|t| t.replace("acme-", "acme-[REDACTED]"));
        assert_eq!(r.redact("use acme-1234"), "use acme-[REDACTED]1234");
        assert_eq!(Redactor::none().redact("API_KEY=x"), "API_KEY=x");
    }
}
