//! The embedded SQLite audit store: WAL, group commit, two durability levels (DESIGN §19).
//!
//! One write connection, behind a lock. Appenders queue jobs, then take the lock; whoever
//! holds it is the batch's leader: it takes every job queued, runs them in one
//! `BEGIN IMMEDIATE` transaction, commits, and answers each appender before it lets go. So an
//! append that returned is committed to the WAL, a lone appender commits on its own thread
//! (no hand-off to another thread and back), and concurrent appenders share commits: those
//! that queue while a leader commits are the next leader's batch. Async appenders
//! ([`SqliteAuditStore::append_async`]) never block their runtime: a committer thread leads
//! for them. With [`Durability::Process`] (the default, `synchronous=NORMAL`) a commit is in
//! the WAL file, which survives any kill of the process; with [`Durability::Power`]
//! (`synchronous=FULL`) each commit is also fsynced, which survives a power loss. Reads use
//! their own connection and see committed data only.
//!
//! [`SqliteAuditStore::memory`] is the same store in memory, for tests: one connection for
//! reads and writes, nothing survives the process.

use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OpenFlags, OptionalExtension, TransactionBehavior, params};
use serde::de::DeserializeOwned;

use crate::action::Action;
use crate::approval::TurnPermissionApprovalRequest;
use crate::audit::{
    AuditError, AuditStore, Consumed, Durability, PendingAppend, StoredApproval, StoredResolution,
    TurnPermissionAuditEvent,
};
use crate::protocol::TurnExecutionSecuritySnapshot;

/// The schema version this build writes (`PRAGMA user_version`).
pub const SCHEMA_VERSION: i64 = 5;

/// Migration `i` takes the schema from version `i` to `i + 1`.
const MIGRATIONS: [&str; 5] = [
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
    // 2 -> 3: events say what happened (timestamp, target, tool, rule, layer, decider, the
    // reviewer's words); approvals keep their snapshot and whether an allow_once was spent.
    // Older events get their timestamp from the recorded milliseconds.
    "ALTER TABLE audit_events ADD COLUMN timestamp TEXT;
    ALTER TABLE audit_events ADD COLUMN target TEXT;
    ALTER TABLE audit_events ADD COLUMN tool_name TEXT;
    ALTER TABLE audit_events ADD COLUMN rule TEXT;
    ALTER TABLE audit_events ADD COLUMN layer TEXT;
    ALTER TABLE audit_events ADD COLUMN decider TEXT;
    ALTER TABLE audit_events ADD COLUMN message TEXT;
    UPDATE audit_events SET timestamp =
        strftime('%Y-%m-%dT%H:%M:%f', recorded_at_ms / 1000.0, 'unixepoch') || 'Z';
    ALTER TABLE approvals ADD COLUMN snapshot_json TEXT;
    ALTER TABLE approvals ADD COLUMN resolution_message TEXT;
    ALTER TABLE approvals ADD COLUMN resolution_decider TEXT;
    ALTER TABLE approvals ADD COLUMN used_at_ms INTEGER;",
    // 3 -> 4: what a policy's log-only layers would have decided.
    "ALTER TABLE audit_events ADD COLUMN would TEXT;",
    // 4 -> 5: whether a deferred shell command was asked to run with reviewable writes (a
    // resume must run it reviewed). Older requests were not.
    "ALTER TABLE approvals ADD COLUMN review INTEGER NOT NULL DEFAULT 0;",
];

/// The most jobs one transaction takes.
const MAX_BATCH: usize = 4096;

/// How often [`SqliteAuditStore::wait_resolved`] looks for a resolution that another process
/// recorded.
pub const WAIT_POLL: Duration = Duration::from_millis(100);

/// The path an in-memory store reports.
const MEMORY: &str = ":memory:";

/// How long a connection waits for another process's write lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

enum Op {
    Append(Box<TurnPermissionAuditEvent>),
    SavePending {
        id: String,
        turn_id: String,
        request_json: String,
        action_json: String,
        snapshot_json: Option<String>,
        review: bool,
    },
    Resolve {
        id: String,
        resolution: StoredResolution,
    },
    Consume {
        id: String,
    },
}

enum Reply {
    Seq(u64),
    Unit,
    Resolved(StoredResolution, bool),
    Consumed(Consumed),
}

type ReplyFn = Box<dyn FnOnce(Result<Reply, AuditError>) + Send>;

struct Job {
    op: Op,
    reply: ReplyFn,
}

/// The embedded audit store over one SQLite file. See the module documentation.
pub struct SqliteAuditStore {
    path: String,
    shared: Arc<Shared>,
    /// Wakes the committer thread, which leads batches for async appenders.
    wake: Option<mpsc::Sender<()>>,
    committer: Option<JoinHandle<()>>,
    /// The read connection; `None` for the in-memory store, which reads on the writer's.
    reader: Option<Mutex<Connection>>,
}

/// What appenders share: the queue, the write connection, and a commit counter.
struct Shared {
    path: String,
    queue: Mutex<Vec<Job>>,
    writer: Mutex<Connection>,
    /// Bumped after every batch that committed something; [`SqliteAuditStore::wait_resolved`]
    /// waits for it to change.
    commits: tokio::sync::watch::Sender<u64>,
}

impl Shared {
    fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn push(&self, job: Job) {
        Self::lock(&self.queue).push(job);
    }

    /// Lead a batch: wait for the write connection, then commit the jobs queued now (one
    /// transaction per [`MAX_BATCH`]), answering each before letting go of the connection.
    /// So once this returns, every job queued before it was called has been answered: by
    /// this batch, or by an earlier leader that took it (and answered it before it let go).
    /// Jobs queued meanwhile are their appenders' next batch: a sync appender leads it
    /// itself, an async one has woken the committer thread.
    fn lead(&self) {
        let mut conn = Self::lock(&self.writer);
        let mut jobs = std::mem::take(&mut *Self::lock(&self.queue));
        if jobs.is_empty() {
            return;
        }
        while !jobs.is_empty() {
            let rest = jobs.split_off(jobs.len().min(MAX_BATCH));
            commit_batch(&mut conn, &self.path, jobs);
            jobs = rest;
        }
        self.commits.send_modify(|c| *c = c.wrapping_add(1));
    }
}

impl std::fmt::Debug for SqliteAuditStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteAuditStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

pub(crate) fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or_default()
}

/// `us` microseconds after the Unix epoch as UTC RFC 3339 with six fractional digits.
pub(crate) fn rfc3339_micros(us: i64) -> String {
    jiff::Timestamp::from_microsecond(us)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string())
        .unwrap_or_else(|_| "1970-01-01T00:00:00.000000Z".to_owned())
}

impl SqliteAuditStore {
    /// Open (creating if needed) the store at `path`, migrating an older schema.
    ///
    /// A store written by a newer schema is refused with [`AuditError::SchemaTooNew`] and left
    /// untouched.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, AuditError> {
        Self::open_durable(path, Durability::default())
    }

    /// [`SqliteAuditStore::open`] with an explicit [`Durability`].
    pub fn open_durable(
        path: impl AsRef<Path>,
        durability: Durability,
    ) -> Result<Self, AuditError> {
        Self::open_with(path.as_ref(), OpenFlags::default(), durability)
    }

    /// Open the store at `path` only if it exists (migrating an older schema): for commands
    /// that read history, where a mistyped path must be an error, not an empty store.
    /// A missing file is [`AuditError::Missing`]; nothing is created.
    pub fn open_existing(path: impl AsRef<Path>) -> Result<Self, AuditError> {
        let path = path.as_ref();
        if !path.is_file() {
            return Err(AuditError::Missing(path.display().to_string()));
        }
        Self::open_with(
            path,
            OpenFlags::default() - OpenFlags::SQLITE_OPEN_CREATE,
            Durability::default(),
        )
    }

    fn open_with(
        path: &Path,
        flags: OpenFlags,
        durability: Durability,
    ) -> Result<Self, AuditError> {
        let path_str = path.display().to_string();
        let sql = |source| AuditError::Sqlite {
            path: path_str.clone(),
            source,
        };
        let mut writer = Connection::open_with_flags(path, flags).map_err(sql)?;
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
        // Switching to WAL takes an exclusive lock and SQLite does not wait on the busy handler
        // for it: a second process opening a new store at the same moment would fail with
        // "database is locked". Retry that (only that) until the busy timeout.
        let started = Instant::now();
        let mode: String = loop {
            match writer.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0)) {
                Err(rusqlite::Error::SqliteFailure(f, _))
                    if matches!(
                        f.code,
                        rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                    ) && started.elapsed() < BUSY_TIMEOUT =>
                {
                    std::thread::sleep(Duration::from_millis(5));
                }
                other => break other.map_err(sql)?,
            }
        };
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(AuditError::Corrupt {
                path: path_str,
                what: "journal mode".to_owned(),
                message: format!("could not switch to WAL (got `{mode}`)"),
            });
        }
        let synchronous = match durability {
            Durability::Process => "PRAGMA synchronous = NORMAL;",
            Durability::Power => "PRAGMA synchronous = FULL;",
        };
        writer.execute_batch(synchronous).map_err(sql)?;
        migrate(&mut writer, &path_str)?;

        let reader = Connection::open_with_flags(path, flags).map_err(sql)?;
        reader.busy_timeout(BUSY_TIMEOUT).map_err(sql)?;
        Self::start(path_str, writer, Some(reader))
    }

    /// A store in memory, for tests and throwaway turns: the same schema and semantics as a
    /// file store (group commit, first resolution wins, spent once), one connection for reads
    /// and writes, and nothing kept after the store is dropped. Its [`AuditStore::local_dir`]
    /// is `None`, so reviewable writes (whose change sets live beside a store file) are
    /// refused with it.
    pub fn memory() -> Result<Self, AuditError> {
        let path_str = MEMORY.to_owned();
        let sql = |source| AuditError::Sqlite {
            path: path_str.clone(),
            source,
        };
        let mut conn = Connection::open_in_memory().map_err(sql)?;
        migrate(&mut conn, &path_str)?;
        Self::start(path_str, conn, None)
    }

    fn start(
        path: String,
        writer: Connection,
        reader: Option<Connection>,
    ) -> Result<Self, AuditError> {
        let shared = Arc::new(Shared {
            path: path.clone(),
            queue: Mutex::new(Vec::new()),
            writer: Mutex::new(writer),
            commits: tokio::sync::watch::Sender::new(0),
        });
        let (wake, woken) = mpsc::channel::<()>();
        let for_committer = Arc::clone(&shared);
        let committer = std::thread::Builder::new()
            .name("turngate-audit-writer".to_owned())
            .spawn(move || {
                // Lead for async appenders; on close, commit what is left and stop.
                while woken.recv().is_ok() {
                    for_committer.lead();
                }
                for_committer.lead();
            })
            .map_err(|e| AuditError::Corrupt {
                path: path.clone(),
                what: "writer thread".to_owned(),
                message: e.to_string(),
            })?;
        Ok(SqliteAuditStore {
            path,
            shared,
            wake: Some(wake),
            committer: Some(committer),
            reader: reader.map(Mutex::new),
        })
    }

    /// The store's file (`:memory:` for [`SqliteAuditStore::memory`]).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Queue `op` and commit it: as the batch's leader when the write connection is free,
    /// else in the batch of whoever holds it. Returns once the batch holding `op` committed.
    fn run(&self, op: Op) -> Result<Reply, AuditError> {
        if self.wake.is_none() {
            return Err(AuditError::WriterStopped(self.path.clone()));
        }
        let (tx, rx) = mpsc::sync_channel(1);
        self.shared.push(Job {
            op,
            reply: Box::new(move |r| {
                let _ = tx.send(r);
            }),
        });
        // Lead (or wait for the leader that took this job): once `lead` returns, the answer
        // is there.
        self.shared.lead();
        rx.recv()
            .unwrap_or_else(|_| Err(AuditError::WriterStopped(self.path.clone())))
    }

    /// [`AuditStore::append`] for async hosts: waits without blocking the runtime thread (the
    /// store's committer thread leads the batch).
    pub async fn append_async(&self, event: TurnPermissionAuditEvent) -> Result<u64, AuditError> {
        let wake = self
            .wake
            .as_ref()
            .ok_or_else(|| AuditError::WriterStopped(self.path.clone()))?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.shared.push(Job {
            op: Op::Append(Box::new(event)),
            reply: Box::new(move |r| {
                let _ = tx.send(r);
            }),
        });
        wake.send(())
            .map_err(|_| AuditError::WriterStopped(self.path.clone()))?;
        match rx.await {
            Ok(Ok(Reply::Seq(seq))) => Ok(seq),
            Ok(Ok(_)) => Err(self.unexpected()),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(AuditError::WriterStopped(self.path.clone())),
        }
    }

    /// Wait until the stored approval `request_id` is resolved, by this process or another on
    /// the same file, or until `timeout` passes (`None`: no limit). Returns the approval as
    /// stored then: resolved, or still pending when the timeout passed. A resolution recorded
    /// through this store wakes the wait at once; one recorded by another process is seen
    /// within [`WAIT_POLL`]. An unknown id is [`AuditError::UnknownRequest`]. Dropping the
    /// future stops the wait.
    pub async fn wait_resolved(
        &self,
        request_id: &str,
        timeout: Option<Duration>,
    ) -> Result<StoredApproval, AuditError> {
        let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
        let mut commits = self.shared.commits.subscribe();
        loop {
            commits.borrow_and_update();
            let approval = self
                .approval(request_id)?
                .ok_or_else(|| AuditError::UnknownRequest(request_id.to_owned()))?;
            if approval.resolution.is_some() {
                return Ok(approval);
            }
            let mut poll = tokio::time::Instant::now() + WAIT_POLL;
            if let Some(deadline) = deadline {
                if tokio::time::Instant::now() >= deadline {
                    return Ok(approval);
                }
                poll = poll.min(deadline);
            }
            tokio::select! {
                _ = commits.changed() => {}
                () = tokio::time::sleep_until(poll) => {}
            }
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
        match &self.reader {
            Some(reader) => Shared::lock(reader),
            None => Shared::lock(&self.shared.writer),
        }
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
        let resolution = match row.resolution {
            Some(r) => Some(StoredResolution {
                resolution: self.decode_wire("approvals.resolution", &r)?,
                reason: row.reason.unwrap_or_default(),
                message: row.message,
                decider: row.decider,
            }),
            None => None,
        };
        let snapshot: Option<TurnExecutionSecuritySnapshot> = row
            .snapshot_json
            .map(|json| self.decode("approvals.snapshot_json", &json))
            .transpose()?;
        Ok(StoredApproval {
            request,
            action,
            resolution,
            snapshot: snapshot.map(Box::new),
            used: row.used_at_ms.is_some(),
            review: row.review,
        })
    }
}

impl Drop for SqliteAuditStore {
    fn drop(&mut self) {
        // Closing the channel lets the committer finish queued jobs and exit.
        self.wake.take();
        if let Some(handle) = self.committer.take() {
            let _ = handle.join();
        }
    }
}

struct ApprovalRow {
    request_json: String,
    action_json: String,
    resolution: Option<String>,
    reason: Option<String>,
    message: Option<String>,
    decider: Option<String>,
    snapshot_json: Option<String>,
    used_at_ms: Option<i64>,
    review: bool,
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
    let now = now_us();
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

fn apply(tx: &rusqlite::Transaction<'_>, op: &Op, now_us: i64) -> Result<Reply, rusqlite::Error> {
    let now_ms = now_us / 1000;
    match op {
        Op::Append(e) => {
            let seq: i64 = tx
                .prepare_cached(
                    "SELECT COALESCE(MAX(seq), 0) + 1 FROM audit_events WHERE turn_id = ?1",
                )?
                .query_row([&e.turn_id], |r| r.get(0))?;
            let timestamp = e
                .timestamp
                .clone()
                .unwrap_or_else(|| rfc3339_micros(now_us));
            tx.prepare_cached(
                "INSERT INTO audit_events (turn_id, seq, kind, profile_mode, profile_source,
                    item_id, tool_id, action_kind, request_key, decision, reason,
                    cached_approval_used, recorded_at_ms, timestamp, target, tool_name, rule,
                    layer, decider, message, would)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16,
                    ?17, ?18, ?19, ?20, ?21)",
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
                now_ms,
                timestamp,
                e.target,
                e.tool_name,
                e.rule,
                e.layer,
                e.decider,
                e.message,
                e.would,
            ])?;
            Ok(Reply::Seq(u64::try_from(seq).unwrap_or_default()))
        }
        Op::SavePending {
            id,
            turn_id,
            request_json,
            action_json,
            snapshot_json,
            review,
        } => {
            tx.prepare_cached(
                "INSERT INTO approvals (request_id, turn_id, request_json, action_json,
                    created_at_ms, snapshot_json, review)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            )?
            .execute(params![
                id,
                turn_id,
                request_json,
                action_json,
                now_ms,
                snapshot_json,
                review
            ])?;
            Ok(Reply::Unit)
        }
        Op::Resolve { id, resolution } => {
            let changed = tx
                .prepare_cached(
                    "UPDATE approvals SET resolution = ?2, resolution_reason = ?3,
                        resolved_at_ms = ?4, resolution_message = ?5, resolution_decider = ?6
                     WHERE request_id = ?1 AND resolution IS NULL",
                )?
                .execute(params![
                    id,
                    resolution.resolution.as_str(),
                    resolution.reason,
                    now_ms,
                    resolution.message,
                    resolution.decider,
                ])?;
            type Recorded = (String, Option<String>, Option<String>, Option<String>);
            let recorded: Option<Recorded> = tx
                .prepare_cached(
                    "SELECT resolution, resolution_reason, resolution_message, resolution_decider
                     FROM approvals WHERE request_id = ?1",
                )?
                .query_row([id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
                .optional()?;
            match recorded {
                Some((r, reason, message, decider)) => Ok(Reply::Resolved(
                    StoredResolution {
                        resolution: wire_resolution(&r)?,
                        reason: reason.unwrap_or_default(),
                        message,
                        decider,
                    },
                    changed == 1,
                )),
                None => Err(rusqlite::Error::QueryReturnedNoRows),
            }
        }
        Op::Consume { id } => {
            // One UPDATE decides the race: SQLite serializes writers (BEGIN IMMEDIATE), so
            // across threads and processes exactly one caller sees a changed row.
            let spent = tx
                .prepare_cached(
                    "UPDATE approvals SET used_at_ms = ?2
                     WHERE request_id = ?1 AND resolution IN ('allow_once', 'allow_for_turn')
                       AND used_at_ms IS NULL",
                )?
                .execute(params![id, now_ms])?;
            if spent == 1 {
                return Ok(Reply::Consumed(Consumed::Spent));
            }
            let row: Option<(Option<String>, Option<i64>)> = tx
                .prepare_cached(
                    "SELECT resolution, used_at_ms FROM approvals WHERE request_id = ?1",
                )?
                .query_row([id], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            match row {
                None => Err(rusqlite::Error::QueryReturnedNoRows),
                Some((Some(r), Some(_))) if r == "allow_once" || r == "allow_for_turn" => {
                    Ok(Reply::Consumed(Consumed::AlreadyUsed))
                }
                Some(_) => Ok(Reply::Consumed(Consumed::NotApproved)),
            }
        }
    }
}

fn wire_resolution(r: &str) -> Result<crate::approval::ApprovalResolution, rusqlite::Error> {
    serde_json::from_value(serde_json::Value::String(r.to_owned())).map_err(|_| {
        rusqlite::Error::InvalidColumnType(
            0,
            format!("resolution `{r}`"),
            rusqlite::types::Type::Text,
        )
    })
}

const EVENT_COLUMNS: &str = "turn_id, seq, kind, profile_mode, profile_source, item_id, tool_id,
    action_kind, request_key, decision, reason, cached_approval_used, timestamp, target,
    tool_name, rule, layer, decider, message, would";

/// One `audit_events` row as read, before its wire names are decoded.
struct EventRow {
    turn_id: String,
    seq: i64,
    kind: String,
    profile_mode: String,
    profile_source: String,
    item_id: Option<String>,
    tool_id: Option<String>,
    action_kind: Option<String>,
    request_key: Option<String>,
    decision: Option<String>,
    reason: Option<String>,
    cached_approval_used: bool,
    timestamp: Option<String>,
    target: Option<String>,
    tool_name: Option<String>,
    rule: Option<String>,
    layer: Option<String>,
    decider: Option<String>,
    message: Option<String>,
    would: Option<String>,
}

impl EventRow {
    fn read(r: &rusqlite::Row<'_>) -> Result<Self, rusqlite::Error> {
        Ok(EventRow {
            turn_id: r.get(0)?,
            seq: r.get(1)?,
            kind: r.get(2)?,
            profile_mode: r.get(3)?,
            profile_source: r.get(4)?,
            item_id: r.get(5)?,
            tool_id: r.get(6)?,
            action_kind: r.get(7)?,
            request_key: r.get(8)?,
            decision: r.get(9)?,
            reason: r.get(10)?,
            cached_approval_used: r.get(11)?,
            timestamp: r.get(12)?,
            target: r.get(13)?,
            tool_name: r.get(14)?,
            rule: r.get(15)?,
            layer: r.get(16)?,
            decider: r.get(17)?,
            message: r.get(18)?,
            would: r.get(19)?,
        })
    }
}

const APPROVAL_COLUMNS: &str = "request_json, action_json, resolution, resolution_reason,
    resolution_message, resolution_decider, snapshot_json, used_at_ms, review";

impl ApprovalRow {
    fn read(r: &rusqlite::Row<'_>) -> Result<Self, rusqlite::Error> {
        Ok(ApprovalRow {
            request_json: r.get(0)?,
            action_json: r.get(1)?,
            resolution: r.get(2)?,
            reason: r.get(3)?,
            message: r.get(4)?,
            decider: r.get(5)?,
            snapshot_json: r.get(6)?,
            used_at_ms: r.get(7)?,
            review: r.get(8)?,
        })
    }
}

impl AuditStore for SqliteAuditStore {
    fn local_dir(&self) -> Option<std::path::PathBuf> {
        let path = Path::new(&self.path);
        if self.path.is_empty() || self.path == ":memory:" {
            return None;
        }
        let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
        // The store's directory as the sandbox sees roots (canonical); a directory that
        // cannot be resolved is returned as given, so a check against the roots still runs.
        let dir = parent.unwrap_or(Path::new("."));
        Some(std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf()))
    }

    fn append(&self, event: TurnPermissionAuditEvent) -> Result<u64, AuditError> {
        match self.run(Op::Append(Box::new(event)))? {
            Reply::Seq(seq) => Ok(seq),
            _ => Err(self.unexpected()),
        }
    }

    fn append_start(&self, event: TurnPermissionAuditEvent) -> PendingAppend {
        let Some(wake) = self.wake.as_ref() else {
            return PendingAppend::done(Err(AuditError::WriterStopped(self.path.clone())));
        };
        let (tx, rx) = mpsc::sync_channel(1);
        let unexpected = self.unexpected();
        self.shared.push(Job {
            op: Op::Append(Box::new(event)),
            reply: Box::new(move |r| {
                let _ = tx.send(match r {
                    Ok(Reply::Seq(seq)) => Ok(seq),
                    Ok(_) => Err(unexpected),
                    Err(e) => Err(e),
                });
            }),
        });
        if wake.send(()).is_err() {
            return PendingAppend::done(Err(AuditError::WriterStopped(self.path.clone())));
        }
        PendingAppend::waiting(rx, self.path.clone())
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
        let rows: Vec<EventRow> = {
            let conn = self.reader();
            conn.prepare_cached(&format!(
                "SELECT {EVENT_COLUMNS} FROM audit_events WHERE turn_id = ?1 ORDER BY seq"
            ))
            .and_then(|mut stmt| {
                stmt.query_map([turn_id], EventRow::read)
                    .and_then(|rows| rows.collect())
            })
            .map_err(|e| self.sql(e))?
        };
        rows.into_iter()
            .map(|r| {
                Ok(TurnPermissionAuditEvent {
                    turn_id: r.turn_id,
                    seq: u64::try_from(r.seq).unwrap_or_default(),
                    kind: self.decode_wire("audit_events.kind", &r.kind)?,
                    profile_mode: self.decode_wire("audit_events.profile_mode", &r.profile_mode)?,
                    profile_source: self
                        .decode_wire("audit_events.profile_source", &r.profile_source)?,
                    item_id: r.item_id,
                    tool_id: r.tool_id,
                    action_kind: r
                        .action_kind
                        .map(|k| self.decode_wire("audit_events.action_kind", &k))
                        .transpose()?,
                    request_key: r.request_key,
                    decision: r
                        .decision
                        .map(|d| self.decode_wire("audit_events.decision", &d))
                        .transpose()?,
                    reason: r.reason,
                    cached_approval_used: r.cached_approval_used,
                    timestamp: r.timestamp,
                    target: r.target,
                    tool_name: r.tool_name,
                    rule: r.rule,
                    layer: r.layer,
                    decider: r.decider,
                    message: r.message,
                    would: r.would,
                })
            })
            .collect()
    }

    fn save_pending(
        &self,
        request: &TurnPermissionApprovalRequest,
        action: &Action,
        snapshot: Option<&TurnExecutionSecuritySnapshot>,
        review: bool,
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
            snapshot_json: snapshot
                .map(|s| encode("snapshot", serde_json::to_string(s)))
                .transpose()?,
            review,
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
            conn.prepare_cached(&format!(
                "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE request_id = ?1"
            ))
            .and_then(|mut s| s.query_row([request_id], ApprovalRow::read).optional())
            .map_err(|e| self.sql(e))?
        };
        row.map(|r| self.stored_approval(r)).transpose()
    }

    fn pending_approvals(&self) -> Result<Vec<StoredApproval>, AuditError> {
        let rows: Vec<ApprovalRow> = {
            let conn = self.reader();
            conn.prepare_cached(&format!(
                "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE resolution IS NULL ORDER BY rowid"
            ))
            .and_then(|mut s| {
                s.query_map([], ApprovalRow::read)
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

    fn consume(&self, request_id: &str) -> Result<Consumed, AuditError> {
        match self.run(Op::Consume {
            id: request_id.to_owned(),
        }) {
            Ok(Reply::Consumed(c)) => Ok(c),
            Ok(_) => Err(self.unexpected()),
            Err(AuditError::Sqlite {
                source: rusqlite::Error::QueryReturnedNoRows,
                ..
            }) => Err(AuditError::UnknownRequest(request_id.to_owned())),
            Err(e) => Err(e),
        }
    }
}
