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
    /// An approval could not be opened or resolved (an unknown request, a closed broker).
    #[error("{message}")]
    Approval {
        /// The full message, naming the request.
        message: String,
    },
    /// A command could not be run; nothing ran unconfined.
    #[error("{message}")]
    Run {
        /// The full message, naming the program.
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
            crate::TurnGateError::Approval { message } => TurnGateError::Approval { message },
            crate::TurnGateError::Run { message } => TurnGateError::Run { message },
            other => TurnGateError::Invalid {
                message: other.message().to_owned(),
            },
        }
    }
}

/// A foreign approver that threw something other than a `TurnGateError`.
impl From<uniffi::UnexpectedUniFFICallbackError> for TurnGateError {
    fn from(e: uniffi::UnexpectedUniFFICallbackError) -> Self {
        TurnGateError::Approval { message: e.reason }
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

    /// The hot path without the record machinery: `check(kind, target)` with no tool, as a
    /// code (0 allow, 1 ask, 2 deny). A plain integer crosses UniFFI without a buffer, where an
    /// enum and an optional string each need one; the Swift layer maps it back to `Effect`.
    pub fn effect_code(&self, kind: String, target: String) -> Result<u8> {
        Ok(match self.handle.check(&kind, &target, None)? {
            crate::Effect::Allow => 0,
            crate::Effect::Ask => 1,
            crate::Effect::Deny => 2,
        })
    }

    /// The lint findings (`turngate lint`), as a JSON list of `LintFinding`
    /// (`{"code", "severity", "path", "layer", "rule", "by"?, "message"}`).
    pub fn lint(&self) -> Result<String> {
        Ok(self.handle.lint()?.to_string())
    }

    /// The full verdict (JSON, with `condition` and `would` when they apply) of an action in a
    /// turn whose earlier allowed actions are `history` (a JSON list of `{"kind", "target",
    /// "tool"?, "seconds_ago"?}`, oldest first).
    pub fn explain_in_turn(
        &self,
        kind: String,
        target: String,
        tool: Option<String>,
        history: String,
    ) -> Result<String> {
        let history = parse("history", &history)?;
        Ok(self
            .handle
            .explain_in_turn(&kind, &target, tool.as_deref(), history)?
            .to_string())
    }

    /// Replay recorded audit events (a JSON list of `TurnPermissionAuditEvent`) with this
    /// policy as the candidate: the JSON `ReplayReport` (`{"decisions", "flips"}`). `options`
    /// is a JSON `ReplayOptions` (`{"turn"?, "since"?, "workspace"?}`).
    pub fn replay_events(&self, events: String, options: Option<String>) -> Result<String> {
        let events = parse("events", &events)?;
        let options = parse_opt("options", options)?.unwrap_or(Value::Null);
        Ok(self.handle.replay_events(events, options)?.to_string())
    }

    /// The verdict of an action.
    pub fn explain(&self, kind: String, target: String, tool: Option<String>) -> Result<Verdict> {
        Ok(self.handle.explain(&kind, &target, tool.as_deref())?.into())
    }

    /// The verdict as one string of `\u{1f}`-separated fields `effect, layer, reason[, rule
    /// kind, rule effect, rule pattern[, rule tool]]`, or `""` when a field holds the
    /// separator (then call `explain`). The Swift layer's `explain(_:_:tool:)` builds the
    /// `Verdict` from it: one plain string lifts faster than the record (or an optional).
    pub fn explain_flat(
        &self,
        kind: String,
        target: String,
        tool: Option<String>,
    ) -> Result<String> {
        Ok(self
            .handle
            .explain_flat(&kind, &target, tool.as_deref())?
            .unwrap_or_default())
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

// ---- gate, approver, broker, store -----------------------------------------------------------

/// One tool call presented to the gate.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Invocation {
    /// The action kind's wire name.
    pub kind: String,
    /// The target (path, command line, URL or `host:port`, `server/tool`, name).
    pub target: String,
    /// The tool's name.
    #[uniffi(default = None)]
    pub tool: Option<String>,
    /// The turn item id (audit rows).
    #[uniffi(default = None)]
    pub item_id: Option<String>,
    /// The tool call id (audit rows).
    #[uniffi(default = None)]
    pub tool_id: Option<String>,
    /// For shell commands: the working directory.
    #[uniffi(default = None)]
    pub cwd: Option<String>,
}

impl From<Invocation> for crate::InvocationRecord {
    fn from(i: Invocation) -> Self {
        crate::InvocationRecord {
            kind: i.kind,
            target: i.target,
            tool: i.tool,
            item_id: i.item_id,
            tool_id: i.tool_id,
            cwd: i.cwd,
        }
    }
}

/// A refusal, shaped as a tool result the model can adapt to.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Denial {
    /// The refused action.
    pub action: Action,
    /// Why, in words.
    pub reason: String,
    /// The verdict behind it, when the policy denied.
    pub verdict: Option<Verdict>,
    /// The text to hand the model as the tool's result.
    pub tool_result: String,
}

impl From<crate::DenialRecord> for Denial {
    fn from(d: crate::DenialRecord) -> Self {
        Denial {
            action: Action {
                kind: d.kind,
                target: d.target,
                tool: d.tool,
            },
            reason: d.reason,
            verdict: d.verdict.map(Verdict::from),
            tool_result: d.tool_result,
        }
    }
}

/// What the gate decided for one call.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum Authorization {
    /// Run the action (the one evaluated, or the approver's modified one, re-checked).
    Allowed {
        /// The action to run (canonical target).
        action: Action,
        /// The verdict that allowed it (for an approved ask: the ask verdict).
        verdict: Verdict,
        /// True when an `allow_for_turn` grant answered without a prompt.
        cached_approval: bool,
        /// Remembered rules that passed the re-check (for the caller to persist).
        remember: Vec<Rule>,
    },
    /// Refused.
    Denied {
        /// The refusal.
        denial: Denial,
    },
    /// Deferred: the `TurnPermissionApprovalRequest` (JSON) is persisted in the store.
    Deferred {
        /// The request, exactly as shown.
        request: String,
    },
}

impl From<crate::AuthorizationRecord> for Authorization {
    fn from(a: crate::AuthorizationRecord) -> Self {
        match a {
            crate::AuthorizationRecord::Allowed {
                kind,
                target,
                tool,
                verdict,
                cached_approval,
                remember,
            } => Authorization::Allowed {
                action: Action { kind, target, tool },
                verdict: verdict.into(),
                cached_approval,
                remember: remember.into_iter().map(Rule::from).collect(),
            },
            crate::AuthorizationRecord::Denied(d) => Authorization::Denied { denial: d.into() },
            crate::AuthorizationRecord::Deferred { request, .. } => Authorization::Deferred {
                request: request.to_string(),
            },
        }
    }
}

/// An ask, as an approver sees it.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ApprovalAsk {
    /// The request id.
    pub request_id: String,
    /// The turn id.
    pub turn_id: String,
    /// The normalized scope's hash.
    pub scope_hash: String,
    /// The action that runs when approved.
    pub action: Action,
    /// The ask verdict's reason (`ask_rule`, `default`, ...).
    pub reason: String,
    /// The `TurnPermissionApprovalRequest` exactly as shown (JSON).
    pub request: String,
}

fn text_of(v: &Value, path: &[&str]) -> String {
    path.iter()
        .try_fold(v, |v, k| v.get(k))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

impl ApprovalAsk {
    fn from_context(ctx: &Value) -> Self {
        let tool = ctx
            .get("action")
            .and_then(|a| a.get("tool"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        ApprovalAsk {
            request_id: text_of(ctx, &["request", "id"]),
            turn_id: text_of(ctx, &["request", "turn_id"]),
            scope_hash: text_of(ctx, &["request", "scope_hash"]),
            action: Action {
                kind: text_of(ctx, &["action", "kind"]),
                target: text_of(ctx, &["action", "target"]),
                tool,
            },
            reason: text_of(ctx, &["verdict", "reason"]),
            request: ctx.get("request").cloned().unwrap_or_default().to_string(),
        }
    }
}

/// An approver's answer. Whatever it says, the gate re-checks it against the policy.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum Decision {
    /// Run the action, or `modified` instead; remember `remember` for the run.
    Approve {
        /// A rewritten action to run instead.
        modified: Option<Action>,
        /// Rules to remember for the rest of the run.
        remember: Vec<Rule>,
    },
    /// Refuse, with a reason the model can adapt to.
    Deny {
        /// Why.
        reason: String,
    },
    /// Persist the request and pause.
    Defer,
}

impl From<Decision> for crate::DecisionRecord {
    fn from(d: Decision) -> Self {
        let rule = |r: Rule| crate::RuleRecord {
            kind: r.kind,
            effect: r.effect.into(),
            pattern: r.pattern,
            tool: r.tool,
        };
        match d {
            Decision::Approve { modified, remember } => crate::DecisionRecord::Approve {
                modified: modified.map(|a| crate::ActionRecord {
                    kind: a.kind,
                    target: a.target,
                    tool: a.tool,
                }),
                remember: remember.into_iter().map(rule).collect(),
            },
            Decision::Deny { reason } => crate::DecisionRecord::Deny { reason },
            Decision::Defer => crate::DecisionRecord::Defer,
        }
    }
}

/// The approver, implemented in Swift as an `async` method. It may never answer (the run stays
/// pending, other turns go on); a thrown error is a denial carrying its text.
#[uniffi::export(with_foreign)]
#[async_trait::async_trait]
pub trait Approver: Send + Sync {
    /// Decide one ask.
    async fn decide(&self, ask: ApprovalAsk) -> Result<Decision>;
}

struct ForeignBridge(Arc<dyn Approver>);

impl crate::ForeignApprover for ForeignBridge {
    fn decide(&self, request: Value) -> crate::ForeignDecisionFuture {
        let inner = Arc::clone(&self.0);
        let ask = ApprovalAsk::from_context(&request);
        Box::pin(async move {
            inner
                .decide(ask)
                .await
                .map(crate::DecisionRecord::from)
                .map_err(|e| e.to_string())
        })
    }
}

/// Which approver a gate asks: a Swift one, a built-in, or a broker.
#[derive(Debug, uniffi::Object)]
pub struct GateApprover {
    handle: crate::ApproverHandle,
}

#[uniffi::export]
impl GateApprover {
    /// A foreign (Swift) approver.
    #[uniffi::constructor]
    pub fn foreign(approver: Arc<dyn Approver>) -> Arc<Self> {
        Arc::new(GateApprover {
            handle: crate::ApproverHandle::foreign(Arc::new(ForeignBridge(approver))),
        })
    }

    /// A built-in approver: `approve_all`, `deny_all` or `defer_all`.
    #[uniffi::constructor]
    pub fn builtin(name: String) -> Result<Arc<Self>> {
        Ok(Arc::new(GateApprover {
            handle: crate::ApproverHandle::builtin(&name)?,
        }))
    }

    /// Route asks to `broker` (a UI answers with `respond`); each request expires after
    /// `timeout_ms` when given.
    #[uniffi::constructor]
    pub fn broker(broker: Arc<Broker>, timeout_ms: Option<u64>) -> Arc<Self> {
        Arc::new(GateApprover {
            handle: crate::ApproverHandle::broker(&broker.handle, timeout_ms),
        })
    }
}

/// The durable audit and approval store (SQLite).
#[derive(Debug, uniffi::Object)]
pub struct Store {
    handle: Arc<crate::StoreHandle>,
}

#[uniffi::export]
impl Store {
    /// Open (creating if needed) the store at `path`.
    #[uniffi::constructor]
    pub fn open(path: String) -> Result<Arc<Self>> {
        Ok(Arc::new(Store {
            handle: crate::StoreHandle::open(&path)?,
        }))
    }

    /// The events of `turn_id` in seq order (JSON list of `TurnPermissionAuditEvent`).
    pub fn replay(&self, turn_id: String) -> Result<String> {
        Ok(self.handle.replay(&turn_id)?.to_string())
    }

    /// Re-decide every recorded decision under `policy` as a candidate (`turngate replay`):
    /// the JSON `ReplayReport` of the decisions that flip. `options` is a JSON `ReplayOptions`
    /// (`{"turn"?, "since"?, "workspace"?}`). The Swift layer names it `replay(_:options:)`.
    pub fn replay_policy(&self, policy: Arc<Policy>, options: Option<String>) -> Result<String> {
        let options = parse_opt("options", options)?.unwrap_or(Value::Null);
        Ok(self
            .handle
            .replay_policy(policy.handle(), options)?
            .to_string())
    }

    /// Every turn id with events, oldest first.
    pub fn turns(&self) -> Result<Vec<String>> {
        Ok(self.handle.turns()?)
    }

    /// Every stored approval without a resolution (JSON list of `{"request", "action"}`).
    pub fn pending_approvals(&self) -> Result<String> {
        Ok(self.handle.pending_approvals()?.to_string())
    }
}

/// What `respond` did.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct RespondOutcome {
    /// The recorded `ApprovalOutcome` (JSON): this response's, or the earlier one that won.
    pub outcome: String,
    /// True when this response is the one recorded.
    pub applied: bool,
}

/// The approval broker a UI answers through.
#[derive(Debug, uniffi::Object)]
pub struct Broker {
    handle: Arc<crate::BrokerHandle>,
}

#[uniffi::export]
impl Broker {
    /// A broker that re-checks allows against `policy`.
    #[uniffi::constructor]
    pub fn new(policy: Arc<Policy>) -> Arc<Self> {
        Arc::new(Broker {
            handle: crate::BrokerHandle::new(&policy.handle),
        })
    }

    /// Subscribe to the `requested`/`resolved` notifications.
    pub fn subscribe(&self) -> Arc<Subscription> {
        Arc::new(Subscription {
            handle: self.handle.subscribe(),
        })
    }

    /// Resolve request `id` with `allow_once`, `allow_for_turn`, `deny`, `cancelled` or
    /// `expired`. The first resolution wins.
    pub fn respond(&self, id: String, resolution: String) -> Result<RespondOutcome> {
        let r = self.handle.respond(&id, &resolution)?;
        Ok(RespondOutcome {
            outcome: r.outcome.to_string(),
            applied: r.applied,
        })
    }

    /// The open requests (JSON list of `TurnPermissionApprovalRequest`).
    pub fn pending_requests(&self) -> Result<String> {
        Ok(self.handle.pending_requests()?.to_string())
    }

    /// Whether `turn_id` holds an `allow_for_turn` grant for `scope_hash`.
    pub fn has_grant(&self, turn_id: String, scope_hash: String) -> bool {
        self.handle.has_grant(&turn_id, &scope_hash)
    }

    /// Close the broker: pending requests are cancelled, subscriptions end.
    pub fn close(&self) {
        self.handle.close();
    }
}

/// A notification subscription; releasing it cancels it.
#[derive(Debug, uniffi::Object)]
pub struct Subscription {
    handle: crate::SubscriptionHandle,
}

#[uniffi::export(async_runtime = "tokio")]
impl Subscription {
    /// The next notification (`{"method", "params"}` JSON), or none once it has ended.
    pub async fn next(&self) -> Result<Option<String>> {
        Ok(self.handle.next().await?.map(|v| v.to_string()))
    }

    /// End the subscription now.
    pub fn cancel(&self) {
        self.handle.cancel();
    }
}

/// The gate of one turn.
#[derive(Debug, uniffi::Object)]
pub struct Gate {
    handle: Arc<crate::GateHandle>,
}

#[uniffi::export(async_runtime = "tokio")]
impl Gate {
    /// A gate for `turn_id` under a `TurnExecutionSecuritySnapshot` (JSON), recording to
    /// `store`, asking `approver`, honouring `allow_for_turn` grants recorded by `broker`.
    #[uniffi::constructor]
    pub fn new(
        turn_id: String,
        snapshot: String,
        store: Arc<Store>,
        approver: Arc<GateApprover>,
        broker: Option<Arc<Broker>>,
    ) -> Result<Arc<Self>> {
        let handle = crate::GateHandle::new(
            &turn_id,
            parse("snapshot", &snapshot)?,
            &store.handle,
            &approver.handle,
            broker.as_deref().map(|b| &*b.handle),
        )?;
        Ok(Arc::new(Gate { handle }))
    }

    /// The turn id.
    pub fn turn_id(&self) -> String {
        self.handle.turn_id()
    }

    /// Evaluate one call with the checker of its kind, without recording or asking.
    pub fn evaluate(&self, invocation: Invocation) -> Result<Verdict> {
        Ok(self.handle.evaluate(&invocation.into())?.verdict.into())
    }

    /// Decide one call: evaluate, consult grants, ask the approver on ask, re-check, record.
    pub async fn authorize(&self, invocation: Invocation) -> Result<Authorization> {
        Ok(self.handle.authorize(&invocation.into()).await?.into())
    }

    /// Decide a deferred request (possibly persisted by another process), re-checked.
    pub fn resume(&self, request_id: String, decision: Decision) -> Result<Authorization> {
        Ok(self.handle.resume(&request_id, &decision.into())?.into())
    }

    /// Grant `scope_hash` for the rest of the turn.
    pub fn grant_for_turn(&self, scope_hash: String) {
        self.handle.grant_for_turn(&scope_hash);
    }

    /// Authorize a shell command (`kind` `shell_command`, the command line as `target`, `cwd`
    /// for its working directory) and, when allowed, run it under the snapshot's sandbox. A
    /// snapshot that requires a sandbox this platform cannot provide throws
    /// `SandboxUnavailable`; nothing ever runs unconfined.
    pub async fn spawn(&self, invocation: Invocation) -> Result<SpawnResult> {
        Ok(self.handle.spawn(&invocation.into()).await?.into())
    }

    /// Decide a deferred shell command and, when allowed, run exactly its stored action under
    /// the snapshot it was requested under (narrowed by this gate's). An `allow_once` approval
    /// runs once; a second call throws.
    pub async fn resume_spawn(
        &self,
        request_id: String,
        decision: Decision,
    ) -> Result<SpawnResult> {
        Ok(self
            .handle
            .resume_spawn(&request_id, &decision.into())
            .await?
            .into())
    }

    /// Run the stored shell command of an already approved request (by its id) under its
    /// stored snapshot and sandbox. An unresolved, denied or spent request throws; no command
    /// line runs without a decision.
    pub async fn run_approved(&self, request_id: String) -> Result<SpawnResult> {
        Ok(self.handle.run_approved(&request_id).await?.into())
    }

    /// Authorize a read of `invocation.target` and open it race-free beneath its root. On
    /// `Opened` the caller owns the returned file descriptor and must close it (the Swift
    /// layer's `openRead(_:)` wraps it in a `FileHandle` that does).
    pub async fn open_read(&self, invocation: Invocation) -> Result<OpenResult> {
        open_result(self.handle.open_read(&invocation.into()).await?)
    }

    /// Authorize a write of `invocation.target` and open it race-free beneath its root,
    /// creating or truncating it. On `Opened` the caller owns the returned file descriptor and
    /// must close it (the Swift layer's `openWrite(_:)` wraps it in a `FileHandle` that does).
    pub async fn open_write(&self, invocation: Invocation) -> Result<OpenResult> {
        open_result(self.handle.open_write(&invocation.into()).await?)
    }

    /// Check a URL and resolve it: connect only to the returned, vetted addresses (none unless
    /// the verdict allows or asks). Blocks the calling thread on DNS; call it off the main
    /// actor.
    pub fn resolve_and_check(&self, url: String, tool: Option<String>) -> NetworkResolution {
        self.handle.resolve_and_check(&url, tool.as_deref()).into()
    }
}

/// A finished command.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ProcessOutcome {
    /// The child's pid.
    pub pid: u32,
    /// The exit code, when it exited.
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// Whether the timeout fired.
    pub timed_out: bool,
    /// Wall-clock milliseconds from spawn to exit.
    pub duration_ms: u64,
    /// Captured stdout (capped).
    pub stdout: Vec<u8>,
    /// Captured stderr (capped).
    pub stderr: Vec<u8>,
    /// Whether stdout was truncated.
    pub stdout_truncated: bool,
    /// Whether stderr was truncated.
    pub stderr_truncated: bool,
    /// What the sandbox enforced (a `SandboxReport`, JSON), when one was requested.
    pub sandbox: Option<String>,
}

impl From<crate::gate::ProcessOutcomeRecord> for ProcessOutcome {
    fn from(o: crate::gate::ProcessOutcomeRecord) -> Self {
        ProcessOutcome {
            pid: o.pid,
            exit_code: o.exit_code,
            signal: o.signal,
            timed_out: o.timed_out,
            duration_ms: o.duration_ms,
            stdout: o.stdout,
            stderr: o.stderr,
            stdout_truncated: o.stdout_truncated,
            stderr_truncated: o.stderr_truncated,
            sandbox: o.sandbox.map(|s| s.to_string()),
        }
    }
}

/// What `Gate.spawn` did.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum SpawnResult {
    /// The command ran (under the sandbox when the snapshot requires one).
    Ran {
        /// The finished process.
        process: ProcessOutcome,
    },
    /// Refused before anything ran.
    Denied {
        /// The refusal.
        denial: Denial,
    },
    /// The approver deferred; the `TurnPermissionApprovalRequest` (JSON) is persisted in the
    /// store. Nothing ran.
    Deferred {
        /// The request, exactly as shown.
        request: String,
    },
}

impl From<crate::SpawnRecord> for SpawnResult {
    fn from(s: crate::SpawnRecord) -> Self {
        match s {
            crate::SpawnRecord::Ran(o) => SpawnResult::Ran { process: o.into() },
            crate::SpawnRecord::Denied(d) => SpawnResult::Denied { denial: d.into() },
            crate::SpawnRecord::Deferred { request, .. } => SpawnResult::Deferred {
                request: request.to_string(),
            },
        }
    }
}

/// What `Gate.open_read`/`Gate.open_write` did. A `File` cannot cross UniFFI, so an opened
/// file crosses as its raw descriptor, whose ownership passes to the caller.
// Not `Clone`: a copy would look like a second owner of the descriptor. Not boxed: UniFFI
// lowers a variant's fields by value (it has no `Box<Record>`), and the value is short-lived.
#[derive(Debug, PartialEq, Eq, uniffi::Enum)]
#[allow(clippy::large_enum_variant)]
pub enum OpenResult {
    /// Opened race-free beneath its root (close-on-exec).
    Opened {
        /// The file descriptor. The caller owns it from here on and must close it exactly once
        /// (`close(2)`, or `FileHandle(fileDescriptor:closeOnDealloc: true)`, which the Swift
        /// layer's `openRead(_:)`/`openWrite(_:)` do). Dropping this value without closing the
        /// descriptor leaks it; nothing on the Rust side closes it any more.
        fd: i32,
    },
    /// Refused (by the policy, the approver, or the race-free open, such as a symlink that
    /// leads outside the roots). Nothing was opened.
    Denied {
        /// The refusal.
        denial: Denial,
    },
}

/// Hand an opened file's descriptor to the caller: `into_raw_fd` gives up Rust's ownership, so
/// the file is not closed when this returns.
#[cfg(unix)]
fn open_result(r: crate::OpenRecord) -> Result<OpenResult> {
    use std::os::fd::IntoRawFd;
    Ok(match r {
        crate::OpenRecord::Opened(file) => OpenResult::Opened {
            fd: file.into_raw_fd(),
        },
        crate::OpenRecord::Denied(d) => OpenResult::Denied {
            denial: (*d).into(),
        },
    })
}

#[cfg(not(unix))]
fn open_result(r: crate::OpenRecord) -> Result<OpenResult> {
    match r {
        crate::OpenRecord::Opened(file) => {
            drop(file);
            Err(TurnGateError::Invalid {
                message: "race-free opens need a Unix platform (a file descriptor to hand over)"
                    .to_owned(),
            })
        }
        crate::OpenRecord::Denied(d) => Ok(OpenResult::Denied {
            denial: (*d).into(),
        }),
    }
}

/// A URL's network check and the vetted addresses to connect to.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct NetworkResolution {
    /// The check (a deny when a resolved address is forbidden).
    pub check: NetworkCheck,
    /// The resolved, vetted socket addresses (`ip:port`, IPv6 bracketed); connect only to
    /// these. Empty unless the verdict allows or asks.
    pub addrs: Vec<String>,
}

impl From<crate::check::NetworkResolutionRecord> for NetworkResolution {
    fn from(r: crate::check::NetworkResolutionRecord) -> Self {
        NetworkResolution {
            check: r.check.into(),
            addrs: r.addrs,
        }
    }
}

// ---- checkers -------------------------------------------------------------------------------

/// An environment variable as raw bytes (non-UTF-8 names and values survive the boundary).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct EnvVar {
    /// The name's bytes.
    pub name: Vec<u8>,
    /// The value's bytes.
    pub value: Vec<u8>,
}

/// An environment variable the filter dropped.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct DroppedVar {
    /// The name (invalid UTF-8 replaced).
    pub name: String,
    /// Why: `secret_name`, `credential_value`, `injection`, `invalid_encoding`,
    /// `not_inherited`, `rebuilt`.
    pub reason: String,
}

/// The filtered environment.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct FilteredEnv {
    /// The variables kept (PATH and PWD rebuilt).
    pub vars: Vec<EnvVar>,
    /// The variables dropped, with the reason.
    pub dropped: Vec<DroppedVar>,
}

impl From<crate::check::FilteredEnvRecord> for FilteredEnv {
    fn from(e: crate::check::FilteredEnvRecord) -> Self {
        FilteredEnv {
            vars: e
                .vars
                .into_iter()
                .map(|(name, value)| EnvVar { name, value })
                .collect(),
            dropped: e
                .dropped
                .into_iter()
                .map(|d| DroppedVar {
                    name: d.name,
                    reason: d.reason,
                })
                .collect(),
        }
    }
}

fn env_pairs(vars: Vec<EnvVar>) -> Vec<(Vec<u8>, Vec<u8>)> {
    vars.into_iter().map(|v| (v.name, v.value)).collect()
}

/// What the file checker decided for one path.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct FileCheck {
    /// The verdict.
    pub verdict: Verdict,
    /// The lexically normalized absolute path, when the input was a valid path.
    pub lexical: Option<String>,
    /// The path with symlinks resolved, when it could be resolved.
    pub resolved: Option<String>,
    /// The root it lies under, when any.
    pub root: Option<String>,
}

/// What the network checker decided for one target.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct NetworkCheck {
    /// The verdict.
    pub verdict: Verdict,
    /// The canonical host, when the target parsed.
    pub host: Option<String>,
    /// The port (explicit or the scheme's default).
    pub port: Option<u16>,
    /// `host:port` (IPv6 bracketed), when there is a port.
    pub host_port: Option<String>,
    /// The URL scheme, for a URL target.
    pub scheme: Option<String>,
    /// The address class of the host (`public`, `loopback`, `private`, `metadata`, ...).
    pub address_class: Option<String>,
}

impl From<crate::check::NetworkCheckRecord> for NetworkCheck {
    fn from(r: crate::check::NetworkCheckRecord) -> Self {
        NetworkCheck {
            verdict: r.verdict.into(),
            host: r.host,
            port: r.port,
            host_port: r.host_port,
            scheme: r.scheme,
            address_class: r.address_class,
        }
    }
}

/// What the shell parser found in a command line.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ParsedCommandLine {
    /// Every simple command's program (wrappers and `sh -c` strings included).
    pub programs: Vec<String>,
    /// Constructs that cannot be resolved statically.
    pub unresolved: Vec<String>,
    /// True when the line is plain words.
    pub plain: bool,
}

/// How a command line would be spawned.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct SpawnPlan {
    /// The verdict of the whole line.
    pub verdict: Verdict,
    /// The argv to execute.
    pub argv: Vec<String>,
    /// The working directory.
    pub cwd: String,
    /// The filtered environment passed to the child.
    pub env: FilteredEnv,
    /// The timeout in milliseconds, when capped.
    pub timeout_ms: Option<u64>,
    /// Whether the snapshot requires a sandbox for it.
    pub sandbox_required: bool,
    /// Shell constructs that cannot be resolved statically.
    pub unresolved: Vec<String>,
}

/// Check a file path (`file_read`/`file_write`) under a `TurnSandboxSnapshot` (JSON) and
/// `policy`.
#[uniffi::export]
pub fn check_file(
    sandbox: String,
    policy: Arc<Policy>,
    kind: String,
    path: String,
    tool: Option<String>,
) -> Result<FileCheck> {
    let r = crate::check::check_file(
        parse("sandbox", &sandbox)?,
        &policy.handle,
        &kind,
        &path,
        tool.as_deref(),
    )?;
    Ok(FileCheck {
        verdict: r.verdict.into(),
        lexical: r.lexical,
        resolved: r.resolved,
        root: r.root,
    })
}

/// Check a network target (URL or `host[:port]`) under a `TurnNetworkPolicySnapshot` (JSON)
/// and `policy`, without resolving it.
#[uniffi::export]
pub fn check_network(
    network: String,
    policy: Arc<Policy>,
    target: String,
    tool: Option<String>,
) -> Result<NetworkCheck> {
    let r = crate::check::check_network(
        parse("network", &network)?,
        &policy.handle,
        &target,
        tool.as_deref(),
    )?;
    Ok(r.into())
}

/// What the shell parser finds in a command line.
#[uniffi::export]
pub fn parse_command_line(line: String) -> ParsedCommandLine {
    let r = crate::check::parse_command_line(&line);
    ParsedCommandLine {
        programs: r.programs,
        unresolved: r.unresolved,
        plain: r.plain,
    }
}

/// The spawn plan of a command line under a `TurnSandboxSnapshot` and a
/// `TurnProcessPolicySnapshot` (JSON) and `policy`.
#[uniffi::export]
#[allow(clippy::too_many_arguments)] // one flat call for Swift: the request's fields are arguments
pub fn plan_spawn(
    sandbox: String,
    process: String,
    policy: Arc<Policy>,
    command_line: String,
    cwd: Option<String>,
    env: Vec<EnvVar>,
    timeout_ms: Option<u64>,
    tool: Option<String>,
) -> Result<SpawnPlan> {
    let r = crate::check::plan_spawn(
        parse("sandbox", &sandbox)?,
        parse("process", &process)?,
        &policy.handle,
        crate::check::SpawnPlanRequest {
            command_line,
            cwd,
            env: env_pairs(env),
            timeout_ms,
            tool,
        },
    )?;
    Ok(SpawnPlan {
        verdict: r.verdict.into(),
        argv: r.argv,
        cwd: r.cwd,
        env: r.env.into(),
        timeout_ms: r.timeout_ms,
        sandbox_required: r.sandbox_required,
        unresolved: r.unresolved,
    })
}

/// Filter an environment for a child in `cwd` under inheritance `mode` (`all`, `filtered`,
/// `none`); `untrusted_path_roots` are removed from PATH.
#[uniffi::export]
pub fn filter_env(
    vars: Vec<EnvVar>,
    mode: String,
    cwd: String,
    untrusted_path_roots: Vec<String>,
) -> Result<FilteredEnv> {
    Ok(crate::check::filter_env(env_pairs(vars), &mode, &cwd, &untrusted_path_roots)?.into())
}

// ---- measurement -----------------------------------------------------------------------------

/// Native baseline for the Swift bench: the median over `rounds` rounds of the mean ns per
/// `check(kind, target)` (the same string-taking call Swift makes, kind parsing included) in a
/// Rust loop of `iterations` calls, measured inside the library so that Swift's per-call figure
/// can be compared in the same run. Measures; decides nothing.
#[uniffi::export]
pub fn bench_native_check_ns(
    policy: Arc<Policy>,
    kind: String,
    target: String,
    iterations: u64,
    rounds: u32,
) -> Result<f64> {
    crate::parse_kind(&kind)?;
    let iterations = iterations.max(1);
    let mut per_round = Vec::new();
    for _ in 0..rounds.max(1) {
        let start = std::time::Instant::now();
        for _ in 0..iterations {
            let effect = policy.handle.check(
                std::hint::black_box(&kind),
                std::hint::black_box(&target),
                None,
            );
            std::hint::black_box(effect.is_ok());
        }
        per_round.push(start.elapsed().as_nanos() as f64 / iterations as f64);
    }
    per_round.sort_by(f64::total_cmp);
    Ok(per_round[per_round.len() / 2])
}

/// The FFI floor for the Swift bench: a call with two strings that does nothing with them.
#[uniffi::export]
pub fn bench_noop(kind: String, target: String) -> u64 {
    (kind.len() + target.len()) as u64
}
