//! Running the facade's async work from Python: one tokio runtime owned by the extension, an
//! asyncio future completed from a tokio task (awaitable variants), and a GIL-free block on the
//! runtime (blocking variants). Cancelling the asyncio future aborts the Rust task.

use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use pyo3::exceptions::{PyRuntimeError, PyStopAsyncIteration};
use pyo3::intern;
use pyo3::prelude::*;
use tokio::runtime::Runtime;
use tokio::task::AbortHandle;
use turngate_ffi::TurnGateError;

use crate::to_py_err;

/// Runtime threads inside Python right now ([`attach_from_runtime`]).
static IN_PYTHON: AtomicUsize = AtomicUsize::new(0);
/// Set by [`_shutdown`] (an `atexit` hook): runtime threads no longer enter Python.
static CLOSING: AtomicBool = AtomicBool::new(false);

/// Run `f` attached to Python from one of the runtime's threads, unless the interpreter is
/// exiting (then `None`). CPython ends a thread that takes the GIL during finalization with a
/// forced unwind, which crashes through Rust frames; a call like `call_soon_threadsafe`
/// releases and retakes the GIL inside, so the main thread may reach finalization in between.
/// [`_shutdown`], run by `atexit` before finalization starts, stops new entries and waits for
/// the threads already inside to leave.
pub(crate) fn attach_from_runtime<R>(f: impl for<'py> FnOnce(Python<'py>) -> R) -> Option<R> {
    if CLOSING.load(Ordering::SeqCst) {
        return None;
    }
    IN_PYTHON.fetch_add(1, Ordering::SeqCst);
    let result = if CLOSING.load(Ordering::SeqCst) {
        None
    } else {
        Python::try_attach(f)
    };
    IN_PYTHON.fetch_sub(1, Ordering::SeqCst);
    result
}

/// The `atexit` hook: no runtime thread enters Python from now on, and the ones inside (at
/// most 2 s) finish first, with the GIL released so they can.
#[pyfunction]
pub(crate) fn _shutdown(py: Python<'_>) {
    CLOSING.store(true, Ordering::SeqCst);
    py.detach(|| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while IN_PYTHON.load(Ordering::SeqCst) > 0 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    });
}

/// The facade's shared tokio runtime (`turngate_ffi::runtime`: two worker threads, started
/// on first use); failing to start it is a `RunError`.
fn runtime(py: Python<'_>) -> PyResult<&'static Runtime> {
    turngate_ffi::runtime::runtime("turngate").map_err(|e| to_py_err(py, e))
}

/// What a finished Rust task hands back to Python: a value, a facade error, or "end of
/// iteration" (an async iterator's `None`).
pub(crate) enum Done<T> {
    Value(T),
    Error(TurnGateError),
    End,
}

impl<T> From<Result<T, TurnGateError>> for Done<T> {
    fn from(r: Result<T, TurnGateError>) -> Self {
        match r {
            Ok(v) => Done::Value(v),
            Err(e) => Done::Error(e),
        }
    }
}

/// How a finished task's value becomes a Python object.
pub(crate) type Convert<T> = fn(Python<'_>, T) -> PyResult<Py<PyAny>>;

fn finish<T>(py: Python<'_>, done: Done<T>, convert: Convert<T>) -> PyResult<Py<PyAny>> {
    match done {
        Done::Value(v) => convert(py, v),
        Done::Error(e) => Err(to_py_err(py, e)),
        Done::End => Err(PyStopAsyncIteration::new_err(())),
    }
}

/// Sets an asyncio future's result or exception unless it was cancelled meanwhile; scheduled
/// on the future's loop with `call_soon_threadsafe`.
#[pyfunction]
pub(crate) fn _complete(
    fut: &Bound<'_, PyAny>,
    ok: bool,
    value: &Bound<'_, PyAny>,
) -> PyResult<()> {
    let py = fut.py();
    if fut.call_method0(intern!(py, "done"))?.is_truthy()? {
        return Ok(());
    }
    if ok {
        fut.call_method1(intern!(py, "set_result"), (value,))?;
    } else {
        fut.call_method1(intern!(py, "set_exception"), (value,))?;
    }
    Ok(())
}

/// The done-callback of an awaitable: aborts the Rust task when the asyncio future was
/// cancelled.
#[pyclass(module = "turngate")]
pub(crate) struct AbortOnCancel {
    handle: AbortHandle,
}

#[pymethods]
impl AbortOnCancel {
    fn __call__(&self, fut: &Bound<'_, PyAny>) -> PyResult<()> {
        if fut
            .call_method0(intern!(fut.py(), "cancelled"))?
            .is_truthy()?
        {
            self.handle.abort();
        }
        Ok(())
    }
}

/// The running asyncio loop of this thread, or a `RuntimeError` naming `what` (the awaitable
/// variant must be called from a coroutine).
pub(crate) fn running_loop<'py>(py: Python<'py>, what: &str) -> PyResult<Bound<'py, PyAny>> {
    let asyncio = py.import(intern!(py, "asyncio"))?;
    asyncio
        .call_method0(intern!(py, "get_running_loop"))
        .map_err(|_| {
            PyRuntimeError::new_err(format!(
                "{what} returns an awaitable and needs a running event loop; call it with \
                 `await` inside a coroutine, or use {what}_blocking"
            ))
        })
}

/// How a call hands its result to Python: an asyncio future of it (the awaitable method) or
/// the result itself, the calling thread blocked with the GIL released (its `_blocking` twin).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Await,
    Block,
}

/// Run `fut` on the runtime and hand Python its converted result, as `mode` says (`what` names
/// the awaitable method in errors). Awaited, the asyncio future is completed from the task, and
/// cancelling it aborts the task. Blocking is refused inside a running event loop (the loop
/// would stall while an async approver waits on it).
pub(crate) fn run<T, F>(
    py: Python<'_>,
    mode: Mode,
    what: &str,
    fut: F,
    convert: Convert<T>,
) -> PyResult<Py<PyAny>>
where
    T: Send + 'static,
    F: Future<Output = Done<T>> + Send + 'static,
{
    if mode == Mode::Block {
        let asyncio = py.import(intern!(py, "asyncio"))?;
        if !asyncio
            .call_method0(intern!(py, "_get_running_loop"))?
            .is_none()
        {
            return Err(PyRuntimeError::new_err(format!(
                "{what}_blocking would stall the running event loop; use `await {what}(...)`"
            )));
        }
        let rt = runtime(py)?;
        let done = py.detach(|| rt.block_on(fut));
        return finish(py, done, convert);
    }
    let event_loop = running_loop(py, what)?;
    let py_fut = event_loop.call_method0(intern!(py, "create_future"))?;
    let (loop_ref, fut_ref) = (event_loop.unbind(), py_fut.clone().unbind());
    let complete = wrap_pyfunction!(_complete, py)?.unbind();
    let task = runtime(py)?.spawn(async move {
        let done = fut.await;
        // Not during interpreter shutdown (nobody awaits the result any more).
        attach_from_runtime(|py| {
            let (ok, value) = match finish(py, done, convert) {
                Ok(v) => (true, v),
                Err(e) => (false, e.into_value(py).into_any()),
            };
            // The loop may be closed by now; then nobody awaits the result.
            let _ = loop_ref.bind(py).call_method1(
                intern!(py, "call_soon_threadsafe"),
                (complete, fut_ref, ok, value),
            );
        });
    });
    let abort = AbortOnCancel {
        handle: task.abort_handle(),
    };
    py_fut.call_method1(intern!(py, "add_done_callback"), (abort,))?;
    Ok(py_fut.unbind())
}
