//! Facade errors as native JavaScript errors. The package's `index.js` defines the classes
//! (`TurnGateError` and one subclass per facade variant) and registers a factory once at load;
//! every fallible call builds its error through that factory, so a caller gets a real
//! `PolicyError` instance with a `code` naming the facade's variant and the variant's fields.
//! Nothing here decides what is an error: that is the facade's `TurnGateError`.

use napi::{Env, Status};
use serde_json::{Map, Value};
use turngate_ffi::TurnGateError;

use crate::hooks::hooks;

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
