//! Prompts written by us: PaperBench leaves, SciCoQA discrepancy matching and free-form
//! criteria written by task authors.

use super::{AgentFile, JudgeRequest, ScoreScale};

/// A PaperBench leaf: is this requirement met by the submission?
pub fn paperbench_leaf(
    requirement: &str,
    category: Option<&str>,
    files: Vec<AgentFile>,
) -> JudgeRequest {
    let kind = match category.map(str::to_ascii_lowercase).as_deref() {
        Some("code development") => {
            "Judge whether the submitted code implements it correctly (reading the code is enough; it need not have been run)."
        }
        Some("code execution") => {
            "Judge whether the submission shows that the code was run and produced it (logs, outputs)."
        }
        Some("result analysis") => {
            "Judge whether the submitted results and their analysis match it."
        }
        _ => "Judge whether the submission meets it.",
    };
    JudgeRequest {
        instruction: format!(
            "A paper-reproduction submission is graded against one rubric requirement.\nREQUIREMENT: {}\n{kind}",
            requirement.trim()
        ),
        reference: None,
        files,
        scale: ScoreScale::Binary,
    }
}

/// SciCoQA: does the agent's report identify the reference discrepancy between paper and code?
pub fn discrepancy(reference: &str, report: AgentFile) -> JudgeRequest {
    JudgeRequest {
        instruction: "A reviewer compared a paper with its code and reported discrepancies. \
Score 1 if one of the reported discrepancies is the same as the REFERENCE discrepancy (the same \
place in the code and the same mismatch with the paper, even if worded differently); score 0 if \
none is, or if the report only gestures vaguely at it."
            .into(),
        reference: Some(reference.into()),
        files: vec![report],
        scale: ScoreScale::Binary,
    }
}

/// Free-form criteria written by the task author.
pub fn criteria(criteria: &str, files: Vec<AgentFile>) -> JudgeRequest {
    JudgeRequest {
        instruction: format!(
            "Grade the submission against these criteria; the score is the fraction of the criteria met.\nCRITERIA:\n{}",
            criteria.trim()
        ),
        reference: None,
        files,
        scale: ScoreScale::Unit,
    }
}
