//! The durable audit and approval store for Python (`Store`). Events and approvals cross as
//! dicts in their protocol shape; every call releases the GIL while the store works.

use std::sync::Arc;

use pyo3::prelude::*;
use serde_json::Value;
use turngate_ffi::{StoreHandle, TurnGateError};

use crate::aio::{Mode, run};
use crate::{IntoPy, from_py, json_out, to_py};

/// `Store.wait_resolved` and `Gate.wait_resolved` (a gate waits on the store it records to):
/// the stored approval `request_id` once resolved, or after `timeout_ms`.
pub(crate) fn wait_resolved(
    py: Python<'_>,
    mode: Mode,
    what: &str,
    store: &Arc<StoreHandle>,
    request_id: String,
    timeout_ms: Option<u64>,
) -> PyResult<Py<PyAny>> {
    let store = Arc::clone(store);
    let fut = async move { store.wait_resolved(&request_id, timeout_ms).await.into() };
    run(py, mode, what, fut, json_out)
}

// ---- the store ------------------------------------------------------------------------------

/// The durable audit and approval store (a SQLite file), shared by gates and clients.
#[pyclass(frozen, module = "turngate", name = "Store")]
pub(crate) struct PyStore {
    pub(crate) handle: Arc<StoreHandle>,
}

impl PyStore {
    /// `f` on the store with the GIL released, its result as Python objects.
    fn detached<'py, T: serde::Serialize + Send>(
        &self,
        py: Python<'py>,
        f: impl FnOnce(&StoreHandle) -> Result<T, TurnGateError> + Send,
    ) -> PyResult<Bound<'py, PyAny>> {
        let h = &self.handle;
        let v = py.detach(|| f(h)).py_err(py)?;
        to_py(py, &v)
    }
}

#[pymethods]
impl PyStore {
    /// Open (creating if needed) the store at `path`. `durability` is `"process"` (the
    /// default: every recorded event survives a kill of the process) or `"power"` (an fsync
    /// per group commit: it also survives a power loss).
    #[new]
    #[pyo3(signature = (path, durability=None))]
    fn new(py: Python<'_>, path: std::path::PathBuf, durability: Option<String>) -> PyResult<Self> {
        let path = path.to_string_lossy().into_owned();
        py.detach(|| StoreHandle::open_durable(&path, durability.as_deref()))
            .map(|handle| PyStore { handle })
            .py_err(py)
    }

    /// A store in memory, for tests: the file store's semantics, nothing kept.
    #[staticmethod]
    fn memory(py: Python<'_>) -> PyResult<Self> {
        StoreHandle::memory()
            .map(|handle| PyStore { handle })
            .py_err(py)
    }

    /// Wait until the stored approval `request_id` is resolved, by anyone (this process at
    /// once, another within 100 ms), or `timeout_ms` passes (awaitable). Returns the approval
    /// (`{"request", "action", "resolution"?}`): resolved, or still pending after the timeout.
    #[pyo3(signature = (request_id, timeout_ms=None))]
    fn wait_resolved(
        &self,
        py: Python<'_>,
        request_id: String,
        timeout_ms: Option<u64>,
    ) -> PyResult<Py<PyAny>> {
        let what = "Store.wait_resolved";
        wait_resolved(py, Mode::Await, what, &self.handle, request_id, timeout_ms)
    }

    /// `wait_resolved`, blocking the calling thread (GIL released).
    #[pyo3(signature = (request_id, timeout_ms=None))]
    fn wait_resolved_blocking(
        &self,
        py: Python<'_>,
        request_id: String,
        timeout_ms: Option<u64>,
    ) -> PyResult<Py<PyAny>> {
        let what = "Store.wait_resolved";
        wait_resolved(py, Mode::Block, what, &self.handle, request_id, timeout_ms)
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
        if let Ok(policy) = what.cast::<crate::PyPolicy>() {
            let policy = policy.get().handle.clone();
            let given = [("turn", turn), ("since", since), ("workspace", workspace)];
            let options = given
                .into_iter()
                .filter_map(|(k, v)| Some((k.to_owned(), v?.into())));
            let options = Value::Object(options.collect());
            return self.detached(py, |h| h.replay_policy(&policy, options));
        }
        let turn_id: String = what.extract()?;
        self.detached(py, |h| h.replay(&turn_id))
    }

    /// Every turn id with events, oldest first.
    fn turns(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let h = &self.handle;
        py.detach(|| h.turns()).py_err(py)
    }

    /// Every stored approval without a resolution (`{"request", "action"}`), oldest first.
    fn pending_approvals<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.detached(py, |h| h.pending_approvals())
    }

    /// The stored approval `request_id` (`{"request", "action", "resolution"?}`), or None.
    fn approval<'py>(&self, py: Python<'py>, request_id: &str) -> PyResult<Bound<'py, PyAny>> {
        self.detached(py, |h| h.approval(request_id))
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
    ) -> PyResult<Bound<'py, PyAny>> {
        self.detached(py, |h| h.resolve(request_id, resolution, reason))
    }

    /// Every change set a reviewed spawn (`Gate.spawn(..., review=True)`) recorded beside this
    /// store, oldest first (`ChangeSet` dicts).
    fn change_sets<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.detached(py, |h| h.change_sets())
    }

    /// The change set `id` (a `ChangeSet` dict, a unified diff per text file). Raises
    /// `ChangesError` (`code` `bad_id` for a path such as `../x`, `not_found`).
    fn change_set<'py>(&self, py: Python<'py>, id: &str) -> PyResult<Bound<'py, PyAny>> {
        self.detached(py, |h| h.change_set(id))
    }

    /// Apply change set `id` to the workspace, all or nothing; returns the applied
    /// `ChangeSet`. `confirm_asks` also applies paths the file policy asks about (denied paths
    /// are always refused); `by` is who applies it. A refusal raises `ChangesError` with
    /// `code` (`conflicts`, `policy_refused`, `tampered`, `not_pending`, ...) and `paths`;
    /// nothing in the workspace changed.
    #[pyo3(signature = (id, *, confirm_asks=false, by=None))]
    fn apply_change_set<'py>(
        &self,
        py: Python<'py>,
        id: &str,
        confirm_asks: bool,
        by: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let options = turngate_ffi::ApplyOptionsRecord { confirm_asks, by };
        self.detached(py, |h| h.apply_change_set(id, &options))
    }

    /// Discard change set `id` (its writes are dropped; the workspace was never touched);
    /// returns the discarded `ChangeSet`. `by` is who discards it.
    #[pyo3(signature = (id, *, by=None))]
    fn discard_change_set<'py>(
        &self,
        py: Python<'py>,
        id: &str,
        by: Option<String>,
    ) -> PyResult<Bound<'py, PyAny>> {
        self.detached(py, |h| h.discard_change_set(id, by.as_deref()))
    }

    fn __repr__(&self) -> String {
        format!("Store({:?})", self.handle.path())
    }
}
