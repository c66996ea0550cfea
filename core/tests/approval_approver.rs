//! Approvers and the policy re-check: built-ins, modified actions, remembered rules, deferral
//! across processes.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests assert by unwrapping

use std::io::{BufRead, BufReader, Cursor, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use turngate::approval::{
    ApprovalBroker, ApprovalContext, ApprovalError, ApprovalResolution, ApprovalResult, ApproveAll,
    Approver, BrokerApprover, Decision, DecisionFuture, DenialSource, DenyAll, StdinApprover,
    TurnPermissionApprovalRequest, decide_and_check, resume_with_decision,
};
use turngate::audit::{AuditStore, SqliteAuditStore};
use turngate::{Action, ActionKind, CompiledPolicy, Effect, Policy, Reason, Rule};

const DEFER_CHILD_ENV: &str = "TURNGATE_DEFER_CHILD_STORE";

fn base_policy() -> Policy {
    Policy::new()
        .with_default(ActionKind::FileWrite, Effect::Ask)
        .with_default(ActionKind::ShellCommand, Effect::Ask)
        .layer("project")
        .deny_write("secrets/*")
}

fn ctx(action: Action, policy: &CompiledPolicy) -> ApprovalContext {
    ApprovalContext {
        request: TurnPermissionApprovalRequest::for_action("t1", &action, Reason::Default, None)
            .unwrap(),
        verdict: policy.explain(&action),
        action,
    }
}

/// Counts calls and answers with a fixed decision.
struct Fixed(Decision, AtomicUsize);

impl Approver for Fixed {
    fn decide<'a>(&'a self, _ctx: &'a ApprovalContext) -> DecisionFuture<'a> {
        self.1.fetch_add(1, Ordering::SeqCst);
        let d = self.0.clone();
        Box::pin(async move { d })
    }
}

#[tokio::test]
async fn built_ins_approve_and_deny() {
    let policy = base_policy().compile().unwrap();
    let c = ctx(Action::new(ActionKind::FileWrite, "src/a.rs"), &policy);
    let approvers: [&dyn Approver; 2] = [&ApproveAll, &DenyAll];
    let approved = decide_and_check(approvers[0], &c, &policy, None, None, false)
        .await
        .unwrap();
    assert_eq!(
        approved,
        ApprovalResult::Approved {
            action: c.action.clone(),
            remember: vec![],
            rejected: vec![]
        }
    );
    let denied = decide_and_check(approvers[1], &c, &policy, None, None, false)
        .await
        .unwrap();
    assert!(matches!(
        denied,
        ApprovalResult::Denied {
            source: DenialSource::Approver,
            ..
        }
    ));
}

#[tokio::test]
async fn a_denied_action_never_reaches_the_approver() {
    let policy = base_policy().compile().unwrap();
    let approver = Fixed(Decision::approve(), AtomicUsize::new(0));
    let c = ctx(
        Action::new(ActionKind::FileWrite, "secrets/key.txt"),
        &policy,
    );
    let r = decide_and_check(&approver, &c, &policy, None, None, false)
        .await
        .unwrap();
    assert!(
        matches!(r, ApprovalResult::Denied { source: DenialSource::Policy, ref reason } if reason.contains("project"))
    );
    assert_eq!(approver.1.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_modified_action_is_rechecked_and_cannot_cross_a_deny() {
    let policy = base_policy().compile().unwrap();
    let c = ctx(Action::new(ActionKind::FileWrite, "src/a.rs"), &policy);
    let sneaky = Fixed(
        Decision::Approve {
            modified: Some(Action::new(ActionKind::FileWrite, "secrets/a.rs")),
            remember: vec![],
        },
        AtomicUsize::new(0),
    );
    let r = decide_and_check(&sneaky, &c, &policy, None, None, false)
        .await
        .unwrap();
    assert!(
        matches!(r, ApprovalResult::Denied { source: DenialSource::Policy, ref reason } if reason.contains("modified"))
    );

    let honest_edit = Action::new(ActionKind::FileWrite, "src/b.rs");
    let fine = Fixed(
        Decision::Approve {
            modified: Some(honest_edit.clone()),
            remember: vec![],
        },
        AtomicUsize::new(0),
    );
    let r = decide_and_check(&fine, &c, &policy, None, None, false)
        .await
        .unwrap();
    assert!(matches!(r, ApprovalResult::Approved { ref action, .. } if *action == honest_edit));
}

#[tokio::test]
async fn a_remembered_allow_cannot_override_a_deny_and_is_returned_to_persist() {
    let policy = base_policy().compile().unwrap();
    let c = ctx(Action::new(ActionKind::FileWrite, "src/a.rs"), &policy);
    let keep = Rule::new(ActionKind::FileWrite, Effect::Allow, "src/*");
    let tighten = Rule::new(ActionKind::ShellCommand, Effect::Deny, "rm");
    let override_deny = Rule::new(ActionKind::FileWrite, Effect::Allow, "secrets/*");
    let bad_glob = Rule::new(ActionKind::FileRead, Effect::Allow, "[");
    let approver = Fixed(
        Decision::Approve {
            modified: None,
            remember: vec![
                keep.clone(),
                override_deny.clone(),
                tighten.clone(),
                bad_glob.clone(),
            ],
        },
        AtomicUsize::new(0),
    );
    let ApprovalResult::Approved {
        remember, rejected, ..
    } = decide_and_check(&approver, &c, &policy, None, None, false)
        .await
        .unwrap()
    else {
        panic!("expected approval")
    };
    assert_eq!(remember, vec![keep.clone(), tighten]);
    let rejected_rules: Vec<_> = rejected.iter().map(|r| r.rule.clone()).collect();
    assert_eq!(rejected_rules, vec![override_deny, bad_glob]);
    assert!(
        rejected[0].reason.contains("cannot override"),
        "{}",
        rejected[0].reason
    );

    // Merged deny-first, the kept rules still cannot re-allow anything denied.
    let merged = base_policy()
        .merge(Policy::new().layer("remembered").rule(keep))
        .compile()
        .unwrap();
    assert_eq!(
        merged.check(&Action::new(ActionKind::FileWrite, "src/x.rs")),
        Effect::Allow
    );
    assert_eq!(
        merged.check(&Action::new(ActionKind::FileWrite, "secrets/x")),
        Effect::Deny
    );
}

/// A shared in-memory writer for prompt text.
#[derive(Clone, Default)]
struct Screen(Arc<Mutex<Vec<u8>>>);

impl Write for Screen {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn stdin_approver_approves_only_on_y() {
    let policy = base_policy().compile().unwrap();
    let c = ctx(
        Action::new(ActionKind::ShellCommand, "cargo test").with_tool("bash"),
        &policy,
    );
    for (input, approved) in [
        ("y\n", true),
        ("  y  \n", true),
        ("Y\n", false),
        ("yes\n", false),
        ("n\n", false),
        ("\n", false),
        ("", false),
    ] {
        let screen = Screen::default();
        let approver = StdinApprover::with_io(
            Box::new(Cursor::new(input.as_bytes().to_vec())),
            Box::new(screen.clone()),
        );
        let d = approver.decide(&c).await;
        assert_eq!(
            matches!(d, Decision::Approve { .. }),
            approved,
            "input {input:?}"
        );
        let shown = String::from_utf8(screen.0.lock().unwrap().clone()).unwrap();
        assert!(
            shown.contains("cargo test") && shown.contains("bash"),
            "{shown}"
        );
        assert!(shown.ends_with("Allow? [y/N] "), "{shown}");
    }
}

#[tokio::test]
async fn the_prompt_shows_control_characters_instead_of_obeying_them() {
    // Red team 4 F3: a line that erases itself on the terminal showed `git status` while
    // `rm -rf important` was what a `y` approved.
    let policy = base_policy().compile().unwrap();
    let line = "rm -rf important #\r\x1b[2K\x1b[1A\x1b[2K\rturngate: bash wants shell_command on git status";
    let c = ctx(
        Action::new(ActionKind::ShellCommand, line).with_tool("bash"),
        &policy,
    );
    let screen = Screen::default();
    let approver = StdinApprover::with_io(
        Box::new(Cursor::new(b"n\n".to_vec())),
        Box::new(screen.clone()),
    );
    let _ = approver.decide(&c).await;
    let shown = String::from_utf8(screen.0.lock().unwrap().clone()).unwrap();
    let first = shown.lines().next().unwrap_or_default();
    assert!(
        first.contains("rm -rf important #\\r\\x1b[2K"),
        "the controls are spelled out on the request's own line: {shown:?}"
    );
    assert!(
        !shown.contains(['\r', '\x1b']),
        "no control character reached the terminal: {shown:?}"
    );
}

#[tokio::test]
async fn broker_approver_waits_for_a_client_response() {
    let policy = Arc::new(base_policy().compile().unwrap());
    let broker = ApprovalBroker::new(Arc::clone(&policy));
    let approver = BrokerApprover::new(broker.clone(), None);
    let mut stream = broker.subscribe();
    let c = ctx(Action::new(ActionKind::FileWrite, "src/a.rs"), &policy);
    let client = tokio::spawn(async move {
        let Some(turngate::approval::ApprovalNotification::Requested(r)) = stream.recv().await
        else {
            panic!("expected a request")
        };
        broker
            .respond(&r.id, ApprovalResolution::AllowForTurn)
            .unwrap();
        (broker, r)
    });
    let r = decide_and_check(&approver, &c, &policy, None, None, false)
        .await
        .unwrap();
    assert!(matches!(r, ApprovalResult::Approved { .. }));
    let (broker, shown) = client.await.unwrap();
    assert_eq!(shown, c.request, "the client saw exactly the request");
    assert!(broker.has_grant("t1", &c.request.scope_hash));

    // A deny from the client is a denial with the resolution as the reason.
    let mut stream = broker.subscribe();
    let c2 = ctx(Action::new(ActionKind::FileWrite, "src/b.rs"), &policy);
    let responder = {
        let broker = broker.clone();
        tokio::spawn(async move {
            if let Some(n) = stream.recv().await {
                broker
                    .respond(n.request_id(), ApprovalResolution::Deny)
                    .unwrap();
            }
        })
    };
    let r = decide_and_check(&approver, &c2, &policy, None, None, false)
        .await
        .unwrap();
    assert!(
        matches!(r, ApprovalResult::Denied { source: DenialSource::Approver, ref reason } if reason.contains("deny"))
    );
    responder.await.unwrap();
}

#[tokio::test]
async fn defer_needs_a_store() {
    let policy = base_policy().compile().unwrap();
    let c = ctx(Action::new(ActionKind::FileWrite, "src/a.rs"), &policy);
    let err = decide_and_check(
        &Fixed(Decision::Defer, AtomicUsize::new(0)),
        &c,
        &policy,
        None,
        None,
        false,
    )
    .await
    .unwrap_err();
    assert!(matches!(err, ApprovalError::DeferWithoutStore(id) if id == c.request.id));
}

#[tokio::test]
async fn resume_rechecks_the_policy_and_deferring_again_leaves_it_pending() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteAuditStore::open(dir.path().join("a.db")).unwrap();
    let policy = base_policy().compile().unwrap();
    let c = ctx(Action::new(ActionKind::FileWrite, "build/out.txt"), &policy);
    let r = decide_and_check(
        &Fixed(Decision::Defer, AtomicUsize::new(0)),
        &c,
        &policy,
        Some(&store),
        None,
        false,
    )
    .await
    .unwrap();
    assert_eq!(
        r,
        ApprovalResult::Deferred {
            request_id: c.request.id.clone()
        }
    );

    // Deferring again leaves it pending.
    let again = resume_with_decision(&store, &c.request.id, Decision::Defer, &policy).unwrap();
    assert!(matches!(again, ApprovalResult::Deferred { .. }));
    assert_eq!(store.pending_approvals().unwrap().len(), 1);

    // A deny landed meanwhile: the approval resolves as denied.
    let stricter = base_policy()
        .layer("later")
        .deny_write("build/*")
        .compile()
        .unwrap();
    let r = resume_with_decision(&store, &c.request.id, Decision::approve(), &stricter).unwrap();
    assert!(matches!(
        r,
        ApprovalResult::Denied {
            source: DenialSource::Policy,
            ..
        }
    ));
    let stored = store.approval(&c.request.id).unwrap().unwrap();
    let resolution = stored.resolution.unwrap();
    assert_eq!(resolution.resolution, ApprovalResolution::Deny);
    assert_eq!(resolution.reason, "policy_denied");

    // Resolved once: a later decision changes nothing.
    let r = resume_with_decision(&store, &c.request.id, Decision::approve(), &policy).unwrap();
    assert_eq!(r, ApprovalResult::AlreadyResolved(resolution));

    let err =
        resume_with_decision(&store, "apr_unknown", Decision::approve(), &policy).unwrap_err();
    assert!(err.to_string().contains("apr_unknown"), "{err}");
}

/// Not a test on its own: the deferring process of the cross-process test.
#[tokio::test]
async fn child_defers() {
    let Ok(path) = std::env::var(DEFER_CHILD_ENV) else {
        return;
    };
    let store = SqliteAuditStore::open(&path).unwrap();
    let policy = base_policy().compile().unwrap();
    let action = Action::new(ActionKind::ShellCommand, "cargo publish --dry-run").with_tool("bash");
    let mut c = ctx(action, &policy);
    c.request = TurnPermissionApprovalRequest::for_action(
        "t-defer",
        &c.action,
        Reason::Default,
        Some("/w"),
    )
    .unwrap();
    c.request.summary = Some("Publish a dry run".into());
    let r = decide_and_check(
        &Fixed(Decision::Defer, AtomicUsize::new(0)),
        &c,
        &policy,
        Some(&store),
        None,
        false,
    )
    .await
    .unwrap();
    assert!(matches!(r, ApprovalResult::Deferred { .. }));
    println!("shown {}", serde_json::to_string(&c.request).unwrap());
    println!("action {}", serde_json::to_string(&c.action).unwrap());
}

#[test]
fn defer_in_one_process_and_resume_from_another() {
    if std::env::var(DEFER_CHILD_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deferred.db");
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_defers", "--nocapture", "--test-threads=1"])
        .env(DEFER_CHILD_ENV, &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .output()
        .unwrap();
    assert!(out.status.success(), "the deferring process failed");
    let mut shown: Option<TurnPermissionApprovalRequest> = None;
    let mut action: Option<Action> = None;
    for line in BufReader::new(out.stdout.as_slice()).lines() {
        let line = line.unwrap();
        // libtest may print `test child_defers ... ` on the same line first.
        if let Some((_, json)) = line.split_once("shown ") {
            shown = Some(serde_json::from_str(json).unwrap());
        } else if let Some((_, json)) = line.split_once("action ") {
            action = Some(serde_json::from_str(json).unwrap());
        }
    }
    let (shown, action) = (shown.unwrap(), action.unwrap());

    // The deferring process is gone; this one resumes from the same file.
    let store = SqliteAuditStore::open(&path).unwrap();
    let pending = store.pending_approvals().unwrap();
    assert_eq!(pending.len(), 1);
    assert_eq!(
        pending[0].request, shown,
        "persisted exactly what was shown"
    );
    let policy = base_policy().compile().unwrap();
    let r = resume_with_decision(&store, &shown.id, Decision::approve(), &policy).unwrap();
    assert_eq!(
        r,
        ApprovalResult::Approved {
            action,
            remember: vec![],
            rejected: vec![]
        },
        "the resumed action is exactly the one shown"
    );
    assert!(store.pending_approvals().unwrap().is_empty());
}
