//! The blocking runtime: for a binding whose callers wait for an answer on their own thread (the
//! C ABI, and any synchronous form of an async call), the facade's async calls run to completion
//! on one shared tokio runtime while the calling thread blocks. It decides nothing.

use std::future::Future;
use std::sync::OnceLock;

use tokio::runtime::{Builder, Handle, Runtime};

use crate::TurnGateError;

static RUNTIME: OnceLock<Result<Runtime, String>> = OnceLock::new();

/// The shared runtime (two workers, started on first use); `what` names the call in an error.
pub fn runtime(what: &str) -> Result<&'static Runtime, TurnGateError> {
    RUNTIME
        .get_or_init(|| {
            Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("turngate-rt")
                .enable_all()
                .build()
                .map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| TurnGateError::Run {
            message: format!("{what}: turngate could not start its runtime: {e}"),
        })
}

/// Runs the facade call `fut` (named `what` in errors) to completion on the shared runtime,
/// blocking the calling thread. Refuses on a thread that already runs a tokio runtime (an
/// approver callback, an async Rust host): blocking there could stall the very tasks awaited.
pub fn block_on<T>(
    what: &str,
    fut: impl Future<Output = Result<T, TurnGateError>>,
) -> Result<T, TurnGateError> {
    if Handle::try_current().is_ok() {
        return Err(TurnGateError::InvalidInput {
            message: format!(
                "{what} blocks until decided and was called on a thread that runs an async \
                 runtime (an approver callback, or an async host); call it from another thread"
            ),
        });
    }
    runtime(what)?.block_on(fut)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn blocking_refuses_inside_a_runtime_and_runs_outside() {
        assert_eq!(block_on("outside", async { Ok(7) }).ok(), Some(7));
        let rt = Builder::new_current_thread().build().unwrap();
        let inside = rt.block_on(async { block_on("tg_gate_test", async { Ok(7) }) });
        let e = inside.err().unwrap();
        assert_eq!(e.kind(), "InvalidInput");
        assert!(e.message().contains("tg_gate_test"), "{}", e.message());
    }
}
