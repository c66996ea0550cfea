#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod c_api;
mod error;
pub mod policy;
pub mod reduce;
pub mod snapshot;
#[cfg(feature = "uniffi")]
pub mod uniffi_api;

#[cfg(feature = "uniffi")]
uniffi::setup_scaffolding!("turngate");

pub use error::TurnGateError;
pub use policy::{ActionRecord, PolicyHandle, RuleRecord, VerdictRecord, parse_effect, parse_kind};
pub use turngate::{ActionKind, Effect};

/// The version of the turngate core this facade wraps.
pub fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}
