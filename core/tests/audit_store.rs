//! The durable SQLite audit store: seq assignment, replay, group commit under concurrency,
//! schema versions, deferred approvals, and survival of SIGKILL (a real child process).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests assert by unwrapping

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::Arc;

use turngate::approval::{ApprovalResolution, TurnPermissionApprovalRequest};
use turngate::audit::{
    AuditDecision, AuditError, AuditEventKind, AuditStore, Consumed, ProfileSource, SCHEMA_VERSION,
    SqliteAuditStore, StoredResolution, TurnPermissionAuditEvent,
};
use turngate::{Action, ActionKind, PermissionMode, Reason};

const CHILD_ENV: &str = "TURNGATE_AUDIT_CHILD_STORE";

fn event(turn: &str, i: u64) -> TurnPermissionAuditEvent {
    let mut e = TurnPermissionAuditEvent::new(
        turn,
        AuditEventKind::DecisionAllowed,
        PermissionMode::Supervised,
        ProfileSource::Composer,
    );
    e.item_id = Some(format!("item-{i}"));
    e.tool_id = Some(format!("call-{i}"));
    e.action_kind = Some(ActionKind::FileRead);
    e.decision = Some(AuditDecision::Allow);
    e.reason = Some("allow_rule".into());
    e
}

#[test]
fn append_assigns_per_turn_seq_and_replay_returns_every_field_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteAuditStore::open(dir.path().join("audit.db")).unwrap();
    let mut full = TurnPermissionAuditEvent::new(
        "t1",
        AuditEventKind::ApprovalResolved,
        PermissionMode::AutoAcceptEdits,
        ProfileSource::InheritedFromParentTurn,
    );
    full.item_id = Some("item".into());
    full.tool_id = Some("tool".into());
    full.action_kind = Some(ActionKind::ShellCommand);
    full.request_key = Some("apr_1".into());
    full.decision = Some(AuditDecision::AllowForTurn);
    full.reason = Some("responder".into());
    full.cached_approval_used = true;
    full.timestamp = Some("2026-12-01T07:21:44.123456Z".into());
    full.target = Some("make test".into());
    full.tool_name = Some("bash".into());
    full.rule = Some("make *".into());
    full.layer = Some("project".into());
    full.decider = Some("person:alice".into());
    full.message = Some("fine, it only builds".into());
    full.seq = 999; // ignored: the store assigns

    assert_eq!(store.append(event("t1", 1)).unwrap(), 1);
    assert_eq!(store.append(event("t2", 1)).unwrap(), 1);
    assert_eq!(store.append(full.clone()).unwrap(), 2);
    let replay = store.replay("t1").unwrap();
    assert_eq!(replay.len(), 2);
    assert_eq!(replay[0].seq, 1);
    full.seq = 2;
    assert_eq!(replay[1], full);
    // An event appended without a timestamp gets the store's, RFC 3339 UTC with microseconds.
    let stamped = replay[0].timestamp.clone().unwrap_or_default();
    assert_eq!(
        stamped.len(),
        "2026-12-01T07:21:44.123456Z".len(),
        "{stamped}"
    );
    assert!(
        stamped.ends_with('Z') && stamped.as_bytes()[19] == b'.',
        "{stamped}"
    );
    assert_eq!(store.replay("t2").unwrap().len(), 1);
    assert!(store.replay("nope").unwrap().is_empty());
}

#[test]
fn concurrent_appenders_get_unique_gapless_seqs() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteAuditStore::open(dir.path().join("audit.db")).unwrap());
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                (0..100)
                    .map(|i| store.append(event("shared", t * 1000 + i)).unwrap())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut seqs: Vec<u64> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=800).collect::<Vec<_>>());
    let replay = store.replay("shared").unwrap();
    assert_eq!(replay.len(), 800);
    assert!(replay.windows(2).all(|w| w[0].seq + 1 == w[1].seq));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_appends_share_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteAuditStore::open(dir.path().join("audit.db")).unwrap());
    let tasks: Vec<_> = (0..64)
        .map(|i| {
            let store = Arc::clone(&store);
            tokio::spawn(async move { store.append_async(event("t", i)).await.unwrap() })
        })
        .collect();
    let mut seqs = Vec::new();
    for t in tasks {
        seqs.push(t.await.unwrap());
    }
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=64).collect::<Vec<_>>());
}

#[test]
fn a_store_from_a_newer_schema_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("future.db");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE future (x); PRAGMA user_version = 99;")
            .unwrap();
    }
    let err = SqliteAuditStore::open(&path).unwrap_err();
    assert!(
        matches!(err, AuditError::SchemaTooNew { found: 99, supported, .. } if supported == SCHEMA_VERSION),
        "{err}"
    );
    let msg = err.to_string();
    assert!(msg.contains("future.db") && msg.contains("99"), "{msg}");
    let conn = rusqlite::Connection::open(&path).unwrap();
    let v: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, 99);
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "delete", "the refused file was not switched to WAL");
}

#[test]
fn an_older_schema_is_migrated_and_keeps_its_events() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.db");
    {
        // The version-1 schema, as an older build wrote it.
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE audit_events (
                turn_id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL,
                profile_mode TEXT NOT NULL, profile_source TEXT NOT NULL, item_id TEXT,
                tool_id TEXT, action_kind TEXT, request_key TEXT, decision TEXT, reason TEXT,
                cached_approval_used INTEGER NOT NULL, recorded_at_ms INTEGER NOT NULL,
                PRIMARY KEY (turn_id, seq));
             INSERT INTO audit_events VALUES ('old', 1, 'profile_selected', 'supervised',
                'composer', NULL, NULL, NULL, NULL, NULL, NULL, 0, 0);
             PRAGMA user_version = 1;",
        )
        .unwrap();
    }
    let store = SqliteAuditStore::open(&path).unwrap();
    let replay = store.replay("old").unwrap();
    assert_eq!(replay.len(), 1);
    assert_eq!(replay[0].kind, AuditEventKind::ProfileSelected);
    assert_eq!(store.append(event("old", 2)).unwrap(), 2);
    // The version-2 table exists now.
    let action = Action::new(ActionKind::FileWrite, "a");
    let request =
        TurnPermissionApprovalRequest::for_action("old", &action, Reason::Default, None).unwrap();
    store.save_pending(&request, &action, None, false).unwrap();
    drop(store);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let v: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(v, SCHEMA_VERSION);
}

#[test]
fn a_version_2_store_migrates_forward_with_its_times_and_its_pending_requests() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v2.db");
    let action = Action::new(ActionKind::ShellCommand, "make");
    let request =
        TurnPermissionApprovalRequest::for_action("old", &action, Reason::Default, None).unwrap();
    {
        // The version-2 schema with one event (recorded 2025-11-30T10:00:00.250Z) and one
        // pending approval, as milestone 1 wrote them.
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "CREATE TABLE audit_events (
                turn_id TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL,
                profile_mode TEXT NOT NULL, profile_source TEXT NOT NULL, item_id TEXT,
                tool_id TEXT, action_kind TEXT, request_key TEXT, decision TEXT, reason TEXT,
                cached_approval_used INTEGER NOT NULL, recorded_at_ms INTEGER NOT NULL,
                PRIMARY KEY (turn_id, seq));
             INSERT INTO audit_events VALUES ('old', 1, 'decision_denied', 'supervised',
                'composer', NULL, NULL, 'file_write', NULL, 'deny', 'outside_roots', 0,
                1764496800250);
             CREATE TABLE approvals (
                request_id TEXT PRIMARY KEY, turn_id TEXT NOT NULL, request_json TEXT NOT NULL,
                action_json TEXT NOT NULL, created_at_ms INTEGER NOT NULL, resolution TEXT,
                resolution_reason TEXT, resolved_at_ms INTEGER);
             PRAGMA user_version = 2;",
        )
        .unwrap();
        conn.execute(
            "INSERT INTO approvals (request_id, turn_id, request_json, action_json, created_at_ms)
             VALUES (?1, 'old', ?2, ?3, 0)",
            rusqlite::params![
                request.id,
                serde_json::to_string(&request).unwrap(),
                serde_json::to_string(&action).unwrap()
            ],
        )
        .unwrap();
    }
    let store = SqliteAuditStore::open(&path).unwrap();
    let replay = store.replay("old").unwrap();
    assert_eq!(
        replay[0].timestamp.as_deref(),
        Some("2025-11-30T10:00:00.250Z")
    );
    assert_eq!(replay[0].reason.as_deref(), Some("outside_roots"));
    assert_eq!(replay[0].target, None);
    // The old pending request is still there, without a snapshot and unspent; it can be
    // resolved (and, lacking a snapshot, never run: see the gate tests).
    let stored = store.approval(&request.id).unwrap().unwrap();
    assert_eq!((stored.snapshot, stored.used), (None, false));
    // Requests from before schema 5 were never asked to run with review.
    assert!(!stored.review);
    assert_eq!(store.pending_approvals().unwrap().len(), 1);
    store
        .resolve(
            &request.id,
            StoredResolution::new(ApprovalResolution::AllowOnce, "responder"),
        )
        .unwrap();
    assert_eq!(store.consume(&request.id).unwrap(), Consumed::Spent);
    assert_eq!(store.consume(&request.id).unwrap(), Consumed::AlreadyUsed);
}

#[test]
fn opening_an_existing_store_never_creates_one() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no/such/dir/audit.db");
    let err = SqliteAuditStore::open_existing(&missing).unwrap_err();
    assert!(
        matches!(err, AuditError::Missing(ref p) if p.contains("no/such/dir")),
        "{err}"
    );
    assert!(!dir.path().join("no").exists());
    let path = dir.path().join("a.db");
    assert!(SqliteAuditStore::open_existing(&path).is_err());
    assert!(!path.exists());
    drop(SqliteAuditStore::open(&path).unwrap());
    let store = SqliteAuditStore::open_existing(&path).unwrap();
    assert!(store.turns().unwrap().is_empty());
}

#[test]
fn a_file_that_is_not_a_store_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("garbage.db");
    std::fs::write(&path, vec![0x42u8; 8192]).unwrap();
    let err = SqliteAuditStore::open(&path).unwrap_err();
    assert!(err.to_string().contains("garbage.db"), "{err}");
}

#[test]
fn pending_approvals_keep_what_was_shown_and_the_first_resolution_wins() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteAuditStore::open(dir.path().join("audit.db")).unwrap();
    let action = Action::new(ActionKind::ShellCommand, "cargo publish").with_tool("bash");
    let mut request =
        TurnPermissionApprovalRequest::for_action("t1", &action, Reason::AskRule, Some("/w"))
            .unwrap();
    request.summary = Some("Publish the crate".into());
    request.visible_thread_ids = vec!["thread-a".into(), "thread-b".into()];
    store.save_pending(&request, &action, None, false).unwrap();
    assert!(matches!(
        store.save_pending(&request, &action, None, false),
        Err(AuditError::DuplicateRequest(id)) if id == request.id
    ));
    let pending = store.pending_approvals().unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].request, request);
    assert_eq!(pending[0].action, action);

    let deny = StoredResolution::new(ApprovalResolution::Deny, "responder");
    let (recorded, applied) = store.resolve(&request.id, deny.clone()).unwrap();
    assert!(applied);
    assert_eq!(recorded, deny);
    let (recorded, applied) = store
        .resolve(
            &request.id,
            StoredResolution::new(ApprovalResolution::AllowOnce, "responder"),
        )
        .unwrap();
    assert!(!applied);
    assert_eq!(recorded, deny);
    assert!(store.pending_approvals().unwrap().is_empty());
    assert_eq!(
        store.approval(&request.id).unwrap().unwrap().resolution,
        Some(deny)
    );
    assert!(matches!(
        store.resolve("apr_missing", StoredResolution::new(ApprovalResolution::Deny, "")),
        Err(AuditError::UnknownRequest(id)) if id == "apr_missing"
    ));
}

/// Not a test on its own: the child side of the SIGKILL test. It appends forever and prints
/// each seq only after `append` returned.
#[test]
fn child_appender() {
    let Ok(path) = std::env::var(CHILD_ENV) else {
        return;
    };
    let store = Arc::new(SqliteAuditStore::open(&path).unwrap());
    // Several appenders, so batches hold more than one event when the kill lands.
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                let stdout = std::io::stdout();
                for i in 0.. {
                    let seq = store.append(event("killed", t * 1_000_000 + i)).unwrap();
                    let mut out = stdout.lock();
                    writeln!(out, "recorded {seq} item-{}", t * 1_000_000 + i).unwrap();
                    out.flush().unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
}

#[test]
fn every_event_reported_as_recorded_survives_sigkill() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("killed.db");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_appender",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut reported: Vec<(u64, String)> = Vec::new();
    while reported.len() < 300 {
        let line = lines.next().expect("child ended early").unwrap();
        if let Some((_, rest)) = line.split_once("recorded ") {
            let (seq, item) = rest.split_once(' ').unwrap();
            reported.push((seq.parse().unwrap(), item.to_owned()));
        }
    }
    child.kill().unwrap(); // SIGKILL on unix: no destructor, no flush, no checkpoint
    child.wait().unwrap();
    // Lines the child wrote before it died were reported too.
    for line in lines {
        let line = line.unwrap();
        if let Some((_, rest)) = line.split_once("recorded ") {
            let (seq, item) = rest.split_once(' ').unwrap();
            reported.push((seq.parse().unwrap(), item.to_owned()));
        }
    }

    let conn = rusqlite::Connection::open(&path).unwrap();
    let check: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(check, "ok");
    drop(conn);

    let store = SqliteAuditStore::open(&path).unwrap();
    let replay = store.replay("killed").unwrap();
    assert!(
        replay.windows(2).all(|w| w[0].seq + 1 == w[1].seq),
        "no gaps"
    );
    for (seq, item) in &reported {
        let e = replay
            .iter()
            .find(|e| e.seq == *seq)
            .unwrap_or_else(|| panic!("reported seq {seq} is missing after the kill"));
        assert_eq!(e.item_id.as_deref(), Some(item.as_str()));
    }
    // The store still takes appends after the crash.
    let next = store.append(event("killed", 0)).unwrap();
    assert_eq!(next, replay.len() as u64 + 1);
    eprintln!(
        "{} reported, {} on disk after SIGKILL",
        reported.len(),
        replay.len()
    );
}

#[test]
fn a_pending_request_keeps_whether_it_is_to_run_with_review() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.db");
    let action = Action::new(ActionKind::ShellCommand, "make").with_tool("bash");
    let reviewed =
        TurnPermissionApprovalRequest::for_action("t1", &action, Reason::AskRule, None).unwrap();
    let plain = TurnPermissionApprovalRequest::for_action(
        "t1",
        &Action::new(ActionKind::ShellCommand, "make check"),
        Reason::AskRule,
        None,
    )
    .unwrap();
    {
        let store = SqliteAuditStore::open(&path).unwrap();
        store.save_pending(&reviewed, &action, None, true).unwrap();
        store.save_pending(&plain, &action, None, false).unwrap();
    }
    // Read back by another connection (another process would see the same).
    let store = SqliteAuditStore::open_existing(&path).unwrap();
    assert!(store.approval(&reviewed.id).unwrap().unwrap().review);
    assert!(!store.approval(&plain.id).unwrap().unwrap().review);
    let pending = store.pending_approvals().unwrap();
    assert_eq!(
        pending.iter().map(|p| p.review).collect::<Vec<_>>(),
        [true, false]
    );
    // The flag crosses to the bindings in the stored request's JSON; absent means false.
    let json = serde_json::to_value(&pending).unwrap();
    assert_eq!(json[0]["review"], true);
    assert!(json[1].get("review").is_none(), "{}", json[1]);
    let back: Vec<turngate::audit::StoredApproval> = serde_json::from_value(json).unwrap();
    assert_eq!(back, pending);
}

fn pending(store: &SqliteAuditStore, turn: &str, line: &str) -> TurnPermissionApprovalRequest {
    let action = Action::new(ActionKind::ShellCommand, line).with_tool("bash");
    let request =
        TurnPermissionApprovalRequest::for_action(turn, &action, Reason::AskRule, Some("/w"))
            .unwrap();
    store.save_pending(&request, &action, None, false).unwrap();
    request
}

#[test]
fn the_memory_store_keeps_the_file_stores_semantics_and_nothing_on_disk() {
    let store = Arc::new(SqliteAuditStore::memory().unwrap());
    assert_eq!(store.path(), ":memory:");
    assert_eq!(store.local_dir(), None);
    // Seqs, replay, and concurrency through the one connection.
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                for i in 0..50 {
                    store.append(event("m", t * 100 + i)).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let replay = store.replay("m").unwrap();
    assert_eq!(
        replay.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=200).collect::<Vec<_>>()
    );
    // First resolution wins; spent once.
    let request = pending(&store, "m", "make");
    let allow = StoredResolution::new(ApprovalResolution::AllowOnce, "responder");
    assert!(store.resolve(&request.id, allow.clone()).unwrap().1);
    let deny = StoredResolution::new(ApprovalResolution::Deny, "responder");
    assert_eq!(store.resolve(&request.id, deny).unwrap(), (allow, false));
    assert_eq!(store.consume(&request.id).unwrap(), Consumed::Spent);
    assert_eq!(store.consume(&request.id).unwrap(), Consumed::AlreadyUsed);
    // Two memory stores are two databases.
    let other = SqliteAuditStore::memory().unwrap();
    assert!(other.replay("m").unwrap().is_empty());
    assert!(other.approval(&request.id).unwrap().is_none());
}

/// Sync appenders lead their own batches, async ones are led by the committer thread; mixed,
/// nobody is lost, nobody waits forever, and the seqs stay gapless.
#[test]
fn sync_and_async_appenders_mixed_all_commit() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteAuditStore::open(dir.path().join("audit.db")).unwrap());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let tasks: Vec<_> = (0..100)
        .map(|i| {
            let store = Arc::clone(&store);
            rt.spawn(async move { store.append_async(event("mix", i)).await.unwrap() })
        })
        .collect();
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                (0..100)
                    .map(|i| store.append(event("mix", 1000 + t * 100 + i)).unwrap())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut seqs: Vec<u64> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    for t in tasks {
        seqs.push(rt.block_on(t).unwrap());
    }
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=500).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_resolved_wakes_on_a_resolution_in_this_process_and_sees_another_processs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.db");
    let store = Arc::new(SqliteAuditStore::open(&path).unwrap());
    let request = pending(&store, "t", "make deploy");

    // Unresolved: a timeout returns the request still pending.
    let waited = store
        .wait_resolved(&request.id, Some(std::time::Duration::from_millis(30)))
        .await
        .unwrap();
    assert!(waited.resolution.is_none());
    // An unknown id is an error, not a wait.
    assert!(matches!(
        store.wait_resolved("apr_missing", None).await,
        Err(AuditError::UnknownRequest(id)) if id == "apr_missing"
    ));

    // Resolved through this store while waiting.
    let waiter = {
        let store = Arc::clone(&store);
        let id = request.id.clone();
        tokio::spawn(async move { store.wait_resolved(&id, None).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    assert!(!waiter.is_finished());
    store
        .resolve(
            &request.id,
            StoredResolution::new(ApprovalResolution::AllowOnce, "responder"),
        )
        .unwrap();
    let resolved = tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
        .await
        .expect("woken")
        .unwrap()
        .unwrap();
    assert_eq!(
        resolved.resolution.map(|r| r.resolution),
        Some(ApprovalResolution::AllowOnce)
    );

    // Resolved through another connection to the file (what another process does): seen by
    // the poll.
    let second = pending(&store, "t", "make release");
    let waiter = {
        let store = Arc::clone(&store);
        let id = second.id.clone();
        tokio::spawn(async move { store.wait_resolved(&id, None).await })
    };
    let elsewhere = SqliteAuditStore::open(&path).unwrap();
    elsewhere
        .resolve(
            &second.id,
            StoredResolution::new(ApprovalResolution::Deny, "responder"),
        )
        .unwrap();
    let resolved = tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
        .await
        .expect("seen by the poll")
        .unwrap()
        .unwrap();
    assert_eq!(
        resolved.resolution.map(|r| r.resolution),
        Some(ApprovalResolution::Deny)
    );
}
