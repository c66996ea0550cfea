#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod action;
pub mod approval;
pub mod audit;
pub mod changes;
pub mod check;
pub mod display;
pub mod error;
pub mod gate;
pub mod mcp;
pub mod policy;
pub mod probe;
pub mod protocol;
pub mod reduce;
pub mod sandbox;
pub mod schema;
/// `turngate serve` (Unix: its state files rely on Unix permissions, its socket on Unix
/// domain sockets).
#[cfg(unix)]
pub mod serve;
pub mod shell;
pub mod snapshot;
pub mod tooling;
pub mod verdict;

pub use action::{Action, ActionKind, Effect};
pub use error::PolicyError;
pub use policy::{CompiledPolicy, Defaults, Layer, PermissionMode, Policy, Rule, TieredOptions};
pub use verdict::{Reason, Verdict};

/// The repository README's Rust examples run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
struct RepositoryReadme;
