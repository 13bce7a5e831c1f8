//! The rules ARCHITECTURE.md states, checked on the source tree (rust-analyzer's tidy style): an
//! ordinary test, so a change that breaks one fails `scripts/test` instead of waiting for a
//! reviewer's goodwill. Each rule is a function over plain text (file paths and contents), so the
//! unit tests at the bottom plant one violation of each and see it reported.
//!
//! The rules:
//! 1. **The crate graph**: each crate depends only on the crates ARCHITECTURE.md's code map
//!    allows (`ALLOWED_DEPS`); `bench-data` is only ever a dev-dependency.
//! 2. **No module pairs**: inside a crate, no two modules import each other (a module and its
//!    ancestor may: a parent declares and re-exports its children, a child uses `super`).
//! 3. **Only `sandbox` spawns processes or talks to Docker**: no library or binary source outside
//!    `sandbox` names `process::Command`, `Command::new`, `fork` or `bollard`, and no other crate
//!    depends on `bollard` (clippy's `disallowed-types` catches the types; this catches the rest).
//! 4. **The viewer never writes**: `green-agent/src/view/` holds no SQL write, no file write and
//!    no call into the store's writing side.
//! 5. **Binaries are thin**: a `main.rs` is at most `MAX_MAIN_LINES` lines.
//! 6. **No `utils`**: no module named `utils`, `util`, `helpers` or `misc`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Our crates (directory → package name) and the crates each may depend on (normal and build
/// dependencies; dev-dependencies are free, but for `bench-data` rule 1 checks separately).
const CRATES: &[(&str, &str, &[&str])] = &[
    ("protocol", "a2a-protocol", &[]),
    ("sandbox", "sandbox", &[]),
    ("rubrics", "rubrics", &["sandbox"]),
    ("tasks", "tasks", &["rubrics", "sandbox"]),
    ("model-proxy", "model-proxy", &[]),
    (
        "white-agent-adapter",
        "white-agent-adapter",
        &["a2a-protocol", "sandbox"],
    ),
    (
        "green-agent",
        "green-agent",
        &[
            "a2a-protocol",
            "sandbox",
            "tasks",
            "rubrics",
            "model-proxy",
            "white-agent-adapter",
        ],
    ),
    ("bench-data", "bench-data", &[]),
    (
        "tests",
        "e2e-tests",
        &["sandbox", "green-agent", "white-agent-adapter"],
    ),
];

const MAX_MAIN_LINES: usize = 60;

/// One violation: where and what.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Violation {
    rule: &'static str,
    place: String,
    what: String,
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the workspace")
        .to_path_buf()
}

/// Every `.rs` file under `dir`, with its text.
fn rust_files(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                let text = std::fs::read_to_string(&path).expect("source files are UTF-8");
                out.push((path, text));
            }
        }
    }
    out.sort();
    out
}

// ---------------------------------------------------------------- rule 1: the crate graph

/// The names of our crates a manifest depends on, per section (`dependencies`,
/// `build-dependencies`, `dev-dependencies`).
fn our_dependencies(manifest: &str) -> BTreeMap<String, BTreeSet<String>> {
    let ours: BTreeSet<&str> = CRATES.iter().map(|(_, package, _)| *package).collect();
    let value: toml::Table = manifest.parse().expect("Cargo.toml parses");
    let mut out = BTreeMap::new();
    for section in ["dependencies", "build-dependencies", "dev-dependencies"] {
        let names = value
            .get(section)
            .and_then(|deps| deps.as_table())
            .map(|deps| {
                deps.iter()
                    .map(|(key, spec)| {
                        // `a2a = { package = "a2a-lf", ... }` renames: the package is what counts.
                        spec.get("package")
                            .and_then(|package| package.as_str())
                            .unwrap_or(key)
                            .to_string()
                    })
                    .filter(|name| ours.contains(name.as_str()) || name == "bollard")
                    .collect::<BTreeSet<_>>()
            })
            .unwrap_or_default();
        out.insert(section.to_string(), names);
    }
    out
}

fn check_crate_graph(manifests: &[(&str, &str)]) -> Vec<Violation> {
    let mut out = Vec::new();
    for (dir, manifest) in manifests {
        let Some((_, package, allowed)) = CRATES.iter().find(|(d, _, _)| d == dir) else {
            out.push(Violation {
                rule: "crate graph",
                place: format!("{dir}/Cargo.toml"),
                what: "a crate the tidy test does not know: add it to CRATES with the crates it may depend on (and to ARCHITECTURE.md's code map)".into(),
            });
            continue;
        };
        for (section, names) in our_dependencies(manifest) {
            for name in names {
                let dev = section == "dev-dependencies";
                if name == "bench-data" && !dev {
                    out.push(Violation {
                        rule: "crate graph",
                        place: format!("{dir}/Cargo.toml [{section}]"),
                        what: "bench-data may only be a dev-dependency (tests only)".into(),
                    });
                } else if name == "bollard" && *package != "sandbox" {
                    out.push(Violation {
                        rule: "only sandbox talks to Docker",
                        place: format!("{dir}/Cargo.toml [{section}]"),
                        what: "depends on bollard".into(),
                    });
                } else if !dev
                    && name != "bollard"
                    && name != "bench-data"
                    && !allowed.contains(&name.as_str())
                {
                    out.push(Violation {
                        rule: "crate graph",
                        place: format!("{dir}/Cargo.toml [{section}]"),
                        what: format!(
                            "{package} may not depend on {name} (allowed: {allowed:?}); see ARCHITECTURE.md's code map"
                        ),
                    });
                }
            }
        }
    }
    out
}

// ---------------------------------------------------------------- source text helpers

/// The code of a file without comments, string contents and its `#[cfg(test)]` modules: what the
/// library or binary itself compiles to. Line structure is kept.
fn code_only(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let rest = &text[i..];
        if rest.starts_with("//") {
            let end = rest.find('\n').unwrap_or(rest.len());
            i += end;
        } else if rest.starts_with("/*") {
            let end = rest.find("*/").map_or(rest.len(), |end| end + 2);
            out.extend(rest[..end].chars().filter(|c| *c == '\n'));
            i += end;
        } else if rest.starts_with("r#\"") || rest.starts_with("r\"") {
            let hashes = rest[1..].chars().take_while(|c| *c == '#').count();
            let close = format!("\"{}", "#".repeat(hashes));
            let start = 2 + hashes;
            let end = rest[start..]
                .find(&close)
                .map_or(rest.len(), |end| start + end + close.len());
            out.push_str("\"\"");
            out.extend(rest[..end].chars().filter(|c| *c == '\n'));
            i += end;
        } else if rest.starts_with('"') {
            let mut j = 1;
            let rb = rest.as_bytes();
            while j < rb.len() && rb[j] != b'"' {
                if rb[j] == b'\\' {
                    j += 1;
                }
                j += 1;
            }
            let end = (j + 1).min(rest.len());
            out.push_str("\"\"");
            out.extend(rest[..end].chars().filter(|c| *c == '\n'));
            i += end;
        } else if rest.starts_with("'\"'") {
            out.push_str("' '");
            i += 3;
        } else {
            let c = rest.chars().next().expect("not at the end");
            out.push(c);
            i += c.len_utf8();
        }
    }
    strip_test_modules(&out)
}

/// Drops every `#[cfg(test)]` item that is a module (`mod x { ... }` or `mod x;`).
fn strip_test_modules(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        let trimmed = after.trim_start();
        let is_mod = trimmed.starts_with("mod ") || trimmed.starts_with("pub mod ");
        if !is_mod {
            out.push_str("#[cfg(test)]");
            rest = after;
            continue;
        }
        let brace = after.find('{');
        let semi = after.find(';');
        match (brace, semi) {
            (Some(b), Some(s)) if s < b => rest = &after[s + 1..],
            (None, Some(s)) => rest = &after[s + 1..],
            (Some(b), _) => {
                let mut depth = 0usize;
                let mut end = after.len();
                for (k, c) in after[b..].char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = b + k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                rest = &after[end..];
            }
            (None, None) => rest = "",
        }
    }
    out.push_str(rest);
    out
}

// ---------------------------------------------------------------- rule 2: no module pairs

/// The module path of a source file relative to its crate's `src/` (`a/b.rs` and `a/b/mod.rs`
/// are `a::b`; `lib.rs` and `main.rs` are the root, `""`).
fn module_of(relative: &Path) -> String {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|part| part.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") {
        parts.push(stem.to_string());
    }
    parts.join("::")
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths a piece of code names from `at` on: `a::b::C`, or for a group `a::{b, c::D}` each
/// member (`a::b`, `a::c::D`).
fn paths_at(code: &str) -> Vec<Vec<String>> {
    let mut prefix: Vec<String> = Vec::new();
    let mut rest = code;
    loop {
        let ident: String = rest.chars().take_while(|c| is_ident_char(*c)).collect();
        if ident.is_empty() {
            if rest.starts_with('{') {
                // A group: split its top level at commas.
                let mut depth = 0usize;
                let mut start = 1;
                let mut members = Vec::new();
                for (k, c) in rest.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                members.push(&rest[start..k]);
                                break;
                            }
                        }
                        ',' if depth == 1 => {
                            members.push(&rest[start..k]);
                            start = k + 1;
                        }
                        _ => {}
                    }
                }
                let mut out = Vec::new();
                for member in members {
                    for tail in paths_at(member.trim_start()) {
                        let mut full = prefix.clone();
                        full.extend(tail);
                        out.push(full);
                    }
                }
                if out.is_empty() {
                    out.push(prefix);
                }
                return out;
            }
            return vec![prefix];
        }
        rest = &rest[ident.len()..];
        prefix.push(ident);
        let trimmed = rest.trim_start();
        if let Some(after) = trimmed.strip_prefix("::") {
            rest = after.trim_start();
        } else {
            return vec![prefix];
        }
    }
}

/// The modules of this crate a file's code refers to, as module paths (`crate::a::b::X` → the
/// longest known module prefix, `a::b`; `super::x` resolved from the file's module).
fn referenced_modules(module: &str, code: &str, known: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let here: Vec<&str> = if module.is_empty() {
        Vec::new()
    } else {
        module.split("::").collect()
    };
    for (at, _) in code
        .match_indices("crate::")
        .chain(code.match_indices("super::"))
    {
        if at > 0 && code[..at].chars().next_back().is_some_and(is_ident_char) {
            continue; // `$crate::`, `mycrate::`
        }
        let is_super = code[at..].starts_with("super::");
        if is_super && at >= 7 && code[..at].ends_with("super::") {
            continue; // the tail of a `super::super::` chain, counted from its head
        }
        let mut base: Vec<String> = if is_super {
            let mut base: Vec<String> = here.iter().map(|s| s.to_string()).collect();
            let mut tail = &code[at..];
            while let Some(after) = tail.strip_prefix("super::") {
                base.pop();
                tail = after;
            }
            let mut full = Vec::new();
            for path in paths_at(tail) {
                let mut candidate = base.clone();
                candidate.extend(path);
                full.push(candidate);
            }
            for candidate in full {
                if let Some(found) = longest_known(&candidate, known) {
                    out.insert(found);
                }
            }
            continue;
        } else {
            Vec::new()
        };
        for path in paths_at(&code[at + "crate::".len()..]) {
            base.clear();
            base.extend(path);
            if let Some(found) = longest_known(&base, known) {
                out.insert(found);
            }
        }
    }
    out.remove(module);
    out
}

fn longest_known(path: &[String], known: &BTreeSet<String>) -> Option<String> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].join("::"))
        .find(|candidate| known.contains(candidate))
}

fn is_ancestor(a: &str, b: &str) -> bool {
    a.is_empty() || b.starts_with(&format!("{a}::"))
}

/// Module pairs of one crate that import each other. `files` are (path relative to `src/`,
/// text); the root (`lib.rs`) is excluded (it declares every module).
fn check_module_pairs(crate_dir: &str, files: &[(PathBuf, String)]) -> Vec<Violation> {
    let known: BTreeSet<String> = files.iter().map(|(path, _)| module_of(path)).collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (path, text) in files {
        let module = module_of(path);
        if module.is_empty() {
            continue;
        }
        let refs = referenced_modules(&module, &code_only(text), &known);
        edges.entry(module).or_default().extend(refs);
    }
    let mut out = Vec::new();
    for (a, targets) in &edges {
        for b in targets {
            if a < b
                && !is_ancestor(a, b)
                && !is_ancestor(b, a)
                && edges.get(b).is_some_and(|back| back.contains(a))
            {
                out.push(Violation {
                    rule: "no module pairs",
                    place: format!("{crate_dir}: {a} <-> {b}"),
                    what: "two modules import each other: move what both need into a third module, or make one depend on the other only".into(),
                });
            }
        }
    }
    out
}

// ---------------------------------------------------------------- rule 3: processes and Docker

fn check_no_spawn(crate_dir: &str, path: &Path, text: &str) -> Vec<Violation> {
    if crate_dir == "sandbox" {
        return Vec::new();
    }
    let code = code_only(text);
    let mut out = Vec::new();
    for needle in [
        "process::Command",
        "Command::new",
        "bollard",
        "unistd::fork",
        "libc::fork",
        "process::exec",
    ] {
        if let Some(line) = code.lines().position(|line| line.contains(needle)) {
            out.push(Violation {
                rule: "only sandbox spawns processes or talks to Docker",
                place: format!("{}:{}", path.display(), line + 1),
                what: format!(
                    "names `{needle}`: use `sandbox::child::SupervisedChild` or a `Sandbox`"
                ),
            });
        }
    }
    out
}

// ---------------------------------------------------------------- rule 4: the viewer never writes

fn check_viewer_read_only(path: &Path, text: &str) -> Vec<Violation> {
    let code = code_only(text);
    let mut out = Vec::new();
    // SQL text is inside strings, which `code_only` blanks: look at the raw text's strings for it.
    let sql_writes = [
        "INSERT INTO",
        "UPDATE ",
        "DELETE FROM",
        "CREATE TABLE",
        "DROP ",
    ];
    let raw_code = strip_test_modules(text);
    for needle in sql_writes {
        if let Some(line) = raw_code
            .lines()
            .position(|line| line.contains(needle) && !line.trim_start().starts_with("//"))
        {
            out.push(Violation {
                rule: "the viewer never writes",
                place: format!("{}:{}", path.display(), line + 1),
                what: format!("SQL `{needle}`"),
            });
        }
    }
    for needle in [
        "fs::write",
        "File::create",
        "create_dir",
        "OpenOptions",
        "remove_file",
        "remove_dir",
        "fs::rename",
        "store::Store",
        "RunStore",
    ] {
        if let Some(line) = code.lines().position(|line| line.contains(needle)) {
            out.push(Violation {
                rule: "the viewer never writes",
                place: format!("{}:{}", path.display(), line + 1),
                what: format!("names `{needle}`"),
            });
        }
    }
    out
}

// ---------------------------------------------------------------- rules 5 and 6

fn check_thin_main(path: &Path, text: &str) -> Vec<Violation> {
    let lines = text.lines().count();
    if lines > MAX_MAIN_LINES {
        vec![Violation {
            rule: "binaries are thin",
            place: path.display().to_string(),
            what: format!(
                "{lines} lines (at most {MAX_MAIN_LINES}): move the logic into the library"
            ),
        }]
    } else {
        Vec::new()
    }
}

fn check_no_utils(path: &Path) -> Vec<Violation> {
    let name = module_of(Path::new(
        path.file_name()
            .expect("a file has a name")
            .to_str()
            .unwrap_or(""),
    ));
    let dir_name = path
        .parent()
        .and_then(|dir| dir.file_name())
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let bad = ["utils", "util", "helpers", "misc"];
    let module = if name.is_empty() { dir_name } else { name };
    if bad.contains(&module.as_str()) {
        vec![Violation {
            rule: "no utils",
            place: path.display().to_string(),
            what: format!("a module named `{module}`: name it after its one job"),
        }]
    } else {
        Vec::new()
    }
}

// ---------------------------------------------------------------- the test over the tree

/// Modules declared `#[cfg(test)] mod name;` in their parent's file: unit-test code kept in a
/// file of its own, which the rules about the library's code do not cover.
fn test_only_modules(files: &[(PathBuf, String)]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (path, text) in files {
        let parent = module_of(path);
        let mut rest = text.as_str();
        while let Some(at) = rest.find("#[cfg(test)]") {
            rest = &rest[at + "#[cfg(test)]".len()..];
            let trimmed = rest.trim_start();
            let trimmed = trimmed.strip_prefix("pub ").unwrap_or(trimmed);
            if let Some(decl) = trimmed.strip_prefix("mod ") {
                let name: String = decl.chars().take_while(|c| is_ident_char(*c)).collect();
                if decl[name.len()..].trim_start().starts_with(';') {
                    out.insert(if parent.is_empty() {
                        name
                    } else {
                        format!("{parent}::{name}")
                    });
                }
            }
        }
    }
    out
}

fn is_within(module: &str, roots: &BTreeSet<String>) -> bool {
    roots
        .iter()
        .any(|root| module == root || module.starts_with(&format!("{root}::")))
}

fn all_violations(root: &Path) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut manifests = Vec::new();
    let members: Vec<&str> = CRATES.iter().map(|(dir, _, _)| *dir).collect();
    for dir in &members {
        let manifest =
            std::fs::read_to_string(root.join(dir).join("Cargo.toml")).expect("member manifest");
        manifests.push((*dir, manifest));
    }
    // A workspace member the tidy test does not know is a violation too.
    let workspace: toml::Table = std::fs::read_to_string(root.join("Cargo.toml"))
        .expect("workspace manifest")
        .parse()
        .expect("workspace manifest parses");
    for member in workspace["workspace"]["members"]
        .as_array()
        .expect("members")
    {
        let member = member.as_str().expect("a member is a path");
        if !members.contains(&member) {
            out.push(Violation {
                rule: "crate graph",
                place: format!("{member}/Cargo.toml"),
                what: "a workspace member the tidy test does not know: add it to CRATES".into(),
            });
        }
    }
    let refs: Vec<(&str, &str)> = manifests.iter().map(|(d, m)| (*d, m.as_str())).collect();
    out.extend(check_crate_graph(&refs));
    for dir in &members {
        let src = root.join(dir).join("src");
        let files = rust_files(&src);
        let relative: Vec<(PathBuf, String)> = files
            .iter()
            .map(|(path, text)| {
                (
                    path.strip_prefix(&src).expect("under src").to_path_buf(),
                    text.clone(),
                )
            })
            .collect();
        // A crate with a library and binaries: the binaries are separate crates; check the
        // library's modules among themselves.
        let tests_only = test_only_modules(&relative);
        let library: Vec<(PathBuf, String)> = relative
            .iter()
            .filter(|(path, _)| path != Path::new("main.rs") && !path.starts_with("bin"))
            .filter(|(path, _)| !is_within(&module_of(path), &tests_only))
            .cloned()
            .collect();
        out.extend(check_module_pairs(dir, &library));
        for (path, text) in &files {
            let within_src = path.strip_prefix(&src).expect("under src");
            if is_within(&module_of(within_src), &tests_only) {
                continue; // compiled only into the crate's unit tests
            }
            let shown = path.strip_prefix(root).unwrap_or(path);
            out.extend(check_no_spawn(dir, shown, text));
            out.extend(check_no_utils(shown));
            if path.file_name().is_some_and(|name| name == "main.rs")
                || path.starts_with(src.join("bin"))
            {
                out.extend(check_thin_main(shown, text));
            }
            if shown.starts_with("green-agent/src/view") {
                out.extend(check_viewer_read_only(shown, text));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn the_tree_keeps_the_architecture_rules() {
    let violations = all_violations(&workspace_root());
    let shown: Vec<String> = violations
        .iter()
        .map(|v| format!("[{}] {}: {}", v.rule, v.place, v.what))
        .collect();
    assert!(
        violations.is_empty(),
        "{} violation(s) of ARCHITECTURE.md's rules:\n{}",
        violations.len(),
        shown.join("\n")
    );
}

// ---------------------------------------------------------------- each rule fails on a planted violation

#[test]
fn a_planted_crate_edge_is_reported() {
    let manifest =
        "[package]\nname = \"rubrics\"\n[dependencies]\ntasks = { path = \"../tasks\" }\n";
    let found = check_crate_graph(&[("rubrics", manifest)]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].what.contains("rubrics may not depend on tasks"));

    let manifest =
        "[dependencies]\nbench-data = { path = \"../bench-data\" }\nbollard = \"0.19\"\n";
    let found = check_crate_graph(&[("tasks", manifest)]);
    let rules: Vec<&str> = found.iter().map(|v| v.rule).collect();
    assert_eq!(
        rules,
        ["crate graph", "only sandbox talks to Docker"],
        "{found:?}"
    );

    // A renamed dependency counts by its package.
    let manifest =
        "[dependencies]\nproto = { package = \"green-agent\", path = \"../green-agent\" }\n";
    assert_eq!(check_crate_graph(&[("protocol", manifest)]).len(), 1);
    // Dev-dependencies are free (bench-data included).
    let manifest = "[dev-dependencies]\nbench-data = { path = \"../bench-data\" }\ngreen-agent = { path = \"../green-agent\" }\n";
    assert!(check_crate_graph(&[("protocol", manifest)]).is_empty());
}

#[test]
fn a_planted_module_pair_is_reported_and_ancestors_are_not() {
    let files = vec![
        (
            PathBuf::from("lib.rs"),
            "pub mod a; pub mod b; pub mod c;".to_string(),
        ),
        (PathBuf::from("a.rs"), "use crate::b::Thing;\n".to_string()),
        (
            PathBuf::from("b/mod.rs"),
            "pub mod inner;\nfn f() { crate::a::g(); }\n".to_string(),
        ),
        // A child using its parent is not a pair.
        (
            PathBuf::from("b/inner.rs"),
            "use super::Thing;\n".to_string(),
        ),
        // A grouped import and a comment that names a module.
        (
            PathBuf::from("c.rs"),
            "// crate::a is mentioned only here\nuse crate::{b::inner::X, b};\n".to_string(),
        ),
    ];
    let found = check_module_pairs("demo", &files);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].place, "demo: a <-> b");

    // An import only inside the test module does not count.
    let files = vec![
        (PathBuf::from("a.rs"), "use crate::b::Thing;\n".to_string()),
        (
            PathBuf::from("b.rs"),
            "pub struct Thing;\n#[cfg(test)]\nmod tests {\n    use crate::a::x;\n}\n".to_string(),
        ),
    ];
    assert!(check_module_pairs("demo", &files).is_empty());

    // `super::super::` and `super::sibling` resolve from the file's module.
    let files = vec![
        (
            PathBuf::from("x/mod.rs"),
            "pub mod p; pub mod q;".to_string(),
        ),
        (PathBuf::from("x/p.rs"), "use super::q::Y;\n".to_string()),
        (PathBuf::from("x/q.rs"), "use super::p::Z;\n".to_string()),
    ];
    let found = check_module_pairs("demo", &files);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].place, "demo: x::p <-> x::q");
}

#[test]
fn a_planted_spawn_or_docker_call_is_reported_outside_sandbox_only() {
    let text = "fn f() {\n    let child = std::process::Command::new(\"sh\");\n}\n";
    let found = check_no_spawn("rubrics", Path::new("rubrics/src/x.rs"), text);
    assert_eq!(found.len(), 2, "{found:?}"); // `process::Command` and `Command::new`
    assert!(found[0].place.ends_with(":2"));
    assert!(check_no_spawn("sandbox", Path::new("sandbox/src/x.rs"), text).is_empty());
    let text = "use bollard::Docker;\n";
    assert_eq!(
        check_no_spawn("green-agent", Path::new("g.rs"), text).len(),
        1
    );
    // Named in a string or a comment only: not code.
    let text = "// std::process::Command is banned here\nconst HELP: &str = \"bollard\";\n";
    assert!(check_no_spawn("green-agent", Path::new("g.rs"), text).is_empty());
}

#[test]
fn a_planted_viewer_write_is_reported() {
    let text = "async fn f(pool: &Pool) {\n    sqlx::query(\"DELETE FROM trials\").execute(pool).await;\n}\n";
    let found = check_viewer_read_only(Path::new("green-agent/src/view/data.rs"), text);
    assert_eq!(found.len(), 1, "{found:?}");
    let text = "fn f() { std::fs::write(\"x\", \"y\").ok(); }\n";
    assert_eq!(check_viewer_read_only(Path::new("v.rs"), text).len(), 1);
    let text = "fn f() {}\n#[cfg(test)]\nmod tests {\n    fn g() { std::fs::write(\"x\", \"y\").ok(); }\n}\n";
    assert!(check_viewer_read_only(Path::new("v.rs"), text).is_empty());
}

#[test]
fn a_planted_fat_main_and_a_utils_module_are_reported() {
    let text = "fn main() {}\n".repeat(MAX_MAIN_LINES + 1);
    assert_eq!(check_thin_main(Path::new("x/src/main.rs"), &text).len(), 1);
    assert!(check_thin_main(Path::new("x/src/main.rs"), "fn main() {}\n").is_empty());
    assert_eq!(check_no_utils(Path::new("x/src/utils.rs")).len(), 1);
    assert_eq!(check_no_utils(Path::new("x/src/helpers/mod.rs")).len(), 1);
    assert!(check_no_utils(Path::new("x/src/report.rs")).is_empty());
}
