//! The guarded tools every binding offers (`read_file`, `write_file`, `edit_file`,
//! `run_shell`, `fetch_url`), decided by the core gate and shaped here once: each returns a
//! [`ToolOutcomeRecord`] (`ToolOutcome` in every language) whose `tool_result` is the text for
//! the model, for every outcome. Denials and deferrals carry the core's wording.
//!
//! `fetch_url` is split in two: [`GateHandle::fetch_begin`] decides the call and resolves the
//! name once, returning the vetted addresses; the binding connects to one of those addresses
//! only (TLS with SNI and certificate checks for the URL's host, in its own runtime) and hands
//! the response to [`fetch_done`] (or the failure to [`fetch_failed`]). No redirect is
//! followed: a 3xx is reported, and fetching its location is a new, checked call.

use std::ffi::OsString;
use std::io::Read;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use turngate::ActionKind;
use turngate::gate::{
    Authorization, Continuation, SpawnOptions, SpawnResult, ToolInvocation, deferral_tool_result,
};
use turngate::sandbox::RunError;
pub use turngate::sandbox::{OutputSink, OutputStream};

use crate::TurnGateError;
use crate::approver::DecisionRecord;
use crate::convert::to_value;
use crate::gate::GateHandle;

/// The default cap of `read_file` (bytes returned to the model).
pub const DEFAULT_READ_BYTES: u64 = 1 << 20;
/// The default cap of a `fetch_url` body.
pub const DEFAULT_FETCH_BYTES: u64 = 1 << 20;

/// What one guarded tool call did (`ToolOutcome` in every language; absent fields are
/// `None`/`null`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolOutcomeRecord {
    /// `ok`, `denied`, `deferred` or `failed` (allowed, but the I/O failed).
    #[schemars(extend("enum" = ["ok", "denied", "deferred", "failed"]))]
    pub outcome: String,
    /// The text for the model, for every outcome.
    pub tool_result: String,
    /// `file_read`, `file_write`, `shell` or `network`.
    #[schemars(extend("enum" = ["file_read", "file_write", "shell", "network"]))]
    pub kind: String,
    /// The action as checked: the resolved absolute path for files, the command line, the URL.
    pub target: String,
    /// Deferred only: the request's id (pass it back as `approval`).
    pub request_id: Option<String>,
    /// Deferred only: the approval request exactly as a person is shown it.
    #[schemars(with = "Option<serde_json::Map<String, Value>>")]
    pub request: Option<Value>,
    /// `read_file` and `fetch_url`: the content as text (invalid UTF-8 replaced).
    pub content: Option<String>,
    /// `run_shell`: the exit code (127 for a program that is not there).
    pub exit_code: Option<i32>,
    /// `run_shell`: captured stdout as text.
    pub stdout: Option<String>,
    /// `run_shell`: captured stderr as text.
    pub stderr: Option<String>,
    /// `fetch_url`: the HTTP status.
    pub status: Option<u16>,
}

/// "This call continues deferred request `request_id` with the person's answer."
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ApprovalRecord {
    /// The deferred request.
    pub request_id: String,
    /// The answer (approve, possibly with a modified action; or deny).
    pub decision: DecisionRecord,
    /// `allow_for_turn`: the request is resolved so, and its grant answers the turn's later
    /// matching actions.
    #[serde(default)]
    pub for_turn: bool,
}

impl ApprovalRecord {
    /// An approval from a decision's name: `allow_once` (or `approve`, `allow`),
    /// `allow_for_turn`, or `deny`. `defer` continues nothing and is refused.
    pub fn named(request_id: &str, name: &str) -> Result<ApprovalRecord, TurnGateError> {
        let (decision, for_turn) = match name {
            "allow_once" | "approve" | "allow" => (DecisionRecord::approve(), false),
            "allow_for_turn" => (DecisionRecord::approve(), true),
            "deny" => (
                DecisionRecord::Deny {
                    reason: "denied by the person".to_owned(),
                },
                false,
            ),
            other => {
                return Err(TurnGateError::invalid(
                    "approval",
                    format!(
                        "unknown decision `{other}` (expected allow_once, allow_for_turn or deny)"
                    ),
                ));
            }
        };
        Ok(ApprovalRecord {
            request_id: request_id.to_owned(),
            decision,
            for_turn,
        })
    }

    /// An approval as a binding passes it: `{"request_id" (or "requestId"), "decision",
    /// "for_turn"?}` where the decision is a bool (`true`: allow_once), a name
    /// ([`ApprovalRecord::named`]) or a `Decision` object.
    pub fn from_value(value: Value) -> Result<ApprovalRecord, TurnGateError> {
        let Value::Object(mut map) = value else {
            return Err(TurnGateError::invalid(
                "approval",
                "expected an object {request_id, decision}",
            ));
        };
        let id = match map.remove("request_id").or_else(|| map.remove("requestId")) {
            Some(Value::String(id)) => id,
            _ => {
                return Err(TurnGateError::invalid(
                    "approval",
                    "`request_id` (a string) is required",
                ));
            }
        };
        let for_turn = match map.remove("for_turn").or_else(|| map.remove("forTurn")) {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => b,
            Some(_) => {
                return Err(TurnGateError::invalid(
                    "approval.for_turn",
                    "expected a boolean",
                ));
            }
        };
        let decision = map
            .remove("decision")
            .ok_or_else(|| TurnGateError::invalid("approval", "`decision` is required"))?;
        if let Some(extra) = map.keys().next() {
            return Err(TurnGateError::invalid(
                "approval",
                format!("unknown field `{extra}`"),
            ));
        }
        let mut record = match decision {
            Value::Bool(true) => ApprovalRecord::named(&id, "allow_once")?,
            Value::Bool(false) => ApprovalRecord::named(&id, "deny")?,
            Value::String(name) => ApprovalRecord::named(&id, &name)?,
            other => ApprovalRecord {
                request_id: id,
                decision: crate::approver::decision_from_value("approval.decision", other)?,
                for_turn: false,
            },
        };
        record.for_turn |= for_turn;
        Ok(record)
    }

    fn to_core(&self) -> Result<Continuation, TurnGateError> {
        if self.decision == DecisionRecord::Defer {
            return Err(TurnGateError::invalid(
                "approval",
                "a deferral continues nothing: pass the person's answer (allow_once, \
                 allow_for_turn or deny)",
            ));
        }
        Ok(Continuation {
            request_id: self.request_id.clone(),
            decision: self.decision.to_core()?,
            for_turn: self.for_turn,
        })
    }
}

/// What every guarded tool takes besides its own arguments.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolCallRecord {
    /// The framework's item (tool-call) id, for the audit row.
    #[serde(default)]
    pub item_id: Option<String>,
    /// The tool's name in rules and audit rows (default: the tool's own, e.g. `read_file`).
    #[serde(default)]
    pub tool: Option<String>,
    /// Continue a deferred request with the person's answer.
    #[serde(default)]
    pub approval: Option<ApprovalRecord>,
}

/// `run_shell`'s own options.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShellOptionsRecord {
    /// Variables added to the environment (then filtered by the snapshot's env policy).
    #[serde(default)]
    pub env: Vec<(String, String)>,
    /// Wall-clock limit (capped by the snapshot's).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Bytes for stdin.
    #[serde(default)]
    pub stdin: Option<Vec<u8>>,
    /// The working directory (relative to the snapshot's cwd).
    #[serde(default)]
    pub cwd: Option<String>,
}

/// What [`GateHandle::fetch_begin`] (and [`GateHandle::call_tool`]) decided.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum ToolStep {
    /// The call's outcome (for `fetch_url`: not allowed, so no connection).
    Done(ToolOutcomeRecord),
    /// Allowed: connect to one of `addrs` only.
    Connect(FetchPlan),
}

/// Where an allowed `fetch_url` may connect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct FetchPlan {
    /// The URL as given.
    pub url: String,
    /// `http` or `https`.
    pub scheme: String,
    /// The host (for SNI, the certificate check and the `Host` header), without brackets.
    pub host: String,
    /// The port.
    pub port: u16,
    /// The path and query to request.
    pub path: String,
    /// The vetted `ip:port` addresses, in order: connect to these and nothing else.
    pub addrs: Vec<String>,
    /// The method to send, as checked ([`FetchRequest`]).
    pub method: String,
    /// The caller's headers to send, as checked, in their order. The binding adds `Host`
    /// (from `host` and `port`) and the body's framing itself, and sends nothing else of the
    /// caller's.
    pub headers: Vec<FetchHeaderRecord>,
}

/// One request header of `fetch_url`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, JsonSchema)]
pub struct FetchHeaderRecord {
    /// The field name, as given.
    pub name: String,
    /// The field value.
    pub value: String,
}

/// The headers a caller may not set on `fetch_url`: `Host` is the URL's (what the gate
/// checked), and the framing (`Content-Length`, `Transfer-Encoding`, and `Expect`, which makes
/// Node write the head before it knows the body) is the body's. A second value of either lets
/// a request smuggle another past the check; the hop-by-hop ones belong to the connection,
/// which the binding owns.
const FETCH_OWNED_HEADERS: [&str; 10] = [
    "host",
    "content-length",
    "transfer-encoding",
    "expect",
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
];

/// The request line and headers of a `fetch_url` call, checked before it is decided: a
/// method of letters only (not `CONNECT`), header names that are HTTP tokens, values of
/// visible ASCII, spaces and tabs (no line break can start another header or request), and
/// none of the headers the tool sets itself. The binding sends exactly this, from the
/// [`FetchPlan`]: never the caller's objects read again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchRequest {
    method: String,
    headers: Vec<FetchHeaderRecord>,
}

impl Default for FetchRequest {
    fn default() -> Self {
        FetchRequest {
            method: "GET".to_owned(),
            headers: Vec::new(),
        }
    }
}

impl FetchRequest {
    /// Check `method` (`None`: `GET`) and `headers` (name, value), naming the bad one.
    pub fn new(
        method: Option<&str>,
        headers: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Self, TurnGateError> {
        let bad = |detail: String| TurnGateError::invalid("fetch_url", detail);
        let method = method.unwrap_or("GET");
        if method.is_empty()
            || method.len() > 32
            || !method.bytes().all(|b| b.is_ascii_alphabetic())
        {
            return Err(bad(format!(
                "method {method:?} is not an HTTP method (letters only)"
            )));
        }
        if method.eq_ignore_ascii_case("CONNECT") {
            return Err(bad(
                "method CONNECT opens a tunnel; fetch_url does not".to_owned()
            ));
        }
        let mut checked = Vec::new();
        for (name, value) in headers {
            let token = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
            if name.is_empty() || !name.bytes().all(token) {
                return Err(bad(format!("header name {name:?} is not an HTTP token")));
            }
            if FETCH_OWNED_HEADERS
                .iter()
                .any(|h| h.eq_ignore_ascii_case(&name))
            {
                return Err(bad(format!(
                    "header {name:?} is set by fetch_url itself (from the URL and the body)"
                )));
            }
            if !value
                .bytes()
                .all(|b| b == b'\t' || (b' '..=b'~').contains(&b))
            {
                return Err(bad(format!(
                    "header {name:?}: the value holds a line break or another control or non-ASCII character"
                )));
            }
            checked.push(FetchHeaderRecord { name, value });
        }
        Ok(FetchRequest {
            method: method.to_owned(),
            headers: checked,
        })
    }

    /// From the binding's JSON arguments: `headers` an object of strings.
    fn from_args(method: Option<&str>, headers: Option<Value>) -> Result<Self, TurnGateError> {
        let pairs = match headers {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Object(map)) => map
                .into_iter()
                .map(|(name, v)| match v {
                    Value::String(value) => Ok((name, value)),
                    other => Err(TurnGateError::invalid(
                        "fetch_url",
                        format!("header {name:?}: the value must be a string, not {other}"),
                    )),
                })
                .collect::<Result<_, _>>()?,
            Some(other) => {
                return Err(TurnGateError::invalid(
                    "fetch_url",
                    format!("headers must be an object of strings, not {other}"),
                ));
            }
        };
        FetchRequest::new(method, pairs)
    }

    /// The method, as checked.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The headers, as checked.
    pub fn headers(&self) -> &[FetchHeaderRecord] {
        &self.headers
    }
}

fn kind_name(kind: ActionKind) -> &'static str {
    match kind {
        ActionKind::ShellCommand => "shell",
        other => other.as_str(),
    }
}

fn outcome(kind: ActionKind, target: &str, outcome: &str, text: String) -> ToolOutcomeRecord {
    ToolOutcomeRecord {
        outcome: outcome.to_owned(),
        tool_result: text,
        kind: kind_name(kind).to_owned(),
        target: target.to_owned(),
        request_id: None,
        request: None,
        content: None,
        exit_code: None,
        stdout: None,
        stderr: None,
        status: None,
    }
}

fn failed(
    kind: ActionKind,
    target: &str,
    tool: &str,
    err: impl std::fmt::Display,
) -> ToolOutcomeRecord {
    let mut text = format!("The {tool} call was allowed but failed: {err}.");
    if kind == ActionKind::FileWrite {
        text.push_str(" Nothing was written.");
    }
    outcome(kind, target, "failed", text)
}

/// The outcome of a call that did not run, or `Ok(action)` to perform. `shown` is the target
/// reported when the call's own form is wanted (the command line, the URL); else a denial's
/// checked target, or for a deferral `checked()`.
fn not_run(
    kind: ActionKind,
    shown: Option<&str>,
    auth: Authorization,
    checked: impl FnOnce() -> String,
) -> Result<Result<turngate::Action, ToolOutcomeRecord>, TurnGateError> {
    Ok(match auth {
        Authorization::Allowed { action, .. } => Ok(action),
        Authorization::Denied(d) => Err(outcome(
            kind,
            shown.unwrap_or(&d.action.target),
            "denied",
            d.tool_result(),
        )),
        Authorization::Deferred { request } => {
            let target = shown.map_or_else(checked, str::to_owned);
            let mut o = outcome(kind, &target, "deferred", deferral_tool_result(&request));
            o.request_id = Some(request.id.clone());
            o.request = Some(to_value("request", &*request)?);
            Err(o)
        }
    })
}

/// A denial of an allowed action that could not be performed as decided (a deny landed
/// between the decision and the open), in the core's wording.
fn refused_open(
    kind: ActionKind,
    target: &str,
    reason: impl std::fmt::Display,
) -> ToolOutcomeRecord {
    let d = turngate::gate::Denial {
        action: turngate::Action::new(kind, target),
        reason: reason.to_string(),
        verdict: None,
    };
    outcome(kind, target, "denied", d.tool_result())
}

fn file_call(
    kind: ActionKind,
    path: &str,
    call: &ToolCallRecord,
    default_tool: &str,
) -> ToolInvocation {
    ToolInvocation {
        kind,
        target: path.to_owned(),
        tool_name: Some(call.tool.clone().unwrap_or_else(|| default_tool.to_owned())),
        item_id: call.item_id.clone(),
        tool_id: None,
        cwd: None,
    }
}

fn read_all(file: std::fs::File, cap: u64) -> std::io::Result<(Vec<u8>, bool)> {
    let mut data = Vec::new();
    file.take(cap.saturating_add(1)).read_to_end(&mut data)?;
    let truncated = data.len() as u64 > cap;
    data.truncate(usize::try_from(cap).unwrap_or(usize::MAX));
    Ok((data, truncated))
}

fn continuation(call: &ToolCallRecord) -> Result<Option<Continuation>, TurnGateError> {
    call.approval
        .as_ref()
        .map(ApprovalRecord::to_core)
        .transpose()
}

/// The edit of `text`: exactly one occurrence of `old` replaced, or why not.
fn edited(text: &str, old: &str, new: &str) -> Result<String, String> {
    if old.is_empty() {
        return Err("the text to replace is empty".to_owned());
    }
    match text.matches(old).count() {
        1 => Ok(text.replacen(old, new, 1)),
        0 => Err("the text to replace was not found in the file".to_owned()),
        n => Err(format!(
            "the text to replace occurs {n} times in the file; it must occur exactly once \
             (include more of the surrounding text)"
        )),
    }
}

impl GateHandle {
    /// `read_file`: authorize a read of `path` (relative to the snapshot's cwd), open it
    /// race-free and return up to `max_bytes` (default 1 MiB) as text.
    pub async fn read_file(
        &self,
        path: &str,
        call: &ToolCallRecord,
        max_bytes: Option<u64>,
    ) -> Result<ToolOutcomeRecord, TurnGateError> {
        let kind = ActionKind::FileRead;
        let inv = file_call(kind, path, call, "read_file");
        let approval = continuation(call)?;
        let auth = self.gate.authorize_tool(&inv, approval.as_ref()).await?;
        let action = match not_run(kind, None, auth, || self.gate.evaluate(&inv).target)? {
            Ok(action) => action,
            Err(o) => return Ok(o),
        };
        let target = action.target.clone();
        let file = match self.gate.open_allowed(&action, false) {
            Ok(f) => f,
            Err(turngate::check::file::OpenError::Io(e)) => {
                return Ok(failed(kind, &target, "read_file", e));
            }
            Err(e) => return Ok(refused_open(kind, &target, e)),
        };
        let cap = max_bytes.unwrap_or(DEFAULT_READ_BYTES);
        let (data, truncated) = match read_all(file, cap) {
            Ok(r) => r,
            Err(e) => return Ok(failed(kind, &target, "read_file", e)),
        };
        let content = String::from_utf8_lossy(&data).into_owned();
        let mut text = content.clone();
        if truncated {
            text.push_str(&format!("\n[turngate: truncated after {cap} bytes]"));
        }
        let mut o = outcome(kind, &target, "ok", text);
        o.content = Some(content);
        Ok(o)
    }

    /// `write_file`: authorize a write of `path` and replace the file with `content`
    /// atomically (a temporary file beside it, renamed over it), race-free.
    pub async fn write_file(
        &self,
        path: &str,
        content: &[u8],
        call: &ToolCallRecord,
    ) -> Result<ToolOutcomeRecord, TurnGateError> {
        let kind = ActionKind::FileWrite;
        let inv = file_call(kind, path, call, "write_file");
        let approval = continuation(call)?;
        let auth = self.gate.authorize_tool(&inv, approval.as_ref()).await?;
        let action = match not_run(kind, None, auth, || self.gate.evaluate(&inv).target)? {
            Ok(action) => action,
            Err(o) => return Ok(o),
        };
        Ok(self.replace(&action, content, "write_file", || {
            format!("Wrote {} bytes to {}.", content.len(), action.target)
        }))
    }

    /// `edit_file`: authorize a write of `path` (judged as a read too) and replace exactly
    /// one occurrence of `old` with `new`; zero or several occurrences fail and write nothing.
    pub async fn edit_file(
        &self,
        path: &str,
        old: &str,
        new: &str,
        call: &ToolCallRecord,
    ) -> Result<ToolOutcomeRecord, TurnGateError> {
        let kind = ActionKind::FileWrite;
        let inv = file_call(kind, path, call, "edit_file");
        let approval = continuation(call)?;
        let auth = self.gate.authorize_edit(&inv, approval.as_ref()).await?;
        let action = match not_run(kind, None, auth, || self.gate.evaluate(&inv).target)? {
            Ok(action) => action,
            Err(o) => return Ok(o),
        };
        let target = action.target.clone();
        let read = turngate::Action {
            kind: ActionKind::FileRead,
            ..action.clone()
        };
        let file = match self.gate.open_allowed(&read, false) {
            Ok(f) => f,
            Err(turngate::check::file::OpenError::Io(e)) => {
                return Ok(failed(kind, &target, "edit_file", e));
            }
            Err(e) => return Ok(refused_open(kind, &target, e)),
        };
        let mut data = Vec::new();
        if let Err(e) = { file }.read_to_end(&mut data) {
            return Ok(failed(kind, &target, "edit_file", e));
        }
        let Ok(text) = String::from_utf8(data) else {
            return Ok(failed(
                kind,
                &target,
                "edit_file",
                "the file is not UTF-8 text",
            ));
        };
        let changed = match edited(&text, old, new) {
            Ok(t) => t,
            Err(why) => return Ok(failed(kind, &target, "edit_file", why)),
        };
        Ok(self.replace(&action, changed.as_bytes(), "edit_file", || {
            format!("Edited {target}: replaced 1 occurrence.")
        }))
    }

    fn replace(
        &self,
        action: &turngate::Action,
        content: &[u8],
        tool: &str,
        done: impl FnOnce() -> String,
    ) -> ToolOutcomeRecord {
        let kind = ActionKind::FileWrite;
        match self.gate.replace_allowed(action, content) {
            Ok(()) => outcome(kind, &action.target, "ok", done()),
            Err(turngate::check::file::OpenError::Io(e)) => failed(kind, &action.target, tool, e),
            Err(e) => refused_open(kind, &action.target, e),
        }
    }

    /// `run_shell`: authorize the command line and run it under the snapshot's sandbox with
    /// `opts`; `on_output` receives every chunk as it comes. A program that is not there is
    /// exit 127 (126 when it cannot be executed), with the shell's message on stderr.
    pub async fn run_shell(
        &self,
        command: &str,
        opts: &ShellOptionsRecord,
        call: &ToolCallRecord,
        on_output: Option<OutputSink>,
    ) -> Result<ToolOutcomeRecord, TurnGateError> {
        let kind = ActionKind::ShellCommand;
        let inv = ToolInvocation {
            cwd: opts.cwd.as_ref().map(std::path::PathBuf::from),
            ..file_call(kind, command, call, "run_shell")
        };
        let approval = continuation(call)?;
        let spawn = SpawnOptions {
            env: opts
                .env
                .iter()
                .map(|(k, v)| (OsString::from(k), OsString::from(v)))
                .collect(),
            timeout_ms: opts.timeout_ms,
            stdin: opts.stdin.as_deref().map(std::sync::Arc::from),
            on_output,
        };
        let result = match self.gate.spawn_tool(&inv, approval.as_ref(), &spawn).await {
            Ok(r) => r,
            Err(turngate::gate::GateError::Run(RunError::Spawn { program, source })) => {
                return Ok(missing_program(command, &program, &source));
            }
            Err(e) => return Err(e.into()),
        };
        let auth = match result {
            SpawnResult::Ran(o) => return Ok(ran(command, &o)),
            SpawnResult::Denied(d) => Authorization::Denied(d),
            SpawnResult::Deferred(request) => Authorization::Deferred { request },
        };
        Ok(match not_run(kind, Some(command), auth, String::new)? {
            Err(o) => o,
            // `not_run` of a denial or a deferral is never `Ok`; fail closed should it be.
            Ok(_) => refused_open(kind, command, "the command did not run"),
        })
    }

    /// `fetch_url`, first half: decide the call (the network action of `url`'s host and
    /// port) and resolve the name once. Allowed: the addresses to connect to, and only those,
    /// with `request` (already checked) to send as it is.
    pub async fn fetch_begin(
        &self,
        url: &str,
        request: &FetchRequest,
        call: &ToolCallRecord,
    ) -> Result<ToolStep, TurnGateError> {
        let kind = ActionKind::Network;
        let inv = file_call(kind, url, call, "fetch_url");
        let parsed = match url::Url::parse(url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") && u.host_str().is_some() => u,
            _ => {
                let d = turngate::gate::Denial {
                    action: turngate::Action::new(kind, url),
                    reason: "fetch_url takes an absolute http or https URL".to_owned(),
                    verdict: None,
                };
                return Ok(ToolStep::Done(outcome(
                    kind,
                    url,
                    "denied",
                    d.tool_result(),
                )));
            }
        };
        let approval = continuation(call)?;
        let auth = self.gate.authorize_tool(&inv, approval.as_ref()).await?;
        if let Err(o) = not_run(kind, Some(url), auth, String::new)? {
            return Ok(ToolStep::Done(o));
        }
        let addrs = match self.gate.resolve_allowed(&inv, url)? {
            Ok(addrs) => addrs,
            Err(d) => {
                return Ok(ToolStep::Done(outcome(
                    kind,
                    url,
                    "denied",
                    d.tool_result(),
                )));
            }
        };
        let host = parsed
            .host_str()
            .unwrap_or_default()
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let mut path = parsed.path().to_owned();
        if let Some(q) = parsed.query() {
            path.push('?');
            path.push_str(q);
        }
        Ok(ToolStep::Connect(FetchPlan {
            url: url.to_owned(),
            scheme: parsed.scheme().to_owned(),
            port: parsed.port_or_known_default().unwrap_or(0),
            host,
            path,
            addrs: addrs.iter().map(ToString::to_string).collect(),
            method: request.method.clone(),
            headers: request.headers.clone(),
        }))
    }
}

/// The outcome of a command that ran.
fn ran(command: &str, o: &turngate::sandbox::ProcessOutcome) -> ToolOutcomeRecord {
    let kind = ActionKind::ShellCommand;
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    let status = match (o.exit_code, o.signal) {
        _ if o.timed_out => "the command timed out and was killed".to_owned(),
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        (None, None) => "ended without an exit code".to_owned(),
    };
    let mut text = status;
    for (name, body, cut) in [
        ("stdout", &stdout, o.stdout_truncated),
        ("stderr", &stderr, o.stderr_truncated),
    ] {
        if !body.is_empty() {
            text.push_str(&format!("\n--- {name} ---\n{body}"));
            if cut {
                text.push_str("\n[turngate: truncated]");
            }
        }
    }
    let mut out = outcome(kind, command, "ok", text);
    out.exit_code = o.exit_code;
    out.stdout = Some(stdout);
    out.stderr = Some(stderr);
    out
}

/// A program that could not be started, as a shell reports it: 127 (not found) or 126 (not
/// executable), its message on stderr.
fn missing_program(command: &str, program: &OsString, err: &std::io::Error) -> ToolOutcomeRecord {
    let program = program.to_string_lossy();
    let (code, why) = match err.kind() {
        std::io::ErrorKind::NotFound => (127, "command not found".to_owned()),
        std::io::ErrorKind::PermissionDenied => (126, "Permission denied".to_owned()),
        _ => (126, err.to_string()),
    };
    let stderr = format!("{program}: {why}\n");
    let mut o = outcome(
        ActionKind::ShellCommand,
        command,
        "ok",
        format!("exit code {code}\n--- stderr ---\n{stderr}"),
    );
    o.exit_code = Some(code);
    o.stdout = Some(String::new());
    o.stderr = Some(stderr);
    o
}

/// `fetch_url`, second half: the response of an allowed fetch (`body` already capped by the
/// binding at `max`, `truncated` when it was). A 3xx is reported with its `location`, not
/// followed.
pub fn fetch_done(
    url: &str,
    status: u16,
    body: &[u8],
    truncated: bool,
    location: Option<&str>,
) -> ToolOutcomeRecord {
    let content = String::from_utf8_lossy(body).into_owned();
    let mut text = format!("HTTP {status}");
    if let (300..=399, Some(loc)) = (status, location) {
        text.push_str(&format!(
            "\nredirect to {loc} not followed: fetch it with fetch_url (it is checked again)"
        ));
    }
    if !content.is_empty() {
        text.push('\n');
        text.push_str(&content);
    }
    if truncated {
        text.push_str("\n[turngate: truncated]");
    }
    let mut o = outcome(ActionKind::Network, url, "ok", text);
    o.status = Some(status);
    o.content = Some(content);
    o
}

/// `fetch_url`, second half, when the connection or the exchange failed.
pub fn fetch_failed(url: &str, error: &str) -> ToolOutcomeRecord {
    failed(ActionKind::Network, url, "fetch_url", error)
}

/// The arguments of any guarded tool, by name, as a binding passes them (its keyword
/// arguments, or an options object): an unknown one is refused, naming it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolArgs {
    path: Option<String>,
    content: Option<String>,
    old: Option<String>,
    new: Option<String>,
    command: Option<String>,
    url: Option<String>,
    max_bytes: Option<u64>,
    env: Option<std::collections::BTreeMap<String, String>>,
    timeout_ms: Option<u64>,
    stdin: Option<String>,
    cwd: Option<String>,
    // fetch_url's request line and headers: checked here ([`FetchRequest`]) and sent from the
    // plan (not part of the decision: the network action is the host and port).
    method: Option<String>,
    headers: Option<Value>,
    #[serde(rename = "body")]
    _body: Option<Value>,
    item_id: Option<String>,
    tool: Option<String>,
    approval: Option<Value>,
}

fn required(value: Option<String>, tool: &str, name: &str) -> Result<String, TurnGateError> {
    value.ok_or_else(|| TurnGateError::invalid(tool, format!("`{name}` is required")))
}

impl GateHandle {
    /// Call the guarded tool `name` (`read_file`, `write_file`, `edit_file`, `run_shell`,
    /// `fetch_url`) with `args` (its arguments by name, plus `item_id`, `tool`, `approval`).
    /// `data` is the call's bytes when they are not text: `write_file`'s content or
    /// `run_shell`'s stdin. For `fetch_url` an allowed call is [`ToolStep::Connect`]: the
    /// binding connects to those addresses and finishes with [`fetch_done`].
    pub async fn call_tool(
        &self,
        name: &str,
        args: Value,
        data: Option<Vec<u8>>,
        on_output: Option<OutputSink>,
    ) -> Result<ToolStep, TurnGateError> {
        let a: ToolArgs =
            serde_json::from_value(args).map_err(|e| TurnGateError::invalid(name, e))?;
        let call = ToolCallRecord {
            item_id: a.item_id,
            tool: a.tool,
            approval: a
                .approval
                .filter(|v| !v.is_null())
                .map(ApprovalRecord::from_value)
                .transpose()?,
        };
        let done = match name {
            "read_file" => {
                let path = required(a.path, name, "path")?;
                self.read_file(&path, &call, a.max_bytes).await?
            }
            "write_file" => {
                let path = required(a.path, name, "path")?;
                let content = match (data, a.content) {
                    (Some(bytes), None) => bytes,
                    (None, Some(text)) => text.into_bytes(),
                    _ => {
                        return Err(TurnGateError::invalid(
                            name,
                            "`content` (text or bytes) is required",
                        ));
                    }
                };
                self.write_file(&path, &content, &call).await?
            }
            "edit_file" => {
                let path = required(a.path, name, "path")?;
                let old = required(a.old, name, "old")?;
                let new = required(a.new, name, "new")?;
                self.edit_file(&path, &old, &new, &call).await?
            }
            "run_shell" => {
                let command = required(a.command, name, "command")?;
                let opts = ShellOptionsRecord {
                    env: a.env.unwrap_or_default().into_iter().collect(),
                    timeout_ms: a.timeout_ms,
                    stdin: data.or(a.stdin.map(String::into_bytes)),
                    cwd: a.cwd,
                };
                self.run_shell(&command, &opts, &call, on_output).await?
            }
            "fetch_url" => {
                let url = required(a.url, name, "url")?;
                let request = FetchRequest::from_args(a.method.as_deref(), a.headers)?;
                return self.fetch_begin(&url, &request, &call).await;
            }
            other => {
                return Err(TurnGateError::invalid(
                    "tool",
                    format!("unknown guarded tool `{other}`"),
                ));
            }
        };
        Ok(ToolStep::Done(done))
    }
}

/// The default durable store of a one-line turn: the CLI's, `$XDG_STATE_HOME/turngate/audit.db`,
/// else `~/.local/state/turngate/audit.db`.
pub fn default_store_path() -> Result<String, TurnGateError> {
    let base =
        match std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
            Some(dir) => std::path::PathBuf::from(dir),
            None => {
                let home = std::env::var_os("HOME").filter(|v| !v.is_empty()).ok_or_else(|| {
                TurnGateError::invalid(
                    "store",
                    "no default store: neither XDG_STATE_HOME nor HOME is set; pass a store",
                )
            })?;
                std::path::PathBuf::from(home).join(".local").join("state")
            }
        };
    let dir = base.join("turngate");
    std::fs::create_dir_all(&dir).map_err(|e| TurnGateError::Store {
        message: format!(
            "cannot create the default store's directory {}: {e}",
            dir.display()
        ),
    })?;
    Ok(dir.join("audit.db").to_string_lossy().into_owned())
}

/// The snapshot of a one-line turn: `mode` over `workspace` (canonicalized) on this platform
/// (probed), with `policy` (a `Policy` document) as the selection's policy.
pub fn turn_snapshot(
    workspace: &str,
    mode: &str,
    policy: Option<Value>,
) -> Result<Value, TurnGateError> {
    let root = std::fs::canonicalize(workspace)
        .map_err(|e| TurnGateError::invalid("workspace", format!("{workspace}: {e}")))?;
    let platform = to_value("platform", &turngate::probe::probe_platform())?;
    let mut selection = serde_json::json!({ "mode": mode });
    if let Some(policy) = policy {
        selection["policy"] = policy;
    }
    let context = serde_json::json!({
        "workspace_root": root,
        "execution_backend": "native",
        "platform": platform,
    });
    crate::snapshot::resolve(Some(selection), context, None)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn an_edit_replaces_exactly_one_occurrence() {
        assert_eq!(edited("a b c", "b", "x"), Ok("a x c".to_owned()));
        assert!(edited("a b b", "b", "x").is_err_and(|e| e.contains("occurs 2 times")));
        assert!(edited("a", "b", "x").is_err_and(|e| e.contains("not found")));
        assert!(edited("a", "", "x").is_err_and(|e| e.contains("empty")));
    }

    #[test]
    fn a_fetch_request_refuses_what_could_smuggle_another() {
        let h = |n: &str, v: &str| vec![(n.to_owned(), v.to_owned())];
        let ok = FetchRequest::new(Some("POST"), h("X-Note", "a b\tc")).unwrap();
        assert_eq!((ok.method(), ok.headers().len()), ("POST", 1));
        assert_eq!(FetchRequest::new(None, []).unwrap().method(), "GET");
        let refused = |m: Option<&str>, hs: Vec<(String, String)>, says: &str| {
            let e = FetchRequest::new(m, hs).unwrap_err();
            assert_eq!(e.kind(), "InvalidInput");
            assert!(e.to_string().contains(says), "{e} does not say {says}");
        };
        refused(Some("GET / HTTP/1.1\r\nX: y"), vec![], "not an HTTP method");
        refused(Some(""), vec![], "not an HTTP method");
        refused(Some("connect"), vec![], "CONNECT");
        for owned in [
            "Host",
            "Expect",
            "content-length",
            "Transfer-Encoding",
            "TE",
            "Upgrade",
        ] {
            refused(None, h(owned, "x"), "set by fetch_url itself");
        }
        refused(None, h("X-A", "1\r\nHost: evil"), "line break");
        refused(None, h("X-A", "caf\u{e9}"), "non-ASCII");
        refused(None, h("X A", "1"), "not an HTTP token");
        refused(None, h("", "1"), "not an HTTP token");
        let e = FetchRequest::from_args(None, Some(serde_json::json!({"X-A": 1}))).unwrap_err();
        assert!(e.to_string().contains("must be a string"));
        let e = FetchRequest::from_args(None, Some(serde_json::json!(["X-A"]))).unwrap_err();
        assert!(e.to_string().contains("an object of strings"));
    }

    #[test]
    fn a_missing_program_is_127_with_the_shells_message() {
        let err = std::io::Error::from(std::io::ErrorKind::NotFound);
        let o = missing_program("nosuch x", &OsString::from("nosuch"), &err);
        assert_eq!(o.exit_code, Some(127));
        assert_eq!(o.stderr.as_deref(), Some("nosuch: command not found\n"));
        assert_eq!(o.outcome, "ok");
    }

    #[test]
    fn an_approval_reads_every_bindings_shape() {
        // Python's (a serialized record), Node's (camelCase, a name or a boolean).
        let record = ApprovalRecord::named("r1", "allow_for_turn").unwrap();
        let back = ApprovalRecord::from_value(serde_json::to_value(&record).unwrap()).unwrap();
        assert_eq!(back, record);
        let node = serde_json::json!({"requestId": "r2", "decision": false});
        let a = ApprovalRecord::from_value(node).unwrap();
        assert!(matches!(a.decision, DecisionRecord::Deny { .. }) && a.request_id == "r2");
        let obj = serde_json::json!({"requestId": "r3", "decision": {"decision": "approve"}});
        assert_eq!(
            ApprovalRecord::from_value(obj).unwrap().decision,
            DecisionRecord::approve()
        );
        for bad in [
            serde_json::json!({"decision": "allow_once"}),
            serde_json::json!({"requestId": "r", "decision": "maybe"}),
            serde_json::json!({"requestId": "r", "decision": true, "extra": 1}),
            serde_json::json!("r"),
        ] {
            assert!(ApprovalRecord::from_value(bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn defer_continues_nothing() {
        let a = ApprovalRecord {
            request_id: "r".into(),
            decision: DecisionRecord::Defer,
            for_turn: false,
        };
        assert!(a.to_core().is_err());
        assert!(ApprovalRecord::named("r", "maybe").is_err());
        assert!(ApprovalRecord::named("r", "allow_for_turn").is_ok_and(|a| a.for_turn));
    }
}
