//! `turngate._turngate`: the PyO3 extension behind the `turngate` Python package. It wraps the
//! FFI facade (`turngate-ffi`) thinly: it converts Python values to the facade's types, maps
//! [`TurnGateError`] to native exception classes, and releases the GIL around Rust work that can
//! take a while. It never decides anything itself.

mod aio;
mod approver;
mod broker;
mod check;
mod gate;
mod store;
mod tools;

use std::sync::Arc;

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use pyo3::{create_exception, intern};
use serde_json::Value;
use turngate_ffi::{
    ActionKind, ActionRecord, Effect, PolicyHandle, TurnGateError, parse_kind, snapshot,
};

create_exception!(
    turngate,
    TurnGateErrorPy,
    PyException,
    "Base class of every turngate error."
);
create_exception!(
    turngate,
    PolicyError,
    TurnGateErrorPy,
    "A policy did not parse or compile, or named an unknown kind, effect or mode."
);
create_exception!(
    turngate,
    SnapshotError,
    TurnGateErrorPy,
    "A turn snapshot could not be resolved, or refuses what was asked of it."
);
create_exception!(
    turngate,
    StoreError,
    TurnGateErrorPy,
    "The durable approval/audit store failed."
);
create_exception!(
    turngate,
    SandboxUnavailable,
    TurnGateErrorPy,
    "A sandbox backend is required but unavailable on this platform."
);
create_exception!(
    turngate,
    ApprovalError,
    TurnGateErrorPy,
    "An approval operation was refused: unknown or duplicate request, a resolution the request does not offer, a closed broker."
);
create_exception!(
    turngate,
    RunError,
    TurnGateErrorPy,
    "A command could not be run (spawn or I/O failed, the sandbox could not be applied); nothing ran unconfined."
);
create_exception!(
    turngate,
    ChangesError,
    TurnGateErrorPy,
    "A change set operation was refused (reviewable writes): `code` says why (`conflicts`, `policy_refused`, `tampered`, `not_pending`, `bad_id`, `not_found`, `unavailable`, ...) and `paths` names the paths; nothing in the workspace changed."
);
create_exception!(
    turngate,
    PermissionDenied,
    pyo3::exceptions::PyPermissionError,
    "The gate refused an action; `reason` says why and `tool_result` is the text to hand the model."
);
create_exception!(
    turngate,
    InvalidInput,
    TurnGateErrorPy,
    "An argument was malformed (not the expected protocol object, an unknown name)."
);

/// The native exception for a facade error, keeping its message and actionable fields as
/// attributes (`path`, `line`, `column` on a `PolicyError`; `code` on a `SnapshotError`).
pub(crate) fn to_py_err(py: Python<'_>, e: TurnGateError) -> PyErr {
    let message = e.message().to_owned();
    let err = match &e {
        TurnGateError::Policy { .. } => PolicyError::new_err(message),
        TurnGateError::Snapshot { .. } => SnapshotError::new_err(message),
        TurnGateError::Store { .. } => StoreError::new_err(message),
        TurnGateError::SandboxUnavailable { .. } => SandboxUnavailable::new_err(message),
        TurnGateError::Approval { .. } => ApprovalError::new_err(message),
        TurnGateError::Run { .. } => RunError::new_err(message),
        TurnGateError::Changes { .. } => ChangesError::new_err(message),
        _ => InvalidInput::new_err(message),
    };
    let value = err.value(py);
    // Attribute setting on a fresh exception instance cannot fail in practice; if it did, the
    // exception with its message is still the right one to raise.
    match e {
        TurnGateError::Policy {
            path, line, column, ..
        } => {
            let _ = value.setattr(intern!(py, "path"), path);
            let _ = value.setattr(intern!(py, "line"), line);
            let _ = value.setattr(intern!(py, "column"), column);
        }
        TurnGateError::Snapshot { code, .. } => {
            let _ = value.setattr(intern!(py, "code"), code);
        }
        TurnGateError::Changes { code, paths, .. } => {
            let _ = value.setattr(intern!(py, "code"), code);
            let _ = value.setattr(intern!(py, "paths"), paths);
        }
        _ => {}
    }
    err
}

pub(crate) trait IntoPy<T> {
    fn py_err(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> IntoPy<T> for Result<T, TurnGateError> {
    fn py_err(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py_err(py, e))
    }
}

// ---- JSON <-> Python ------------------------------------------------------------------------

/// A JSON value, or any facade record, as plain Python objects (dict, list, str, int, float,
/// bool, None): serde straight into Python objects (`pythonize`, ADR 0029), no
/// `serde_json::Value` in between; keys in serialization order, the same fields as in every
/// language (the `.pyi` types records as TypedDicts).
pub(crate) fn to_py<'py, T: serde::Serialize + ?Sized>(
    py: Python<'py>,
    value: &T,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(pythonize::pythonize(py, value)?)
}

/// Plain Python objects as a JSON value; `what` names the argument in errors.
pub(crate) fn from_py(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Value> {
    if obj.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if obj.cast::<PyInt>().is_ok() {
        if let Ok(i) = obj.extract::<i64>() {
            return Ok(Value::from(i));
        }
        if let Ok(u) = obj.extract::<u64>() {
            return Ok(Value::from(u));
        }
        return Err(InvalidInput::new_err(format!(
            "{what}: integer out of range"
        )));
    }
    if let Ok(f) = obj.cast::<PyFloat>() {
        return serde_json::Number::from_f64(f.value())
            .map(Value::Number)
            .ok_or_else(|| InvalidInput::new_err(format!("{what}: {} is not JSON", f.value())));
    }
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(Value::String(s.extract::<String>()?));
    }
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut map = serde_json::Map::with_capacity(d.len());
        for (k, v) in d.iter() {
            let key = k.cast::<PyString>().map_err(|_| {
                InvalidInput::new_err(format!("{what}: dict keys must be str, got {k:?}"))
            })?;
            let key: String = key.extract()?;
            let value = from_py(&v, &format!("{what}.{key}"))?;
            map.insert(key, value);
        }
        return Ok(Value::Object(map));
    }
    if obj.cast::<PyList>().is_ok() || obj.cast::<PyTuple>().is_ok() {
        let mut items = Vec::new();
        for (i, item) in obj.try_iter()?.enumerate() {
            items.push(from_py(&item?, &format!("{what}[{i}]"))?);
        }
        return Ok(Value::Array(items));
    }
    // Paths (os.PathLike) cross as their string form.
    if let Ok(fspath) = obj.call_method0(intern!(obj.py(), "__fspath__")) {
        return from_py(&fspath, what);
    }
    Err(InvalidInput::new_err(format!(
        "{what}: {} is not a JSON value (dict, list, str, int, float, bool or None)",
        obj.get_type().name()?
    )))
}

/// An action given as a `(kind, target)` or `(kind, target, tool)` tuple of str, or None.
pub(crate) fn action_tuple(obj: &Bound<'_, PyAny>) -> Option<ActionRecord> {
    if let Ok((kind, target, tool)) = obj.extract::<(String, String, Option<String>)>() {
        return Some(ActionRecord { kind, target, tool });
    }
    let (kind, target) = obj.extract::<(String, String)>().ok()?;
    Some(ActionRecord {
        kind,
        target,
        tool: None,
    })
}

/// [`from_py`], an `os.PathLike` taken as its path (`os.fspath`, which checks what
/// `__fspath__` returns).
pub(crate) fn path_or_value(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Value> {
    let py = obj.py();
    if obj.hasattr(intern!(py, "__fspath__"))? {
        let os = py.import(intern!(py, "os"))?;
        return from_py(&os.call_method1(intern!(py, "fspath"), (obj,))?, what);
    }
    from_py(obj, what)
}

fn optional_value(obj: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Option<Value>> {
    match obj {
        None => Ok(None),
        Some(o) if o.is_none() => Ok(None),
        Some(o) => from_py(o, what).map(Some),
    }
}

fn effect_str(py: Python<'_>, effect: Effect) -> &Bound<'_, PyString> {
    match effect {
        Effect::Allow => intern!(py, "allow"),
        Effect::Ask => intern!(py, "ask"),
        Effect::Deny => intern!(py, "deny"),
    }
}

// ---- Policy ---------------------------------------------------------------------------------

/// A facade record (or JSON value) as an owned Python object.
pub(crate) fn record<T: serde::Serialize + ?Sized>(
    py: Python<'_>,
    value: &T,
) -> PyResult<Py<PyAny>> {
    Ok(to_py(py, value)?.unbind())
}

/// A JSON value as an owned Python object.
pub(crate) fn json_out(py: Python<'_>, v: Value) -> PyResult<Py<PyAny>> {
    record(py, &v)
}

/// A compiled policy. Immutable: `merge`, `contain` and the builders return new policies.
/// Evaluate with `check` (the effect) or `explain` (the full verdict).
#[pyclass(frozen, module = "turngate", name = "Policy")]
pub(crate) struct PyPolicy {
    pub(crate) handle: Arc<PolicyHandle>,
}

fn wrap(handle: Arc<PolicyHandle>) -> PyPolicy {
    PyPolicy { handle }
}

#[pymethods]
impl PyPolicy {
    /// An empty policy: no rules, no opinion on any kind (a standalone policy asks), network
    /// denied.
    #[new]
    fn new(py: Python<'_>) -> PyResult<Self> {
        PolicyHandle::empty().map(wrap).py_err(py)
    }

    /// Parse a policy from its JSON text. `origin` (a file name) is quoted in errors.
    #[staticmethod]
    #[pyo3(signature = (text, origin=None))]
    fn from_json(py: Python<'_>, text: &str, origin: Option<&str>) -> PyResult<Self> {
        PolicyHandle::from_json(text, origin).map(wrap).py_err(py)
    }

    /// Parse a policy from its TOML text. `origin` (a file name) is quoted in errors.
    #[staticmethod]
    #[pyo3(signature = (text, origin=None))]
    fn from_toml(py: Python<'_>, text: &str, origin: Option<&str>) -> PyResult<Self> {
        PolicyHandle::from_toml(text, origin).map(wrap).py_err(py)
    }

    /// A policy from a dict in the policy-file format.
    #[staticmethod]
    fn from_dict(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<Self> {
        let value = from_py(data, "policy")?;
        PolicyHandle::from_json_value(value).map(wrap).py_err(py)
    }

    /// Read a `.json` or `.toml` policy file (the GIL is released while reading and compiling).
    #[staticmethod]
    fn from_file(py: Python<'_>, path: std::path::PathBuf) -> PyResult<Self> {
        let path = path.to_string_lossy().into_owned();
        py.detach(|| PolicyHandle::from_file(&path))
            .map(wrap)
            .py_err(py)
    }

    /// The tiered policy: reads allowed, writes and execs ask (`rustc` and `test_binary`
    /// allowed), network denied (`provider_host` allowed), secrets denied.
    #[staticmethod]
    #[pyo3(signature = (test_binary=None, provider_host=None))]
    fn tiered(
        py: Python<'_>,
        test_binary: Option<String>,
        provider_host: Option<String>,
    ) -> PyResult<Self> {
        PolicyHandle::tiered(test_binary, provider_host)
            .map(wrap)
            .py_err(py)
    }

    /// Enforces nothing. Only for callers that pass no policy.
    #[staticmethod]
    fn permissive(py: Python<'_>) -> PyResult<Self> {
        PolicyHandle::permissive().map(wrap).py_err(py)
    }

    /// The compiled policy of a permission mode: `full_access`, `auto_accept_edits` or
    /// `supervised`.
    #[staticmethod]
    fn mode(py: Python<'_>, name: &str) -> PyResult<Self> {
        PolicyHandle::from_mode(name).map(wrap).py_err(py)
    }

    /// Compose a peer: layers concatenated, the stricter default per kind wins.
    fn merge(&self, py: Python<'_>, other: &Bound<'_, PyPolicy>) -> PyResult<Self> {
        self.handle.merge(&other.get().handle).map(wrap).py_err(py)
    }

    /// Add `cap` as a cap: the result is at least as strict as both.
    fn contain(&self, py: Python<'_>, cap: &Bound<'_, PyPolicy>) -> PyResult<Self> {
        self.handle.contain(&cap.get().handle).map(wrap).py_err(py)
    }

    /// A new policy with a rule added to the current layer (or to a new layer `layer`).
    #[pyo3(signature = (kind, effect, pattern, *, tool=None, layer=None))]
    fn rule(
        &self,
        py: Python<'_>,
        kind: &str,
        effect: &str,
        pattern: &str,
        tool: Option<&str>,
        layer: Option<&str>,
    ) -> PyResult<Self> {
        self.handle
            .with_rule(kind, effect, pattern, tool, layer)
            .map(wrap)
            .py_err(py)
    }

    /// A new policy with a new, empty layer `name` that later rules go to.
    fn layer(&self, py: Python<'_>, name: &str) -> PyResult<Self> {
        self.handle.with_layer(name).map(wrap).py_err(py)
    }

    /// A new policy with `kind`'s default set to `effect`.
    fn with_default(&self, py: Python<'_>, kind: &str, effect: &str) -> PyResult<Self> {
        self.handle.with_default(kind, effect).map(wrap).py_err(py)
    }

    /// A new policy with its name set (a cap that decides reports it as the layer).
    fn named(&self, py: Python<'_>, name: &str) -> PyResult<Self> {
        self.handle.named(name).map(wrap).py_err(py)
    }

    /// The effect of an action: `"allow"`, `"ask"` or `"deny"`. Exactly
    /// `explain(...).effect`.
    #[pyo3(signature = (kind, target, tool=None))]
    fn check<'py>(
        &self,
        py: Python<'py>,
        kind: &str,
        target: &str,
        tool: Option<&str>,
    ) -> PyResult<Bound<'py, PyString>> {
        let kind: ActionKind = parse_kind(kind).py_err(py)?;
        let effect = self.handle.check_kind(kind, target, tool);
        Ok(effect_str(py, effect).clone())
    }

    /// The lint findings (`turngate lint`): a list of dicts `{"code", "severity", "path",
    /// "layer", "rule", "by"?, "message"}`.
    fn lint<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let v = self.handle.lint().py_err(py)?;
        to_py(py, &v)
    }

    /// The full verdict dict (`effect`, `rule`, `layer`, `reason`, and `condition` / `would`
    /// when they apply) of an action in a turn whose earlier allowed actions are `history`
    /// (`[{"kind", "target", "tool"?, "seconds_ago"?}]`, oldest first).
    #[pyo3(signature = (kind, target, tool=None, history=None))]
    fn explain_in_turn<'py>(
        &self,
        py: Python<'py>,
        kind: &str,
        target: &str,
        tool: Option<&str>,
        history: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let history = match history {
            Some(h) => from_py(h, "history")?,
            None => Value::Array(Vec::new()),
        };
        let v = self
            .handle
            .explain_in_turn(kind, target, tool, history)
            .py_err(py)?;
        to_py(py, &v)
    }

    /// Replay recorded audit events (`TurnPermissionAuditEvent` dicts) with this policy as the
    /// candidate: the report `{"decisions", "flips": [...]}`.
    #[pyo3(signature = (events, options=None))]
    fn replay_events<'py>(
        &self,
        py: Python<'py>,
        events: &Bound<'py, PyAny>,
        options: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let events = from_py(events, "events")?;
        let options = optional_value(options, "options")?.unwrap_or(Value::Null);
        let v = self.handle.replay_events(events, options).py_err(py)?;
        to_py(py, &v)
    }

    /// The verdict of an action: effect, deciding rule and layer, reason.
    #[pyo3(signature = (kind, target, tool=None))]
    fn explain(
        &self,
        py: Python<'_>,
        kind: &str,
        target: &str,
        tool: Option<&str>,
    ) -> PyResult<Py<PyAny>> {
        let v = self.handle.explain(kind, target, tool).py_err(py)?;
        record(py, &v)
    }

    /// The effects of many actions, each a `(kind, target)` or `(kind, target, tool)` tuple.
    /// The GIL is released while the batch is evaluated.
    fn check_batch<'py>(
        &self,
        py: Python<'py>,
        actions: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let mut records = Vec::new();
        for (i, item) in actions.try_iter()?.enumerate() {
            let item = item?;
            let Some(record) = action_tuple(&item) else {
                return Err(InvalidInput::new_err(format!(
                    "actions[{i}]: expected a (kind, target) or (kind, target, tool) tuple of str, got {}",
                    item.repr()?
                )));
            };
            records.push(record);
        }
        let handle = &self.handle;
        let effects = py.detach(|| handle.check_batch(&records)).py_err(py)?;
        PyList::new(py, effects.into_iter().map(|e| effect_str(py, e).clone()))
    }

    /// The policy as a dict in the policy-file format.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let value = self.handle.to_json_value().py_err(py)?;
        to_py(py, &value)
    }

    /// The policy as policy-file JSON text.
    fn to_json(&self) -> String {
        self.handle.to_json()
    }

    /// The policy as policy-file TOML text.
    fn to_toml(&self, py: Python<'_>) -> PyResult<String> {
        self.handle.to_toml().py_err(py)
    }

    fn __repr__(&self) -> String {
        format!("Policy.from_json({:?})", self.handle.to_json())
    }
}

// ---- Snapshot functions ---------------------------------------------------------------------

/// Resolve a turn's `TurnExecutionSecuritySnapshot` from a `TurnPermissionProfileSelection`
/// (None: the default full-access profile), a `ResolveContext` and an optional
/// `TaskAgentSecurityCap`. Pure: the same inputs give the same snapshot.
#[pyfunction]
#[pyo3(signature = (selection, context, cap=None))]
fn resolve<'py>(
    py: Python<'py>,
    selection: Option<&Bound<'py, PyAny>>,
    context: &Bound<'py, PyAny>,
    cap: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let selection = optional_value(selection, "selection")?;
    let context = from_py(context, "context")?;
    let cap = optional_value(cap, "cap")?;
    let out = py
        .detach(|| snapshot::resolve(selection, context, cap))
        .py_err(py)?;
    to_py(py, &out)
}

/// Narrow a snapshot by a `TaskAgentSecurityCap`.
#[pyfunction]
fn intersect<'py>(
    py: Python<'py>,
    snapshot: &Bound<'py, PyAny>,
    cap: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let (s, c) = (from_py(snapshot, "snapshot")?, from_py(cap, "cap")?);
    let out = py.detach(|| snapshot::intersect(s, c)).py_err(py)?;
    to_py(py, &out)
}

/// The `TaskAgentSecurityCap` a child of `snapshot` receives; `origin` is `"parent_turn"` or
/// `"task_policy"`.
#[pyfunction]
fn cap_from_parent<'py>(
    py: Python<'py>,
    snapshot: &Bound<'py, PyAny>,
    origin: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let s = from_py(snapshot, "snapshot")?;
    let out = snapshot::cap_from_parent(s, origin).py_err(py)?;
    to_py(py, &out)
}

/// Raise `SnapshotError` (code `provider_native_on_native_shell`) or `SandboxUnavailable` when
/// a native shell may not run under `snapshot`.
#[pyfunction]
fn ensure_native_shell_allowed(py: Python<'_>, snapshot: &Bound<'_, PyAny>) -> PyResult<()> {
    let s = from_py(snapshot, "snapshot")?;
    snapshot::ensure_native_shell_allowed(s).py_err(py)
}

/// The system-prompt permissions section for a snapshot's `permission_profile`, or None.
#[pyfunction]
fn render_permissions_section(
    py: Python<'_>,
    profile: &Bound<'_, PyAny>,
) -> PyResult<Option<String>> {
    let p = from_py(profile, "profile")?;
    snapshot::render_permissions_section(p).py_err(py)
}

/// How a CLI runtime (`"codex"`, `"claude"`) is driven in a permission mode
/// (a `CliRuntimeMapping` dict).
#[pyfunction]
fn map_cli_runtime<'py>(py: Python<'py>, runtime: &str, mode: &str) -> PyResult<Bound<'py, PyAny>> {
    let out = snapshot::map_cli_runtime(runtime, mode).py_err(py)?;
    to_py(py, &out)
}

/// This machine's `PlatformCapabilities` (OS, Landlock ABI, Seatbelt, ...).
#[pyfunction]
fn probe_platform(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    let out = py.detach(snapshot::probe_platform).py_err(py)?;
    to_py(py, &out)
}

/// The JSON Schema of a protocol type, by name (see `schema_names()`).
#[pyfunction]
fn schema<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    let out = snapshot::schema(name).py_err(py)?;
    to_py(py, &out)
}

/// The names of every protocol type with a JSON Schema.
#[pyfunction]
fn schema_names() -> Vec<String> {
    snapshot::schema_names()
}

// ---- Reducers and approval scopes -----------------------------------------------------------

/// Apply one reducer input (`{"audit_event": ...}` or `{"notification": ...}`) to a client
/// state dict (None: the empty state); returns the next state.
#[pyfunction]
#[pyo3(signature = (state, input))]
fn reduce<'py>(
    py: Python<'py>,
    state: Option<&Bound<'py, PyAny>>,
    input: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let state = optional_value(state, "state")?;
    let input = from_py(input, "input")?;
    let out = turngate_ffi::reduce::reduce(state, input).py_err(py)?;
    to_py(py, &out)
}

/// Apply reducer inputs in order from `state` (None: the empty state); returns the state
/// (`{"timeline", "prompts", "last_seq"}`).
#[pyfunction]
#[pyo3(signature = (inputs, state=None))]
fn reduce_all<'py>(
    py: Python<'py>,
    inputs: &Bound<'py, PyAny>,
    state: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let state = optional_value(state, "state")?;
    let inputs = from_py(inputs, "inputs")?;
    let out = py
        .detach(|| turngate_ffi::reduce::reduce_all(state, inputs))
        .py_err(py)?;
    to_py(py, &out)
}

/// The normalized approval scope of an action (relative paths joined to `cwd`).
#[pyfunction]
#[pyo3(signature = (kind, target, tool=None, cwd=None))]
fn scope_from_action<'py>(
    py: Python<'py>,
    kind: &str,
    target: &str,
    tool: Option<&str>,
    cwd: Option<&str>,
) -> PyResult<Bound<'py, PyAny>> {
    let out = turngate_ffi::reduce::scope_from_action(kind, target, tool, cwd).py_err(py)?;
    to_py(py, &out)
}

/// The `scope_hash` (lowercase hex SHA-256) of an approval scope dict.
#[pyfunction]
fn scope_hash(py: Python<'_>, scope: &Bound<'_, PyAny>) -> PyResult<String> {
    let scope = from_py(scope, "scope")?;
    turngate_ffi::reduce::scope_hash(scope).py_err(py)
}

/// A `ChangeSet` dict (a manifest, or one another process handed over) checked against the
/// type and returned as turngate writes it: an unknown field, kind or status raises
/// `InvalidInput`, naming it.
#[pyfunction]
fn parse_change_set<'py>(
    py: Python<'py>,
    change_set: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let v = from_py(change_set, "change_set")?;
    let out = turngate_ffi::changes::parse(v).py_err(py)?;
    to_py(py, &out)
}

/// The version of the turngate core.
#[pyfunction]
fn version() -> &'static str {
    turngate_ffi::version()
}

#[pymodule]
fn _turngate(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    // Each error also subclasses the builtin a Python caller would catch: the classes are made
    // by `create_exception!` with one base, and get their second one here.
    let base = py.get_type::<TurnGateErrorPy>();
    base.setattr(intern!(py, "__name__"), "TurnGateError")?;
    base.setattr(intern!(py, "__qualname__"), "TurnGateError")?;
    let builtins = py.import(intern!(py, "builtins"))?;
    for (class, builtin) in [
        (py.get_type::<PolicyError>(), "ValueError"),
        (py.get_type::<InvalidInput>(), "ValueError"),
        (py.get_type::<PermissionDenied>(), "PermissionError"),
    ] {
        let bases = PyTuple::new(py, [base.as_any(), &builtins.getattr(builtin)?])?;
        class.setattr(intern!(py, "__bases__"), bases)?;
    }
    m.add("TurnGateError", base)?;
    m.add("PolicyError", py.get_type::<PolicyError>())?;
    m.add("SnapshotError", py.get_type::<SnapshotError>())?;
    m.add("StoreError", py.get_type::<StoreError>())?;
    m.add("SandboxUnavailable", py.get_type::<SandboxUnavailable>())?;
    m.add("InvalidInput", py.get_type::<InvalidInput>())?;
    m.add("ApprovalError", py.get_type::<ApprovalError>())?;
    m.add("RunError", py.get_type::<RunError>())?;
    m.add("ChangesError", py.get_type::<ChangesError>())?;
    m.add("PermissionDenied", py.get_type::<PermissionDenied>())?;
    m.add_class::<approver::PyDecision>()?;
    m.add_class::<store::PyStore>()?;
    m.add_class::<broker::PyBroker>()?;
    m.add_class::<broker::PySubscription>()?;
    m.add_class::<broker::PyPending>()?;
    m.add_class::<gate::PyGate>()?;
    m.add_function(wrap_pyfunction!(check::check_file, m)?)?;
    m.add_function(wrap_pyfunction!(check::check_network, m)?)?;
    m.add_function(wrap_pyfunction!(check::plan_spawn, m)?)?;
    m.add_function(wrap_pyfunction!(check::filter_env, m)?)?;
    m.add_function(wrap_pyfunction!(check::parse_command_line, m)?)?;
    m.add_function(wrap_pyfunction!(check::evaluate, m)?)?;
    m.add_class::<PyPolicy>()?;
    m.add_function(wrap_pyfunction!(resolve, m)?)?;
    m.add_function(wrap_pyfunction!(intersect, m)?)?;
    m.add_function(wrap_pyfunction!(cap_from_parent, m)?)?;
    m.add_function(wrap_pyfunction!(ensure_native_shell_allowed, m)?)?;
    m.add_function(wrap_pyfunction!(render_permissions_section, m)?)?;
    m.add_function(wrap_pyfunction!(map_cli_runtime, m)?)?;
    m.add_function(wrap_pyfunction!(probe_platform, m)?)?;
    m.add_function(wrap_pyfunction!(schema, m)?)?;
    m.add_function(wrap_pyfunction!(schema_names, m)?)?;
    m.add_function(wrap_pyfunction!(reduce, m)?)?;
    m.add_function(wrap_pyfunction!(reduce_all, m)?)?;
    m.add_function(wrap_pyfunction!(scope_from_action, m)?)?;
    m.add_function(wrap_pyfunction!(scope_hash, m)?)?;
    m.add_function(wrap_pyfunction!(parse_change_set, m)?)?;
    m.add_function(wrap_pyfunction!(version, m)?)?;
    // The guarded tools' helpers (issue 19; turngate/_tools.py).
    m.add_function(wrap_pyfunction!(tools::_fetch_done, m)?)?;
    m.add_function(wrap_pyfunction!(tools::_fetch_failed, m)?)?;
    m.add_function(wrap_pyfunction!(aio::_shutdown, m)?)?;
    m.add_function(wrap_pyfunction!(tools::_default_store_path, m)?)?;
    m.add_function(wrap_pyfunction!(tools::_turn_snapshot, m)?)?;
    Ok(())
}
