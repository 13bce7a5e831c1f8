use super::*;

/// `green-agent help run` lists every setting with its help text (and its default when it
/// has one); only the `[[judges]]` panel is file-only.
#[test]
fn run_help_lists_every_setting() {
    let mut cmd = command();
    cmd.build();
    let run = cmd.find_subcommand_mut("run").expect("run");
    let help = run.render_long_help().to_string();
    let defaults = serde_json::to_value(Settings::default()).expect("json");
    for (name, value) in defaults.as_object().expect("object") {
        if name == "judges" {
            assert!(help.contains("[[judges]]"), "judge panels are mentioned");
            continue;
        }
        let flag = format!("--{}", name.replace('_', "-"));
        let line = help
            .lines()
            .skip_while(|l| !l.trim_start().starts_with(&flag))
            .nth(1)
            .unwrap_or_else(|| panic!("{flag} missing from `help run`:\n{help}"));
        assert!(line.trim().len() > 10, "{flag} has help text: {line:?}");
        if !value.is_null() {
            assert!(
                line.contains("[default: "),
                "{flag} shows its default: {line}"
            );
        }
    }
}

/// `help run` names the `RB_*` variable of every run setting.
#[test]
fn run_help_lists_the_environment_variables() {
    let mut cmd = command();
    cmd.build();
    let help = cmd
        .find_subcommand_mut("run")
        .expect("run")
        .render_long_help()
        .to_string();
    for name in <Settings as Group>::NAMES {
        let var = format!("RB_{}", name.to_ascii_uppercase());
        assert!(help.contains(&var), "{var} missing from `help run`");
    }
}

/// `help resume` offers `--regrade`, saying that no agent runs again.
#[test]
fn resume_help_offers_regrade() {
    let mut cmd = command();
    cmd.build();
    let help = cmd
        .find_subcommand_mut("resume")
        .expect("resume")
        .render_long_help()
        .to_string();
    let text: String = help
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("--regrade"))
        .take(6)
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        text.contains("no agent runs again"),
        "--regrade and its help in `help resume`:\n{help}"
    );
}

/// Every positional argument and flag of every command has help text.
#[test]
fn every_argument_has_help() {
    fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
        for a in cmd.get_arguments() {
            let id = a.get_id().as_str();
            if id == "help" || id == "version" {
                continue;
            }
            if a.get_help().is_none_or(|h| h.to_string().trim().is_empty()) {
                missing.push(format!("{path} {id}"));
            }
        }
        for c in cmd.get_subcommands() {
            if c.get_name() != "help" {
                walk(c, &format!("{path} {}", c.get_name()), missing);
            }
        }
    }
    let mut cmd = command();
    cmd.build();
    let mut missing = Vec::new();
    walk(&cmd, "green-agent", &mut missing);
    assert!(missing.is_empty(), "arguments without help: {missing:?}");
}

/// A shown default is a value the flag accepts, and the help text names it (no default the
/// help contradicts, as `--judge-api`'s once did).
#[test]
fn shown_defaults_are_accepted_values() {
    let mut cmd = command();
    cmd.build();
    let run = cmd.find_subcommand_mut("run").expect("run").clone();
    for a in run.get_arguments() {
        let help = a.get_help().map(ToString::to_string).unwrap_or_default();
        let Some((_, shown)) = help.rsplit_once("[default: ") else {
            continue;
        };
        let shown = shown.trim_end_matches(']');
        let flag = format!("--{}", a.get_long().expect("a long flag"));
        run.clone()
            .try_get_matches_from(["run", "--tasks", "x", flag.as_str(), shown])
            .unwrap_or_else(|e| panic!("{flag} rejects its shown default {shown:?}: {e}"));
    }
    let judge = run
        .get_arguments()
        .find(|a| a.get_id() == "judge_api")
        .and_then(|a| a.get_help())
        .map(ToString::to_string)
        .expect("--judge-api");
    let (text, default) = judge.rsplit_once("[default: ").expect("a default");
    let default = default.trim_end_matches(']');
    assert!(
        text.contains(&format!("`{default}`")),
        "the help names the shown default {default}: {judge}"
    );
}

/// `view` and `serve` flags are settings too: the file's `[view]`/`[serve]` table, then
/// `RB_VIEW_*`/`RB_SERVE_*`, then the flag.
#[test]
fn view_and_serve_flags_resolve_file_env_flag() {
    use crate::config::{ServeLayer, ViewLayer};
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("rb.toml");
    std::fs::write(
        &file,
        "concurrency = 3\n[view]\nbind = \"127.0.0.1:9000\"\nno_open = true\n[serve]\ntasks = [\"a=/x\"]\nmax_running = 4\n",
    )
    .expect("write");
    let ctx = |env: &[(&str, &str)]| Context {
        config: Some(file.clone()),
        env: env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        results_dir: None,
        database_url: None,
    };
    let v: ViewSettings = ctx(&[]).group(&ViewLayer::default()).expect("view");
    assert_eq!(v.bind.port(), 9000);
    assert!(v.no_open);
    let v: ViewSettings = ctx(&[("RB_VIEW_BIND", "127.0.0.1:9001")])
        .group(&ViewLayer::default())
        .expect("view");
    assert_eq!(v.bind.port(), 9001);
    let s: ServeSettings = ctx(&[("RB_SERVE_MAX_RUNNING", "5")])
        .group(&ServeLayer::default())
        .expect("serve");
    assert_eq!(
        (s.tasks.as_slice(), s.max_running),
        (&["a=/x".to_owned()][..], 5)
    );
    let s: ServeSettings = ctx(&[("RB_SERVE_ALLOW_HOSTED", "oracle, nop,cmd")])
        .group(&ServeLayer {
            max_running: Some(6),
            ..ServeLayer::default()
        })
        .expect("serve");
    assert_eq!(s.max_running, 6);
    assert_eq!(s.allow_hosted, ["oracle", "nop", "cmd"]);
    // The run settings still read the top level, and only it.
    assert_eq!(
        ctx(&[])
            .settings(&Layer::default())
            .expect("run")
            .concurrency,
        3
    );
    // Flags parse from the command line as well.
    let cli = Cli::try_parse_from([
        "green-agent",
        "view",
        "--no-open",
        "--bind",
        "127.0.0.1:0",
        "r1",
    ])
    .expect("parse");
    let Command::View(args) = cli.command else {
        panic!("view")
    };
    assert_eq!(args.settings.no_open, Some(true));
    assert_eq!(args.runs, ["r1"]);
    std::fs::write(&file, "[view]\nbindd = \"x\"\n").expect("write");
    let e = ctx(&[])
        .group::<ViewSettings>(&ViewLayer::default())
        .expect_err("typo");
    assert!(e.to_string().contains("bindd"), "{e}");
}
