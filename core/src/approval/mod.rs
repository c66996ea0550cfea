//! Approvals: the requests a person sees, the broker that routes them, the approvers that
//! decide programmatically, and `scope_hash`.
//!
//! This module decides how an ask is resolved (first resolution wins, re-checked against the
//! policy, `allow_for_turn` cached by exact scope). It never evaluates rules itself (`policy`
//! does) and never writes audit rows (the gate does, through `audit`).

mod approver;
mod broker;
mod request;
pub(crate) mod scope;

pub use approver::{
    ApprovalContext, ApprovalError, ApprovalResult, ApproveAll, Approver, BrokerApprover, Decision,
    DecisionFuture, DeferAll, DenialSource, DenyAll, RejectedRule, StdinApprover, decide_and_check,
    recheck, resume_with_decision,
};
pub use broker::{
    ApprovalBroker, BrokerError, NotificationStream, PendingApproval, RespondOutcome,
};
pub use request::{
    ApprovalDetailLine, ApprovalDetails, ApprovalNotification, ApprovalOutcome, ApprovalResolution,
    REQUESTED_METHOD, RESOLVED_METHOD, ResolutionSource, TurnPermissionApprovalRequest,
    TurnPermissionApprovalResolved, UnknownResolution, new_request_id,
};
pub use scope::{ApprovalScope, SCOPE_HASH_DOMAIN, ScopeError, ScopeTarget, scope_hash};
