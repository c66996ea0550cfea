//! The UniFFI surface (feature `uniffi`): what Swift (and Kotlin) see. It wraps the facade's
//! handles in UniFFI objects and its records in UniFFI records, and maps the facade's error to
//! one UniFFI error enum. Protocol objects (snapshots, caps, reducer state) cross as JSON text,
//! which each language decodes into its own types. Nothing here decides anything.

use std::sync::Arc;

use serde_json::Value;

use crate::{PolicyHandle, reduce, snapshot};

/// Every failure Swift can see, with the fields a caller can act on. Each message names what
/// was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, uniffi::Error)]
pub enum TurnGateError {
    /// A policy did not parse or compile, or named an unknown kind, effect or mode.
    #[error("{message}")]
    Policy {
        /// The full message.
        message: String,
        /// For a parse error: the failing field path (`.` for the document).
        path: Option<String>,
        /// For a parse error: the 1-based line.
        line: Option<u64>,
        /// For a parse error: the 1-based column.
        column: Option<u64>,
    },
    /// A snapshot could not be resolved, or refuses what was asked of it.
    #[error("{message}")]
    Snapshot {
        /// A stable code (`invalid_path`, `cwd_outside_roots`, ...).
        code: String,
        /// The full message.
        message: String,
    },
    /// The durable store failed.
    #[error("{message}")]
    Store {
        /// The full message.
        message: String,
    },
    /// A sandbox backend is required but unavailable on this platform.
    #[error("{message}")]
    SandboxUnavailable {
        /// The full message.
        message: String,
    },
    /// An argument was malformed; the message names it.
    #[error("{message}")]
    Invalid {
        /// The full message.
        message: String,
    },
}

impl From<crate::TurnGateError> for TurnGateError {
    fn from(e: crate::TurnGateError) -> Self {
        match e {
            crate::TurnGateError::Policy {
                message,
                path,
                line,
                column,
            } => TurnGateError::Policy {
                message,
                path,
                line,
                column,
            },
            crate::TurnGateError::Snapshot { code, message } => {
                TurnGateError::Snapshot { code, message }
            }
            crate::TurnGateError::Store { message } => TurnGateError::Store { message },
            crate::TurnGateError::SandboxUnavailable { message } => {
                TurnGateError::SandboxUnavailable { message }
            }
            other => TurnGateError::Invalid {
                message: other.message().to_owned(),
            },
        }
    }
}

type Result<T> = std::result::Result<T, TurnGateError>;

fn parse(what: &str, text: &str) -> Result<Value> {
    serde_json::from_str(text)
        .map_err(|e| crate::TurnGateError::invalid(what, format!("not valid JSON: {e}")).into())
}

fn parse_opt(what: &str, text: Option<String>) -> Result<Option<Value>> {
    text.map(|t| parse(what, &t)).transpose()
}

/// The effect of an action. The order of strictness is deny > ask > allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum Effect {
    /// The action may proceed.
    Allow,
    /// The action needs a person's approval.
    Ask,
    /// The action is refused.
    Deny,
}

impl From<crate::Effect> for Effect {
    fn from(e: crate::Effect) -> Self {
        match e {
            crate::Effect::Allow => Effect::Allow,
            crate::Effect::Ask => Effect::Ask,
            crate::Effect::Deny => Effect::Deny,
        }
    }
}

impl From<Effect> for crate::Effect {
    fn from(e: Effect) -> Self {
        match e {
            Effect::Allow => crate::Effect::Allow,
            Effect::Ask => crate::Effect::Ask,
            Effect::Deny => crate::Effect::Deny,
        }
    }
}

/// A rule: a kind's wire name, an effect, a glob on the target, an optional glob on the tool.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Rule {
    /// The action kind's wire name.
    pub kind: String,
    /// The effect.
    pub effect: Effect,
    /// The glob on the target.
    pub pattern: String,
    /// The optional glob on the tool name.
    pub tool: Option<String>,
}

impl From<crate::RuleRecord> for Rule {
    fn from(r: crate::RuleRecord) -> Self {
        Rule {
            kind: r.kind,
            effect: r.effect.into(),
            pattern: r.pattern,
            tool: r.tool,
        }
    }
}

/// A verdict: the effect, the deciding rule (none when a default decided), its layer and a
/// machine-readable reason.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Verdict {
    /// The effect enforced.
    pub effect: Effect,
    /// The deciding rule.
    pub rule: Option<Rule>,
    /// The deciding layer (`defaults`, a cap's name, `target`, `shell`, or a layer name).
    pub layer: String,
    /// The machine-readable reason.
    pub reason: String,
}

impl From<crate::VerdictRecord> for Verdict {
    fn from(v: crate::VerdictRecord) -> Self {
        Verdict {
            effect: v.effect.into(),
            rule: v.rule.map(Rule::from),
            layer: v.layer,
            reason: v.reason,
        }
    }
}

/// An action: a kind's wire name, a target and an optional tool name.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Action {
    /// The action kind's wire name.
    pub kind: String,
    /// The target (path, command line, `host:port`, `server/tool`, name).
    pub target: String,
    /// The optional tool name.
    pub tool: Option<String>,
}

/// A compiled policy: immutable, shareable across threads, compiled exactly once.
#[derive(Debug, uniffi::Object)]
pub struct Policy {
    handle: Arc<PolicyHandle>,
}

fn wrap(
    handle: std::result::Result<Arc<PolicyHandle>, crate::TurnGateError>,
) -> Result<Arc<Policy>> {
    Ok(Arc::new(Policy { handle: handle? }))
}

#[uniffi::export]
impl Policy {
    /// Parse a policy file's JSON text; `origin` (a file name) is quoted in errors.
    #[uniffi::constructor]
    pub fn from_json(text: String, origin: Option<String>) -> Result<Arc<Self>> {
        wrap(PolicyHandle::from_json(&text, origin.as_deref()))
    }

    /// Parse a policy file's TOML text.
    #[uniffi::constructor]
    pub fn from_toml(text: String, origin: Option<String>) -> Result<Arc<Self>> {
        wrap(PolicyHandle::from_toml(&text, origin.as_deref()))
    }

    /// Read a `.json` or `.toml` policy file.
    #[uniffi::constructor]
    pub fn from_file(path: String) -> Result<Arc<Self>> {
        wrap(PolicyHandle::from_file(&path))
    }

    /// The compiled policy of a permission mode (`full_access`, `auto_accept_edits`,
    /// `supervised`).
    #[uniffi::constructor]
    pub fn from_mode(mode: String) -> Result<Arc<Self>> {
        wrap(PolicyHandle::from_mode(&mode))
    }

    /// The tiered `Policy::default()`, optionally allowing a test binary and a provider host.
    #[uniffi::constructor]
    pub fn tiered(test_binary: Option<String>, provider_host: Option<String>) -> Result<Arc<Self>> {
        wrap(PolicyHandle::default_tiered(test_binary, provider_host))
    }

    /// `Policy::permissive()`: enforces nothing.
    #[uniffi::constructor]
    pub fn permissive() -> Result<Arc<Self>> {
        wrap(PolicyHandle::permissive())
    }

    /// An empty policy (a standalone policy asks; network is denied).
    #[uniffi::constructor]
    pub fn empty() -> Result<Arc<Self>> {
        wrap(PolicyHandle::empty())
    }

    /// `merge`: `other` composed as a peer over this policy.
    pub fn merge(&self, other: Arc<Policy>) -> Result<Arc<Policy>> {
        wrap(self.handle.merge(&other.handle))
    }

    /// `contain`: `cap` added as a cap (at least as strict as both).
    pub fn contain(&self, cap: Arc<Policy>) -> Result<Arc<Policy>> {
        wrap(self.handle.contain(&cap.handle))
    }

    /// A new policy with one more rule in the current layer, or in a new layer `layer`.
    pub fn with_rule(
        &self,
        kind: String,
        effect: Effect,
        pattern: String,
        tool: Option<String>,
        layer: Option<String>,
    ) -> Result<Arc<Policy>> {
        let effect = crate::Effect::from(effect).as_str();
        wrap(
            self.handle
                .with_rule(&kind, effect, &pattern, tool.as_deref(), layer.as_deref()),
        )
    }

    /// A new policy with `kind`'s default set to `effect`.
    pub fn with_default(&self, kind: String, effect: Effect) -> Result<Arc<Policy>> {
        wrap(
            self.handle
                .with_default(&kind, crate::Effect::from(effect).as_str()),
        )
    }

    /// A new policy with its name set (a cap reports it as its layer).
    pub fn named(&self, name: String) -> Result<Arc<Policy>> {
        wrap(self.handle.named(&name))
    }

    /// The effect of an action: exactly `explain(..).effect`.
    pub fn check(&self, kind: String, target: String, tool: Option<String>) -> Result<Effect> {
        Ok(self.handle.check(&kind, &target, tool.as_deref())?.into())
    }

    /// The verdict of an action.
    pub fn explain(&self, kind: String, target: String, tool: Option<String>) -> Result<Verdict> {
        Ok(self.handle.explain(&kind, &target, tool.as_deref())?.into())
    }

    /// The effects of many actions, in order (one call across the boundary).
    pub fn check_batch(&self, actions: Vec<Action>) -> Result<Vec<Effect>> {
        let actions: Vec<crate::ActionRecord> = actions
            .into_iter()
            .map(|a| crate::ActionRecord {
                kind: a.kind,
                target: a.target,
                tool: a.tool,
            })
            .collect();
        Ok(self
            .handle
            .check_batch(&actions)?
            .into_iter()
            .map(Effect::from)
            .collect())
    }

    /// The policy in the policy-file JSON format.
    pub fn to_json(&self) -> String {
        self.handle.to_json()
    }

    /// The policy in the policy-file TOML format.
    pub fn to_toml(&self) -> Result<String> {
        Ok(self.handle.to_toml()?)
    }
}

impl Policy {
    /// The facade handle (for the gate and broker wrappers).
    pub fn handle(&self) -> &Arc<PolicyHandle> {
        &self.handle
    }
}

/// The version of turngate.
#[uniffi::export]
pub fn turngate_version() -> String {
    crate::version().to_owned()
}

/// `resolve(selection, context, cap)`: `TurnPermissionProfileSelection` JSON (none for the
/// default full-access profile), `ResolveContext` JSON and optional `TaskAgentSecurityCap`
/// JSON, to the `TurnExecutionSecuritySnapshot` JSON.
#[uniffi::export]
pub fn resolve_snapshot(
    selection: Option<String>,
    context: String,
    cap: Option<String>,
) -> Result<String> {
    Ok(snapshot::resolve_json(
        selection.as_deref(),
        &context,
        cap.as_deref(),
    )?)
}

/// `intersect(snapshot, cap)`: the snapshot narrowed by a cap (JSON in, JSON out).
#[uniffi::export]
pub fn intersect_snapshot(snapshot: String, cap: String) -> Result<String> {
    let s = snapshot::intersect(parse("snapshot", &snapshot)?, parse("cap", &cap)?)?;
    Ok(s.to_string())
}

/// `cap_from_parent(snapshot, origin)`: the cap a child of `snapshot` receives (`origin` is
/// `parent_turn` or `task_policy`).
#[uniffi::export]
pub fn cap_from_parent(snapshot: String, origin: String) -> Result<String> {
    Ok(snapshot::cap_from_parent(parse("snapshot", &snapshot)?, &origin)?.to_string())
}

/// Throws when a native shell may not run under `snapshot` (a provider-native backend, or a
/// required sandbox that is unavailable).
#[uniffi::export]
pub fn ensure_native_shell_allowed(snapshot: String) -> Result<()> {
    Ok(snapshot::ensure_native_shell_allowed(parse(
        "snapshot", &snapshot,
    )?)?)
}

/// The system-prompt permissions section for a `TurnPermissionProfileSnapshot` (JSON), or none.
#[uniffi::export]
pub fn render_permissions_section(profile: String) -> Result<Option<String>> {
    Ok(snapshot::render_permissions_section(parse(
        "profile", &profile,
    )?)?)
}

/// How a CLI runtime (`codex`, `claude`) is driven in a mode (`CliRuntimeMapping` JSON).
#[uniffi::export]
pub fn map_cli_runtime(runtime: String, mode: String) -> Result<String> {
    Ok(snapshot::map_cli_runtime(&runtime, &mode)?.to_string())
}

/// The probed `PlatformCapabilities` of this machine (JSON).
#[uniffi::export]
pub fn probe_platform() -> Result<String> {
    Ok(snapshot::probe_platform()?.to_string())
}

/// The JSON Schema of one protocol type, by its type name.
#[uniffi::export]
pub fn schema(name: String) -> Result<String> {
    Ok(snapshot::schema(&name)?.to_string())
}

/// Apply one reducer input (JSON) to a `ClientState` (JSON; none for the empty state).
#[uniffi::export]
pub fn reduce(state: Option<String>, input: String) -> Result<String> {
    let state = parse_opt("state", state)?;
    Ok(reduce::reduce(state, parse("input", &input)?)?.to_string())
}

/// Apply a JSON list of reducer inputs in order from `state` (none for the empty state).
#[uniffi::export]
pub fn reduce_all(state: Option<String>, inputs: String) -> Result<String> {
    let state = parse_opt("state", state)?;
    Ok(reduce::reduce_all(state, parse("inputs", &inputs)?)?.to_string())
}

/// The normalized `ApprovalScope` of an action (JSON).
#[uniffi::export]
pub fn scope_from_action(
    kind: String,
    target: String,
    tool: Option<String>,
    cwd: Option<String>,
) -> Result<String> {
    Ok(reduce::scope_from_action(&kind, &target, tool.as_deref(), cwd.as_deref())?.to_string())
}

/// The `scope_hash` of an `ApprovalScope` (JSON).
#[uniffi::export]
pub fn scope_hash(scope: String) -> Result<String> {
    Ok(reduce::scope_hash(parse("scope", &scope)?)?)
}
