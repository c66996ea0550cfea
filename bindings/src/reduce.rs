//! The client-core reducers and approval scopes over JSON: timeline state from audit events
//! and approval notifications, and the normalized scope of an action with its `scope_hash`.
//! Every client folds the same inputs through `turngate::reduce`, so they agree.

use serde_json::Value;
use turngate::approval::ApprovalScope;
use turngate::reduce::{ClientState, ReducerInput};

use crate::{TurnGateError, parse_kind};

fn from_value<T: serde::de::DeserializeOwned>(
    what: &str,
    value: Value,
) -> Result<T, TurnGateError> {
    serde_json::from_value(value).map_err(|e| TurnGateError::invalid(what, e))
}

fn to_value<T: serde::Serialize>(what: &str, value: &T) -> Result<Value, TurnGateError> {
    serde_json::to_value(value).map_err(|e| TurnGateError::invalid(what, e))
}

fn state_of(state: Option<Value>) -> Result<ClientState, TurnGateError> {
    match state {
        None | Some(Value::Null) => Ok(ClientState::default()),
        Some(s) => from_value("state", s),
    }
}

/// Apply one `ReducerInput` (`{"audit_event": ...}` or `{"notification": ...}`) to a
/// `ClientState` (none: the empty state), giving the next state.
pub fn reduce(state: Option<Value>, input: Value) -> Result<Value, TurnGateError> {
    let state = state_of(state)?;
    let input: ReducerInput = from_value("input", input)?;
    to_value("state", &turngate::reduce::reduce(state, &input))
}

/// Apply a list of reducer inputs in order, from `state` (none: the empty state).
pub fn reduce_all(state: Option<Value>, inputs: Value) -> Result<Value, TurnGateError> {
    let state = state_of(state)?;
    let inputs: Vec<ReducerInput> = from_value("inputs", inputs)?;
    to_value("state", &turngate::reduce::reduce_all(state, &inputs))
}

/// The normalized `ApprovalScope` of an action (relative paths joined to `cwd`).
pub fn scope_from_action(
    kind: &str,
    target: &str,
    tool: Option<&str>,
    cwd: Option<&str>,
) -> Result<Value, TurnGateError> {
    let mut action = turngate::Action::new(parse_kind(kind)?, target);
    action.tool = tool.map(str::to_owned);
    let scope = ApprovalScope::from_action(&action, cwd)
        .map_err(|e| TurnGateError::invalid("target", e))?;
    to_value("scope", &scope)
}

/// The `scope_hash` (lowercase hex SHA-256 of the canonical encoding) of an `ApprovalScope`.
pub fn scope_hash(scope: Value) -> Result<String, TurnGateError> {
    let scope: ApprovalScope = from_value("scope", scope)?;
    Ok(scope.scope_hash())
}
