//! `green-agent tasks import KIND SRC DEST`: a thin front over `tasks::import` (each imported
//! task is validated by the importer before it is reported).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use tasks::import::ImportKind;
use tasks::import::scicode::{Disagreement, ProblemFailure};

/// Options of `tasks import`: resource limits of importers that run code (SciCode's target
/// derivation) and where SciCoQA's papers and code come from.
#[derive(Debug, Clone, Default)]
pub struct ImportLimits {
    /// Memory of the derivation sandbox and of the imported tasks (MB).
    pub memory_mb: Option<u64>,
    /// Deadline of each problem's derivation (seconds).
    pub timeout_secs: Option<u64>,
    /// SciCoQA: a local mirror, `DIR/<task id>/...`.
    pub sources: Option<PathBuf>,
    /// SciCoQA: download the papers and code archives.
    pub fetch: bool,
    /// SciCode: add a perturbed copy of each test case (float inputs moved a little, target
    /// from the gold code).
    pub perturbed_inputs: bool,
    /// SciCode: upstream's targets file (`test_data.h5`).
    pub targets: Option<PathBuf>,
    /// SciCode: include the background text.
    pub with_background: bool,
    /// SciCode: `whole-problem` (default) or `step-by-step`.
    pub protocol: Option<String>,
}

/// Per download (a paper or a code archive).
const MAX_FETCH_BYTES: u64 = 512 * 1024 * 1024;

/// Where to download a paper and a code archive from: arXiv abstracts as PDFs, GitHub trees and
/// commits as tarballs of that revision; anything else as is.
fn download_urls(paper: &str, code: Option<&str>) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let paper_url = match paper.split_once("arxiv.org/abs/") {
        Some((_, id)) => format!("https://arxiv.org/pdf/{id}"),
        None => paper.to_owned(),
    };
    let name = if paper_url.contains("arxiv.org/pdf/") || paper_url.ends_with(".pdf") {
        "paper.pdf".to_owned()
    } else {
        "paper.html".to_owned()
    };
    out.push((paper_url, name));
    if let Some(code) = code {
        let parts: Vec<&str> = code
            .trim_end_matches('/')
            .split("github.com/")
            .nth(1)
            .map(|rest| rest.split('/').collect())
            .unwrap_or_default();
        let url = match parts.as_slice() {
            [owner, repo, "tree" | "commit", rev, ..] => {
                format!("https://github.com/{owner}/{repo}/archive/{rev}.tar.gz")
            }
            [owner, repo] => format!("https://github.com/{owner}/{repo}/archive/HEAD.tar.gz"),
            _ => code.to_owned(),
        };
        out.push((url, "code.tar.gz".to_owned()));
    }
    out
}

/// Downloads every task's paper and code into a temporary mirror (`--fetch`); refuses clearly
/// when the network is not reachable.
async fn fetch_sources(src: &Path) -> anyhow::Result<tempfile::TempDir> {
    let wanted = tasks::import::scicoqa::sources_to_fetch(src, &Default::default())?;
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .timeout(Duration::from_secs(600))
        .build()?;
    let mirror = tempfile::tempdir().context("creating a folder for the downloads")?;
    for task in &wanted {
        let dir = mirror.path().join(&task.task_id);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        for (url, name) in download_urls(&task.paper_url, task.code_url.as_deref()) {
            let response = client.get(&url).send().await.map_err(|e| {
                anyhow::anyhow!(
                    "--fetch needs network access: cannot download {url} for {} ({e}); mirror the papers and code and import with --sources DIR (DIR/<task id>/...)",
                    task.task_id
                )
            })?;
            let response = response
                .error_for_status()
                .with_context(|| format!("downloading {url} for {}", task.task_id))?;
            if response
                .content_length()
                .is_some_and(|n| n > MAX_FETCH_BYTES)
            {
                anyhow::bail!("{url} is larger than {MAX_FETCH_BYTES} bytes");
            }
            let bytes = response
                .bytes()
                .await
                .with_context(|| format!("downloading {url}"))?;
            std::fs::write(dir.join(&name), &bytes)
                .with_context(|| format!("writing {name} for {}", task.task_id))?;
        }
    }
    Ok(mirror)
}

/// What an import did.
#[derive(Debug, Default)]
pub struct ImportSummary {
    pub written: Vec<PathBuf>,
    /// Problems that were not imported (the others were).
    pub failed: Vec<ProblemFailure>,
    /// SciCode with a targets file: tests whose derived target differs from the published one.
    pub disagreements: Vec<Disagreement>,
}

impl ImportSummary {
    /// The summary table printed at the end of an import: one row per failed problem.
    pub fn table(&self) -> String {
        let mut out = format!(
            "{} task(s) imported and validated, {} problem(s) failed\n",
            self.written.len(),
            self.failed.len()
        );
        if !self.disagreements.is_empty() {
            out.push_str(&format!(
                "{} test(s) where the targets file and the gold code disagree (the file's target is used):\n",
                self.disagreements.len()
            ));
            out.push_str("problem\tstep\ttest\tdifference\n");
            for d in &self.disagreements {
                out.push_str(&format!(
                    "{}\t{}\t{}\t{}\n",
                    d.problem_id, d.step_id, d.test, d.why
                ));
            }
        }
        if self.failed.is_empty() {
            return out;
        }
        out.push_str("problem\tstep\ttest\tstage\tcause\n");
        for f in &self.failed {
            let mut cause = f.cause.trim().replace('\n', "\n\t\t\t\t");
            if let Some(hint) = &f.hint {
                cause = format!("{cause}\n\t\t\t\t{hint}");
            }
            out.push_str(&format!(
                "{}\t{}\t{}\t{}\t{}\n",
                f.problem_id,
                f.step_text(),
                f.test_text(),
                f.stage,
                cause
            ));
        }
        out
    }
}

/// Builds (or finds) the per-task image of every imported task that has `pip_install`
/// packages; Docker is connected on first need.
async fn check_task_images(
    dirs: &[PathBuf],
    docker: &mut Option<sandbox::docker::DockerBackend>,
) -> Result<(), String> {
    for dir in dirs {
        let task = tasks::load_task(dir).map_err(|e| e.to_string())?;
        let env = task.environment();
        if env.pip_install.is_empty() {
            continue;
        }
        let engine = match docker {
            Some(d) => d,
            None => docker.insert(sandbox::docker::DockerBackend::connect().await.map_err(
                |e| {
                    format!(
                        "pip_install needs Docker to build the task's image ({e}); start Docker and import again"
                    )
                },
            )?),
        };
        let base = crate::images::resolve_for_run(engine, &env.image).await?;
        crate::images::derive_for_run(engine, &base, &env.pip_install)
            .await
            .map_err(|e| format!("the task's image: {e}"))?;
    }
    Ok(())
}

/// Imports tasks of `kind` from `src` into `dest`.
pub async fn import(
    kind: &str,
    src: &Path,
    dest: &Path,
    limits: ImportLimits,
) -> anyhow::Result<ImportSummary> {
    let kind: ImportKind = kind.parse().map_err(anyhow::Error::msg)?;
    if (limits.sources.is_some() || limits.fetch) && kind != ImportKind::Scicoqa {
        anyhow::bail!("--sources and --fetch are for `tasks import scicoqa` only");
    }
    if limits.perturbed_inputs && kind != ImportKind::Scicode {
        anyhow::bail!("--perturbed-inputs is for `tasks import scicode` only");
    }
    if (limits.targets.is_some() || limits.with_background || limits.protocol.is_some())
        && kind != ImportKind::Scicode
    {
        anyhow::bail!(
            "--targets, --with-background and --protocol are for `tasks import scicode` only"
        );
    }
    let protocol: tasks::import::scicode::Protocol = match &limits.protocol {
        Some(text) => text.parse().map_err(anyhow::Error::msg)?,
        None => Default::default(),
    };
    std::fs::create_dir_all(dest).with_context(|| format!("creating {}", dest.display()))?;
    if kind == ImportKind::Scicoqa {
        let fetched = if limits.fetch {
            Some(fetch_sources(src).await?)
        } else {
            None
        };
        let sources = match &fetched {
            Some(dir) => Some(dir.path().to_path_buf()),
            None => limits.sources.clone(),
        };
        if let Some(dir) = &sources
            && !dir.is_dir()
        {
            anyhow::bail!("--sources {}: not a folder", dir.display());
        }
        let options = tasks::import::scicoqa::ScicoqaOptions {
            sources,
            keep_invalid: false,
        };
        return Ok(ImportSummary {
            written: tasks::import::scicoqa::import(src, dest, &options)?,
            failed: Vec::new(),
            disagreements: Vec::new(),
        });
    }
    if kind == ImportKind::Prbench {
        // A folder of tasks: every task's result (the failed ones in the summary table).
        // A task with `pip_install` packages is checked by building its per-task image (once:
        // runs reuse it); a package without a wheel fails the task here, not a run.
        let mut summary = ImportSummary::default();
        let mut docker = None;
        for t in tasks::import::prbench::import_all(src, dest) {
            let name = t.source.file_name().map_or_else(
                || t.source.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            );
            let checked = match t.result {
                Ok(dirs) => match check_task_images(&dirs, &mut docker).await {
                    Ok(()) => Ok(dirs),
                    Err(e) => {
                        for d in &dirs {
                            let _ = std::fs::remove_dir_all(d);
                        }
                        Err(e)
                    }
                },
                Err(err) => Err(err.to_string()),
            };
            match checked {
                Ok(dirs) => summary.written.extend(dirs),
                Err(cause) => summary
                    .failed
                    .push(ProblemFailure::import_failed(&name, cause)),
            }
        }
        if summary.written.is_empty()
            && let [only] = summary.failed.as_slice()
        {
            anyhow::bail!("{}", only.cause);
        }
        return Ok(summary);
    }
    if !kind.needs_sandbox() {
        return Ok(ImportSummary {
            written: tasks::import::import_local(kind, src, dest)?,
            failed: Vec::new(),
            disagreements: Vec::new(),
        });
    }
    // SciCode: targets are derived by running the gold code in a utility sandbox of the
    // platform's python image (built on first use).
    let docker = sandbox::docker::DockerBackend::connect()
        .await
        .map_err(|e| {
            anyhow::Error::new(e)
                .context("cannot use Docker (the SciCode importer runs gold code in a sandbox)")
        })?;
    let image = crate::images::resolve_for_run(&docker, "python")
        .await
        .map_err(anyhow::Error::msg)?;
    let owner = sandbox::Owner {
        run_id: format!("import-{}", uuid::Uuid::new_v4().simple()),
        trial_id: None,
        role: sandbox::Role::Utility,
    };
    let mut options = tasks::import::scicode::ScicodeOptions::new(image, owner);
    if let Some(mb) = limits.memory_mb {
        options.memory_mb = mb;
    }
    if let Some(secs) = limits.timeout_secs {
        options.timeout = Duration::from_secs(secs.max(1));
    }
    options.perturbed_inputs = limits.perturbed_inputs;
    options.targets = limits.targets;
    options.with_background = limits.with_background;
    options.protocol = protocol;
    let done = tasks::import::scicode::import_all(src, dest, &options, &docker).await?;
    Ok(ImportSummary {
        written: done.written,
        failed: done.failed,
        disagreements: done.disagreements,
    })
}

#[cfg(test)]
mod tests {
    use super::download_urls;

    #[test]
    fn downloads_pinned_revisions() {
        assert_eq!(
            download_urls(
                "https://arxiv.org/abs/2401.00001v2",
                Some("https://github.com/o/r/tree/abc123")
            ),
            [
                (
                    "https://arxiv.org/pdf/2401.00001v2".to_owned(),
                    "paper.pdf".to_owned()
                ),
                (
                    "https://github.com/o/r/archive/abc123.tar.gz".to_owned(),
                    "code.tar.gz".to_owned()
                ),
            ]
        );
        assert_eq!(
            download_urls("https://example.org/p", Some("https://github.com/o/r"))[1].0,
            "https://github.com/o/r/archive/HEAD.tar.gz"
        );
    }
}
