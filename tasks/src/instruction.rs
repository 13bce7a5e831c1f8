//! The instruction an agent reads: the task's own text, then its steps, the files it is
//! given, what it hands in and its rules, in prose, from one template per task kind
//! (`instruction/<kind>.md`, each extending `instruction/base.md`). A section without content
//! is left out; constraints are written as sentences.

use minijinja::{Environment, context};

use crate::spec::{Constraints, TaskKind};

/// What an instruction is made of (the task's parts, borrowed): the task builds it, this module
/// renders it, and neither imports the other's types beyond `spec`.
pub struct Parts<'a> {
    pub kind: TaskKind,
    /// The task's own text.
    pub instruction: &'a str,
    /// Each step: id, title, prompt.
    pub stages: Vec<(&'a str, Option<&'a str>, &'a str)>,
    pub attachments: &'a [String],
    pub expected_outputs: &'a [String],
    pub constraints: &'a Constraints,
}

/// The templates: the shared layout and each kind's wording.
const TEMPLATES: &[(&str, &str)] = &[
    ("base.md", include_str!("instruction/base.md")),
    ("prbench.md", include_str!("instruction/prbench.md")),
    ("scicode.md", include_str!("instruction/scicode.md")),
    ("mmsicode.md", include_str!("instruction/mmsicode.md")),
    ("arbench.md", include_str!("instruction/arbench.md")),
    ("scicoqa.md", include_str!("instruction/scicoqa.md")),
    ("paperbench.md", include_str!("instruction/paperbench.md")),
    ("harbor.md", include_str!("instruction/harbor.md")),
    ("generic.md", include_str!("instruction/generic.md")),
];

/// The template of a kind.
fn template_name(kind: TaskKind) -> String {
    format!("{}.md", kind.as_str())
}

fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    for (name, text) in TEMPLATES {
        // The templates are fixed and tested (`every_kind_renders`); a broken one shows as a
        // render error below.
        let _ = env.add_template(name, text);
    }
    env
}

/// `` `a` ``, `` `a` or `b` ``, `` `a`, `b` or `c` ``.
fn in_words(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|i| format!("`{i}`")).collect();
    match quoted.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

/// The task's instruction as the agent reads it.
pub fn render(task: &Parts<'_>) -> String {
    let stages: Vec<_> = task
        .stages
        .iter()
        .map(|(id, title, prompt)| {
            context! {
                id => id,
                title => title,
                prompt => prompt.trim(),
            }
        })
        .collect();
    let env = environment();
    let rendered = env.get_template(&template_name(task.kind)).and_then(|t| {
        t.render(context! {
            instruction => task.instruction.trim(),
            stages => stages,
            attachments => task.attachments,
            outputs => task.expected_outputs,
            forbidden => in_words(&task.constraints.forbidden_modules),
            notes => task.constraints.notes,
        })
    });
    match rendered {
        Ok(text) => tidy(&text),
        Err(e) => {
            tracing::error!(error = %e, kind = task.kind.as_str(), "instruction template failed");
            tidy(task.instruction)
        }
    }
}

/// At most one blank line in a row, none at the ends, one final newline.
fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank = 0;
    for line in text.trim().lines() {
        let line = line.trim_end();
        if line.is_empty() {
            blank += 1;
            if blank > 1 {
                continue;
            }
        } else {
            blank = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_renders_from_its_own_template() {
        let env = environment();
        for kind in TaskKind::ALL {
            let t = env
                .get_template(&template_name(kind))
                .unwrap_or_else(|e| panic!("{}: {e}", kind.as_str()));
            let text = t
                .render(context! {
                    instruction => "Do it.",
                    stages => Vec::<()>::new(),
                    attachments => vec!["paper.md"],
                    outputs => vec!["out.py"],
                    forbidden => "`scipy`",
                    notes => vec!["Be brief."],
                })
                .unwrap_or_else(|e| panic!("{}: {e}", kind.as_str()));
            let text = tidy(&text);
            assert!(text.starts_with("Do it.\n\n"), "{text}");
            assert!(text.contains("- `paper.md`\n"), "{text}");
            assert!(text.contains("- `out.py`\n"), "{text}");
            assert!(
                text.contains("- Do not use `scipy`.\n- Be brief.\n"),
                "{text}"
            );
            assert!(!text.contains("\n\n\n"), "{text}");
        }
        assert_eq!(
            TEMPLATES.len(),
            TaskKind::ALL.len() + 1,
            "a template per kind"
        );
    }

    #[test]
    fn constraints_are_words() {
        assert_eq!(in_words(&[]), "");
        assert_eq!(in_words(&["a".into()]), "`a`");
        assert_eq!(in_words(&["a".into(), "b".into()]), "`a` or `b`");
        assert_eq!(
            in_words(&["a".into(), "b".into(), "c".into()]),
            "`a`, `b` or `c`"
        );
    }
}
