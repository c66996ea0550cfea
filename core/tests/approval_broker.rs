//! The approval broker: idempotent resolution, grants, policy re-check, expiry, cancellation,
//! notification streams, and 1,000 racing responders.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests assert by unwrapping

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use turngate::approval::{
    ApprovalBroker, ApprovalNotification, ApprovalResolution, BrokerError, ResolutionSource,
    TurnPermissionApprovalRequest,
};
use turngate::{Action, ActionKind, CompiledPolicy, Policy, Reason};

fn policy(p: Policy) -> Arc<CompiledPolicy> {
    Arc::new(p.compile().unwrap())
}

fn asks_writes() -> Arc<CompiledPolicy> {
    policy(Policy::new().with_default(ActionKind::FileWrite, turngate::Effect::Ask))
}

fn write(path: &str) -> Action {
    Action::new(ActionKind::FileWrite, path).with_tool("edit")
}

fn req(turn: &str, action: &Action) -> TurnPermissionApprovalRequest {
    TurnPermissionApprovalRequest::for_action(turn, action, Reason::Default, None).unwrap()
}

#[tokio::test]
async fn first_resolution_wins_and_later_calls_get_it_back() {
    let broker = ApprovalBroker::new(asks_writes());
    let action = write("src/a.rs");
    let pending = broker.open(req("t1", &action), action, None).unwrap();
    let id = pending.request().id.clone();

    let first = broker.respond(&id, ApprovalResolution::Deny).unwrap();
    assert!(first.applied);
    assert_eq!(first.outcome.resolution, ApprovalResolution::Deny);
    assert_eq!(first.outcome.source, ResolutionSource::Responder);

    let second = broker.respond(&id, ApprovalResolution::AllowOnce).unwrap();
    assert!(!second.applied);
    assert_eq!(second.outcome, first.outcome);
    assert_eq!(pending.wait().await, first.outcome);
}

#[tokio::test]
async fn unknown_ids_and_unoffered_resolutions_are_clear_errors() {
    let broker = ApprovalBroker::new(asks_writes());
    assert_eq!(
        broker.respond("apr_nope", ApprovalResolution::AllowOnce),
        Err(BrokerError::UnknownRequest("apr_nope".into()))
    );
    let action = write("src/a.rs");
    let mut request = req("t1", &action);
    request.allowed_resolutions = vec![ApprovalResolution::AllowOnce, ApprovalResolution::Deny];
    let id = request.id.clone();
    let _pending = broker.open(request.clone(), action.clone(), None).unwrap();
    let err = broker
        .respond(&id, ApprovalResolution::AllowForTurn)
        .unwrap_err();
    assert!(err.to_string().contains("allow_for_turn"), "{err}");
    assert!(err.to_string().contains(&id), "{err}");
    // cancelled/expired are always possible.
    assert!(
        broker
            .respond(&id, ApprovalResolution::Cancelled)
            .unwrap()
            .applied
    );
    // The same id cannot be opened twice.
    assert_eq!(
        broker.open(request, action, None).unwrap_err(),
        BrokerError::DuplicateRequest(id)
    );
}

#[tokio::test]
async fn allow_for_turn_covers_the_same_scope_only_and_only_in_that_turn() {
    let broker = ApprovalBroker::new(asks_writes());
    let mut stream = broker.subscribe();
    let a = write("src/a.rs");
    let first = broker.open(req("t1", &a), a.clone(), None).unwrap();
    let id = first.request().id.clone();
    broker
        .respond(&id, ApprovalResolution::AllowForTurn)
        .unwrap();
    assert_eq!(
        first.wait().await.resolution,
        ApprovalResolution::AllowForTurn
    );
    assert!(matches!(
        stream.try_recv(),
        Some(ApprovalNotification::Requested(_))
    ));
    assert!(matches!(
        stream.try_recv(),
        Some(ApprovalNotification::Resolved(_))
    ));

    // The same scope, spelled differently, settles at once without a prompt.
    let again = write("./src//a.rs");
    let cached = broker.open(req("t1", &again), again, None).unwrap();
    assert!(cached.is_settled());
    let outcome = cached.wait().await;
    assert_eq!(outcome.resolution, ApprovalResolution::AllowForTurn);
    assert_eq!(outcome.source, ResolutionSource::CachedGrant);
    assert!(
        stream.try_recv().is_none(),
        "a cached grant publishes no prompt"
    );

    // Another file, or the same file in another turn, still asks.
    let b = write("src/b.rs");
    assert!(!broker.open(req("t1", &b), b, None).unwrap().is_settled());
    assert!(
        !broker
            .open(req("t2", &a), a.clone(), None)
            .unwrap()
            .is_settled()
    );
    // Another tool is another scope.
    let other_tool = Action::new(ActionKind::FileWrite, "src/a.rs").with_tool("patch");
    assert!(
        !broker
            .open(req("t1", &other_tool), other_tool, None)
            .unwrap()
            .is_settled()
    );

    // Ending the turn drops its grants.
    broker.end_turn("t1");
    assert!(!broker.open(req("t1", &a), a, None).unwrap().is_settled());
}

#[tokio::test]
async fn a_deny_that_lands_while_waiting_turns_an_allow_into_deny() {
    let broker = ApprovalBroker::new(asks_writes());
    let action = write("secrets/token.txt");
    let pending = broker.open(req("t1", &action), action, None).unwrap();
    let id = pending.request().id.clone();
    broker.set_policy(policy(
        Policy::new()
            .with_default(ActionKind::FileWrite, turngate::Effect::Ask)
            .layer("late")
            .deny_write("secrets/*"),
    ));
    let r = broker
        .respond(&id, ApprovalResolution::AllowForTurn)
        .unwrap();
    assert_eq!(r.outcome.resolution, ApprovalResolution::Deny);
    assert_eq!(r.outcome.source, ResolutionSource::PolicyDenied);
    assert!(!r.applied);
    assert_eq!(pending.wait().await.resolution, ApprovalResolution::Deny);
    // No grant was cached.
    assert!(!broker.has_grant("t1", &r.outcome.scope_hash));
}

#[tokio::test]
async fn a_denied_action_never_opens_a_prompt() {
    let broker = ApprovalBroker::new(policy(Policy::new().layer("p").deny_write("*.pem")));
    let mut stream = broker.subscribe();
    let action = write("certs/server.pem");
    let pending = broker.open(req("t1", &action), action, None).unwrap();
    assert!(pending.is_settled());
    let outcome = pending.wait().await;
    assert_eq!(outcome.resolution, ApprovalResolution::Deny);
    assert_eq!(outcome.source, ResolutionSource::PolicyDenied);
    assert!(stream.try_recv().is_none());
}

#[tokio::test]
async fn a_request_expires_after_its_timeout_and_clients_are_told() {
    let broker = ApprovalBroker::new(asks_writes());
    let mut stream = broker.subscribe();
    let action = write("src/a.rs");
    let pending = broker
        .open(req("t1", &action), action, Some(Duration::from_millis(50)))
        .unwrap();
    let id = pending.request().id.clone();
    let outcome = tokio::time::timeout(Duration::from_secs(10), pending.wait())
        .await
        .expect("expiry must wake the waiter");
    assert_eq!(outcome.resolution, ApprovalResolution::Expired);
    assert_eq!(outcome.source, ResolutionSource::Timeout);
    assert!(matches!(stream.recv().await, Some(ApprovalNotification::Requested(r)) if r.id == id));
    assert!(
        matches!(stream.recv().await, Some(ApprovalNotification::Resolved(o)) if o.request_id == id && o.resolution == ApprovalResolution::Expired)
    );
    // A late response gets the recorded expiry.
    let late = broker.respond(&id, ApprovalResolution::AllowOnce).unwrap();
    assert!(!late.applied);
    assert_eq!(late.outcome.resolution, ApprovalResolution::Expired);
}

#[tokio::test]
async fn cancel_turn_cancels_that_turn_only() {
    let broker = ApprovalBroker::new(asks_writes());
    let a = write("a");
    let b = write("b");
    let c = write("c");
    let pa = broker.open(req("t1", &a), a, None).unwrap();
    let pb = broker.open(req("t1", &b), b, None).unwrap();
    let pc = broker.open(req("t2", &c), c, None).unwrap();
    let cancelled = broker.cancel_turn("t1");
    assert_eq!(cancelled.len(), 2);
    for p in [pa, pb] {
        let o = p.wait().await;
        assert_eq!(o.resolution, ApprovalResolution::Cancelled);
        assert_eq!(o.source, ResolutionSource::TurnCancelled);
    }
    assert_eq!(broker.pending_requests().len(), 1);
    assert_eq!(broker.pending_requests()[0].id, pc.request().id);
}

#[tokio::test]
async fn streams_end_cleanly_on_close_and_on_drop() {
    let broker = ApprovalBroker::new(asks_writes());
    let mut s1 = broker.subscribe();
    let mut s2 = broker.subscribe();
    let action = write("a");
    let pending = broker.open(req("t1", &action), action, None).unwrap();
    broker.close();
    for s in [&mut s1, &mut s2] {
        assert!(matches!(
            s.recv().await,
            Some(ApprovalNotification::Requested(_))
        ));
        assert!(matches!(
            s.recv().await,
            Some(ApprovalNotification::Resolved(o)) if o.source == ResolutionSource::BrokerClosed
        ));
        assert!(s.recv().await.is_none(), "the stream ends after close");
    }
    assert_eq!(
        pending.wait().await.resolution,
        ApprovalResolution::Cancelled
    );
    let a2 = write("b");
    assert_eq!(
        broker.open(req("t1", &a2), a2, None).unwrap_err(),
        BrokerError::Closed
    );

    let broker = ApprovalBroker::new(asks_writes());
    let mut s3 = broker.subscribe();
    let action = write("a");
    let pending = broker.open(req("t1", &action), action, None).unwrap();
    drop(broker);
    assert!(matches!(
        s3.recv().await,
        Some(ApprovalNotification::Requested(_))
    ));
    assert!(
        s3.recv().await.is_none(),
        "the stream ends when the broker is dropped"
    );
    let o = pending.wait().await;
    assert_eq!(o.resolution, ApprovalResolution::Cancelled);
    assert_eq!(o.source, ResolutionSource::BrokerClosed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_thousand_requests_with_racing_responders_resolve_exactly_once() {
    const N: usize = 1000;
    let broker = ApprovalBroker::new(asks_writes());
    let mut stream = broker.subscribe();
    let collector = tokio::spawn(async move {
        let mut seen = Vec::new();
        while let Some(n) = stream.recv().await {
            seen.push(n);
        }
        seen
    });

    let mut waiters = Vec::new();
    let mut ids = Vec::new();
    for i in 0..N {
        let action = write(&format!("src/f{i}.rs"));
        let p = broker.open(req("t1", &action), action, None).unwrap();
        ids.push(p.request().id.clone());
        waiters.push(tokio::spawn(p.wait()));
    }

    let choices = [
        ApprovalResolution::AllowOnce,
        ApprovalResolution::AllowForTurn,
        ApprovalResolution::Deny,
        ApprovalResolution::Cancelled,
    ];
    let mut responders = Vec::new();
    for (i, id) in ids.iter().enumerate() {
        for (k, choice) in choices.iter().enumerate() {
            let broker = broker.clone();
            let id = id.clone();
            let choice = *choice;
            let delay = ((i * 7 + k * 13) % 5) as u64;
            responders.push(tokio::spawn(async move {
                tokio::time::sleep(Duration::from_micros(delay)).await;
                let r = broker.respond(&id, choice).unwrap();
                (id, r)
            }));
        }
    }
    let mut applied: HashMap<String, usize> = HashMap::new();
    let mut recorded: HashMap<String, turngate::approval::ApprovalOutcome> = HashMap::new();
    for r in responders {
        let (id, r) = r.await.unwrap();
        if r.applied {
            *applied.entry(id.clone()).or_default() += 1;
        }
        // Every responder sees the same recorded outcome.
        let prev = recorded.entry(id).or_insert_with(|| r.outcome.clone());
        assert_eq!(*prev, r.outcome);
    }
    assert_eq!(applied.len(), N);
    assert!(
        applied.values().all(|&n| n == 1),
        "each resolved exactly once"
    );
    for w in waiters {
        let o = w.await.unwrap();
        assert_eq!(
            recorded[&o.request_id], o,
            "the waiter wakes with the recorded outcome"
        );
    }

    broker.close();
    drop(broker);
    let seen = collector.await.unwrap();
    let mut requested = HashSet::new();
    let mut resolved = HashSet::new();
    for n in &seen {
        let fresh = match n {
            ApprovalNotification::Requested(r) => requested.insert(r.id.clone()),
            ApprovalNotification::Resolved(o) => {
                assert!(
                    requested.contains(&o.request_id),
                    "requested precedes resolved"
                );
                assert_eq!(recorded[&o.request_id], *o);
                resolved.insert(o.request_id.clone())
            }
        };
        assert!(fresh, "duplicated notification for {}", n.request_id());
    }
    assert_eq!(seen.len(), 2 * N, "no lost or extra notification");
    assert_eq!(requested.len(), N);
    assert_eq!(resolved.len(), N);
}
