//! The checkers for Python: the file and network checkers, the spawn plan, the environment
//! filter, the shell parse and `evaluate`. Results are the facade records as dicts.

use std::sync::Arc;

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyMapping;
use turngate_ffi::check::{self as ffi_check, SpawnPlanRequest};

use crate::gate::invocation;
use crate::{IntoPy, InvalidInput, PyPolicy, from_py, record};

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
    // Any `collections.abc.Mapping` (`os.environ` too) crosses as its items.
    let items = if let Ok(m) = env.cast::<PyMapping>() {
        m.items()?.into_any()
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
    record(py, &p)
}

/// Filter an environment (a mapping or pairs of str or bytes) for a child in `cwd` under
/// inheritance `mode` (`all`, `filtered`, `none`). Returns `{"vars": [{"name", "value"}] (bytes),
/// "dropped": [{"name", "reason"}]}`.
#[pyfunction]
#[pyo3(signature = (env, mode, cwd, untrusted_path_roots=Vec::new()))]
pub(crate) fn filter_env<'py>(
    py: Python<'py>,
    env: &Bound<'py, PyAny>,
    mode: &str,
    cwd: std::path::PathBuf,
    untrusted_path_roots: Vec<String>,
) -> PyResult<Py<PyAny>> {
    let vars = env_arg(Some(env))?;
    let e = ffi_check::filter_env(vars, mode, &cwd.to_string_lossy(), &untrusted_path_roots)
        .py_err(py)?;
    record(py, &e)
}

/// What the shell parser finds in a command line: `{"programs", "unresolved", "plain"}`.
#[pyfunction]
pub(crate) fn parse_command_line(py: Python<'_>, line: &str) -> PyResult<Py<PyAny>> {
    record(py, &ffi_check::parse_command_line(line))
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
