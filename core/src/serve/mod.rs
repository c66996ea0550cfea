//! `turngate serve` (DESIGN §15): turns, their gates and their pending approvals, shared by any
//! number of clients over any transport, durable in the audit store.
//!
//! The store is the source of truth for every request: a gate's ask is deferred (persisted
//! with the action and the snapshot, exactly as shown), announced as `opened`, and resolved by
//! whoever responds first ([`Serve::respond`], an approval link, expiry, `turn/end`). A waiting
//! `authorize` then resumes the stored request through the gate, which re-checks it against
//! the policy. Nothing is kept only in memory that a restart would lose: turns and their
//! `allow_for_turn` grants are kept as files in the state dir, and each pending request's
//! expiry too, so a killed server started again on the same state dir finds its requests still
//! pending and answerable.
//!
//! This module decides; the transports (stdio, Unix socket, HTTP, WebSocket) and the JSON-RPC
//! framing live in the CLI.

pub mod link;
pub mod webhook;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, mpsc};

use crate::action::{ActionKind, Effect};
use crate::approval::{
    ApprovalNotification, ApprovalOutcome, ApprovalResolution, Decision, DeferAll,
    ResolutionSource, TurnPermissionApprovalRequest,
};
use crate::audit::{
    AuditError, AuditStore, StoredApproval, StoredResolution, TurnPermissionAuditEvent,
};
use crate::gate::{Authorization, Gate, GateError, SpawnResult, ToolInvocation};
use crate::protocol::TurnExecutionSecuritySnapshot;
use crate::reduce::{ClientState, ReducerInput, reduce};

pub use link::{LinkDecision, LinkError, LinkSigner};

/// How long a request stays answerable by default: ten minutes.
pub const DEFAULT_APPROVAL_TTL: Duration = Duration::from_secs(600);

/// A serve operation was refused or failed. Each variant names what was at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// No live turn with this id.
    #[error("unknown turn `{0}`")]
    UnknownTurn(String),
    /// A live turn with this id exists already.
    #[error("turn `{0}` is already started")]
    DuplicateTurn(String),
    /// The turn id cannot be used (it names a file in the state dir).
    #[error("the turn id `{0}` is not valid: use 1 to 128 of A-Z a-z 0-9 _ - .")]
    BadTurnId(String),
    /// No stored approval request with this id.
    #[error("unknown approval request `{0}`")]
    UnknownRequest(String),
    /// The responder picked a resolution the request does not offer.
    #[error("approval request `{id}` does not allow `{resolution}`")]
    ResolutionNotAllowed {
        /// The request.
        id: String,
        /// What was picked.
        resolution: ApprovalResolution,
    },
    /// The responder answered a scope the request no longer has (or never had).
    #[error("approval request `{id}` has scope {actual}, not {given}: nothing was resolved")]
    ScopeChanged {
        /// The request.
        id: String,
        /// The scope the responder saw.
        given: String,
        /// The request's scope.
        actual: String,
    },
    /// An approval link was refused.
    #[error(transparent)]
    Link(#[from] LinkError),
    /// The request was resolved already: a link is single use.
    #[error("approval request `{id}` was already resolved as {resolution}")]
    AlreadyResolved {
        /// The request.
        id: String,
        /// Its recorded resolution.
        resolution: ApprovalResolution,
    },
    /// Approval links are not configured (`--approval-url`).
    #[error("approval links are not enabled on this server")]
    LinksDisabled,
    /// The gate failed.
    #[error(transparent)]
    Gate(Box<GateError>),
    /// The store failed.
    #[error(transparent)]
    Audit(#[from] AuditError),
    /// The state dir could not be read or written.
    #[error("serve state {path}: {message}")]
    State {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
}

impl From<GateError> for ServeError {
    fn from(e: GateError) -> Self {
        ServeError::Gate(Box::new(e))
    }
}

/// A request as clients see it when it opens: the protocol request, and its approval links
/// when the server has `--approval-url`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenedRequest {
    /// The request, exactly as the gate will run it.
    pub request: TurnPermissionApprovalRequest,
    /// `BASE/approvals/{id}?action=approve&token=…` (resolves `allow_once`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approve_url: Option<String>,
    /// `BASE/approvals/{id}?action=deny&token=…`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deny_url: Option<String>,
    /// When the request expires (resolves `expired`), Unix seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<u64>,
}

/// What the server tells every subscriber.
#[derive(Debug, Clone, PartialEq)]
pub enum Notification {
    /// `turn/permission/request/opened`.
    Opened(Box<OpenedRequest>),
    /// `turn/permission/request/resolved`.
    Resolved(ApprovalOutcome),
    /// `turn/event`: one audit event, as appended.
    Event(Box<TurnPermissionAuditEvent>),
}

impl Notification {
    /// The JSON-RPC method.
    pub fn method(&self) -> &'static str {
        match self {
            Notification::Opened(_) => "turn/permission/request/opened",
            Notification::Resolved(_) => "turn/permission/request/resolved",
            Notification::Event(_) => "turn/event",
        }
    }

    /// The JSON-RPC params.
    pub fn params(&self) -> serde_json::Value {
        let value = match self {
            Notification::Opened(o) => serde_json::to_value(o.as_ref()),
            Notification::Resolved(o) => serde_json::to_value(o),
            Notification::Event(e) => {
                serde_json::to_value(e.as_ref()).map(|event| serde_json::json!({ "event": event }))
            }
        };
        value.unwrap_or(serde_json::Value::Null)
    }

    /// The whole JSON-RPC notification.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({"jsonrpc": "2.0", "method": self.method(), "params": self.params()})
    }
}

#[derive(Debug, Default)]
struct Hub {
    subscribers: Mutex<Vec<mpsc::UnboundedSender<Notification>>>,
    /// Every notification folded through the shared reducers (the console's view).
    state: Mutex<ClientState>,
}

impl Hub {
    fn publish(&self, n: Notification) {
        let input = match &n {
            Notification::Opened(o) => Some(ReducerInput::Notification(
                ApprovalNotification::Requested(o.request.clone()),
            )),
            Notification::Resolved(o) => Some(ReducerInput::Notification(
                ApprovalNotification::Resolved(o.clone()),
            )),
            Notification::Event(e) => Some(ReducerInput::AuditEvent(e.as_ref().clone())),
        };
        if let Some(input) = input {
            let mut state = lock(&self.state);
            let old = std::mem::take(&mut *state);
            *state = reduce(old, &input);
        }
        lock(&self.subscribers).retain(|tx| tx.send(n.clone()).is_ok());
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The store every gate of the server writes through: each append is also a `turn/event`.
#[derive(Debug)]
struct NotifyingStore {
    inner: Arc<dyn AuditStore>,
    hub: Arc<Hub>,
}

impl AuditStore for NotifyingStore {
    fn append(&self, mut event: TurnPermissionAuditEvent) -> Result<u64, AuditError> {
        let seq = self.inner.append(event.clone())?;
        event.seq = seq;
        self.hub.publish(Notification::Event(Box::new(event)));
        Ok(seq)
    }
    fn replay(&self, turn_id: &str) -> Result<Vec<TurnPermissionAuditEvent>, AuditError> {
        self.inner.replay(turn_id)
    }
    fn turns(&self) -> Result<Vec<String>, AuditError> {
        self.inner.turns()
    }
    fn save_pending(
        &self,
        request: &TurnPermissionApprovalRequest,
        action: &crate::action::Action,
        snapshot: Option<&TurnExecutionSecuritySnapshot>,
        review: bool,
    ) -> Result<(), AuditError> {
        self.inner.save_pending(request, action, snapshot, review)
    }
    fn approval(&self, request_id: &str) -> Result<Option<StoredApproval>, AuditError> {
        self.inner.approval(request_id)
    }
    fn pending_approvals(&self) -> Result<Vec<StoredApproval>, AuditError> {
        self.inner.pending_approvals()
    }
    fn resolve(
        &self,
        request_id: &str,
        resolution: StoredResolution,
    ) -> Result<(StoredResolution, bool), AuditError> {
        self.inner.resolve(request_id, resolution)
    }
    fn consume(&self, request_id: &str) -> Result<crate::audit::Consumed, AuditError> {
        self.inner.consume(request_id)
    }
    fn local_dir(&self) -> Option<PathBuf> {
        self.inner.local_dir()
    }
}

/// A turn as kept in the state dir (`turns/ID.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct TurnFile {
    turn_id: String,
    snapshot: TurnExecutionSecuritySnapshot,
    #[serde(default)]
    grants: Vec<String>,
}

/// A pending request's expiry as kept in the state dir (`pending/ID.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct PendingFile {
    request_id: String,
    expires_at: u64,
}

/// The server's options.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Where turns, pending expiries, the link key and the bearer token are kept (0700).
    pub state_dir: PathBuf,
    /// The base of approval links (`https://host:port`), when links are enabled.
    pub approval_url: Option<String>,
    /// How long a request stays answerable; then it resolves `expired`.
    pub approval_ttl: Duration,
}

struct Inner {
    store: Arc<dyn AuditStore>,
    hub: Arc<Hub>,
    turns: Mutex<HashMap<String, Arc<Gate>>>,
    waiters: Mutex<HashMap<String, Arc<Notify>>>,
    links: Option<(String, LinkSigner)>,
    ttl: Duration,
    state_dir: PathBuf,
    files: Mutex<()>,
    /// Requests of other processes' turns already announced (see [`Serve::watch_store`]).
    adopted: Mutex<std::collections::HashSet<String>>,
    /// Requests announced as `opened` and not yet published as `resolved`.
    announced: Mutex<std::collections::HashSet<String>>,
}

/// The server: cheap to clone, every clone shares one state.
#[derive(Clone)]
pub struct Serve {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Serve {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Serve")
            .field("state_dir", &self.inner.state_dir)
            .finish_non_exhaustive()
    }
}

/// Who resolved a request, from its stored reason (for one resolved by another process).
fn source_of(r: &StoredResolution) -> ResolutionSource {
    match r.reason.as_str() {
        "timeout" => ResolutionSource::Timeout,
        "turn_cancelled" => ResolutionSource::TurnCancelled,
        "policy_denied" => ResolutionSource::PolicyDenied,
        "broker_closed" => ResolutionSource::BrokerClosed,
        _ => ResolutionSource::Responder,
    }
}

/// Now, Unix seconds.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn state_err(path: &Path, e: impl std::fmt::Display) -> ServeError {
    ServeError::State {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// Create `dir` (and parents) with mode 0700 for the last component. A directory that is not
/// this user's own, or a symlink, is refused: another user who made it first would hold the
/// bearer token and the link key (red team 5: a planted token ran a command as root).
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let meta = std::fs::symlink_metadata(dir)?;
    // SAFETY: geteuid cannot fail.
    let me = unsafe { libc::geteuid() };
    if !meta.is_dir() || meta.uid() != me {
        return Err(std::io::Error::other(format!(
            "{} is not a directory owned by this user (uid {me}); refusing to keep the \
             server's token and keys there",
            dir.display()
        )));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    }
    Ok(())
}

fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

fn valid_id(id: &str) -> bool {
    (1..=128).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
        && id != "."
        && id != ".."
}

impl Serve {
    /// Open the server on `store` with `options`: restore the turns kept in the state dir and
    /// re-arm the expiry of every request still pending. Must be called inside a Tokio
    /// runtime (expiry timers are tasks).
    pub fn open(store: Arc<dyn AuditStore>, options: ServeOptions) -> Result<Serve, ServeError> {
        let dir = &options.state_dir;
        for sub in [dir.clone(), dir.join("turns"), dir.join("pending")] {
            private_dir(&sub).map_err(|e| state_err(&sub, e))?;
        }
        let links = match &options.approval_url {
            Some(base) => {
                let path = dir.join("link.key");
                let signer = LinkSigner::load_or_create(&path).map_err(|e| state_err(&path, e))?;
                Some((base.trim_end_matches('/').to_owned(), signer))
            }
            None => None,
        };
        let hub = Arc::new(Hub::default());
        let serve = Serve {
            inner: Arc::new(Inner {
                store: Arc::new(NotifyingStore {
                    inner: store,
                    hub: hub.clone(),
                }),
                hub,
                turns: Mutex::new(HashMap::new()),
                waiters: Mutex::new(HashMap::new()),
                links,
                ttl: options.approval_ttl,
                state_dir: options.state_dir.clone(),
                files: Mutex::new(()),
                adopted: Mutex::new(std::collections::HashSet::new()),
                announced: Mutex::new(std::collections::HashSet::new()),
            }),
        };
        serve.restore()?;
        Ok(serve)
    }

    fn restore(&self) -> Result<(), ServeError> {
        let turns_dir = self.inner.state_dir.join("turns");
        let entries = std::fs::read_dir(&turns_dir).map_err(|e| state_err(&turns_dir, e))?;
        for entry in entries {
            let path = entry.map_err(|e| state_err(&turns_dir, e))?.path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            // A turn that cannot be restored is not live (its calls are refused as an unknown
            // turn) and says why; its requests stay in the store, listed and answerable.
            let restored = std::fs::read_to_string(&path)
                .map_err(|e| state_err(&path, e))
                .and_then(|text| {
                    serde_json::from_str::<TurnFile>(&text).map_err(|e| state_err(&path, e))
                })
                .and_then(|file| {
                    let stem = path.file_stem().and_then(|s| s.to_str());
                    if !valid_id(&file.turn_id) || stem != Some(file.turn_id.as_str()) {
                        return Err(state_err(&path, "the turn id does not match its file"));
                    }
                    Ok((self.gate(&file.turn_id, file.snapshot.clone())?, file))
                });
            let (gate, file) = match restored {
                Ok(r) => r,
                Err(e) => {
                    eprintln!("turngate serve: turn not restored: {e}");
                    continue;
                }
            };
            for grant in file.grants {
                gate.grant_for_turn(grant);
            }
            lock(&self.inner.turns).insert(file.turn_id, Arc::new(gate));
        }
        let pending_dir = self.inner.state_dir.join("pending");
        let entries = std::fs::read_dir(&pending_dir).map_err(|e| state_err(&pending_dir, e))?;
        for entry in entries {
            let path = entry.map_err(|e| state_err(&pending_dir, e))?.path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            let text = std::fs::read_to_string(&path).map_err(|e| state_err(&path, e))?;
            let file: PendingFile = serde_json::from_str(&text).map_err(|e| state_err(&path, e))?;
            lock(&self.inner.adopted).insert(file.request_id.clone());
            lock(&self.inner.announced).insert(file.request_id.clone());
            self.arm_expiry(file.request_id, file.expires_at);
        }
        Ok(())
    }

    fn gate(
        &self,
        turn_id: &str,
        snapshot: TurnExecutionSecuritySnapshot,
    ) -> Result<Gate, ServeError> {
        // The turn's commands must not reach the server's own state: its token and link key
        // (they could approve their own requests) or its turn files (grants and snapshots a
        // restart trusts). Red team 5 edited them from a workspace that held the state dir.
        let state = std::fs::canonicalize(&self.inner.state_dir)
            .unwrap_or_else(|_| self.inner.state_dir.clone());
        for entry in &snapshot.sandbox.filesystem.entries {
            let root = std::fs::canonicalize(&entry.path).unwrap_or_else(|_| entry.path.clone());
            if state.starts_with(&root) {
                return Err(state_err(
                    &self.inner.state_dir,
                    format!(
                        "the server's state dir lies in the turn's root {}, where its commands \
                         could read the token and rewrite grants; put --state-dir outside the \
                         turn's roots",
                        root.display()
                    ),
                ));
            }
        }
        // Every ask is deferred: persisted with its action and snapshot, resolved by whoever
        // answers first, then resumed (and re-checked) by the gate.
        Ok(Gate::new(
            turn_id,
            snapshot,
            self.inner.store.clone(),
            Arc::new(DeferAll),
        )?)
    }

    /// Follow every notification published from now on.
    pub fn subscribe(&self) -> mpsc::UnboundedReceiver<Notification> {
        let (tx, rx) = mpsc::unbounded_channel();
        lock(&self.inner.hub.subscribers).push(tx);
        rx
    }

    /// The console's view: every notification since start, folded by the shared reducers.
    pub fn client_state(&self) -> ClientState {
        lock(&self.inner.hub.state).clone()
    }

    /// The store the server writes through.
    pub fn store(&self) -> &Arc<dyn AuditStore> {
        &self.inner.store
    }

    fn turn(&self, turn_id: &str) -> Result<Arc<Gate>, ServeError> {
        lock(&self.inner.turns)
            .get(turn_id)
            .cloned()
            .ok_or_else(|| ServeError::UnknownTurn(turn_id.to_owned()))
    }

    fn write_turn(&self, gate: &Gate, grants: Vec<String>) -> Result<(), ServeError> {
        let path = self
            .inner
            .state_dir
            .join("turns")
            .join(format!("{}.json", gate.turn_id()));
        let file = TurnFile {
            turn_id: gate.turn_id().to_owned(),
            snapshot: gate.snapshot().clone(),
            grants,
        };
        let bytes = serde_json::to_vec(&file).map_err(|e| state_err(&path, e))?;
        write_atomic(&path, &bytes).map_err(|e| state_err(&path, e))
    }

    fn read_grants(&self, turn_id: &str) -> Vec<String> {
        let path = self
            .inner
            .state_dir
            .join("turns")
            .join(format!("{turn_id}.json"));
        std::fs::read_to_string(path)
            .ok()
            .and_then(|t| serde_json::from_str::<TurnFile>(&t).ok())
            .map(|f| f.grants)
            .unwrap_or_default()
    }

    /// Start a turn under `snapshot` (`turn_id`: the caller's, else a fresh one).
    pub fn start_turn(
        &self,
        turn_id: Option<String>,
        snapshot: TurnExecutionSecuritySnapshot,
    ) -> Result<Arc<Gate>, ServeError> {
        let turn_id = match turn_id {
            Some(id) => id,
            None => format!(
                "turn_{}",
                link::random_hex(12).map_err(|e| state_err(&self.inner.state_dir, e))?
            ),
        };
        if !valid_id(&turn_id) {
            return Err(ServeError::BadTurnId(turn_id));
        }
        let _files = lock(&self.inner.files);
        if lock(&self.inner.turns).contains_key(&turn_id) {
            return Err(ServeError::DuplicateTurn(turn_id));
        }
        let gate = Arc::new(self.gate(&turn_id, snapshot)?);
        self.write_turn(&gate, Vec::new())?;
        lock(&self.inner.turns).insert(turn_id, gate.clone());
        Ok(gate)
    }

    fn opened(&self, request: TurnPermissionApprovalRequest) -> Result<OpenedRequest, ServeError> {
        let expires_at = unix_now().saturating_add(self.inner.ttl.as_secs().max(1));
        let path = self
            .inner
            .state_dir
            .join("pending")
            .join(format!("{}.json", request.id));
        let file = PendingFile {
            request_id: request.id.clone(),
            expires_at,
        };
        let bytes = serde_json::to_vec(&file).map_err(|e| state_err(&path, e))?;
        write_atomic(&path, &bytes).map_err(|e| state_err(&path, e))?;
        lock(&self.inner.announced).insert(request.id.clone());
        let opened = self.with_links(request, Some(expires_at));
        self.arm_expiry(opened.request.id.clone(), expires_at);
        self.inner
            .hub
            .publish(Notification::Opened(Box::new(opened.clone())));
        Ok(opened)
    }

    fn expiry_of(&self, request_id: &str) -> Option<u64> {
        if !valid_id(request_id) {
            return None;
        }
        let path = self
            .inner
            .state_dir
            .join("pending")
            .join(format!("{request_id}.json"));
        std::fs::read_to_string(path)
            .ok()
            .and_then(|t| serde_json::from_str::<PendingFile>(&t).ok())
            .map(|f| f.expires_at)
    }

    fn with_links(
        &self,
        request: TurnPermissionApprovalRequest,
        expires_at: Option<u64>,
    ) -> OpenedRequest {
        let (approve_url, deny_url) = match (&self.inner.links, expires_at) {
            (Some((base, signer)), Some(exp)) => {
                let url = |d: LinkDecision| {
                    format!(
                        "{base}/approvals/{}?action={}&token={}",
                        request.id,
                        d.as_str(),
                        signer.sign(&request.id, &request.scope_hash, exp, d)
                    )
                };
                (
                    Some(url(LinkDecision::Approve)),
                    Some(url(LinkDecision::Deny)),
                )
            }
            _ => (None, None),
        };
        OpenedRequest {
            request,
            approve_url,
            deny_url,
            expires_at,
        }
    }

    fn arm_expiry(&self, request_id: String, expires_at: u64) {
        let serve = self.clone();
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        handle.spawn(async move {
            let wait = expires_at.saturating_sub(unix_now());
            tokio::time::sleep(Duration::from_secs(wait)).await;
            // Whole seconds: wait until the second has fully passed.
            while unix_now() < expires_at {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            let _ = serve.finish_with(
                &request_id,
                StoredResolution::new(
                    ApprovalResolution::Expired,
                    ResolutionSource::Timeout.as_str(),
                ),
                ResolutionSource::Timeout,
            );
        });
    }

    fn waiter(&self, request_id: &str) -> Arc<Notify> {
        lock(&self.inner.waiters)
            .entry(request_id.to_owned())
            .or_default()
            .clone()
    }

    /// Record `resolution` for a pending request (`None`: record nothing, only reconcile one
    /// resolved elsewhere, by another process on the store). The first resolution wins.
    /// Whoever resolves it, `resolved` is published exactly once for a request this server
    /// announced (or resolved), an `allow_for_turn` grant is kept for its turn, and its
    /// waiters wake. Returns the recorded resolution and whether this call recorded it.
    fn finish(
        &self,
        request_id: &str,
        resolution: Option<StoredResolution>,
        source: ResolutionSource,
    ) -> Result<Option<(StoredResolution, bool)>, ServeError> {
        let stored = self
            .inner
            .store
            .approval(request_id)?
            .ok_or_else(|| ServeError::UnknownRequest(request_id.to_owned()))?;
        // One lock over "resolve, then forget it was announced": the sweep that reconciles
        // outside resolutions takes it too, so a request is published once.
        let (recorded, applied, was_announced) = {
            let mut announced = lock(&self.inner.announced);
            let (recorded, applied) = match (stored.resolution.clone(), resolution) {
                (Some(r), _) => (r, false),
                (None, Some(r)) => self.inner.store.resolve(request_id, r)?,
                (None, None) => return Ok(None),
            };
            (recorded, applied, announced.remove(request_id))
        };
        if applied || was_announced {
            let turn_id = stored.request.turn_id.clone();
            if recorded.resolution == ApprovalResolution::AllowForTurn {
                if let Ok(gate) = self.turn(&turn_id) {
                    gate.grant_for_turn(stored.request.scope_hash.clone());
                    let _files = lock(&self.inner.files);
                    let mut grants = self.read_grants(&turn_id);
                    if !grants.contains(&stored.request.scope_hash) {
                        grants.push(stored.request.scope_hash.clone());
                    }
                    self.write_turn(&gate, grants)?;
                }
            }
            let source = if applied {
                source
            } else {
                source_of(&recorded)
            };
            self.inner
                .hub
                .publish(Notification::Resolved(ApprovalOutcome {
                    request_id: request_id.to_owned(),
                    turn_id,
                    scope_hash: stored.request.scope_hash,
                    resolution: recorded.resolution,
                    source,
                }));
        }
        self.forget_pending(request_id);
        Ok(Some((recorded, applied)))
    }

    /// Record `resolution` (see [`Serve::finish`]).
    fn finish_with(
        &self,
        request_id: &str,
        resolution: StoredResolution,
        source: ResolutionSource,
    ) -> Result<(StoredResolution, bool), ServeError> {
        self.finish(request_id, Some(resolution), source)?
            .ok_or_else(|| ServeError::UnknownRequest(request_id.to_owned()))
    }

    /// Reconcile the announced requests no longer pending in the store (resolved by another
    /// process) and, with `adopt`, announce other processes' new ones.
    fn sweep(&self, adopt: bool) {
        let Ok(pending) = self.inner.store.pending_approvals() else {
            return;
        };
        let ids: std::collections::HashSet<&str> =
            pending.iter().map(|a| a.request.id.as_str()).collect();
        let gone: Vec<String> = lock(&self.inner.announced)
            .iter()
            .filter(|id| !ids.contains(id.as_str()))
            .cloned()
            .collect();
        for id in gone {
            let _ = self.finish(&id, None, ResolutionSource::Responder);
        }
        if !adopt {
            return;
        }
        for a in pending {
            let ours = lock(&self.inner.turns).contains_key(&a.request.turn_id);
            if ours || !lock(&self.inner.adopted).insert(a.request.id.clone()) {
                continue;
            }
            if let Err(e) = self.opened(a.request) {
                eprintln!("turngate serve: announcing a stored request: {e}");
            }
        }
    }

    /// A request is resolved: drop its expiry file and wake its waiters.
    fn forget_pending(&self, request_id: &str) {
        if valid_id(request_id) {
            let _ = std::fs::remove_file(
                self.inner
                    .state_dir
                    .join("pending")
                    .join(format!("{request_id}.json")),
            );
        }
        if let Some(n) = lock(&self.inner.waiters).remove(request_id) {
            n.notify_waiters();
        }
    }

    /// Wait until `request_id` has a recorded resolution.
    async fn wait_resolved(&self, request_id: &str) -> Result<(), ServeError> {
        loop {
            let notify = self.waiter(request_id);
            let notified = notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let stored = self
                .inner
                .store
                .approval(request_id)?
                .ok_or_else(|| ServeError::UnknownRequest(request_id.to_owned()))?;
            if stored.resolution.is_some() {
                return Ok(());
            }
            // Woken by a resolution through this server; the timeout also notices one
            // written by another process sharing the store (`turngate approvals resolve`).
            let _ = tokio::time::timeout(Duration::from_secs(1), notified).await;
        }
    }

    /// `turn/action/authorize`: decide `inv` in `turn_id`. An ask opens a durable request
    /// (announced as `opened`); with `wait` this returns once it is resolved (the gate's
    /// re-checked outcome), else at once with `Deferred`.
    pub async fn authorize(
        &self,
        turn_id: &str,
        inv: &ToolInvocation,
        wait: bool,
    ) -> Result<(Authorization, Option<OpenedRequest>), ServeError> {
        let gate = self.turn(turn_id)?;
        let auth = gate.authorize(inv).await?;
        let Authorization::Deferred { request } = auth else {
            return Ok((auth, None));
        };
        let opened = self.opened(*request.clone())?;
        if !wait {
            return Ok((Authorization::Deferred { request }, Some(opened)));
        }
        self.wait_resolved(&request.id).await?;
        // The recorded resolution decides; the gate re-checks it and records the outcome.
        let auth = gate.resume(&request.id, Decision::Defer)?;
        Ok((auth, Some(opened)))
    }

    /// `turn/spawn`: authorize `command_line` as a shell command in `turn_id` and run it under
    /// the turn's sandbox. An ask waits for its resolution, then runs exactly the stored
    /// command (once) or reports the denial.
    pub async fn spawn(
        &self,
        turn_id: &str,
        command_line: &str,
    ) -> Result<SpawnResult, ServeError> {
        let gate = self.turn(turn_id)?;
        let inv =
            ToolInvocation::new(ActionKind::ShellCommand, command_line).with_tool("turn/spawn");
        let result = gate.spawn(&inv).await?;
        let SpawnResult::Deferred(request) = result else {
            return Ok(result);
        };
        self.opened(*request.clone())?;
        self.wait_resolved(&request.id).await?;
        let stored = self
            .inner
            .store
            .approval(&request.id)?
            .ok_or_else(|| ServeError::UnknownRequest(request.id.clone()))?;
        if stored
            .resolution
            .as_ref()
            .is_some_and(|r| r.resolution.is_allow())
        {
            Ok(gate.run_approved(&request.id).await?)
        } else {
            match gate.resume(&request.id, Decision::Defer)? {
                Authorization::Denied(d) => Ok(SpawnResult::Denied(d)),
                Authorization::Deferred { request } => Ok(SpawnResult::Deferred(request)),
                // A non-allow resolution cannot resume as allowed; refuse rather than run.
                Authorization::Allowed { .. } => Err(ServeError::AlreadyResolved {
                    id: request.id.clone(),
                    resolution: ApprovalResolution::Deny,
                }),
            }
        }
    }

    /// `turn/permission/request/respond`: resolve `request_id`. Idempotent: the first
    /// resolution wins and a later call gets it back with `applied == false`. `scope_hash`,
    /// when the responder gives it, must be the request's. An allow the turn's policy now
    /// denies is recorded as `deny` (`policy_denied`).
    pub fn respond(
        &self,
        request_id: &str,
        resolution: ApprovalResolution,
        reason: Option<String>,
        decider: Option<String>,
        scope_hash: Option<&str>,
    ) -> Result<(StoredResolution, bool), ServeError> {
        let (recorded, wrote, source) =
            self.respond_full(request_id, resolution, reason, decider, scope_hash)?;
        Ok((recorded, wrote && source == ResolutionSource::Responder))
    }

    /// [`Serve::respond`], saying whether this call wrote the resolution and why.
    fn respond_full(
        &self,
        request_id: &str,
        resolution: ApprovalResolution,
        reason: Option<String>,
        decider: Option<String>,
        scope_hash: Option<&str>,
    ) -> Result<(StoredResolution, bool, ResolutionSource), ServeError> {
        let stored = self
            .inner
            .store
            .approval(request_id)?
            .ok_or_else(|| ServeError::UnknownRequest(request_id.to_owned()))?;
        if let Some(given) = scope_hash {
            if given != stored.request.scope_hash {
                return Err(ServeError::ScopeChanged {
                    id: request_id.to_owned(),
                    given: given.to_owned(),
                    actual: stored.request.scope_hash,
                });
            }
        }
        if let Some(recorded) = stored.resolution {
            return Ok((recorded, false, ResolutionSource::Responder));
        }
        if !stored.request.allows(resolution) {
            return Err(ServeError::ResolutionNotAllowed {
                id: request_id.to_owned(),
                resolution,
            });
        }
        let decider = decider.map_or_else(|| "approver".to_owned(), |d| format!("person:{d}"));
        let mut record = StoredResolution {
            resolution,
            reason: "responder".to_owned(),
            message: reason,
            decider: Some(decider),
        };
        let mut source = ResolutionSource::Responder;
        if resolution.is_allow() {
            if let Ok(gate) = self.turn(&stored.request.turn_id) {
                let inv = ToolInvocation {
                    kind: stored.action.kind,
                    target: stored.action.target.clone(),
                    tool_name: stored.action.tool.clone(),
                    item_id: None,
                    tool_id: None,
                    cwd: None,
                };
                if gate.evaluate(&inv).verdict.effect == Effect::Deny {
                    record = StoredResolution::new(ApprovalResolution::Deny, "policy_denied");
                    source = ResolutionSource::PolicyDenied;
                }
            }
        }
        let (recorded, wrote) = self.finish_with(request_id, record, source)?;
        Ok((recorded, wrote, source))
    }

    /// The pending requests (of `turn_id`, or all), with their links.
    pub fn pending(&self, turn_id: Option<&str>) -> Result<Vec<OpenedRequest>, ServeError> {
        Ok(self
            .inner
            .store
            .pending_approvals()?
            .into_iter()
            .filter(|a| turn_id.is_none_or(|t| a.request.turn_id == t))
            .map(|a| {
                let exp = self.expiry_of(&a.request.id);
                self.with_links(a.request, exp)
            })
            .collect())
    }

    /// `turn/events`: the turn's audit events, in order.
    pub fn events(&self, turn_id: &str) -> Result<Vec<TurnPermissionAuditEvent>, ServeError> {
        Ok(self.inner.store.replay(turn_id)?)
    }

    /// `turn/end`: cancel the turn's pending requests and forget it. Returns the cancelled
    /// request ids.
    pub fn end_turn(&self, turn_id: &str) -> Result<Vec<String>, ServeError> {
        self.turn(turn_id)?;
        let mut cancelled = Vec::new();
        for a in self.inner.store.pending_approvals()? {
            if a.request.turn_id == turn_id {
                let (_, applied) = self.finish_with(
                    &a.request.id,
                    StoredResolution::new(
                        ApprovalResolution::Cancelled,
                        ResolutionSource::TurnCancelled.as_str(),
                    ),
                    ResolutionSource::TurnCancelled,
                )?;
                if applied {
                    cancelled.push(a.request.id);
                }
            }
        }
        let _files = lock(&self.inner.files);
        lock(&self.inner.turns).remove(turn_id);
        let path = self
            .inner
            .state_dir
            .join("turns")
            .join(format!("{turn_id}.json"));
        std::fs::remove_file(&path).map_err(|e| state_err(&path, e))?;
        Ok(cancelled)
    }

    /// What an approval link's page shows: the stored request (exactly the action that will
    /// run). Verifies the token; an expired genuine token resolves the request `expired`.
    pub fn link_view(
        &self,
        request_id: &str,
        token: &str,
        decision: LinkDecision,
    ) -> Result<StoredApproval, ServeError> {
        let (_, signer) = self.inner.links.as_ref().ok_or(ServeError::LinksDisabled)?;
        let stored = self
            .inner
            .store
            .approval(request_id)?
            .ok_or(ServeError::Link(LinkError::Invalid))?;
        match signer.verify(
            token,
            request_id,
            &stored.request.scope_hash,
            decision,
            unix_now(),
        ) {
            Ok(_) => {}
            Err(LinkError::Expired) => {
                self.finish_with(
                    request_id,
                    StoredResolution::new(
                        ApprovalResolution::Expired,
                        ResolutionSource::Timeout.as_str(),
                    ),
                    ResolutionSource::Timeout,
                )?;
                return Err(ServeError::Link(LinkError::Expired));
            }
            Err(e) => return Err(ServeError::Link(e)),
        }
        if let Some(r) = &stored.resolution {
            return Err(ServeError::AlreadyResolved {
                id: request_id.to_owned(),
                resolution: r.resolution,
            });
        }
        Ok(stored)
    }

    /// Resolve `request_id` through an approval link (a POST; never a GET). Single use: the
    /// request must still be pending.
    pub fn link_resolve(
        &self,
        request_id: &str,
        token: &str,
        decision: LinkDecision,
    ) -> Result<StoredResolution, ServeError> {
        self.link_view(request_id, token, decision)?;
        let resolution = match decision {
            LinkDecision::Approve => ApprovalResolution::AllowOnce,
            LinkDecision::Deny => ApprovalResolution::Deny,
        };
        let (recorded, wrote, _) = self.respond_full(
            request_id,
            resolution,
            None,
            Some("approval-link".to_owned()),
            None,
        )?;
        if !wrote {
            return Err(ServeError::AlreadyResolved {
                id: request_id.to_owned(),
                resolution: recorded.resolution,
            });
        }
        Ok(recorded)
    }

    /// Check the store every `every`: requests this server announced and another process
    /// resolved are published as `resolved` (and their waiters wake); with `adopt`, the
    /// requests other processes defer into the same store (`turngate run` or `turngate mcp
    /// wrap` with `--approver defer`) are announced as `opened`, with links, the webhook and
    /// this server's expiry. Requests of this server's own turns are announced when they open
    /// and never twice.
    pub fn watch_store(&self, every: Duration, adopt: bool) {
        let serve = self.clone();
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return;
        };
        handle.spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let s = serve.clone();
                let _ = tokio::task::spawn_blocking(move || s.sweep(adopt)).await;
            }
        });
    }

    /// The live turn ids.
    pub fn turn_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = lock(&self.inner.turns).keys().cloned().collect();
        ids.sort();
        ids
    }
}
