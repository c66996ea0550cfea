//! A Python approver behind the facade's [`ForeignApprover`]: a plain function or an `async
//! def` called with the ask as a dict (`{"request", "action", "verdict"}`). A coroutine runs
//! on the event loop the gate was last awaited from (or a fresh loop when there is none); an
//! exception is a denial carrying its text; a coroutine that never finishes leaves the request
//! pending and blocks nothing else. Its answer is a `Decision`, a bool, or `"approve"`,
//! `"deny"` or `"defer"`.

use std::sync::{Arc, Mutex};

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyString};
use serde_json::Value;
use tokio::sync::oneshot;
use turngate_ffi::approver::{
    DecisionRecord, ForeignApprover, ForeignDecisionFuture, parse_decision,
};
use turngate_ffi::{ActionRecord, RuleRecord};

use crate::{InvalidInput, action_tuple, to_py};

/// The event loop async approvers run on: the one the gate was last awaited from.
pub(crate) type LoopSlot = Arc<Mutex<Option<Py<PyAny>>>>;

type Answer = Result<DecisionRecord, String>;

/// An approver's answer: approve (optionally a modified action and rules to remember), deny
/// with a reason, or defer.
#[pyclass(frozen, module = "turngate", name = "Decision")]
#[derive(Clone)]
pub(crate) struct PyDecision {
    pub(crate) record: DecisionRecord,
}

/// The str item `k` of `d`, or None when it is missing or None.
fn text_item(d: &Bound<'_, PyDict>, k: &str) -> PyResult<Option<String>> {
    d.get_item(k)?
        .filter(|v| !v.is_none())
        .map(|v| v.extract())
        .transpose()
}

fn action_arg(obj: &Bound<'_, PyAny>) -> PyResult<ActionRecord> {
    if let Ok(d) = obj.cast::<PyDict>() {
        let get = |k: &str| text_item(d, k);
        let (kind, target) = (get("kind")?, get("target")?);
        return match (kind, target) {
            (Some(kind), Some(target)) => Ok(ActionRecord {
                kind,
                target,
                tool: get("tool")?,
            }),
            _ => Err(InvalidInput::new_err(
                "modified: a dict needs `kind` and `target`",
            )),
        };
    }
    if let Some(action) = action_tuple(obj) {
        return Ok(action);
    }
    Err(InvalidInput::new_err(format!(
        "modified: expected a (kind, target[, tool]) tuple or a dict, got {}",
        obj.repr()?
    )))
}

fn rule_arg(i: usize, obj: &Bound<'_, PyAny>) -> PyResult<RuleRecord> {
    if let Ok(d) = obj.cast::<PyDict>() {
        let get = |k: &str| text_item(d, k);
        if let (Some(kind), Some(effect), Some(pattern)) =
            (get("kind")?, get("effect")?, get("pattern")?)
        {
            return turngate_ffi::approver::rule_record(
                &kind,
                &effect,
                &pattern,
                get("tool")?.as_deref(),
            )
            .map_err(|e| InvalidInput::new_err(format!("remember[{i}]: {}", e.message())));
        }
    }
    Err(InvalidInput::new_err(format!(
        "remember[{i}]: expected a turngate.Rule or a dict with kind, effect and pattern, got {}",
        obj.repr()?
    )))
}

#[pymethods]
impl PyDecision {
    /// Approve the action as shown, or `modified` instead (a `(kind, target[, tool])` tuple or
    /// a dict), remembering `remember` (Rules or rule dicts) for the run. The policy re-checks
    /// both.
    #[staticmethod]
    #[pyo3(signature = (modified=None, remember=None))]
    fn approve(
        modified: Option<&Bound<'_, PyAny>>,
        remember: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let modified = modified
            .filter(|m| !m.is_none())
            .map(action_arg)
            .transpose()?;
        let mut rules = Vec::new();
        if let Some(remember) = remember.filter(|r| !r.is_none()) {
            for (i, item) in remember.try_iter()?.enumerate() {
                rules.push(rule_arg(i, &item?)?);
            }
        }
        Ok(PyDecision {
            record: DecisionRecord::Approve {
                modified,
                remember: rules,
            },
        })
    }

    /// Deny, with a reason the model can adapt to.
    #[staticmethod]
    fn deny(reason: String) -> Self {
        PyDecision {
            record: DecisionRecord::Deny { reason },
        }
    }

    /// Defer: persist the request and pause; resume it later, possibly in another process.
    #[staticmethod]
    fn defer() -> Self {
        PyDecision {
            record: DecisionRecord::Defer,
        }
    }

    /// `"approve"`, `"deny"` or `"defer"`.
    #[getter]
    fn kind(&self) -> &'static str {
        match self.record {
            DecisionRecord::Approve { .. } => "approve",
            DecisionRecord::Deny { .. } => "deny",
            DecisionRecord::Defer => "defer",
        }
    }

    /// The denial reason, for a deny.
    #[getter]
    fn reason(&self) -> Option<String> {
        match &self.record {
            DecisionRecord::Deny { reason } => Some(reason.clone()),
            _ => None,
        }
    }

    fn __repr__(&self) -> String {
        match &self.record {
            DecisionRecord::Deny { reason } => format!("Decision.deny({reason:?})"),
            DecisionRecord::Defer => "Decision.defer()".to_owned(),
            DecisionRecord::Approve {
                modified: None,
                remember,
            } if remember.is_empty() => "Decision.approve()".to_owned(),
            DecisionRecord::Approve { .. } => "Decision.approve(...)".to_owned(),
        }
    }
}

/// A decision from what a Python argument or approver returned.
pub(crate) fn decision_of(obj: &Bound<'_, PyAny>) -> Result<DecisionRecord, String> {
    if let Ok(d) = obj.cast::<PyDecision>() {
        return Ok(d.get().record.clone());
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(if b.is_true() {
            DecisionRecord::approve()
        } else {
            DecisionRecord::Deny {
                reason: "the approver answered False".to_owned(),
            }
        });
    }
    if let Ok(s) = obj.cast::<PyString>() {
        let s: String = s.to_string();
        return parse_decision(&s, None).map_err(|e| e.message().to_owned());
    }
    let shown = obj
        .repr()
        .map(|r| r.to_string())
        .unwrap_or_else(|_| "an object".to_owned());
    Err(format!(
        "the approver returned {shown}; expected a turngate.Decision, a bool, or 'approve', 'deny' or 'defer'"
    ))
}

fn exception_text(py: Python<'_>, e: &PyErr) -> String {
    let name = e
        .get_type(py)
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "Exception".to_owned());
    format!("{name}: {}", e.value(py))
}

/// A Python callable as a foreign approver.
pub(crate) struct PyApprover {
    callable: Py<PyAny>,
    event_loop: LoopSlot,
}

impl PyApprover {
    pub(crate) fn new(callable: Py<PyAny>, event_loop: LoopSlot) -> Self {
        PyApprover {
            callable,
            event_loop,
        }
    }
}

/// Sends a concurrent future's outcome (a coroutine run on the loop) back to Rust.
#[pyclass(module = "turngate")]
struct SendAnswer {
    tx: Mutex<Option<oneshot::Sender<Answer>>>,
}

#[pymethods]
impl SendAnswer {
    fn __call__(&self, fut: &Bound<'_, PyAny>) {
        let py = fut.py();
        let answer = if fut
            .call_method0(intern!(py, "cancelled"))
            .and_then(|c| c.is_truthy())
            .unwrap_or(false)
        {
            Err("the approver was cancelled".to_owned())
        } else {
            match fut.call_method0(intern!(py, "result")) {
                Ok(v) => decision_of(&v),
                Err(e) => Err(exception_text(py, &e)),
            }
        };
        if let Some(tx) = self.tx.lock().ok().and_then(|mut t| t.take()) {
            let _ = tx.send(answer);
        }
    }
}

/// Cancels the coroutine's future on the loop when the Rust side stops waiting.
struct CancelOnDrop(Option<Py<PyAny>>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(fut) = self.0.take() {
            crate::aio::attach_from_runtime(|py| {
                let _ = fut.bind(py).call_method0(intern!(py, "cancel"));
            });
        }
    }
}

enum Step {
    Answered(Answer),
    Waiting(oneshot::Receiver<Answer>, CancelOnDrop),
}

fn call(py: Python<'_>, callable: &Py<PyAny>, event_loop: &LoopSlot, request: &Value) -> Step {
    let result = to_py(py, request).and_then(|arg| callable.bind(py).call1((arg,)));
    let value = match result {
        Ok(v) => v,
        Err(e) => return Step::Answered(Err(exception_text(py, &e))),
    };
    let inspect = match py.import(intern!(py, "inspect")) {
        Ok(m) => m,
        Err(e) => return Step::Answered(Err(exception_text(py, &e))),
    };
    let awaitable = inspect
        .call_method1(intern!(py, "isawaitable"), (&value,))
        .and_then(|a| a.is_truthy())
        .unwrap_or(false);
    if !awaitable {
        return Step::Answered(decision_of(&value));
    }
    let running = event_loop
        .lock()
        .ok()
        .and_then(|l| l.as_ref().map(|l| l.clone_ref(py)))
        .filter(|l| {
            let l = l.bind(py);
            l.call_method0(intern!(py, "is_running"))
                .and_then(|r| r.is_truthy())
                .unwrap_or(false)
                && !l
                    .call_method0(intern!(py, "is_closed"))
                    .and_then(|r| r.is_truthy())
                    .unwrap_or(true)
        });
    let submitted = (|| -> PyResult<Step> {
        let aio = py.import(intern!(py, "turngate._aio"))?;
        let coro = aio.call_method1(intern!(py, "as_coroutine"), (&value,))?;
        match running {
            Some(l) => {
                let asyncio = py.import(intern!(py, "asyncio"))?;
                let fut =
                    asyncio.call_method1(intern!(py, "run_coroutine_threadsafe"), (coro, l))?;
                let (tx, rx) = oneshot::channel();
                let send = SendAnswer {
                    tx: Mutex::new(Some(tx)),
                };
                fut.call_method1(intern!(py, "add_done_callback"), (send,))?;
                Ok(Step::Waiting(rx, CancelOnDrop(Some(fut.unbind()))))
            }
            None => {
                let asyncio = py.import(intern!(py, "asyncio"))?;
                let v = asyncio.call_method1(intern!(py, "run"), (coro,))?;
                Ok(Step::Answered(decision_of(&v)))
            }
        }
    })();
    submitted.unwrap_or_else(|e| Step::Answered(Err(exception_text(py, &e))))
}

impl ForeignApprover for PyApprover {
    fn decide(&self, request: Value) -> ForeignDecisionFuture {
        // During interpreter shutdown nothing can be asked: the approver fails (a denial).
        let shutting_down = || "the Python interpreter is shutting down".to_owned();
        let Some((callable, event_loop)) = crate::aio::attach_from_runtime(|py| {
            (self.callable.clone_ref(py), Arc::clone(&self.event_loop))
        }) else {
            return Box::pin(async move { Err(shutting_down()) });
        };
        Box::pin(async move {
            // The callable may block (a terminal prompt); call it off the runtime's workers.
            let step = tokio::task::spawn_blocking(move || {
                crate::aio::attach_from_runtime(|py| call(py, &callable, &event_loop, &request))
            })
            .await
            .map_err(|e| format!("the approver's thread failed: {e}"))?
            .ok_or_else(shutting_down)?;
            match step {
                Step::Answered(a) => a,
                Step::Waiting(rx, _cancel_if_dropped) => {
                    // Dropping this future (the gate call was cancelled) cancels the coroutine.
                    rx.await
                        .unwrap_or_else(|_| Err("the approver went away".to_owned()))
                }
            }
        })
    }
}
