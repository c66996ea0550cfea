//! The durable audit log: every permission decision of a turn, in order, and the approvals
//! still waiting for a person.
//!
//! This module records and replays; it never decides. [`AuditStore`] is the seam a shared
//! server database can fill later; [`SqliteAuditStore`] is the embedded store (WAL, group
//! commit: an append returns only once its batch is committed, so an event reported as
//! recorded survives a kill of the process; [`Durability::Power`] also fsyncs each commit).

mod redact;
mod sqlite;

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::action::{Action, ActionKind};
use crate::approval::{ApprovalResolution, TurnPermissionApprovalRequest};
use crate::policy::PermissionMode;
use crate::protocol::TurnExecutionSecuritySnapshot;

/// How durable an append is once it returned (DESIGN §19).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    /// WAL with `synchronous=NORMAL` (the default): a committed append is in the WAL file and
    /// survives any kill of the process (the kill -9 tests); a power loss may lose the last
    /// commits, never corrupt the store.
    #[default]
    Process,
    /// `synchronous=FULL`: every group commit is fsynced before the appenders hear back, so a
    /// returned append survives a power loss.
    Power,
}

pub use redact::{REDACTED, Redactor, redact_default};
pub use sqlite::{SCHEMA_VERSION, SqliteAuditStore};

/// Now, as an audit event's timestamp: UTC, RFC 3339 with microseconds.
pub fn now_rfc3339() -> String {
    sqlite::rfc3339_micros(sqlite::now_us())
}

/// Where a turn's permission profile came from: the protocol's own type, so audit rows and
/// snapshots share one set of wire names.
pub use crate::protocol::TurnPermissionProfileSource as ProfileSource;

/// What an audit event records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AuditEventKind {
    /// A turn's effective permission profile was materialized and persisted.
    ProfileSelected,
    /// A tool action was allowed by policy or by a cached approval.
    DecisionAllowed,
    /// A tool action was denied by policy.
    DecisionDenied,
    /// A tool action required a person's approval.
    ApprovalRequested,
    /// A resolution was applied to an approval request.
    ApprovalResolved,
    /// A reviewed command's writes were recorded as a change set (`request_key` is its id).
    ChangesRecorded,
    /// A change set was applied to the workspace.
    ChangesApplied,
    /// A change set was discarded; the workspace was never touched.
    ChangesDiscarded,
    /// Applying a change set was refused (conflicts, the file policy, tampering); `reason`
    /// says which and `message` names the paths.
    ChangesRefused,
}

impl AuditEventKind {
    /// The snake_case wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            AuditEventKind::ProfileSelected => "profile_selected",
            AuditEventKind::DecisionAllowed => "decision_allowed",
            AuditEventKind::DecisionDenied => "decision_denied",
            AuditEventKind::ApprovalRequested => "approval_requested",
            AuditEventKind::ApprovalResolved => "approval_resolved",
            AuditEventKind::ChangesRecorded => "changes_recorded",
            AuditEventKind::ChangesApplied => "changes_applied",
            AuditEventKind::ChangesDiscarded => "changes_discarded",
            AuditEventKind::ChangesRefused => "changes_refused",
        }
    }
}

impl fmt::Display for AuditEventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The decision an audit event records: a policy effect, or an approval resolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AuditDecision {
    /// Allowed (policy or cached approval).
    Allow,
    /// Needs approval.
    Ask,
    /// Denied (policy, or a `deny` resolution).
    Deny,
    /// Resolved `allow_once`.
    AllowOnce,
    /// Resolved `allow_for_turn`.
    AllowForTurn,
    /// Resolved `cancelled`.
    Cancelled,
    /// Resolved `expired`.
    Expired,
}

impl AuditDecision {
    /// The snake_case wire name.
    pub const fn as_str(self) -> &'static str {
        match self {
            AuditDecision::Allow => "allow",
            AuditDecision::Ask => "ask",
            AuditDecision::Deny => "deny",
            AuditDecision::AllowOnce => "allow_once",
            AuditDecision::AllowForTurn => "allow_for_turn",
            AuditDecision::Cancelled => "cancelled",
            AuditDecision::Expired => "expired",
        }
    }
}

impl From<ApprovalResolution> for AuditDecision {
    fn from(r: ApprovalResolution) -> Self {
        match r {
            ApprovalResolution::AllowOnce => AuditDecision::AllowOnce,
            ApprovalResolution::AllowForTurn => AuditDecision::AllowForTurn,
            ApprovalResolution::Deny => AuditDecision::Deny,
            ApprovalResolution::Cancelled => AuditDecision::Cancelled,
            ApprovalResolution::Expired => AuditDecision::Expired,
        }
    }
}

/// One durable audit row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnPermissionAuditEvent {
    /// The turn.
    pub turn_id: String,
    /// Position in the turn, from 1. Assigned by the store on append (the value passed in is
    /// ignored).
    pub seq: u64,
    /// What happened.
    pub kind: AuditEventKind,
    /// The turn's permission mode.
    pub profile_mode: PermissionMode,
    /// Where the turn's profile came from.
    pub profile_source: ProfileSource,
    /// The turn item, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub item_id: Option<String>,
    /// The tool call, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_id: Option<String>,
    /// The action kind (absent for `profile_selected`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action_kind: Option<ActionKind>,
    /// The approval request id, for approval events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_key: Option<String>,
    /// The decision (absent for `profile_selected`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<AuditDecision>,
    /// Why, machine-readable (a verdict reason such as `deny_rule`, or a resolution source
    /// such as `responder`, `policy_denied`, `cached_grant`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// True when an earlier `allow_for_turn` grant let the action through without a prompt.
    #[serde(default)]
    pub cached_approval_used: bool,
    /// When the event happened: UTC, RFC 3339 with microseconds (`2026-12-01T07:21:44.123456Z`).
    /// The store fills it on append when it is absent; rows migrated from a store older than
    /// schema 3 carry millisecond precision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp: Option<String>,
    /// The target as decided: the normalized form the checker judged (resolved path,
    /// `host:port`, the command line), with secret-looking substrings redacted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The tool's name, when the caller gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_name: Option<String>,
    /// The deciding rule's pattern, when a rule decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The deciding layer (`defaults`, a layer name, a cap's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer: Option<String>,
    /// Who decided: `policy`, `cached_grant`, `approver`, or `person:<name>` when a client
    /// named the person who resolved the request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decider: Option<String>,
    /// The approver's or reviewer's own words, verbatim (a denial's reason, a resolution note).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// What the policy's log-only layers would have decided, in words, when it differs from
    /// the decision (`deny by rule `curl` (deny_rule) in layer `trial``).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub would: Option<String>,
}

impl TurnPermissionAuditEvent {
    /// An event of `kind` for `turn_id` with every optional field empty and `seq` 0 (the store
    /// assigns it).
    pub fn new(
        turn_id: impl Into<String>,
        kind: AuditEventKind,
        profile_mode: PermissionMode,
        profile_source: ProfileSource,
    ) -> Self {
        TurnPermissionAuditEvent {
            turn_id: turn_id.into(),
            seq: 0,
            kind,
            profile_mode,
            profile_source,
            item_id: None,
            tool_id: None,
            action_kind: None,
            request_key: None,
            decision: None,
            reason: None,
            cached_approval_used: false,
            timestamp: None,
            target: None,
            tool_name: None,
            rule: None,
            layer: None,
            decider: None,
            message: None,
            would: None,
        }
    }

    /// The JSON Schema of this type.
    pub fn json_schema() -> serde_json::Value {
        serde_json::to_value(schemars::schema_for!(TurnPermissionAuditEvent)).unwrap_or_default()
    }
}

/// A request waiting for a decision, persisted with exactly what the person was shown and the
/// action that will run when it is approved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StoredApproval {
    /// The request as shown.
    pub request: TurnPermissionApprovalRequest,
    /// The action that runs if it is approved.
    pub action: Action,
    /// The recorded resolution, once there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<StoredResolution>,
    /// The snapshot the request was made under. A resumed request runs under it (intersected
    /// with the resuming caller's, never wider). Absent only for requests stored before
    /// schema 3: those cannot be run, only resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<Box<TurnExecutionSecuritySnapshot>>,
    /// True once an `allow_once` approval was spent: its action ran (see
    /// [`AuditStore::consume`]).
    #[serde(default)]
    pub used: bool,
    /// True when the shell command was asked to run with reviewable writes (DESIGN §18): once
    /// approved it runs only through the reviewed path (`Gate::resume_spawn_reviewed`), never
    /// directly on the workspace. False for requests stored before schema 5.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub review: bool,
}

/// A resolution recorded for a stored approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StoredResolution {
    /// The resolution applied.
    pub resolution: ApprovalResolution,
    /// Why, machine-readable (`responder`, `policy_denied`, ...).
    pub reason: String,
    /// The reviewer's own words, verbatim, when they gave any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Who resolved it (`approver`, `person:<name>`, `policy`), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decider: Option<String>,
}

impl StoredResolution {
    /// A resolution with a machine-readable `reason` and no reviewer words.
    pub fn new(resolution: ApprovalResolution, reason: impl Into<String>) -> Self {
        StoredResolution {
            resolution,
            reason: reason.into(),
            message: None,
            decider: None,
        }
    }
}

/// What [`AuditStore::consume`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Consumed {
    /// This call spent the approval of the request's own action: run it now, exactly once.
    Spent,
    /// The request's action already ran through an earlier resume (by this or another
    /// process).
    AlreadyUsed,
    /// The request is unresolved, or resolved as something other than an approval.
    NotApproved,
}

/// An audit store operation failed. Each variant says which input or file was at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AuditError {
    /// The database could not be opened, read or written.
    #[error("audit store {path}: {source}")]
    Sqlite {
        /// The store's file.
        path: String,
        /// The SQLite error.
        #[source]
        source: rusqlite::Error,
    },
    /// The store was written by a newer turngate (schema `found`; this build knows up to
    /// `supported`). It is left untouched.
    #[error(
        "audit store {path} has schema version {found}, newer than this build supports ({supported}); upgrade turngate to open it"
    )]
    SchemaTooNew {
        /// The store's file.
        path: String,
        /// The version found in the file.
        found: i64,
        /// The newest version this build knows.
        supported: i64,
    },
    /// A stored row could not be decoded (`what` names the column).
    #[error("audit store {path}: corrupt {what}: {message}")]
    Corrupt {
        /// The store's file.
        path: String,
        /// The row or column.
        what: String,
        /// What was wrong.
        message: String,
    },
    /// The store file does not exist (a command that only reads history never creates one).
    #[error("audit store {0} does not exist (check the path; only `turngate run` creates a store)")]
    Missing(String),
    /// No approval with this request id is stored.
    #[error("no stored approval request `{0}`")]
    UnknownRequest(String),
    /// An approval with this request id is already stored.
    #[error("approval request `{0}` is already stored")]
    DuplicateRequest(String),
    /// The store's writer has stopped (the store was closed or its thread failed).
    #[error("audit store {0}: the writer has stopped")]
    WriterStopped(String),
}

/// An append started with [`AuditStore::append_start`]: [`PendingAppend::wait`] returns what
/// [`AuditStore::append`] would have, once the event is durable (or why it is not).
#[derive(Debug)]
pub struct PendingAppend(Pending);

#[derive(Debug)]
enum Pending {
    Done(Result<u64, AuditError>),
    Waiting {
        reply: std::sync::mpsc::Receiver<Result<u64, AuditError>>,
        store: String,
    },
}

impl PendingAppend {
    /// An append that already finished.
    pub fn done(result: Result<u64, AuditError>) -> Self {
        PendingAppend(Pending::Done(result))
    }

    /// An append whose answer arrives on `reply` (from the store `store`).
    pub(crate) fn waiting(
        reply: std::sync::mpsc::Receiver<Result<u64, AuditError>>,
        store: String,
    ) -> Self {
        PendingAppend(Pending::Waiting { reply, store })
    }

    /// Block until the append is durable; its seq, or the error that kept it from the store.
    pub fn wait(self) -> Result<u64, AuditError> {
        match self.0 {
            Pending::Done(result) => result,
            Pending::Waiting { reply, store } => reply
                .recv()
                .unwrap_or(Err(AuditError::WriterStopped(store))),
        }
    }
}

/// Durable storage for audit events and deferred approvals. Object-safe; an embedded SQLite
/// file ([`SqliteAuditStore`]) or a shared server database can implement it.
///
/// Every method blocks until its write is durable; call it from a blocking context (or
/// `spawn_blocking`) in an async host.
pub trait AuditStore: Send + Sync + fmt::Debug {
    /// Append `event`, assigning the next `seq` of its turn. Returns the assigned seq once the
    /// event is durable.
    fn append(&self, event: TurnPermissionAuditEvent) -> Result<u64, AuditError>;

    /// Start appending `event` and return without waiting for the disk: the event takes its
    /// place in the store's order now (before any later append through this store), and
    /// [`PendingAppend::wait`] says when it is durable. By default the append happens here,
    /// synchronously; the SQLite store hands it to its committer thread.
    fn append_start(&self, event: TurnPermissionAuditEvent) -> PendingAppend {
        PendingAppend::done(self.append(event))
    }

    /// The events of `turn_id`, in seq order.
    fn replay(&self, turn_id: &str) -> Result<Vec<TurnPermissionAuditEvent>, AuditError>;

    /// Every turn id with events, oldest first (by its first recorded event).
    fn turns(&self) -> Result<Vec<String>, AuditError>;

    /// Persist a pending approval with exactly the request shown, the action it covers, the
    /// snapshot it was made under (what a resume runs under), and whether its command is to
    /// run with reviewable writes (`review`, read back as [`StoredApproval::review`]: a store
    /// that cannot keep it must fail here, not drop it).
    fn save_pending(
        &self,
        request: &TurnPermissionApprovalRequest,
        action: &Action,
        snapshot: Option<&TurnExecutionSecuritySnapshot>,
        review: bool,
    ) -> Result<(), AuditError>;

    /// The stored approval `request_id`, resolved or not.
    fn approval(&self, request_id: &str) -> Result<Option<StoredApproval>, AuditError>;

    /// Every stored approval without a resolution, oldest first.
    fn pending_approvals(&self) -> Result<Vec<StoredApproval>, AuditError>;

    /// Record a resolution for `request_id`. The first one wins: returns the resolution that
    /// is recorded (this one, or the earlier one) and whether this call recorded it.
    fn resolve(
        &self,
        request_id: &str,
        resolution: StoredResolution,
    ) -> Result<(StoredResolution, bool), AuditError>;

    /// Spend an approved request's own action, atomically: of any number of racing callers
    /// (threads or processes on one store), exactly one gets [`Consumed::Spent`]; the rest
    /// get [`Consumed::AlreadyUsed`]. `allow_for_turn` is spent the same way: its grant
    /// answers the turn's *later* matching actions live, but the stored request's action
    /// runs once, however often it is resumed (red team 4 F8).
    fn consume(&self, request_id: &str) -> Result<Consumed, AuditError>;

    /// The directory holding the store's files on this machine, when it is a local file (the
    /// gate hides it from sandboxed commands that could otherwise rewrite it). `None` by
    /// default: a store elsewhere is out of the command's reach.
    fn local_dir(&self) -> Option<std::path::PathBuf> {
        None
    }
}
