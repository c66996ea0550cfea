//! The compiled policy handle: load, compose, and evaluate. Evaluation is `turngate`'s one
//! function (`CompiledPolicy::explain_parts`); this module only converts names and records.

use std::sync::Arc;

use turngate::policy::TieredOptions;
use turngate::{ActionKind, CompiledPolicy, Effect, PermissionMode, Policy, Rule, Verdict};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::TurnGateError;

/// One rule as it crosses the FFI boundary (`Rule` in every language).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record), uniffi(name = "Rule"))]
pub struct RuleRecord {
    /// The action kind's wire name.
    pub kind: String,
    /// `allow`, `ask` or `deny`.
    pub effect: Effect,
    /// The glob on the target.
    pub pattern: String,
    /// The optional glob on the tool name.
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default = None))]
    pub tool: Option<String>,
}

impl From<&Rule> for RuleRecord {
    fn from(r: &Rule) -> Self {
        RuleRecord {
            kind: r.kind.as_str().to_owned(),
            effect: r.effect,
            pattern: r.pattern.clone(),
            tool: r.tool.clone(),
        }
    }
}

/// A verdict as it crosses the FFI boundary: `turngate::Verdict` with owned strings
/// (`Verdict` in every language).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record), uniffi(name = "Verdict"))]
pub struct VerdictRecord {
    /// The effect enforced.
    pub effect: Effect,
    /// The deciding rule, or none when a default decided.
    pub rule: Option<RuleRecord>,
    /// The deciding layer (`defaults`, a cap's name, `target`, `shell`, or a layer name).
    pub layer: String,
    /// The machine-readable reason (`deny_rule`, `default`, ...).
    pub reason: String,
}

impl From<Verdict> for VerdictRecord {
    fn from(v: Verdict) -> Self {
        VerdictRecord {
            effect: v.effect,
            rule: v.rule.as_deref().map(RuleRecord::from),
            layer: v.layer.to_string(),
            reason: v.reason.as_str().to_owned(),
        }
    }
}

/// One action: a kind, a target, an optional tool (`Action` in every language).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "uniffi", derive(uniffi::Record), uniffi(name = "Action"))]
pub struct ActionRecord {
    /// The action kind's wire name.
    pub kind: String,
    /// The target (path, command line, `host:port`, `server/tool`, name).
    pub target: String,
    /// The optional tool name.
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default = None))]
    pub tool: Option<String>,
}

impl From<turngate::Action> for ActionRecord {
    fn from(a: turngate::Action) -> Self {
        ActionRecord {
            kind: a.kind.as_str().to_owned(),
            target: a.target,
            tool: a.tool,
        }
    }
}

impl ActionRecord {
    /// The core action; an unknown kind fails, naming `what`.
    pub fn to_core(&self, what: &str) -> Result<turngate::Action, TurnGateError> {
        Ok(turngate::Action {
            kind: parse_kind(&self.kind)
                .map_err(|e| TurnGateError::invalid(&format!("{what}.kind"), e.message()))?,
            target: self.target.clone(),
            tool: self.tool.clone(),
        })
    }
}

/// Parse an action kind's wire name.
pub fn parse_kind(kind: &str) -> Result<ActionKind, TurnGateError> {
    Ok(kind.parse::<ActionKind>()?)
}

/// Parse an effect (`allow`, `ask`, `deny`).
pub fn parse_effect(effect: &str) -> Result<Effect, TurnGateError> {
    Ok(effect.parse::<Effect>()?)
}

/// A compiled policy: immutable, shareable across threads, compiled exactly once.
#[derive(Debug)]
pub struct PolicyHandle {
    compiled: Arc<CompiledPolicy>,
}

impl PolicyHandle {
    /// Compile `policy` into a handle.
    pub fn new(policy: Policy) -> Result<Arc<Self>, TurnGateError> {
        Ok(Arc::new(PolicyHandle {
            compiled: Arc::new(CompiledPolicy::new(policy)?),
        }))
    }

    /// An empty policy: no rules, no opinion on any kind (a standalone policy asks), network
    /// denied.
    pub fn empty() -> Result<Arc<Self>, TurnGateError> {
        Self::new(Policy::new())
    }

    /// Parse a policy file's JSON text. `origin` (a file name) is quoted in errors.
    pub fn from_json(text: &str, origin: Option<&str>) -> Result<Arc<Self>, TurnGateError> {
        Self::new(Policy::from_json_str(text, origin)?)
    }

    /// Parse a policy file's TOML text.
    pub fn from_toml(text: &str, origin: Option<&str>) -> Result<Arc<Self>, TurnGateError> {
        Self::new(Policy::from_toml_str(text, origin)?)
    }

    /// A policy from an already-parsed JSON value (a binding's dict).
    pub fn from_json_value(value: serde_json::Value) -> Result<Arc<Self>, TurnGateError> {
        Self::new(Policy::from_json_value(value)?)
    }

    /// Read a `.json` or `.toml` policy file.
    pub fn from_file(path: &str) -> Result<Arc<Self>, TurnGateError> {
        Self::new(Policy::from_path(path)?)
    }

    /// The compiled policy of a permission mode (`full_access`, `auto_accept_edits`,
    /// `supervised`).
    pub fn from_mode(mode: &str) -> Result<Arc<Self>, TurnGateError> {
        Self::new(mode.parse::<PermissionMode>()?.policy())
    }

    /// The tiered policy (`Policy::tiered`, named `tiered` in every language), optionally with
    /// a test binary allowed for exec and a provider host allowed for network.
    pub fn tiered(
        test_binary: Option<String>,
        provider_host: Option<String>,
    ) -> Result<Arc<Self>, TurnGateError> {
        Self::new(Policy::tiered(&TieredOptions {
            test_binary,
            provider_host,
        }))
    }

    /// `Policy::permissive()`: enforces nothing.
    pub fn permissive() -> Result<Arc<Self>, TurnGateError> {
        Self::new(Policy::permissive())
    }

    /// The policy this handle was compiled from.
    pub fn policy(&self) -> &Policy {
        self.compiled.policy()
    }

    /// The compiled policy (for bindings that hand it to other core functions).
    pub fn compiled(&self) -> &CompiledPolicy {
        &self.compiled
    }

    /// The shared compiled policy (the broker holds one).
    pub fn compiled_arc(&self) -> Arc<CompiledPolicy> {
        Arc::clone(&self.compiled)
    }

    /// `merge`: `other` composed as a peer over this policy (a new handle).
    pub fn merge(&self, other: &PolicyHandle) -> Result<Arc<Self>, TurnGateError> {
        Self::new(self.policy().clone().merge(other.policy().clone()))
    }

    /// `contain`: `cap` added as a cap (a new handle, at least as strict as both).
    pub fn contain(&self, cap: &PolicyHandle) -> Result<Arc<Self>, TurnGateError> {
        Self::new(self.policy().clone().contain(cap.policy().clone()))
    }

    /// A new handle with one more rule in the current (last) layer, or in a new layer `layer`
    /// when given.
    pub fn with_rule(
        &self,
        kind: &str,
        effect: &str,
        pattern: &str,
        tool: Option<&str>,
        layer: Option<&str>,
    ) -> Result<Arc<Self>, TurnGateError> {
        let mut policy = self.policy().clone();
        if let Some(layer) = layer {
            policy = policy.layer(layer);
        }
        let mut rule = Rule::new(parse_kind(kind)?, parse_effect(effect)?, pattern);
        rule.tool = tool.map(str::to_owned);
        Self::new(policy.rule(rule))
    }

    /// A new handle with a new, empty layer `name` that later rules go to.
    pub fn with_layer(&self, name: &str) -> Result<Arc<Self>, TurnGateError> {
        Self::new(self.policy().clone().layer(name))
    }

    /// A new handle with `kind`'s default set to `effect`.
    pub fn with_default(&self, kind: &str, effect: &str) -> Result<Arc<Self>, TurnGateError> {
        Self::new(
            self.policy()
                .clone()
                .with_default(parse_kind(kind)?, parse_effect(effect)?),
        )
    }

    /// A new handle with the policy's name set (a cap reports it as its layer).
    pub fn named(&self, name: &str) -> Result<Arc<Self>, TurnGateError> {
        Self::new(self.policy().clone().named(name))
    }

    /// The effect of an action whose kind is already parsed (the hot path).
    pub fn check_kind(&self, kind: ActionKind, target: &str, tool: Option<&str>) -> Effect {
        self.compiled.explain_parts(kind, target, tool).effect
    }

    /// The effect of an action: exactly `explain(..).effect`.
    pub fn check(
        &self,
        kind: &str,
        target: &str,
        tool: Option<&str>,
    ) -> Result<Effect, TurnGateError> {
        Ok(self.check_kind(parse_kind(kind)?, target, tool))
    }

    /// The lint findings of this policy (`turngate lint`), as a list of `LintFinding`.
    pub fn lint(&self) -> Result<serde_json::Value, TurnGateError> {
        crate::convert::to_value("findings", &turngate::tooling::lint(self.policy()))
    }

    /// The full verdict (with `condition` and `would`) of an action in a turn whose earlier
    /// allowed actions are `history` (`[{"kind", "target", "tool"?, "seconds_ago"?}]`, oldest
    /// first, timed before now).
    pub fn explain_in_turn(
        &self,
        kind: &str,
        target: &str,
        tool: Option<&str>,
        history: serde_json::Value,
    ) -> Result<serde_json::Value, TurnGateError> {
        let history: Vec<turngate::tooling::HistoryAction> =
            crate::convert::from_value("history", history)?;
        let turn = turngate::tooling::history_at(&history, turngate::policy::now_us());
        let action = turngate::Action {
            kind: parse_kind(kind)?,
            target: target.to_owned(),
            tool: tool.map(str::to_owned),
        };
        crate::convert::to_value("verdict", &self.compiled.explain_in_turn(&action, &turn))
    }

    /// Replay recorded audit `events` (a list of `TurnPermissionAuditEvent`) under this policy
    /// as a candidate: the `ReplayReport` of the decisions that flip. `options` is a
    /// `ReplayOptions` (`{"turn"?, "since"?, "workspace"?}`) or null.
    pub fn replay_events(
        &self,
        events: serde_json::Value,
        options: serde_json::Value,
    ) -> Result<serde_json::Value, TurnGateError> {
        let events: Vec<turngate::audit::TurnPermissionAuditEvent> =
            crate::convert::from_value("events", events)?;
        let options = replay_options(options)?;
        let report = turngate::tooling::replay_events(&events, &self.compiled, &options);
        crate::convert::to_value("report", &report)
    }

    /// The verdict of an action: effect, deciding rule and layer, reason.
    pub fn explain(
        &self,
        kind: &str,
        target: &str,
        tool: Option<&str>,
    ) -> Result<VerdictRecord, TurnGateError> {
        Ok(self
            .compiled
            .explain_parts(parse_kind(kind)?, target, tool)
            .into())
    }

    /// The effects of many actions, in order. An unknown kind fails the whole batch, naming the
    /// action's index.
    pub fn check_batch(&self, actions: &[ActionRecord]) -> Result<Vec<Effect>, TurnGateError> {
        actions
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let kind = parse_kind(&a.kind).map_err(|e| {
                    TurnGateError::invalid(&format!("actions[{i}].kind"), e.message())
                })?;
                Ok(self.check_kind(kind, &a.target, a.tool.as_deref()))
            })
            .collect()
    }

    /// The policy in the policy-file JSON format.
    pub fn to_json(&self) -> String {
        self.policy().to_json_string()
    }

    /// The policy in the policy-file TOML format.
    pub fn to_toml(&self) -> Result<String, TurnGateError> {
        Ok(self.policy().to_toml_string()?)
    }

    /// The policy as a JSON value (a binding's dict).
    pub fn to_json_value(&self) -> Result<serde_json::Value, TurnGateError> {
        serde_json::to_value(self.policy()).map_err(|e| TurnGateError::invalid("policy", e))
    }
}

/// `ReplayOptions` from JSON (null: replay everything).
pub fn replay_options(
    options: serde_json::Value,
) -> Result<turngate::tooling::ReplayOptions, TurnGateError> {
    if options.is_null() {
        return Ok(turngate::tooling::ReplayOptions::default());
    }
    crate::convert::from_value("options", options)
}
