//! The layered policy: per-kind defaults, named layers of glob rules, and caps.
//!
//! Evaluation is deny-first across the whole stack: a deny in any layer beats an ask in any
//! layer, which beats an allow, which beats the kind's default. Specificity never matters.
//! Caps are evaluated the same way and the strictest verdict wins. [`Policy`] is plain data
//! (it serializes to the policy file format); [`CompiledPolicy`] is the immutable, compiled
//! handle that answers `check`/`explain`. This module never touches the file system.

pub(crate) mod compiled;
pub(crate) mod glob;
mod load;
pub(crate) use load::parse_toml;
mod mode;
pub(crate) mod normalize;
mod turn;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::action::{ActionKind, Effect};

pub use compiled::CompiledPolicy;
pub use mode::PermissionMode;
pub use normalize::{
    InvalidTarget, NormalizedTarget, USERINFO, normalize_network_target, normalize_path_lexically,
};
pub use turn::{After, Limit, TurnAction, TurnHistory, Window, now_us, parse_timestamp_us};

/// One glob rule: actions of `kind` whose target matches `pattern` (and whose tool name matches
/// `tool`, when given) get `effect`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// The action kind this rule governs.
    pub kind: ActionKind,
    /// allow, ask or deny.
    pub effect: Effect,
    /// Glob on the target. `*` matches any run of characters including `/`; `?` one character.
    pub pattern: String,
    /// Optional glob on the tool name; the rule only matches calls from a matching tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// Turn-aware: the rule applies only once the turn has had an allowed action matching
    /// this condition (`after = {kind = "file_read", pattern = ".env"}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<After>,
    /// Turn-aware, allow rules only: past `count` matching actions in the window `per`, the
    /// rule's effect becomes `over` (default ask).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<Limit>,
}

impl Rule {
    /// A rule without a tool filter.
    pub fn new(kind: ActionKind, effect: Effect, pattern: impl Into<String>) -> Self {
        Rule {
            kind,
            effect,
            pattern: pattern.into(),
            tool: None,
            after: None,
            limit: None,
        }
    }

    /// The same rule, applying only after the turn had an allowed `kind` action matching
    /// `pattern`.
    pub fn after(mut self, kind: ActionKind, pattern: impl Into<String>) -> Self {
        self.after = Some(After {
            kind,
            pattern: pattern.into(),
        });
        self
    }

    /// The same rule, limited to `count` matching actions per `per` (then `over`, ask).
    pub fn limit(mut self, limit: Limit) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Whether the rule depends on the turn's history (`after` or `limit`).
    pub fn is_turn_aware(&self) -> bool {
        self.after.is_some() || self.limit.is_some()
    }
}

/// A named group of rules. Layer names appear in verdicts and audit rows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Layer {
    /// The name reported when one of this layer's rules decides.
    pub name: String,
    /// The rules, in order.
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// `false` makes the layer log-only: its rules never change a verdict; what they would
    /// have decided is reported as the verdict's `would` (and in the audit row).
    #[serde(default = "enforced", skip_serializing_if = "is_enforced")]
    pub enforce: bool,
}

fn enforced() -> bool {
    true
}

fn is_enforced(enforce: &bool) -> bool {
    *enforce
}

fn deny() -> Effect {
    Effect::Deny
}

/// Per-kind defaults. A kind left out has no opinion: merged over another policy it inherits
/// that policy's default, and standing alone it is `ask`. `network` is the exception: when it
/// is left out it is `deny` (an old config that made outbound calls stops making them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Defaults {
    /// Default for `file_read`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_read: Option<Effect>,
    /// Default for `file_write`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_write: Option<Effect>,
    /// Default for `shell_command`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shell_command: Option<Effect>,
    /// Default for `network`; `deny` when absent.
    #[serde(default = "deny")]
    pub network: Effect,
    /// Default for `mcp_read`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_read: Option<Effect>,
    /// Default for `mcp_write_or_unknown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_write_or_unknown: Option<Effect>,
    /// Default for `dynamic_skill_tool`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dynamic_skill_tool: Option<Effect>,
    /// Default for `computer_use`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub computer_use: Option<Effect>,
    /// Default for `task_subagent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_subagent: Option<Effect>,
    /// Default for `internal`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub internal: Option<Effect>,
    /// Default for `unknown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown: Option<Effect>,
}

impl Default for Defaults {
    /// No opinion on any kind, and network denied.
    fn default() -> Self {
        Defaults {
            file_read: None,
            file_write: None,
            shell_command: None,
            network: Effect::Deny,
            mcp_read: None,
            mcp_write_or_unknown: None,
            dynamic_skill_tool: None,
            computer_use: None,
            task_subagent: None,
            internal: None,
            unknown: None,
        }
    }
}

impl Defaults {
    /// Every kind set to `effect` (network included).
    pub fn all(effect: Effect) -> Self {
        let mut d = Defaults::default();
        for kind in ActionKind::ALL {
            d.set(kind, effect);
        }
        d
    }

    /// The kind's default, `None` when this policy has no opinion (never `None` for network).
    pub fn get(&self, kind: ActionKind) -> Option<Effect> {
        match kind {
            ActionKind::FileRead => self.file_read,
            ActionKind::FileWrite => self.file_write,
            ActionKind::ShellCommand => self.shell_command,
            ActionKind::Network => Some(self.network),
            ActionKind::McpRead => self.mcp_read,
            ActionKind::McpWriteOrUnknown => self.mcp_write_or_unknown,
            ActionKind::DynamicSkillTool => self.dynamic_skill_tool,
            ActionKind::ComputerUse => self.computer_use,
            ActionKind::TaskSubagent => self.task_subagent,
            ActionKind::Internal => self.internal,
            ActionKind::Unknown => self.unknown,
        }
    }

    /// The default that applies when this policy stands alone: no opinion means `ask`.
    pub fn effective(&self, kind: ActionKind) -> Effect {
        self.get(kind).unwrap_or(Effect::Ask)
    }

    /// Set the kind's default.
    pub fn set(&mut self, kind: ActionKind, effect: Effect) {
        let slot = match kind {
            ActionKind::FileRead => &mut self.file_read,
            ActionKind::FileWrite => &mut self.file_write,
            ActionKind::ShellCommand => &mut self.shell_command,
            ActionKind::Network => {
                self.network = effect;
                return;
            }
            ActionKind::McpRead => &mut self.mcp_read,
            ActionKind::McpWriteOrUnknown => &mut self.mcp_write_or_unknown,
            ActionKind::DynamicSkillTool => &mut self.dynamic_skill_tool,
            ActionKind::ComputerUse => &mut self.computer_use,
            ActionKind::TaskSubagent => &mut self.task_subagent,
            ActionKind::Internal => &mut self.internal,
            ActionKind::Unknown => &mut self.unknown,
        };
        *slot = Some(effect);
    }

    /// Per kind, the stricter of the two; a kind with no opinion on one side takes the other's.
    pub fn tighten(&self, other: &Defaults) -> Defaults {
        let mut out = Defaults::default();
        for kind in ActionKind::ALL {
            match (self.get(kind), other.get(kind)) {
                (Some(a), Some(b)) => out.set(kind, a.stricter(b)),
                (Some(e), None) | (None, Some(e)) => out.set(kind, e),
                (None, None) => {}
            }
        }
        out
    }
}

/// Options for the tiered [`Policy::default`] shape.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TieredOptions {
    /// The test binary's name, allowed for exec beside `rustc` in layer `builtin-exec`.
    pub test_binary: Option<String>,
    /// The configured model provider's host, allowed for network in layer `provider`.
    pub provider_host: Option<String>,
}

/// Layer names of the built-in tiers.
pub mod layers {
    /// Secret files denied for read and write.
    pub const BUILTIN_SECRETS: &str = "builtin-secrets";
    /// Repository files that make code run later, outside any sandbox: writing them asks.
    pub const BUILTIN_PROTECTED: &str = "builtin-protected";
    /// Execs allowed so that verification works.
    pub const BUILTIN_EXEC: &str = "builtin-exec";
    /// The configured model provider's host.
    pub const PROVIDER: &str = "provider";
    /// The layer the builder opens when a rule is added before any `layer(..)` call.
    pub const CUSTOM: &str = "custom";
}

/// The secret files of layer `builtin-secrets`, denied for read and write by
/// [`Policy::default`] and the restricted modes.
///
/// A path pattern is tested against the workspace-relative (or absolute) path and the basename,
/// and deny rules compare case-folded, so `.env` also denies `sub/dir/.env` and `.ENV`. A
/// pattern that names a directory (`.aws/credentials`, `.ssh/*`) is also given with a leading
/// `*/`, so it holds at any depth and outside the workspace (`/home/u/.ssh/config`).
pub const SECRET_PATTERNS: &[&str] = &[
    ".env",
    ".env.*",
    ".envrc",
    "*.pem",
    "*.key",
    "id_rsa",
    "id_ed25519",
    "id_ecdsa",
    "*.p12",
    ".netrc",
    ".npmrc",
    ".pypirc",
    "credentials.json",
    ".aws/credentials",
    "*/.aws/credentials",
    ".ssh/*",
    "*/.ssh/*",
    // Plaintext credential stores of common tools (red team 4 F13).
    ".git-credentials",
    ".docker/config.json",
    "*/.docker/config.json",
    ".kube/config",
    "*/.kube/config",
    "kubeconfig",
    ".vault-token",
    ".pgpass",
    ".my.cnf",
];

/// The files of layer `builtin-protected`, where a write asks in the restricted modes: git runs
/// a repository's hooks, and obeys its config (`core.hooksPath`, `core.fsmonitor`, filters),
/// later and outside any sandbox. The hooks directory itself is listed so it cannot be replaced
/// wholesale; a submodule's hooks and config live under `.git/modules/<name>/`, and a
/// worktree's own config (`config.worktree`) can set the same keys.
pub const PROTECTED_WRITE_PATTERNS: &[&str] = &[
    ".git/hooks",
    ".git/hooks/*",
    "*/.git/hooks",
    "*/.git/hooks/*",
    ".git/config",
    "*/.git/config",
    ".git/modules/*/hooks",
    "*/.git/modules/*/hooks",
    ".git/modules/*/hooks/*",
    "*/.git/modules/*/hooks/*",
    ".git/modules/*/config",
    "*/.git/modules/*/config",
    ".git/config.worktree",
    "*/.git/config.worktree",
    ".git/worktrees/*/config.worktree",
    "*/.git/worktrees/*/config.worktree",
    // `commondir` points git at another directory's config and hooks.
    ".git/commondir",
    "*/.git/commondir",
    ".git/worktrees/*/commondir",
    "*/.git/worktrees/*/commondir",
    // In a linked worktree or a submodule checkout `.git` is a file naming the repository
    // (`gitdir: …`); rewritten, it sends git to a config the command wrote (red team 4 F4).
    // Matched as a path, so a write to the `.git` directory's own name asks too; the
    // sandbox keeps the directory writable (its config and hooks are masked one by one).
    ".git",
    "*/.git",
];

/// A layered policy: plain data in the policy file format. Compile it once with
/// [`Policy::compile`] and evaluate the [`CompiledPolicy`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Optional name. A cap that decides reports it as the verdict's layer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Per-kind defaults.
    #[serde(default)]
    pub defaults: Defaults,
    /// The stack of named layers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layers: Vec<Layer>,
    /// Caps: policies evaluated the same way; the strictest verdict wins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub caps: Vec<Policy>,
}

impl Default for Policy {
    /// The tiered policy: read allowed, write asks, exec asks (`rustc` allowed), network
    /// denied, secrets denied for read and write.
    fn default() -> Self {
        Policy::tiered(&TieredOptions::default())
    }
}

impl Policy {
    /// An empty policy: no rules, no opinion on any kind, network denied.
    pub fn new() -> Self {
        Policy {
            name: None,
            defaults: Defaults::default(),
            layers: Vec::new(),
            caps: Vec::new(),
        }
    }

    /// The tiered policy with a configured test binary and provider host.
    pub fn tiered(options: &TieredOptions) -> Self {
        let mut p = Policy::new();
        p.defaults.set(ActionKind::FileRead, Effect::Allow);
        p.defaults.set(ActionKind::FileWrite, Effect::Ask);
        p.defaults.set(ActionKind::ShellCommand, Effect::Ask);
        p.defaults.set(ActionKind::Network, Effect::Deny);
        p = p.with_builtin_secrets();
        p = p.layer(layers::BUILTIN_EXEC).allow_exec("rustc");
        if let Some(test_binary) = &options.test_binary {
            p = p.allow_exec(test_binary);
        }
        if let Some(host) = &options.provider_host {
            p = p.layer(layers::PROVIDER).allow_net(host);
        }
        p
    }

    /// Add layer `builtin-secrets`: read and write of every [`SECRET_PATTERNS`] file denied.
    pub fn with_builtin_secrets(self) -> Self {
        SECRET_PATTERNS
            .iter()
            .fold(self.layer(layers::BUILTIN_SECRETS), |p, pattern| {
                p.deny_read(*pattern).deny_write(*pattern)
            })
    }

    /// Add layer `builtin-protected`: a write to any [`PROTECTED_WRITE_PATTERNS`] file asks.
    pub fn with_builtin_protected(self) -> Self {
        PROTECTED_WRITE_PATTERNS
            .iter()
            .fold(self.layer(layers::BUILTIN_PROTECTED), |p, pattern| {
                p.ask_write(*pattern)
            })
    }

    /// Enforces nothing: every kind allowed, no rules. Only for callers that pass no policy.
    pub fn permissive() -> Self {
        Policy {
            name: Some("permissive".to_owned()),
            defaults: Defaults::all(Effect::Allow),
            layers: Vec::new(),
            caps: Vec::new(),
        }
    }

    /// Give the policy a name (reported when it decides as a cap).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Set one kind's default.
    pub fn with_default(mut self, kind: ActionKind, effect: Effect) -> Self {
        self.defaults.set(kind, effect);
        self
    }

    /// Open a new layer; the rule builders that follow add to it.
    pub fn layer(mut self, name: impl Into<String>) -> Self {
        self.layers.push(Layer {
            name: name.into(),
            rules: Vec::new(),
            enforce: true,
        });
        self
    }

    /// Open a new log-only layer (`enforce = false`): its rules report what they would have
    /// decided without changing any verdict.
    pub fn log_only_layer(mut self, name: impl Into<String>) -> Self {
        self = self.layer(name);
        if let Some(layer) = self.layers.last_mut() {
            layer.enforce = false;
        }
        self
    }

    /// Whether any rule of this policy or its caps depends on the turn's history.
    pub fn is_turn_aware(&self) -> bool {
        self.layers
            .iter()
            .flat_map(|l| &l.rules)
            .any(Rule::is_turn_aware)
            || self.caps.iter().any(Policy::is_turn_aware)
    }

    /// Whether any layer of this policy or its caps is log-only.
    pub fn has_log_only_layers(&self) -> bool {
        self.layers.iter().any(|l| !l.enforce) || self.caps.iter().any(Policy::has_log_only_layers)
    }

    /// The same policy with every layer enforced (caps too): what the log-only layers would
    /// decide.
    pub fn all_enforced(&self) -> Policy {
        let mut p = self.clone();
        for layer in &mut p.layers {
            layer.enforce = true;
        }
        p.caps = p.caps.iter().map(Policy::all_enforced).collect();
        p
    }

    /// Add a rule to the current (last) layer, opening layer `custom` if there is none.
    pub fn rule(mut self, rule: Rule) -> Self {
        if self.layers.is_empty() {
            self = self.layer(layers::CUSTOM);
        }
        if let Some(layer) = self.layers.last_mut() {
            layer.rules.push(rule);
        }
        self
    }

    /// Add an allow rule for `kind`.
    pub fn allow(self, kind: ActionKind, pattern: impl Into<String>) -> Self {
        self.rule(Rule::new(kind, Effect::Allow, pattern))
    }

    /// Add an ask rule for `kind`.
    pub fn ask(self, kind: ActionKind, pattern: impl Into<String>) -> Self {
        self.rule(Rule::new(kind, Effect::Ask, pattern))
    }

    /// Add a deny rule for `kind`.
    pub fn deny(self, kind: ActionKind, pattern: impl Into<String>) -> Self {
        self.rule(Rule::new(kind, Effect::Deny, pattern))
    }

    /// Allow reading paths matching `pattern`.
    pub fn allow_read(self, pattern: impl Into<String>) -> Self {
        self.allow(ActionKind::FileRead, pattern)
    }
    /// Ask before reading paths matching `pattern`.
    pub fn ask_read(self, pattern: impl Into<String>) -> Self {
        self.ask(ActionKind::FileRead, pattern)
    }
    /// Deny reading paths matching `pattern`.
    pub fn deny_read(self, pattern: impl Into<String>) -> Self {
        self.deny(ActionKind::FileRead, pattern)
    }
    /// Allow writing paths matching `pattern`.
    pub fn allow_write(self, pattern: impl Into<String>) -> Self {
        self.allow(ActionKind::FileWrite, pattern)
    }
    /// Ask before writing paths matching `pattern`.
    pub fn ask_write(self, pattern: impl Into<String>) -> Self {
        self.ask(ActionKind::FileWrite, pattern)
    }
    /// Deny writing paths matching `pattern`.
    pub fn deny_write(self, pattern: impl Into<String>) -> Self {
        self.deny(ActionKind::FileWrite, pattern)
    }
    /// Allow running programs whose basename matches `pattern`.
    pub fn allow_exec(self, pattern: impl Into<String>) -> Self {
        self.allow(ActionKind::ShellCommand, pattern)
    }
    /// Ask before running programs whose basename matches `pattern`.
    pub fn ask_exec(self, pattern: impl Into<String>) -> Self {
        self.ask(ActionKind::ShellCommand, pattern)
    }
    /// Deny running programs whose basename matches `pattern`.
    pub fn deny_exec(self, pattern: impl Into<String>) -> Self {
        self.deny(ActionKind::ShellCommand, pattern)
    }
    /// Allow connecting to `host` (any port) or `host:port` (that port only).
    pub fn allow_net(self, pattern: impl Into<String>) -> Self {
        self.allow(ActionKind::Network, pattern)
    }
    /// Ask before connecting to `host` or `host:port`.
    pub fn ask_net(self, pattern: impl Into<String>) -> Self {
        self.ask(ActionKind::Network, pattern)
    }
    /// Deny connecting to `host` or `host:port`.
    pub fn deny_net(self, pattern: impl Into<String>) -> Self {
        self.deny(ActionKind::Network, pattern)
    }

    /// Compose a peer: layers are concatenated (self's first), caps are concatenated, and for
    /// every kind the stricter default wins. An overlay can add allows but never loosen a
    /// default nor re-allow a deny.
    pub fn merge(mut self, other: Policy) -> Policy {
        self.defaults = self.defaults.tighten(&other.defaults);
        self.layers.extend(other.layers);
        self.caps.extend(other.caps);
        self
    }

    /// Narrow in one direction: `cap` is evaluated beside this policy and the strictest verdict
    /// wins, so the result is at least as strict as both. Child turns are built this way.
    pub fn contain(mut self, cap: Policy) -> Policy {
        self.caps.push(cap);
        self
    }

    /// Compile every glob once into an immutable, shareable handle.
    pub fn compile(&self) -> Result<CompiledPolicy, crate::PolicyError> {
        CompiledPolicy::new(self.clone())
    }
}
