//! `turngate test`: a TOML file of cases, each an action and the verdict it must get.
//!
//! ```toml
//! mode = "supervised"          # optional, for every case: the mode's policy
//! policy = "policy.toml"       # optional, for every case: merged over the mode (relative to this file)
//!
//! [[case]]
//! kind = "network"
//! target = "api.example.com:443"
//! expect = "ask"
//! rule = "*"                   # optional: the deciding rule's pattern ("" for none)
//! layer = "exfil"              # optional: the deciding layer
//! history = [{kind = "file_read", target = ".env"}]   # optional: the turn's earlier allowed actions
//! ```
//!
//! A case is judged by the policy's one evaluation function (`explain`, in the case's turn),
//! the same one the gate enforces with; the turn's roots and network settings are
//! `turngate check`'s business.

use std::path::Path;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::action::{Action, ActionKind, Effect};
use crate::error::PolicyError;
use crate::policy::{PermissionMode, Policy, TurnAction, TurnHistory, now_us};
use crate::verdict::Verdict;

/// A test file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TestFile {
    /// The mode whose policy every case uses (unless a case names its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<PermissionMode>,
    /// A policy file merged over the mode (relative to the test file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// The cases.
    #[serde(default, rename = "case")]
    pub cases: Vec<TestCase>,
}

/// An earlier allowed action of a case's turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HistoryAction {
    /// Its kind.
    pub kind: ActionKind,
    /// Its target.
    pub target: String,
    /// Its tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// How long before the case's action it was allowed, in seconds (default 0).
    #[serde(default)]
    pub seconds_ago: u64,
}

/// The turn of `actions` given relative to `now_us` (a test case's or a binding's history).
pub fn history_at(actions: &[HistoryAction], now_us: i64) -> TurnHistory {
    TurnHistory {
        actions: actions
            .iter()
            .map(|h| TurnAction {
                kind: h.kind,
                target: h.target.clone(),
                tool: h.tool.clone(),
                at_us: now_us.saturating_sub(
                    i64::try_from(h.seconds_ago)
                        .unwrap_or(i64::MAX)
                        .saturating_mul(1_000_000),
                ),
            })
            .collect(),
        now_us,
        workspace: None,
    }
}

/// One case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TestCase {
    /// A name for the report (default: `kind target`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The action's kind.
    pub kind: ActionKind,
    /// The action's target.
    pub target: String,
    /// The action's tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The effect it must get.
    pub expect: Effect,
    /// The deciding rule's pattern it must get (`""`: no rule).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// The deciding layer it must get.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layer: Option<String>,
    /// This case's mode (instead of the file's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<PermissionMode>,
    /// This case's policy file (instead of the file's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<String>,
    /// The turn's earlier allowed actions, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<HistoryAction>,
}

/// One case's outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CaseResult {
    /// The case's name.
    pub name: String,
    /// Whether every expectation held.
    pub passed: bool,
    /// The verdict it got.
    pub verdict: Verdict,
    /// Each expectation that did not hold, in words.
    pub failures: Vec<String>,
}

/// A test file's outcome.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TestReport {
    /// How many cases passed.
    pub passed: usize,
    /// How many failed.
    pub failed: usize,
    /// Every case, in file order.
    pub cases: Vec<CaseResult>,
}

impl TestFile {
    /// Parse a test file's TOML text; errors name the field, line and column.
    pub fn from_toml_str(text: &str, origin: Option<&str>) -> Result<TestFile, PolicyError> {
        crate::policy::parse_toml(text, origin)
    }

    /// Read a test file.
    pub fn from_path(path: &Path) -> Result<TestFile, PolicyError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Io {
            path: shown.clone(),
            source,
        })?;
        TestFile::from_toml_str(&text, Some(&shown))
    }

    /// Run every case. `base` is the directory policy paths are relative to; `load` reads a
    /// policy file (so a caller can supply policies it already has).
    pub fn run_with(
        &self,
        load: &dyn Fn(&str) -> Result<Policy, PolicyError>,
    ) -> Result<TestReport, PolicyError> {
        let mut report = TestReport::default();
        for (i, case) in self.cases.iter().enumerate() {
            let mode = case.mode.or(self.mode);
            let file = case.policy.as_deref().or(self.policy.as_deref());
            let policy = match (mode, file) {
                (Some(m), Some(f)) => m.policy().merge(load(f)?),
                (Some(m), None) => m.policy(),
                (None, Some(f)) => load(f)?,
                (None, None) => {
                    return Err(PolicyError::InvalidRule {
                        layer: "-".to_owned(),
                        index: i,
                        pattern: case.target.clone(),
                        message: format!(
                            "case[{i}] has no policy: give `mode` or `policy`, in the case or at the top of the file"
                        ),
                    });
                }
            };
            let compiled = policy.compile()?;
            let turn = history_at(&case.history, now_us());
            let action = Action {
                kind: case.kind,
                target: case.target.clone(),
                tool: case.tool.clone(),
            };
            let verdict = compiled.with_turn(Arc::new(turn)).explain(&action);
            let mut failures = Vec::new();
            if verdict.effect != case.expect {
                failures.push(format!("expected {}, got {}", case.expect, verdict.effect));
            }
            let got_rule = verdict.rule.as_ref().map_or("", |r| r.pattern.as_str());
            if let Some(rule) = &case.rule {
                if rule != got_rule {
                    failures.push(format!("expected rule `{rule}`, got `{got_rule}`"));
                }
            }
            if let Some(layer) = &case.layer {
                if **layer != *verdict.layer {
                    failures.push(format!("expected layer `{layer}`, got `{}`", verdict.layer));
                }
            }
            let passed = failures.is_empty();
            if passed {
                report.passed += 1;
            } else {
                report.failed += 1;
            }
            report.cases.push(CaseResult {
                name: case
                    .name
                    .clone()
                    .unwrap_or_else(|| format!("{} {}", case.kind, case.target)),
                passed,
                verdict,
                failures,
            });
        }
        Ok(report)
    }

    /// Run every case, reading policy files relative to `base`.
    pub fn run(&self, base: &Path) -> Result<TestReport, PolicyError> {
        self.run_with(&|f: &str| Policy::from_path(base.join(f)))
    }
}
