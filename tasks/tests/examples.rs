//! The bundled example suite loads, covers every kind it promises, and the wall holds: nothing
//! reachable from an `AgentView` names or contains a held-out or solution file.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use tasks::{Task, TaskKind, load_suite};

mod common;
use common::assert_wall_holds;

fn examples_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples")
}

fn examples() -> Vec<Task> {
    load_suite(&[examples_dir()]).unwrap_or_else(|err| panic!("examples must load: {err}"))
}

#[test]
fn every_example_loads_with_an_oracle_solution() {
    let tasks = examples();
    let kinds: BTreeSet<&str> = tasks.iter().map(|t| t.kind().as_str()).collect();
    for kind in [
        TaskKind::Prbench,
        TaskKind::Scicode,
        TaskKind::Mmsicode,
        TaskKind::Arbench,
        TaskKind::Harbor,
        TaskKind::Generic,
        TaskKind::Scicoqa,
    ] {
        assert!(
            kinds.contains(kind.as_str()),
            "no example of kind {}",
            kind.as_str()
        );
    }
    let images: BTreeSet<(&str, &str)> = tasks
        .iter()
        .map(|t| (t.id(), t.environment().image.as_str()))
        .collect();
    assert!(images.contains(&("mmsicode-c-interp", "sci")));
    assert!(images.contains(&("mmsicode-r-trapz", "sci")));
    for task in &tasks {
        let oracle = task
            .oracle_solution()
            .unwrap_or_else(|| panic!("{} has no oracle", task.id()));
        assert!(oracle.dir.join(&oracle.entrypoint).is_file());
        assert!(
            task.held_out().dir().is_some(),
            "{} has no held-out files",
            task.id()
        );
        assert!(!task.grading().graders.is_empty());
    }
}

#[test]
fn no_held_out_file_reaches_the_agent_view() {
    for task in examples() {
        assert_wall_holds(&task);
    }
}

/// The public settings an agent receives, the rendered instruction among them (a wire format:
/// changes to it show up here; every bundled task's instruction is in `instructions.rs`).
#[test]
fn agent_view_of_the_scicode_example() {
    let task = tasks::load_task(&examples_dir().join("scicode-quadrature")).expect("loads");
    let view = task.agent_view();
    let mut json = serde_json::to_value(&view).expect("serialise");
    json["workspace"] = serde_json::Value::String("<workspace>".into());
    insta::assert_json_snapshot!("scicode_quadrature_view", json);
}
