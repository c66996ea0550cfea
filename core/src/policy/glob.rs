//! Globs as Unicode regexes.
//!
//! globset parses the glob (its syntax is the contract: `*`, `?`, `[...]`, `{a,b}`, `**`,
//! escapes) and translates it into a regex for its own byte-oriented matcher: `(?-u)` mode,
//! where `?` is any one *byte* and a non-ASCII literal or class member is a run of `\xNN`
//! byte escapes. Our targets are always UTF-8 text, and a `?` that cannot match `ä` (two
//! bytes) would let a deny rule miss. So the translation is taken over in Unicode mode: the
//! byte escapes are turned back into the characters they encode and `(?-u)` is dropped, so
//! `?` is one character and `[äö]` is a class of two characters.

use std::fmt::Write as _;

use globset::GlobBuilder;

/// The Unicode-mode regex of `glob` (`*` and `?` cross `/`), anchored at both ends.
pub(crate) fn glob_regex(glob: &str) -> Result<String, globset::Error> {
    let built = GlobBuilder::new(glob)
        .literal_separator(false)
        .backslash_escape(!cfg!(windows))
        .build()?;
    Ok(to_unicode(built.regex()))
}

/// Rewrite one of globset's `(?-u)` regexes for Unicode mode.
fn to_unicode(re: &str) -> String {
    let re = re.strip_prefix("(?-u)").unwrap_or(re);
    let mut out = String::with_capacity(re.len());
    let mut pending: Vec<u8> = Vec::new();
    let mut chars = re.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            flush(&mut pending, &mut out);
            out.push(c);
            continue;
        }
        match chars.next() {
            // globset writes every byte >= 0x80 as `\xNN`, and nothing else as `\x`.
            Some('x') => {
                let hi = chars.next().and_then(|h| h.to_digit(16));
                let lo = chars.next().and_then(|l| l.to_digit(16));
                match (hi, lo) {
                    (Some(hi), Some(lo)) => pending.push((hi * 16 + lo) as u8),
                    // Not globset's form: keep it verbatim (the regex compiler judges it).
                    _ => {
                        flush(&mut pending, &mut out);
                        out.push_str("\\x");
                    }
                }
            }
            Some(next) => {
                flush(&mut pending, &mut out);
                out.push('\\');
                out.push(next);
            }
            None => {
                flush(&mut pending, &mut out);
                out.push('\\');
            }
        }
    }
    flush(&mut pending, &mut out);
    out
}

/// Emit the characters a run of byte escapes encodes (a char's bytes are always contiguous in
/// globset's output). Bytes that are not valid UTF-8 (which a glob given as `&str` cannot
/// produce) stay raw bytes, `(?-u:\xNN)`, as globset meant them.
fn flush(pending: &mut Vec<u8>, out: &mut String) {
    if pending.is_empty() {
        return;
    }
    match std::str::from_utf8(pending) {
        Ok(s) => out.push_str(&regex::escape(s)),
        Err(_) => {
            for b in pending.iter() {
                let _ = write!(out, "(?-u:\\x{b:02x})");
            }
        }
    }
    pending.clear();
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex::Regex;

    fn matches(glob: &str, target: &str) -> bool {
        let re = glob_regex(glob).unwrap();
        Regex::new(&re).unwrap().is_match(target)
    }

    #[test]
    fn question_mark_is_one_character_not_one_byte() {
        assert!(matches("secret?.txt", "secretä.txt"));
        assert!(matches("secret?.txt", "secret😀.txt"));
        assert!(!matches("secret?.txt", "secretää.txt"));
        assert!(matches("a?b", "a/b"), "? crosses / as * does");
    }

    #[test]
    fn classes_and_literals_hold_characters() {
        assert!(matches("[äö].env", "ö.env"));
        assert!(!matches("[äö].env", "a.env"));
        assert!(matches("[!ä]x", "bx"));
        assert!(!matches("[!ä]x", "äx"));
        assert!(matches("dö*", "dösen/x"));
        assert!(!matches("dö", "do"));
        assert!(matches("{ä,b}c", "äc"));
    }

    #[test]
    fn escapes_and_metacharacters_stay_literal() {
        assert!(matches("a.b", "a.b"));
        assert!(!matches("a.b", "axb"));
        assert!(matches(r"\*x", "*x"));
        assert!(!matches(r"\*x", "yx"));
        assert!(
            matches(r"a\\xb", r"a\xb"),
            "a literal backslash before x is not a byte escape"
        );
        assert!(matches("(x)+", "(x)+"));
    }
}
