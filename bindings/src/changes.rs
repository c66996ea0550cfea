//! Reviewable writes over JSON (DESIGN §18): the change sets a reviewed spawn recorded, kept
//! beside an audit store (`<dir of the store>/changes/`), listed, shown, applied or discarded
//! from any process. A change set is a protocol object (`ChangeSet`, `schema("ChangeSet")`)
//! and crosses as its JSON value; a reviewed spawn's result carries a
//! [`ChangeSetSummaryRecord`]; apply takes an [`ApplyOptionsRecord`]. Every apply and discard
//! is recorded in the audit store the change set was sealed in. Behaviour is the core's
//! (`turngate::changes`); this module converts only.

use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use turngate::audit::{AuditStore, SqliteAuditStore};
use turngate::changes::{ApplyOptions, ChangeKind, ChangeSet, ChangeStore};

use crate::TurnGateError;
use crate::convert::{from_value, to_value};

/// The change set a reviewed spawn recorded, in brief (`ChangeSetSummary` in every language):
/// its id and the paths it changes, absolute, by kind. The workspace is untouched until it is
/// applied; the full set (diffs, the recorded workspace states) is the store's `change_set`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(
    feature = "uniffi",
    derive(uniffi::Record),
    uniffi(name = "ChangeSetSummary")
)]
pub struct ChangeSetSummaryRecord {
    /// The change set's id (`cs-...`), for `apply` and `discard`.
    pub id: String,
    /// `pending` (a reviewed spawn's set always is).
    pub status: String,
    /// "1 added, 1 deleted" (kinds with no change left out; "no changes").
    pub summary: String,
    /// Paths the command created.
    pub added: Vec<String>,
    /// Files (or symlinks) whose content or target changed.
    pub modified: Vec<String>,
    /// Paths the command removed (a directory with everything in it).
    pub deleted: Vec<String>,
    /// Paths whose permission bits alone changed.
    pub mode_changed: Vec<String>,
    /// Entries apply will not create (a fifo, a socket, a device node): while there is one,
    /// the set cannot be applied, only discarded.
    pub unsupported: Vec<String>,
}

impl From<&ChangeSet> for ChangeSetSummaryRecord {
    fn from(set: &ChangeSet) -> Self {
        let paths = |kind: ChangeKind| {
            set.changes
                .iter()
                .filter(|c| c.kind == kind)
                .map(|c| c.root.join(&c.path).to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        };
        ChangeSetSummaryRecord {
            id: set.id.clone(),
            status: set.status.as_str().to_owned(),
            summary: set.summary(),
            added: paths(ChangeKind::Added),
            modified: paths(ChangeKind::Modified),
            deleted: paths(ChangeKind::Deleted),
            mode_changed: paths(ChangeKind::ModeChanged),
            unsupported: paths(ChangeKind::Unsupported),
        }
    }
}

/// How a change set is applied (`ApplyOptions` in every language). Unknown fields are
/// refused.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[cfg_attr(
    feature = "uniffi",
    derive(uniffi::Record),
    uniffi(name = "ApplyOptions")
)]
pub struct ApplyOptionsRecord {
    /// Also apply paths the turn's file policy asks about (a person confirmed them); denied
    /// paths are always refused.
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default = false))]
    pub confirm_asks: bool,
    /// Who applies it (`person:NAME`), recorded in the manifest and the audit row.
    #[serde(default)]
    #[cfg_attr(feature = "uniffi", uniffi(default = None))]
    pub by: Option<String>,
}

impl ApplyOptionsRecord {
    fn to_core(&self) -> ApplyOptions {
        ApplyOptions {
            confirm_asks: self.confirm_asks,
            by: self.by.clone(),
        }
    }
}

fn changes_beside(store: &str) -> ChangeStore {
    ChangeStore::beside(Path::new(store))
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
    if options.is_null() {
        return Ok(ApplyOptions::default());
    }
    Ok(from_value::<ApplyOptionsRecord>("options", options)?.to_core())
}

/// A change set's JSON (a manifest, or what another process handed over) checked against
/// the `ChangeSet` type and returned as turngate writes it: an unknown field, kind or status
/// is [`TurnGateError::InvalidInput`], never ignored.
pub fn parse(change_set: Value) -> Result<Value, TurnGateError> {
    let set: ChangeSet = from_value("change set", change_set)?;
    to_value("change set", &set)
}

/// Every change set of `changes`, oldest first (a list of `ChangeSet`).
pub(crate) fn list_in(changes: &ChangeStore) -> Result<Value, TurnGateError> {
    to_value("change sets", &changes.list()?)
}

/// The change set `id` of `changes` (a `ChangeSet`).
pub(crate) fn show_in(changes: &ChangeStore, id: &str) -> Result<Value, TurnGateError> {
    to_value("change set", &changes.get(id)?)
}

/// Apply change set `id` of `changes`, verified against and recorded in `audit`.
pub(crate) fn apply_in(
    changes: &ChangeStore,
    audit: &dyn AuditStore,
    id: &str,
    options: &ApplyOptionsRecord,
) -> Result<Value, TurnGateError> {
    to_value(
        "change set",
        &changes.apply(id, &options.to_core(), Some(audit))?,
    )
}

/// Discard change set `id` of `changes`, recorded in `audit`.
pub(crate) fn discard_in(
    changes: &ChangeStore,
    audit: &dyn AuditStore,
    id: &str,
    by: Option<&str>,
) -> Result<Value, TurnGateError> {
    to_value("change set", &changes.discard(id, by, Some(audit))?)
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
