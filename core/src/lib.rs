#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod action;
pub mod check;
pub mod error;
pub mod policy;
pub mod protocol;
pub mod shell;
pub mod verdict;

pub use action::{Action, ActionKind, Effect};
pub use error::PolicyError;
pub use policy::{CompiledPolicy, Defaults, Layer, PermissionMode, Policy, Rule, TieredOptions};
pub use verdict::{Reason, Verdict};
