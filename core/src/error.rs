//! Errors of the policy layer. Each variant names the bad input, so a caller can tell the user
//! what to fix.

use thiserror::Error;

/// A policy could not be parsed, built or compiled.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// A policy file did not parse. `path` is the field path (`layers[0].rules[1].kind`),
    /// `line`/`column` are 1-based when the format reports them.
    #[error("{format} policy{origin}: {path}{position}: {message}",
        origin = origin.as_deref().map(|o| format!(" {o}")).unwrap_or_default(),
        position = match (line, column) {
            (Some(l), Some(c)) => format!(" (line {l}, column {c})"),
            (Some(l), None) => format!(" (line {l})"),
            _ => String::new(),
        })]
    Parse {
        /// `json` or `toml`.
        format: &'static str,
        /// The file the text came from, when known.
        origin: Option<String>,
        /// The field path that failed, `.` for the document itself.
        path: String,
        /// 1-based line, when known.
        line: Option<usize>,
        /// 1-based column, when known.
        column: Option<usize>,
        /// What was wrong.
        message: String,
    },
    /// A rule's glob did not compile.
    #[error("layer `{layer}`: invalid {what} pattern `{pattern}`: {message}")]
    Glob {
        /// The layer holding the rule.
        layer: String,
        /// `pattern` or `tool`.
        what: &'static str,
        /// The pattern as written.
        pattern: String,
        /// The glob compiler's complaint.
        message: String,
    },
    /// A rule is well-formed but means nothing (a `limit` on a deny rule, ...).
    #[error("layer `{layer}`, rule {index} (`{pattern}`): {message}")]
    InvalidRule {
        /// The layer holding the rule.
        layer: String,
        /// The rule's position in the layer, from 0.
        index: usize,
        /// The rule's pattern.
        pattern: String,
        /// What is wrong.
        message: String,
    },
    /// A string was not an action kind's wire name.
    #[error(
        "unknown action kind `{0}` (expected one of file_read, file_write, shell_command, network, mcp_read, mcp_write_or_unknown, dynamic_skill_tool, computer_use, task_subagent, internal, unknown)"
    )]
    UnknownKind(String),
    /// A string was not `allow`, `ask` or `deny`.
    #[error("unknown effect `{0}` (expected allow, ask or deny)")]
    UnknownEffect(String),
    /// A string was not a permission mode.
    #[error(
        "unknown permission mode `{0}` (expected full_access, auto_accept_edits or supervised)"
    )]
    UnknownMode(String),
    /// A policy file could not be read.
    #[error("cannot read policy file {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A policy file's extension names no known format.
    #[error("policy file {0}: unknown format (expected a .json or .toml extension)")]
    UnknownFormat(String),
}
