#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod approver;
pub mod broker;
pub mod c_api;
pub mod changes;
pub mod check;
mod convert;
mod error;
pub mod gate;
pub mod policy;
pub mod reduce;
pub mod runtime;
pub mod snapshot;
pub mod store;
pub mod tools;
#[cfg(feature = "uniffi")]
pub mod uniffi_api;
pub mod wire;

#[cfg(feature = "uniffi")]
uniffi::setup_scaffolding!("turngate");

pub use approver::{
    ApprovalAskRecord, ApproverHandle, DecisionRecord, ForeignApprover, ForeignDecisionFuture,
};
pub use broker::{BrokerHandle, PendingHandle, SubscriptionHandle};
pub use changes::{ApplyOptionsRecord, ChangeSetSummaryRecord};
pub use check::{EvaluationRecord, InvocationRecord};
pub use error::TurnGateError;
pub use gate::{
    AuthorizationRecord, DenialRecord, GateHandle, OpenRecord, ProcessOutcomeRecord, SpawnRecord,
};
pub use policy::{ActionRecord, PolicyHandle, RuleRecord, VerdictRecord, parse_effect, parse_kind};
pub use store::StoreHandle;
pub use turngate::{ActionKind, Effect};

/// The version of the turngate core this facade wraps.
pub fn version() -> &'static str {
    env!("CARGO_PKG_VERSION")
}
