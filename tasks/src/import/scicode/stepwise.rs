//! SciCode's main setting (`--protocol step-by-step`): one task per tested step.
//!
//! Upstream asks for one step at a time; the prompt for step k lists the steps before it, each
//! with its description (and background, with `--with-background`) followed by its code, then
//! the next step's description, function header and return line, then the dependencies. Here
//! the code of an earlier step is its gold code, or upstream's own code for a step it does not
//! test (13.6, 62.1, 76.3); `solution.py` starts with the same code, and the agent adds the
//! step's function. Only that step's cases are graded (after the code before it, in one
//! namespace, as upstream runs them). A problem counts as solved when every one of its step
//! tasks passes: each task's metadata names the problem, all of its tested steps and the step
//! it grades (`rubrics::scicode_score` tallies a run from them).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{
    Problem, SOLUTION_FILE, STEP_KEY, ScicodeOptions, SubStep, TaskFrame, solution_code, step_code,
    step_prompt, write_cases, write_oracle,
};
use crate::import::{ImportError, TaskDir, TaskToml};
use crate::spec::{Constraints, TaskKind};

/// `scicode-<step>`, e.g. `scicode-1.2`.
pub(super) fn task_id(step: &SubStep) -> String {
    format!("scicode-{}", crate::import::slug(&step.step_number))
}

/// One task per tested step of `problem`, from the problem's derived (or published) cases.
pub(super) fn write_tasks(
    problem: &Problem,
    given: &BTreeMap<String, String>,
    cases: serde_json::Value,
    options: &ScicodeOptions,
    dest: &Path,
) -> Result<Vec<PathBuf>, ImportError> {
    let frame = TaskFrame::new(problem, &cases, options);
    let mut written = Vec::new();
    for (index, step) in problem.sub_steps.iter().enumerate() {
        if step.test_cases.is_empty() {
            continue;
        }
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
        written.push(write_step(problem, given, index, own, &frame, dest)?);
    }
    Ok(written)
}

fn write_step(
    problem: &Problem,
    given: &BTreeMap<String, String>,
    index: usize,
    cases: serde_json::Value,
    frame: &TaskFrame<'_>,
    dest: &Path,
) -> Result<PathBuf, ImportError> {
    let options = frame.options;
    let step = &problem.sub_steps[index];
    let id = task_id(step);
    let dir = TaskDir::create(dest, &id)?;
    dir.write(
        "instruction.md",
        instruction(problem, given, index, options),
    )?;
    // The code of every step before this one; the agent adds this step's function.
    let before = solution_code(problem, given, index);
    dir.write(&format!("workspace/{SOLUTION_FILE}"), before)?;
    write_cases(&dir, &cases)?;
    // The oracle needs the gold code of this step too (a test-set record has none for it).
    let reference = step.ground_truth_code.is_some() && has_gold_before(problem, index);
    if reference {
        write_oracle(&dir, problem, given, index + 1)?;
    }
    let mut metadata = frame.metadata(reference);
    metadata.insert(
        STEP_KEY.into(),
        toml::Value::String(step.step_number.clone()),
    );
    let toml = TaskToml {
        id,
        kind: TaskKind::Scicode,
        instruction: "instruction.md".into(),
        attachments: Vec::new(),
        expected_outputs: vec![SOLUTION_FILE.into()],
        environment: frame.environment(),
        constraints: Constraints::default(),
        metadata,
        stages: Vec::new(),
        grading: frame.grading(),
    };
    dir.finish(&toml)
}

/// Whether every tested step before `index` has gold code.
fn has_gold_before(problem: &Problem, index: usize) -> bool {
    problem.sub_steps[..index]
        .iter()
        .all(|s| s.test_cases.is_empty() || s.ground_truth_code.is_some())
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

/// The prompt of step `index`, in upstream's order: the earlier steps with their code, the
/// next step with its header and return line, the dependencies, what to deliver.
fn instruction(
    problem: &Problem,
    given: &BTreeMap<String, String>,
    index: usize,
    options: &ScicodeOptions,
) -> String {
    let step = &problem.sub_steps[index];
    let name = if problem.problem_name.is_empty() {
        String::new()
    } else {
        format!(" ({})", problem.problem_name)
    };
    let mut out = format!(
        "# SciCode problem {}{name}, step {}\n\nWrite the Python code of the next step of a \
         scientific problem that is solved step by step.\n",
        problem.problem_id, step.step_number
    );
    if index > 0 {
        out.push_str(&format!(
            "\n## The steps before it, with their code\n\nThis code is part of the solution and \
             is already in `/workspace/{SOLUTION_FILE}`.\n"
        ));
        for earlier in &problem.sub_steps[..index] {
            out.push_str(&format!(
                "\n### Step {}\n\n{}\n",
                earlier.step_number,
                description(earlier, options.with_background)
            ));
            if let Some(code) = step_code(earlier, given) {
                out.push_str(&format!("\n```python\n{}\n```\n", code.trim_end()));
            }
        }
    }
    // The next step as the whole-problem protocol states it: description, header, return line.
    out.push_str(&format!(
        "\n## The next step: {}\n\n{}",
        step.step_number,
        step_prompt(step, options.with_background)
    ));
    out.push_str(&format!(
        "\n## Dependencies\n\nThese are imported before your code runs; use only them, and do \
         not import them again:\n\n```python\n{}\n```\n",
        problem.required_dependencies.trim_end()
    ));
    out.push_str(&format!(
        "\n## What to deliver\n\nAdd the function of step {} to `/workspace/{SOLUTION_FILE}`, \
         below the code already there, keeping the given name and signature. Leave the earlier \
         steps' code as it is; where your function needs an earlier step, call it through its \
         header. Do not add example usage or tests. Only step {} is graded.\n",
        step.step_number, step.step_number
    ));
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

    #[test]
    fn a_step_prompt_carries_every_earlier_step_with_its_code_then_the_next_step() {
        let p = problem();
        let text = instruction(&p, &given(), 2, &options(false));
        let order = [
            "### Step 9.1",
            "Double x.",
            "def double(x):\n    return 2 * x",
            "### Step 9.2",
            "class Box:\n    pass",
            "## The next step: 9.3",
            "Quadruple x.",
            "def quad(x):",
            "    return y",
            "## Dependencies",
            "import numpy as np",
        ];
        let mut at = 0;
        for part in order {
            let found = text[at..]
                .find(part)
                .unwrap_or_else(|| panic!("{part:?} after byte {at} in:\n{text}"));
            at += found + part.len();
        }
        assert!(!text.contains("Background"), "{text}");
        assert!(
            !text.contains("return double(double(x))"),
            "no gold code of the step itself"
        );
        let with = instruction(&p, &given(), 2, &options(true));
        assert!(
            with.contains("Background: doubling.") && with.contains("Background: twice doubling.")
        );
        let first = instruction(&p, &given(), 0, &options(false));
        assert!(!first.contains("The steps before it"), "{first}");
    }

    #[test]
    fn one_task_per_tested_step_each_grading_its_step_on_the_code_before_it() {
        let p = problem();
        let dest = tempfile::tempdir().expect("tempdir");
        let dirs = write_tasks(&p, &given(), cases(), &options(false), dest.path()).expect("write");
        let names: Vec<String> = dirs
            .iter()
            .map(|d| d.file_name().expect("name").to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["scicode-9.1", "scicode-9.3"]);
        let read = |d: &Path, rel: &str| std::fs::read_to_string(d.join(rel)).expect(rel);
        let ws3 = read(&dirs[1], "workspace/solution.py");
        assert!(ws3.starts_with("import numpy as np"));
        assert!(ws3.contains("def double(x)") && ws3.contains("class Box"));
        assert!(!ws3.contains("def quad"));
        let oracle3 = read(&dirs[1], "solution/solution.py");
        assert!(oracle3.contains("def quad"));
        let c3: serde_json::Value =
            serde_json::from_str(&read(&dirs[1], "hidden/scicode_cases.json")).expect("json");
        assert_eq!(c3["steps"].as_array().map(Vec::len), Some(1));
        assert_eq!(c3["steps"][0]["step_id"], "9.3");
        let task = crate::load_task(&dirs[1]).expect("loads");
        let steps = task_steps(&task).expect("SciCode metadata");
        assert_eq!(steps.problem_id, "9");
        assert_eq!(steps.problem_steps, ["9.1", "9.3"]);
        assert_eq!(steps.graded, ["9.3"]);
        assert!(task.stages().is_empty());
    }

    #[test]
    fn a_step_without_gold_code_has_no_oracle() {
        let mut p = problem();
        p.sub_steps[2].ground_truth_code = None;
        let dest = tempfile::tempdir().expect("tempdir");
        let dirs = write_tasks(&p, &given(), cases(), &options(false), dest.path()).expect("write");
        assert!(dirs[0].join("solution/solve.sh").is_file());
        assert!(!dirs[1].join("solution").exists());
    }
}
