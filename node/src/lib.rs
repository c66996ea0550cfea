//! `turngate-node`: the napi-rs addon behind the `turngate` npm package. It wraps the FFI
//! facade (`turngate-ffi`) thinly: it converts JavaScript values to the facade's types, builds
//! native error classes from the facade's error enum, and bridges Promises and callbacks. It
//! never decides anything itself.
#![warn(missing_docs)]

pub mod error;
pub mod policy;
pub mod snapshot;

pub use policy::{Action, DefaultOptions, Policy, Rule, RuleOptions, Verdict};

/// The version of the turngate core.
#[napi_derive::napi]
pub fn version() -> &'static str {
    turngate_ffi::version()
}
