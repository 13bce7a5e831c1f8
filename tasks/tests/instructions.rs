//! The instruction of every bundled task (`tasks/examples/`), as the agent reads it: a
//! snapshot each, reviewed as prose.

use std::path::Path;

#[test]
fn every_bundled_task_instruction() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let tasks = tasks::load_suite(&[examples]).expect("the bundled suite loads");
    assert!(tasks.len() >= 9, "every bundled task: {}", tasks.len());
    for task in &tasks {
        let text = task.agent_view().instruction;
        assert!(
            !text.contains("Constraints:"),
            "{}: no raw constraints",
            task.id()
        );
        assert!(!text.contains('{'), "{}: no JSON in the prose", task.id());
        for output in task.expected_outputs() {
            assert_eq!(
                text.matches(&format!("- `{output}`")).count(),
                1,
                "{}: {output} listed once",
                task.id()
            );
        }
        insta::assert_snapshot!(task.id(), text);
    }
}
