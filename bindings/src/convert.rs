//! JSON conversions shared by the facade modules: every protocol object crosses as a JSON
//! value, deserialized with the core type and named in errors.

use serde_json::Value;

use crate::TurnGateError;

/// Deserialize `value` as a `T`; errors name `what`.
pub(crate) fn from_value<T: serde::de::DeserializeOwned>(
    what: &str,
    value: Value,
) -> Result<T, TurnGateError> {
    serde_json::from_value(value).map_err(|e| TurnGateError::invalid(what, e))
}

/// Serialize `value`; errors name `what`.
pub(crate) fn to_value<T: serde::Serialize>(what: &str, value: &T) -> Result<Value, TurnGateError> {
    serde_json::to_value(value).map_err(|e| TurnGateError::invalid(what, e))
}
