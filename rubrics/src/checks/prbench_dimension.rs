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
//!
//! Fabrication is applied by us too: when a `reproduce` grader found `fabricated_data` (the
//! agent's entry script, re-run, does not regenerate the data it submitted, or only copies
//! them) and the dimension is `zero_if_fabricated` (PRBench imports: `code_correctness` and the
//! data dimensions), the dimension is `fabricated_data`, score 0, without asking the judge. The
//! re-run's result is also said in words to every dimension's judge ([`reproduction_note`]).

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
    /// Score 0 (status `fabricated_data`, no judge call) when a `reproduce` grader of the task
    /// found `fabricated_data`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub zero_if_fabricated: bool,
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
        let fabricated: Vec<&GraderResult> = evidence
            .iter()
            .filter(|r| r.kind == "reproduce" && r.status == Status::FabricatedData)
            .collect();
        if self.zero_if_fabricated && !fabricated.is_empty() {
            let why = format!(
                "0: the agent's code does not regenerate the data it submitted ({}: fabricated_data); not sent to the judge",
                fabricated.iter().map(|r| r.name.as_str()).collect::<Vec<_>>().join(", ")
            );
            let mut o = Outcome::new(Status::FabricatedData, 0.0).detail(why.clone());
            o.data = Some(serde_json::json!({"score": 0.0, "justification": why, "paper": self.paper}));
            return o;
        }
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
            for note in evidence.iter().filter_map(reproduction_note) {
                instruction.push_str(&note);
                instruction.push('\n');
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

/// What a `reproduce` grader's result says, in words for the judge (`None`: another kind).
pub fn reproduction_note(r: &GraderResult) -> Option<String> {
    if r.kind != "reproduce" {
        return None;
    }
    let first = r.details.iter().find(|d| !d.starts_with("entry script: "));
    let entry = r
        .details
        .iter()
        .find_map(|d| d.strip_prefix("entry script: "))
        .map(|e| format!(" ({})", cap_text(e, 200)))
        .unwrap_or_default();
    Some(match r.status {
        Status::Pass => format!(
            "REPRODUCTION: the agent's entry script{entry}, re-run by the benchmark without the data files it \
delivered, regenerated them: they match what it submitted."
        ),
        Status::FabricatedData => format!(
            "REPRODUCTION: the agent's entry script{entry}, re-run by the benchmark, does NOT regenerate the data \
it submitted (fabricated_data): the submitted numbers do not come from its code."
        ),
        s if s.is_infrastructure() => format!(
            "REPRODUCTION: the benchmark could not re-run the agent's code ({s}; the benchmark's failure, not \
the agent's): no conclusion."
        ),
        _ if first.is_some_and(|d| d.starts_with(crate::checks::reproduce::NO_ENTRY)) => {
            "REPRODUCTION: the agent delivered no entry script, so its code was not re-run: nothing shows that \
its data files come from its code."
                .to_owned()
        }
        s => format!(
            "REPRODUCTION: the agent's entry script{entry}, re-run by the benchmark, did not regenerate its data \
files ({s}: {}).",
            cap_text(first.map_or("no detail", String::as_str), 600)
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rerun(status: Status, details: &[&str]) -> GraderResult {
        let mut r = GraderResult::outcome(
            "re-run",
            "reproduce",
            "measured_reproduction",
            1.0,
            status,
            if status == Status::Pass { 1.0 } else { 0.0 },
        );
        r.details = details.iter().map(|d| (*d).to_owned()).collect();
        r
    }

    fn dimension() -> PrbenchDimension {
        PrbenchDimension {
            name: "data_accuracy".into(),
            weight: 0.5,
            description: "Does the data match?".into(),
            paper: String::new(),
            code_only: false,
            hidden_references: Vec::new(),
            outputs: Vec::new(),
            banned_cap: None,
            zero_if_fabricated: true,
        }
    }

    #[test]
    fn the_rerun_is_said_in_words() {
        let entry = "entry script: reproduce.py (run as `python3 reproduce.py`)";
        let pass = reproduction_note(&rerun(Status::Pass, &[entry])).expect("note");
        assert!(pass.contains("(reproduce.py (run as `python3 reproduce.py`))"), "{pass}");
        assert!(pass.contains("regenerated them: they match"), "{pass}");
        let fab = reproduction_note(&rerun(
            Status::FabricatedData,
            &[entry, "data/a.csv: regenerated, but only copied"],
        ))
        .expect("note");
        assert!(fab.contains("does NOT regenerate the data it submitted (fabricated_data)"), "{fab}");
        let none = reproduction_note(&rerun(
            Status::Fail,
            &["no entry script delivered (looked for reproduce.sh): the agent's code was not re-run"],
        ))
        .expect("note");
        assert!(none.contains("delivered no entry script"), "{none}");
        let broke = reproduction_note(&rerun(
            Status::Fail,
            &[entry, "`python3 reproduce.py` did not regenerate the outputs: exit 1"],
        ))
        .expect("note");
        assert!(
            broke.contains("did not regenerate its data files (fail: `python3 reproduce.py` did not regenerate the outputs: exit 1)"),
            "{broke}"
        );
        let ours = reproduction_note(&rerun(Status::EnvBroken, &["sandbox failed"])).expect("note");
        assert!(ours.contains("not the agent's"), "{ours}");
        let csv = GraderResult::outcome("data", "csv", "measured_data_accuracy", 1.0, Status::Pass, 1.0);
        assert_eq!(reproduction_note(&csv), None, "only re-runs");
    }

    #[test]
    fn the_judge_is_shown_the_rerun() {
        let csv = GraderResult::outcome("data: a.csv", "csv", "measured_data_accuracy", 1.0, Status::Pass, 1.0);
        let evidence = [
            csv,
            rerun(Status::FabricatedData, &["data/a.csv: the regenerated data differ"]),
        ];
        let req = dimension().request(String::new(), Vec::new(), Vec::new(), &evidence, false);
        assert!(
            req.instruction.contains("- re-run (reproduce): fabricated_data, score 0.000"),
            "{}",
            req.instruction
        );
        assert!(req.instruction.contains("REPRODUCTION: the agent's entry script"));
        assert!(req.instruction.contains("1 of 2 deterministic checks pass."));
        let details = req
            .files
            .iter()
            .find(|f| f.name == "evidence details")
            .expect("details");
        assert!(details.content.contains("the regenerated data differ"));
    }

    #[test]
    fn zero_if_fabricated_is_written_only_when_set() {
        let mut d = dimension();
        d.zero_if_fabricated = false;
        let text = toml::to_string(&d).expect("serialises");
        assert!(!text.contains("zero_if_fabricated"), "{text}");
        let back: PrbenchDimension = toml::from_str(&text).expect("parses");
        assert_eq!(back, d);
    }
}
