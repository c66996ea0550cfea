//! The answer to "may this action run?": an effect plus what decided it.
//!
//! Policy evaluation and every checker return a [`Verdict`], so the gate, the CLI and the
//! clients can always say which rule in which layer decided, and why.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::action::{ActionKind, Effect};
use crate::policy::Rule;

/// The pseudo-layer reported when a kind's default decided.
pub const DEFAULTS_LAYER: &str = "defaults";

/// A machine-readable reason code. Clients switch on these; the wire form is snake_case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Reason {
    /// A deny rule matched.
    DenyRule,
    /// An ask rule matched (and no deny rule did).
    AskRule,
    /// An allow rule matched (and no deny or ask rule did).
    AllowRule,
    /// No rule matched; the kind's default decided.
    Default,
    /// The target could not be normalized (unparseable URL, NUL byte, ...). Fails closed.
    InvalidTarget,
    /// A shell construct that cannot be resolved statically (command substitution, `eval`,
    /// variable in command position, unparseable input). Never weaker than ask.
    UnresolvedShellConstruct,
    /// The path lies outside every root of the turn's sandbox.
    OutsideRoots,
    /// A write under a read-only root (an ask when the mode itself made a workspace or project root read-only).
    ReadOnlyRoot,
    /// The path is inside a root, but a symlink resolves it outside every root.
    SymlinkEscape,
    /// Resolving the path failed (ENOTDIR, ENAMETOOLONG, EACCES, ELOOP, ...). Fails closed.
    IoError,
    /// A URL scheme other than http or https.
    UnsupportedScheme,
    /// A URL carrying userinfo (`user:pass@host`), which names two hosts to two readers.
    Userinfo,
    /// The turn's network is disabled; a connection needs a grant.
    NetworkDisabled,
    /// The host is on the turn's denied-domain list.
    DeniedDomain,
    /// The turn's network is restricted and the host is not on the allowed-domain list.
    NotAllowlisted,
    /// A loopback or unspecified address (or a localhost name) while localhost is not allowed.
    LocalhostBlocked,
    /// A private, link-local or reserved address that no explicit rule allows.
    PrivateAddress,
    /// A cloud metadata endpoint (169.254.169.254, fd00:ec2::254, ...). Always refused.
    MetadataAddress,
    /// The port is not on the turn's allowed TCP port list.
    PortNotAllowed,
    /// A DNS answer fell in a forbidden address range, or resolution failed.
    DnsRefused,
    /// Shell commands are disabled for this turn.
    ShellDisabled,
    /// A simple command matched the turn's denied commands.
    DeniedCommand,
    /// A simple command is outside the turn's allowed command families.
    NotInCommandFamily,
    /// An allow rule's `limit` was reached in its window: its `over` effect decided.
    LimitExceeded,
    /// An MCP tool's definition differs from the one its server first listed in the session
    /// (a changed description, schema or annotation): the call asks again.
    ToolDefinitionChanged,
}

impl Reason {
    /// The snake_case wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::DenyRule => "deny_rule",
            Reason::AskRule => "ask_rule",
            Reason::AllowRule => "allow_rule",
            Reason::Default => "default",
            Reason::InvalidTarget => "invalid_target",
            Reason::UnresolvedShellConstruct => "unresolved_shell_construct",
            Reason::OutsideRoots => "outside_roots",
            Reason::ReadOnlyRoot => "read_only_root",
            Reason::SymlinkEscape => "symlink_escape",
            Reason::IoError => "io_error",
            Reason::UnsupportedScheme => "unsupported_scheme",
            Reason::Userinfo => "userinfo",
            Reason::NetworkDisabled => "network_disabled",
            Reason::DeniedDomain => "denied_domain",
            Reason::NotAllowlisted => "not_allowlisted",
            Reason::LocalhostBlocked => "localhost_blocked",
            Reason::PrivateAddress => "private_address",
            Reason::MetadataAddress => "metadata_address",
            Reason::PortNotAllowed => "port_not_allowed",
            Reason::DnsRefused => "dns_refused",
            Reason::ShellDisabled => "shell_disabled",
            Reason::DeniedCommand => "denied_command",
            Reason::NotInCommandFamily => "not_in_command_family",
            Reason::LimitExceeded => "limit_exceeded",
            Reason::ToolDefinitionChanged => "tool_definition_changed",
        }
    }
}

/// The turn-aware condition of the deciding rule, as it applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum TurnCondition {
    /// An `after` rule applied: the turn had already been allowed `matched`.
    After {
        /// The condition's kind.
        kind: ActionKind,
        /// The condition's pattern.
        pattern: String,
        /// The target of the earlier allowed action that met it.
        matched: String,
    },
    /// A `limit` rule decided: `seen` matching actions in the window before this one.
    Limit {
        /// The limit's count.
        count: u32,
        /// The limit's window, as written (`10m`).
        per: String,
        /// Matching actions the turn had in the window before this one.
        seen: u32,
    },
}

/// What a log-only layer's rules would have decided, when that differs from the verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Would {
    /// The effect with every log-only layer enforced.
    pub effect: Effect,
    /// The deciding rule's pattern then, if a rule decided.
    pub rule: Option<String>,
    /// The deciding layer then.
    pub layer: String,
    /// The reason then.
    pub reason: Reason,
}

impl std::fmt::Display for Would {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.rule {
            Some(rule) => write!(
                f,
                "{} by rule `{rule}` ({}) in layer `{}`",
                self.effect,
                self.reason.as_str(),
                self.layer
            ),
            None => write!(
                f,
                "{} ({}) in layer `{}`",
                self.effect,
                self.reason.as_str(),
                self.layer
            ),
        }
    }
}

/// The outcome of evaluating one action: `check` is exactly `explain(..).effect`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Verdict {
    /// allow, ask or deny.
    pub effect: Effect,
    /// The deciding rule, or `None` when a default (or a checker) decided.
    pub rule: Option<Arc<Rule>>,
    /// The deciding layer: a rule's layer, `defaults`, or a cap's name.
    pub layer: Arc<str>,
    /// Why, as a machine-readable code.
    pub reason: Reason,
    /// The deciding rule's turn-aware condition (`after`, `limit`), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition: Option<Box<TurnCondition>>,
    /// What the policy's log-only layers would have decided, when it differs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub would: Option<Box<Would>>,
}

impl Verdict {
    /// A verdict decided by something other than a rule (a default or a checker).
    pub fn without_rule(effect: Effect, layer: impl Into<Arc<str>>, reason: Reason) -> Self {
        Verdict {
            effect,
            rule: None,
            layer: layer.into(),
            reason,
            condition: None,
            would: None,
        }
    }

    /// The stricter of two verdicts; on a tie, `self` (the earlier one) is kept.
    pub fn stricter(self, other: Verdict) -> Verdict {
        if other.effect > self.effect {
            other
        } else {
            self
        }
    }
}
