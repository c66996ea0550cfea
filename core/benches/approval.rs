//! Approval round trip in-process: open a request, respond, the waiter wakes (§9: ≤ 50 µs).
//!
//! `same_task`: open, respond and wait on one task (the broker's own cost).
//! `client_task`: a client task follows the notification stream and responds; the opener, a
//! task on the same two-worker runtime, awaits the outcome (the cost a UI round trip adds
//! in-process). `client_other_thread`: the opener on a thread outside the runtime, as a UI
//! thread would be, so each hand-off wakes an OS thread (reported, not budgeted: it measures
//! the scheduler).

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use turngate::approval::{
    ApprovalBroker, ApprovalNotification, ApprovalResolution, TurnPermissionApprovalRequest,
};
use turngate::{Action, ActionKind, Effect, Policy, Reason};

fn broker() -> ApprovalBroker {
    let policy = Policy::new()
        .with_default(ActionKind::FileWrite, Effect::Ask)
        .compile()
        .unwrap_or_else(|e| panic!("{e}"));
    ApprovalBroker::new(Arc::new(policy))
}

fn request(action: &Action) -> TurnPermissionApprovalRequest {
    TurnPermissionApprovalRequest::for_action("bench", action, Reason::Default, None)
        .unwrap_or_else(|e| panic!("{e}"))
}

fn round_trip(c: &mut Criterion) {
    let action = Action::new(ActionKind::FileWrite, "src/a.rs").with_tool("edit");
    let mut group = c.benchmark_group("approval_round_trip");

    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let b = broker();
    group.bench_function("same_task", |bench| {
        bench.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let req = request(&action);
                    let start = Instant::now();
                    let pending = b
                        .open(req, action.clone(), None)
                        .unwrap_or_else(|e| panic!("{e}"));
                    let id = pending.request().id.clone();
                    b.respond(&id, ApprovalResolution::AllowOnce)
                        .unwrap_or_else(|e| panic!("{e}"));
                    let outcome = pending.wait().await;
                    total += start.elapsed();
                    assert!(outcome.resolution.is_allow());
                }
                b.end_turn("bench");
                total
            })
        })
    });

    // The same round trip while 1,000 other requests of the turn stay pending.
    let b = broker();
    let mut parked = Vec::new();
    for i in 0..1000 {
        let other = Action::new(ActionKind::FileWrite, format!("src/pending_{i}.rs"));
        parked.push(
            b.open(request(&other), other, None)
                .unwrap_or_else(|e| panic!("{e}")),
        );
    }
    group.bench_function("same_task_1000_pending", |bench| {
        bench.iter_custom(|iters| {
            rt.block_on(async {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let req = request(&action);
                    let start = Instant::now();
                    let pending = b
                        .open(req, action.clone(), None)
                        .unwrap_or_else(|e| panic!("{e}"));
                    let id = pending.request().id.clone();
                    b.respond(&id, ApprovalResolution::AllowOnce)
                        .unwrap_or_else(|e| panic!("{e}"));
                    let outcome = pending.wait().await;
                    total += start.elapsed();
                    assert!(outcome.resolution.is_allow());
                }
                total
            })
        })
    });
    drop(parked);

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    // The opener is itself a runtime task (as a gate's authorize is), so the hand-off to the
    // client and back can stay on the workers instead of waking the thread in `block_on`.
    group.bench_function("client_task", |bench| {
        bench.iter_custom(|iters| {
            rt.block_on(async {
                tokio::spawn(client_round_trips(action.clone(), iters))
                    .await
                    .unwrap_or_else(|e| panic!("{e}"))
            })
        })
    });
    // The same, with the opener on the thread in `block_on` (not a worker): every hand-off is
    // an OS thread wake-up, whose latency on a shared VM is the scheduler's, not the broker's.
    group.bench_function("client_other_thread", |bench| {
        bench.iter_custom(|iters| rt.block_on(client_round_trips(action.clone(), iters)))
    });
    group.finish();
}

/// `iters` round trips answered by a client task following the notification stream.
async fn client_round_trips(action: Action, iters: u64) -> Duration {
    let b = broker();
    let mut stream = b.subscribe();
    let client_broker = b.clone();
    let client = tokio::spawn(async move {
        while let Some(n) = stream.recv().await {
            if let ApprovalNotification::Requested(r) = n {
                let _ = client_broker.respond(&r.id, ApprovalResolution::AllowOnce);
            }
        }
    });
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        let req = request(&action);
        let start = Instant::now();
        let outcome = b
            .request(req, action.clone(), None)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        total += start.elapsed();
        assert!(outcome.resolution.is_allow());
    }
    b.close();
    let _ = client.await;
    total
}

criterion_group!(benches, round_trip);
criterion_main!(benches);
