//! Checkers: the resource boundary, judged before any side effect.
//!
//! [`FilePolicyChecker`] judges paths, [`NetworkPolicyChecker`] judges URLs and `host:port`
//! targets, and [`ProcessSpawnPlan`] turns a command line into a plan a process runner can
//! execute (or a verdict that it must not). Each combines the turn's snapshot parts with the
//! compiled policy and returns a [`Verdict`](crate::Verdict): the strictest of the boundary's
//! own answer and the policy's. They fail closed: any error, malformed input or
//! unresolvable construct is a deny (or, for shell constructs, an ask at least). They never
//! ask a person and never write an audit row; that is the gate's job.

pub mod env;
pub mod file;
pub mod net;
pub mod process;

pub use env::{DropReason, DroppedVar, FilteredEnv, filter_env};
pub use file::{FILESYSTEM_LAYER, FileCheck, FilePolicyChecker, OpenError};
pub use net::{
    AddressClass, DownloadCheck, NETWORK_LAYER, NetworkCheck, NetworkPolicyChecker,
    NetworkResolution, Resolver, SystemResolver,
};
pub use process::{CommandVerdict, PROCESS_LAYER, ProcessSpawnPlan, SpawnRequest};
