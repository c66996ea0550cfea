//! The gate, the store, the broker and the checkers for Python. Each method converts its
//! arguments to facade records, runs the facade (async work on the extension's runtime, the
//! GIL released), and converts the result to Python objects. Nothing here decides anything.

use std::sync::{Arc, Mutex};

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};
use serde_json::Value;
use turngate_ffi::check::{self as ffi_check, SpawnPlanRecord, SpawnPlanRequest};
use turngate_ffi::gate::ProcessOutcomeRecord;
use turngate_ffi::{
    ApproverHandle, AuthorizationRecord, BrokerHandle, DecisionRecord, DenialRecord, GateHandle,
    InvocationRecord, OpenRecord, PendingHandle, SpawnRecord, StoreHandle, SubscriptionHandle,
};

use crate::aio::{Done, awaitable, blocking, running_loop};
use crate::approver::{LoopSlot, PyApprover, decision_of};
use crate::{IntoPy, InvalidInput, PermissionDenied, PyPolicy, from_py, record, to_py};

fn json_out(py: Python<'_>, v: Value) -> PyResult<Py<PyAny>> {
    Ok(to_py(py, &v)?.unbind())
}

fn auth_out(py: Python<'_>, a: AuthorizationRecord) -> PyResult<Py<PyAny>> {
    record(py, &a)
}

/// What `Gate.spawn` did: `outcome` is `"ran"`, `"denied"` or `"deferred"`. A run carries
/// the exit code, signal, captured output and the sandbox report; a denial its `reason` and
/// `tool_result`; a deferral its `request`.
#[pyclass(frozen, module = "turngate", name = "SpawnResult")]
pub(crate) struct PySpawnResult {
    #[pyo3(get)]
    outcome: &'static str,
    #[pyo3(get)]
    exit_code: Option<i32>,
    #[pyo3(get)]
    signal: Option<i32>,
    #[pyo3(get)]
    timed_out: bool,
    #[pyo3(get)]
    duration_ms: u64,
    #[pyo3(get)]
    stdout: Py<PyBytes>,
    #[pyo3(get)]
    stderr: Py<PyBytes>,
    #[pyo3(get)]
    sandbox: Option<Py<PyAny>>,
    #[pyo3(get)]
    reason: Option<String>,
    #[pyo3(get)]
    tool_result: Option<String>,
    #[pyo3(get)]
    request: Option<Py<PyAny>>,
}

#[pymethods]
impl PySpawnResult {
    /// True when the command ran and exited with code 0.
    #[getter]
    fn success(&self) -> bool {
        self.outcome == "ran" && self.exit_code == Some(0)
    }

    fn __repr__(&self) -> String {
        match self.outcome {
            "ran" => {
                let show = |v: Option<i32>| v.map_or_else(|| "None".to_owned(), |v| v.to_string());
                format!(
                    "SpawnResult(ran, exit_code={}, signal={})",
                    show(self.exit_code),
                    show(self.signal)
                )
            }
            other => format!("SpawnResult({other}, {:?})", self.reason),
        }
    }
}

fn empty_spawn(py: Python<'_>, outcome: &'static str) -> PySpawnResult {
    PySpawnResult {
        outcome,
        exit_code: None,
        signal: None,
        timed_out: false,
        duration_ms: 0,
        stdout: PyBytes::new(py, b"").unbind(),
        stderr: PyBytes::new(py, b"").unbind(),
        sandbox: None,
        reason: None,
        tool_result: None,
        request: None,
    }
}

fn ran(py: Python<'_>, o: ProcessOutcomeRecord) -> PyResult<PySpawnResult> {
    Ok(PySpawnResult {
        outcome: "ran",
        exit_code: o.exit_code,
        signal: o.signal,
        timed_out: o.timed_out,
        duration_ms: o.duration_ms,
        stdout: PyBytes::new(py, &o.stdout).unbind(),
        stderr: PyBytes::new(py, &o.stderr).unbind(),
        sandbox: o
            .sandbox
            .map(|s| to_py(py, &s).map(Bound::unbind))
            .transpose()?,
        ..empty_spawn(py, "ran")
    })
}

fn spawn_out(py: Python<'_>, s: SpawnRecord) -> PyResult<Py<PyAny>> {
    let result = match s {
        SpawnRecord::Ran(o) => ran(py, o)?,
        SpawnRecord::Denied(d) => PySpawnResult {
            reason: Some(d.reason),
            tool_result: Some(d.tool_result),
            ..empty_spawn(py, "denied")
        },
        SpawnRecord::Deferred {
            request,
            reason,
            tool_result,
        } => PySpawnResult {
            reason: Some(reason),
            tool_result: Some(tool_result),
            request: Some(to_py(py, &request)?.unbind()),
            ..empty_spawn(py, "deferred")
        },
    };
    Ok(Py::new(py, result)?.into_any())
}

fn denied_err(d: DenialRecord) -> PyErr {
    let err = PermissionDenied::new_err(d.tool_result.clone());
    Python::attach(|py| {
        let v = err.value(py);
        let _ = v.setattr(intern!(py, "reason"), &d.reason);
        let _ = v.setattr(intern!(py, "tool_result"), &d.tool_result);
        let _ = v.setattr(intern!(py, "kind"), &d.kind);
        let _ = v.setattr(intern!(py, "target"), &d.target);
    });
    err
}

fn open_out(py: Python<'_>, o: OpenRecord, mode: &str) -> PyResult<Py<PyAny>> {
    match o {
        OpenRecord::Opened(file) => {
            #[cfg(unix)]
            let fd = {
                use std::os::fd::IntoRawFd;
                file.into_raw_fd()
            };
            #[cfg(not(unix))]
            let fd: i32 = {
                drop(file);
                return Err(InvalidInput::new_err(
                    "race-free opens need a Unix platform",
                ));
            };
            let os = py.import(intern!(py, "os"))?;
            Ok(os.call_method1(intern!(py, "fdopen"), (fd, mode))?.unbind())
        }
        OpenRecord::Denied(d) => Err(denied_err(*d)),
    }
}

fn open_read_out(py: Python<'_>, o: OpenRecord) -> PyResult<Py<PyAny>> {
    open_out(py, o, "rb")
}

fn open_write_out(py: Python<'_>, o: OpenRecord) -> PyResult<Py<PyAny>> {
    open_out(py, o, "wb")
}

fn env_dict<'py>(
    py: Python<'py>,
    env: turngate_ffi::check::FilteredEnvRecord,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let vars = PyList::empty(py);
    for (n, v) in env.vars {
        vars.append((PyBytes::new(py, &n), PyBytes::new(py, &v)))?;
    }
    d.set_item("vars", vars)?;
    let dropped = PyList::empty(py);
    for x in env.dropped {
        let e = PyDict::new(py);
        e.set_item("name", x.name)?;
        e.set_item("reason", x.reason)?;
        dropped.append(e)?;
    }
    d.set_item("dropped", dropped)?;
    Ok(d)
}

fn plan_dict(py: Python<'_>, p: SpawnPlanRecord) -> PyResult<Py<PyAny>> {
    let d = record(py, &p)?;
    // The environment as bytes pairs: names and values need not be UTF-8.
    d.bind(py).set_item("env", env_dict(py, p.env)?)?;
    Ok(d)
}

// ---- the store ------------------------------------------------------------------------------

/// The durable audit and approval store (a SQLite file), shared by gates and clients.
#[pyclass(frozen, module = "turngate", name = "Store")]
pub(crate) struct PyStore {
    pub(crate) handle: Arc<StoreHandle>,
}

#[pymethods]
impl PyStore {
    /// Open (creating if needed) the store at `path`.
    #[new]
    fn new(py: Python<'_>, path: std::path::PathBuf) -> PyResult<Self> {
        let path = path.to_string_lossy().into_owned();
        py.detach(|| StoreHandle::open(&path))
            .map(|handle| PyStore { handle })
            .py_err(py)
    }

    /// The store's file.
    #[getter]
    fn path(&self) -> String {
        self.handle.path()
    }

    /// Append a `TurnPermissionAuditEvent` dict; returns its seq.
    fn append(&self, py: Python<'_>, event: &Bound<'_, PyAny>) -> PyResult<u64> {
        let event = from_py(event, "event")?;
        let h = &self.handle;
        py.detach(|| h.append(event)).py_err(py)
    }

    /// `replay(turn_id)`: the events of `turn_id`, in seq order (`TurnPermissionAuditEvent`
    /// dicts). `replay(policy, turn=None, since=None, workspace=None)`: re-decide every
    /// recorded decision under `policy` as a candidate (`turngate replay`), and return the
    /// report `{"decisions", "flips": [...]}` of the decisions that flip.
    #[pyo3(signature = (what, turn=None, since=None, workspace=None))]
    fn replay<'py>(
        &self,
        py: Python<'py>,
        what: &Bound<'py, PyAny>,
        turn: Option<String>,
        since: Option<String>,
        workspace: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let h = &self.handle;
        if let Ok(policy) = what.cast::<crate::PyPolicy>() {
            let policy = policy.get().handle.clone();
            let options = serde_json::json!({"turn": turn, "since": since, "workspace": workspace});
            let options = Value::Object(
                options
                    .as_object()
                    .into_iter()
                    .flatten()
                    .filter(|(_, v)| !v.is_null())
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            );
            let v = py.detach(|| h.replay_policy(&policy, options)).py_err(py)?;
            return to_py(py, &v);
        }
        let turn_id: String = what.extract()?;
        let v = py.detach(|| h.replay(&turn_id)).py_err(py)?;
        to_py(py, &v)
    }

    /// Every turn id with events, oldest first.
    fn turns(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let h = &self.handle;
        py.detach(|| h.turns()).py_err(py)
    }

    /// Every stored approval without a resolution (`{"request", "action"}`), oldest first.
    fn pending_approvals<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let h = &self.handle;
        let v = py.detach(|| h.pending_approvals()).py_err(py)?;
        to_py(py, &v)
    }

    /// The stored approval `request_id` (`{"request", "action", "resolution"?}`), or None.
    fn approval<'py>(&self, py: Python<'py>, request_id: &str) -> PyResult<Bound<'py, PyAny>> {
        let h = &self.handle;
        match py.detach(|| h.approval(request_id)).py_err(py)? {
            Some(v) => to_py(py, &v),
            None => Ok(py.None().into_bound(py)),
        }
    }

    /// Record a resolution for a stored approval (first one wins); returns
    /// `{"resolution", "reason", "applied"}`. This only records: `Gate.resume` re-checks and
    /// decides the action.
    #[pyo3(signature = (request_id, resolution, reason="responder"))]
    fn resolve<'py>(
        &self,
        py: Python<'py>,
        request_id: &str,
        resolution: &str,
        reason: &str,
    ) -> PyResult<Bound<'py, PyDict>> {
        let h = &self.handle;
        let r = py
            .detach(|| h.resolve(request_id, resolution, reason))
            .py_err(py)?;
        let d = PyDict::new(py);
        d.set_item("resolution", r.resolution)?;
        d.set_item("reason", r.reason)?;
        d.set_item("applied", r.applied)?;
        Ok(d)
    }

    fn __repr__(&self) -> String {
        format!("Store({:?})", self.handle.path())
    }
}

// ---- the broker -----------------------------------------------------------------------------

/// The approval broker: routes asks to whoever responds and publishes notifications.
#[pyclass(frozen, module = "turngate", name = "Broker")]
pub(crate) struct PyBroker {
    pub(crate) handle: Arc<BrokerHandle>,
}

/// An async iterator of approval notifications (`{"method", "params"}` dicts). It ends when
/// the broker closes or `cancel()` is called; dropping it cancels it.
#[pyclass(frozen, module = "turngate", name = "Subscription")]
pub(crate) struct PySubscription {
    handle: Arc<SubscriptionHandle>,
}

async fn next_notification(sub: Arc<SubscriptionHandle>) -> Done<Value> {
    match sub.next().await {
        Ok(Some(v)) => Done::Value(v),
        Ok(None) => Done::End,
        Err(e) => Done::Error(e),
    }
}

#[pymethods]
impl PySubscription {
    fn __aiter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __anext__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        awaitable(
            py,
            "Subscription.__anext__",
            next_notification(Arc::clone(&self.handle)),
            json_out,
        )
    }

    /// The next queued notification, or None without waiting.
    fn try_next<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self.handle.try_next().py_err(py)? {
            Some(v) => to_py(py, &v),
            None => Ok(py.None().into_bound(py)),
        }
    }

    /// End the subscription.
    fn cancel(&self) {
        self.handle.cancel();
    }
}

/// A request opened on a broker; `await wait()` gives its `ApprovalOutcome` dict.
#[pyclass(frozen, module = "turngate", name = "PendingApproval")]
pub(crate) struct PyPending {
    handle: Arc<PendingHandle>,
}

async fn wait_pending(p: Arc<PendingHandle>) -> Done<Value> {
    p.wait().await.into()
}

#[pymethods]
impl PyPending {
    /// The request as opened.
    #[getter]
    fn request<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.handle.request())
    }

    /// Wait for the outcome (awaitable).
    fn wait<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        awaitable(
            py,
            "PendingApproval.wait",
            wait_pending(Arc::clone(&self.handle)),
            json_out,
        )
    }
}

fn action_record(obj: &Bound<'_, PyAny>) -> PyResult<turngate_ffi::ActionRecord> {
    if let Ok((kind, target, tool)) = obj.extract::<(String, String, Option<String>)>() {
        return Ok(turngate_ffi::ActionRecord { kind, target, tool });
    }
    if let Ok((kind, target)) = obj.extract::<(String, String)>() {
        return Ok(turngate_ffi::ActionRecord {
            kind,
            target,
            tool: None,
        });
    }
    let v = from_py(obj, "action")?;
    let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    match (text("kind"), text("target")) {
        (Some(kind), Some(target)) => Ok(turngate_ffi::ActionRecord {
            kind,
            target,
            tool: text("tool"),
        }),
        _ => Err(InvalidInput::new_err(
            "action: expected a (kind, target[, tool]) tuple or a dict with kind and target",
        )),
    }
}

#[pymethods]
impl PyBroker {
    /// A broker that re-checks allows against `policy` (a gate attached to it re-checks
    /// against its snapshot's policy for its turn).
    #[new]
    fn new(policy: &Bound<'_, PyPolicy>) -> Self {
        PyBroker {
            handle: BrokerHandle::new(&policy.get().handle),
        }
    }

    /// Subscribe to notifications from now on (an async iterator).
    fn subscribe(&self) -> PySubscription {
        PySubscription {
            handle: Arc::new(self.handle.subscribe()),
        }
    }

    /// Open a `TurnPermissionApprovalRequest` dict for `action` (a `(kind, target[, tool])`
    /// tuple or dict); it expires after `timeout_ms`.
    #[pyo3(signature = (request, action, timeout_ms=None))]
    fn open(
        &self,
        py: Python<'_>,
        request: &Bound<'_, PyAny>,
        action: &Bound<'_, PyAny>,
        timeout_ms: Option<u64>,
    ) -> PyResult<PyPending> {
        let request = from_py(request, "request")?;
        let action = action_record(action)?;
        self.handle
            .open(request, &action, timeout_ms)
            .map(|p| PyPending {
                handle: Arc::new(p),
            })
            .py_err(py)
    }

    /// Resolve request `id` (`allow_once`, `allow_for_turn`, `deny`, `cancelled`,
    /// `expired`); returns `{"outcome", "applied"}`. The first resolution wins.
    fn respond<'py>(
        &self,
        py: Python<'py>,
        id: &str,
        resolution: &str,
    ) -> PyResult<Bound<'py, PyDict>> {
        let r = self.handle.respond(id, resolution).py_err(py)?;
        let d = PyDict::new(py);
        d.set_item("outcome", to_py(py, &r.outcome)?)?;
        d.set_item("applied", r.applied)?;
        Ok(d)
    }

    /// The open requests, oldest first.
    fn pending_requests<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let v = self.handle.pending_requests().py_err(py)?;
        to_py(py, &v)
    }

    /// The recorded outcome of request `id`, or None while it is open.
    fn outcome<'py>(&self, py: Python<'py>, id: &str) -> PyResult<Bound<'py, PyAny>> {
        match self.handle.outcome(id).py_err(py)? {
            Some(v) => to_py(py, &v),
            None => Ok(py.None().into_bound(py)),
        }
    }

    /// True when `scope_hash` was granted `allow_for_turn` in `turn_id`.
    fn has_grant(&self, turn_id: &str, scope_hash: &str) -> bool {
        self.handle.has_grant(turn_id, scope_hash)
    }

    /// Cancel the open requests of `turn_id`; returns their outcomes.
    fn cancel_turn<'py>(&self, py: Python<'py>, turn_id: &str) -> PyResult<Bound<'py, PyAny>> {
        let v = self.handle.cancel_turn(turn_id).py_err(py)?;
        to_py(py, &v)
    }

    /// End `turn_id`: cancel its requests and forget its grants.
    fn end_turn<'py>(&self, py: Python<'py>, turn_id: &str) -> PyResult<Bound<'py, PyAny>> {
        let v = self.handle.end_turn(turn_id).py_err(py)?;
        to_py(py, &v)
    }

    /// Close the broker: pending requests are cancelled, subscriptions end.
    fn close(&self) {
        self.handle.close();
    }
}

// ---- the gate -------------------------------------------------------------------------------

/// The gate of one turn: every side-effecting tool call goes through it.
#[pyclass(frozen, subclass, module = "turngate", name = "Gate")]
pub(crate) struct PyGate {
    handle: Arc<GateHandle>,
    event_loop: LoopSlot,
}

fn approver_of(
    py: Python<'_>,
    approver: Option<&Bound<'_, PyAny>>,
    event_loop: &LoopSlot,
) -> PyResult<ApproverHandle> {
    let Some(a) = approver.filter(|a| !a.is_none()) else {
        return ApproverHandle::builtin("deny_all").py_err(py);
    };
    if let Ok(name) = a.cast::<PyString>() {
        return ApproverHandle::builtin(&name.extract::<String>()?).py_err(py);
    }
    if let Ok(b) = a.cast::<PyBroker>() {
        return Ok(ApproverHandle::broker(&b.get().handle, None));
    }
    if a.is_callable() {
        let bridge = PyApprover::new(a.clone().unbind(), Arc::clone(event_loop));
        return Ok(ApproverHandle::foreign(Arc::new(bridge)));
    }
    Err(InvalidInput::new_err(format!(
        "approver: expected a callable, a Broker, or 'approve_all', 'deny_all' or 'defer_all', got {}",
        a.repr()?
    )))
}

/// The `Invocation` record of a call's keyword arguments (`tool`, `item_id`, `tool_id`, `cwd`,
/// and whatever field the facade declares next): they cross as the record's JSON form, so an
/// unknown keyword is refused, naming it, and a path may be any `os.PathLike`.
fn invocation_of(
    kind: &str,
    target: &str,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<InvocationRecord> {
    let mut fields = serde_json::Map::new();
    if let Some(options) = options {
        let os = options.py().import(intern!(options.py(), "os"))?;
        for (k, v) in options.iter() {
            let key: String = k.extract()?;
            let v = if v.hasattr(intern!(options.py(), "__fspath__"))? {
                os.call_method1(intern!(options.py(), "fspath"), (v,))?
            } else {
                v
            };
            fields.insert(key, from_py(&v, "options")?);
        }
    }
    fields.insert("kind".into(), kind.into());
    fields.insert("target".into(), target.into());
    serde_json::from_value(Value::Object(fields))
        .map_err(|e| InvalidInput::new_err(format!("invocation: {e}")))
}

fn invocation(
    kind: &str,
    target: &str,
    tool: Option<String>,
    item_id: Option<String>,
    tool_id: Option<String>,
    cwd: Option<std::path::PathBuf>,
) -> InvocationRecord {
    InvocationRecord {
        kind: kind.to_owned(),
        target: target.to_owned(),
        tool,
        item_id,
        tool_id,
        cwd: cwd.map(|p| p.to_string_lossy().into_owned()),
    }
}

impl PyGate {
    fn remember_loop(&self, py: Python<'_>, what: &str) -> PyResult<()> {
        let l = running_loop(py, what)?;
        if let Ok(mut slot) = self.event_loop.lock() {
            *slot = Some(l.unbind());
        }
        Ok(())
    }
}

async fn authorize_task(gate: Arc<GateHandle>, inv: InvocationRecord) -> Done<AuthorizationRecord> {
    gate.authorize(&inv).await.into()
}

async fn spawn_task(gate: Arc<GateHandle>, inv: InvocationRecord) -> Done<SpawnRecord> {
    gate.spawn(&inv).await.into()
}

async fn open_task(gate: Arc<GateHandle>, inv: InvocationRecord, write: bool) -> Done<OpenRecord> {
    if write {
        gate.open_write(&inv).await.into()
    } else {
        gate.open_read(&inv).await.into()
    }
}

async fn run_approved_task(gate: Arc<GateHandle>, request_id: String) -> Done<SpawnRecord> {
    gate.run_approved(&request_id).await.into()
}

async fn resume_spawn_task(
    gate: Arc<GateHandle>,
    request_id: String,
    decision: DecisionRecord,
) -> Done<SpawnRecord> {
    gate.resume_spawn(&request_id, &decision).await.into()
}

#[pymethods]
impl PyGate {
    /// A gate for `turn_id` under a `TurnExecutionSecuritySnapshot` dict, recording to `store`.
    /// `approver` decides asks: a function or `async def` taking the ask dict, a `Broker`, or
    /// `"approve_all"`, `"deny_all"` (the default) or `"defer_all"`. With `broker`, the gate
    /// also honours `allow_for_turn` grants recorded by the broker.
    #[new]
    #[pyo3(signature = (turn_id, snapshot, store, approver=None, *, broker=None))]
    fn new(
        py: Python<'_>,
        turn_id: &str,
        snapshot: &Bound<'_, PyAny>,
        store: &Bound<'_, PyStore>,
        approver: Option<&Bound<'_, PyAny>>,
        broker: Option<&Bound<'_, PyBroker>>,
    ) -> PyResult<Self> {
        let snapshot = from_py(snapshot, "snapshot")?;
        let event_loop: LoopSlot = Arc::new(Mutex::new(None));
        let approver = approver_of(py, approver, &event_loop)?;
        let store = Arc::clone(&store.get().handle);
        let broker = broker.map(|b| Arc::clone(&b.get().handle));
        let handle = py
            .detach(|| GateHandle::new(turn_id, snapshot, &store, &approver, broker.as_deref()))
            .py_err(py)?;
        Ok(PyGate { handle, event_loop })
    }

    /// The turn id.
    #[getter]
    fn turn_id(&self) -> String {
        self.handle.turn_id()
    }

    /// The turn's snapshot (a dict).
    #[getter]
    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let v = self.handle.snapshot().py_err(py)?;
        to_py(py, &v)
    }

    /// Evaluate one call with the checker of its kind, without recording or asking: returns
    /// `(verdict, canonical_target)`.
    #[pyo3(signature = (kind, target, tool=None, cwd=None))]
    fn evaluate(
        &self,
        py: Python<'_>,
        kind: &str,
        target: &str,
        tool: Option<String>,
        cwd: Option<std::path::PathBuf>,
    ) -> PyResult<Py<PyAny>> {
        let inv = invocation(kind, target, tool, None, None, cwd);
        let e = self.handle.evaluate(&inv).py_err(py)?;
        record(py, &e)
    }

    /// Decide one call (awaitable): evaluate with the checker of its kind, consult grants,
    /// ask the approver on ask, re-check its answer, record audit rows. Returns an
    /// `Authorization`.
    #[pyo3(signature = (kind, target, **options))]
    fn authorize<'py>(
        &self,
        py: Python<'py>,
        kind: &str,
        target: &str,
        options: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.remember_loop(py, "Gate.authorize")?;
        let inv = invocation_of(kind, target, options)?;
        let fut = authorize_task(Arc::clone(&self.handle), inv);
        awaitable(py, "Gate.authorize", fut, auth_out)
    }

    /// `authorize`, blocking the calling thread (GIL released). An `async def` approver runs
    /// on a fresh event loop. Not from inside a running event loop.
    #[pyo3(signature = (kind, target, **options))]
    fn authorize_blocking(
        &self,
        py: Python<'_>,
        kind: &str,
        target: &str,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let inv = invocation_of(kind, target, options)?;
        let fut = authorize_task(Arc::clone(&self.handle), inv);
        blocking(py, "Gate.authorize", fut, auth_out)
    }

    /// Authorize a shell command and, when allowed, run it under the snapshot's sandbox
    /// (awaitable). Returns a `SpawnResult`; raises `SandboxUnavailable` when the snapshot
    /// requires a sandbox this platform cannot provide (nothing runs unconfined).
    #[pyo3(signature = (command_line, **options))]
    fn spawn<'py>(
        &self,
        py: Python<'py>,
        command_line: &str,
        options: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.remember_loop(py, "Gate.spawn")?;
        let inv = invocation_of("shell_command", command_line, options)?;
        awaitable(
            py,
            "Gate.spawn",
            spawn_task(Arc::clone(&self.handle), inv),
            spawn_out,
        )
    }

    /// `spawn`, blocking the calling thread (GIL released).
    #[pyo3(signature = (command_line, **options))]
    fn spawn_blocking(
        &self,
        py: Python<'_>,
        command_line: &str,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let inv = invocation_of("shell_command", command_line, options)?;
        blocking(
            py,
            "Gate.spawn",
            spawn_task(Arc::clone(&self.handle), inv),
            spawn_out,
        )
    }

    /// Run the stored shell command of an already approved request (by id) under the
    /// snapshot and sandbox it was requested under, blocking (GIL released). Returns a
    /// `SpawnResult`. An unresolved, denied or spent (`already_used`) request raises
    /// `ApprovalError`: no command line runs without a decision.
    fn run_approved_blocking(&self, py: Python<'_>, request_id: &str) -> PyResult<Py<PyAny>> {
        let fut = run_approved_task(Arc::clone(&self.handle), request_id.to_owned());
        blocking(py, "Gate.run_approved", fut, spawn_out)
    }

    /// Decide a deferred shell command with `decision` and, when allowed, run exactly its
    /// stored action under the snapshot it was requested under (narrowed by this gate's),
    /// blocking (GIL released). Returns a `SpawnResult`; an `allow_once` runs once.
    fn resume_spawn_blocking(
        &self,
        py: Python<'_>,
        request_id: &str,
        decision: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        let decision = decision_of(decision).map_err(InvalidInput::new_err)?;
        let fut = resume_spawn_task(Arc::clone(&self.handle), request_id.to_owned(), decision);
        blocking(py, "Gate.resume_spawn", fut, spawn_out)
    }

    /// Decide a deferred request (possibly persisted by another process) with `decision` (a
    /// `Decision`, a bool, or `"approve"`/`"deny"`/`"defer"`): the stored action, exactly as
    /// shown, is re-checked against this gate's policy. Returns an `Authorization`.
    fn resume(
        &self,
        py: Python<'_>,
        request_id: &str,
        decision: &Bound<'_, PyAny>,
    ) -> PyResult<Py<PyAny>> {
        let decision = decision_of(decision).map_err(InvalidInput::new_err)?;
        let h = &self.handle;
        let out = py.detach(|| h.resume(request_id, &decision)).py_err(py)?;
        auth_out(py, out)
    }

    /// Authorize a read and open the file race-free beneath its root (awaitable): a binary
    /// file object, or `PermissionDenied` (with `reason` and `tool_result`).
    #[pyo3(signature = (path, *, tool=None))]
    fn open_read<'py>(
        &self,
        py: Python<'py>,
        path: std::path::PathBuf,
        tool: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.remember_loop(py, "Gate.open_read")?;
        let inv = invocation("file_read", &path.to_string_lossy(), tool, None, None, None);
        let fut = open_task(Arc::clone(&self.handle), inv, false);
        awaitable(py, "Gate.open_read", fut, open_read_out)
    }

    /// Authorize a write and open (create or truncate) the file race-free (awaitable).
    #[pyo3(signature = (path, *, tool=None))]
    fn open_write<'py>(
        &self,
        py: Python<'py>,
        path: std::path::PathBuf,
        tool: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.remember_loop(py, "Gate.open_write")?;
        let inv = invocation(
            "file_write",
            &path.to_string_lossy(),
            tool,
            None,
            None,
            None,
        );
        let fut = open_task(Arc::clone(&self.handle), inv, true);
        awaitable(py, "Gate.open_write", fut, open_write_out)
    }

    /// `open_read`, blocking.
    #[pyo3(signature = (path, *, tool=None))]
    fn open_read_blocking(
        &self,
        py: Python<'_>,
        path: std::path::PathBuf,
        tool: Option<String>,
    ) -> PyResult<Py<PyAny>> {
        let inv = invocation("file_read", &path.to_string_lossy(), tool, None, None, None);
        let fut = open_task(Arc::clone(&self.handle), inv, false);
        blocking(py, "Gate.open_read", fut, open_read_out)
    }

    /// `open_write`, blocking.
    #[pyo3(signature = (path, *, tool=None))]
    fn open_write_blocking(
        &self,
        py: Python<'_>,
        path: std::path::PathBuf,
        tool: Option<String>,
    ) -> PyResult<Py<PyAny>> {
        let inv = invocation(
            "file_write",
            &path.to_string_lossy(),
            tool,
            None,
            None,
            None,
        );
        let fut = open_task(Arc::clone(&self.handle), inv, true);
        blocking(py, "Gate.open_write", fut, open_write_out)
    }

    /// Check a URL and resolve it (GIL released): the network check dict plus `addrs`, the
    /// vetted `ip:port` addresses to connect to.
    #[pyo3(signature = (url, tool=None))]
    fn resolve_and_check<'py>(
        &self,
        py: Python<'py>,
        url: &str,
        tool: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        let h = &self.handle;
        let r = py.detach(|| h.resolve_and_check(url, tool));
        record(py, &r)
    }

    /// Grant `scope_hash` for the rest of the turn.
    fn grant_for_turn(&self, scope_hash: &str) {
        self.handle.grant_for_turn(scope_hash);
    }

    fn __repr__(&self) -> String {
        format!("Gate({:?})", self.handle.turn_id())
    }
}

// ---- checker functions ----------------------------------------------------------------------

/// Check a path with the file checker of a `TurnSandboxSnapshot` dict and `policy`; `kind` is
/// `file_read` or `file_write`. Returns `{"verdict", "lexical", "resolved", "root"}`.
#[pyfunction]
#[pyo3(signature = (sandbox, policy, kind, path, tool=None))]
pub(crate) fn check_file<'py>(
    py: Python<'py>,
    sandbox: &Bound<'py, PyAny>,
    policy: &Bound<'py, PyPolicy>,
    kind: &str,
    path: std::path::PathBuf,
    tool: Option<&str>,
) -> PyResult<Py<PyAny>> {
    let sandbox = from_py(sandbox, "sandbox")?;
    let policy = Arc::clone(&policy.get().handle);
    let path = path.to_string_lossy().into_owned();
    let c = py
        .detach(|| ffi_check::check_file(sandbox, &policy, kind, &path, tool))
        .py_err(py)?;
    record(py, &c)
}

/// Check a network target (URL or `host[:port]`) with the network checker of a
/// `TurnNetworkPolicySnapshot` dict and `policy`, without resolving it. Returns
/// `{"verdict", "host", "port", "host_port", "scheme", "address_class"}`.
#[pyfunction]
#[pyo3(signature = (network, policy, target, tool=None))]
pub(crate) fn check_network<'py>(
    py: Python<'py>,
    network: &Bound<'py, PyAny>,
    policy: &Bound<'py, PyPolicy>,
    target: &str,
    tool: Option<&str>,
) -> PyResult<Py<PyAny>> {
    let network = from_py(network, "network")?;
    let c = ffi_check::check_network(network, &policy.get().handle, target, tool).py_err(py)?;
    record(py, &c)
}

fn env_arg(env: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<(Vec<u8>, Vec<u8>)>> {
    let Some(env) = env.filter(|e| !e.is_none()) else {
        return Ok(Vec::new());
    };
    let items = if let Ok(d) = env.cast::<PyDict>() {
        d.items().into_any()
    } else {
        env.clone()
    };
    let mut out = Vec::new();
    for (i, item) in items.try_iter()?.enumerate() {
        let item = item?;
        let os = item.py().import(intern!(item.py(), "os"))?;
        let pair: (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract().map_err(|_| {
            InvalidInput::new_err(format!("env[{i}]: expected a (name, value) pair"))
        })?;
        let enc = |o: &Bound<'_, PyAny>| -> PyResult<Vec<u8>> {
            os.call_method1(intern!(o.py(), "fsencode"), (o,))?
                .extract::<Vec<u8>>()
                .map_err(|_| {
                    InvalidInput::new_err(format!("env[{i}]: names and values are str or bytes"))
                })
        };
        out.push((enc(&pair.0)?, enc(&pair.1)?));
    }
    Ok(out)
}

/// The spawn plan of a command line under a `TurnSandboxSnapshot`, a
/// `TurnProcessPolicySnapshot` and `policy`: verdict, argv, cwd, filtered env, limits, and
/// every simple command with its own verdict. `env` is a mapping or pairs of str or bytes.
#[pyfunction]
#[pyo3(signature = (sandbox, process, policy, command_line, *, cwd=None, env=None, timeout_ms=None, tool=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn plan_spawn<'py>(
    py: Python<'py>,
    sandbox: &Bound<'py, PyAny>,
    process: &Bound<'py, PyAny>,
    policy: &Bound<'py, PyPolicy>,
    command_line: String,
    cwd: Option<std::path::PathBuf>,
    env: Option<&Bound<'py, PyAny>>,
    timeout_ms: Option<u64>,
    tool: Option<String>,
) -> PyResult<Py<PyAny>> {
    let (sandbox, process) = (from_py(sandbox, "sandbox")?, from_py(process, "process")?);
    let request = SpawnPlanRequest {
        command_line,
        cwd: cwd.map(|p| p.to_string_lossy().into_owned()),
        env: env_arg(env)?,
        timeout_ms,
        tool,
    };
    let policy = Arc::clone(&policy.get().handle);
    let p = py
        .detach(|| ffi_check::plan_spawn(sandbox, process, &policy, request))
        .py_err(py)?;
    plan_dict(py, p)
}

/// Filter an environment (a mapping or pairs of str or bytes) for a child in `cwd` under
/// inheritance `mode` (`all`, `filtered`, `none`). Returns `{"vars": [(name, value) bytes],
/// "dropped": [{"name", "reason"}]}`.
#[pyfunction]
#[pyo3(signature = (env, mode, cwd, untrusted_path_roots=Vec::new()))]
pub(crate) fn filter_env<'py>(
    py: Python<'py>,
    env: &Bound<'py, PyAny>,
    mode: &str,
    cwd: std::path::PathBuf,
    untrusted_path_roots: Vec<String>,
) -> PyResult<Bound<'py, PyDict>> {
    let vars = env_arg(Some(env))?;
    let e = ffi_check::filter_env(vars, mode, &cwd.to_string_lossy(), &untrusted_path_roots)
        .py_err(py)?;
    env_dict(py, e)
}

/// What the shell parser finds in a command line: `{"programs", "unresolved", "plain"}`.
#[pyfunction]
pub(crate) fn parse_command_line<'py>(py: Python<'py>, line: &str) -> PyResult<Bound<'py, PyDict>> {
    let p = ffi_check::parse_command_line(line);
    let d = PyDict::new(py);
    d.set_item("programs", p.programs)?;
    d.set_item("unresolved", p.unresolved)?;
    d.set_item("plain", p.plain)?;
    Ok(d)
}

/// Evaluate one call under a snapshot dict with the checker of its kind, exactly as the gate
/// does (nothing recorded, nobody asked): returns `(verdict, canonical_target)`.
#[pyfunction]
#[pyo3(signature = (snapshot, kind, target, tool=None, cwd=None))]
pub(crate) fn evaluate(
    py: Python<'_>,
    snapshot: &Bound<'_, PyAny>,
    kind: &str,
    target: &str,
    tool: Option<String>,
    cwd: Option<std::path::PathBuf>,
) -> PyResult<Py<PyAny>> {
    let snapshot = from_py(snapshot, "snapshot")?;
    let inv = invocation(kind, target, tool, None, None, cwd);
    let e = py
        .detach(|| ffi_check::evaluate(snapshot, &inv))
        .py_err(py)?;
    record(py, &e)
}
