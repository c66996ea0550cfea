//! Facade errors as native JavaScript errors. The package's `index.js` defines the classes
//! (`TurnGateError` and one subclass per facade variant) and registers a factory once at load;
//! every fallible call builds its error through that factory, so a caller gets a real
//! `PolicyError` instance with a `code` naming the facade's variant and the variant's fields.
//! Nothing here decides what is an error: that is the facade's `TurnGateError`.

use std::future::Future;

use napi::bindgen_prelude::{
    FnArgs, FromNapiValue, Function, FunctionRef, Promise, PromiseRaw, ToNapiValue, Unknown,
};
use napi::{Env, Status, ValueType};
use serde_json::{Map, Value};
use turngate_ffi::TurnGateError;

/// `(code, message, details) => Error`, registered by `index.js`.
type Factory = FunctionRef<FnArgs<(&'static str, String, Value)>, Unknown<'static>>;

/// `(fn) => async (ask) => Decision`, registered by `index.js`: normalizes a JavaScript
/// approver's answers and turns its exceptions and rejections into denials.
pub type WrapApprover = FunctionRef<
    Function<'static, Unknown<'static>, Unknown<'static>>,
    Function<'static, Value, Promise<crate::approver::Decision>>,
>;

/// The package's JavaScript hooks, one set per Node environment (worker).
pub struct Hooks {
    make_error: Factory,
    /// The approver normalizer.
    pub wrap_approver: WrapApprover,
}

/// Registers the JavaScript hooks: the error factory that turns a facade error into an instance
/// of the package's error classes, and the approver normalizer. Called once by `index.js`; not
/// part of the public API.
#[napi_derive::napi(skip_typescript)]
pub fn set_hooks(env: Env, make_error: Factory, wrap_approver: WrapApprover) -> napi::Result<()> {
    env.set_instance_data(
        Hooks {
            make_error,
            wrap_approver,
        },
        (),
        |_| {},
    )
}

/// The registered hooks of this environment.
pub fn hooks(env: &Env) -> Option<&'static Hooks> {
    env.get_instance_data::<Hooks>().ok().flatten().map(|h| &*h)
}

/// The variant's actionable fields, as properties of the JavaScript error.
fn details_of(e: &TurnGateError) -> Value {
    let mut d = Map::new();
    match e {
        TurnGateError::Policy {
            path, line, column, ..
        } => {
            d.insert("path".into(), path.clone().into());
            d.insert("line".into(), (*line).into());
            d.insert("column".into(), (*column).into());
        }
        TurnGateError::Snapshot { code, .. } => {
            d.insert("snapshotCode".into(), code.clone().into());
        }
        TurnGateError::Changes { code, paths, .. } => {
            d.insert("changesCode".into(), code.clone().into());
            d.insert("paths".into(), paths.clone().into());
        }
        _ => {}
    }
    Value::Object(d)
}

/// The JavaScript error for a facade error. If the factory is missing or fails (it never
/// should), a plain `Error` whose `code` is the variant name is thrown instead.
pub fn js_error(env: &Env, e: TurnGateError) -> napi::Error {
    let code = e.kind();
    let message = e.message().to_owned();
    let built = hooks(env)
        .and_then(|h| h.make_error.borrow_back(env).ok())
        .and_then(|f| f.call((code, message.clone(), details_of(&e)).into()).ok());
    match built {
        Some(obj) => napi::Error::from(obj),
        None => napi::Error::new(Status::GenericFailure, format!("{code}: {message}")),
    }
}

/// A facade record as a JavaScript object: its JSON form with camelCase field names
/// (`turngate_ffi::wire`), the same fields as in every language.
pub fn record<T: serde::Serialize>(env: &Env, value: &T) -> napi::Result<Value> {
    turngate_ffi::wire::to_camel_value("result", value).or_throw(env)
}

/// An options record (an `Invocation`, ...) from a camelCase object; unknown fields throw.
pub fn options<T: serde::de::DeserializeOwned>(
    env: &Env,
    what: &str,
    value: Value,
) -> napi::Result<T> {
    turngate_ffi::wire::from_camel_value(what, value).or_throw(env)
}

/// An optional object argument of a `#[napi(object)]` type. napi-rs reads such an argument's
/// properties from whatever value it is given (a number or a string has none, so every option
/// would quietly be absent); anything but an object, `undefined` or `null` throws
/// `InvalidInput` here instead.
pub fn object_arg<T: FromNapiValue>(
    env: &Env,
    what: &str,
    value: Option<Unknown<'_>>,
) -> napi::Result<Option<T>> {
    let Some(value) = value else { return Ok(None) };
    match value.get_type()? {
        ValueType::Undefined | ValueType::Null => Ok(None),
        // SAFETY: `value` is a live argument of the current call, converted before it returns.
        ValueType::Object => unsafe { value.cast::<T>() }.map(Some),
        other => Err(js_error(
            env,
            TurnGateError::invalid(what, &format!("expected an object, not {other}")),
        )),
    }
}

/// `Result<T, TurnGateError>` to a napi result, building the native error.
pub trait OrThrow<T> {
    /// Map the error through [`js_error`].
    fn or_throw(self, env: &Env) -> napi::Result<T>;
}

impl<T> OrThrow<T> for Result<T, TurnGateError> {
    fn or_throw(self, env: &Env) -> napi::Result<T> {
        self.map_err(|e| js_error(env, e))
    }
}

/// Run `fut` on the addon's runtime and settle a Promise with its converted result; a facade
/// error rejects it with the native error class. The JavaScript thread never waits, and an
/// environment torn down first cancels `fut` instead (see [`crate::settle`]).
pub fn promise<'env, T, V, F, C>(
    env: &'env Env,
    fut: F,
    convert: C,
) -> napi::Result<PromiseRaw<'env, V>>
where
    T: Send + 'static,
    V: ToNapiValue,
    F: Future<Output = Result<T, TurnGateError>> + Send + 'static,
    C: FnOnce(&Env, T) -> napi::Result<V> + 'static,
{
    crate::settle::promise(env, fut, convert)
}

/// Run the blocking `work` (SQLite, the file system) on the runtime's blocking pool and settle
/// a Promise with its converted result. A panic in `work` rejects with `StoreError`.
pub fn blocking<'env, T, V, W, C>(
    env: &'env Env,
    work: W,
    convert: C,
) -> napi::Result<PromiseRaw<'env, V>>
where
    T: Send + 'static,
    V: ToNapiValue,
    W: FnOnce() -> Result<T, TurnGateError> + Send + 'static,
    C: FnOnce(&Env, T) -> napi::Result<V> + 'static,
{
    let fut = async move {
        tokio::task::spawn_blocking(work).await.unwrap_or_else(|e| {
            Err(TurnGateError::Store {
                message: format!("the store task failed: {e}"),
            })
        })
    };
    promise(env, fut, convert)
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks").finish_non_exhaustive()
    }
}
