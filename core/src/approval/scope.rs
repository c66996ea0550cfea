//! Approval scopes and `scope_hash`: what an `allow_for_turn` grant covers, hashed the same way
//! in every language.
//!
//! A scope is the action kind, the canonical target and the tool name. Two asks with equal
//! scopes share a grant; anything else (another path, another port, another argument) does not.
//!
//! # Encoding (version 1)
//!
//! `scope_hash` is the lowercase hex SHA-256 of a byte string built from *items*:
//!
//! - a **string** is its UTF-8 bytes preceded by their length as a 4-byte big-endian integer;
//! - a **list** is its element count as a 4-byte big-endian integer followed by each element
//!   as a string.
//!
//! The items, in order:
//!
//! 1. the string `turngate.scope.v1` (a domain tag, so a future encoding never collides);
//! 2. the action kind's wire name (`file_write`, ...);
//! 3. the target type: `path`, `host_port`, `command` or `name`;
//! 4. the target's fields:
//!    - `path`: the path;
//!    - `host_port`: the host, then the port in decimal (no leading zeros);
//!    - `command`: the program, the list of arguments, then the cwd;
//!    - `name`: the name;
//! 5. the tool: a list holding the tool name, or the empty list when there is none.
//!
//! Nothing is normalized during hashing: normalization happens when the scope is built
//! ([`ApprovalScope::from_action`] and the typed constructors), so the hash input is exactly
//! the JSON form of [`ApprovalScope`] that the conformance vectors carry.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::action::{Action, ActionKind};
use crate::policy::{normalize_network_target, normalize_path_lexically};
use crate::shell::parse_command_line;

/// The domain tag that starts every version-1 scope encoding.
pub const SCOPE_HASH_DOMAIN: &str = "turngate.scope.v1";

/// The canonical target of a scope.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ScopeTarget {
    /// A file path: the resolved (symlink-followed) path when the checker has it, lexically
    /// normalized.
    Path {
        /// The path.
        path: String,
    },
    /// A network endpoint: canonical host and port.
    HostPort {
        /// Lowercase, IDNA-encoded host without a trailing dot (IPv6 without brackets).
        host: String,
        /// The port.
        port: u16,
    },
    /// A parsed shell command: program, arguments and working directory.
    Command {
        /// The program as written, unquoted.
        program: String,
        /// The arguments, unquoted.
        args: Vec<String>,
        /// The working directory the command runs in.
        cwd: String,
    },
    /// Any other target: an MCP `server/tool`, a tool or an agent name, or a command line that
    /// could not be parsed (kept verbatim, so only the identical line matches).
    Name {
        /// The name.
        name: String,
    },
}

/// The normalized scope of an approval: what an `allow_for_turn` grant covers.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalScope {
    /// The action kind.
    pub action_kind: ActionKind,
    /// The canonical target.
    pub target: ScopeTarget,
    /// The tool name, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
}

/// A target could not be put in canonical form for a scope.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot build an approval scope for {kind} target `{target}`: {message}")]
pub struct ScopeError {
    /// The action kind.
    pub kind: ActionKind,
    /// The target as given.
    pub target: String,
    /// What was wrong.
    pub message: &'static str,
}

impl ApprovalScope {
    /// The scope of `action`, normalized.
    ///
    /// - File kinds: the target is lexically normalized (`./`, `//`, `..`, NFC). Pass the
    ///   resolved path when the file checker has one: the scope is the resolved path.
    /// - `network`: the canonical `host:port` (a URL's port is its scheme's default when not
    ///   written). A bare host without a port is an error: a grant must name a port.
    /// - `shell_command`: a line of one command whose arguments are all static, with no
    ///   redirection and no assignment, becomes program + args + `cwd`; any other line stays
    ///   verbatim as a `name` target, so only that exact line matches. Without a `cwd`, the
    ///   empty string is used.
    /// - Other kinds: the target verbatim as a `name`.
    pub fn from_action(action: &Action, cwd: Option<&str>) -> Result<Self, ScopeError> {
        let err = |message| ScopeError {
            kind: action.kind,
            target: action.target.clone(),
            message,
        };
        let target = match action.kind {
            ActionKind::FileRead | ActionKind::FileWrite => ScopeTarget::Path {
                path: normalize_path_lexically(&action.target)
                    .map_err(|e| err(e.0))?
                    .into_owned(),
            },
            ActionKind::Network => {
                let normalized = normalize_network_target(&action.target).map_err(|e| err(e.0))?;
                let port = normalized
                    .port
                    .ok_or_else(|| err("a network scope needs a port (`host:port` or a URL)"))?;
                ScopeTarget::HostPort {
                    host: normalized.host,
                    port,
                }
            }
            ActionKind::ShellCommand => {
                let parsed = parse_command_line(&action.target);
                // Program and arguments stand for the line only where bash runs exactly
                // them: one command, every argument static (`rm '*'` is not `rm *`), no
                // redirection (`cat f` is not `cat f > .git/config`) and no assignment or
                // other shell construct around it (`PAGER=x git log` is not `git log`).
                // Anything else is scoped by its exact text (red team 4 F2).
                let exact = parsed.unresolved.is_empty()
                    && parsed.redirects.is_empty()
                    && parsed.internal.is_empty();
                match (exact, parsed.commands.as_slice()) {
                    (true, [command]) if command.args_static.iter().all(|s| *s) => {
                        ScopeTarget::Command {
                            program: command.program.clone(),
                            args: command.args.clone(),
                            cwd: match cwd {
                                Some(cwd) => normalize_path_lexically(cwd)
                                    .map_err(|e| err(e.0))?
                                    .into_owned(),
                                None => String::new(),
                            },
                        }
                    }
                    _ => ScopeTarget::Name {
                        name: action.target.clone(),
                    },
                }
            }
            _ => ScopeTarget::Name {
                name: action.target.clone(),
            },
        };
        Ok(ApprovalScope {
            action_kind: action.kind,
            target,
            tool_name: action.tool.clone(),
        })
    }

    /// The canonical byte encoding hashed by [`scope_hash`](Self::scope_hash) (see the module
    /// documentation).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(128);
        put_str(&mut out, SCOPE_HASH_DOMAIN);
        put_str(&mut out, self.action_kind.as_str());
        match &self.target {
            ScopeTarget::Path { path } => {
                put_str(&mut out, "path");
                put_str(&mut out, path);
            }
            ScopeTarget::HostPort { host, port } => {
                put_str(&mut out, "host_port");
                put_str(&mut out, host);
                put_str(&mut out, &port.to_string());
            }
            ScopeTarget::Command { program, args, cwd } => {
                put_str(&mut out, "command");
                put_str(&mut out, program);
                put_list(&mut out, args.iter().map(String::as_str));
                put_str(&mut out, cwd);
            }
            ScopeTarget::Name { name } => {
                put_str(&mut out, "name");
                put_str(&mut out, name);
            }
        }
        put_list(&mut out, self.tool_name.as_deref());
        out
    }

    /// The lowercase hex SHA-256 of [`encode`](Self::encode).
    pub fn scope_hash(&self) -> String {
        to_hex(&Sha256::digest(self.encode()))
    }
}

/// `scope_hash` of an action's normalized scope (see [`ApprovalScope::from_action`]).
pub fn scope_hash(action: &Action, cwd: Option<&str>) -> Result<String, ScopeError> {
    Ok(ApprovalScope::from_action(action, cwd)?.scope_hash())
}

fn put_len(out: &mut Vec<u8>, len: usize) {
    // Targets longer than 4 GiB cannot occur in practice; saturate rather than wrap.
    let len = u32::try_from(len).unwrap_or(u32::MAX);
    out.extend_from_slice(&len.to_be_bytes());
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    put_len(out, s.len());
    out.extend_from_slice(s.as_bytes());
}

fn put_list<'a>(out: &mut Vec<u8>, items: impl IntoIterator<Item = &'a str>) {
    let items: Vec<&str> = items.into_iter().collect();
    put_len(out, items.len());
    for item in items {
        put_str(out, item);
    }
}

pub(crate) fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    s
}
