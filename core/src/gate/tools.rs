//! What the guarded tools (`read_file`, `write_file`, `edit_file`, `run_shell`, `fetch_url`)
//! need of the gate beyond [`Gate::authorize`]: continuing a deferred request with a person's
//! answer for exactly this call (never for another kind, target, cwd or turn, and once), and
//! performing an allowed file action as decided, race-free. The tools' shapes and texts are the
//! bindings facade's (`bindings/src/tools.rs`); every decision is made here.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::sync::Arc;

use super::{
    Authorization, Denial, Gate, GateError, ResumeChecks, SpawnResult, ToolInvocation, describe,
    stored_cwd,
};
use crate::action::{Action, ActionKind, Effect};
use crate::approval::{ApprovalResolution, Decision};
use crate::audit::{StoredApproval, StoredResolution};
use crate::check::file::OpenError;
use crate::sandbox::OutputSink;
use crate::snapshot::ensure_native_shell_allowed;

/// "This call continues deferred request `request_id` with the person's answer."
#[derive(Debug, Clone)]
pub struct Continuation {
    /// The deferred request.
    pub request_id: String,
    /// The person's answer (`Approve`, possibly with a modified action, or `Deny`).
    pub decision: Decision,
    /// An `allow_for_turn` answer: the request is resolved so, and its grant answers the
    /// turn's later matching actions.
    pub for_turn: bool,
}

/// How [`Gate::spawn_tool`] runs an allowed command, beyond what the snapshot decides.
#[derive(Debug, Clone, Default)]
pub struct SpawnOptions {
    /// Variables added to the inherited environment (later wins), then filtered by the
    /// snapshot's environment policy like the rest: a secret-named variable is dropped.
    pub env: Vec<(OsString, OsString)>,
    /// The wall-clock limit, capped by the snapshot's `max_duration_ms`.
    pub timeout_ms: Option<u64>,
    /// Bytes for the command's stdin (closed after them); `None`: the snapshot's stdin policy.
    pub stdin: Option<Arc<[u8]>>,
    /// Called with every chunk of output as it comes.
    pub on_output: Option<OutputSink>,
}

impl Gate {
    /// Decide one tool call of a file or network kind: [`Gate::authorize`], or with
    /// `approval`, continue that deferred request for exactly this call (see
    /// [`Gate::continue_request`]). An approval refused (wrong kind, another target or turn,
    /// already used, not pending, unknown) is a recorded denial, in the core's wording; an
    /// allowed action of another kind than the call's (a reviewer's modified one) is too.
    pub async fn authorize_tool(
        &self,
        inv: &ToolInvocation,
        approval: Option<&Continuation>,
    ) -> Result<Authorization, GateError> {
        let auth = match approval {
            None => self.authorize(inv).await?,
            Some(c) => match self.continue_request(inv, c) {
                Ok(resumed) => resumed.auth,
                Err(err) => return self.refusal(inv, err).map(Authorization::Denied),
            },
        };
        self.same_kind(inv, auth)
    }

    /// [`Gate::authorize_tool`] for an edit: the write is authorized, and the file is judged
    /// as a read too (an edit reads the file, and its result tells whether the text was
    /// there), so a file the policy will not let the agent read is never edited, and a read
    /// that asks makes the edit ask. The strictest decides.
    pub async fn authorize_edit(
        &self,
        inv: &ToolInvocation,
        approval: Option<&Continuation>,
    ) -> Result<Authorization, GateError> {
        let read = ToolInvocation {
            kind: ActionKind::FileRead,
            ..inv.clone()
        };
        let judged = self.evaluate(&read);
        match approval {
            None => {
                let also = [super::AlsoJudged {
                    because: "an edit reads the file".to_owned(),
                    verdict: judged.verdict,
                    fresh: false,
                }];
                let auth = self.authorize_also(inv, &also).await?;
                self.same_kind(inv, auth)
            }
            Some(_) if judged.verdict.effect == Effect::Deny => {
                let action = Action {
                    kind: inv.kind,
                    target: judged.target,
                    tool: inv.tool_name.clone(),
                };
                let reason = format!("{}: an edit reads the file", describe(&judged.verdict));
                self.deny(
                    inv,
                    action,
                    reason,
                    Some(judged.verdict),
                    None,
                    "policy",
                    None,
                )
            }
            Some(_) => self.authorize_tool(inv, approval).await,
        }
    }

    /// Decide a shell command for `run_shell` and, when allowed, run it under the snapshot's
    /// sandbox with `opts`; with `approval`, continue that deferred request for exactly this
    /// command line and cwd, and run the stored action under its stored snapshot.
    pub async fn spawn_tool(
        &self,
        inv: &ToolInvocation,
        approval: Option<&Continuation>,
        opts: &SpawnOptions,
    ) -> Result<SpawnResult, GateError> {
        if inv.kind != ActionKind::ShellCommand {
            return Err(GateError::WrongKind {
                expected: ActionKind::ShellCommand,
                got: inv.kind,
            });
        }
        ensure_native_shell_allowed(&self.own.snapshot)?;
        let Some(c) = approval else {
            return self.spawn_opts(inv, opts).await;
        };
        let resumed = match self.continue_request(inv, c) {
            Ok(resumed) => resumed,
            Err(err) => return self.refusal(inv, err).map(SpawnResult::Denied),
        };
        match resumed.auth {
            Authorization::Allowed { action, .. } => {
                let Some(under) = resumed.under else {
                    let err = GateError::NoSnapshot(c.request_id.clone());
                    return self.refusal(inv, err).map(SpawnResult::Denied);
                };
                let cwd = resumed.inv.cwd.clone();
                self.run_action_with(&under, &resumed.inv, &action, cwd.as_deref(), opts)
                    .await
            }
            Authorization::Denied(d) => Ok(SpawnResult::Denied(d)),
            Authorization::Deferred { request } => Ok(SpawnResult::Deferred(request)),
        }
    }

    /// Open the file of an allowed `action` (its checked target), race-free beneath its root,
    /// without asking again: the gate allowed it, so an ask on the fresh check is the approved
    /// one; a deny that landed meanwhile still refuses ([`OpenError::NotAllowed`]).
    pub fn open_allowed(&self, action: &Action, write: bool) -> Result<std::fs::File, OpenError> {
        let checker = self.file_checker();
        let check = checker.check(action.kind, &action.target, action.tool.as_deref());
        checker.open_checked(&check, write, true)
    }

    /// Replace the file of an allowed `file_write` action with `content`, atomically and
    /// race-free (a temporary file beside it, renamed over it), without asking again.
    pub fn replace_allowed(&self, action: &Action, content: &[u8]) -> Result<(), OpenError> {
        let checker = self.file_checker();
        let check = checker.check(
            ActionKind::FileWrite,
            &action.target,
            action.tool.as_deref(),
        );
        checker.replace_checked(&check, content, true)
    }

    /// The vetted addresses of an allowed network call to `url` (the name is resolved once,
    /// here, and only these addresses may be connected to). A DNS answer in a forbidden range
    /// is a recorded denial.
    pub fn resolve_allowed(
        &self,
        inv: &ToolInvocation,
        url: &str,
    ) -> Result<Result<Vec<SocketAddr>, Denial>, GateError> {
        let resolved = self.resolve_and_check(url, inv.tool_name.as_deref());
        if resolved.check.verdict.effect != Effect::Deny && !resolved.addrs.is_empty() {
            return Ok(Ok(resolved.addrs));
        }
        let action = Action {
            kind: ActionKind::Network,
            target: self.evaluate(inv).target,
            tool: inv.tool_name.clone(),
        };
        let verdict = resolved.check.verdict;
        let reason = describe(&verdict);
        self.denial(inv, action, reason, Some(verdict), None, "policy", None)
            .map(Err)
    }

    /// Continue deferred request `c.request_id` with the person's answer, for exactly the
    /// call `inv`: refused, before anything is resolved or spent, when the stored action is of
    /// another kind, its target is not this call's checked target (unless the answer is a
    /// reviewer's modified action), a shell request's cwd is not this call's, or the request
    /// was made in another turn. Then [`Gate::resume`] semantics: re-checked under the stored
    /// snapshot, spent once.
    fn continue_request(
        &self,
        inv: &ToolInvocation,
        c: &Continuation,
    ) -> Result<super::Resumed, GateError> {
        let id = c.request_id.as_str();
        let stored: StoredApproval = self
            .store
            .approval(id)?
            .ok_or_else(|| GateError::UnknownRequest(id.to_owned()))?;
        if stored.action.kind != inv.kind {
            return Err(GateError::WrongKind {
                expected: inv.kind,
                got: stored.action.kind,
            });
        }
        if stored.request.turn_id != self.turn_id {
            return Err(GateError::OtherTurn {
                request: id.to_owned(),
                turn: stored.request.turn_id.clone(),
                this: self.turn_id.clone(),
            });
        }
        let modified = matches!(
            &c.decision,
            Decision::Approve {
                modified: Some(_),
                ..
            }
        );
        if !modified {
            let this = self.evaluate(inv).target;
            if stored.action.target != this {
                return Err(GateError::OtherTarget {
                    request: id.to_owned(),
                    approved: stored.action.target.clone(),
                    this,
                });
            }
            if inv.kind == ActionKind::ShellCommand {
                let this_cwd = self.shell_cwd(inv).unwrap_or_default();
                let approved = stored_cwd(&stored.request).unwrap_or_default();
                if approved != this_cwd {
                    return Err(GateError::OtherTarget {
                        request: id.to_owned(),
                        approved: format!("{} (in {approved})", stored.action.target),
                        this: format!("{} (in {this_cwd})", stored.action.target),
                    });
                }
            }
        }
        let allow = matches!(c.decision, Decision::Approve { .. });
        let decision = if c.for_turn && allow && !modified {
            if stored.resolution.is_none() {
                let record = StoredResolution::new(ApprovalResolution::AllowForTurn, "responder");
                self.store.resolve(id, record)?;
            }
            // Decided in the store: resume runs it as an already approved request.
            None
        } else {
            Some(c.decision.clone())
        };
        let checks = ResumeChecks {
            required: Some(inv.kind),
            reviewed: false,
            caller: Some(inv),
        };
        self.resume_checked(id, decision, checks)
    }

    /// Record an approval refusal as a denial of this call, in the core's wording.
    fn refusal(&self, inv: &ToolInvocation, err: GateError) -> Result<Denial, GateError> {
        let recorded = matches!(err, GateError::AlreadyUsed(_));
        match err {
            GateError::WrongKind { .. }
            | GateError::AlreadyUsed(_)
            | GateError::NotApproved { .. }
            | GateError::OtherTurn { .. }
            | GateError::OtherTarget { .. }
            | GateError::UnknownRequest(_)
            | GateError::ReviewRequired(_)
            | GateError::NoSnapshot(_) => {}
            other => return Err(other),
        }
        let action = Action {
            kind: inv.kind,
            target: self.evaluate(inv).target,
            tool: inv.tool_name.clone(),
        };
        let reason = err.to_string();
        if recorded {
            // `already_used` was recorded where it was detected.
            return Ok(Denial {
                action,
                reason,
                verdict: None,
            });
        }
        self.denial(inv, action, reason, None, None, "policy", None)
    }

    /// An allowed action of another kind than the call's never runs (a reviewer's modified
    /// action): a recorded denial.
    fn same_kind(
        &self,
        inv: &ToolInvocation,
        auth: Authorization,
    ) -> Result<Authorization, GateError> {
        match auth {
            Authorization::Allowed { action, .. } if action.kind != inv.kind => {
                let reason = format!(
                    "the approved action is a {}, not a {}; nothing ran",
                    action.kind, inv.kind
                );
                self.deny(inv, action, reason, None, None, "policy", None)
            }
            other => Ok(other),
        }
    }

    /// [`Gate::spawn`] with `opts` (env, timeout, stdin, output).
    async fn spawn_opts(
        &self,
        inv: &ToolInvocation,
        opts: &SpawnOptions,
    ) -> Result<SpawnResult, GateError> {
        let action = match self.authorize(inv).await? {
            Authorization::Allowed { action, .. } => action,
            Authorization::Denied(denial) => return Ok(SpawnResult::Denied(denial)),
            Authorization::Deferred { request } => return Ok(SpawnResult::Deferred(request)),
        };
        if action.kind != ActionKind::ShellCommand {
            let reason = format!(
                "the approved action is a {}, not a shell command; nothing ran",
                action.kind
            );
            let denial = self.denial(inv, action, reason, None, None, "policy", None)?;
            return Ok(SpawnResult::Denied(denial));
        }
        self.run_action_with(&self.own, inv, &action, inv.cwd.as_deref(), opts)
            .await
    }

    async fn run_action_with(
        &self,
        under: &super::Under,
        inv: &ToolInvocation,
        action: &Action,
        cwd: Option<&std::path::Path>,
        opts: &SpawnOptions,
    ) -> Result<SpawnResult, GateError> {
        self.run_action(under, inv, action, cwd, None, None, Some(opts))
            .await
            .map(|r| r.result)
    }
}
