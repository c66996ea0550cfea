//! The guarded tools for Node (issue 19): `Gate._tool` runs one on the addon's runtime behind a
//! Promise, with a `ToolCall` control object that streams the command's output (`next()`, one
//! Promise per chunk, `null` at the end) and cancels the call (`cancel()`, an `AbortSignal`'s
//! abort: a running command is killed). The tools are the facade's (`turngate_ffi::tools`);
//! `index.js` gives them their JavaScript signatures.

use std::sync::{Arc, Mutex};

use napi::Env;
use napi::bindgen_prelude::{Buffer, PromiseRaw};
use napi_derive::napi;
use serde_json::Value;
use tokio::sync::{mpsc, watch};
use turngate_ffi::TurnGateError;
use turngate_ffi::tools::{OutputSink, ToolStep};

use crate::convert::{owned_record, record, same};
use crate::error::OrThrow;
use crate::gate::Gate;
use crate::settle::{blocking, lock, promise};
use crate::snapshot::opt;

type Chunk = (&'static str, Vec<u8>);

/// One chunk of a command's output.
#[napi(object)]
pub struct OutputChunk {
    /// `stdout` or `stderr`.
    #[napi(ts_type = "'stdout' | 'stderr'")]
    pub stream: String,
    /// The bytes.
    pub chunk: Buffer,
}

impl std::fmt::Debug for OutputChunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputChunk")
            .field("stream", &self.stream)
            .finish_non_exhaustive()
    }
}

/// The control of one guarded tool call (what `runShell`'s `onOutput` and `signal` use): its
/// output as it comes, and its cancellation.
#[napi]
pub struct ToolCall {
    /// The output of the call it controls, once one is attached; `None` before (and then
    /// `next()` is `null`).
    rx: Mutex<Option<Arc<tokio::sync::Mutex<mpsc::UnboundedReceiver<Chunk>>>>>,
    cancel: watch::Sender<bool>,
}

opaque_debug!(ToolCall);

#[napi]
impl ToolCall {
    /// A control for one call.
    #[napi(constructor)]
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        ToolCall {
            rx: Mutex::new(None),
            cancel: watch::channel(false).0,
        }
    }

    /// The next chunk of output, or `null` once the call is over.
    #[napi(ts_return_type = "Promise<OutputChunk | null>")]
    pub fn next<'env>(
        &self,
        env: &'env Env,
    ) -> napi::Result<PromiseRaw<'env, Option<OutputChunk>>> {
        let rx = lock(&self.rx).clone();
        let fut = async move {
            Ok(match rx {
                Some(rx) => rx.lock().await.recv().await,
                None => None,
            })
        };
        promise(env, fut, |_, c: Option<Chunk>| {
            Ok(c.map(|(stream, chunk)| OutputChunk {
                stream: stream.to_owned(),
                chunk: Buffer::from(chunk),
            }))
        })
    }

    /// Cancel the call: a command still running is killed, and the call's Promise rejects.
    #[napi]
    pub fn cancel(&self) {
        self.cancel.send_replace(true);
    }
}

impl ToolCall {
    /// Attach a call: the sink its output goes to (the stream ends when the call drops it).
    fn sink(&self) -> Option<OutputSink> {
        let mut slot = lock(&self.rx);
        if slot.is_some() {
            return None;
        }
        let (tx, rx) = mpsc::unbounded_channel();
        *slot = Some(Arc::new(tokio::sync::Mutex::new(rx)));
        Some(OutputSink(Arc::new(move |stream, chunk: &[u8]| {
            let _ = tx.send((stream.as_str(), chunk.to_vec()));
        })))
    }
}

#[napi]
impl Gate {
    /// Call guarded tool `name` with `args` (camelCase, plus `itemId`, `tool`, `approval`):
    /// a `ToolStep` (`{step: 'done', ...ToolOutcome}`, or for an allowed `fetch_url`
    /// `{step: 'connect', ...}` with the vetted addresses). `data`: `writeFile`'s content or
    /// `runShell`'s stdin as bytes. `control` streams the output and cancels the call. Use
    /// `readFile`, `writeFile`, ... instead.
    #[napi(js_name = "_tool", skip_typescript)]
    pub fn tool<'env>(
        &self,
        env: &'env Env,
        name: String,
        args: Value,
        data: Option<Buffer>,
        control: Option<&ToolCall>,
        stream: bool,
    ) -> napi::Result<PromiseRaw<'env, Value>> {
        let args = camel_args(args).or_throw(env)?;
        let data = data.map(|b| b.to_vec());
        let (sink, mut cancel) = match control {
            Some(c) => (
                if stream { c.sink() } else { None },
                Some(c.cancel.subscribe()),
            ),
            None => (None, None),
        };
        let gate = self.handle();
        let work = async move { gate.call_tool(&name, args, data, sink).await };
        let fut = self.guarded(async move {
            match cancel.as_mut() {
                None => work.await,
                Some(cancel) => tokio::select! {
                    r = work => r,
                    _ = cancel.wait_for(|c| *c) => Err(TurnGateError::invalid(
                        "signal",
                        "the call was aborted",
                    )),
                },
            }
        });
        promise(env, fut, owned_record::<ToolStep>)
    }
}

/// The tool's camelCase arguments with snake_case keys (`approval` keeps its own, both
/// accepted); `null`s left out.
fn camel_args(args: Value) -> Result<Value, TurnGateError> {
    match args {
        Value::Object(map) => Ok(Value::Object(
            map.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (turngate_ffi::wire::snake(&k), v))
                .collect(),
        )),
        Value::Null => Ok(Value::Object(serde_json::Map::new())),
        _ => Err(TurnGateError::invalid("args", "expected an object")),
    }
}

/// `fetchUrl`'s second half: the response of an allowed fetch as a `ToolOutcome`.
#[napi(js_name = "_fetchDone", skip_typescript)]
pub fn fetch_done(
    env: Env,
    url: String,
    status: u32,
    body: Buffer,
    truncated: bool,
    location: Option<String>,
) -> napi::Result<Value> {
    let status = u16::try_from(status).unwrap_or(0);
    record(
        &env,
        &turngate_ffi::tools::fetch_done(&url, status, &body, truncated, location.as_deref()),
    )
}

/// `fetchUrl`'s second half when the connection or exchange failed.
#[napi(js_name = "_fetchFailed", skip_typescript)]
pub fn fetch_failed(env: Env, url: String, error: String) -> napi::Result<Value> {
    record(&env, &turngate_ffi::tools::fetch_failed(&url, &error))
}

/// The default durable store's path (the CLI's); creates its directory (off the event loop).
#[napi(js_name = "_defaultStorePath", skip_typescript)]
pub fn default_store_path(env: &Env) -> napi::Result<PromiseRaw<'_, String>> {
    blocking(env, turngate_ffi::tools::default_store_path, same)
}

/// The snapshot of a one-line turn (the platform probed off the event loop).
#[napi(js_name = "_turnSnapshot", skip_typescript)]
pub fn turn_snapshot(
    env: &Env,
    workspace: String,
    mode: String,
    policy: Option<Value>,
) -> napi::Result<PromiseRaw<'_, Value>> {
    let work = move || turngate_ffi::tools::turn_snapshot(&workspace, &mode, opt(policy));
    blocking(env, work, same)
}
