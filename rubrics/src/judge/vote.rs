//! A panel's verdict from its members' answers.
//!
//! Rules: more than half of the panel must answer by the protocol, else the panel fails with the
//! most common failure status. On the binary scale the score is the majority's; an even split is
//! `judge_split` (a status, never a coin toss or a 0). On the unit scale the score is the median
//! of the answers (the value a majority of judges is at or on either side of). Tokens, costs and
//! attempts add up over the members; every member's vote is kept for the report.

use std::collections::BTreeMap;

use super::{JudgeFailure, ScoreScale, Verdict, Vote};
use crate::status::Status;

/// Combines the answers of a panel of `results.len()` judges (one answer per judge).
pub fn majority(
    scale: ScoreScale,
    mut results: Vec<Result<Verdict, JudgeFailure>>,
) -> Result<Verdict, JudgeFailure> {
    if results.len() == 1 {
        return results.remove(0);
    }
    let n = results.len();
    let votes: Vec<Vote> = results.iter().map(Vote::from_result).collect();
    let attempts: u32 = results
        .iter()
        .map(|r| match r {
            Ok(v) => v.attempts,
            Err(f) => f.attempts,
        })
        .sum();
    let valid: Vec<&Verdict> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    let failures: Vec<&JudgeFailure> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    let panel_failure = |status: Status, reason: String| JudgeFailure {
        status,
        reason,
        raw: None,
        attempts,
        model: "panel".into(),
        votes: votes.clone(),
    };
    if valid.len() * 2 <= n {
        let mut counts: BTreeMap<Status, usize> = BTreeMap::new();
        for f in &failures {
            *counts.entry(f.status).or_default() += 1;
        }
        let status = counts
            .iter()
            .max_by_key(|(s, c)| (**c, std::cmp::Reverse(**s)))
            .map_or(Status::JudgeUnavailable, |(s, _)| *s);
        let why: Vec<String> = failures
            .iter()
            .map(|f| format!("{}: {} ({})", f.model, f.status, f.reason))
            .collect();
        return Err(panel_failure(
            status,
            format!(
                "only {} of {n} judges gave a verdict; a majority of the panel must: {}",
                valid.len(),
                why.join("; ")
            ),
        ));
    }
    let score = match scale {
        ScoreScale::Binary => {
            let ones = valid.iter().filter(|v| v.score >= 1.0).count();
            let zeros = valid.len() - ones;
            if ones == zeros {
                return Err(panel_failure(
                    Status::JudgeSplit,
                    format!("the judges split {ones} to {zeros}; no majority"),
                ));
            }
            if ones > zeros { 1.0 } else { 0.0 }
        }
        ScoreScale::Unit => {
            let mut s: Vec<f64> = valid.iter().map(|v| v.score).collect();
            s.sort_by(f64::total_cmp);
            let m = s.len() / 2;
            if s.len() % 2 == 1 {
                s[m]
            } else {
                (s[m - 1] + s[m]) / 2.0
            }
        }
    };
    // The justification of the member closest to the panel's score.
    let speaker = valid
        .iter()
        .min_by(|a, b| (a.score - score).abs().total_cmp(&(b.score - score).abs()))
        .expect("a majority answered");
    let agree = valid.iter().filter(|v| v.score == score).count();
    let costs: Vec<f64> = valid.iter().filter_map(|v| v.cost_usd).collect();
    Ok(Verdict {
        score,
        justification: format!(
            "{agree} of {n} judges gave {score}; {}: {}",
            speaker.model, speaker.justification
        ),
        attempts,
        prompt_tokens: valid.iter().map(|v| v.prompt_tokens).sum(),
        completion_tokens: valid.iter().map(|v| v.completion_tokens).sum(),
        cost_usd: (!costs.is_empty()).then(|| costs.iter().sum()),
        model: "panel".into(),
        votes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yes(model: &str, score: f64) -> Result<Verdict, JudgeFailure> {
        Ok(Verdict {
            score,
            justification: format!("{model} says {score}"),
            attempts: 1,
            prompt_tokens: 100,
            completion_tokens: 10,
            cost_usd: Some(0.01),
            model: model.into(),
            votes: Vec::new(),
        })
    }

    fn no(model: &str, status: Status) -> Result<Verdict, JudgeFailure> {
        Err(JudgeFailure {
            status,
            reason: "broken".into(),
            raw: None,
            attempts: 2,
            model: model.into(),
            votes: Vec::new(),
        })
    }

    /// (scale, members, expected score or status)
    type Case = (
        ScoreScale,
        Vec<Result<Verdict, JudgeFailure>>,
        Result<f64, Status>,
    );

    #[test]
    fn vote_table() {
        use ScoreScale::{Binary, Unit};
        let cases: Vec<Case> = vec![
            (
                Binary,
                vec![yes("a", 1.0), yes("b", 1.0), yes("c", 0.0)],
                Ok(1.0),
            ),
            (
                Binary,
                vec![yes("a", 0.0), yes("b", 1.0), yes("c", 0.0)],
                Ok(0.0),
            ),
            (
                Binary,
                vec![yes("a", 1.0), yes("b", 1.0), no("c", Status::JudgeInvalid)],
                Ok(1.0),
            ),
            (
                Binary,
                vec![yes("a", 1.0), yes("b", 0.0), no("c", Status::JudgeInvalid)],
                Err(Status::JudgeSplit),
            ),
            (
                Binary,
                vec![yes("a", 1.0), yes("b", 0.0)],
                Err(Status::JudgeSplit),
            ),
            (
                Binary,
                vec![yes("a", 1.0), no("b", Status::JudgeUnavailable)],
                Err(Status::JudgeUnavailable),
            ),
            (
                Binary,
                vec![
                    yes("a", 1.0),
                    no("b", Status::JudgeInvalid),
                    no("c", Status::JudgeInvalid),
                ],
                Err(Status::JudgeInvalid),
            ),
            (
                Binary,
                vec![
                    no("a", Status::JudgeInvalid),
                    no("b", Status::JudgeUnavailable),
                    no("c", Status::JudgeUnavailable),
                ],
                Err(Status::JudgeUnavailable),
            ),
            (
                Unit,
                vec![yes("a", 0.2), yes("b", 0.9), yes("c", 0.5)],
                Ok(0.5),
            ),
            (
                Unit,
                vec![yes("a", 0.2), yes("b", 0.6), yes("c", 0.5), yes("d", 1.0)],
                Ok(0.55),
            ),
            (
                Unit,
                vec![
                    yes("a", 0.25),
                    yes("b", 0.75),
                    no("c", Status::JudgeInvalid),
                ],
                Ok(0.5),
            ),
            (
                Unit,
                vec![
                    yes("a", 0.3),
                    no("b", Status::JudgeInvalid),
                    no("c", Status::JudgeInvalid),
                ],
                Err(Status::JudgeInvalid),
            ),
            // A panel of one is that judge, unchanged.
            (
                Binary,
                vec![no("a", Status::JudgeInvalid)],
                Err(Status::JudgeInvalid),
            ),
            (Unit, vec![yes("a", 0.3)], Ok(0.3)),
        ];
        for (i, (scale, members, want)) in cases.into_iter().enumerate() {
            let n = members.len();
            let got = majority(scale, members);
            match (&got, want) {
                (Ok(v), Ok(s)) => {
                    assert!((v.score - s).abs() < 1e-12, "case {i}: {v:?}");
                    assert_eq!(v.votes.len(), if n == 1 { 0 } else { n }, "case {i}");
                }
                (Err(f), Err(st)) => {
                    assert_eq!(f.status, st, "case {i}: {f:?}");
                    assert!(f.status.is_infrastructure(), "case {i}");
                    assert_eq!(f.votes.len(), if n == 1 { 0 } else { n }, "case {i}");
                }
                _ => panic!("case {i}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn usage_and_cost_add_up_and_votes_are_kept() {
        let v = majority(
            ScoreScale::Binary,
            vec![yes("a", 1.0), yes("b", 1.0), no("c", Status::JudgeInvalid)],
        )
        .expect("majority");
        assert_eq!(
            (v.prompt_tokens, v.completion_tokens, v.attempts),
            (200, 20, 4)
        );
        assert!((v.cost_usd.expect("priced") - 0.02).abs() < 1e-12);
        assert!(
            v.justification.starts_with("2 of 3 judges gave 1"),
            "{}",
            v.justification
        );
        assert_eq!(v.votes[2].status, Some(Status::JudgeInvalid));
        assert_eq!(v.votes[0].score, Some(1.0));
        let json = serde_json::to_value(&v).expect("serialise");
        assert_eq!(json["votes"].as_array().map(Vec::len), Some(3));
    }
}
