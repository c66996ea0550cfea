//! The proxy loop: client lines in, server lines out, and back, with `tools/list` answers
//! recorded and every `tools/call` decided by the gate before the server sees it.
//!
//! It refuses what it cannot judge rather than forwarding it: a line that is not one JSON-RPC
//! message, a batch, a request before `initialize`, a request id already in flight, a response
//! the other side never asked for, a line longer than the limit. When the server goes away,
//! every request still waiting gets an error, so the client never hangs.

use std::cell::Cell;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use futures_util::stream::{FuturesUnordered, StreamExt};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::args::argument_targets;
use super::jsonrpc::{self, Message, ParseError, id_key};
use super::tools::{ToolRegistry, valid_name};
use crate::action::{ActionKind, Effect};
use crate::approval::{ApprovalResolution, Decision};
use crate::audit::{AuditStore, StoredResolution};
use crate::gate::{AlsoJudged, Authorization, Gate, ToolInvocation};
use crate::verdict::{Reason, Verdict};

/// The layer named in verdicts the proxy adds (a changed definition, a bad tool name).
pub const MCP_LAYER: &str = "mcp";

/// How the proxy behaves.
#[derive(Debug, Clone)]
pub struct ProxyOptions {
    /// The server's name: targets are `NAME/tool`.
    pub server: String,
    /// The longest line accepted from either side, in bytes.
    pub max_line: usize,
    /// HOME, to judge `~/...` path arguments as the server will expand them.
    pub home: Option<std::path::PathBuf>,
    /// How often a deferred call polls the store for its resolution.
    pub poll: Duration,
    /// How long answers still owed to the client are delivered after it closed its side.
    pub drain: Duration,
}

impl ProxyOptions {
    /// Options for server `name`: a 64 MiB line limit, HOME from the environment.
    pub fn new(name: impl Into<String>) -> Self {
        ProxyOptions {
            server: name.into(),
            max_line: 64 << 20,
            home: std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(std::path::PathBuf::from),
            poll: Duration::from_millis(200),
            drain: Duration::from_secs(5),
        }
    }
}

/// Why the proxy stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProxyEnd {
    /// The client closed its side; the server's stdin was closed.
    ClientClosed,
    /// The server closed its side (it exited, or never started).
    ServerClosed,
    /// The server broke the protocol beyond recovery (a line over the limit); waiting
    /// requests were answered with errors.
    ServerBroke(String),
}

enum Frame {
    /// A line, holding its share of the reader's byte budget until it is dropped.
    Line(Vec<u8>, OwnedSemaphorePermit),
    TooLong,
}

/// The bytes of read but unhandled lines one reader may hold: one line at the limit, or
/// many smaller ones. A peer that stops reading stalls its sender, and what piles up
/// behind it is bounded by this, not by a count of frames (red team F6: 64 frames of up to
/// 64 MiB each were queued).
fn frame_budget(max: usize) -> Arc<Semaphore> {
    Arc::new(Semaphore::new(budget_size(max)))
}

fn budget_size(max: usize) -> usize {
    max.clamp(1, u32::MAX as usize)
}

/// Read newline-delimited frames into `tx`, at most `max` bytes each; a longer one is
/// skipped to its newline and reported as [`Frame::TooLong`]. A line waits for its bytes
/// in `budget` before it is queued. Ends at EOF, a read error or a closed receiver.
async fn read_frames<R: AsyncRead + Unpin>(
    reader: R,
    max: usize,
    budget: Arc<Semaphore>,
    tx: mpsc::Sender<Frame>,
) {
    let mut reader = BufReader::with_capacity(64 * 1024, reader);
    let mut line = Vec::new();
    let mut skipping = false;
    loop {
        let (consumed, done) = {
            let buf = match reader.fill_buf().await {
                Ok(b) => b,
                Err(_) => return,
            };
            if buf.is_empty() {
                return;
            }
            match buf.iter().position(|b| *b == b'\n') {
                Some(i) => {
                    if !skipping {
                        line.extend_from_slice(&buf[..i]);
                    }
                    (i + 1, true)
                }
                None => {
                    if !skipping {
                        line.extend_from_slice(buf);
                    }
                    (buf.len(), false)
                }
            }
        };
        reader.consume(consumed);
        if !skipping && line.len() > max {
            skipping = true;
            line = Vec::new();
            if tx.send(Frame::TooLong).await.is_err() {
                return;
            }
        }
        if done {
            if skipping {
                skipping = false;
            } else {
                if line.last() == Some(&b'\r') {
                    line.pop();
                }
                if !line.iter().all(u8::is_ascii_whitespace) {
                    let size = u32::try_from(line.len().max(1)).unwrap_or(u32::MAX);
                    let permits = size.min(u32::try_from(budget_size(max)).unwrap_or(u32::MAX));
                    let Ok(permit) = budget.clone().acquire_many_owned(permits).await else {
                        return;
                    };
                    if tx
                        .send(Frame::Line(std::mem::take(&mut line), permit))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                line.clear();
            }
        }
    }
}

async fn send<W: AsyncWrite + Unpin>(w: &mut W, line: &str) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(line.len() + 1);
    buf.extend_from_slice(line.as_bytes());
    buf.push(b'\n');
    w.write_all(&buf).await?;
    w.flush().await
}

/// What a request of the client is waiting for.
#[derive(Debug, Clone)]
struct Pending {
    id: Value,
    method: String,
    /// For `tools/list`: the request had no cursor (a new listing starts).
    first_page: bool,
}

/// A decided `tools/call`.
struct Decided {
    key: String,
    id: Value,
    line: String,
    outcome: Result<Authorization, String>,
    /// Refused without deciding (too many deferred calls): the text of the result.
    refused: Option<String>,
    target: String,
    kind: ActionKind,
}

type Deciding<'g> = Pin<Box<dyn Future<Output = Decided> + 'g>>;

/// The proxy of one wrap session.
pub struct McpProxy<'g> {
    gate: &'g Gate,
    store: Option<Arc<dyn AuditStore>>,
    options: ProxyOptions,
    tools: ToolRegistry,
    initialized: bool,
    /// Client requests forwarded to the server, by id key.
    pending: HashMap<String, Pending>,
    /// Client `tools/call`s being decided, by id key.
    deciding: HashMap<String, Value>,
    /// Server requests forwarded to the client, by id key.
    server_pending: HashMap<String, Value>,
    /// Deferred calls waiting on an approval.
    deferred: Rc<Cell<usize>>,
    /// The `capabilities` of the client's last `initialize` (none until it is sent).
    client_capabilities: Value,
}

impl std::fmt::Debug for McpProxy<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpProxy")
            .field("server", &self.options.server)
            .finish_non_exhaustive()
    }
}

/// Lines to write, produced by handling one message.
#[derive(Default)]
struct Out {
    client: Vec<String>,
    server: Vec<String>,
}

/// A method as a lenient server may route it: trimmed of whitespace and control characters,
/// ASCII case-folded.
fn normalized_method(method: &str) -> String {
    method
        .trim_matches(|c: char| c.is_whitespace() || c.is_control())
        .to_ascii_lowercase()
}

/// The client capability a server-to-client request needs (`sampling/createMessage` needs
/// `sampling`); `None` for requests any client serves (`ping`). A near-miss spelling needs it
/// too.
fn client_capability_for(method: &str) -> Option<&'static str> {
    let m = normalized_method(method);
    [
        ("sampling/", "sampling"),
        ("elicitation/", "elicitation"),
        ("roots/", "roots"),
    ]
    .into_iter()
    .find(|(prefix, _)| m.starts_with(prefix))
    .map(|(_, capability)| capability)
}

/// Most deferred calls one session keeps waiting on an approval at once; one more is
/// refused (an `isError` result, its request cancelled) instead (red team F5).
pub const MAX_DEFERRED_CALLS: usize = 8;

/// The reason stored on a deferred call's request cancelled because too many were waiting.
const TOO_MANY: &str = "too_many_pending_asks";

/// Counts one deferred call while it waits; the count drops however the wait ends.
struct Waiting(Rc<Cell<usize>>);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(1));
    }
}

fn log(msg: &str) {
    eprintln!("turngate mcp: {msg}");
}

impl<'g> McpProxy<'g> {
    /// A proxy deciding through `gate`. Deferred calls wait for their resolution in `store`
    /// (the gate's store) when one is given; without one a deferral is answered at once as
    /// a pending, not-run result.
    pub fn new(gate: &'g Gate, store: Option<Arc<dyn AuditStore>>, options: ProxyOptions) -> Self {
        McpProxy {
            gate,
            store,
            options,
            tools: ToolRegistry::new(),
            initialized: false,
            pending: HashMap::new(),
            deciding: HashMap::new(),
            server_pending: HashMap::new(),
            deferred: Rc::new(Cell::new(0)),
            client_capabilities: Value::Null,
        }
    }

    /// The tools seen so far.
    pub fn tools(&self) -> &ToolRegistry {
        &self.tools
    }

    /// Run until one side closes: `client_in`/`client_out` are the client's stdio,
    /// `server_out`/`server_in` the server's stdout and stdin. `server_in` is dropped (the
    /// server sees EOF) when the client closes.
    pub async fn run<CR, CW, SR, SW>(
        &mut self,
        client_in: CR,
        mut client_out: CW,
        server_out: SR,
        server_in: SW,
    ) -> std::io::Result<ProxyEnd>
    where
        CR: AsyncRead + Unpin + Send + 'static,
        CW: AsyncWrite + Unpin,
        SR: AsyncRead + Unpin + Send + 'static,
        SW: AsyncWrite + Unpin,
    {
        let max = self.options.max_line;
        let (ctx, mut crx) = mpsc::channel(64);
        let (stx, mut srx) = mpsc::channel(64);
        let client_reader = tokio::spawn(read_frames(client_in, max, frame_budget(max), ctx));
        let server_reader = tokio::spawn(read_frames(server_out, max, frame_budget(max), stx));
        let mut server_in = Some(server_in);
        let mut decisions: FuturesUnordered<Deciding<'g>> = FuturesUnordered::new();
        // After the client closed its side, answers still owed to it are delivered for a
        // short while (a client that writes its requests and then closes its stdin).
        let mut client_closed = false;
        let far = tokio::time::Instant::now() + Duration::from_secs(60 * 60 * 24 * 365);
        let mut drain_until = far;
        let end = loop {
            if client_closed && self.pending.is_empty() && self.deciding.is_empty() {
                break ProxyEnd::ClientClosed;
            }
            let out = tokio::select! {
                frame = crx.recv(), if !client_closed => match frame {
                    None => {
                        client_closed = true;
                        drain_until = tokio::time::Instant::now() + self.options.drain;
                        continue;
                    }
                    Some(Frame::TooLong) => Out {
                        client: vec![jsonrpc::error_line(
                            None,
                            jsonrpc::INVALID_REQUEST,
                            &format!("message longer than {max} bytes; it was not forwarded"),
                        )],
                        server: Vec::new(),
                    },
                    Some(Frame::Line(line, _held)) => self.on_client(&line, &mut decisions),
                },
                frame = srx.recv() => match frame {
                    None => break ProxyEnd::ServerClosed,
                    Some(Frame::TooLong) => break ProxyEnd::ServerBroke(format!(
                        "the server sent a message longer than {max} bytes"
                    )),
                    Some(Frame::Line(line, _held)) => self.on_server(&line),
                },
                Some(done) = decisions.next(), if !decisions.is_empty() => self.decided(done),
                () = tokio::time::sleep_until(drain_until), if client_closed => {
                    break ProxyEnd::ClientClosed;
                }
            };
            for line in &out.client {
                send(&mut client_out, line).await?;
            }
            if let Some(w) = server_in.as_mut() {
                for line in &out.server {
                    if send(w, line).await.is_err() {
                        // The server's stdin is gone: it exited; its stdout's end says so.
                        server_in = None;
                        break;
                    }
                }
            }
        };
        client_reader.abort();
        drop(server_in);
        if end != ProxyEnd::ClientClosed {
            server_reader.abort();
            let why = match &end {
                ProxyEnd::ServerBroke(why) => why.clone(),
                _ => "the MCP server exited (or was not started; see turngate's stderr)".to_owned(),
            };
            for line in self.fail_waiting(&why) {
                send(&mut client_out, &line).await?;
            }
        }
        Ok(end)
    }

    /// Error responses for every client request still waiting.
    fn fail_waiting(&mut self, why: &str) -> Vec<String> {
        let mut ids: Vec<Value> = self.pending.drain().map(|(_, p)| p.id).collect();
        ids.extend(self.deciding.drain().map(|(_, id)| id));
        ids.iter()
            .map(|id| jsonrpc::error_line(Some(id), jsonrpc::INTERNAL_ERROR, why))
            .collect()
    }

    fn on_client(&mut self, line: &[u8], decisions: &mut FuturesUnordered<Deciding<'g>>) -> Out {
        let mut out = Out::default();
        let msg = match jsonrpc::parse(line) {
            Ok(m) => m,
            Err(ParseError::Json(why)) => {
                out.client.push(jsonrpc::error_line(
                    None,
                    jsonrpc::PARSE_ERROR,
                    &format!("parse error: {why}"),
                ));
                return out;
            }
            Err(ParseError::Batch(items)) => {
                // MCP's current revision has no batches; a batch is never forwarded, so no
                // call in it can pass undecided.
                let why = "JSON-RPC batches are not accepted by turngate mcp wrap; send each message on its own line";
                let answers: Vec<Value> = items
                    .iter()
                    .filter_map(|i| i.get("id").filter(|id| !id.is_null()))
                    .map(|id| jsonrpc::error_value(Some(id), jsonrpc::INVALID_REQUEST, why))
                    .collect();
                out.client.push(if answers.is_empty() {
                    jsonrpc::error_line(None, jsonrpc::INVALID_REQUEST, why)
                } else {
                    Value::Array(answers).to_string()
                });
                return out;
            }
            Err(ParseError::Invalid { id, why }) => {
                out.client.push(jsonrpc::error_line(
                    id.as_ref(),
                    jsonrpc::INVALID_REQUEST,
                    &format!("invalid request: {why}"),
                ));
                return out;
            }
        };
        match msg {
            Message::Request { id, method, params } => {
                let key = id_key(&id);
                if self.pending.contains_key(&key) || self.deciding.contains_key(&key) {
                    out.client.push(jsonrpc::error_line(
                        Some(&id),
                        jsonrpc::INVALID_REQUEST,
                        "a request with this id is already in flight",
                    ));
                    return out;
                }
                if !self.initialized && method != "initialize" && method != "ping" {
                    out.client.push(jsonrpc::error_line(
                        Some(&id),
                        jsonrpc::NOT_INITIALIZED,
                        "the session is not initialized: send `initialize` first",
                    ));
                    return out;
                }
                if method != "tools/call" && normalized_method(&method) == "tools/call" {
                    // A lenient server would run it as a call; it is never forwarded undecided.
                    log(&format!(
                        "refused the request `{}`, a near-miss spelling of tools/call",
                        method.escape_default()
                    ));
                    out.client.push(jsonrpc::error_line(
                        Some(&id),
                        jsonrpc::METHOD_NOT_FOUND,
                        &format!(
                            "`{}` is not an MCP method (the method is `tools/call`); it was not \
                             forwarded",
                            method.escape_default()
                        ),
                    ));
                    return out;
                }
                if method == "tools/call" {
                    let request = Message::Request {
                        id: id.clone(),
                        method,
                        params: params.clone(),
                    };
                    match self.decide(key.clone(), id.clone(), params, request.to_line()) {
                        Ok(fut) => {
                            self.deciding.insert(key, id);
                            decisions.push(fut);
                        }
                        Err(line) => out.client.push(line),
                    }
                    return out;
                }
                if method == "initialize" {
                    self.client_capabilities = params
                        .as_ref()
                        .and_then(|p| p.get("capabilities"))
                        .cloned()
                        .unwrap_or(Value::Null);
                }
                let first_page = params
                    .as_ref()
                    .and_then(|p| p.get("cursor"))
                    .is_none_or(Value::is_null);
                let line = Message::Request {
                    id: id.clone(),
                    method: method.clone(),
                    params,
                }
                .to_line();
                self.pending.insert(
                    key,
                    Pending {
                        id,
                        method,
                        first_page,
                    },
                );
                out.server.push(line);
            }
            Message::Notification { method, params } => {
                if !method.starts_with("notifications/") {
                    // A request without an id (`tools/call` as a notification) would be run
                    // undecided by a server that ignores the id: only notifications pass.
                    log(&format!(
                        "dropped `{}` sent without an id: only `notifications/*` may be sent \
                         without one",
                        method.escape_default()
                    ));
                } else if self.initialized {
                    out.server
                        .push(Message::Notification { method, params }.to_line());
                } else {
                    log(&format!("dropped `{method}` sent before initialize"));
                }
            }
            Message::Response { id, body } => {
                if self.server_pending.remove(&id_key(&id)).is_some() {
                    out.server.push(Message::Response { id, body }.to_line());
                } else {
                    log(&format!(
                        "dropped a client response to id {id}, which the server never sent"
                    ));
                }
            }
        }
        out
    }

    fn on_server(&mut self, line: &[u8]) -> Out {
        let mut out = Out::default();
        let msg = match jsonrpc::parse(line) {
            Ok(m) => m,
            Err(e) => {
                log(&format!(
                    "dropped a server line that is not one message: {e:?}"
                ));
                return out;
            }
        };
        match msg {
            Message::Request { id, method, params } => {
                if let Some(capability) = client_capability_for(&method)
                    && self
                        .client_capabilities
                        .get(capability)
                        .is_none_or(Value::is_null)
                {
                    // The client never offered it: the server is answered, the client is not
                    // asked (red team F3).
                    log(&format!(
                        "refused the server's `{}`: the client did not declare the `{capability}` \
                         capability",
                        method.escape_default()
                    ));
                    out.server.push(jsonrpc::error_line(
                        Some(&id),
                        jsonrpc::METHOD_NOT_FOUND,
                        &format!("the client did not declare the `{capability}` capability"),
                    ));
                    return out;
                }
                if client_capability_for(&method).is_some() {
                    log(&format!(
                        "forwarded the server's `{}` request (id {id}) to the client",
                        method.escape_default()
                    ));
                }
                self.server_pending.insert(id_key(&id), id.clone());
                out.client
                    .push(Message::Request { id, method, params }.to_line());
            }
            Message::Notification { method, params } => {
                out.client
                    .push(Message::Notification { method, params }.to_line());
            }
            Message::Response { id, body } => {
                let Some(pending) = self.pending.remove(&id_key(&id)) else {
                    log(&format!(
                        "dropped a server response to id {id}, which the client never sent \
                         (or was already answered)"
                    ));
                    return out;
                };
                if let Ok(result) = &body {
                    match pending.method.as_str() {
                        "initialize" => self.initialized = true,
                        "tools/list" => {
                            if let Some(tools) = result.get("tools").and_then(Value::as_array) {
                                self.tools.record_listing(pending.first_page, tools);
                            }
                        }
                        _ => {}
                    }
                }
                out.client.push(Message::Response { id, body }.to_line());
            }
        }
        out
    }

    /// Classify a `tools/call` and start deciding it; `Err` is the answer when it cannot
    /// even be judged.
    fn decide(
        &self,
        key: String,
        id: Value,
        params: Option<Value>,
        line: String,
    ) -> Result<Deciding<'g>, String> {
        let params = params.unwrap_or(Value::Null);
        let Some(name) = params.get("name").and_then(Value::as_str) else {
            return Err(jsonrpc::error_line(
                Some(&id),
                jsonrpc::INVALID_PARAMS,
                "tools/call needs a string `name`",
            ));
        };
        let arguments = params.get("arguments").cloned().unwrap_or(Value::Null);
        if !(arguments.is_object() || arguments.is_null()) {
            return Err(jsonrpc::error_line(
                Some(&id),
                jsonrpc::INVALID_PARAMS,
                "tools/call `arguments` must be an object",
            ));
        }
        let class = self.tools.classify(name);
        let target = format!("{}/{name}", self.options.server);
        let mut also = Vec::new();
        if !valid_name(name) {
            also.push(AlsoJudged {
                verdict: Verdict::without_rule(Effect::Deny, MCP_LAYER, Reason::InvalidTarget),
                because: format!(
                    "the tool name `{}` is not a valid MCP tool name (1 to 128 of A-Z a-z 0-9 _ - .)",
                    name.escape_default()
                ),
                fresh: false,
            });
        }
        if class.changed {
            also.push(AlsoJudged {
                verdict: Verdict::without_rule(
                    Effect::Ask,
                    MCP_LAYER,
                    Reason::ToolDefinitionChanged,
                ),
                because: format!(
                    "the definition of `{name}` changed since the server first listed it"
                ),
                fresh: true,
            });
        }
        match argument_targets(
            &arguments,
            class.input_schema.as_ref(),
            class.kind == ActionKind::McpRead,
            self.options.home.as_deref(),
        ) {
            Ok(found) => {
                for t in found.targets {
                    let inv = ToolInvocation::new(t.kind, &t.target).with_tool(name);
                    let eval = self.gate.evaluate(&inv);
                    let mut verdict = eval.verdict.clone();
                    let guess = if t.guessed && verdict.effect == Effect::Deny {
                        // Only the value looks like a path: a deny of it is an ask.
                        verdict = Verdict::without_rule(Effect::Ask, MCP_LAYER, verdict.reason);
                        ", which only looks like a path: ask"
                    } else {
                        ""
                    };
                    also.push(AlsoJudged {
                        because: format!(
                            "argument `{}`: {} `{}` is {} ({}){guess}",
                            t.argument,
                            t.kind,
                            eval.target,
                            eval.verdict.effect,
                            eval.verdict.reason.as_str()
                        ),
                        // An argument's ask is answered fresh, never by a grant of the tool.
                        fresh: verdict.effect == Effect::Ask,
                        verdict,
                    });
                }
                for u in found.unjudgeable {
                    also.push(AlsoJudged {
                        verdict: Verdict::without_rule(
                            Effect::Ask,
                            MCP_LAYER,
                            Reason::InvalidTarget,
                        ),
                        because: format!("argument `{}`: {}", u.argument, u.why),
                        fresh: true,
                    });
                }
            }
            Err(too) => also.push(AlsoJudged {
                verdict: Verdict::without_rule(Effect::Ask, MCP_LAYER, Reason::InvalidTarget),
                because: too.0,
                fresh: true,
            }),
        }
        let mut inv = ToolInvocation::new(class.kind, target.clone()).with_tool(name);
        inv.tool_id = Some(match &id {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        });
        let gate = self.gate;
        let store = self.store.clone();
        let poll = self.options.poll;
        let kind = class.kind;
        let deferred = self.deferred.clone();
        Ok(Box::pin(async move {
            let mut refused = None;
            let outcome = match gate.authorize_also(&inv, &also).await {
                Ok(Authorization::Deferred { request }) => match store {
                    Some(store) if deferred.get() >= MAX_DEFERRED_CALLS => {
                        // Settled at once, so nobody is asked about it and it does not poll.
                        let _ = store.resolve(
                            &request.id,
                            StoredResolution::new(ApprovalResolution::Cancelled, TOO_MANY),
                        );
                        log(&format!(
                            "cancelled approval request {}: {MAX_DEFERRED_CALLS} calls are \
                             waiting on an approval already",
                            request.id
                        ));
                        refused = Some(format!(
                            "Permission denied by turngate: too many pending approvals \
                             ({MAX_DEFERRED_CALLS} calls of this session are waiting on one \
                             already); this call did not run."
                        ));
                        Ok(Authorization::Deferred { request })
                    }
                    Some(store) => {
                        deferred.set(deferred.get() + 1);
                        let _waiting = Waiting(deferred);
                        wait_and_resume(gate, store.as_ref(), &request.id, poll).await
                    }
                    None => Ok(Authorization::Deferred { request }),
                },
                other => other.map_err(|e| e.to_string()),
            };
            Decided {
                refused,
                key,
                id,
                line,
                outcome,
                target,
                kind,
            }
        }))
    }

    fn decided(&mut self, done: Decided) -> Out {
        let mut out = Out::default();
        if self.deciding.remove(&done.key).is_none() {
            // Answered already (the server went away while it was being decided).
            return out;
        }
        if let Some(text) = done.refused {
            out.client.push(jsonrpc::tool_error_line(&done.id, &text));
            return out;
        }
        match done.outcome {
            Ok(Authorization::Allowed { action, .. }) => {
                if action.kind != done.kind || action.target != done.target {
                    out.client.push(jsonrpc::tool_error_line(
                        &done.id,
                        "Permission denied by turngate: the approver modified this MCP call; a \
                         modified call cannot be forwarded, so nothing ran.",
                    ));
                    return out;
                }
                self.pending.insert(
                    done.key,
                    Pending {
                        id: done.id,
                        method: "tools/call".to_owned(),
                        first_page: false,
                    },
                );
                out.server.push(done.line);
            }
            Ok(auth) => {
                let text = auth
                    .tool_result()
                    .unwrap_or_else(|| "Permission denied by turngate.".to_owned());
                out.client.push(jsonrpc::tool_error_line(&done.id, &text));
            }
            Err(why) => out.client.push(jsonrpc::error_line(
                Some(&done.id),
                jsonrpc::INTERNAL_ERROR,
                &format!("turngate could not decide this call, so it did not run: {why}"),
            )),
        }
        out
    }
}

/// Wait until the deferred request is resolved in `store` (by `turngate approvals resolve`
/// or a UI), then settle it through the gate (re-checked; an `allow_once` is spent).
async fn wait_and_resume(
    gate: &Gate,
    store: &dyn AuditStore,
    request_id: &str,
    poll: Duration,
) -> Result<Authorization, String> {
    log(&format!(
        "approval request {request_id} is pending; resolve it with `turngate approvals resolve \
         {request_id} allow_once` (or deny)"
    ));
    loop {
        match store.approval(request_id) {
            Ok(Some(stored)) if stored.resolution.is_some() => break,
            Ok(Some(_)) => tokio::time::sleep(poll).await,
            Ok(None) => return Err(format!("approval request {request_id} vanished")),
            Err(e) => return Err(e.to_string()),
        }
    }
    gate.resume(request_id, Decision::approve())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn frames(input: &'static [u8], max: usize) -> Vec<Option<Vec<u8>>> {
        let (tx, mut rx) = mpsc::channel(16);
        read_frames(input, max, frame_budget(1 << 20), tx).await;
        let mut out = Vec::new();
        while let Some(f) = rx.recv().await {
            out.push(match f {
                Frame::Line(l, _) => Some(l),
                Frame::TooLong => None,
            });
        }
        out
    }

    #[tokio::test]
    async fn unhandled_lines_are_bounded_by_bytes_not_by_count() {
        // Red team F6: a peer that stops reading must not let the other side pile up
        // frames in memory. With a budget of 8 bytes, a second 5-byte line waits until the
        // first is handled, though the channel has room for 16 frames.
        let (tx, mut rx) = mpsc::channel(16);
        let budget = frame_budget(8);
        let reader = tokio::spawn(read_frames(
            &b"aaaaa\nbbbbb\nccccc\n"[..],
            8,
            budget.clone(),
            tx,
        ));
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        let Some(Frame::Line(first, held)) = rx.try_recv().ok() else {
            panic!("the first line was not queued");
        };
        assert_eq!(first, b"aaaaa");
        assert!(
            rx.try_recv().is_err(),
            "a second line was queued past the budget"
        );
        drop(held);
        let Some(Frame::Line(second, _)) = rx.recv().await else {
            panic!("the second line never came");
        };
        assert_eq!(second, b"bbbbb");
        drop(rx);
        reader.await.expect("the reader ends");
    }

    #[tokio::test]
    async fn lines_are_split_on_newlines_and_a_long_one_is_skipped_to_its_end() {
        let got = frames(b"ab\r\n\n   \nthis line is too long\nok\ntail", 8).await;
        assert_eq!(
            got,
            vec![Some(b"ab".to_vec()), None, Some(b"ok".to_vec())],
            "blank lines are skipped; an unterminated last line is not a message"
        );
    }

    #[tokio::test]
    async fn a_long_line_is_reported_once_however_it_is_chunked() {
        let long: &'static [u8] = Box::leak(
            [vec![b'x'; 200_000], b"\nnext\n".to_vec()]
                .concat()
                .into_boxed_slice(),
        );
        let got = frames(long, 1024).await;
        assert_eq!(got, vec![None, Some(b"next".to_vec())]);
    }
}
