//! The approval broker for Python: `Broker`, its `PendingApproval`s and `Subscription`s.
//! Requests, outcomes and notifications cross as dicts in their protocol shape.

use std::sync::Arc;

use pyo3::prelude::*;
use serde_json::Value;
use turngate_ffi::{BrokerHandle, PendingHandle, SubscriptionHandle};

use crate::aio::{Done, Mode, run};
use crate::json_out;
use crate::{IntoPy, InvalidInput, PyPolicy, action_tuple, from_py, to_py};

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

    fn __anext__(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        run(
            py,
            Mode::Await,
            "Subscription.__anext__",
            next_notification(Arc::clone(&self.handle)),
            json_out,
        )
    }

    /// The next queued notification, or None without waiting.
    fn try_next<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.handle.try_next().py_err(py)?)
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
    fn wait(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        run(
            py,
            Mode::Await,
            "PendingApproval.wait",
            wait_pending(Arc::clone(&self.handle)),
            json_out,
        )
    }
}

fn action_record(obj: &Bound<'_, PyAny>) -> PyResult<turngate_ffi::ActionRecord> {
    if let Some(action) = action_tuple(obj) {
        return Ok(action);
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
    ) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.handle.respond(id, resolution).py_err(py)?)
    }

    /// The open requests, oldest first.
    fn pending_requests<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let v = self.handle.pending_requests().py_err(py)?;
        to_py(py, &v)
    }

    /// The recorded outcome of request `id`, or None while it is open.
    fn outcome<'py>(&self, py: Python<'py>, id: &str) -> PyResult<Bound<'py, PyAny>> {
        to_py(py, &self.handle.outcome(id).py_err(py)?)
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
