//! The gate of one turn for Python (`Gate`) and its results (`SpawnResult`, opened files,
//! the `Authorization` dict). Nothing here decides anything.

use std::future::Future;
use std::sync::{Arc, Mutex};

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};
use serde_json::Value;
use turngate_ffi::{
    ApproverHandle, AuthorizationRecord, DecisionRecord, DenialRecord, GateHandle,
    InvocationRecord, OpenRecord, SpawnRecord, StoreHandle,
};

use crate::aio::{Convert, Done, Mode, run, running_loop};
use crate::approver::{LoopSlot, PyApprover, decision_of};
use crate::broker::PyBroker;
use crate::store::{PyStore, wait_resolved};
use crate::tools::{output_sink, tool_args, tool_out, tool_task};
use crate::{IntoPy, InvalidInput, PermissionDenied, from_py, path_or_value, record, to_py};

fn auth_out(py: Python<'_>, a: AuthorizationRecord) -> PyResult<Py<PyAny>> {
    record(py, &a)
}

/// What `Gate.spawn` did: the facade's `SpawnResult` record as a dict, flat as in every
/// language (`outcome` says which keys it has: a run's process fields, a denial's `Denial`
/// fields, a deferral's `request`, `reason` and `tool_result`), the captured output as bytes.
fn spawn_out(py: Python<'_>, s: SpawnRecord) -> PyResult<Py<PyAny>> {
    let out = record(py, &s)?;
    if let SpawnRecord::Ran(o) = &s {
        let d = out.bind(py).cast::<PyDict>()?;
        d.set_item(intern!(py, "stdout"), PyBytes::new(py, &o.stdout))?;
        d.set_item(intern!(py, "stderr"), PyBytes::new(py, &o.stderr))?;
    }
    Ok(out)
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
        #[cfg(unix)]
        OpenRecord::Opened(file) => {
            use std::os::fd::IntoRawFd;
            let fd = file.into_raw_fd();
            let os = py.import(intern!(py, "os"))?;
            Ok(os.call_method1(intern!(py, "fdopen"), (fd, mode))?.unbind())
        }
        #[cfg(not(unix))]
        OpenRecord::Opened(file) => {
            let _ = (py, mode);
            drop(file);
            Err(InvalidInput::new_err(
                "race-free opens need a Unix platform",
            ))
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

// ---- the gate -------------------------------------------------------------------------------

/// The gate of one turn: every side-effecting tool call goes through it.
#[pyclass(frozen, subclass, module = "turngate", name = "Gate")]
pub(crate) struct PyGate {
    handle: Arc<GateHandle>,
    /// The store the gate records to (`wait_resolved` waits on it).
    store: Arc<StoreHandle>,
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
/// `review`, and whatever field the facade declares next): they cross as the record's JSON form, so an
/// unknown keyword is refused, naming it, and a path may be any `os.PathLike`.
fn invocation_of(
    kind: &str,
    target: &str,
    options: Option<&Bound<'_, PyDict>>,
) -> PyResult<InvocationRecord> {
    let mut fields = serde_json::Map::new();
    if let Some(options) = options {
        for (k, v) in options.iter() {
            let key: String = k.extract()?;
            fields.insert(key, path_or_value(&v, "options")?);
        }
    }
    fields.insert("kind".into(), kind.into());
    fields.insert("target".into(), target.into());
    serde_json::from_value(Value::Object(fields))
        .map_err(|e| InvalidInput::new_err(format!("invocation: {e}")))
}

pub(crate) fn invocation(
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
        review: false,
    }
}

impl PyGate {
    /// Run the task `start` makes in `mode` (`what` names the awaitable method). An awaitable
    /// call first remembers the running loop: async approvers run on it.
    fn call<T, F>(
        &self,
        py: Python<'_>,
        mode: Mode,
        what: &str,
        start: impl FnOnce(Arc<GateHandle>) -> PyResult<F>,
        convert: Convert<T>,
    ) -> PyResult<Py<PyAny>>
    where
        T: Send + 'static,
        F: Future<Output = Done<T>> + Send + 'static,
    {
        if mode == Mode::Await {
            let l = running_loop(py, what)?;
            if let Ok(mut slot) = self.event_loop.lock() {
                *slot = Some(l.unbind());
            }
        }
        let fut = start(Arc::clone(&self.handle))?;
        run(py, mode, what, fut, convert)
    }

    /// `open_read` (`write` false) or `open_write` in `mode`.
    fn open_in(
        &self,
        py: Python<'_>,
        mode: Mode,
        path: &std::path::Path,
        tool: Option<String>,
        write: bool,
    ) -> PyResult<Py<PyAny>> {
        let (kind, what, convert): (_, _, Convert<OpenRecord>) = if write {
            ("file_write", "Gate.open_write", open_write_out)
        } else {
            ("file_read", "Gate.open_read", open_read_out)
        };
        let inv = invocation(kind, &path.to_string_lossy(), tool, None, None, None);
        self.call(py, mode, what, |g| Ok(open_task(g, inv, write)), convert)
    }

    /// `_tool` in `mode`: `on_output` is called on the running loop when awaited, else from a
    /// worker thread.
    fn tool_in(
        &self,
        py: Python<'_>,
        mode: Mode,
        name: &str,
        data: Option<Vec<u8>>,
        on_output: Option<Py<PyAny>>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let start = |g| {
            let args = match kwargs {
                Some(k) => tool_args(py, k)?,
                None => Value::Object(serde_json::Map::new()),
            };
            let event_loop = match mode {
                Mode::Await => Some(running_loop(py, name)?.unbind()),
                Mode::Block => None,
            };
            let sink = on_output.map(|cb| output_sink(cb, event_loop));
            Ok(tool_task(g, name.to_owned(), args, data, sink))
        };
        self.call(py, mode, name, start, tool_out)
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
        Ok(PyGate {
            handle,
            store,
            event_loop,
        })
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
    fn authorize(
        &self,
        py: Python<'_>,
        kind: &str,
        target: &str,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let start = |g| Ok(authorize_task(g, invocation_of(kind, target, options)?));
        self.call(py, Mode::Await, "Gate.authorize", start, auth_out)
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
        let start = |g| Ok(authorize_task(g, invocation_of(kind, target, options)?));
        self.call(py, Mode::Block, "Gate.authorize", start, auth_out)
    }

    /// Authorize a shell command and, when allowed, run it under the snapshot's sandbox
    /// (awaitable). Returns a `SpawnResult`; raises `SandboxUnavailable` when the snapshot
    /// requires a sandbox this platform cannot provide (nothing runs unconfined). With
    /// `review=True` the writes become a change set beside the store (`result.change_set`),
    /// the workspace untouched until `Store.apply_change_set`; raises `ChangesError`
    /// (`unavailable`) or `RunError` where that cannot be done, never runs unreviewed.
    #[pyo3(signature = (command_line, **options))]
    fn spawn(
        &self,
        py: Python<'_>,
        command_line: &str,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let inv = || invocation_of("shell_command", command_line, options);
        let start = |g| Ok(spawn_task(g, inv()?));
        self.call(py, Mode::Await, "Gate.spawn", start, spawn_out)
    }

    /// `spawn`, blocking the calling thread (GIL released).
    #[pyo3(signature = (command_line, **options))]
    fn spawn_blocking(
        &self,
        py: Python<'_>,
        command_line: &str,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let inv = || invocation_of("shell_command", command_line, options);
        let start = |g| Ok(spawn_task(g, inv()?));
        self.call(py, Mode::Block, "Gate.spawn", start, spawn_out)
    }

    /// Run the stored shell command of an already approved request (by id) under the
    /// snapshot and sandbox it was requested under, blocking (GIL released). Returns a
    /// `SpawnResult`. An unresolved, denied or spent (`already_used`) request raises
    /// `ApprovalError`: no command line runs without a decision.
    fn run_approved_blocking(&self, py: Python<'_>, request_id: &str) -> PyResult<Py<PyAny>> {
        let start = |g| Ok(run_approved_task(g, request_id.to_owned()));
        self.call(py, Mode::Block, "Gate.run_approved", start, spawn_out)
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
        let start = |g| Ok(resume_spawn_task(g, request_id.to_owned(), decision));
        self.call(py, Mode::Block, "Gate.resume_spawn", start, spawn_out)
    }

    /// Decide a deferred request (possibly persisted by another process) with `decision` (a
    /// `Decision`, a bool, or `"approve"`/`"deny"`/`"defer"`): the stored action, exactly as
    /// shown, is re-checked against this gate's policy. Returns an `Authorization`. With no
    /// `decision`, the one already recorded in the store (see `wait_resolved`): an allow is
    /// re-checked and spent once, a recorded deny is the denial, a pending request raises.
    #[pyo3(signature = (request_id, decision=None))]
    fn resume(
        &self,
        py: Python<'_>,
        request_id: &str,
        decision: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyAny>> {
        let decision = decision
            .map(|d| decision_of(d).map_err(InvalidInput::new_err))
            .transpose()?;
        let h = &self.handle;
        let out = py
            .detach(|| h.resume_or_recorded(request_id, decision.as_ref()))
            .py_err(py)?;
        auth_out(py, out)
    }

    /// Wait until the deferred request `request_id` is resolved, by anyone (a person through
    /// `turngate approvals`, `turngate serve` or a link; this process at once, another within
    /// 100 ms), or `timeout_ms` passes (awaitable). Returns its stored approval; then
    /// `resume(request_id)` (or `run_approved`) acts on the recorded decision.
    #[pyo3(signature = (request_id, timeout_ms=None))]
    fn wait_resolved(
        &self,
        py: Python<'_>,
        request_id: String,
        timeout_ms: Option<u64>,
    ) -> PyResult<Py<PyAny>> {
        let what = "Gate.wait_resolved";
        wait_resolved(py, Mode::Await, what, &self.store, request_id, timeout_ms)
    }

    /// `wait_resolved`, blocking the calling thread (GIL released).
    #[pyo3(signature = (request_id, timeout_ms=None))]
    fn wait_resolved_blocking(
        &self,
        py: Python<'_>,
        request_id: String,
        timeout_ms: Option<u64>,
    ) -> PyResult<Py<PyAny>> {
        let what = "Gate.wait_resolved";
        wait_resolved(py, Mode::Block, what, &self.store, request_id, timeout_ms)
    }

    /// Authorize a read and open the file race-free beneath its root (awaitable): a binary
    /// file object, or `PermissionDenied` (with `reason` and `tool_result`).
    #[pyo3(signature = (path, *, tool=None))]
    fn open_read(
        &self,
        py: Python<'_>,
        path: std::path::PathBuf,
        tool: Option<String>,
    ) -> PyResult<Py<PyAny>> {
        self.open_in(py, Mode::Await, &path, tool, false)
    }

    /// Authorize a write and open (create or truncate) the file race-free (awaitable).
    #[pyo3(signature = (path, *, tool=None))]
    fn open_write(
        &self,
        py: Python<'_>,
        path: std::path::PathBuf,
        tool: Option<String>,
    ) -> PyResult<Py<PyAny>> {
        self.open_in(py, Mode::Await, &path, tool, true)
    }

    /// `open_read`, blocking.
    #[pyo3(signature = (path, *, tool=None))]
    fn open_read_blocking(
        &self,
        py: Python<'_>,
        path: std::path::PathBuf,
        tool: Option<String>,
    ) -> PyResult<Py<PyAny>> {
        self.open_in(py, Mode::Block, &path, tool, false)
    }

    /// `open_write`, blocking.
    #[pyo3(signature = (path, *, tool=None))]
    fn open_write_blocking(
        &self,
        py: Python<'_>,
        path: std::path::PathBuf,
        tool: Option<String>,
    ) -> PyResult<Py<PyAny>> {
        self.open_in(py, Mode::Block, &path, tool, true)
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

    // ---- the guarded tools and async run_approved (issue 19; see turngate/_tools.py) ----

    /// Call guarded tool `name` with its keyword arguments (awaitable): a `ToolStep` dict,
    /// `{"step": "done", ...ToolOutcome}` or, for an allowed `fetch_url`, `{"step": "connect",
    /// ...}` with the vetted addresses. `data`: `write_file`'s content or `run_shell`'s stdin
    /// as bytes. Use the `read_file`, `write_file`, ... methods instead.
    #[pyo3(signature = (name, data=None, on_output=None, **kwargs))]
    fn _tool(
        &self,
        py: Python<'_>,
        name: &str,
        data: Option<Vec<u8>>,
        on_output: Option<Py<PyAny>>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        self.tool_in(py, Mode::Await, name, data, on_output, kwargs)
    }

    /// `_tool`, blocking the calling thread (GIL released; `on_output` is called from a
    /// worker thread).
    #[pyo3(signature = (name, data=None, on_output=None, **kwargs))]
    fn _tool_blocking(
        &self,
        py: Python<'_>,
        name: &str,
        data: Option<Vec<u8>>,
        on_output: Option<Py<PyAny>>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        self.tool_in(py, Mode::Block, name, data, on_output, kwargs)
    }

    /// Run the stored shell command of an already approved request (awaitable): the async
    /// form of `run_approved_blocking`.
    fn run_approved(&self, py: Python<'_>, request_id: &str) -> PyResult<Py<PyAny>> {
        let start = |g| Ok(run_approved_task(g, request_id.to_owned()));
        self.call(py, Mode::Await, "Gate.run_approved", start, spawn_out)
    }

    fn __repr__(&self) -> String {
        format!("Gate({:?})", self.handle.turn_id())
    }
}
