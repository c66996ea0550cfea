//! `check` against Cedar's `is_authorized` and a bare globset match, on the one policy of
//! [`crate::policy`], each compiled once, each asked the same prepared requests, interleaved.

use std::str::FromStr;
use std::time::Duration;

use cedar_policy::{
    Authorizer, Context, Decision, Entities, EntityUid, PolicySet, Request, RestrictedExpression,
};
use globset::{Glob, GlobSet, GlobSetBuilder};
use turngate::{Action, ActionKind, CompiledPolicy, Effect};

use crate::policy::{self, Case};
use crate::timing::{Contestant, interleave};

/// The same request for Cedar: principal, action and resource are fixed entities; the target
/// is a context attribute the policies' `like` patterns test.
fn cedar_request(case: &Case) -> Request {
    let key = if case.kind == ActionKind::ShellCommand {
        "program"
    } else {
        "path"
    };
    let context = Context::from_pairs([(
        key.to_owned(),
        RestrictedExpression::new_string(case.matched.to_owned()),
    )])
    .expect("context");
    let uid = |s: &str| EntityUid::from_str(s).expect("entity uid");
    Request::new(
        uid(r#"Agent::"agent""#),
        uid(&format!(r#"Action::"{}""#, case.kind.as_str())),
        uid(r#"Target::"target""#),
        context,
        None,
    )
    .expect("cedar request")
}

fn globset(kind: ActionKind) -> GlobSet {
    let mut b = GlobSetBuilder::new();
    for g in policy::globs(kind) {
        // globset's default: `*` crosses `/`, as in turngate's patterns and Cedar's `like`.
        b.add(Glob::new(&g).expect("glob"));
    }
    b.build().expect("globset")
}

/// turngate's effect for `case`, as the bench calls it.
fn turngate_effect(case: &Case, action: &Action, compiled: &CompiledPolicy) -> Effect {
    if case.program_only {
        compiled.explain_program(&action.target, None).effect
    } else {
        compiled.check(action)
    }
}

/// The three forms decide `case` as expected: otherwise they are not the same policy and the
/// comparison means nothing.
fn verify(case: &Case, compiled: &CompiledPolicy, cedar: &PolicySet) {
    let action = Action::new(case.kind, case.target);
    assert_eq!(
        turngate_effect(case, &action, compiled),
        case.turngate,
        "turngate on {}",
        case.id
    );
    let decision = Authorizer::new()
        .is_authorized(&cedar_request(case), cedar, &Entities::empty())
        .decision();
    assert_eq!(
        decision == Decision::Allow,
        case.cedar_allows,
        "cedar on {}",
        case.id
    );
    assert_eq!(
        globset(case.kind).is_match(case.matched),
        case.hit,
        "globset on {}",
        case.id
    );
}

/// Measure every case; returns the JSON rows.
pub fn run(rounds: usize) -> serde_json::Value {
    let compiled = policy::turngate().compile().expect("turngate policy");
    let cedar_policies = PolicySet::from_str(&policy::cedar()).expect("cedar policies");
    let entities = Entities::empty();
    let authorizer = Authorizer::new();
    let cases = policy::cases();

    let mut contestants = Vec::new();
    let mut meta = Vec::new();
    for case in &cases {
        let action = Action::new(case.kind, case.target);
        let case_copy = case.clone();
        let check = move |compiled: &CompiledPolicy| turngate_effect(&case_copy, &action, compiled);
        verify(case, &compiled, &cedar_policies);
        let request = cedar_request(case);
        let set = globset(case.kind);

        let (compiled, cedar_policies, entities, authorizer) =
            (&compiled, &cedar_policies, &entities, &authorizer);
        contestants.push(Contestant::new(
            format!("turngate/{}", case.id),
            move || check(compiled),
        ));
        contestants.push(Contestant::new(format!("cedar/{}", case.id), move || {
            authorizer
                .is_authorized(&request, cedar_policies, entities)
                .decision()
        }));
        let set_is_match = set.clone();
        let matched = case.matched;
        contestants.push(Contestant::new(
            format!("globset_is_match/{}", case.id),
            move || set_is_match.is_match(matched),
        ));
        let mut hits = Vec::with_capacity(4);
        contestants.push(Contestant::new(
            format!("globset_matches_into/{}", case.id),
            move || {
                set.matches_into(matched, &mut hits);
                hits.first().copied()
            },
        ));
        meta.push(case.clone());
    }
    let series = interleave(&mut contestants, rounds, Duration::from_millis(4));
    let find = |name: String| {
        series
            .iter()
            .find(|s| s.name == name)
            .expect("series")
            .clone()
    };
    let rows: Vec<serde_json::Value> = meta
        .iter()
        .map(|case| {
            let tg = find(format!("turngate/{}", case.id));
            let cedar = find(format!("cedar/{}", case.id));
            let floor = find(format!("globset_is_match/{}", case.id));
            let floor_all = find(format!("globset_matches_into/{}", case.id));
            serde_json::json!({
                "case": case.id,
                "kind": case.kind.as_str(),
                "target": case.target,
                "matched": case.matched,
                "hit": case.hit,
                "program_only": case.program_only,
                "iters_per_round": { "turngate": tg.iters, "cedar": cedar.iters, "globset": floor.iters },
                "turngate_ns": tg.spread().json(),
                "cedar_ns": cedar.spread().json(),
                "globset_is_match_ns": floor.spread().json(),
                "globset_matches_into_ns": floor_all.spread().json(),
                "ratio_to_cedar": tg.ratio_to(&cedar).json(),
                "ratio_to_globset_is_match": tg.ratio_to(&floor).json(),
                "ratio_to_globset_matches_into": tg.ratio_to(&floor_all).json(),
            })
        })
        .collect();
    serde_json::json!({
        "rounds": rounds,
        "rules": policy::WRITE_RULES + policy::READ_RULES + policy::COMMAND_RULES,
        "cases": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bench's one policy in its three forms decides every case alike (nothing is timed).
    #[test]
    fn the_three_forms_are_one_policy() {
        let compiled = policy::turngate().compile().expect("turngate policy");
        let cedar = PolicySet::from_str(&policy::cedar()).expect("cedar policies");
        assert_eq!(cedar.policies().count(), 101);
        for case in policy::cases() {
            verify(&case, &compiled, &cedar);
        }
    }
}
