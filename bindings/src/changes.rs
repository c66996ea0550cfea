//! Reviewable writes over JSON (DESIGN §18): the change sets a reviewed spawn recorded, kept
//! beside an audit store (`<dir of the store>/changes/`), listed, shown, applied or discarded
//! from any process. Change sets cross as `ChangeSet` JSON values; every apply and discard is
//! recorded in the audit store at `store`. Behaviour is the core's (`turngate::changes`);
//! this module converts only.

use serde_json::Value;
use turngate::audit::SqliteAuditStore;
use turngate::changes::{ApplyOptions, ChangeStore};

use crate::TurnGateError;
use crate::convert::to_value;

fn changes_beside(store: &str) -> ChangeStore {
    ChangeStore::beside(std::path::Path::new(store))
}

fn audit(store: &str) -> Result<SqliteAuditStore, TurnGateError> {
    Ok(SqliteAuditStore::open_existing(store)?)
}

/// Every change set beside the audit store at `store`, oldest first (a list of `ChangeSet`).
pub fn list(store: &str) -> Result<Value, TurnGateError> {
    to_value("change sets", &changes_beside(store).list()?)
}

/// The change set `id` (a `ChangeSet`, with a unified diff per text file).
pub fn show(store: &str, id: &str) -> Result<Value, TurnGateError> {
    to_value("change set", &changes_beside(store).get(id)?)
}

/// Apply change set `id` to the workspace. `options` is `{"confirm_asks"?: bool, "by"?:
/// string}` or null: `confirm_asks` also applies paths the file policy asks about (denied
/// paths are always refused); `by` is who applies it. A refusal (conflicts, the policy,
/// tampering, a second apply) is [`TurnGateError::Changes`] with its code and paths, and
/// nothing in the workspace changed. Returns the applied `ChangeSet`.
pub fn apply(store: &str, id: &str, options: Value) -> Result<Value, TurnGateError> {
    let options = apply_options(options)?;
    let audit = audit(store)?;
    to_value(
        "change set",
        &changes_beside(store).apply(id, &options, Some(&audit))?,
    )
}

/// Discard change set `id` (its writes are dropped; the workspace was never touched). `by`
/// is who discards it. Returns the discarded `ChangeSet`.
pub fn discard(store: &str, id: &str, by: Option<&str>) -> Result<Value, TurnGateError> {
    let audit = audit(store)?;
    to_value(
        "change set",
        &changes_beside(store).discard(id, by, Some(&audit))?,
    )
}

fn apply_options(options: Value) -> Result<ApplyOptions, TurnGateError> {
    let mut out = ApplyOptions::default();
    match options {
        Value::Null => {}
        Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("confirm_asks", Value::Bool(b)) => out.confirm_asks = b,
                    ("by", Value::String(s)) => out.by = Some(s),
                    ("by", Value::Null) => {}
                    (key, value) => {
                        return Err(TurnGateError::invalid(
                            "options",
                            format!("unknown or mistyped field `{key}`: {value}"),
                        ));
                    }
                }
            }
        }
        other => {
            return Err(TurnGateError::invalid(
                "options",
                format!("expected an object or null, got {other}"),
            ));
        }
    }
    Ok(out)
}

/// The changes directory for the audit store at `store` (for a gate's reviewed spawn).
pub(crate) fn store_for(store: &str) -> ChangeStore {
    changes_beside(store)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn options_are_strict() {
        assert!(apply_options(Value::Null).is_ok());
        let o =
            apply_options(serde_json::json!({"confirm_asks": true, "by": "person:ana"})).unwrap();
        assert!(o.confirm_asks);
        assert_eq!(o.by.as_deref(), Some("person:ana"));
        assert!(apply_options(serde_json::json!({"confirm": true})).is_err());
        assert!(apply_options(serde_json::json!({"confirm_asks": "yes"})).is_err());
        assert!(apply_options(serde_json::json!([1])).is_err());
    }

    #[test]
    fn a_bad_id_is_a_changes_error_with_its_code() {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("audit.db");
        let err = show(store.to_str().unwrap(), "../../etc").unwrap_err();
        assert!(
            matches!(err, TurnGateError::Changes { ref code, .. } if code == "bad_id"),
            "{err:?}"
        );
        let err = show(store.to_str().unwrap(), "cs-1-2-3").unwrap_err();
        assert!(
            matches!(err, TurnGateError::Changes { ref code, .. } if code == "not_found"),
            "{err:?}"
        );
        assert_eq!(
            list(store.to_str().unwrap()).unwrap(),
            serde_json::json!([])
        );
    }
}
