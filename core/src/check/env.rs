//! Environment filtering for spawned processes: which inherited variables a child may see.
//!
//! It drops secret-like names (`*TOKEN*`, `*SECRET*`, `*PASSWORD*`, `*_KEY`, `*_AUTH*`,
//! `*WEBHOOK*`, `*_DSN`, `SSHPASS`, ...) but keeps the CA bundle variables (`SSL_CERT_FILE`, ...:
//! paths to public certificates), values that carry credentials (`postgres://u:p@h/db`, `ghp_...`, PEM keys), loader and interpreter
//! injection variables (`LD_PRELOAD`, `DYLD_*`, `BASH_ENV`, `BASH_FUNC_*`, `NODE_OPTIONS`,
//! ...) and anything that is not valid UTF-8. PATH is rebuilt from trusted absolute entries
//! and PWD is set to the child's cwd. It never reads the process environment itself: the
//! caller passes the variables in.

use std::ffi::{OsStr, OsString};
use std::path::{Component, Path, PathBuf};

use serde::Serialize;

use crate::protocol::EnvInheritance;

/// Why a variable was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// The name looks like a secret (`*TOKEN*`, `*SECRET*`, `*PASSWORD*`, `*_KEY`, ...).
    SecretName,
    /// The value carries a credential (URL userinfo, a known token prefix, a PEM key).
    CredentialValue,
    /// A loader or interpreter injection variable (`LD_PRELOAD`, `BASH_ENV`, ...).
    Injection,
    /// The name or value is not valid UTF-8, or the name is malformed.
    InvalidEncoding,
    /// The inheritance mode passes nothing but PATH, HOME and PWD.
    NotInherited,
    /// PATH and PWD are rebuilt, not inherited.
    Rebuilt,
}

impl DropReason {
    /// The snake_case wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::SecretName => "secret_name",
            DropReason::CredentialValue => "credential_value",
            DropReason::Injection => "injection",
            DropReason::InvalidEncoding => "invalid_encoding",
            DropReason::NotInherited => "not_inherited",
            DropReason::Rebuilt => "rebuilt",
        }
    }
}

/// One dropped variable: its name (lossily decoded) and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DroppedVar {
    /// The name, with invalid UTF-8 replaced.
    pub name: String,
    /// Why it was dropped.
    pub reason: DropReason,
}

/// The filtered environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FilteredEnv {
    /// The variables the child gets, in input order, then PATH and PWD.
    pub vars: Vec<(OsString, OsString)>,
    /// What was dropped, and why (never the values).
    pub dropped: Vec<DroppedVar>,
}

/// Exact names that inject code into a loader, shell or interpreter.
const INJECTION_NAMES: &[&str] = &[
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "PROMPT_COMMAND",
    "IFS",
    "CDPATH",
    "GLOBIGNORE",
    "HISTFILE",
    "INPUTRC",
    "ZDOTDIR",
    "NODE_OPTIONS",
    "NODE_PATH",
    "NODE_REPL_EXTERNAL_MODULE",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PYTHONHOME",
    "PYTHONINSPECT",
    "PYTHONBREAKPOINT",
    "PYTHONUSERBASE",
    "PYTHONEXECUTABLE",
    "PERL5OPT",
    "PERL5LIB",
    "PERLLIB",
    "PERL5DB",
    "PERL_MB_OPT",
    "PERL_MM_OPT",
    "RUBYOPT",
    "RUBYLIB",
    "GEM_PATH",
    "GEM_HOME",
    "GIT_SSH_COMMAND",
    "GIT_SSH",
    "GIT_EXEC_PATH",
    "GIT_ASKPASS",
    "SSH_ASKPASS",
    "GIT_PROXY_COMMAND",
    "GIT_EXTERNAL_DIFF",
    "GIT_CONFIG",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_TEMPLATE_DIR",
    "GIT_PAGER",
    "GIT_EDITOR",
    "GIT_SEQUENCE_EDITOR",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "CLASSPATH",
    "DOTNET_STARTUP_HOOKS",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "CARGO_BUILD_RUSTC_WRAPPER",
    "RUSTC",
    "RUSTDOC",
    "GCONV_PATH",
    "LOCPATH",
    "HOSTALIASES",
    "RESOLV_HOST_CONF",
    "OPENSSL_CONF",
    "OPENSSL_ENGINES",
    "SSLKEYLOGFILE",
    "PHPRC",
    "PHP_INI_SCAN_DIR",
    "LUA_INIT",
    "LUA_PATH",
    "LUA_CPATH",
    "LESSOPEN",
    "LESSCLOSE",
    "PAGER",
    "MANPAGER",
    "EDITOR",
    "VISUAL",
    "BROWSER",
    "TERMINAL",
    "PATH",
    "MALLOC_CONF",
    "GLIBC_TUNABLES",
    "TCLLIBPATH",
    "R_PROFILE",
    "R_PROFILE_USER",
    "NPM_CONFIG_SCRIPT_SHELL",
    "NPM_CONFIG_NODE_OPTIONS",
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PROMPT",
    "PS1",
    "PS0",
    "KUBECONFIG",
    "DOCKER_HOST",
    "ELECTRON_RUN_AS_NODE",
];

/// Prefixes of injection names (`LD_PRELOAD`, `DYLD_INSERT_LIBRARIES`, `BASH_FUNC_x%%`, ...).
const INJECTION_PREFIXES: &[&str] = &[
    "LD_",
    "DYLD_",
    "BASH_FUNC_",
    "GIT_CONFIG_KEY_",
    "GIT_CONFIG_VALUE_",
    "CORECLR_",
    "COR_",
    "NPM_CONFIG_",
    "MALLOC_",
];

/// Why `name` is an injection variable, if it is (case-insensitive).
pub fn injection_reason(name: &str) -> Option<DropReason> {
    let upper = name.to_ascii_uppercase();
    if INJECTION_NAMES.contains(&upper.as_str())
        || INJECTION_PREFIXES.iter().any(|p| upper.starts_with(p))
        || name.contains("()")
        || name.contains('%')
    {
        return Some(DropReason::Injection);
    }
    None
}

/// CA bundle variables: they point at public certificates, so they are kept although `CERT`
/// is a secret-like segment (a client certificate's key is not). Compared case-insensitively.
/// Their values are still checked for credentials.
const CA_BUNDLE_NAMES: &[&str] = &[
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "PIP_CERT",
    "CURL_CA_BUNDLE",
];

/// Whether `name` looks like it holds a secret (case-insensitive).
///
/// `*_AUTH*` is matched as the specification writes it, so `GIT_AUTHOR_NAME` is dropped with
/// `PROXY_AUTHORIZATION`: no exception for `_AUTHOR` could tell the two apart, and git takes
/// the author from its config when the variable is gone.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if CA_BUNDLE_NAMES.contains(&upper.as_str()) {
        return false;
    }
    const SUBSTRINGS: &[&str] = &[
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "PASSPHRASE",
        "CREDENTIAL",
        "APIKEY",
        "API_KEY",
        "PRIVATE",
        "COOKIE",
        "SESSION",
        "SIGNING",
        "CLIENTKEY",
        "NETRC",
        "BEARER",
        "DSN",
        "CONNECTION_STRING",
        "CONN_STR",
        "WEBHOOK",
        "_AUTH",
        "AUTHORIZATION",
        "SSHPASS",
    ];
    if SUBSTRINGS.iter().any(|s| upper.contains(s)) {
        return true;
    }
    if upper.ends_with("KEY") || upper.ends_with("_PWD") || upper == "PGPASS" {
        return true;
    }
    upper
        .split(|c: char| !c.is_ascii_alphanumeric())
        .any(|seg| {
            matches!(
                seg,
                "KEY" | "AUTH" | "PAT" | "PASS" | "PW" | "CERT" | "JWT" | "OTP"
            )
        })
}

/// Whether `value` carries a credential.
pub fn is_credential_value(value: &str) -> bool {
    // URL userinfo anywhere in the value (`postgres://u:p@h/db`, `https://tok@github.com`).
    let mut rest = value;
    while let Some(i) = rest.find("://") {
        let after = &rest[i + 3..];
        let authority_end = after
            .find(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace())
            .unwrap_or(after.len());
        if after[..authority_end].contains('@') {
            return true;
        }
        rest = after;
    }
    const PREFIXES: &[&str] = &[
        "ghp_",
        "gho_",
        "ghu_",
        "ghs_",
        "ghr_",
        "github_pat_",
        "glpat-",
        "xoxb-",
        "xoxp-",
        "xoxa-",
        "xoxs-",
        "sk-",
        "sk_live_",
        "rk_live_",
        "AKIA",
        "ASIA",
        "AIza",
        "ya29.",
        "npm_",
        "pypi-",
        "hf_",
        "dop_v1_",
        "SG.",
        "shpat_",
        "eyJ",
    ];
    let trimmed = value.trim();
    if PREFIXES
        .iter()
        .any(|p| trimmed.starts_with(p) && trimmed.len() >= p.len() + 16)
    {
        return true;
    }
    let lower = trimmed.to_ascii_lowercase();
    lower.starts_with("bearer ")
        || lower.starts_with("basic ")
        || value.contains("-----BEGIN")
        || lower.contains("password=")
        || lower.contains("pwd=")
}

/// The trusted PATH: absolute, lexically clean, existing directories that are not inside
/// `untrusted` (roots the agent can write, where it could plant a binary), deduplicated. Falls
/// back to `/usr/local/bin:/usr/bin:/bin` when nothing survives.
pub fn rebuild_path(inherited: Option<&OsStr>, untrusted: &[PathBuf]) -> OsString {
    let mut kept: Vec<PathBuf> = Vec::new();
    if let Some(path) = inherited {
        for entry in std::env::split_paths(path) {
            let clean = entry.is_absolute()
                && entry
                    .components()
                    .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
            if !clean || entry.to_str().is_none() {
                continue;
            }
            let canonical = match std::fs::canonicalize(&entry) {
                Ok(c) if c.is_dir() => c,
                _ => continue,
            };
            if untrusted
                .iter()
                .any(|u| canonical.starts_with(u) || entry.starts_with(u))
            {
                continue;
            }
            if !kept.contains(&entry) {
                kept.push(entry);
            }
        }
    }
    if kept.is_empty() {
        return OsString::from("/usr/local/bin:/usr/bin:/bin");
    }
    std::env::join_paths(kept).unwrap_or_else(|_| OsString::from("/usr/local/bin:/usr/bin:/bin"))
}

/// Judge one variable under `Filtered` inheritance: `None` keeps it.
pub fn judge(name: &OsStr, value: &OsStr) -> Option<DropReason> {
    let (Some(name), Some(value)) = (name.to_str(), value.to_str()) else {
        return Some(DropReason::InvalidEncoding);
    };
    if name.is_empty() || name.contains('=') || name.contains('\0') || value.contains('\0') {
        return Some(DropReason::InvalidEncoding);
    }
    if let Some(r) = injection_reason(name) {
        return Some(r);
    }
    if value.starts_with("() {") {
        // An exported bash function smuggled in under an ordinary name (Shellshock).
        return Some(DropReason::Injection);
    }
    if is_secret_name(name) {
        return Some(DropReason::SecretName);
    }
    if is_credential_value(value) {
        return Some(DropReason::CredentialValue);
    }
    None
}

/// Filter `vars` for a child running in `cwd` under `mode`. `untrusted_path_roots` are the
/// writable roots, excluded from PATH.
pub fn filter_env<I, K, V>(
    vars: I,
    mode: EnvInheritance,
    cwd: &Path,
    untrusted_path_roots: &[PathBuf],
) -> FilteredEnv
where
    I: IntoIterator<Item = (K, V)>,
    K: Into<OsString>,
    V: Into<OsString>,
{
    let mut out = FilteredEnv::default();
    let mut inherited_path: Option<OsString> = None;
    for (name, value) in vars {
        let (name, value): (OsString, OsString) = (name.into(), value.into());
        if name == "PATH" {
            inherited_path = Some(value);
            continue;
        }
        if name == "PWD" {
            continue;
        }
        let reason = match mode {
            EnvInheritance::All => None,
            EnvInheritance::Filtered => judge(&name, &value),
            EnvInheritance::None if name == "HOME" && value.to_str().is_some() => None,
            EnvInheritance::None => Some(DropReason::NotInherited),
        };
        match reason {
            None => out.vars.push((name, value)),
            Some(reason) => out.dropped.push(DroppedVar {
                name: name.to_string_lossy().into_owned(),
                reason,
            }),
        }
    }
    let path = match mode {
        EnvInheritance::All => {
            inherited_path.unwrap_or_else(|| OsString::from("/usr/local/bin:/usr/bin:/bin"))
        }
        _ => rebuild_path(inherited_path.as_deref(), untrusted_path_roots),
    };
    out.vars.push((OsString::from("PATH"), path));
    out.vars
        .push((OsString::from("PWD"), cwd.as_os_str().to_owned()));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_values() {
        for n in [
            "GITHUB_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "PGPASSWORD",
            "OPENAI_API_KEY",
            "SSH_AUTH_SOCK",
        ] {
            assert_eq!(
                judge(OsStr::new(n), OsStr::new("x")),
                Some(DropReason::SecretName),
                "{n}"
            );
        }
        for n in [
            "LD_PRELOAD",
            "DYLD_INSERT_LIBRARIES",
            "BASH_FUNC_ls%%",
            "bash_env",
            "NODE_OPTIONS",
        ] {
            assert_eq!(
                judge(OsStr::new(n), OsStr::new("x")),
                Some(DropReason::Injection),
                "{n}"
            );
        }
        assert_eq!(
            judge(
                OsStr::new("DATABASE_URL"),
                OsStr::new("postgres://u:p@h/db")
            ),
            Some(DropReason::CredentialValue)
        );
        for n in [
            "HOME",
            "LANG",
            "TERM",
            "GIT_COMMITTER_NAME",
            "AUTHOR",
            "KEYBOARD_LAYOUT",
            "CARGO_HOME",
        ] {
            assert_eq!(judge(OsStr::new(n), OsStr::new("/x")), None, "{n}");
        }
    }

    #[test]
    fn webhooks_and_credential_names_are_secrets() {
        for n in [
            "SSHPASS",
            "sshpass",
            "SLACK_WEBHOOK_URL",
            "slack_webhook_url",
            "DISCORD_WEBHOOK",
            "WEBHOOK_URL",
            "SENTRY_DSN",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "X_AUTH_TOKEN",
            "PROXY_AUTHORIZATION",
            "AUTHORIZATION",
            "REGISTRY_AUTHN",
            "GIT_AUTHOR_NAME",
        ] {
            assert_eq!(
                judge(OsStr::new(n), OsStr::new("x")),
                Some(DropReason::SecretName),
                "{n}"
            );
        }
    }

    #[test]
    fn ca_bundles_are_kept_but_their_values_are_still_checked() {
        for n in CA_BUNDLE_NAMES.iter().chain(&["ssl_cert_file"]) {
            assert_eq!(
                judge(OsStr::new(n), OsStr::new("/etc/ssl/certs/ca.pem")),
                None,
                "{n}"
            );
        }
        for n in ["CLIENT_CERT", "SSL_CERT_KEY", "SSL_CERT_FILE_PASSWORD"] {
            assert_eq!(
                judge(OsStr::new(n), OsStr::new("/x")),
                Some(DropReason::SecretName),
                "{n}"
            );
        }
        assert_eq!(
            judge(
                OsStr::new("REQUESTS_CA_BUNDLE"),
                OsStr::new("https://u:p@ca.example/bundle.pem")
            ),
            Some(DropReason::CredentialValue)
        );
        assert_eq!(
            judge(OsStr::new("SSL_CERT_FILE"), OsStr::new("() { :; }; id")),
            Some(DropReason::Injection)
        );
    }

    #[cfg(unix)]
    #[test]
    fn invalid_utf8_is_dropped_without_panic() {
        use std::os::unix::ffi::OsStrExt;
        let bad = OsStr::from_bytes(b"\xff\xfe");
        let env = filter_env(
            [
                (bad.to_owned(), OsString::from("v")),
                (OsString::from("OK"), bad.to_owned()),
            ],
            EnvInheritance::Filtered,
            Path::new("/w"),
            &[],
        );
        assert_eq!(env.dropped.len(), 2);
        assert!(
            env.dropped
                .iter()
                .all(|d| d.reason == DropReason::InvalidEncoding)
        );
    }
}
