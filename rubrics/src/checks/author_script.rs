//! A task-author script's run (Harbor verifier, `command`) through our root wrapper
//! (`python/author_run.py`): the script runs as [`crate::env::AUTHOR_USER`] and we learn
//! whether it executed a workspace program, which the report then flags
//! ([`RAN_AGENT_CODE`]): the script's children share its uid, so agent code it runs could
//! write its verdict.

use std::collections::BTreeMap;

use crate::checks::agent_run::AgentRun;
use crate::env::{AUTHOR_USER, Env, Fault, LOG_CAP};

/// The prefix of the detail (and of the report's flag) saying that a task-author script
/// executed a workspace program.
pub const RAN_AGENT_CODE: &str = "verifier_ran_agent_code";

/// A finished task-author script.
pub(crate) struct AuthorRun {
    pub out: sandbox::ExecOutcome,
    /// What it executed of the workspace: (how, path).
    pub ran: Vec<(String, String)>,
    /// Its processes that outlived their parent (pid, program): the wrapper is the script's
    /// subreaper, so it sees each one.
    pub outlived: Vec<(u64, String)>,
    /// A Harbor verifier's run ([`exec_author`] with `harbor`): why the wrapper could not lay
    /// out Harbor's paths (the script did not run).
    pub layout_error: Option<String>,
    /// A Harbor verifier's run: the reward files as the wrapper read them with the script's
    /// uid once every process of that uid was killed (`{"reward.txt": R, "reward.json": R}`,
    /// R = `{"text"}`, `{"missing"}` or `{"too_large"}`); `None` when it did not (cut short,
    /// or it could not kill them): the caller reads them itself.
    pub rewards: Option<serde_json::Value>,
}

impl AuthorRun {
    /// The detail for the grader's result, when the script executed a workspace program.
    pub fn ran_detail(&self) -> Option<String> {
        if self.ran.is_empty() {
            return None;
        }
        let list: Vec<String> = self
            .ran
            .iter()
            .take(10)
            .map(|(how, path)| format!("{path} ({how})"))
            .collect();
        Some(format!(
            "{RAN_AGENT_CODE}: the script executed workspace programs, which share its uid and so could write its verdict: {}",
            list.join(", ")
        ))
    }

    /// Why a verdict the script left in a file cannot be trusted: it ran agent code and a
    /// process of its outlived its parent. Agent code can only write a file after the script
    /// wrote its verdict there from a process still running by then: the script's own process
    /// (any agent code in it is listed by [`AuthorRun::ran_detail`]) or one whose parent had
    /// ended (a daemon), which this names. `None` when neither holds.
    pub fn outlived_detail(&self) -> Option<String> {
        if self.ran.is_empty() || self.outlived.is_empty() {
            return None;
        }
        let list: Vec<String> = self
            .outlived
            .iter()
            .take(10)
            .map(|(pid, exe)| format!("{exe} (pid {pid})"))
            .collect();
        Some(format!(
            "tampering detected: the script ran agent code and processes of its outlived their parent, so its verdict file may have been written after the script wrote it: {}",
            list.join(", ")
        ))
    }
}

/// Runs `argv` of the task author's with exactly `vars` in `run`'s folder (`run` prepared as
/// [`AUTHOR_USER`]); the uid's leftovers are killed afterwards (by the wrapper, else here).
/// With `harbor` (the run's copy of a verifier's tests), the wrapper first lays out Harbor's
/// paths as root and reads the reward files afterwards with the script's uid, in the same exec
/// ([`AuthorRun::layout_error`], [`AuthorRun::rewards`]).
pub(crate) async fn exec_author(
    env: &Env<'_, '_>,
    run: &AgentRun,
    argv: Vec<String>,
    vars: BTreeMap<String, String>,
    harbor: Option<&str>,
) -> Result<AuthorRun, Fault> {
    let (uid, gid) = AUTHOR_USER
        .split_once(':')
        .unwrap_or((AUTHOR_USER, AUTHOR_USER));
    let mut wrapped = vec![
        "python3".to_owned(),
        "-I".into(),
        // The wrapper needs only the standard library: no `site` start-up (~50 ms).
        "-S".into(),
        "-B".into(),
        format!("{}/author_run.py", env.rb_dir),
        uid.to_owned(),
        gid.to_owned(),
        env.ctx.workspace.clone(),
        harbor.unwrap_or("").to_owned(),
    ];
    wrapped.extend(argv);
    // Root starts the wrapper; the script itself runs as the author's uid.
    env.pristine
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let out = env
        .exec_as("root", wrapped, vars, Some(&run.dir), None, LOG_CAP)
        .await;
    // The wrapper's standard output is its report alone (the script's goes to stderr).
    let report = out.as_ref().map_or_else(
        |_| serde_json::Value::Null,
        |o| serde_json::from_slice::<serde_json::Value>(&o.stdout).unwrap_or_default(),
    );
    // The wrapper killed the uid's processes itself once the script ended (one exec fewer);
    // cut short, failed to, or never answering: we do.
    let reaped = matches!(&out, Ok(o) if !o.timed_out && !o.oom_killed) && report["reaped"] == true;
    if !reaped {
        env.reap(AUTHOR_USER).await;
    }
    let out = out?;
    let outlived = report["outlived"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            (
                e["pid"].as_u64().unwrap_or(0),
                e["exe"].as_str().unwrap_or("?").to_owned(),
            )
        })
        .collect();
    let ran = report["events"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|e| {
            (
                e["how"].as_str().unwrap_or("?").to_owned(),
                e["path"].as_str().unwrap_or("?").to_owned(),
            )
        })
        .collect();
    let layout_error = report["layout"].as_str().map(str::to_owned);
    let rewards = (reaped && report["reward"].is_object()).then(|| report["reward"].clone());
    Ok(AuthorRun {
        out,
        ran,
        outlived,
        layout_error,
        rewards,
    })
}
