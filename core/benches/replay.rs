//! `replay` over a store of 10,000 recorded decisions (100 turns of reads, asked shell commands
//! and denied secrets) with a candidate policy that denies one more pattern (under
//! 2 s). Set `TURNGATE_REPLAY_STORE=/path/audit.db` to keep the generated store, to time
//! `turngate replay` on it as a whole process.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use turngate::audit::{
    AuditDecision, AuditEventKind, AuditStore, ProfileSource, SqliteAuditStore,
    TurnPermissionAuditEvent,
};
use turngate::tooling::{ReplayOptions, replay};
use turngate::{ActionKind, PermissionMode, Policy};

fn event(turn: &str, kind: AuditEventKind, decision: AuditDecision) -> TurnPermissionAuditEvent {
    let mut e = TurnPermissionAuditEvent::new(
        turn,
        kind,
        PermissionMode::AutoAcceptEdits,
        ProfileSource::Composer,
    );
    e.decision = Some(decision);
    e.decider = Some("policy".to_owned());
    e.timestamp = Some("2026-12-01T08:00:00.000000Z".to_owned());
    e
}

fn record_turns(store: &dyn AuditStore, turns: std::ops::Range<usize>) {
    for t in turns {
        let turn = format!("turn-{t:03}");
        let _ = store.append(event(
            &turn,
            AuditEventKind::ProfileSelected,
            AuditDecision::Allow,
        ));
        for i in 0..100 {
            let n = t * 100 + i;
            let mut e = match n % 10 {
                0..=6 => {
                    let mut e = event(&turn, AuditEventKind::DecisionAllowed, AuditDecision::Allow);
                    let ext = if n % 7 == 0 { "log" } else { "rs" };
                    e.action_kind = Some(ActionKind::FileRead);
                    e.target = Some(format!("/w/src/m{n}.{ext}"));
                    e.reason = Some("default".to_owned());
                    e
                }
                7 | 8 => {
                    let mut e = event(&turn, AuditEventKind::ApprovalRequested, AuditDecision::Ask);
                    e.action_kind = Some(ActionKind::ShellCommand);
                    e.target = Some(format!("cargo test -p m{n} && git status"));
                    e.reason = Some("default".to_owned());
                    e.request_key = Some(format!("apr_{n}"));
                    e
                }
                _ => {
                    let mut e = event(&turn, AuditEventKind::DecisionDenied, AuditDecision::Deny);
                    e.action_kind = Some(ActionKind::FileRead);
                    e.target = Some("/w/.env".to_owned());
                    e.reason = Some(
                        "deny by rule `.env` (deny_rule) in layer `builtin-secrets`".to_owned(),
                    );
                    e
                }
            };
            e.tool_name = Some("tool".to_owned());
            let _ = store.append(e);
        }
    }
}

fn bench_replay(c: &mut Criterion) {
    let dir = tempfile::tempdir().ok();
    let path = match std::env::var_os("TURNGATE_REPLAY_STORE") {
        Some(p) => std::path::PathBuf::from(p),
        None => dir
            .as_ref()
            .map(|d| d.path().join("audit.db"))
            .unwrap_or_default(),
    };
    let Ok(store) = SqliteAuditStore::open(&path).map(Arc::new) else {
        return;
    };
    if store.turns().map(|t| t.is_empty()).unwrap_or(true) {
        let writers: Vec<_> = (0..10)
            .map(|w| {
                let store = store.clone();
                std::thread::spawn(move || record_turns(store.as_ref(), w * 10..w * 10 + 10))
            })
            .collect();
        for w in writers {
            let _ = w.join();
        }
    }
    let candidate = PermissionMode::AutoAcceptEdits
        .policy()
        .merge(Policy::new().layer("logs").deny_read("*.log"));
    let Ok(candidate) = candidate.compile() else {
        return;
    };
    let mut group = c.benchmark_group("replay");
    group.sample_size(10);
    group.bench_function("10k_decisions_one_more_deny", |b| {
        b.iter(|| {
            let report = replay(store.as_ref(), &candidate, &ReplayOptions::default());
            black_box(report.map(|r| r.flips.len()).unwrap_or_default())
        })
    });
    group.finish();
}

criterion_group!(benches, bench_replay);
criterion_main!(benches);
