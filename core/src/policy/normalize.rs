//! Target normalization: one spelling per target before any glob sees it, so that deny and ask
//! rules never miss because of `./`, `//`, `..`, Unicode form, case, IP spelling or IDNA.

use std::borrow::Cow;
use std::net::{IpAddr, Ipv4Addr};

use unicode_normalization::{UnicodeNormalization, is_nfc_quick};

/// A target could not be normalized; the caller fails closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidTarget(pub &'static str);

/// Unicode NFC, without allocating when the text already is NFC (always for ASCII).
pub(crate) fn nfc(s: &str) -> Cow<'_, str> {
    if s.is_ascii() || is_nfc_quick(s.chars()) == unicode_normalization::IsNormalized::Yes {
        Cow::Borrowed(s)
    } else {
        Cow::Owned(s.nfc().collect())
    }
}

/// The case-folded form used for deny/ask comparison.
pub(crate) fn fold_case(s: &str) -> Cow<'_, str> {
    // One pass: ASCII without capitals (the common case) is returned as is.
    let mut upper = false;
    let mut ascii = true;
    for b in s.bytes() {
        upper |= b.is_ascii_uppercase();
        if !b.is_ascii() {
            ascii = false;
            break;
        }
    }
    if ascii {
        if upper {
            Cow::Owned(s.to_ascii_lowercase())
        } else {
            Cow::Borrowed(s)
        }
    } else {
        // Full Unicode lowercase, then NFC again (lowercasing can denormalize).
        Cow::Owned(s.to_lowercase().nfc().collect())
    }
}

/// Windows only: strip a `\\?\` verbatim prefix and fold `\` to `/`. A no-op on unix, where
/// `\` is an ordinary filename character.
pub(crate) fn fold_platform_separators(s: &str) -> Cow<'_, str> {
    if cfg!(windows) {
        let s = s.strip_prefix(r"\\?\").unwrap_or(s);
        Cow::Owned(s.replace('\\', "/"))
    } else {
        Cow::Borrowed(s)
    }
}

/// Lexically normalize a path: NFC, platform fold, `.` and empty components removed, `..`
/// resolved against the preceding component (kept when it would climb above a relative start;
/// dropped at an absolute root). Rejects NUL bytes and empty paths.
///
/// This never touches the file system; the file checker adds the symlink-resolved form.
pub fn normalize_path_lexically(path: &str) -> Result<Cow<'_, str>, InvalidTarget> {
    if path.is_empty() {
        return Err(InvalidTarget("empty path"));
    }
    let folded = fold_platform_separators(path);
    match scan_path(folded.as_bytes()) {
        PathScan::Nul => return Err(InvalidTarget("NUL byte in path")),
        // The hot case: ASCII (so already NFC) with nothing to remove.
        PathScan::Plain { ascii: true } => {
            return Ok(match folded {
                Cow::Borrowed(_) => Cow::Borrowed(path),
                Cow::Owned(o) => Cow::Owned(o),
            });
        }
        _ => {}
    }
    let needs_work = |p: &str| !matches!(scan_path(p.as_bytes()), PathScan::Plain { .. });
    let text = match nfc(&folded) {
        Cow::Borrowed(_) if !needs_work(&folded) => {
            return Ok(match folded {
                Cow::Borrowed(_) => Cow::Borrowed(path),
                Cow::Owned(o) => Cow::Owned(o),
            });
        }
        other => other.into_owned(),
    };
    if !needs_work(&text) {
        return Ok(Cow::Owned(text));
    }
    let absolute = text.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for component in text.split('/') {
        match component {
            "" | "." => {}
            ".." => match parts.last() {
                Some(&last) if last != ".." => {
                    parts.pop();
                }
                _ if absolute => {}
                _ => parts.push(".."),
            },
            c => parts.push(c),
        }
    }
    let joined = parts.join("/");
    Ok(Cow::Owned(match (absolute, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_owned(),
        (false, false) => joined,
    }))
}

/// What one pass over a path's bytes found.
enum PathScan {
    /// A NUL byte: the path is invalid.
    Nul,
    /// No `.`, `..` or empty component to remove (a leading `/` is not one).
    Plain {
        /// Every byte is ASCII (so the text is already NFC).
        ascii: bool,
    },
    /// Something to normalize.
    NeedsWork,
}

fn scan_path(b: &[u8]) -> PathScan {
    let mut ascii = true;
    let mut work = false;
    let mut start = 0;
    for i in 0..=b.len() {
        let byte = b.get(i).copied();
        match byte {
            Some(0) => return PathScan::Nul,
            Some(b'/') | None => {
                match &b[start..i] {
                    // An empty component: `//`, or a trailing `/` (but `/` itself is fine).
                    [] => work |= i != 0 && !(byte.is_none() && b.len() == 1),
                    [b'.'] | [b'.', b'.'] => work = true,
                    _ => {}
                }
                start = i + 1;
            }
            Some(c) => ascii &= c.is_ascii(),
        }
    }
    if work {
        PathScan::NeedsWork
    } else {
        PathScan::Plain { ascii }
    }
}

/// The last component of a normalized path (the path itself when it has no `/`).
pub(crate) fn basename(path: &str) -> &str {
    match path.rfind('/') {
        Some(i) if i + 1 < path.len() => &path[i + 1..],
        _ => path,
    }
}

/// A network target in canonical form: lowercase IDNA host without a trailing dot, IPv4 in
/// dotted-quad (whatever its spelling), IPv4-mapped IPv6 unmapped, and the port when known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NormalizedTarget {
    /// The canonical host (an IPv6 address without brackets).
    pub host: String,
    /// The port, explicit or the scheme's default; `None` for a bare host.
    pub port: Option<u16>,
    /// The parsed address when the host is an IP literal.
    pub ip: Option<IpAddr>,
    /// The URL's scheme (lowercase), or `None` for a `host[:port]` target.
    pub scheme: Option<String>,
}

impl NormalizedTarget {
    /// `host:port` (IPv6 bracketed), or `None` without a port.
    pub fn host_port(&self) -> Option<String> {
        self.port.map(|port| match self.ip {
            Some(IpAddr::V6(_)) => format!("[{}]:{port}", self.host),
            _ => format!("{}:{port}", self.host),
        })
    }
}

/// The [`InvalidTarget`] message for a URL that carries userinfo.
pub const USERINFO: &str = "userinfo in URL";

/// Normalize a network target: a URL (`scheme://...`) or `host[:port]`.
///
/// Uses the WHATWG parser of the `url` crate, so every IPv4 spelling (`2130706433`,
/// `0x7f.1`, `0177.0.0.1`, `127.1`) becomes dotted-quad and hosts are IDNA-encoded. Userinfo
/// is rejected: `https://good.com@evil.com` names two hosts to two readers.
pub fn normalize_network_target(target: &str) -> Result<NormalizedTarget, InvalidTarget> {
    if target.is_empty() {
        return Err(InvalidTarget("empty network target"));
    }
    if target.contains('\0') {
        return Err(InvalidTarget("NUL byte in network target"));
    }
    if target
        .chars()
        .any(|c| c.is_whitespace() || c.is_control() || c == '\\')
    {
        return Err(InvalidTarget(
            "whitespace, control character or backslash in network target",
        ));
    }
    let (url, explicit_port, scheme) = if target.contains("://") {
        let url = url::Url::parse(target).map_err(|_| InvalidTarget("unparseable URL"))?;
        let port = url.port_or_known_default();
        let scheme = Some(url.scheme().to_owned());
        (url, port, scheme)
    } else {
        // `host:port` or bare `host`; a bracketed IPv6 literal may carry a port too.
        let (host, port) = split_host_port(target)?;
        let url = url::Url::parse(&format!("http://{host}/"))
            .map_err(|_| InvalidTarget("unparseable host"))?;
        (url, port, None)
    };
    if !url.username().is_empty() || url.password().is_some() {
        return Err(InvalidTarget(USERINFO));
    }
    let (host, ip) = match url.host() {
        Some(url::Host::Domain(d)) => {
            let d = d.strip_suffix('.').unwrap_or(d);
            if d.is_empty() {
                return Err(InvalidTarget("empty host"));
            }
            (d.to_ascii_lowercase(), None)
        }
        Some(url::Host::Ipv4(v4)) => (v4.to_string(), Some(IpAddr::V4(v4))),
        Some(url::Host::Ipv6(v6)) => match canonical_v4_in_v6(v6) {
            Some(v4) => (v4.to_string(), Some(IpAddr::V4(v4))),
            None => (v6.to_string(), Some(IpAddr::V6(v6))),
        },
        None => return Err(InvalidTarget("URL has no host")),
    };
    Ok(NormalizedTarget {
        host,
        port: explicit_port,
        ip,
        scheme,
    })
}

/// The IPv4 address an IPv4-mapped (`::ffff:a.b.c.d`) or IPv4-compatible (`::a.b.c.d`) IPv6
/// address carries.
pub(crate) fn canonical_v4_in_v6(v6: std::net::Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = v6.segments();
    if s[..6] == [0, 0, 0, 0, 0, 0] && (s[6] != 0 || s[7] > 1) {
        return Some(Ipv4Addr::new(
            (s[6] >> 8) as u8,
            s[6] as u8,
            (s[7] >> 8) as u8,
            s[7] as u8,
        ));
    }
    None
}

fn split_host_port(target: &str) -> Result<(&str, Option<u16>), InvalidTarget> {
    let parse_port = |p: &str| {
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
            return Err(InvalidTarget("invalid port"));
        }
        p.parse::<u16>()
            .map_err(|_| InvalidTarget("port out of range"))
    };
    if target.starts_with('[') {
        let end = target
            .find(']')
            .ok_or(InvalidTarget("unclosed IPv6 bracket"))?;
        let host = &target[..=end];
        return match &target[end + 1..] {
            "" => Ok((host, None)),
            rest => match rest.strip_prefix(':') {
                Some(p) => Ok((host, Some(parse_port(p)?))),
                None => Err(InvalidTarget("garbage after IPv6 literal")),
            },
        };
    }
    if target.contains('/') || target.contains('@') || target.contains('?') || target.contains('#')
    {
        return Err(InvalidTarget(
            "a host:port target must not carry a path, query or userinfo",
        ));
    }
    match target.matches(':').count() {
        0 => Ok((target, None)),
        1 => {
            let (host, port) = target
                .split_once(':')
                .ok_or(InvalidTarget("invalid port"))?;
            Ok((host, Some(parse_port(port)?)))
        }
        _ => Err(InvalidTarget("an IPv6 literal must be bracketed")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_paths() {
        let n = |p: &str| normalize_path_lexically(p).map(|c| c.into_owned());
        assert_eq!(n("./a//b/./c").as_deref(), Ok("a/b/c"));
        assert_eq!(n("a/../../b").as_deref(), Ok("../b"));
        assert_eq!(n("/../etc/passwd").as_deref(), Ok("/etc/passwd"));
        assert_eq!(n("src/").as_deref(), Ok("src"));
        assert_eq!(n("./").as_deref(), Ok("."));
        assert_eq!(n("/").as_deref(), Ok("/"));
        assert_eq!(n("a/.").as_deref(), Ok("a"));
        assert_eq!(n(".hidden/..x/y").as_deref(), Ok(".hidden/..x/y"));
        assert_eq!(n("/a//").as_deref(), Ok("/a"));
        assert!(n("a\0b").is_err());
        assert!(n("").is_err());
    }

    #[test]
    fn network_spellings() {
        let host = |t: &str| normalize_network_target(t).map(|n| (n.host, n.port));
        assert_eq!(
            host("http://2130706433/"),
            Ok(("127.0.0.1".into(), Some(80)))
        );
        assert_eq!(
            host("http://0x7f.1:8080/"),
            Ok(("127.0.0.1".into(), Some(8080)))
        );
        assert_eq!(
            host("[::ffff:127.0.0.1]:22"),
            Ok(("127.0.0.1".into(), Some(22)))
        );
        assert_eq!(
            host("API.Example.COM."),
            Ok(("api.example.com".into(), None))
        );
        assert_eq!(
            host("bücher.de:443"),
            Ok(("xn--bcher-kva.de".into(), Some(443)))
        );
        assert!(host("https://good.com@evil.com/").is_err());
        assert!(host("http://a b/").is_err());
    }
}
