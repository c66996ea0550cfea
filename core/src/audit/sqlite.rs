//! The embedded SQLite audit store: WAL, `synchronous=FULL`, group commit.
//!
//! One writer thread owns the write connection. Appenders hand it jobs through a channel; it
//! takes every job queued, runs them in one `BEGIN IMMEDIATE` transaction, commits (one fsync
//! for the whole batch), and only then answers each appender. So an append that returned is
//! on disk, and concurrent appenders share fsyncs. Reads use their own connection and see
//! committed data only.

use std::path::Path;
use std::sync::mpsc;
use std::sync::{Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::de::DeserializeOwned;

use crate::action::Action;
use crate::approval::TurnPermissionApprovalRequest;
use crate::audit::{
    AuditError, AuditStore, StoredApproval, StoredResolution, TurnPermissionAuditEvent,
};

/// The schema version this build writes (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 2;

/// Migration `i` takes the schema from version `i` to `i + 1`.
const MIGRATIONS: [&str; 2] = [
    // 0 -> 1: audit events.
    "CREATE TABLE audit_events (
        turn_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        kind TEXT NOT NULL,
        profile_mode TEXT NOT NULL,
        profile_source TEXT NOT NULL,
        item_id TEXT,
        tool_id TEXT,
        action_kind TEXT,
        request_key TEXT,
        decision TEXT,
        reason TEXT,
        cached_approval_used INTEGER NOT NULL,
        recorded_at_ms INTEGER NOT NULL,
        PRIMARY KEY (turn_id, seq)
    );",
    // 1 -> 2: deferred approvals, persisted with exactly what was shown.
    "CREATE TABLE approvals (
        request_id TEXT PRIMARY KEY,
        turn_id TEXT NOT NULL,
        request_json TEXT NOT NULL,
        action_json TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL,
        resolution TEXT,
        resolution_reason TEXT,
        resolved_at_ms INTEGER
    );
    CREATE INDEX approvals_unresolved ON approvals (resolution) WHERE resolution IS NULL;",
];

/// The most jobs one transaction takes.
const MAX_BATCH: usize = 4096;

/// How long a connection waits for another process's write lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

enum Op {
    Append(TurnPermissionAuditEvent),
    SavePending {
        id: String,
        turn_id: String,
        request_json: String,
        action_json: String,
    },
    Resolve {
        id: String,
        resolution: StoredResolution,
    },
}

enum Reply {
    Seq(u64),
    Unit,
    Resolved(StoredResolution, bool),
}

type ReplyFn = Box<dyn FnOnce(Result<Reply, AuditError>) + Send>;

struct Job {
    op: Op,
    reply: ReplyFn,
}

/// The embedded audit store over one SQLite file. See the module documentation.
pub struct SqliteAuditStore {
    path: String,
    jobs: Option<mpsc::Sender<Job>>,
    writer: Option<JoinHandle<()>>,
    reader: Mutex<Connection>,
}

impl std::fmt::Debug for SqliteAuditStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteAuditStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or_default()
}

impl SqliteAuditStore {
    /// Open (creating if needed) the store at `path`, migrating an older schema.
    ///
    /// A store written by a newer schema is refused with [`AuditError::SchemaTooNew`] and left
    /// untouched.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, AuditError> {
        let path_str = path.as_ref().display().to_string();
        let sql = |source| AuditError::Sqlite {
            path: path_str.clone(),
            source,
        };
        let mut writer = Connection::open(path.as_ref()).map_err(sql)?;
        writer.busy_timeout(BUSY_TIMEOUT).map_err(sql)?;
        // Check the version before anything writes to the file.
        let found: i64 = writer
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(sql)?;
        if found > SCHEMA_VERSION {
            return Err(AuditError::SchemaTooNew {
                path: path_str,
                found,
                supported: SCHEMA_VERSION,
            });
        }
        let mode: String = writer
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(sql)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(AuditError::Corrupt {
                path: path_str,
                what: "journal mode".to_owned(),
                message: format!("could not switch to WAL (got `{mode}`)"),
            });
        }
        writer
            .execute_batch("PRAGMA synchronous = FULL;")
            .map_err(sql)?;
        migrate(&mut writer, &path_str)?;

        let reader = Connection::open(path.as_ref()).map_err(sql)?;
        reader.busy_timeout(BUSY_TIMEOUT).map_err(sql)?;

        let (tx, rx) = mpsc::channel::<Job>();
        let writer_path = path_str.clone();
        let handle = std::thread::Builder::new()
            .name("turngate-audit-writer".to_owned())
            .spawn(move || run_writer(writer, &writer_path, &rx))
            .map_err(|e| AuditError::Corrupt {
                path: path_str.clone(),
                what: "writer thread".to_owned(),
                message: e.to_string(),
            })?;
        Ok(SqliteAuditStore {
            path: path_str,
            jobs: Some(tx),
            writer: Some(handle),
            reader: Mutex::new(reader),
        })
    }

    /// The store's file.
    pub fn path(&self) -> &str {
        &self.path
    }

    fn submit(&self, op: Op, reply: ReplyFn) -> Result<(), AuditError> {
        let jobs = self
            .jobs
            .as_ref()
            .ok_or_else(|| AuditError::WriterStopped(self.path.clone()))?;
        jobs.send(Job { op, reply })
            .map_err(|_| AuditError::WriterStopped(self.path.clone()))
    }

    fn run(&self, op: Op) -> Result<Reply, AuditError> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.submit(
            op,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        )?;
        rx.recv()
            .map_err(|_| AuditError::WriterStopped(self.path.clone()))?
    }

    /// [`AuditStore::append`] for async hosts: waits without blocking the runtime thread.
    pub async fn append_async(&self, event: TurnPermissionAuditEvent) -> Result<u64, AuditError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.submit(
            Op::Append(event),
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        )?;
        match rx.await {
            Ok(Ok(Reply::Seq(seq))) => Ok(seq),
            Ok(Ok(_)) => Err(self.unexpected()),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(AuditError::WriterStopped(self.path.clone())),
        }
    }

    fn unexpected(&self) -> AuditError {
        AuditError::Corrupt {
            path: self.path.clone(),
            what: "writer reply".to_owned(),
            message: "the writer answered a different operation".to_owned(),
        }
    }

    fn reader(&self) -> MutexGuard<'_, Connection> {
        self.reader.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn sql(&self, source: rusqlite::Error) -> AuditError {
        AuditError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    fn decode<T: DeserializeOwned>(&self, what: &str, text: &str) -> Result<T, AuditError> {
        serde_json::from_str(text).map_err(|e| AuditError::Corrupt {
            path: self.path.clone(),
            what: what.to_owned(),
            message: e.to_string(),
        })
    }

    fn decode_wire<T: DeserializeOwned>(&self, what: &str, text: &str) -> Result<T, AuditError> {
        serde_json::from_value(serde_json::Value::String(text.to_owned())).map_err(|e| {
            AuditError::Corrupt {
                path: self.path.clone(),
                what: what.to_owned(),
                message: e.to_string(),
            }
        })
    }

    fn stored_approval(&self, row: ApprovalRow) -> Result<StoredApproval, AuditError> {
        let request = self.decode("approvals.request_json", &row.request_json)?;
        let action = self.decode("approvals.action_json", &row.action_json)?;
        let resolution = match (row.resolution, row.reason) {
            (Some(r), reason) => Some(StoredResolution {
                resolution: self.decode_wire("approvals.resolution", &r)?,
                reason: reason.unwrap_or_default(),
            }),
            (None, _) => None,
        };
        Ok(StoredApproval {
            request,
            action,
            resolution,
        })
    }
}

impl Drop for SqliteAuditStore {
    fn drop(&mut self) {
        // Closing the channel lets the writer finish queued jobs and exit.
        self.jobs.take();
        if let Some(handle) = self.writer.take() {
            let _ = handle.join();
        }
    }
}

struct ApprovalRow {
    request_json: String,
    action_json: String,
    resolution: Option<String>,
    reason: Option<String>,
}

fn migrate(conn: &mut Connection, path: &str) -> Result<(), AuditError> {
    let sql = |source| AuditError::Sqlite {
        path: path.to_owned(),
        source,
    };
    loop {
        let tx = conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(sql)?;
        // Re-read under the write lock: another process may have migrated meanwhile.
        let version: i64 = tx
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(sql)?;
        if version > SCHEMA_VERSION {
            return Err(AuditError::SchemaTooNew {
                path: path.to_owned(),
                found: version,
                supported: SCHEMA_VERSION,
            });
        }
        let Some(step) = usize::try_from(version)
            .ok()
            .and_then(|v| MIGRATIONS.get(v))
        else {
            return Ok(());
        };
        tx.execute_batch(step).map_err(sql)?;
        tx.execute_batch(&format!("PRAGMA user_version = {}", version + 1))
            .map_err(sql)?;
        tx.commit().map_err(sql)?;
    }
}

fn run_writer(mut conn: Connection, path: &str, jobs: &mpsc::Receiver<Job>) {
    // Adaptive group commit: when the previous batch had k appenders, they are usually about
    // to append again, so wait (at most half a commit's time, and never more than 2 ms) for
    // up to k jobs before committing, instead of committing whoever happened to be queued.
    // A lone appender (k = 1) never waits.
    let mut expect = 1usize;
    let mut last_commit = Duration::ZERO;
    while let Ok(first) = jobs.recv() {
        let mut batch = vec![first];
        let deadline = Instant::now() + last_commit.min(Duration::from_millis(2));
        while batch.len() < MAX_BATCH {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(mpsc::TryRecvError::Empty) if batch.len() < expect => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    match jobs.recv_timeout(left) {
                        Ok(job) => batch.push(job),
                        Err(_) => break,
                    }
                }
                Err(_) => break,
            }
        }
        expect = batch.len();
        let started = Instant::now();
        commit_batch(&mut conn, path, batch);
        last_commit = started.elapsed();
    }
}

fn commit_batch(conn: &mut Connection, path: &str, batch: Vec<Job>) {
    let sql = |source| AuditError::Sqlite {
        path: path.to_owned(),
        source,
    };
    let tx = match conn.transaction_with_behavior(TransactionBehavior::Immediate) {
        Ok(tx) => tx,
        Err(e) => {
            let message = e.to_string();
            for job in batch {
                (job.reply)(Err(commit_failed(path, &message)));
            }
            return;
        }
    };
    let now = now_ms();
    let mut results = Vec::with_capacity(batch.len());
    let mut replies = Vec::with_capacity(batch.len());
    for job in batch {
        results.push(apply(&tx, &job.op, now).map_err(sql));
        replies.push(job.reply);
    }
    match tx.commit() {
        Ok(()) => {
            for (reply, result) in replies.into_iter().zip(results) {
                reply(result);
            }
        }
        Err(e) => {
            let message = e.to_string();
            for reply in replies {
                reply(Err(commit_failed(path, &message)));
            }
        }
    }
}

fn commit_failed(path: &str, message: &str) -> AuditError {
    AuditError::Corrupt {
        path: path.to_owned(),
        what: "commit".to_owned(),
        message: format!("the batch was not recorded: {message}"),
    }
}

fn apply(tx: &rusqlite::Transaction<'_>, op: &Op, now: i64) -> Result<Reply, rusqlite::Error> {
    match op {
        Op::Append(e) => {
            let seq: i64 = tx
                .prepare_cached(
                    "SELECT COALESCE(MAX(seq), 0) + 1 FROM audit_events WHERE turn_id = ?1",
                )?
                .query_row([&e.turn_id], |r| r.get(0))?;
            tx.prepare_cached(
                "INSERT INTO audit_events (turn_id, seq, kind, profile_mode, profile_source,
                    item_id, tool_id, action_kind, request_key, decision, reason,
                    cached_approval_used, recorded_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
            )?
            .execute(params![
                e.turn_id,
                seq,
                e.kind.as_str(),
                e.profile_mode.as_str(),
                e.profile_source.as_str(),
                e.item_id,
                e.tool_id,
                e.action_kind.map(|k| k.as_str()),
                e.request_key,
                e.decision.map(|d| d.as_str()),
                e.reason,
                e.cached_approval_used,
                now,
            ])?;
            Ok(Reply::Seq(u64::try_from(seq).unwrap_or_default()))
        }
        Op::SavePending {
            id,
            turn_id,
            request_json,
            action_json,
        } => {
            tx.prepare_cached(
                "INSERT INTO approvals (request_id, turn_id, request_json, action_json, created_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![id, turn_id, request_json, action_json, now])?;
            Ok(Reply::Unit)
        }
        Op::Resolve { id, resolution } => {
            let changed = tx
                .prepare_cached(
                    "UPDATE approvals SET resolution = ?2, resolution_reason = ?3, resolved_at_ms = ?4
                     WHERE request_id = ?1 AND resolution IS NULL",
                )?
                .execute(params![
                    id,
                    resolution.resolution.as_str(),
                    resolution.reason,
                    now
                ])?;
            let recorded: Option<(String, Option<String>)> = tx
                .prepare_cached(
                    "SELECT resolution, resolution_reason FROM approvals WHERE request_id = ?1",
                )?
                .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            match recorded {
                Some((r, reason)) => {
                    let resolution = serde_json::from_value(serde_json::Value::String(r.clone()))
                        .map_err(|_| {
                        rusqlite::Error::InvalidColumnType(
                            0,
                            format!("resolution `{r}`"),
                            rusqlite::types::Type::Text,
                        )
                    })?;
                    Ok(Reply::Resolved(
                        StoredResolution {
                            resolution,
                            reason: reason.unwrap_or_default(),
                        },
                        changed == 1,
                    ))
                }
                None => Err(rusqlite::Error::QueryReturnedNoRows),
            }
        }
    }
}

impl AuditStore for SqliteAuditStore {
    fn append(&self, event: TurnPermissionAuditEvent) -> Result<u64, AuditError> {
        match self.run(Op::Append(event))? {
            Reply::Seq(seq) => Ok(seq),
            _ => Err(self.unexpected()),
        }
    }

    fn turns(&self) -> Result<Vec<String>, AuditError> {
        let conn = self.reader();
        let mut stmt = conn
            .prepare_cached("SELECT turn_id FROM audit_events GROUP BY turn_id ORDER BY MIN(rowid)")
            .map_err(|e| self.sql(e))?;
        let rows: Result<Vec<String>, rusqlite::Error> = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .map_err(|e| self.sql(e))?
            .collect();
        rows.map_err(|e| self.sql(e))
    }

    fn replay(&self, turn_id: &str) -> Result<Vec<TurnPermissionAuditEvent>, AuditError> {
        let conn = self.reader();
        let mut stmt = conn
            .prepare_cached(
                "SELECT turn_id, seq, kind, profile_mode, profile_source, item_id, tool_id,
                    action_kind, request_key, decision, reason, cached_approval_used
                 FROM audit_events WHERE turn_id = ?1 ORDER BY seq",
            )
            .map_err(|e| self.sql(e))?;
        type Row = (
            String,
            i64,
            String,
            String,
            String,
            Option<String>,
            Option<String>,
            Option<String>,
            Option<String>,
            Option<String>,
            Option<String>,
            bool,
        );
        let rows: Vec<Row> = stmt
            .query_map([turn_id], |r| {
                Ok((
                    r.get(0)?,
                    r.get(1)?,
                    r.get(2)?,
                    r.get(3)?,
                    r.get(4)?,
                    r.get(5)?,
                    r.get(6)?,
                    r.get(7)?,
                    r.get(8)?,
                    r.get(9)?,
                    r.get(10)?,
                    r.get(11)?,
                ))
            })
            .and_then(|rows| rows.collect())
            .map_err(|e| self.sql(e))?;
        rows.into_iter()
            .map(|r| {
                Ok(TurnPermissionAuditEvent {
                    turn_id: r.0,
                    seq: u64::try_from(r.1).unwrap_or_default(),
                    kind: self.decode_wire("audit_events.kind", &r.2)?,
                    profile_mode: self.decode_wire("audit_events.profile_mode", &r.3)?,
                    profile_source: self.decode_wire("audit_events.profile_source", &r.4)?,
                    item_id: r.5,
                    tool_id: r.6,
                    action_kind: r
                        .7
                        .map(|k| self.decode_wire("audit_events.action_kind", &k))
                        .transpose()?,
                    request_key: r.8,
                    decision: r
                        .9
                        .map(|d| self.decode_wire("audit_events.decision", &d))
                        .transpose()?,
                    reason: r.10,
                    cached_approval_used: r.11,
                })
            })
            .collect()
    }

    fn save_pending(
        &self,
        request: &TurnPermissionApprovalRequest,
        action: &Action,
    ) -> Result<(), AuditError> {
        let encode = |what: &str, r: serde_json::Result<String>| {
            r.map_err(|e| AuditError::Corrupt {
                path: self.path.clone(),
                what: what.to_owned(),
                message: e.to_string(),
            })
        };
        let op = Op::SavePending {
            id: request.id.clone(),
            turn_id: request.turn_id.clone(),
            request_json: encode("request", serde_json::to_string(request))?,
            action_json: encode("action", serde_json::to_string(action))?,
        };
        match self.run(op) {
            Ok(Reply::Unit) => Ok(()),
            Ok(_) => Err(self.unexpected()),
            Err(AuditError::Sqlite {
                source: rusqlite::Error::SqliteFailure(f, _),
                ..
            }) if f.code == rusqlite::ErrorCode::ConstraintViolation => {
                Err(AuditError::DuplicateRequest(request.id.clone()))
            }
            Err(e) => Err(e),
        }
    }

    fn approval(&self, request_id: &str) -> Result<Option<StoredApproval>, AuditError> {
        let row = {
            let conn = self.reader();
            conn.prepare_cached(
                "SELECT request_json, action_json, resolution, resolution_reason
                 FROM approvals WHERE request_id = ?1",
            )
            .and_then(|mut s| {
                s.query_row([request_id], |r| {
                    Ok(ApprovalRow {
                        request_json: r.get(0)?,
                        action_json: r.get(1)?,
                        resolution: r.get(2)?,
                        reason: r.get(3)?,
                    })
                })
                .optional()
            })
            .map_err(|e| self.sql(e))?
        };
        row.map(|r| self.stored_approval(r)).transpose()
    }

    fn pending_approvals(&self) -> Result<Vec<StoredApproval>, AuditError> {
        let rows: Vec<ApprovalRow> = {
            let conn = self.reader();
            conn.prepare_cached(
                "SELECT request_json, action_json, resolution, resolution_reason
                 FROM approvals WHERE resolution IS NULL ORDER BY rowid",
            )
            .and_then(|mut s| {
                s.query_map([], |r| {
                    Ok(ApprovalRow {
                        request_json: r.get(0)?,
                        action_json: r.get(1)?,
                        resolution: r.get(2)?,
                        reason: r.get(3)?,
                    })
                })
                .and_then(|rows| rows.collect())
            })
            .map_err(|e| self.sql(e))?
        };
        rows.into_iter().map(|r| self.stored_approval(r)).collect()
    }

    fn resolve(
        &self,
        request_id: &str,
        resolution: StoredResolution,
    ) -> Result<(StoredResolution, bool), AuditError> {
        match self.run(Op::Resolve {
            id: request_id.to_owned(),
            resolution,
        }) {
            Ok(Reply::Resolved(r, applied)) => Ok((r, applied)),
            Ok(_) => Err(self.unexpected()),
            Err(AuditError::Sqlite {
                source: rusqlite::Error::QueryReturnedNoRows,
                ..
            }) => Err(AuditError::UnknownRequest(request_id.to_owned())),
            Err(e) => Err(e),
        }
    }
}
