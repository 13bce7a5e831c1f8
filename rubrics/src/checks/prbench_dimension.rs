//! `prbench_dimension`: one of a PRBench task's grading dimensions (free-form name, weight and
//! description), judged the way PRBench judges it: the judge reads the task's ground truth
//! (metadata, reference data, reference code: held out, never the agent's) beside the agent's
//! deliverables, and scores the dimension from 0 to 1. What PRBench lacks, the judge is also
//! shown: the results of every deterministic grader that ran before (CSV comparisons per
//! figure, deliverables, forbidden libraries), as evidence.
//!
//! PRBench's banned-library rule is applied by us, not only asked of the judge: when a
//! `forbidden_api` grader found a banned library and the dimension has a `banned_cap` (PRBench:
//! `code_correctness`, 0.2), the judge's score is capped there. A dimension none of whose
//! deliverables exists scores 0 without asking the judge (nothing to judge).

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::checks::judged::{agent_files, ask, no_judge, workspace_listing};
use crate::checks::{CheckSpec, Locate, PathField, Problem, Run};
use crate::env::{Env, FileRead, Outcome, tryf};
use crate::judge::{AgentFile, JudgeRequest, ScoreScale};
use crate::report::{GraderResult, cap_text};
use crate::status::Status;

/// Bytes of one held-out reference file shown to the judge.
const REFERENCE_FILE_CAP: usize = 64 * 1024;
/// Bytes of all reference files together.
const REFERENCE_CAP: usize = 512 * 1024;
/// What [`agent_files`] puts in place of a file that does not exist.
const MISSING: &str = "[this file does not exist]";

/// One PRBench grading dimension judged with the ground truth and our evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrbenchDimension {
    /// The dimension's name as the task wrote it (`methodology_understanding`, `correctness`, ...).
    pub name: String,
    /// Its weight as the task wrote it (shown to the judge, as PRBench's rubric shows it).
    pub weight: f64,
    /// What the dimension asks (the task's `description`).
    #[serde(default)]
    pub description: String,
    /// The paper (`"title" by author`), for the judge's question.
    #[serde(default)]
    pub paper: String,
    /// Code-only mode: the agent was told not to run its code nor to produce data.
    #[serde(default)]
    pub code_only: bool,
    /// Ground truth the judge reads (held out): metadata, reference data and code.
    #[serde(default)]
    pub hidden_references: Vec<String>,
    /// The agent's deliverables shown to the judge, relative to `/workspace`.
    #[serde(default)]
    pub outputs: Vec<String>,
    /// Highest score when a `forbidden_api` grader of the task found a banned library.
    #[serde(default)]
    pub banned_cap: Option<f64>,
}

impl CheckSpec for PrbenchDimension {
    fn kind(&self) -> &'static str {
        "prbench_dimension"
    }
    fn held_out_paths(&self) -> Vec<PathField<'_>> {
        PathField::all("hidden_references", &self.hidden_references).collect()
    }
    fn output_paths(&self) -> Vec<PathField<'_>> {
        PathField::all("outputs", &self.outputs).collect()
    }
    fn validate(&self) -> Vec<Problem> {
        let mut out = Vec::new();
        if self.name.trim().is_empty() {
            out.push(Problem::new("name", Locate::Check, "the dimension has no name"));
        }
        if !(self.weight.is_finite() && self.weight >= 0.0) {
            out.push(Problem::new(
                "weight",
                Locate::Key,
                format!("{} is not a non-negative weight", self.weight),
            ));
        }
        if let Some(c) = self.banned_cap
            && !(0.0..=1.0).contains(&c)
        {
            out.push(Problem::new(
                "banned_cap",
                Locate::Key,
                format!("{c} is not a score in [0, 1]"),
            ));
        }
        out
    }
}

#[async_trait]
impl Run for PrbenchDimension {
    fn reads_evidence(&self) -> bool {
        true
    }
    async fn run(&self, env: &Env<'_, '_>) -> Outcome {
        let evidence: Vec<GraderResult> = env
            .evidence
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .filter(|r| r.kind != self.kind())
            .cloned()
            .collect();
        let banned: Vec<&GraderResult> = evidence
            .iter()
            .filter(|r| r.kind == "forbidden_api" && r.status == Status::ForbiddenApi)
            .collect();
        let files = tryf!(agent_files(env, &self.outputs).await);
        if !files.is_empty() && files.iter().all(|f| f.content == MISSING) {
            let why = format!(
                "none of the deliverables exists ({}); not sent to the judge",
                self.outputs.join(", ")
            );
            let mut o = Outcome::new(Status::Fail, 0.0).detail(why.clone());
            o.data = Some(serde_json::json!({"score": 0.0, "justification": why, "paper": self.paper}));
            return o;
        }
        if env.ctx.judge.is_none() {
            return no_judge();
        }
        let reference = tryf!(self.references(env).await);
        let listing = tryf!(workspace_listing(env).await);
        let request = self.request(reference, files, listing, &evidence, !banned.is_empty());
        let mut outcome = match ask(env, &request).await {
            Ok(v) => {
                let mut o = Outcome::new(
                    if v.score >= 1.0 {
                        Status::Pass
                    } else {
                        Status::Fail
                    },
                    v.score,
                )
                .detail(format!("judge: {}", v.justification));
                o.data = serde_json::to_value(&v).ok().map(|mut d| {
                    d["paper"] = self.paper.clone().into();
                    d
                });
                o
            }
            Err(f) => {
                let mut o = Outcome::new(f.status, 0.0).detail(format!("judge: {}", f.reason));
                o.data = serde_json::to_value(&f).ok();
                return o;
            }
        };
        if let Some(cap) = self.banned_cap
            && !banned.is_empty()
            && outcome.score > cap
        {
            outcome.score = cap;
            outcome.status = Status::Fail;
            outcome = outcome.detail(format!(
                "capped at {cap}: a banned library is used ({})",
                banned.iter().map(|r| r.name.as_str()).collect::<Vec<_>>().join(", ")
            ));
        }
        outcome
    }
}

impl PrbenchDimension {
    /// The held-out ground truth, each file capped, all together capped.
    async fn references(&self, env: &Env<'_, '_>) -> Result<String, crate::env::Fault> {
        let mut text = String::new();
        for rel in &self.hidden_references {
            if text.len() >= REFERENCE_CAP {
                text.push_str(&format!("\n== {rel} ==\n[not shown: the references are larger than {REFERENCE_CAP} bytes]\n"));
                continue;
            }
            let body = match env.read_file(&env.hidden(rel), REFERENCE_FILE_CAP).await? {
                FileRead::Bytes(b) => String::from_utf8_lossy(&b).into_owned(),
                FileRead::TooLarge => {
                    format!("[larger than {REFERENCE_FILE_CAP} bytes; not shown]")
                }
                FileRead::Missing => "[missing]".into(),
            };
            text.push_str(&format!("\n== {rel} ==\n{}\n", body.trim_end()));
        }
        Ok(text)
    }

    /// The question: PRBench's rubric entry for this dimension, its rules, our evidence.
    fn request(
        &self,
        reference: String,
        mut files: Vec<AgentFile>,
        listing: Vec<String>,
        evidence: &[GraderResult],
        banned: bool,
    ) -> JudgeRequest {
        let mode = if self.code_only {
            "The agent was asked to write the code only (code-only mode): it was told not to run \
its simulations nor to produce data files; judge the code by reading it."
        } else {
            "The agent was asked to analyse the paper, implement the method and run its code to \
produce the expected data files."
        };
        let mut instruction = format!(
            "A paper-reproduction attempt{} is graded on ONE dimension of its rubric.\n{mode}\n\n\
DIMENSION: {} (weight {})\n{}\n\n\
Compare the agent's files with the REFERENCE (ground truth: metadata with the formulas, \
parameters and banned libraries, reference data, reference code). Numerical results within \
about 10% of the reference count as reproduced for deterministic computations, within about 30% \
for Monte Carlo results; check column names, row counts and value ranges. Flag bugs that would \
give wrong results. If the agent's code uses a library the metadata bans, code correctness is \
at most 0.2.",
            if self.paper.is_empty() {
                String::new()
            } else {
                format!(" of {}", self.paper)
            },
            self.name,
            self.weight,
            self.description.trim()
        );
        if !evidence.is_empty() {
            instruction.push_str(
                "\n\nDETERMINISTIC EVIDENCE (computed by the benchmark from the agent's files; \
details in the evidence data below):\n",
            );
            let passed = evidence.iter().filter(|r| r.status == Status::Pass).count();
            for r in evidence {
                instruction.push_str(&format!(
                    "- {} ({}): {}{}\n",
                    cap_text(&r.name, 200),
                    r.kind,
                    r.status,
                    r.score.map(|s| format!(", score {s:.3}")).unwrap_or_default()
                ));
            }
            instruction.push_str(&format!(
                "{passed} of {} deterministic checks pass.\n",
                evidence.len()
            ));
            if banned {
                instruction.push_str("A banned library IS used by the agent's code.\n");
            }
            let details: Vec<String> = evidence
                .iter()
                .map(|r| format!("{}:\n{}", r.name, r.details.join("\n")))
                .collect();
            files.push(AgentFile {
                name: "evidence details".into(),
                content: details.join("\n\n"),
            });
        }
        files.push(AgentFile {
            name: "workspace file list".into(),
            content: listing.join("\n"),
        });
        JudgeRequest {
            instruction,
            reference: Some(reference),
            files,
            scale: ScoreScale::Unit,
        }
    }
}
