//! SciCode's main setting (`--protocol step-by-step`): one task per main problem, its tested
//! steps delivered one per turn (`[turns]`, see [`crate::turns`]).
//!
//! Upstream asks for one step at a time; the prompt for step k lists the steps before it, each
//! with its description (and background, with `--with-background`) followed by the model's OWN
//! code for it, then the next step's description, function header and return line, then the
//! dependencies. Here each turn's prompt lists the earlier steps' descriptions and shows
//! `solution.py` as the agent left it at the end of the previous turn (the green agent fills it
//! in, [`crate::turns::KEPT_TOKEN`]); the agent adds the step's function to it. Steps upstream
//! does not test (13.6, 62.1, 76.3) are not turns: their code (gold, or upstream's
//! `step_<id>.txt`) is in `solution.py` from the start, as upstream substitutes it, and later
//! prompts say so. Step k is graded on `solution.py` as it was at the end of turn k (the
//! agent's own steps 1..k, in one namespace, as upstream runs them): one `scicode_steps`
//! grader per step reads its turn's copy. A turn that fails ends the trial: the later steps
//! have no copy and score 0. The oracle writes the gold code of steps 1..k in turn k.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rubrics::{Check, GraderSpec, GradingSpec};

use super::{
    CASES_FILE, Problem, SOLUTION_FILE, ScicodeOptions, SubStep, TaskFrame, step_code, step_prompt,
    tested,
};
use crate::import::{ImportError, StageToml, TaskDir, TaskToml, one_dimension};
use crate::spec::{Constraints, TaskKind, TurnsFile};
use crate::turns::{KEPT_TOKEN, snapshot_path};

/// Each turn's budget (seconds); the trial's is this times the number of turns.
pub(super) const TURN_TIMEOUT_SECS: u64 = 1800;

/// `scicode-<problem>`, as in the whole-problem protocol (the protocol is in the metadata).
pub(super) fn task_id(problem: &Problem) -> String {
    super::task_id(problem)
}

/// The cases file of one step (`hidden/`).
fn cases_file(step: &str) -> String {
    let stem = CASES_FILE.trim_end_matches(".json");
    format!("{stem}_{step}.json")
}

/// One task for `problem`, a turn per tested step, from the problem's derived (or published)
/// cases.
pub(super) fn write_task(
    problem: &Problem,
    given: &BTreeMap<String, String>,
    cases: serde_json::Value,
    options: &ScicodeOptions,
    dest: &Path,
) -> Result<PathBuf, ImportError> {
    let frame = TaskFrame::new(problem, &cases, options);
    let id = task_id(problem);
    let dir = TaskDir::create(dest, &id)?;
    let steps: Vec<&SubStep> = tested(problem).collect();
    let mut graders = Vec::new();
    for step in &steps {
        let mut own = cases.clone();
        if let Some(list) = own.get_mut("steps").and_then(|s| s.as_array_mut()) {
            list.retain(|s| s["step_id"] == step.step_number.as_str());
        }
        let graded = own["steps"].as_array().map_or(0, Vec::len);
        if graded != 1 {
            return Err(ImportError::Derive(format!(
                "step {}: the derived cases hold {graded} entries for it, not 1",
                step.step_number
            )));
        }
        let file = cases_file(&step.step_number);
        let text =
            serde_json::to_string(&own).map_err(|err| ImportError::Derive(err.to_string()))?;
        dir.write(&format!("hidden/{file}"), text)?;
        graders.push(GraderSpec {
            name: format!("scicode step {}", step.step_number),
            dimension: "code_correctness".into(),
            weight: 1.0,
            check: Check::ScicodeSteps(rubrics::checks::scicode_steps::ScicodeSteps {
                hidden_cases: file,
                output: snapshot_path(&step.step_number, SOLUTION_FILE),
                case_timeout_secs: frame.case_timeout_secs,
            }),
        });
    }
    dir.write("instruction.md", overview(problem, steps.len()))?;
    dir.write(
        &format!("workspace/{SOLUTION_FILE}"),
        starting_code(problem, given),
    )?;
    let stages = turn_prompts(problem, given, options)
        .into_iter()
        .map(|(id, prompt)| StageToml {
            id,
            title: None,
            prompt,
            depends_on: Vec::new(),
        })
        .collect();
    let reference = super::has_gold(problem);
    if reference {
        write_oracle(&dir, problem, given)?;
    }
    let mut environment = frame.environment();
    environment.agent_timeout_secs = TURN_TIMEOUT_SECS * steps.len().max(1) as u64;
    let toml = TaskToml {
        id,
        kind: TaskKind::Scicode,
        instruction: "instruction.md".into(),
        attachments: Vec::new(),
        expected_outputs: vec![SOLUTION_FILE.into()],
        environment,
        constraints: Constraints::default(),
        metadata: frame.metadata(reference),
        stages,
        turns: Some(TurnsFile {
            kept_file: SOLUTION_FILE.into(),
            timeout_secs: Some(TURN_TIMEOUT_SECS),
        }),
        grading: GradingSpec {
            dimensions: one_dimension("code_correctness"),
            pass_threshold: 0.9,
            timeout_secs: None,
            graders,
        },
    };
    dir.finish(&toml)
}

/// What the task is, for whoever reads it (the agent gets the turns' prompts).
fn overview(problem: &Problem, turns: usize) -> String {
    format!(
        "# SciCode problem {}{}, step by step

The problem's {turns} tested step(s) are asked \
         one per turn, each prompt showing `/workspace/{SOLUTION_FILE}` as the previous turn \
         left it. Each step is graded on that file as it was at the end of its turn.\n",
        problem.problem_id,
        if problem.problem_name.is_empty() {
            String::new()
        } else {
            format!(" ({})", problem.problem_name)
        }
    )
}

/// `solution.py` before the first turn: the dependencies, then the code of every step upstream
/// does not test (given, as upstream substitutes it).
fn starting_code(problem: &Problem, given: &BTreeMap<String, String>) -> String {
    let mut out = problem.required_dependencies.trim_end().to_owned();
    out.push_str("\n\n");
    for step in problem.sub_steps.iter().filter(|s| s.test_cases.is_empty()) {
        if let Some(code) = step_code(step, given) {
            out.push_str(&format!(
                "# Step {} (given)\n{}\n\n\n",
                step.step_number,
                code.trim_end()
            ));
        }
    }
    out
}

/// The oracle: in turn k, `solution.py` = the starting code and the gold code of the first k
/// tested steps (`turn-<k>.py`); the turn is counted in the container's `/tmp`.
fn write_oracle(
    dir: &TaskDir,
    problem: &Problem,
    given: &BTreeMap<String, String>,
) -> Result<(), ImportError> {
    let mut code = starting_code(problem, given);
    for (k, step) in tested(problem).enumerate() {
        if let Some(gold) = &step.ground_truth_code {
            code.push_str(gold.trim_end());
            code.push_str("\n\n\n");
        }
        dir.write(&format!("solution/turn-{}.py", k + 1), code.clone())?;
    }
    dir.write_script(
        "solution/solve.sh",
        &format!(
            "#!/bin/sh\n# Oracle, one turn per call: the gold code of the steps so far (cwd = /workspace).\n\
             set -eu\ncount=/tmp/rb-oracle-turn\nn=$(( $(cat \"$count\" 2>/dev/null || echo 0) + 1 ))\n\
             echo \"$n\" > \"$count\"\ncp \"/oracle/solution/turn-$n.py\" {SOLUTION_FILE}\n"
        ),
    )?;
    Ok(())
}

/// A step's description, with its background when asked for.
fn description(step: &SubStep, with_background: bool) -> String {
    let mut text = step.step_description_prompt.trim().to_owned();
    if with_background && !step.step_background.trim().is_empty() {
        text.push_str("\n\n");
        text.push_str(step.step_background.trim());
    }
    text
}

/// Each turn (tested step id, prompt), in upstream's order: the earlier steps' descriptions,
/// the agent's code so far ([`KEPT_TOKEN`]), the next step with its header and return line,
/// the dependencies, what to deliver.
pub(super) fn turn_prompts(
    problem: &Problem,
    given: &BTreeMap<String, String>,
    options: &ScicodeOptions,
) -> Vec<(String, String)> {
    let turns = tested(problem).count();
    let name = if problem.problem_name.is_empty() {
        String::new()
    } else {
        format!(" ({})", problem.problem_name)
    };
    let mut out = Vec::new();
    for (index, step) in problem.sub_steps.iter().enumerate() {
        if step.test_cases.is_empty() {
            continue;
        }
        let mut text = format!(
            "# SciCode problem {}{name}, step {} (turn {} of {turns})\n\nWrite the Python code of \
             the next step of a scientific problem that is solved step by step.\n",
            problem.problem_id,
            step.step_number,
            out.len() + 1
        );
        if index > 0 {
            text.push_str("\n## The steps before it\n");
            for earlier in &problem.sub_steps[..index] {
                text.push_str(&format!(
                    "\n### Step {}\n\n{}\n",
                    earlier.step_number,
                    description(earlier, options.with_background)
                ));
                if earlier.test_cases.is_empty() && step_code(earlier, given).is_some() {
                    text.push_str(
                        "\nThis step's code is given (upstream's own); it is in `solution.py`.\n",
                    );
                }
            }
        }
        text.push_str(&format!(
            "\n## Your code so far\n\n`/workspace/{SOLUTION_FILE}` holds this code (your own \
             code for the steps before, as you left it; the given code; the dependencies):\n\n\
             ```python\n{KEPT_TOKEN}\n```\n"
        ));
        text.push_str(&format!(
            "\n## The next step: {}\n\n{}",
            step.step_number,
            step_prompt(step, options.with_background)
        ));
        text.push_str(&format!(
            "\n## Dependencies\n\nThese are imported before your code runs; use only them, and \
             do not import them again:\n\n```python\n{}\n```\n",
            problem.required_dependencies.trim_end()
        ));
        text.push_str(&format!(
            "\n## What to deliver\n\nAdd the function of step {id} to \
             `/workspace/{SOLUTION_FILE}`, below the code already there, keeping the given name \
             and signature. Leave the code of the earlier steps as it is; where your function \
             needs an earlier step, call it through its header. Do not add example usage or \
             tests. Step {id} is graded on `{SOLUTION_FILE}` as it is when this turn ends, with \
             the code of the steps before it as it is then.\n",
            id = step.step_number
        ));
        out.push((step.step_number.clone(), text));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::scicode::{Protocol, task_steps};

    /// Three steps, the second untested upstream (its code given, like 62.1).
    fn problem() -> Problem {
        serde_json::from_value(serde_json::json!({
            "problem_id": "9",
            "problem_name": "toy",
            "required_dependencies": "import numpy as np",
            "sub_steps": [
                {"step_number": "9.1", "step_description_prompt": "Double x.",
                 "step_background": "Background: doubling.",
                 "ground_truth_code": "def double(x):\n    return 2 * x\n",
                 "function_header": "def double(x):", "return_line": "    return y",
                 "test_cases": ["assert double(1) == target"]},
                {"step_number": "9.2", "step_description_prompt": "A helper class.",
                 "step_background": "", "function_header": "class Box:",
                 "test_cases": []},
                {"step_number": "9.3", "step_description_prompt": "Quadruple x.",
                 "step_background": "Background: twice doubling.",
                 "ground_truth_code": "def quad(x):\n    return double(double(x))\n",
                 "function_header": "def quad(x):", "return_line": "    return y",
                 "test_cases": ["assert quad(1) == target"]}
            ]
        }))
        .expect("a SciCode record")
    }

    fn given() -> BTreeMap<String, String> {
        [("9.2".to_owned(), "class Box:\n    pass\n".to_owned())]
            .into_iter()
            .collect()
    }

    fn cases() -> serde_json::Value {
        serde_json::json!({"problem_id": "9", "required_dependencies": "import numpy as np",
        "steps": [
            {"step_id": "9.1", "function_header": "def double(x):",
             "test_cases": [{"test": "assert double(1) == target", "target": 2}]},
            {"step_id": "9.3", "function_header": "def quad(x):",
             "test_cases": [{"test": "assert quad(1) == target", "target": 4}]}
        ]})
    }

    fn options(with_background: bool) -> ScicodeOptions {
        let mut o = ScicodeOptions::new(
            "unused",
            sandbox::Owner {
                run_id: "unit".into(),
                trial_id: None,
                role: sandbox::Role::Utility,
            },
        );
        o.protocol = Protocol::StepByStep;
        o.with_background = with_background;
        o
    }

    /// Every turn of `p` as the agent reads it, the kept file being what a (made-up) agent left.
    fn rendered(p: &Problem) -> String {
        let agent_file = [
            "import numpy as np\n\n# Step 9.2 (given)\nclass Box:\n    pass\n",
            "import numpy as np\n\n# Step 9.2 (given)\nclass Box:\n    pass\n\ndef double(x):\n    return x + x + 0  # the agent's own\n",
        ];
        turn_prompts(p, &given(), &options(false))
            .iter()
            .enumerate()
            .map(|(k, (id, prompt))| {
                format!(
                    "===== turn {} (step {id}) =====\n{}",
                    k + 1,
                    crate::turns::prompt(prompt, agent_file.get(k).copied())
                )
            })
            .collect()
    }

    #[test]
    fn turn_prompts_show_the_agents_own_code() {
        let mut p = problem();
        p.sub_steps.remove(1);
        insta::assert_snapshot!("turns_of_a_problem", rendered(&p));
    }

    #[test]
    fn turn_prompts_after_a_given_step_say_its_code_is_given() {
        let text = rendered(&problem());
        assert!(text.contains("the agent's own"), "{text}");
        assert!(
            !text.contains("return 2 * x"),
            "no gold code of an earlier step: {text}"
        );
        insta::assert_snapshot!("turns_with_a_given_step", text);
    }

    #[test]
    fn background_only_when_asked() {
        let p = problem();
        let without: String = turn_prompts(&p, &given(), &options(false))
            .into_iter()
            .map(|t| t.1)
            .collect();
        assert!(!without.contains("Background"), "{without}");
        let with: String = turn_prompts(&p, &given(), &options(true))
            .into_iter()
            .map(|t| t.1)
            .collect();
        assert!(
            with.contains("Background: doubling.") && with.contains("Background: twice doubling.")
        );
    }

    #[test]
    fn one_task_a_turn_and_a_grader_per_tested_step() {
        let p = problem();
        let dest = tempfile::tempdir().expect("tempdir");
        let dir = write_task(&p, &given(), cases(), &options(false), dest.path()).expect("write");
        assert_eq!(dir.file_name().and_then(|n| n.to_str()), Some("scicode-9"));
        let read = |rel: &str| std::fs::read_to_string(dir.join(rel)).expect(rel);
        let ws = read("workspace/solution.py");
        assert!(ws.starts_with("import numpy as np"));
        assert!(
            ws.contains("class Box") && !ws.contains("def double"),
            "{ws}"
        );
        let turn1 = read("solution/turn-1.py");
        let turn2 = read("solution/turn-2.py");
        assert!(turn1.contains("def double") && !turn1.contains("def quad"));
        assert!(turn2.contains("class Box") && turn2.contains("def quad"));
        for step in ["9.1", "9.3"] {
            let c: serde_json::Value =
                serde_json::from_str(&read(&format!("hidden/scicode_cases_{step}.json")))
                    .expect("json");
            assert_eq!(c["steps"].as_array().map(Vec::len), Some(1));
            assert_eq!(c["steps"][0]["step_id"], step);
        }
        let task = crate::load_task(&dir).expect("loads");
        let turns = task.turns().expect("delivered in turns");
        assert_eq!(turns.kept_file, "solution.py");
        assert_eq!(turns.timeout_secs, Some(TURN_TIMEOUT_SECS));
        assert_eq!(task.environment().agent_timeout_secs, 2 * TURN_TIMEOUT_SECS);
        let ids: Vec<&str> = task.stages().iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["9.1", "9.3"]);
        let outputs: Vec<String> = task
            .grading()
            .graders
            .iter()
            .map(|g| match &g.check {
                Check::ScicodeSteps(s) => format!("{} <- {}", s.output, s.hidden_cases),
                other => panic!("unexpected grader {other:?}"),
            })
            .collect();
        assert_eq!(
            outputs,
            [
                ".turns/9.1/solution.py <- scicode_cases_9.1.json",
                ".turns/9.3/solution.py <- scicode_cases_9.3.json"
            ]
        );
        let steps = task_steps(&task).expect("SciCode metadata");
        assert_eq!(steps.problem_id, "9");
        assert_eq!(steps.problem_steps, ["9.1", "9.3"]);
        assert_eq!(steps.graded, ["9.1", "9.3"]);
    }

    #[test]
    fn a_problem_without_gold_code_has_no_oracle() {
        let mut p = problem();
        p.sub_steps[2].ground_truth_code = None;
        let dest = tempfile::tempdir().expect("tempdir");
        let dir = write_task(&p, &given(), cases(), &options(false), dest.path()).expect("write");
        assert!(!dir.join("solution").exists());
        crate::load_task(&dir).expect("loads");
    }
}
