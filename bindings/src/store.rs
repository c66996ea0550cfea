//! The durable audit and approval store: open a SQLite file, replay a turn's events, list turns
//! and pending approvals, resolve a stored approval. Events and approvals cross as JSON values
//! in their protocol shape. Every call blocks until the store answers; bindings run it off
//! their event loop.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use turngate::approval::ApprovalResolution;
use turngate::audit::{
    AuditStore, Durability, SqliteAuditStore, StoredResolution, TurnPermissionAuditEvent,
};
use turngate::changes::ChangeStore;

use crate::TurnGateError;
use crate::convert::{from_value, to_value};

/// An open audit store, shared by gates and clients.
#[derive(Debug)]
pub struct StoreHandle {
    store: Arc<SqliteAuditStore>,
}

/// What [`StoreHandle::resolve`] recorded.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct StoreResolveRecord {
    /// The resolution now recorded (this call's, or an earlier one that won).
    pub resolution: String,
    /// Its reason.
    pub reason: String,
    /// True when this call recorded it.
    pub applied: bool,
}

impl StoreHandle {
    /// Open (creating if needed) the SQLite store at `path`, with the default durability
    /// (`process`). `:memory:` is [`StoreHandle::memory`].
    pub fn open(path: &str) -> Result<Arc<Self>, TurnGateError> {
        Self::open_durable(path, None)
    }

    /// [`StoreHandle::open`] with a durability level: `process` (the default: WAL with
    /// `synchronous=NORMAL`, every recorded event survives a kill of the process) or `power`
    /// (an fsync per group commit, it also survives a power loss). Any other name is
    /// `InvalidInput` naming it.
    pub fn open_durable(path: &str, durability: Option<&str>) -> Result<Arc<Self>, TurnGateError> {
        let durability = match durability {
            None => Durability::default(),
            Some(name) => crate::convert::from_value("durability", Value::String(name.to_owned()))?,
        };
        if path == ":memory:" {
            if durability == Durability::Power {
                return Err(TurnGateError::invalid(
                    "durability",
                    "`power` needs a store file; an in-memory store keeps nothing",
                ));
            }
            return Self::memory();
        }
        Ok(Arc::new(StoreHandle {
            store: Arc::new(SqliteAuditStore::open_durable(path, durability)?),
        }))
    }

    /// A store in memory, for tests and throwaway turns: the file store's semantics, nothing
    /// kept after the last reference is dropped. Its path is `:memory:`; reviewable writes are
    /// refused with it (their change sets live beside a store file).
    pub fn memory() -> Result<Arc<Self>, TurnGateError> {
        Ok(Arc::new(StoreHandle {
            store: Arc::new(SqliteAuditStore::memory()?),
        }))
    }

    /// Wait until the stored approval `request_id` is resolved (through this store at once, by
    /// another process within 100 ms) or `timeout_ms` passes (`None`: no limit), and return it
    /// (`{"request", "action", "resolution"?}`): resolved, or still pending after the timeout.
    /// An unknown id is an error. Dropping the future stops the wait.
    pub async fn wait_resolved(
        &self,
        request_id: &str,
        timeout_ms: Option<u64>,
    ) -> Result<Value, TurnGateError> {
        let timeout = timeout_ms.map(std::time::Duration::from_millis);
        let approval = self.store.wait_resolved(request_id, timeout).await?;
        to_value("approval", &approval)
    }

    /// Another handle on the same open store.
    pub(crate) fn share(&self) -> StoreHandle {
        StoreHandle {
            store: Arc::clone(&self.store),
        }
    }

    /// The store's file path.
    pub fn path(&self) -> String {
        self.store.path().to_owned()
    }

    /// The store as the core's trait object (for the gate).
    pub fn as_audit_store(&self) -> Arc<dyn AuditStore> {
        Arc::clone(&self.store) as Arc<dyn AuditStore>
    }

    /// Append a `TurnPermissionAuditEvent`; returns its assigned seq.
    pub fn append(&self, event: Value) -> Result<u64, TurnGateError> {
        let event: TurnPermissionAuditEvent = from_value("event", event)?;
        Ok(self.store.append(event)?)
    }

    /// The events of `turn_id` in seq order, as a list of `TurnPermissionAuditEvent`.
    pub fn replay(&self, turn_id: &str) -> Result<Value, TurnGateError> {
        to_value("events", &self.store.replay(turn_id)?)
    }

    /// Re-decide every recorded decision under `policy` as a candidate (`turngate replay`):
    /// the `ReplayReport` of the decisions that flip. `options` is a `ReplayOptions`
    /// (`{"turn"?, "since"?, "workspace"?}`) or null.
    pub fn replay_policy(
        &self,
        policy: &crate::PolicyHandle,
        options: Value,
    ) -> Result<Value, TurnGateError> {
        let options = crate::policy::replay_options(options)?;
        let report = turngate::tooling::replay(self.store.as_ref(), policy.compiled(), &options)?;
        to_value("report", &report)
    }

    /// Every turn id with events, oldest first.
    pub fn turns(&self) -> Result<Vec<String>, TurnGateError> {
        Ok(self.store.turns()?)
    }

    /// Every stored approval without a resolution (`{"request", "action"}`), oldest first.
    pub fn pending_approvals(&self) -> Result<Value, TurnGateError> {
        to_value("approvals", &self.store.pending_approvals()?)
    }

    /// The stored approval `request_id` (`{"request", "action", "resolution"?}`), or none.
    pub fn approval(&self, request_id: &str) -> Result<Option<Value>, TurnGateError> {
        self.store
            .approval(request_id)?
            .map(|a| to_value("approval", &a))
            .transpose()
    }

    /// The change sets beside this store (`<dir of the store>/changes/`), where a gate on it
    /// records a reviewed spawn's writes. A store with no directory keeps none: refused
    /// (`Changes`, code `unavailable`).
    pub(crate) fn change_store(&self) -> Result<ChangeStore, TurnGateError> {
        if self.store.local_dir().is_none() {
            return Err(TurnGateError::Changes {
                code: "unavailable".to_owned(),
                message: format!(
                    "reviewable writes need an audit store on disk (the change sets live beside \
                     it and are sealed in it), not `{}`",
                    self.store.path()
                ),
                paths: Vec::new(),
            });
        }
        Ok(ChangeStore::beside(Path::new(self.store.path())))
    }

    /// Every change set recorded beside this store, oldest first (a list of `ChangeSet`).
    pub fn change_sets(&self) -> Result<Value, TurnGateError> {
        crate::changes::list_in(&self.change_store()?)
    }

    /// The change set `id` (a `ChangeSet`, with a unified diff per text file). An id that is
    /// not a change set id (`../x`) is refused (code `bad_id`), an unknown one `not_found`.
    pub fn change_set(&self, id: &str) -> Result<Value, TurnGateError> {
        crate::changes::show_in(&self.change_store()?, id)
    }

    /// Apply change set `id` to the workspace, all or nothing: its seal is verified against
    /// this store, every path re-checked against the turn's file policy and compared with the
    /// workspace's state at the end of the run. A refusal (conflicts, the policy, tampering, a
    /// second apply) is [`TurnGateError::Changes`] with its code and paths, and nothing in the
    /// workspace changed. Returns the applied `ChangeSet`.
    pub fn apply_change_set(
        &self,
        id: &str,
        options: &crate::changes::ApplyOptionsRecord,
    ) -> Result<Value, TurnGateError> {
        crate::changes::apply_in(&self.change_store()?, self.store.as_ref(), id, options)
    }

    /// Discard change set `id`: its writes are dropped, the workspace was never touched; `by`
    /// is who discards it. Returns the discarded `ChangeSet`.
    pub fn discard_change_set(&self, id: &str, by: Option<&str>) -> Result<Value, TurnGateError> {
        crate::changes::discard_in(&self.change_store()?, self.store.as_ref(), id, by)
    }

    /// Record `resolution` (`allow_once`, `allow_for_turn`, `deny`, `cancelled`, `expired`)
    /// for a stored approval, first one wins. This records only; a gate's `resume` re-checks
    /// the action against the policy and runs it.
    pub fn resolve(
        &self,
        request_id: &str,
        resolution: &str,
        reason: &str,
    ) -> Result<StoreResolveRecord, TurnGateError> {
        let resolution: ApprovalResolution = resolution
            .parse()
            .map_err(|e| TurnGateError::invalid("resolution", e))?;
        let (recorded, applied) = self
            .store
            .resolve(request_id, StoredResolution::new(resolution, reason))?;
        Ok(StoreResolveRecord {
            resolution: recorded.resolution.as_str().to_owned(),
            reason: recorded.reason,
            applied,
        })
    }
}
