//! The UniFFI surface (feature `uniffi`): what Swift (and Kotlin) see. It wraps the facade's
//! handles in UniFFI objects and its records in UniFFI records, and maps the facade's error to
//! one UniFFI error enum. Protocol objects (snapshots, caps, reducer state) cross as JSON text,
//! which each language decodes into its own types. Nothing here decides anything.

use std::sync::Arc;

use serde_json::Value;

/// The checkers' records under the names Swift sees them by.
pub use crate::check::{
    DroppedVarRecord as DroppedVar, EnvVarRecord as EnvVar, FilteredEnvRecord as FilteredEnv,
    SpawnPlanRecord as SpawnPlan,
};
/// The facade's records under the names Swift sees them by.
pub use crate::{
    ActionRecord as Action, ApplyOptionsRecord as ApplyOptions,
    AuthorizationRecord as Authorization, ChangeSetSummaryRecord as ChangeSetSummary,
    DecisionRecord as Decision, DenialRecord as Denial, Effect, EvaluationRecord as Evaluation,
    InvocationRecord as Invocation, ProcessOutcomeRecord as ProcessOutcome,
    SpawnRecord as SpawnResult, VerdictRecord as Verdict,
};
use crate::{PolicyHandle, reduce, snapshot};

pub use crate::TurnGateError;

/// A foreign approver that threw something other than a `TurnGateError`.
impl From<uniffi::UnexpectedUniFFICallbackError> for TurnGateError {
    fn from(e: uniffi::UnexpectedUniFFICallbackError) -> Self {
        TurnGateError::Approval { message: e.reason }
    }
}

// Protocol objects inside records (a deferred request, a sandbox report) cross as JSON text.
uniffi::custom_type!(Value, String, {
    remote,
    lower: |v| v.to_string(),
    try_lift: |s| Ok(serde_json::from_str(&s)?),
});

/// The effect of an action. The order of strictness is deny > ask > allow.
#[uniffi::remote(Enum)]
pub enum Effect {
    /// The action may proceed.
    Allow,
    /// The action needs a person's approval.
    Ask,
    /// The action is refused.
    Deny,
}

type Result<T> = std::result::Result<T, TurnGateError>;

fn parse(what: &str, text: &str) -> Result<Value> {
    serde_json::from_str(text)
        .map_err(|e| crate::TurnGateError::invalid(what, format!("not valid JSON: {e}")))
}

fn parse_opt(what: &str, text: Option<String>) -> Result<Option<Value>> {
    text.map(|t| parse(what, &t)).transpose()
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

    /// The tiered policy, optionally allowing a test binary and a provider host.
    #[uniffi::constructor]
    pub fn tiered(test_binary: Option<String>, provider_host: Option<String>) -> Result<Arc<Self>> {
        wrap(PolicyHandle::tiered(test_binary, provider_host))
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
        wrap(self.handle.with_rule(
            &kind,
            effect.as_str(),
            &pattern,
            tool.as_deref(),
            layer.as_deref(),
        ))
    }

    /// A new policy with `kind`'s default set to `effect`.
    pub fn with_default(&self, kind: String, effect: Effect) -> Result<Arc<Policy>> {
        wrap(self.handle.with_default(&kind, effect.as_str()))
    }

    /// A new policy with its name set (a cap reports it as its layer).
    pub fn named(&self, name: String) -> Result<Arc<Policy>> {
        wrap(self.handle.named(&name))
    }

    /// The effect of an action: exactly `explain(..).effect`.
    pub fn check(&self, kind: String, target: String, tool: Option<String>) -> Result<Effect> {
        self.handle.check(&kind, &target, tool.as_deref())
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
        self.handle.explain(&kind, &target, tool.as_deref())
    }

    /// The effects of many actions, in order (one call across the boundary).
    pub fn check_batch(&self, actions: Vec<Action>) -> Result<Vec<Effect>> {
        self.handle.check_batch(&actions)
    }

    /// The policy in the policy-file JSON format.
    pub fn to_json(&self) -> String {
        self.handle.to_json()
    }

    /// The policy in the policy-file TOML format.
    pub fn to_toml(&self) -> Result<String> {
        self.handle.to_toml()
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
    snapshot::resolve_json(selection.as_deref(), &context, cap.as_deref())
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
    snapshot::ensure_native_shell_allowed(parse("snapshot", &snapshot)?)
}

/// The system-prompt permissions section for a `TurnPermissionProfileSnapshot` (JSON), or none.
#[uniffi::export]
pub fn render_permissions_section(profile: String) -> Result<Option<String>> {
    snapshot::render_permissions_section(parse("profile", &profile)?)
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
    reduce::scope_hash(parse("scope", &scope)?)
}

// ---- gate, approver, broker, store -----------------------------------------------------------

/// The approver, implemented in Swift as an `async` method. It may never answer (the run stays
/// pending, other turns go on); a thrown error is a denial carrying its text.
#[uniffi::export(with_foreign)]
#[async_trait::async_trait]
pub trait Approver: Send + Sync {
    /// Decide one ask.
    async fn decide(&self, ask: crate::approver::ApprovalAskRecord) -> Result<Decision>;
}

struct ForeignBridge(Arc<dyn Approver>);

impl crate::ForeignApprover for ForeignBridge {
    fn decide(&self, request: Value) -> crate::ForeignDecisionFuture {
        let inner = Arc::clone(&self.0);
        Box::pin(async move {
            let ask = serde_json::from_value(request).map_err(|e| e.to_string())?;
            inner.decide(ask).await.map_err(|e| e.to_string())
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

#[uniffi::export(async_runtime = "tokio")]
impl Store {
    /// Open (creating if needed) the store at `path`. `durability` is `process` (the
    /// default) or `power` (an fsync per group commit).
    #[uniffi::constructor(default(durability = None))]
    pub fn open(path: String, durability: Option<String>) -> Result<Arc<Self>> {
        Ok(Arc::new(Store {
            handle: crate::StoreHandle::open_durable(&path, durability.as_deref())?,
        }))
    }

    /// A store in memory, for tests: the file store's semantics, nothing kept.
    #[uniffi::constructor]
    pub fn memory() -> Result<Arc<Self>> {
        Ok(Arc::new(Store {
            handle: crate::StoreHandle::memory()?,
        }))
    }

    /// Wait until the stored approval `request_id` is resolved, by anyone, or `timeout_ms`
    /// passes; the approval as JSON (`{"request", "action", "resolution"?}`).
    pub async fn wait_resolved(
        &self,
        request_id: String,
        timeout_ms: Option<u64>,
    ) -> Result<String> {
        Ok(self
            .handle
            .wait_resolved(&request_id, timeout_ms)
            .await?
            .to_string())
    }

    /// Record `resolution` (`allow_once`, `allow_for_turn`, `deny`, `cancelled`, `expired`)
    /// for a stored approval, first one wins: JSON `{"resolution", "reason", "applied"}`. A
    /// gate's `resume` re-checks and acts on it.
    pub fn resolve(
        &self,
        request_id: String,
        resolution: String,
        reason: String,
    ) -> Result<String> {
        let recorded = self.handle.resolve(&request_id, &resolution, &reason)?;
        Ok(crate::convert::to_value("resolution", &recorded)?.to_string())
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
        self.handle.turns()
    }

    /// Every stored approval without a resolution (JSON list of `{"request", "action"}`).
    pub fn pending_approvals(&self) -> Result<String> {
        Ok(self.handle.pending_approvals()?.to_string())
    }

    /// Every change set a reviewed spawn recorded beside this store, oldest first (JSON list
    /// of `ChangeSet`).
    pub fn change_sets(&self) -> Result<String> {
        Ok(self.handle.change_sets()?.to_string())
    }

    /// The change set `id` (`ChangeSet` JSON, a unified diff per text file). Throws `Changes`
    /// (`bad_id`, `not_found`).
    pub fn change_set(&self, id: String) -> Result<String> {
        Ok(self.handle.change_set(&id)?.to_string())
    }

    /// Apply change set `id`, all or nothing (the applied `ChangeSet` JSON). A refusal throws
    /// `Changes` with its code (`conflicts`, `policy_refused`, `tampered`, `not_pending`, ...)
    /// and the paths; nothing in the workspace changed.
    pub fn apply_change_set(&self, id: String, options: ApplyOptions) -> Result<String> {
        Ok(self.handle.apply_change_set(&id, &options)?.to_string())
    }

    /// Discard change set `id` (the discarded `ChangeSet` JSON); `by` is who discards it.
    pub fn discard_change_set(&self, id: String, by: Option<String>) -> Result<String> {
        Ok(self
            .handle
            .discard_change_set(&id, by.as_deref())?
            .to_string())
    }
}

/// A `ChangeSet` (JSON) checked against the type and returned as turngate writes it; an
/// unknown field, kind or status throws `InvalidInput`.
#[uniffi::export]
pub fn parse_change_set(json: String) -> Result<String> {
    Ok(crate::changes::parse(parse("change set", &json)?)?.to_string())
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
    pub fn respond(&self, id: String, resolution: String) -> Result<crate::broker::RespondRecord> {
        self.handle.respond(&id, &resolution)
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
    pub fn evaluate(&self, invocation: Invocation) -> Result<crate::check::EvaluationRecord> {
        self.handle.evaluate(&invocation)
    }

    /// Decide one call: evaluate, consult grants, ask the approver on ask, re-check, record.
    pub async fn authorize(&self, invocation: Invocation) -> Result<Authorization> {
        self.handle.authorize(&invocation).await
    }

    /// Decide a deferred request (possibly persisted by another process), re-checked. A nil
    /// `decision` takes the one already recorded in the store (see `Store.wait_resolved`).
    pub fn resume(&self, request_id: String, decision: Option<Decision>) -> Result<Authorization> {
        self.handle
            .resume_or_recorded(&request_id, decision.as_ref())
    }

    /// Wait until the deferred request `request_id` is resolved, by anyone, or `timeout_ms`
    /// passes; its stored approval as JSON (`{"request", "action", "resolution"?}`).
    pub async fn wait_resolved(
        &self,
        request_id: String,
        timeout_ms: Option<u64>,
    ) -> Result<String> {
        Ok(self
            .handle
            .wait_resolved(&request_id, timeout_ms)
            .await?
            .to_string())
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
        self.handle.spawn(&invocation).await
    }

    /// Decide a deferred shell command and, when allowed, run exactly its stored action under
    /// the snapshot it was requested under (narrowed by this gate's). An `allow_once` approval
    /// runs once; a second call throws.
    pub async fn resume_spawn(
        &self,
        request_id: String,
        decision: Decision,
    ) -> Result<SpawnResult> {
        self.handle.resume_spawn(&request_id, &decision).await
    }

    /// Run the stored shell command of an already approved request (by its id) under its
    /// stored snapshot and sandbox. An unresolved, denied or spent request throws; no command
    /// line runs without a decision.
    pub async fn run_approved(&self, request_id: String) -> Result<SpawnResult> {
        self.handle.run_approved(&request_id).await
    }

    /// Authorize a read of `invocation.target` and open it race-free beneath its root. On
    /// `Opened` the caller owns the returned file descriptor and must close it (the Swift
    /// layer's `openRead(_:)` wraps it in a `FileHandle` that does).
    pub async fn open_read(&self, invocation: Invocation) -> Result<OpenResult> {
        open_result(self.handle.open_read(&invocation).await?)
    }

    /// Authorize a write of `invocation.target` and open it race-free beneath its root,
    /// creating or truncating it. On `Opened` the caller owns the returned file descriptor and
    /// must close it (the Swift layer's `openWrite(_:)` wraps it in a `FileHandle` that does).
    pub async fn open_write(&self, invocation: Invocation) -> Result<OpenResult> {
        open_result(self.handle.open_write(&invocation).await?)
    }

    /// Check a URL and resolve it: connect only to the returned, vetted addresses (none unless
    /// the verdict allows or asks). Blocks the calling thread on DNS; call it off the main
    /// actor.
    pub fn resolve_and_check(
        &self,
        url: String,
        tool: Option<String>,
    ) -> crate::check::NetworkResolutionRecord {
        self.handle.resolve_and_check(&url, tool.as_deref())
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
        crate::OpenRecord::Denied(d) => OpenResult::Denied { denial: *d },
    })
}

#[cfg(not(unix))]
fn open_result(r: crate::OpenRecord) -> Result<OpenResult> {
    match r {
        crate::OpenRecord::Opened(file) => {
            drop(file);
            Err(TurnGateError::InvalidInput {
                message: "race-free opens need a Unix platform (a file descriptor to hand over)"
                    .to_owned(),
            })
        }
        crate::OpenRecord::Denied(d) => Ok(OpenResult::Denied { denial: *d }),
    }
}

// ---- checkers -------------------------------------------------------------------------------

fn env_pairs(vars: Vec<EnvVar>) -> Vec<(Vec<u8>, Vec<u8>)> {
    vars.into_iter().map(Into::into).collect()
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
) -> Result<crate::check::FileCheckRecord> {
    crate::check::check_file(
        parse("sandbox", &sandbox)?,
        &policy.handle,
        &kind,
        &path,
        tool.as_deref(),
    )
}

/// Check a network target (URL or `host[:port]`) under a `TurnNetworkPolicySnapshot` (JSON)
/// and `policy`, without resolving it.
#[uniffi::export]
pub fn check_network(
    network: String,
    policy: Arc<Policy>,
    target: String,
    tool: Option<String>,
) -> Result<crate::check::NetworkCheckRecord> {
    crate::check::check_network(
        parse("network", &network)?,
        &policy.handle,
        &target,
        tool.as_deref(),
    )
}

/// What the shell parser finds in a command line.
#[uniffi::export]
pub fn parse_command_line(line: String) -> crate::check::ParsedCommandLineRecord {
    crate::check::parse_command_line(&line)
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
    crate::check::plan_spawn(
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
    )
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
    crate::check::filter_env(env_pairs(vars), &mode, &cwd, &untrusted_path_roots)
}
