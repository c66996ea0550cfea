//! Policy tooling (DESIGN §17): `lint` finds rules that can never take effect, `replay`
//! re-decides a store's recorded decisions under a candidate policy, and `cases` runs a file
//! of expected verdicts. Each uses the one evaluation function the gate enforces with; none
//! of them changes a policy or writes to a store.

pub mod cases;
pub mod lint;
pub mod replay;

pub use cases::{CaseResult, HistoryAction, TestCase, TestFile, TestReport, history_at};
pub use lint::{LintCode, LintFinding, lint};
pub use replay::{Flip, ReplayOptions, ReplayReport, replay, replay_events};
