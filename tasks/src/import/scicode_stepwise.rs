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

use super::scicode::{
    Problem, SOLUTION_FILE, STEP_KEY, ScicodeOptions, SubStep, TaskFrame, solution_code, step_code,
    step_prompt, write_cases, write_oracle,
};
use super::{ImportError, TaskDir, TaskToml};
use crate::spec::{Constraints, TaskKind};

/// `scicode-<step>`, e.g. `scicode-1.2`.
pub(super) fn task_id(step: &SubStep) -> String {
    format!("scicode-{}", super::slug(&step.step_number))
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
    dir.write("instruction.md", instruction(problem, given, index, options))?;
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
