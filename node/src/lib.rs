//! `turngate-node`: the napi-rs addon behind the `turngate` npm package. It wraps the FFI
//! facade (`turngate-ffi`) thinly: it converts JavaScript values to the facade's types, builds
//! native error classes from the facade's error enum, runs async work (approvals, spawns, the
//! store) on its runtime behind Promises that a torn-down environment (a terminated worker)
//! cancels instead of crashing, and bridges JavaScript approvers through threadsafe
//! functions. It never decides anything itself.
#![warn(missing_docs)]

/// `Debug` by name only, for records that hold JavaScript values or handles.
macro_rules! opaque_debug {
    ($($t:ty),+) => {$(
        impl std::fmt::Debug for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($t)).finish_non_exhaustive()
            }
        }
    )+};
}

pub mod approver;
pub mod broker;
pub mod check;
pub mod convert;
pub mod error;
pub mod gate;
pub mod hooks;
pub mod policy;
pub mod ser;
pub mod settle;
pub mod snapshot;
pub mod store;
pub mod tools;

/// The version of the turngate core.
#[napi_derive::napi]
pub fn version() -> &'static str {
    turngate_ffi::version()
}
