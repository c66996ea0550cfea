//! Actions, action kinds and effects: the vocabulary every rule, checker and client shares.
//!
//! This module only names things. It never decides anything; deciding is `policy`'s job.

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::PolicyError;

/// What a tool call does, by its wire name (`file_read`, `shell_command`, ...).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum ActionKind {
    /// Read a file or list a directory. Target: a path.
    FileRead,
    /// Write, edit, create or delete a file. Target: a path.
    FileWrite,
    /// Run a shell command. Target: the command line.
    ShellCommand,
    /// Open an outbound connection. Target: a URL or `host:port`.
    Network,
    /// Call a read-only MCP tool. Target: `server/tool`.
    McpRead,
    /// Call an MCP tool that writes, or whose effect is unknown. Target: `server/tool`.
    McpWriteOrUnknown,
    /// Call a dynamically loaded skill tool. Target: the tool name.
    DynamicSkillTool,
    /// Drive the computer (screen, keyboard, mouse). Target: the tool name.
    ComputerUse,
    /// Launch a task or subagent. Target: the agent name.
    TaskSubagent,
    /// A runtime-internal action. Target: the tool name.
    Internal,
    /// A tool call that could not be classified. Target: the tool name.
    Unknown,
}

impl ActionKind {
    /// Every kind, in wire order.
    pub const ALL: [ActionKind; 11] = [
        ActionKind::FileRead,
        ActionKind::FileWrite,
        ActionKind::ShellCommand,
        ActionKind::Network,
        ActionKind::McpRead,
        ActionKind::McpWriteOrUnknown,
        ActionKind::DynamicSkillTool,
        ActionKind::ComputerUse,
        ActionKind::TaskSubagent,
        ActionKind::Internal,
        ActionKind::Unknown,
    ];

    /// The snake_case wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            ActionKind::FileRead => "file_read",
            ActionKind::FileWrite => "file_write",
            ActionKind::ShellCommand => "shell_command",
            ActionKind::Network => "network",
            ActionKind::McpRead => "mcp_read",
            ActionKind::McpWriteOrUnknown => "mcp_write_or_unknown",
            ActionKind::DynamicSkillTool => "dynamic_skill_tool",
            ActionKind::ComputerUse => "computer_use",
            ActionKind::TaskSubagent => "task_subagent",
            ActionKind::Internal => "internal",
            ActionKind::Unknown => "unknown",
        }
    }

    /// Index into per-kind tables (`0..11`).
    pub const fn index(self) -> usize {
        self as usize
    }

    /// True for the two file kinds, whose targets are paths.
    pub const fn is_file(self) -> bool {
        matches!(self, ActionKind::FileRead | ActionKind::FileWrite)
    }

    /// True for the two MCP kinds, whose targets are `server/tool`.
    pub const fn is_mcp(self) -> bool {
        matches!(self, ActionKind::McpRead | ActionKind::McpWriteOrUnknown)
    }
}

impl fmt::Display for ActionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ActionKind {
    type Err = PolicyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ActionKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| PolicyError::UnknownKind(s.to_owned()))
    }
}

/// A rule's or a verdict's outcome. Strictness order: `Deny > Ask > Allow`
/// (the derived `Ord` follows it, so `max` is "the stricter").
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// Run without asking.
    Allow,
    /// Open an approval request and wait for a person.
    Ask,
    /// Refuse before any side effect.
    Deny,
}

impl Effect {
    /// The snake_case wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Effect::Allow => "allow",
            Effect::Ask => "ask",
            Effect::Deny => "deny",
        }
    }

    /// The stricter of two effects.
    pub fn stricter(self, other: Effect) -> Effect {
        self.max(other)
    }
}

impl fmt::Display for Effect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Effect {
    type Err = PolicyError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "allow" => Ok(Effect::Allow),
            "ask" => Ok(Effect::Ask),
            "deny" => Ok(Effect::Deny),
            other => Err(PolicyError::UnknownEffect(other.to_owned())),
        }
    }
}

/// One side-effecting tool call, as the gate sees it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Action {
    /// What the call does.
    pub kind: ActionKind,
    /// What it does it to: a path, a command line, a URL or `host:port`, `server/tool`, or a name.
    pub target: String,
    /// The tool's name, when known (rules may filter on it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
}

impl Action {
    /// An action without a tool name.
    pub fn new(kind: ActionKind, target: impl Into<String>) -> Self {
        Action {
            kind,
            target: target.into(),
            tool: None,
        }
    }

    /// The same action, attributed to `tool`.
    pub fn with_tool(mut self, tool: impl Into<String>) -> Self {
        self.tool = Some(tool.into());
        self
    }
}
