//! The thin commands over other crates: `tasks validate`, `tasks import`, `rubric aggregate`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use sandbox::child::{ChildSpec, SupervisedChild};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

async fn green(args: &[&str]) -> (Option<i32>, String, String) {
    let mut child = SupervisedChild::spawn(ChildSpec {
        program: env!("CARGO_BIN_EXE_green-agent").to_owned(),
        args: args.iter().map(|s| (*s).to_owned()).collect(),
        env: std::env::vars().collect(),
        clear_env: true,
        cwd: repo(),
        limits: None,
    })
    .expect("spawn");
    let mut out = String::new();
    let exit = tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(l) = child.next_stdout_line().await {
            out.push_str(&l);
            out.push('\n');
        }
        child.wait().await
    })
    .await
    .expect("finishes");
    (exit.code, out, child.stderr_tail())
}

#[tokio::test]
async fn tasks_validate_lists_the_bundled_suite() {
    let (code, out, err) = green(&["tasks", "validate", "tasks/examples"]).await;
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("ok  generic-csv-stats (generic)"), "{out}");
    assert!(out.contains("task(s) valid"), "{out}");
}

#[tokio::test]
async fn tasks_validate_reports_errors_with_a_non_zero_exit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad");
    std::fs::create_dir_all(&bad).expect("mkdir");
    std::fs::write(bad.join("task.toml"), "id = \"bad\"\n").expect("write");
    let (code, _out, err) = green(&["tasks", "validate", &dir.path().display().to_string()]).await;
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("task.toml"), "{err}");
}

#[tokio::test]
async fn tasks_import_writes_valid_tasks() {
    let dest = tempfile::tempdir().expect("tempdir");
    let src = repo().join("tasks/tests/fixtures/harbor/word-count");
    let (code, out, err) = green(&[
        "tasks",
        "import",
        "harbor",
        &src.display().to_string(),
        &dest.path().display().to_string(),
    ])
    .await;
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.contains("1 task(s) imported and validated"), "{out}");
    let (code, out, err) = green(&["tasks", "validate", &dest.path().display().to_string()]).await;
    assert_eq!(code, Some(0), "imported tasks validate: {out}\n{err}");
    let (code, _, err) = green(&[
        "tasks",
        "import",
        "nonsense",
        "a",
        &dest.path().display().to_string(),
    ])
    .await;
    assert_eq!(code, Some(2));
    assert!(err.contains("unknown import kind `nonsense`"), "{err}");
}

#[tokio::test]
async fn shared_data_rubric_aggregate_reproduces_the_stored_root() {
    let graded = bench_data::path("paperbench/graded/semantic-self-consistency.json");
    let text = std::fs::read_to_string(&graded).expect("vendored PaperBench judgment");
    let stored = serde_json::from_str::<serde_json::Value>(&text).expect("json")["score"]
        .as_f64()
        .expect("root score");
    let (code, out, err) = green(&["rubric", "aggregate", &graded.display().to_string()]).await;
    assert_eq!(code, Some(0), "{err}");
    let ours: f64 = out.trim().parse().expect("a number");
    assert!((ours - stored).abs() < 1e-6, "ours {ours}, stored {stored}");
}

#[tokio::test]
async fn rubric_aggregate_json_prints_every_node_at_full_precision() {
    let dir = tempfile::tempdir().expect("tempdir");
    let graded = dir.path().join("graded.json");
    let tree = serde_json::json!({
        "id": "root", "requirements": "r", "weight": 1,
        "sub_tasks": [
            {"id": "a", "requirements": "a", "weight": 1, "score": 1.0, "sub_tasks": []},
            {"id": "b", "requirements": "b", "weight": 2, "sub_tasks": [
                {"id": "b1", "requirements": "b1", "weight": 1, "score": 0.0, "sub_tasks": []},
                {"id": "b2", "requirements": "b2", "weight": 2, "score": 1.0, "sub_tasks": []}
            ]}
        ]
    });
    std::fs::write(&graded, tree.to_string()).expect("write");
    let (code, out, err) = green(&[
        "rubric",
        "aggregate",
        &graded.display().to_string(),
        "--json",
    ])
    .await;
    assert_eq!(code, Some(0), "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    // b = 2/3; root = (1 * 1 + 2 * 2/3) / 3 = 7/9, exactly as f64 arithmetic gives it.
    let b = (0.0 * 1.0 + 1.0 * 2.0) / 3.0;
    let root = (1.0 * 1.0 + 2.0 * b) / 3.0;
    assert_eq!(v["root"].as_f64(), Some(root), "{out}");
    assert_eq!(v["tree"]["score"].as_f64(), Some(root));
    assert_eq!(v["tree"]["sub_tasks"][0]["score"].as_f64(), Some(1.0));
    assert_eq!(v["tree"]["sub_tasks"][1]["id"], "b");
    assert_eq!(v["tree"]["sub_tasks"][1]["score"].as_f64(), Some(b));
    assert_eq!(
        v["tree"]["sub_tasks"][1]["sub_tasks"][0]["score"].as_f64(),
        Some(0.0)
    );
    let (code, plain, _) = green(&["rubric", "aggregate", &graded.display().to_string()]).await;
    assert_eq!(code, Some(0));
    assert_eq!(plain.trim(), format!("{root:.6}"));
}

/// SciCoQA's papers and code: from a local mirror (`--sources`), fetched (`--fetch`, refused
/// clearly when the host cannot be reached), or absent, which the instruction and `tasks
/// validate` both say.
#[tokio::test]
async fn scicoqa_sources_come_from_a_mirror_or_are_reported_missing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let jsonl = dir.path().join("d.jsonl");
    // 192.0.2.1 is TEST-NET-1: never reachable, network or not.
    std::fs::write(
        &jsonl,
        "{\"discrepancy_id\": \"ab12\", \"paper_url\": \"http://192.0.2.1/p.pdf\", \"code_url\": \"http://192.0.2.1/code\", \"discrepancy_description\": \"The code uses the mean, the paper the median.\"}\n",
    )
    .expect("write");
    let src = jsonl.display().to_string();

    // Without sources.
    let bare = dir.path().join("bare");
    let (code, out, err) = green(&[
        "tasks",
        "import",
        "scicoqa",
        &src,
        &bare.display().to_string(),
    ])
    .await;
    assert_eq!(code, Some(0), "{out}\n{err}");
    let instruction =
        std::fs::read_to_string(bare.join("scicoqa-ab12/instruction.md")).expect("instruction");
    assert!(
        instruction.contains("Imported without sources"),
        "{instruction}"
    );
    assert!(instruction.contains("--sources DIR"), "{instruction}");
    let (code, out, err) = green(&["tasks", "validate", &bare.display().to_string()]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("note: imported without its paper and code"),
        "validate says so: {out}"
    );

    // From a mirror.
    let mirror = dir.path().join("mirror/scicoqa-ab12");
    std::fs::create_dir_all(mirror.join("code")).expect("mkdir");
    std::fs::write(mirror.join("paper.md"), "the paper").expect("write");
    std::fs::write(mirror.join("code/main.py"), "print(1)").expect("write");
    let mirrored = dir.path().join("mirrored");
    let (code, out, err) = green(&[
        "tasks",
        "import",
        "scicoqa",
        &src,
        &mirrored.display().to_string(),
        "--sources",
        &dir.path().join("mirror").display().to_string(),
    ])
    .await;
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(
        mirrored
            .join("scicoqa-ab12/workspace/code/main.py")
            .is_file()
    );
    let instruction =
        std::fs::read_to_string(mirrored.join("scicoqa-ab12/instruction.md")).expect("instr");
    assert!(!instruction.contains("Imported without sources"));
    let (_, out, _) = green(&["tasks", "validate", &mirrored.display().to_string()]).await;
    assert!(!out.contains("note:"), "{out}");

    // Fetched, from a host that cannot be reached.
    let fetched = dir.path().join("fetched");
    let (code, out, err) = green(&[
        "tasks",
        "import",
        "scicoqa",
        &src,
        &fetched.display().to_string(),
        "--fetch",
    ])
    .await;
    assert_ne!(code, Some(0), "{out}");
    assert!(err.contains("--fetch needs network access"), "{err}");
    assert!(err.contains("--sources DIR"), "{err}");
    assert!(!fetched.join("scicoqa-ab12").exists(), "nothing imported");
}
