//! Durable audit append throughput: group commit vs raw batched SQLite inserts on the same
//! disk, both WAL + `synchronous=FULL` (the store opened with `Durability::Power`, so the two
//! sides fsync alike), at 1, 8 and 64 concurrent writers (§9: ≥ 50%).
//!
//! - `group_commit/C`: C threads share one `SqliteAuditStore`, each appending synchronously
//!   (an append returns only after its batch committed).
//! - `raw_batched/C`: one connection inserts the same rows with the same SQL in transactions
//!   of C rows each — the batching C concurrent writers could at best share, done by hand.
//!
//! Each iteration writes `EVENTS` events; criterion reports elements/s. Measured on the dev VM
//! (fsync ≈ 3.6 ms): 1 writer 279 vs 259 ev/s (1.08), 8 writers 1.25k vs 1.77k (0.71),
//! 64 writers 11.9k vs 11.1k (1.06). Files live under the
//! target directory (the same file system as the store would use).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use turngate::audit::{
    AuditDecision, AuditEventKind, AuditStore, Durability, ProfileSource, SqliteAuditStore,
    TurnPermissionAuditEvent,
};
use turngate::{ActionKind, PermissionMode};

const EVENTS: u64 = 512;

fn bench_dir() -> PathBuf {
    let base = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target"));
    let dir = base.join("bench-audit");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    dir
}

fn event(i: u64) -> TurnPermissionAuditEvent {
    let mut e = TurnPermissionAuditEvent::new(
        "bench",
        AuditEventKind::DecisionAllowed,
        PermissionMode::Supervised,
        ProfileSource::Composer,
    );
    e.item_id = Some(format!("item-{i}"));
    e.tool_id = Some(format!("call-{i}"));
    e.action_kind = Some(ActionKind::FileRead);
    e.decision = Some(AuditDecision::Allow);
    e.reason = Some("allow_rule".to_owned());
    e
}

fn fresh(path: &std::path::Path) {
    for suffix in ["", "-wal", "-shm"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(p));
    }
}

fn group_commit(writers: u64) -> Duration {
    let path = bench_dir().join(format!("group-{writers}.db"));
    fresh(&path);
    let store = Arc::new(
        SqliteAuditStore::open_durable(&path, Durability::Power).unwrap_or_else(|e| panic!("{e}")),
    );
    let per = EVENTS / writers;
    // Writers are spawned before the clock starts and released together, so the figure is the
    // store's throughput, not thread creation.
    let ready = Arc::new(std::sync::Barrier::new(writers as usize + 1));
    let threads: Vec<_> = (0..writers)
        .map(|w| {
            let store = Arc::clone(&store);
            let ready = Arc::clone(&ready);
            std::thread::spawn(move || {
                ready.wait();
                for i in 0..per {
                    store
                        .append(event(w * per + i))
                        .unwrap_or_else(|e| panic!("{e}"));
                }
            })
        })
        .collect();
    ready.wait();
    let start = Instant::now();
    for t in threads {
        t.join().unwrap_or_else(|_| panic!("writer panicked"));
    }
    start.elapsed()
}

/// The same appends from `writers` concurrent tasks on a 2-thread runtime (`append_async`), the
/// way an async gateway records: no OS thread per writer.
fn group_commit_async(writers: u64, rt: &tokio::runtime::Runtime) -> Duration {
    let path = bench_dir().join(format!("group-async-{writers}.db"));
    fresh(&path);
    let store = Arc::new(
        SqliteAuditStore::open_durable(&path, Durability::Power).unwrap_or_else(|e| panic!("{e}")),
    );
    let per = EVENTS / writers;
    rt.block_on(async {
        let start = Instant::now();
        let tasks: Vec<_> = (0..writers)
            .map(|w| {
                let store = Arc::clone(&store);
                tokio::spawn(async move {
                    for i in 0..per {
                        store
                            .append_async(event(w * per + i))
                            .await
                            .unwrap_or_else(|e| panic!("{e}"));
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap_or_else(|e| panic!("{e}"));
        }
        start.elapsed()
    })
}

fn raw_batched(batch: u64) -> Duration {
    let path = bench_dir().join(format!("raw-{batch}.db"));
    fresh(&path);
    // Same schema and pragmas as the store (open it once to create the file), then a plain
    // connection.
    drop(
        SqliteAuditStore::open_durable(&path, Durability::Power).unwrap_or_else(|e| panic!("{e}")),
    );
    let mut conn = rusqlite::Connection::open(&path).unwrap_or_else(|e| panic!("{e}"));
    conn.execute_batch("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL;")
        .unwrap_or_else(|e| panic!("{e}"));
    let start = Instant::now();
    let mut i = 0;
    while i < EVENTS {
        let tx = conn.transaction().unwrap_or_else(|e| panic!("{e}"));
        for _ in 0..batch.min(EVENTS - i) {
            let e = event(i);
            let seq: i64 = tx
                .prepare_cached(
                    "SELECT COALESCE(MAX(seq), 0) + 1 FROM audit_events WHERE turn_id = ?1",
                )
                .and_then(|mut s| s.query_row([&e.turn_id], |r| r.get(0)))
                .unwrap_or_else(|e| panic!("{e}"));
            tx.prepare_cached(
                "INSERT INTO audit_events (turn_id, seq, kind, profile_mode, profile_source,
                    item_id, tool_id, action_kind, request_key, decision, reason,
                    cached_approval_used, recorded_at_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
            )
            .and_then(|mut s| {
                s.execute(rusqlite::params![
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
                    0i64,
                ])
            })
            .unwrap_or_else(|e| panic!("{e}"));
            i += 1;
        }
        tx.commit().unwrap_or_else(|e| panic!("{e}"));
    }
    start.elapsed()
}

fn append_throughput(c: &mut Criterion) {
    let mut group = c.benchmark_group("audit_append");
    group.sample_size(10);
    group.throughput(Throughput::Elements(EVENTS));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    for writers in [1u64, 8, 64] {
        group.bench_with_input(
            BenchmarkId::new("group_commit_async", writers),
            &writers,
            |b, &w| b.iter_custom(|iters| (0..iters).map(|_| group_commit_async(w, &rt)).sum()),
        );
        group.bench_with_input(
            BenchmarkId::new("group_commit", writers),
            &writers,
            |b, &w| b.iter_custom(|iters| (0..iters).map(|_| group_commit(w)).sum()),
        );
        group.bench_with_input(
            BenchmarkId::new("raw_batched", writers),
            &writers,
            |b, &w| b.iter_custom(|iters| (0..iters).map(|_| raw_batched(w)).sum()),
        );
    }
    group.finish();
}

criterion_group!(benches, append_throughput);
criterion_main!(benches);
