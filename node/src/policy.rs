//! `Policy`: the facade's compiled `PolicyHandle` as a JavaScript class. Loading, composing and
//! evaluating are the facade's; this module converts names and records and never decides.

use std::sync::Arc;

use napi::Env;
use napi::bindgen_prelude::{Either, Unknown};
use napi_derive::napi;
use serde_json::Value;
use turngate_ffi::{ActionRecord, Effect, PolicyHandle, TurnGateError, parse_kind};

use crate::convert::js_record;
use crate::error::OrThrow;

/// One action of a batch.
#[napi(object)]
#[derive(Debug, Clone)]
pub struct Action {
    /// The action kind's wire name.
    pub kind: String,
    /// The target (path, command line, `host:port`, `server/tool`, name).
    pub target: String,
    /// The optional tool name.
    pub tool: Option<String>,
}

/// Options of `Policy.tiered`.
#[napi(object)]
#[derive(Debug, Clone, Default)]
pub struct TieredOptions {
    /// A test binary allowed for exec.
    pub test_binary: Option<String>,
    /// A provider host allowed for network.
    pub provider_host: Option<String>,
}

/// Options of `Policy.rule`.
#[napi(object)]
#[derive(Debug, Clone, Default)]
pub struct RuleOptions {
    /// A glob on the tool name.
    pub tool: Option<String>,
    /// Put the rule in a new layer of this name.
    pub layer: Option<String>,
}

fn bad_action(env: &Env, i: usize) -> napi::Error {
    crate::error::js_error(
        env,
        TurnGateError::invalid(
            &format!("actions[{i}]"),
            "expected [kind, target], [kind, target, tool] or {kind, target, tool?}",
        ),
    )
}

fn effect_str(effect: Effect) -> &'static str {
    effect.as_str()
}

/// A compiled policy. Immutable: `merge`, `contain` and the builders return new policies.
/// Evaluate with `check` (the effect) or `explain` (the full verdict).
#[napi]
#[derive(Debug)]
pub struct Policy {
    pub(crate) handle: Arc<PolicyHandle>,
}

/// The `Policy` of a facade result.
fn wrap(env: &Env, handle: Result<Arc<PolicyHandle>, TurnGateError>) -> napi::Result<Policy> {
    handle.map(|handle| Policy { handle }).or_throw(env)
}

#[napi]
impl Policy {
    /// An empty policy: no rules, no opinion on any kind (a standalone policy asks), network
    /// denied.
    #[napi(constructor)]
    pub fn new(env: Env) -> napi::Result<Self> {
        wrap(&env, PolicyHandle::empty())
    }

    /// Parse a policy from its JSON text. `origin` (a file name) is quoted in errors.
    #[napi(factory)]
    pub fn from_json(env: Env, text: String, origin: Option<String>) -> napi::Result<Self> {
        wrap(&env, PolicyHandle::from_json(&text, origin.as_deref()))
    }

    /// Parse a policy from its TOML text. `origin` (a file name) is quoted in errors.
    #[napi(factory)]
    pub fn from_toml(env: Env, text: String, origin: Option<String>) -> napi::Result<Self> {
        wrap(&env, PolicyHandle::from_toml(&text, origin.as_deref()))
    }

    /// A policy from an object in the policy-file format.
    #[napi(factory, ts_args_type = "data: PolicyFile")]
    pub fn from_object(env: Env, data: Value) -> napi::Result<Self> {
        if !data.is_object() {
            let e = TurnGateError::invalid("data", "expected a policy-file object");
            return Err(crate::error::js_error(&env, e));
        }
        wrap(&env, PolicyHandle::from_json_value(data))
    }

    /// Read a `.json` or `.toml` policy file.
    #[napi(factory)]
    pub fn from_file(env: Env, path: String) -> napi::Result<Self> {
        wrap(&env, PolicyHandle::from_file(&path))
    }

    /// The tiered policy: reads allowed, writes and execs ask (`rustc` and `testBinary`
    /// allowed), network denied (`providerHost` allowed), secrets denied.
    #[napi(factory, strict)]
    pub fn tiered(env: Env, options: Option<TieredOptions>) -> napi::Result<Self> {
        let o = options.unwrap_or_default();
        wrap(&env, PolicyHandle::tiered(o.test_binary, o.provider_host))
    }

    /// Enforces nothing. Only for callers that pass no policy.
    #[napi(factory)]
    pub fn permissive(env: Env) -> napi::Result<Self> {
        wrap(&env, PolicyHandle::permissive())
    }

    /// The compiled policy of a permission mode: `full_access`, `auto_accept_edits` or
    /// `supervised`.
    #[napi(factory)]
    pub fn mode(env: Env, name: String) -> napi::Result<Self> {
        wrap(&env, PolicyHandle::from_mode(&name))
    }

    /// Compose a peer: layers concatenated, the stricter default per kind wins.
    #[napi]
    pub fn merge(&self, env: Env, other: &Policy) -> napi::Result<Policy> {
        wrap(&env, self.handle.merge(&other.handle))
    }

    /// Add `cap` as a cap: the result is at least as strict as both.
    #[napi]
    pub fn contain(&self, env: Env, cap: &Policy) -> napi::Result<Policy> {
        wrap(&env, self.handle.contain(&cap.handle))
    }

    /// A new policy with a rule added to the current layer (or to a new layer `options.layer`).
    #[napi(
        strict,
        ts_args_type = "kind: ActionKind, effect: Effect, pattern: string, options?: RuleOptions"
    )]
    pub fn rule(
        &self,
        env: Env,
        kind: String,
        effect: String,
        pattern: String,
        options: Option<RuleOptions>,
    ) -> napi::Result<Policy> {
        let o = options.unwrap_or_default();
        wrap(
            &env,
            self.handle.with_rule(
                &kind,
                &effect,
                &pattern,
                o.tool.as_deref(),
                o.layer.as_deref(),
            ),
        )
    }

    /// A new policy with a new, empty layer `name` that later rules go to.
    #[napi]
    pub fn layer(&self, env: Env, name: String) -> napi::Result<Policy> {
        wrap(&env, self.handle.with_layer(&name))
    }

    /// A new policy with `kind`'s default set to `effect`.
    #[napi(ts_args_type = "kind: ActionKind, effect: Effect")]
    pub fn with_default(&self, env: Env, kind: String, effect: String) -> napi::Result<Policy> {
        wrap(&env, self.handle.with_default(&kind, &effect))
    }

    /// A new policy with its name set (a cap that decides reports it as the layer).
    #[napi]
    pub fn named(&self, env: Env, name: String) -> napi::Result<Policy> {
        wrap(&env, self.handle.named(&name))
    }

    /// The effect of an action: `"allow"`, `"ask"` or `"deny"`. Exactly `explain(...).effect`.
    #[napi(
        ts_args_type = "kind: ActionKind, target: string, tool?: string | null",
        ts_return_type = "Effect"
    )]
    pub fn check(
        &self,
        env: Env,
        kind: String,
        target: String,
        tool: Option<String>,
    ) -> napi::Result<&'static str> {
        let kind = parse_kind(&kind).or_throw(&env)?;
        Ok(effect_str(self.handle.check_kind(
            kind,
            &target,
            tool.as_deref(),
        )))
    }

    /// The verdict of an action: effect, deciding rule and layer, reason.
    #[napi(
        ts_args_type = "kind: ActionKind, target: string, tool?: string | null",
        ts_return_type = "Verdict"
    )]
    pub fn explain<'env>(
        &self,
        env: &'env Env,
        kind: String,
        target: String,
        tool: Option<String>,
    ) -> napi::Result<Unknown<'env>> {
        let v = self
            .handle
            .explain(&kind, &target, tool.as_deref())
            .or_throw(env)?;
        js_record(env, &v)
    }

    /// The effects of many actions, in order. An unknown kind fails the whole batch, naming the
    /// action's index.
    #[napi(
        ts_args_type = "actions: Array<[ActionKind, string] | [ActionKind, string, string | null] | Action>",
        ts_return_type = "Effect[]"
    )]
    pub fn check_batch(
        &self,
        env: Env,
        actions: Vec<Either<Vec<Option<String>>, Action>>,
    ) -> napi::Result<Vec<&'static str>> {
        let mut records = Vec::with_capacity(actions.len());
        for (i, a) in actions.into_iter().enumerate() {
            records.push(match a {
                Either::A(mut t) if (2..=3).contains(&t.len()) => {
                    let tool = if t.len() == 3 {
                        t.pop().flatten()
                    } else {
                        None
                    };
                    let target = t.pop().flatten();
                    let kind = t.pop().flatten();
                    match (kind, target) {
                        (Some(kind), Some(target)) => ActionRecord { kind, target, tool },
                        _ => return Err(bad_action(&env, i)),
                    }
                }
                Either::A(_) => return Err(bad_action(&env, i)),
                Either::B(a) => ActionRecord::from(a),
            });
        }
        let effects = self.handle.check_batch(&records).or_throw(&env)?;
        Ok(effects.into_iter().map(effect_str).collect())
    }

    /// The lint findings (`turngate lint`): `{code, severity, path, layer, rule, by?, message}`
    /// for each rule that can never take effect or reads wrong, in rule order.
    #[napi(ts_return_type = "LintFinding[]")]
    pub fn lint(&self, env: Env) -> napi::Result<Value> {
        self.handle.lint().or_throw(&env)
    }

    /// The full verdict (with `condition` and `would` when they apply) of an action in a turn
    /// whose earlier allowed actions are `history` (`{kind, target, tool?, seconds_ago?}[]`,
    /// oldest first).
    #[napi(
        ts_args_type = "kind: ActionKind, target: string, tool?: string | null, history?: TurnHistoryAction[] | null",
        ts_return_type = "FullVerdict"
    )]
    pub fn explain_in_turn(
        &self,
        env: Env,
        kind: String,
        target: String,
        tool: Option<String>,
        history: Option<Value>,
    ) -> napi::Result<Value> {
        let history = history.unwrap_or(Value::Array(Vec::new()));
        self.handle
            .explain_in_turn(&kind, &target, tool.as_deref(), history)
            .or_throw(&env)
    }

    /// Replay recorded audit events (`TurnPermissionAuditEvent[]`) with this policy as the
    /// candidate: the report `{decisions, flips}` of the decisions that flip.
    #[napi(
        ts_args_type = "events: JsonObject[], options?: ReplayOptions | null",
        ts_return_type = "ReplayReport"
    )]
    pub fn replay_events(
        &self,
        env: Env,
        events: Value,
        options: Option<Value>,
    ) -> napi::Result<Value> {
        self.handle
            .replay_events(events, options.unwrap_or(Value::Null))
            .or_throw(&env)
    }

    /// The policy as an object in the policy-file format.
    #[napi(ts_return_type = "PolicyFile")]
    pub fn to_object(&self, env: Env) -> napi::Result<Value> {
        self.handle.to_json_value().or_throw(&env)
    }

    /// The policy as policy-file JSON text.
    #[napi]
    pub fn to_json(&self) -> String {
        self.handle.to_json()
    }

    /// The policy as policy-file TOML text.
    #[napi]
    pub fn to_toml(&self, env: Env) -> napi::Result<String> {
        self.handle.to_toml().or_throw(&env)
    }

    /// `Policy.fromJson(<the policy's JSON>)`, for debugging output.
    #[napi(js_name = "toString")]
    pub fn describe(&self) -> String {
        format!("Policy.fromJson({:?})", self.handle.to_json())
    }
}

impl From<Action> for ActionRecord {
    fn from(a: Action) -> Self {
        ActionRecord {
            kind: a.kind,
            target: a.target,
            tool: a.tool,
        }
    }
}
