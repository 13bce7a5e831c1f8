//! The strict loader: parses `task.toml`, checks every path, stage and weight, and collects
//! every problem it finds with its file, line and field.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::{Path, PathBuf};

use rubrics::bounds;
use rubrics::checks::Locate;
use rubrics::{Check, CheckSpec, GradingSpec};
use sha2::{Digest, Sha256};
use toml::Spanned;

use crate::error::{Location, TaskError, line_col};
use crate::paths::{is_within, normalize_relative, overlaps, relative_slash};
use crate::spec::{StageFile, TaskFile};
use crate::task::{SOLVE_SCRIPT, Stage, Task};

/// The task file's name.
pub const TASK_FILE: &str = "task.toml";
const WEIGHT_TOLERANCE: f64 = 1e-6;

/// Loads and validates one task folder; returns the first problem found (see
/// [`load_task_collecting`] for all of them).
pub fn load_task(dir: &Path) -> Result<Task, TaskError> {
    load_task_collecting(dir).map_err(|mut errors| errors.remove(0))
}

/// Loads and validates one task folder, returning every problem found (never an empty `Vec`).
pub fn load_task_collecting(dir: &Path) -> Result<Task, Vec<TaskError>> {
    let root = dir.canonicalize().map_err(|source| {
        vec![TaskError::Io {
            path: dir.to_path_buf(),
            source,
        }]
    })?;
    let toml_path = root.join(TASK_FILE);
    let source = std::fs::read_to_string(&toml_path).map_err(|source| {
        vec![TaskError::Io {
            path: toml_path.clone(),
            source,
        }]
    })?;
    let file: TaskFile = toml::from_str(&source).map_err(|err| {
        let (line, column) = err
            .span()
            .map_or((0, 0), |span| line_col(&source, span.start));
        vec![TaskError::Parse {
            location: Location {
                file: toml_path.clone(),
                line,
                column,
                field: String::new(),
            },
            message: err.message().trim().to_owned(),
        }]
    })?;
    let mut cx = Checker {
        root,
        toml_path,
        source,
        errors: Vec::new(),
    };
    let task = cx.check(file);
    match task {
        Some(task) if cx.errors.is_empty() => Ok(task),
        _ => {
            if cx.errors.is_empty() {
                cx.errors
                    .push(cx.invalid(None, "", "task could not be loaded"));
            }
            Err(cx.errors)
        }
    }
}

struct Checker {
    root: PathBuf,
    toml_path: PathBuf,
    source: String,
    errors: Vec<TaskError>,
}

impl Checker {
    fn location(&self, span: Option<Range<usize>>, field: &str) -> Location {
        let (line, column) = span.map_or((0, 0), |s| line_col(&self.source, s.start));
        Location {
            file: self.toml_path.clone(),
            line,
            column,
            field: field.to_owned(),
        }
    }

    fn invalid(
        &self,
        span: Option<Range<usize>>,
        field: &str,
        message: impl Into<String>,
    ) -> TaskError {
        TaskError::Invalid {
            location: self.location(span, field),
            message: message.into(),
        }
    }

    fn push(&mut self, span: Option<Range<usize>>, field: &str, message: impl Into<String>) {
        let err = self.invalid(span, field, message);
        self.errors.push(err);
    }

    /// Span of the first quoted occurrence of `value` inside `within` (for values of the
    /// grading section, which carries no per-field spans).
    fn find_value(&self, value: &str, within: &Range<usize>) -> Option<Range<usize>> {
        let hay = self.source.get(within.clone())?;
        for quote in ['"', '\''] {
            let needle = format!("{quote}{value}{quote}");
            if let Some(pos) = hay.find(&needle) {
                let start = within.start + pos;
                return Some(start..start + needle.len());
            }
        }
        None
    }

    fn find_key(&self, key: &str, within: &Range<usize>) -> Option<Range<usize>> {
        let hay = self.source.get(within.clone())?;
        hay.find(key)
            .map(|pos| within.start + pos..within.start + pos + key.len())
    }

    /// Resolves a path relative to `base` (inside the task root), refusing escapes (lexical and
    /// through symlinks). `must_exist` also checks it is there.
    fn resolve(
        &mut self,
        value: &str,
        span: Option<Range<usize>>,
        field: &str,
        base: &Path,
        base_name: &str,
        must_exist: Option<Kind>,
    ) -> Option<PathBuf> {
        let relative = match normalize_relative(value) {
            Ok(relative) => relative,
            Err(problem) => {
                self.push(span, field, problem.describe(value, base_name));
                return None;
            }
        };
        let joined = base.join(&relative);
        let Some(kind) = must_exist else {
            return Some(joined);
        };
        if std::fs::symlink_metadata(&joined).is_err() {
            self.push(
                span,
                field,
                format!(
                    "`{value}` does not exist (looked for {}); create it or fix the path",
                    joined.display()
                ),
            );
            return None;
        }
        let canonical = match joined.canonicalize() {
            Ok(canonical) => canonical,
            Err(err) => {
                self.push(
                    span,
                    field,
                    format!("`{value}` cannot be resolved: {err} (a dangling symlink?)"),
                );
                return None;
            }
        };
        if !is_within(&canonical, &self.root) {
            self.push(
                span,
                field,
                format!(
                    "`{value}` resolves to {} (through a symlink), outside the task folder; keep every file inside it",
                    canonical.display()
                ),
            );
            return None;
        }
        let ok = match kind {
            Kind::File => canonical.is_file(),
            Kind::Dir => canonical.is_dir(),
            Kind::Any => true,
        };
        if !ok {
            let want = if kind == Kind::File {
                "a file"
            } else {
                "a folder"
            };
            self.push(span, field, format!("`{value}` is not {want}"));
            return None;
        }
        Some(canonical)
    }

    fn check(&mut self, file: TaskFile) -> Option<Task> {
        let root = self.root.clone();
        // id
        let id = file.id.get_ref().clone();
        if id.is_empty()
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        {
            self.push(
                Some(file.id.span()),
                "id",
                format!(
                    "`{id}` is not a valid task id; use letters, digits, `-`, `_` and `.` only"
                ),
            );
        }

        // folders
        let workspace_dir = self.folder(file.workspace.as_ref(), "workspace", true);
        let hidden_dir = self.folder(file.hidden.as_ref(), "hidden", false);
        let solution_dir = self.folder(file.solution.as_ref(), "solution", false);
        let named: Vec<(&str, &Option<PathBuf>)> = vec![
            ("workspace", &workspace_dir),
            ("hidden", &hidden_dir),
            ("solution", &solution_dir),
        ];
        for (i, (a_name, a)) in named.iter().enumerate() {
            let Some(a) = a else { continue };
            if *a == root {
                self.push(
                    None,
                    a_name,
                    format!("`{a_name}` is the task folder itself; use a subfolder"),
                );
                continue;
            }
            for (b_name, b) in named.iter().skip(i + 1) {
                if let Some(b) = b
                    && overlaps(a, b)
                {
                    self.push(
                        None,
                        a_name,
                        format!("the `{a_name}` and `{b_name}` folders overlap; they must be disjoint so held-out files cannot reach the agent"),
                    );
                }
            }
        }
        let private: Vec<PathBuf> = [&hidden_dir, &solution_dir]
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        if let Some(solution) = &solution_dir
            && !solution.join(SOLVE_SCRIPT).is_file()
        {
            self.push(
                file.solution.as_ref().map(Spanned::span),
                "solution",
                format!(
                    "{} has no `{SOLVE_SCRIPT}`; the oracle agent runs it",
                    solution.display()
                ),
            );
        }

        // instruction
        let instruction = self
            .resolve(
                file.instruction.get_ref(),
                Some(file.instruction.span()),
                "instruction",
                &root,
                "the task folder",
                Some(Kind::File),
            )
            .and_then(|path| {
                self.read_public(
                    &path,
                    &private,
                    Some(file.instruction.span()),
                    "instruction",
                )
            });

        // attachments (relative to the workspace)
        let mut attachments = Vec::new();
        for (i, attachment) in file.attachments.iter().enumerate() {
            let field = format!("attachments[{i}]");
            if let Some(ws) = &workspace_dir
                && let Some(path) = self.resolve(
                    attachment.get_ref(),
                    Some(attachment.span()),
                    &field,
                    ws,
                    "the workspace folder",
                    Some(Kind::File),
                )
            {
                if is_within(&path, ws) {
                    attachments.push(relative_slash(&path, ws));
                } else {
                    self.push(
                        Some(attachment.span()),
                        &field,
                        format!("`{}` is outside the workspace folder", attachment.get_ref()),
                    );
                }
            }
        }

        // expected outputs: relative to /workspace, they need not exist yet
        let mut expected_outputs = Vec::new();
        for (i, output) in file.expected_outputs.iter().enumerate() {
            match normalize_relative(output.get_ref()) {
                Ok(path) => expected_outputs.push(relative_slash(&path, Path::new(""))),
                Err(problem) => self.push(
                    Some(output.span()),
                    &format!("expected_outputs[{i}]"),
                    problem.describe(output.get_ref(), "/workspace"),
                ),
            }
        }

        self.check_environment(&file);
        let stages = self.check_stages(&file.stages, &private);
        let turns = self.check_turns(&file);
        self.check_grading(&file.grading, hidden_dir.as_deref());
        self.check_symlinks(workspace_dir.as_deref());

        let content_hash = match content_hash(&root) {
            Ok(hash) => hash,
            Err(err) => {
                self.errors.push(err);
                return None;
            }
        };
        Some(Task {
            id,
            kind: file.kind,
            instruction: instruction?,
            attachments,
            workspace_dir: workspace_dir?,
            hidden_dir,
            solution_dir,
            expected_outputs,
            environment: file.environment,
            constraints: file.constraints,
            stages: stages?,
            turns: turns?,
            metadata: file.metadata,
            grading: file.grading.into_inner(),
            content_hash,
            task_toml: self.toml_path.clone(),
        })
    }

    /// A task folder (`workspace`, `hidden`, `solution`): when named explicitly it must exist;
    /// by default only `workspace` must.
    fn folder(
        &mut self,
        named: Option<&Spanned<String>>,
        default: &str,
        required: bool,
    ) -> Option<PathBuf> {
        let root = self.root.clone();
        match named {
            Some(value) => self.resolve(
                value.get_ref(),
                Some(value.span()),
                default,
                &root,
                "the task folder",
                Some(Kind::Dir),
            ),
            None => {
                let path = root.join(default);
                if std::fs::symlink_metadata(&path).is_ok() {
                    self.resolve(
                        default,
                        None,
                        default,
                        &root,
                        "the task folder",
                        Some(Kind::Dir),
                    )
                } else {
                    if required {
                        self.push(
                            None,
                            default,
                            format!("the task has no `{default}/` folder ({}); create it (a `.gitkeep` is enough) or name another with `{default} = \"...\"`", path.display()),
                        );
                    }
                    None
                }
            }
        }
    }

    /// Reads an agent-visible text file, refusing files under `hidden/` or `solution/`.
    fn read_public(
        &mut self,
        path: &Path,
        private: &[PathBuf],
        span: Option<Range<usize>>,
        field: &str,
    ) -> Option<String> {
        if private.iter().any(|p| is_within(path, p)) {
            self.push(
                span,
                field,
                format!(
                    "{} lies in a held-out folder; the agent would see it",
                    path.display()
                ),
            );
            return None;
        }
        match std::fs::read_to_string(path) {
            Ok(text) => Some(text),
            Err(source) => {
                self.errors.push(TaskError::Io {
                    path: path.to_path_buf(),
                    source,
                });
                None
            }
        }
    }

    /// `[turns]`: at least one stage, stage ids that can name a folder, a relative kept file,
    /// a turn budget in bounds. `None` when something is wrong.
    fn check_turns(&mut self, file: &TaskFile) -> Option<Option<crate::Turns>> {
        let Some(turns) = &file.turns else {
            return Some(None);
        };
        let span = Some(turns.span());
        let t = turns.get_ref();
        let mut ok = true;
        if file.stages.is_empty() {
            self.push(
                span.clone(),
                "turns",
                "`[turns]` sends the stages one per turn, and the task has no `[[stages]]`",
            );
            ok = false;
        }
        for (i, stage) in file.stages.iter().enumerate() {
            if !crate::turns::usable_stage_id(stage.id.get_ref()) {
                self.push(
                    Some(stage.id.span()),
                    &format!("stages[{i}].id"),
                    "with `[turns]` a stage id names a folder of the graded outputs: use only \
                     letters, digits, `.`, `_` and `-`",
                );
                ok = false;
            }
        }
        let kept_file = match normalize_relative(&t.kept_file) {
            Ok(path) => relative_slash(&path, Path::new("")),
            Err(problem) => {
                self.push(
                    span.clone(),
                    "turns.kept_file",
                    problem.describe(&t.kept_file, "/workspace"),
                );
                ok = false;
                String::new()
            }
        };
        if let Some(message) = t.timeout_secs.and_then(|s| bounds::TIMEOUT_SECS.outside(s)) {
            self.push(span, "turns.timeout_secs", message);
            ok = false;
        }
        ok.then_some(Some(crate::Turns {
            kept_file,
            timeout_secs: t.timeout_secs,
        }))
    }

    fn check_environment(&mut self, file: &TaskFile) {
        let env = &file.environment;
        let span = self.find_key("[environment]", &(0..self.source.len()));
        if env.image.trim().is_empty() {
            self.push(
                span.clone(),
                "environment.image",
                "empty image; use `python`, `sci` or an image reference",
            );
        }
        let numbers = [
            ("cpus", bounds::CPUS.outside(env.cpus)),
            ("memory_mb", bounds::MEMORY_MB.outside(env.memory_mb)),
            (
                "agent_timeout_secs",
                bounds::TIMEOUT_SECS.outside(env.agent_timeout_secs),
            ),
            (
                "grading_timeout_secs",
                bounds::TIMEOUT_SECS.outside(env.grading_timeout_secs),
            ),
        ];
        for (key, problem) in numbers {
            if let Some(message) = problem {
                let at = span
                    .as_ref()
                    .and_then(|s| self.find_key(key, &(s.start..self.source.len())))
                    .or(span.clone());
                self.push(at, &format!("environment.{key}"), message);
            }
        }
        if !env.pip_install.is_empty() {
            let at = span
                .as_ref()
                .and_then(|s| self.find_key("pip_install", &(s.start..self.source.len())))
                .or(span.clone());
            if sandbox::images::recipe(env.image.trim()).is_none() {
                self.push(
                    at.clone(),
                    "environment.pip_install",
                    format!(
                        "packages are installed into an image built FROM a platform image, whose Python ({}) their wheels are chosen for; `{}` is not one: use `python` or `sci`, or an image that has the packages and no pip_install",
                        sandbox::images::derived::TARGET_PYTHON,
                        env.image
                    ),
                );
            }
            for p in &env.pip_install {
                if let Some(problem) = sandbox::images::derived::requirement_problem(p) {
                    self.push(at.clone(), "environment.pip_install", problem);
                }
            }
        }
    }

    fn check_stages(&mut self, stages: &[StageFile], private: &[PathBuf]) -> Option<Vec<Stage>> {
        let root = self.root.clone();
        let mut ok = true;
        let mut index: BTreeMap<String, usize> = BTreeMap::new();
        for (i, stage) in stages.iter().enumerate() {
            let id = stage.id.get_ref();
            if id.trim().is_empty() {
                self.push(
                    Some(stage.id.span()),
                    &format!("stages[{i}].id"),
                    "empty stage id",
                );
                ok = false;
            }
            if let Some(first) = index.insert(id.clone(), i) {
                self.push(
                    Some(stage.id.span()),
                    &format!("stages[{i}].id"),
                    format!("duplicate stage id `{id}` (also stages[{first}])"),
                );
                ok = false;
            }
        }
        let mut prompts = Vec::new();
        for (i, stage) in stages.iter().enumerate() {
            let field = format!("stages[{i}]");
            let prompt = match (&stage.prompt, &stage.prompt_file) {
                (Some(prompt), None) => Some(prompt.get_ref().clone()),
                (None, Some(file)) => self
                    .resolve(
                        file.get_ref(),
                        Some(file.span()),
                        &format!("{field}.prompt_file"),
                        &root,
                        "the task folder",
                        Some(Kind::File),
                    )
                    .and_then(|path| {
                        self.read_public(
                            &path,
                            private,
                            Some(file.span()),
                            &format!("{field}.prompt_file"),
                        )
                    }),
                (Some(prompt), Some(_)) => {
                    self.push(
                        Some(prompt.span()),
                        &field,
                        "give either `prompt` or `prompt_file`, not both",
                    );
                    None
                }
                (None, None) => {
                    self.push(
                        Some(stage.id.span()),
                        &field,
                        "stage has no `prompt` or `prompt_file`",
                    );
                    None
                }
            };
            ok &= prompt.is_some();
            prompts.push(prompt.unwrap_or_default());
            for (j, dep) in stage.depends_on.iter().enumerate() {
                if !index.contains_key(dep.get_ref()) {
                    self.push(
                        Some(dep.span()),
                        &format!("{field}.depends_on[{j}]"),
                        format!("unknown stage `{}`", dep.get_ref()),
                    );
                    ok = false;
                }
            }
        }
        if !ok {
            return None;
        }
        // Topological order, stable with respect to the file's order; report a cycle.
        let mut order = Vec::new();
        let mut state = vec![0u8; stages.len()]; // 0 new, 1 on stack, 2 done
        for start in 0..stages.len() {
            let mut path = Vec::new();
            if let Err(cycle) = visit(start, stages, &index, &mut state, &mut order, &mut path) {
                let names: Vec<&str> = cycle
                    .iter()
                    .map(|&i| stages[i].id.get_ref().as_str())
                    .collect();
                let first = cycle[0];
                self.push(
                    Some(stages[first].id.span()),
                    &format!("stages[{first}].depends_on"),
                    format!("cyclic stages: {}", names.join(" -> ")),
                );
                return None;
            }
        }
        Some(
            order
                .into_iter()
                .map(|i| Stage {
                    id: stages[i].id.get_ref().clone(),
                    title: stages[i].title.clone(),
                    prompt: prompts[i].clone(),
                    depends_on: stages[i]
                        .depends_on
                        .iter()
                        .map(|d| d.get_ref().clone())
                        .collect(),
                })
                .collect(),
        )
    }

    /// The text region of each grader: from its `[[grading.graders]]` header to the next one
    /// (the whole grading section when graders are written inline).
    fn grader_regions(&self, grading: &Range<usize>, count: usize) -> Vec<Range<usize>> {
        let header = "[[grading.graders]]";
        let starts: Vec<usize> = self.source[grading.start..]
            .match_indices(header)
            .map(|(pos, _)| grading.start + pos)
            .collect();
        if starts.len() != count {
            return vec![grading.clone(); count];
        }
        let mut regions = Vec::with_capacity(count);
        for (i, &start) in starts.iter().enumerate() {
            let end = starts.get(i + 1).copied().unwrap_or(self.source.len());
            regions.push(start..end);
        }
        regions
    }

    fn check_grading(&mut self, grading: &Spanned<GradingSpec>, hidden_dir: Option<&Path>) {
        // The grading table's own span covers only its header: search from there to the end.
        let span = grading.span().start..self.source.len();
        let spec = grading.get_ref();
        let here = Some(span.clone());
        if spec.graders.is_empty() {
            self.push(
                here.clone(),
                "grading.graders",
                "no graders; a task needs at least one",
            );
        }
        if let Some(message) = bounds::PASS_THRESHOLD.outside(spec.pass_threshold) {
            self.push(
                self.find_key("pass_threshold", &span).or(here.clone()),
                "grading.pass_threshold",
                message,
            );
        }
        if let Some(message) = spec
            .timeout_secs
            .and_then(|t| bounds::TIMEOUT_SECS.outside(t))
        {
            self.push(
                self.find_key("timeout_secs", &span).or(here.clone()),
                "grading.timeout_secs",
                message,
            );
        }
        let known: BTreeSet<String> = match &spec.dimensions {
            Some(dims) => {
                let dims_span = self.find_key("dimensions", &span).or(here.clone());
                let mut sum = 0.0;
                for (name, weight) in dims {
                    if let Some(message) = bounds::DIMENSION_WEIGHT.outside(*weight) {
                        self.push(
                            self.find_key(name, &span).or(dims_span.clone()),
                            &format!("grading.dimensions.{name}"),
                            format!("weight {message}"),
                        );
                    }
                    sum += weight;
                    if !spec.graders.iter().any(|g| &g.dimension == name) {
                        self.push(
                            self.find_key(name, &span).or(dims_span.clone()),
                            &format!("grading.dimensions.{name}"),
                            format!(
                                "no grader feeds dimension `{name}`; remove it or add a grader"
                            ),
                        );
                    }
                }
                if (sum - 1.0).abs() > WEIGHT_TOLERANCE {
                    self.push(
                        dims_span,
                        "grading.dimensions",
                        format!("dimension weights sum to {sum}, not 1"),
                    );
                }
                dims.keys().cloned().collect()
            }
            None => rubrics::spec::prbench_dimensions().into_keys().collect(),
        };
        let mut names = BTreeSet::new();
        let regions = self.grader_regions(&span, spec.graders.len());
        for (i, grader) in spec.graders.iter().enumerate() {
            let field = format!("grading.graders[{i}]");
            let span = regions[i].clone();
            let gspan = self.find_value(&grader.name, &span).or(Some(span.clone()));
            if !names.insert(grader.name.clone()) {
                self.push(
                    gspan.clone(),
                    &format!("{field}.name"),
                    format!("duplicate grader name `{}`", grader.name),
                );
            }
            if !known.contains(&grader.dimension) {
                let list = known.iter().cloned().collect::<Vec<_>>().join(", ");
                self.push(
                    self.find_value(&grader.dimension, &span).or(gspan.clone()),
                    &format!("{field}.dimension"),
                    format!("unknown dimension `{}`; known: {list}", grader.dimension),
                );
            }
            if let Some(message) = bounds::GRADER_WEIGHT.outside(grader.weight) {
                self.push(
                    self.find_key("weight", &span).or(gspan.clone()),
                    &format!("{field}.weight"),
                    format!("weight {message}"),
                );
            }
            self.check_check(&grader.check, &format!("{field}.check"), &span, hidden_dir);
        }
    }

    fn check_check(
        &mut self,
        check: &Check,
        field: &str,
        span: &Range<usize>,
        hidden_dir: Option<&Path>,
    ) {
        for problem in check.validate() {
            let at = match &problem.at {
                Locate::Value(v) => self.find_value(v, span),
                Locate::Key => self.find_key(problem.key, span),
                Locate::Check => Some(span.clone()),
            };
            self.push(at, &format!("{field}.{}", problem.key), problem.message);
        }
        let outputs: Vec<(&str, &str)> = check
            .output_paths()
            .into_iter()
            .map(|p| (p.key, p.value))
            .collect();
        let hidden: Vec<(&str, &str)> = check
            .held_out_paths()
            .into_iter()
            .map(|p| (p.key, p.value))
            .collect();
        for (key, value) in outputs {
            if let Err(problem) = normalize_relative(value) {
                self.push(
                    self.find_value(value, span),
                    &format!("{field}.{key}"),
                    problem.describe(value, "/workspace"),
                );
            }
        }
        for (key, value) in hidden {
            let at = self.find_value(value, span).or(Some(span.clone()));
            match hidden_dir {
                Some(dir) => {
                    let resolved = self.resolve(
                        value,
                        at.clone(),
                        &format!("{field}.{key}"),
                        dir,
                        "the hidden folder",
                        Some(Kind::Any),
                    );
                    if let Some(path) = resolved
                        && !is_within(&path, dir)
                    {
                        self.push(
                            at,
                            &format!("{field}.{key}"),
                            format!("`{value}` resolves outside the hidden folder"),
                        );
                    }
                }
                None => self.push(
                    at,
                    &format!("{field}.{key}"),
                    format!("`{value}` names a held-out file but the task has no `hidden/` folder"),
                ),
            }
        }
    }

    /// Every symlink in the task folder must point inside it, and those in the workspace inside
    /// the workspace (so nothing held out is reachable from the agent's files).
    fn check_symlinks(&mut self, workspace: Option<&Path>) {
        let root = self.root.clone();
        for entry in walkdir::WalkDir::new(&root).sort_by_file_name() {
            let entry = match entry {
                Ok(entry) => entry,
                Err(err) => {
                    let path = err.path().map_or_else(|| root.clone(), Path::to_path_buf);
                    self.errors.push(TaskError::Io {
                        path,
                        source: err.into(),
                    });
                    continue;
                }
            };
            if !entry.path_is_symlink() {
                continue;
            }
            let rel = relative_slash(entry.path(), &root);
            let field = format!("file {rel}");
            let target = match entry.path().canonicalize() {
                Ok(target) => target,
                Err(_) => {
                    self.push(None, &field, format!("symlink `{rel}` is dangling; remove it or point it at a file inside the task folder"));
                    continue;
                }
            };
            if !is_within(&target, &root) {
                self.push(None, &field, format!("symlink `{rel}` points out of the task folder (to {}); copy the file in instead", target.display()));
            } else if let Some(ws) = workspace
                && entry.path().starts_with(ws)
                && !is_within(&target, ws)
            {
                self.push(None, &field, format!("symlink `{rel}` in the workspace points outside it (to {}); the agent must not reach other task files", target.display()));
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    File,
    Dir,
    Any,
}

fn visit(
    node: usize,
    stages: &[StageFile],
    index: &BTreeMap<String, usize>,
    state: &mut [u8],
    order: &mut Vec<usize>,
    path: &mut Vec<usize>,
) -> Result<(), Vec<usize>> {
    match state[node] {
        2 => return Ok(()),
        1 => {
            let start = path.iter().position(|&n| n == node).unwrap_or(0);
            let mut cycle = path[start..].to_vec();
            cycle.push(node);
            return Err(cycle);
        }
        _ => {}
    }
    state[node] = 1;
    path.push(node);
    for dep in &stages[node].depends_on {
        if let Some(&next) = index.get(dep.get_ref()) {
            visit(next, stages, index, state, order, path)?;
        }
    }
    path.pop();
    state[node] = 2;
    order.push(node);
    Ok(())
}

/// sha256 over every entry of `root`, sorted by relative path: for each, the path, a kind byte
/// (file / symlink), the length and the bytes (a symlink's target text).
pub(crate) fn content_hash(root: &Path) -> Result<String, TaskError> {
    let mut hasher = Sha256::new();
    for entry in walkdir::WalkDir::new(root).sort_by_file_name() {
        let entry = entry.map_err(|err| TaskError::Io {
            path: err
                .path()
                .map_or_else(|| root.to_path_buf(), Path::to_path_buf),
            source: err.into(),
        })?;
        let (kind, bytes) = if entry.path_is_symlink() {
            let target = std::fs::read_link(entry.path()).map_err(|source| TaskError::Io {
                path: entry.path().to_path_buf(),
                source,
            })?;
            (b'l', target.to_string_lossy().into_owned().into_bytes())
        } else if entry.file_type().is_file() {
            let bytes = std::fs::read(entry.path()).map_err(|source| TaskError::Io {
                path: entry.path().to_path_buf(),
                source,
            })?;
            (b'f', bytes)
        } else {
            continue;
        };
        let rel = relative_slash(entry.path(), root);
        hasher.update(rel.as_bytes());
        hasher.update([0, kind]);
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(&bytes);
    }
    Ok(hex::encode(hasher.finalize()))
}
