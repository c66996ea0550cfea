//! Turn-aware rule conditions (`after`, `limit`) and the turn history they are judged against.
//!
//! A condition never reads the clock or the store itself: the caller (the gate, `replay`)
//! hands the compiled policy a [`TurnHistory`] (the turn's allowed actions, oldest first, and
//! the time of the decision). Without one, the history is empty: an `after` rule does not
//! apply yet and a `limit` has seen nothing.

use std::borrow::Cow;
use std::fmt;
use std::num::NonZeroU32;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::action::{ActionKind, Effect};
use crate::audit::{AuditEventKind, TurnPermissionAuditEvent};

/// The condition of an `after` rule: the turn has had an allowed action of `kind` whose target
/// matches `pattern` (a glob, matched exactly as a deny rule of that kind would match it).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct After {
    /// The earlier action's kind.
    pub kind: ActionKind,
    /// Glob on the earlier action's target.
    pub pattern: String,
}

fn ask() -> Effect {
    Effect::Ask
}

fn is_ask(effect: &Effect) -> bool {
    *effect == Effect::Ask
}

/// A rate limit on an allow rule: once the turn had `count` actions matching the rule within
/// the last `per`, the rule's effect is `over` instead of allow.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Limit {
    /// How many matching actions the window allows (at least 1).
    pub count: NonZeroU32,
    /// The sliding window: a number and a unit, `30s`, `10m`, `2h` or `1d`.
    pub per: Window,
    /// The effect past the limit: `ask` (the default) or `deny`.
    #[serde(default = "ask", skip_serializing_if = "is_ask")]
    pub over: Effect,
}

impl Limit {
    /// `count` matching actions per `per`, then ask.
    pub fn new(count: NonZeroU32, per: Window) -> Self {
        Limit {
            count,
            per,
            over: Effect::Ask,
        }
    }
}

/// A window length written as a number and a unit (`s`, `m`, `h`, `d`), such as `10m`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Window {
    amount: u64,
    unit: char,
}

impl Window {
    /// Parse `10m`, `30s`, `2h`, `1d`. The number is at least 1.
    pub fn parse(text: &str) -> Result<Window, String> {
        let bad = || {
            format!(
                "invalid window `{text}`: expected a whole number of at least 1 followed by s, m, h or d (such as \"10m\")"
            )
        };
        let unit = text.chars().last().ok_or_else(bad)?;
        if !matches!(unit, 's' | 'm' | 'h' | 'd') {
            return Err(bad());
        }
        let digits = &text[..text.len() - 1];
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let amount: u64 = digits.parse().map_err(|_| bad())?;
        let window = Window { amount, unit };
        if amount == 0 || window.checked_seconds().is_none() {
            return Err(bad());
        }
        Ok(window)
    }

    fn checked_seconds(&self) -> Option<u64> {
        let per = match self.unit {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            _ => 86_400,
        };
        self.amount
            .checked_mul(per)
            .filter(|s| *s <= i64::MAX as u64 / 1_000_000)
    }

    /// The window in seconds.
    pub fn seconds(&self) -> u64 {
        self.checked_seconds().unwrap_or(0)
    }

    /// The window in microseconds.
    pub fn micros(&self) -> i64 {
        i64::try_from(self.seconds())
            .unwrap_or(0)
            .saturating_mul(1_000_000)
    }
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.amount, self.unit)
    }
}

impl std::str::FromStr for Window {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Window::parse(s)
    }
}

impl Serialize for Window {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Window {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Window::parse(&text).map_err(serde::de::Error::custom)
    }
}

impl JsonSchema for Window {
    fn schema_name() -> Cow<'static, str> {
        "Window".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A window length: a whole number of at least 1 and a unit, s, m, h or d (`10m`).",
            "type": "string",
            "pattern": "^0*[1-9][0-9]*[smhd]$"
        })
    }
}

/// One allowed action of the turn, as turn-aware rules see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnAction {
    /// Its kind.
    pub kind: ActionKind,
    /// Its target as decided (the normalized form the gate recorded).
    pub target: String,
    /// Its tool, when known.
    pub tool: Option<String>,
    /// When it was allowed: microseconds since the Unix epoch.
    pub at_us: i64,
}

/// The turn so far: its allowed actions, oldest first, and the time of the decision being
/// made. Turn-aware rules are judged against it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TurnHistory {
    /// The allowed actions, oldest first.
    pub actions: Vec<TurnAction>,
    /// The time of the decision: microseconds since the Unix epoch.
    pub now_us: i64,
    /// The workspace root, so that a relative `after` or `limit` pattern (`secrets/*`) matches
    /// the absolute targets the gate records, as the file checker matches them.
    pub workspace: Option<String>,
}

/// Microseconds since the Unix epoch of an RFC 3339 timestamp.
pub fn parse_timestamp_us(text: &str) -> Option<i64> {
    let ts: jiff::Timestamp = text.parse().ok()?;
    Some(ts.as_microsecond())
}

/// Now, in microseconds since the Unix epoch.
pub fn now_us() -> i64 {
    jiff::Timestamp::now().as_microsecond()
}

impl TurnHistory {
    /// An empty history at `now_us`.
    pub fn at(now_us: i64) -> Self {
        TurnHistory {
            actions: Vec::new(),
            now_us,
            workspace: None,
        }
    }

    /// The allowed actions recorded in `events` (one `decision_allowed` row per action that
    /// was allowed, by policy, a cached grant or an approval), oldest first. A row without a
    /// kind, a target or a readable timestamp is skipped.
    pub fn from_events<'a>(events: impl IntoIterator<Item = &'a TurnPermissionAuditEvent>) -> Self {
        let mut history = TurnHistory::default();
        for event in events {
            if let Some(action) = TurnAction::from_event(event) {
                history.now_us = history.now_us.max(action.at_us);
                history.actions.push(action);
            }
        }
        history
    }

    /// Record one allowed action.
    pub fn push(&mut self, action: TurnAction) {
        self.actions.push(action);
    }
}

impl TurnAction {
    /// The allowed action an audit row records, if it records one.
    pub fn from_event(event: &TurnPermissionAuditEvent) -> Option<TurnAction> {
        if event.kind != AuditEventKind::DecisionAllowed {
            return None;
        }
        Some(TurnAction {
            kind: event.action_kind?,
            target: event.target.clone()?,
            tool: event.tool_name.clone(),
            at_us: parse_timestamp_us(event.timestamp.as_deref()?)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_parse_and_print_back() {
        for (text, seconds) in [("30s", 30), ("10m", 600), ("2h", 7200), ("1d", 86_400)] {
            let w = Window::parse(text).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!((w.seconds(), w.to_string()), (seconds, text.to_owned()));
        }
        for bad in [
            "",
            "m",
            "10",
            "0m",
            "-1m",
            "1.5h",
            "10 m",
            "10M",
            "1w",
            "99999999999999999d",
        ] {
            assert!(Window::parse(bad).is_err(), "{bad}");
        }
    }
}
