//! Facade records to and from JavaScript values: their JSON forms with camelCase field names
//! (`turngate_ffi::wire`), the same fields as in every language. No per-field code here.

use napi::Env;
use napi::ValueType;
use napi::bindgen_prelude::{FromNapiValue, Unknown};
use serde_json::Value;
use turngate_ffi::TurnGateError;

use crate::error::{OrThrow, js_error};

/// A facade record as a JavaScript object: its JSON form with camelCase field names
/// (`turngate_ffi::wire`), the same fields as in every language.
pub fn record<T: serde::Serialize>(env: &Env, value: &T) -> napi::Result<Value> {
    turngate_ffi::wire::to_camel_value("result", value).or_throw(env)
}

/// A facade record straight as a JavaScript value ([`crate::ser`], field names camelCased on
/// the way): the same object as [`record`] builds, with no JSON in between.
pub fn js_record<'env, T: serde::Serialize>(
    env: &'env Env,
    value: &T,
) -> napi::Result<Unknown<'env>> {
    let value = crate::ser::to_js(env, &turngate_ffi::wire::Camel(value))?;
    // SAFETY: `value` was just created in `env`'s current scope.
    Ok(unsafe { Unknown::from_raw_unchecked(env.raw(), value) })
}

/// An options record (an `Invocation`, ...) from a camelCase object; unknown fields throw.
pub fn options<T: serde::de::DeserializeOwned>(
    env: &Env,
    what: &str,
    value: Value,
) -> napi::Result<T> {
    turngate_ffi::wire::from_camel_value(what, value).or_throw(env)
}

/// An optional options record: `undefined` and `null` are its defaults.
pub fn options_or_default<T: serde::de::DeserializeOwned + Default>(
    env: &Env,
    what: &str,
    value: Option<Value>,
) -> napi::Result<T> {
    crate::snapshot::opt(value).map_or_else(|| Ok(T::default()), |v| options(env, what, v))
}

/// A Promise's converter for a result that is already a JavaScript value.
pub fn same<V>(_: &Env, value: V) -> napi::Result<V> {
    Ok(value)
}

/// A Promise's converter for a facade record ([`record`]).
pub fn owned_record<T: serde::Serialize>(env: &Env, value: T) -> napi::Result<Value> {
    record(env, &value)
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
            TurnGateError::invalid(what, format!("expected an object, not {other}")),
        )),
    }
}
