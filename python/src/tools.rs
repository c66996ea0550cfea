//! The guarded tools for Python (issue 19): `Gate._tool`'s argument conversion, the output
//! callback, and the records back. The tools themselves are the facade's
//! (`turngate_ffi::tools`); `turngate/_tools.py` gives them their Python signatures.

use std::sync::Arc;

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyString};
use serde_json::Value;
use turngate_ffi::GateHandle;
use turngate_ffi::tools::{ApprovalRecord, OutputSink, OutputStream, ToolStep};

use crate::aio::Done;
use crate::approver::decision_of;
use crate::{IntoPy, InvalidInput, from_py, path_or_value, record};

/// The `approval` argument: `{"request_id": str, "decision": Decision | bool | "allow_once" |
/// "allow_for_turn" | "deny"}`.
fn approval_of(py: Python<'_>, a: &Bound<'_, PyAny>) -> PyResult<ApprovalRecord> {
    let a = a.cast::<PyDict>().map_err(|_| {
        InvalidInput::new_err("approval: expected a dict {'request_id': ..., 'decision': ...}")
    })?;
    let id: String = a
        .get_item(intern!(py, "request_id"))?
        .ok_or_else(|| InvalidInput::new_err("approval: 'request_id' is required"))?
        .extract()?;
    let decision = a
        .get_item(intern!(py, "decision"))?
        .ok_or_else(|| InvalidInput::new_err("approval: 'decision' is required"))?;
    if let Ok(b) = decision.cast::<PyBool>() {
        let name = if b.is_true() { "allow_once" } else { "deny" };
        return ApprovalRecord::named(&id, name).py_err(py);
    }
    if let Ok(s) = decision.cast::<PyString>() {
        return ApprovalRecord::named(&id, &s.to_string()).py_err(py);
    }
    let decision = decision_of(&decision).map_err(InvalidInput::new_err)?;
    Ok(ApprovalRecord {
        request_id: id,
        decision,
        for_turn: false,
    })
}

/// A tool's keyword arguments as the facade's JSON arguments (`None` values left out, paths
/// as text, `approval` converted).
pub(crate) fn tool_args(py: Python<'_>, kwargs: &Bound<'_, PyDict>) -> PyResult<Value> {
    let mut fields = serde_json::Map::new();
    for (k, v) in kwargs.iter() {
        if v.is_none() {
            continue;
        }
        let key: String = k.extract()?;
        let value = if key == "approval" {
            serde_json::to_value(approval_of(py, &v)?)
                .map_err(|e| InvalidInput::new_err(format!("approval: {e}")))?
        } else {
            path_or_value(&v, &key)?
        };
        fields.insert(key, value);
    }
    Ok(Value::Object(fields))
}

/// The output callback: `on_output(stream, chunk)` with `stream` `"stdout"` or `"stderr"` and
/// `chunk` bytes, called on `event_loop` (thread-safely) when there is one, else directly. An
/// exception it raises is reported as unraisable and does not stop the command.
pub(crate) fn output_sink(callback: Py<PyAny>, event_loop: Option<Py<PyAny>>) -> OutputSink {
    OutputSink(Arc::new(move |stream: OutputStream, chunk: &[u8]| {
        // Not during interpreter shutdown (see `aio::run`).
        crate::aio::attach_from_runtime(|py| {
            let data = PyBytes::new(py, chunk);
            let result = match &event_loop {
                Some(l) => l.bind(py).call_method1(
                    intern!(py, "call_soon_threadsafe"),
                    (callback.bind(py), stream.as_str(), data),
                ),
                None => callback.bind(py).call1((stream.as_str(), data)),
            };
            if let Err(e) = result {
                e.write_unraisable(py, Some(callback.bind(py)));
            }
        });
    }))
}

pub(crate) async fn tool_task(
    gate: Arc<GateHandle>,
    name: String,
    args: Value,
    data: Option<Vec<u8>>,
    sink: Option<OutputSink>,
) -> Done<ToolStep> {
    gate.call_tool(&name, args, data, sink).await.into()
}

pub(crate) fn tool_out(py: Python<'_>, step: ToolStep) -> PyResult<Py<PyAny>> {
    record(py, &step)
}

/// `fetch_url`'s second half: the response of an allowed fetch as a `ToolOutcome`.
#[pyfunction]
#[pyo3(signature = (url, status, body, truncated, location=None))]
pub(crate) fn _fetch_done(
    py: Python<'_>,
    url: &str,
    status: u16,
    body: &[u8],
    truncated: bool,
    location: Option<&str>,
) -> PyResult<Py<PyAny>> {
    record(
        py,
        &turngate_ffi::tools::fetch_done(url, status, body, truncated, location),
    )
}

/// `fetch_url`'s second half when the connection or exchange failed.
#[pyfunction]
pub(crate) fn _fetch_failed(py: Python<'_>, url: &str, error: &str) -> PyResult<Py<PyAny>> {
    record(py, &turngate_ffi::tools::fetch_failed(url, error))
}

/// The default durable store's path (the CLI's).
#[pyfunction]
pub(crate) fn _default_store_path(py: Python<'_>) -> PyResult<String> {
    turngate_ffi::tools::default_store_path().py_err(py)
}

/// The snapshot of a one-line turn.
#[pyfunction]
#[pyo3(signature = (workspace, mode, policy=None))]
pub(crate) fn _turn_snapshot<'py>(
    py: Python<'py>,
    workspace: std::path::PathBuf,
    mode: &str,
    policy: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let policy = policy.map(|p| from_py(p, "policy")).transpose()?;
    let ws = workspace.to_string_lossy().into_owned();
    let v = py
        .detach(|| turngate_ffi::tools::turn_snapshot(&ws, mode, policy))
        .py_err(py)?;
    crate::to_py(py, &v)
}
