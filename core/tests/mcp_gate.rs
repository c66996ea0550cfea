//! `Gate::authorize_also`, as `turngate mcp wrap` uses it: the strictest of the gate's own
//! verdict and the caller's decides, a `fresh` ask is never answered by an earlier
//! `allow_for_turn` grant, and the deciding part is named in the summary and the denial.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use turngate::approval::TurnPermissionApprovalRequest;
use turngate::approval::{ApprovalContext, Approver, Decision, DecisionFuture};
use turngate::audit::SqliteAuditStore;
use turngate::gate::{AlsoJudged, Authorization, Gate, ToolInvocation};
use turngate::protocol::TurnPermissionProfileSelection;
use turngate::snapshot::{ResolveContext, resolve};
use turngate::{ActionKind, Effect, PermissionMode, Reason, Verdict};

/// Approves, and keeps every request it was shown.
#[derive(Default)]
struct Recording(Mutex<Vec<TurnPermissionApprovalRequest>>);

impl Approver for Recording {
    fn decide<'a>(&'a self, ctx: &'a ApprovalContext) -> DecisionFuture<'a> {
        self.0.lock().unwrap().push(ctx.request.clone());
        Box::pin(async { Decision::approve() })
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    gate: Gate,
    approver: Arc<Recording>,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let context = ResolveContext::new(
        ws.canonicalize().unwrap(),
        turngate::probe::probe_platform(),
    );
    let selection = TurnPermissionProfileSelection {
        mode: Some(PermissionMode::Supervised),
        source: None,
        policy: None,
    };
    let snapshot = resolve(Some(&selection), &context, None).unwrap();
    let store = Arc::new(SqliteAuditStore::open(dir.path().join("audit.db")).unwrap());
    let approver = Arc::new(Recording::default());
    let gate = Gate::new("turn-mcp", snapshot, store, approver.clone()).unwrap();
    Setup {
        _dir: dir,
        gate,
        approver,
    }
}

fn call(kind: ActionKind, tool: &str) -> ToolInvocation {
    ToolInvocation::new(kind, format!("fs/{tool}")).with_tool(tool)
}

fn changed() -> AlsoJudged {
    AlsoJudged {
        verdict: Verdict::without_rule(Effect::Ask, "mcp", Reason::ToolDefinitionChanged),
        because: "the definition of `write_file` changed".to_owned(),
        fresh: true,
    }
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn a_fresh_ask_is_not_answered_by_an_earlier_grant_for_the_turn() {
    let s = setup();
    let inv = call(ActionKind::McpWriteOrUnknown, "write_file");
    let action = turngate::Action {
        kind: inv.kind,
        target: inv.target.clone(),
        tool: inv.tool_name.clone(),
    };
    let scope =
        TurnPermissionApprovalRequest::for_action("turn-mcp", &action, Reason::Default, None)
            .unwrap()
            .scope_hash;
    s.gate.grant_for_turn(scope);
    // The grant answers the ordinary ask without a prompt...
    let auth = block_on(s.gate.authorize(&inv)).unwrap();
    assert!(
        matches!(
            auth,
            Authorization::Allowed {
                cached_approval: true,
                ..
            }
        ),
        "{auth:?}"
    );
    assert!(s.approver.0.lock().unwrap().is_empty());
    // ...but not the ask a changed definition raises: the person is asked again.
    let auth = block_on(s.gate.authorize_also(&inv, &[changed()])).unwrap();
    assert!(
        matches!(
            auth,
            Authorization::Allowed {
                cached_approval: false,
                ..
            }
        ),
        "{auth:?}"
    );
    let shown = s.approver.0.lock().unwrap();
    assert_eq!(shown.len(), 1);
    assert_eq!(shown[0].reason, Reason::ToolDefinitionChanged);
    assert!(
        shown[0]
            .summary
            .as_deref()
            .unwrap_or("")
            .contains("changed"),
        "{:?}",
        shown[0].summary
    );
}

#[test]
fn a_fresh_ask_raises_an_allowed_read_to_an_ask() {
    let s = setup();
    let inv = call(ActionKind::McpRead, "read_text_file");
    let auth = block_on(s.gate.authorize(&inv)).unwrap();
    assert!(auth.is_allowed());
    assert!(
        s.approver.0.lock().unwrap().is_empty(),
        "supervised allows MCP reads"
    );
    block_on(s.gate.authorize_also(&inv, &[changed()])).unwrap();
    assert_eq!(
        s.approver.0.lock().unwrap().len(),
        1,
        "the changed read asked"
    );
}

#[test]
fn a_deny_among_the_arguments_denies_the_call_and_says_which() {
    let s = setup();
    let inv = call(ActionKind::McpRead, "read_text_file");
    let file = s.gate.evaluate(
        &ToolInvocation::new(ActionKind::FileRead, "/etc/shadow").with_tool("read_text_file"),
    );
    assert_eq!(file.verdict.effect, Effect::Deny, "{file:?}");
    let also = AlsoJudged {
        verdict: file.verdict,
        because: "argument `path`: file_read `/etc/shadow`".to_owned(),
        fresh: false,
    };
    let auth = block_on(s.gate.authorize_also(&inv, &[also])).unwrap();
    let Authorization::Denied(denial) = auth else {
        panic!("{auth:?}")
    };
    assert!(
        denial.reason.contains("argument `path`"),
        "{}",
        denial.reason
    );
    assert!(
        denial
            .tool_result()
            .contains("Permission denied by turngate")
    );
    assert!(
        s.approver.0.lock().unwrap().is_empty(),
        "a deny never reaches the approver"
    );
}

#[test]
fn a_weaker_extra_verdict_changes_nothing() {
    let s = setup();
    let inv = call(ActionKind::McpWriteOrUnknown, "write_file");
    let allow = AlsoJudged {
        verdict: Verdict::without_rule(Effect::Allow, "mcp", Reason::Default),
        because: "argument `path`: allowed".to_owned(),
        fresh: false,
    };
    block_on(s.gate.authorize_also(&inv, &[allow])).unwrap();
    let shown = s.approver.0.lock().unwrap();
    assert_eq!(shown.len(), 1, "the MCP write still asks");
    assert_eq!(shown[0].reason, Reason::Default);
}
