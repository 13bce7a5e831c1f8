//! Snapshot first: before any grader runs agent code, the agent's `/workspace` is copied once,
//! as root, into a root-only folder, keeping only regular files and directories. Links, FIFOs,
//! sockets and devices are dropped and reported (never followed, never a reason to stop
//! grading). Every comparison (csv, files_exist, the submitted side of reproduce, the judge's
//! file reads, the forbidden-API scan) reads the snapshot; before each grader that runs agent
//! code the live workspace is rebuilt from it, so nothing an earlier grader's agent code did
//! (a planted link to a held-out file, a rewritten output) reaches a later grader.
//!
//! Files over 64 MiB are not copied: the snapshot holds a hard link to the same inode, made
//! root-owned and read-only first, so agent code can replace the workspace path but never
//! change the snapshot's content; the live workspace gets the same link back.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::env::{AGENT_USER, AUTHOR_USER, Env, Fault, exit_note, sv};

/// Files over this size are hard-linked into the snapshot, not copied (`65536k` in the
/// scripts below).
const LINKED_OVER_BYTES: u64 = 64 * 1024 * 1024;

/// The snapshot built by the caller from the host folders the live workspace is uploaded
/// from (in the same upload: no exec), for [`crate::GradingContext::snapshot_staged`].
#[derive(Debug)]
pub struct StagedSnapshot {
    /// An empty host folder: the root-only base.
    empty: tempfile::TempDir,
    sources: Vec<PathBuf>,
}

impl StagedSnapshot {
    /// The snapshot of a workspace uploaded from `sources` (later ones over earlier ones, as
    /// the upload lays them), when [`SNAPSHOT`] would keep them whole: nothing but regular
    /// files and folders, no file over 64 MiB. `None` (also when a source cannot be read):
    /// the grading takes it itself.
    pub fn of(sources: &[&Path]) -> Option<Self> {
        // Iterative (an explicit stack): the agent chooses the depth.
        fn whole(root: &Path) -> std::io::Result<bool> {
            let mut pending = vec![root.to_path_buf()];
            while let Some(path) = pending.pop() {
                let meta = std::fs::symlink_metadata(&path)?;
                if meta.is_file() {
                    if meta.len() > LINKED_OVER_BYTES {
                        return Ok(false);
                    }
                    continue;
                }
                if !meta.is_dir() {
                    return Ok(false);
                }
                for entry in std::fs::read_dir(&path)? {
                    pending.push(entry?.path());
                }
            }
            Ok(true)
        }
        for src in sources {
            if !whole(src).ok()? {
                return None;
            }
        }
        Some(Self {
            empty: tempfile::tempdir().ok()?,
            sources: sources.iter().map(|p| p.to_path_buf()).collect(),
        })
    }

    /// What to copy in beside the workspace (the grading context's `scratch`): the base
    /// `<scratch>/snapshot` (root, 0700), then every source into `<scratch>/snapshot/ws`.
    pub fn copy_ins(&self, scratch: &str) -> Vec<sandbox::CopyIn> {
        let base = format!("{}/snapshot", scratch.trim_end_matches('/'));
        let mut items = vec![
            sandbox::CopyIn::new(self.empty.path(), base.clone())
                .owned_by(0, 0)
                .with_mode(0o700),
        ];
        items.extend(
            self.sources
                .iter()
                .map(|src| sandbox::CopyIn::new(src, format!("{base}/ws")).owned_by(0, 0)),
        );
        items
    }
}

/// `$1` workspace, `$2` root-only base (0700), `$3` snapshot folder inside it. Prints the odd
/// entries (neither regular file nor directory), one per line, relative to the workspace.
const SNAPSHOT: &str = r#"set -u
ws="$1"; base="$2"; snap="$3"
rm -rf "$base" && mkdir -p "$base" && chown 0:0 "$base" && chmod 700 "$base" || exit 90
mkdir -p "$snap" || exit 90
cd "$ws" || exit 91
find . -xdev ! -type f ! -type d -print || exit 92
find . -xdev \( -type d -o \( -type f ! -size +65536k \) \) -print0 | tar --null --no-recursion -T - -cf - | tar -C "$snap" -xf - || exit 93
find . -xdev -type f -size +65536k -exec sh -c 'for f; do chown 0:0 "$f" && chmod 444 "$f" && ln "$f" "$0/$f" || exit 1; done' "$snap" {} + || exit 94
"#;

/// `$1` workspace, `$2` snapshot: the live workspace becomes the snapshot again, owned by the
/// agent's uid and readable by the task-author uid.
const RESET: &str = r#"set -u
ws="$1"; snap="$2"
find "$ws" -mindepth 1 -maxdepth 1 -exec rm -rf {} + || exit 80
cd "$snap" || exit 81
find . \( -type d -o \( -type f ! -size +65536k \) \) -print0 | tar --null --no-recursion -T - -cf - | tar -C "$ws" -xf - || exit 81
chown -R 1000:1000 "$ws" && chmod 755 "$ws" && chmod -R a+rX "$ws" || exit 82
find . -type f -size +65536k -exec sh -c 'for f; do ln "$f" "$0/$f" || exit 1; done' "$ws" {} + || exit 83
"#;

/// [`RESET`] of a pristine workspace (see [`Env::pristine`]): its content is the snapshot's
/// already; only the owner and modes are set.
const OWN: &str = r#"set -u
ws="$1"
chown -R 1000:1000 "$ws" && chmod 755 "$ws" && chmod -R a+rX "$ws" || exit 82
"#;

/// `$1` workspace, `$2` snapshot, `$3` `1` to kill leftover processes first, `$4` a script to
/// run next in the same exec (`""`: none) with the remaining arguments: from a root shell,
/// every process of the agent's and the task-author uid is killed (each uid's own `kill -9 -1`
/// through `setpriv`; exit 78 when the image has no `setpriv`), the live workspace is rebuilt
/// from the snapshot ([`RESET`]), then the next script runs.
const REAP_RESET_THEN: &str = r#"set -u
ws="$1"; snap="$2"; reap="$3"; next="$4"; shift 4
if [ "$reap" = 1 ]; then
  command -v setpriv >/dev/null 2>&1 || exit 78
  for u in 1000 2000; do
    setpriv --reuid="$u" --regid="$u" --clear-groups sh -c 'kill -9 -1 2>/dev/null; exit 0' || exit 78
  done
fi
sh -c "$0" sh "$ws" "$snap" || exit $?
[ -n "$next" ] || exit 0
exec sh -c "$next" sh "$@"
"#;

/// Kills leftovers of the agent's and the task-author uid, rebuilds the live workspace from the
/// snapshot and runs `next` (a root `sh` script, with `args`) in ONE exec as root, cwd `/`.
/// Exit codes: [`RESET`]'s 80-83, else `next`'s. Images without `setpriv` get the kills as
/// separate execs (each uid's own `kill -9 -1`).
pub(crate) async fn reset_then(
    env: &Env<'_, '_>,
    next: &str,
    args: &[String],
    limit: Duration,
    output_cap: usize,
) -> Result<sandbox::ExecOutcome, Fault> {
    // Pristine (nothing but our code ran since the upload the snapshot was staged from):
    // nothing to kill, nothing to rebuild. Once only: agent code runs after this.
    let pristine = env
        .pristine
        .swap(false, std::sync::atomic::Ordering::SeqCst);
    let (reset, first_reap) = if pristine { (OWN, "0") } else { (RESET, "1") };
    let run = |reap: &str| {
        let mut argv = sv(&[
            "sh",
            "-c",
            REAP_RESET_THEN,
            reset,
            &env.ctx.workspace,
            &env.snap,
            reap,
            next,
        ]);
        argv.extend(args.iter().cloned());
        env.exec(argv, false, Some("/"), Some(limit), output_cap)
    };
    let out = run(first_reap).await?;
    if out.exit_code != Some(78) {
        return Ok(out);
    }
    env.reap(AGENT_USER).await;
    env.reap(AUTHOR_USER).await;
    run("0").await
}

/// Whether an exec from [`reset_then`] failed in the reset part (exit 80-83).
pub(crate) fn reset_failed(out: &sandbox::ExecOutcome) -> bool {
    matches!(out.exit_code, Some(80..=83))
}

/// Takes the snapshot; returns the dropped entries (relative to `/workspace`).
pub(crate) async fn take(env: &Env<'_, '_>) -> Result<Vec<String>, Fault> {
    let base = parent(&env.snap);
    let out = env
        .exec(
            sv(&[
                "sh",
                "-c",
                SNAPSHOT,
                "sh",
                &env.ctx.workspace,
                base,
                &env.snap,
            ]),
            false,
            Some("/"),
            Some(Duration::from_secs(600)),
            256 * 1024,
        )
        .await?;
    if out.timed_out {
        return Err(Fault::Budget);
    }
    if !out.success() {
        return Err(Fault::Broken(format!(
            "cannot snapshot the agent's outputs: {}",
            exit_note(&out)
        )));
    }
    let mut odd: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim_start_matches("./").to_owned())
        .filter(|l| !l.is_empty())
        .collect();
    if out.truncated {
        odd.push("… (list cut)".into());
    }
    Ok(odd)
}

/// The reset part of an exec from [`reset_then`]: `Err` when it failed.
pub(crate) fn reset_outcome(out: sandbox::ExecOutcome) -> Result<sandbox::ExecOutcome, Fault> {
    if !reset_failed(&out) && !out.timed_out {
        Ok(out)
    } else if out.timed_out {
        Err(Fault::Budget)
    } else {
        Err(Fault::Broken(format!(
            "cannot restore the workspace from the snapshot: {}",
            exit_note(&out)
        )))
    }
}

fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or(path, |(p, _)| p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deep_workspace_is_checked_on_a_small_stack() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut p = dir.path().to_path_buf();
        // 1500 levels: a recursive check (one frame per level) overflows 128 KiB.
        for _ in 0..1500 {
            p.push("d");
            std::fs::create_dir(&p).expect("mkdir");
        }
        std::fs::write(p.join("f"), "x").expect("write");
        let root = dir.path().to_path_buf();
        let staged = std::thread::Builder::new()
            .stack_size(128 * 1024)
            .spawn(move || StagedSnapshot::of(&[&root]).is_some())
            .expect("spawn")
            .join()
            .expect("no overflow");
        assert!(staged, "only folders and a small file: staged whole");
    }
}
