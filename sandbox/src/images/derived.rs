//! Per-task images: a platform image plus Python packages from PyPI, built without network in
//! the build. The host downloads wheels with its own pip (`pip download --only-binary=:all:`
//! for the images' Python: CPython 3.11, manylinux x86_64, glibc ≤ 2.36), and the image is built
//! `FROM` the platform image with those wheels as the build context, installed offline
//! (`pip install --no-index --find-links`, by the pip wheel downloaded beside them: the platform
//! images have no pip) with the build's network off. Tagged
//! `research-bench/<base name>-pip:<first 12 hex of sha256(base image id, sorted packages, pip
//! version, target)>`: the same recipe on the same base is built once and reused. An unpinned
//! package is whatever version the first build resolved, as long as that image exists.

use std::collections::VecDeque;
use std::path::Path;
use std::time::Instant;

use bollard::query_parameters::BuildImageOptions;
use futures::StreamExt;
use sha2::{Digest, Sha256};

use super::{BUILD_TIMEOUT, ImageProgress, acquire_lock, build_dir_prefix, build_error, lock_path};
use crate::child::{ChildSpec, SupervisedChild};
use crate::docker::{DockerBackend, api_error};
use crate::{Backend, SandboxError};

/// The host's Python whose pip downloads the wheels.
pub const HOST_PYTHON: &str = "python3";
/// Bumped when the build procedure changes in a way the hashed inputs do not show.
const PROCEDURE: &str = "pip-wheels-offline-v1";
/// The Python the platform images have (Debian bookworm's).
pub const TARGET_PYTHON: &str = "3.11";
const TARGET_ABI: &str = "cp311";
/// Newest glibc of the platform images (bookworm: 2.36); every older manylinux tag is accepted.
const TARGET_GLIBC_MINOR: u32 = 36;
/// Where the wheels are inside the build (removed after the install).
const WHEELS_IN_IMAGE: &str = "/tmp/rb-wheels";
/// Label of a derived image: its package list.
pub const PACKAGES_LABEL: &str = "org.research-bench.pip-install";

/// `--platform` values of `pip download`: pip 23 does not widen a `manylinux_2_X` tag to the
/// older ones, so every one is named (and the legacy aliases old wheels carry).
fn target_platforms() -> Vec<String> {
    let mut out: Vec<String> = (5..=TARGET_GLIBC_MINOR)
        .rev()
        .map(|m| format!("manylinux_2_{m}_x86_64"))
        .collect();
    for legacy in ["manylinux2014", "manylinux2010", "manylinux1"] {
        out.push(format!("{legacy}_x86_64"));
    }
    out
}

/// A requirement's problem, for user text; `None` when it is a plain requirement: a
/// distribution name, optional `[extras]` and an optional version specifier (`tabulate`,
/// `more-itertools>=10`, `pkg[extra]==1.2`). Options, URLs, paths and markers are refused: the
/// image is built from PyPI wheels only.
pub fn requirement_problem(req: &str) -> Option<String> {
    let r = req.trim();
    if r.is_empty() {
        return Some("an empty package name".into());
    }
    if r.starts_with('-') {
        return Some(format!(
            "`{r}` is a pip option; name packages only (`name` or `name==1.2`)"
        ));
    }
    let name_end = r
        .find(|c: char| !(c.is_ascii_alphanumeric() || "._-".contains(c)))
        .unwrap_or(r.len());
    let name = &r[..name_end];
    if name.is_empty() || !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        return Some(format!(
            "`{r}` does not start with a package name (letters, digits, `.`, `_`, `-`)"
        ));
    }
    let mut rest = r[name_end..].trim_start();
    if let Some(extras) = rest.strip_prefix('[') {
        let Some(close) = extras.find(']') else {
            return Some(format!("`{r}`: `[` without `]`"));
        };
        if !extras[..close]
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-, ".contains(c))
        {
            return Some(format!("`{r}`: extras are names separated by commas"));
        }
        rest = extras[close + 1..].trim_start();
    }
    if rest.is_empty() {
        return None;
    }
    let spec_ok = rest.starts_with(['<', '>', '=', '!', '~'])
        && rest
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "<>=!~.,*+ ".contains(c));
    if spec_ok {
        None
    } else {
        Some(format!(
            "`{r}` is not `name` or `name<specifier>` (URLs, paths and environment markers are not supported: the image is built from PyPI wheels)"
        ))
    }
}

/// The packages as hashed and installed: trimmed, sorted, without duplicates.
pub fn canonical_packages(packages: &[String]) -> Vec<String> {
    let mut out: Vec<String> = packages.iter().map(|p| p.trim().to_owned()).collect();
    out.sort();
    out.dedup();
    out
}

/// `research-bench/python:0cc1…` → `python` (the last path segment of the repository).
fn base_name(base: &str) -> &str {
    let repo = match base.rsplit_once(':') {
        Some((repo, tag)) if !tag.contains('/') => repo,
        _ => base,
    };
    repo.rsplit('/').next().unwrap_or(repo)
}

/// The tag of the image `packages` on the base image `base` (named `base_ref`), with the
/// host's `pip_version` downloading.
pub fn derived_tag(
    base_ref: &str,
    base_id: &str,
    packages: &[String],
    pip_version: &str,
) -> String {
    let text = format!(
        "procedure={PROCEDURE}\nbase={base_id}\npackages={}\npip={pip_version}\ntarget=cp{TARGET_PYTHON}/{TARGET_ABI}/manylinux_2_{TARGET_GLIBC_MINOR}_x86_64\n",
        canonical_packages(packages).join("\n  "),
    );
    let digest = Sha256::digest(text.as_bytes());
    format!(
        "research-bench/{}-pip:{}",
        base_name(base_ref),
        &hex::encode(digest)[..12]
    )
}

/// Runs `HOST_PYTHON -m pip ARGS`: its exit, stdout lines (each also handed to `line`) and the
/// tail of its stderr.
async fn run_pip(
    args: Vec<String>,
    cwd: &Path,
    line: &impl Fn(String),
) -> Result<(crate::child::ChildExit, Vec<String>, String), SandboxError> {
    let mut full = vec!["-m".to_owned(), "pip".to_owned()];
    full.extend(args);
    let mut env = std::collections::BTreeMap::new();
    env.insert("PIP_DISABLE_PIP_VERSION_CHECK".to_owned(), "1".to_owned());
    env.insert("PIP_NO_INPUT".to_owned(), "1".to_owned());
    let mut child = SupervisedChild::spawn(ChildSpec {
        program: HOST_PYTHON.into(),
        args: full,
        env,
        clear_env: false,
        cwd: cwd.to_path_buf(),
        limits: None,
    })?;
    let mut lines = Vec::new();
    let drive = async {
        while let Some(l) = child.next_stdout_line().await {
            line(l.clone());
            lines.push(l);
        }
        child.wait().await
    };
    let exit = match tokio::time::timeout(BUILD_TIMEOUT, drive).await {
        Ok(exit) => exit,
        Err(_) => {
            child.kill_tree();
            return Err(SandboxError::PipPackages {
                detail: "pip did not finish within 30 minutes".into(),
            });
        }
    };
    Ok((exit, lines, child.stderr_tail()))
}

/// The version of the host's pip (`pip 23.2.1 from …` → `23.2.1`).
pub async fn host_pip_version() -> Result<String, SandboxError> {
    let cwd = std::env::temp_dir();
    let (exit, lines, stderr) = run_pip(vec!["--version".into()], &cwd, &|_| {})
        .await
        .map_err(|e| SandboxError::PipPackages {
            detail: format!(
                "cannot run `{HOST_PYTHON} -m pip` on this machine ({e}); per-task Python packages are downloaded by the host's pip: install Python 3 with pip"
            ),
        })?;
    let version = lines
        .first()
        .and_then(|l| l.split_whitespace().nth(1))
        .filter(|_| exit.success());
    version.map(str::to_owned).ok_or_else(|| SandboxError::PipPackages {
        detail: format!(
            "`{HOST_PYTHON} -m pip --version` failed ({exit}): {}; per-task Python packages are downloaded by the host's pip: install pip for {HOST_PYTHON}",
            stderr.trim()
        ),
    })
}

/// The distribution names pip could not find (`No matching distribution found for X`).
fn not_found(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter_map(|l| l.split("No matching distribution found for ").nth(1))
        .map(|r| r.trim().to_owned())
        .collect()
}

/// Why `requirement` has no wheel: not on the index at all, or only files for other targets.
async fn why_missing(requirement: &str, cwd: &Path) -> String {
    let name_end = requirement
        .find(|c: char| !(c.is_ascii_alphanumeric() || "._-".contains(c)))
        .unwrap_or(requirement.len());
    let name = &requirement[..name_end];
    let listed = run_pip(
        vec!["index".into(), "versions".into(), name.into()],
        cwd,
        &|_| {},
    )
    .await
    .ok()
    .filter(|(exit, _, _)| exit.success())
    .and_then(|(_, lines, _)| lines.first().cloned());
    match listed {
        Some(versions) => format!(
            "`{requirement}` has no wheel for CPython {TARGET_PYTHON} on manylinux x86_64 (the package index has `{name}`, latest {}; the versions this requirement allows have source distributions or wheels for other platforms only); per-task images install wheels only: pin a version that publishes such a wheel, or remove the package",
            versions
                .trim()
                .strip_prefix(name)
                .unwrap_or(versions.trim())
                .trim()
                .trim_start_matches('(')
                .trim_end_matches(')')
        ),
        None => format!(
            "`{requirement}` is not on the package index (no version of `{name}` found); check the name's spelling on pypi.org, or remove it"
        ),
    }
}

/// Downloads the wheels of `packages` (and their dependencies, and `pip==pip_version` to install
/// them with) into `dest`.
async fn download(
    packages: &[String],
    pip_version: &str,
    dest: &Path,
    progress: &impl Fn(ImageProgress),
) -> Result<(), SandboxError> {
    let mut args = download_args(dest);
    args.push(format!("pip=={pip_version}"));
    args.extend(packages.iter().cloned());
    let cwd = dest.parent().unwrap_or(dest);
    let (exit, lines, stderr) = run_pip(args, cwd, &|l| progress(ImageProgress::Output(l)))
        .await
        .map_err(|e| SandboxError::PipPackages {
            detail: format!("cannot run `{HOST_PYTHON} -m pip download`: {e}"),
        })?;
    if exit.success() {
        return Ok(());
    }
    let mut missing = not_found(&stderr);
    if !missing.is_empty() && packages.len() > 1 {
        // pip stops at the first requirement it cannot satisfy: ask for each one alone
        // (without dependencies) so that every package without a wheel is named at once.
        let alone = cwd.join("alone");
        let mut each = Vec::new();
        for p in packages {
            let mut args = download_args(&alone);
            args.push("--no-deps".into());
            args.push(p.clone());
            if let Ok((exit, _, stderr)) = run_pip(args, cwd, &|_| {}).await
                && !exit.success()
            {
                each.extend(not_found(&stderr));
            }
        }
        let _ = std::fs::remove_dir_all(&alone);
        if !each.is_empty() {
            missing = each;
        }
    }
    let detail = if missing.is_empty() {
        let tail: Vec<&str> = stderr.lines().rev().take(15).collect();
        let mut tail: Vec<&str> = tail.into_iter().rev().collect();
        if tail.is_empty() {
            tail = lines.iter().rev().take(15).map(String::as_str).collect();
            tail.reverse();
        }
        format!(
            "`pip download` of {} failed ({exit}); is PyPI reachable from this machine (pip's proxy and index settings)? Its output:\n{}",
            packages.join(", "),
            tail.join("\n")
        )
    } else {
        let mut why = Vec::new();
        for m in &missing {
            let dependency = if packages.contains(m) {
                String::new()
            } else {
                " (a dependency of the packages asked for)".to_owned()
            };
            why.push(format!("{}{dependency}", why_missing(m, cwd).await));
        }
        why.join("\n")
    };
    Err(SandboxError::PipPackages { detail })
}

/// `pip download` into `dest`, wheels only, for the images' Python and platform.
fn download_args(dest: &Path) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "download".into(),
        "--progress-bar".into(),
        "off".into(),
        "--dest".into(),
        dest.display().to_string(),
        "--only-binary=:all:".into(),
        "--python-version".into(),
        TARGET_PYTHON.into(),
        "--implementation".into(),
        "cp".into(),
        "--abi".into(),
        TARGET_ABI.into(),
    ];
    for p in target_platforms() {
        args.push("--platform".into());
        args.push(p);
    }
    args
}

/// POSIX shell single quoting.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The Dockerfile of a derived image.
fn dockerfile(base: &str, pip_wheel: &str, packages: &[String]) -> String {
    let install = format!(
        "python3 {WHEELS_IN_IMAGE}/{pip_wheel}/pip install --disable-pip-version-check --no-index --find-links {WHEELS_IN_IMAGE} --no-cache-dir --break-system-packages --root-user-action=ignore {} && rm -rf {WHEELS_IN_IMAGE}",
        packages
            .iter()
            .map(|p| shell_quote(p))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let run = serde_json::to_string(&["/bin/sh", "-c", install.as_str()]).unwrap_or_default();
    // Two steps only (the label is a build option): each step of the classic builder is a
    // container committed on top of the platform image.
    format!("FROM {base}\nCOPY wheels/ {WHEELS_IN_IMAGE}/\nRUN {run}\n")
}

/// Makes sure the image of `packages` on the platform image `base` (a resolved reference the
/// engine has) exists, building it if needed; returns its tag. When it exists: the host's pip
/// is asked its version and the engine for two inspections, nothing is downloaded.
pub async fn ensure(
    backend: &DockerBackend,
    base: &str,
    packages: &[String],
    progress: impl Fn(ImageProgress),
) -> Result<String, SandboxError> {
    let packages = canonical_packages(packages);
    for p in &packages {
        if let Some(problem) = requirement_problem(p) {
            return Err(SandboxError::PipPackages { detail: problem });
        }
    }
    let base_id = match backend.client().inspect_image(base).await {
        Ok(info) => info.id.unwrap_or_else(|| base.to_owned()),
        Err(e) => {
            return Err(if backend.image_exists(base).await? {
                api_error("docker", "inspect_image", e)
            } else {
                SandboxError::ImageMissing(base.to_owned())
            });
        }
    };
    let pip_version = host_pip_version().await?;
    let tag = derived_tag(base, &base_id, &packages, &pip_version);
    if backend.image_exists(&tag).await? {
        progress(ImageProgress::UpToDate { tag: tag.clone() });
        return Ok(tag);
    }
    // per-task images build one at a time (platform images each hold their own lock)
    let _lock = acquire_lock(&lock_path("derived"), &progress).await?;
    if backend.image_exists(&tag).await? {
        progress(ImageProgress::UpToDate { tag: tag.clone() });
        return Ok(tag);
    }
    let started = Instant::now();
    let work = tempfile::Builder::new()
        .prefix(&build_dir_prefix("derived"))
        .tempdir_in("/var/tmp")
        .map_err(|source| SandboxError::Io {
            path: "/var/tmp".into(),
            source,
        })?;
    let context = work.path().join("context");
    let wheels = context.join("wheels");
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| SandboxError::Io { path, source }
    };
    std::fs::create_dir_all(&wheels).map_err(io(&wheels))?;
    progress(ImageProgress::Step {
        tag: tag.clone(),
        step: format!(
            "pip download {} (wheels for CPython {TARGET_PYTHON}, manylinux x86_64)",
            packages.join(" ")
        ),
    });
    download(&packages, &pip_version, &wheels, &progress).await?;
    let pip_wheel = std::fs::read_dir(&wheels)
        .map_err(io(&wheels))?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with(&format!("pip-{pip_version}-")) && n.ends_with(".whl"))
        .ok_or_else(|| {
            build_error(
                &tag,
                "pip download",
                format!("the wheel of pip {pip_version} is missing after the download"),
            )
        })?;
    std::fs::write(
        context.join("Dockerfile"),
        dockerfile(base, &pip_wheel, &packages),
    )
    .map_err(io(&context))?;
    progress(ImageProgress::Step {
        tag: tag.clone(),
        step: format!("docker build FROM {base} (offline pip install)"),
    });
    let tar_path = work.path().join("context.tar");
    {
        let file = std::fs::File::create(&tar_path).map_err(io(&tar_path))?;
        let mut tar = tar::Builder::new(file);
        tar.append_dir_all(".", &context).map_err(io(&context))?;
        tar.into_inner().map_err(io(&tar_path))?;
    }
    build(backend, &tag, &packages, &tar_path, &progress).await?;
    let elapsed = started.elapsed();
    tracing::info!(%tag, ?elapsed, "built a per-task image");
    progress(ImageProgress::Built {
        tag: tag.clone(),
        elapsed,
    });
    Ok(tag)
}

async fn build(
    backend: &DockerBackend,
    tag: &str,
    packages: &[String],
    tar_path: &Path,
    progress: &impl Fn(ImageProgress),
) -> Result<(), SandboxError> {
    let file = tokio::fs::File::open(tar_path)
        .await
        .map_err(|source| SandboxError::Io {
            path: tar_path.to_path_buf(),
            source,
        })?;
    let body = bollard::body_try_stream(tokio_util::io::ReaderStream::with_capacity(
        file,
        1024 * 1024,
    ));
    let client = backend.client().clone().with_timeout(BUILD_TIMEOUT);
    let mut stream = client.build_image(
        BuildImageOptions {
            dockerfile: "Dockerfile".into(),
            t: Some(tag.to_owned()),
            rm: true,
            forcerm: true,
            // The install is offline: the wheels are in the context.
            networkmode: Some("none".into()),
            labels: Some(
                [(PACKAGES_LABEL.to_owned(), packages.join(" "))]
                    .into_iter()
                    .collect(),
            ),
            ..Default::default()
        },
        None,
        Some(body),
    );
    let mut last: VecDeque<String> = VecDeque::new();
    let mut failure: Option<String> = None;
    while let Some(item) = stream.next().await {
        let info = match item {
            Ok(info) => info,
            Err(bollard::errors::Error::DockerStreamError { error }) => {
                failure = Some(error);
                break;
            }
            Err(e) => return Err(api_error("docker", "build_image", e)),
        };
        if let Some(text) = info.stream {
            for l in text.lines().filter(|l| !l.trim().is_empty()) {
                if last.len() == 20 {
                    last.pop_front();
                }
                last.push_back(l.to_owned());
                progress(ImageProgress::Output(l.to_owned()));
            }
        }
        if let Some(e) = info.error_detail.and_then(|d| d.message) {
            failure = Some(e);
        }
    }
    if let Some(error) = failure {
        return Err(SandboxError::PipPackages {
            detail: format!(
                "installing {} into {tag} failed: {error}; the last build output:\n{}\nA wheel that needs a newer glibc or system libraries the image lacks cannot be installed: pin another version or remove the package",
                packages.join(", "),
                last.into_iter().collect::<Vec<_>>().join("\n")
            ),
        });
    }
    if !backend.image_exists(tag).await? {
        return Err(build_error(
            tag,
            "docker build",
            "the image is missing after the build",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requirements_plain_ones_pass_the_rest_is_named() {
        for ok in [
            "tabulate",
            "more-itertools>=10",
            "pkg[extra,b]==1.2.*",
            "a.b_c ~= 2.0",
            "x!=1,<3",
        ] {
            assert_eq!(requirement_problem(ok), None, "{ok}");
        }
        for (bad, says) in [
            ("", "empty"),
            ("--index-url=http://x", "pip option"),
            ("git+https://github.com/a/b", "not `name`"),
            ("./local.whl", "package name"),
            ("pkg ; python_version<'3'", "not `name`"),
            ("pkg[x", "without `]`"),
        ] {
            let problem = requirement_problem(bad).unwrap_or_default();
            assert!(problem.contains(says), "{bad}: {problem}");
        }
    }

    #[test]
    fn the_tag_depends_on_base_packages_and_pip_not_on_order() {
        let pk = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let t = derived_tag(
            "research-bench/python:0cc1bbe34064",
            "sha256:aa",
            &pk(&["tabulate", "more-itertools"]),
            "23.2.1",
        );
        assert!(t.starts_with("research-bench/python-pip:"), "{t}");
        assert_eq!(t.len(), "research-bench/python-pip:".len() + 12);
        let same = derived_tag(
            "research-bench/python:0cc1bbe34064",
            "sha256:aa",
            &pk(&[" more-itertools", "tabulate", "tabulate"]),
            "23.2.1",
        );
        assert_eq!(t, same, "order, spaces and duplicates do not matter");
        for other in [
            derived_tag(
                "research-bench/python:x",
                "sha256:bb",
                &pk(&["tabulate", "more-itertools"]),
                "23.2.1",
            ),
            derived_tag(
                "research-bench/python:x",
                "sha256:aa",
                &pk(&["tabulate"]),
                "23.2.1",
            ),
            derived_tag(
                "research-bench/python:x",
                "sha256:aa",
                &pk(&["tabulate", "more-itertools"]),
                "24.0",
            ),
        ] {
            assert_ne!(other.rsplit(':').next(), t.rsplit(':').next());
        }
        assert_eq!(base_name("localhost:5000/x/sci:abc"), "sci");
        assert_eq!(base_name("debian"), "debian");
    }

    #[test]
    fn every_manylinux_tag_up_to_the_images_glibc_is_accepted() {
        let p = target_platforms();
        assert!(p.contains(&"manylinux_2_36_x86_64".to_owned()));
        assert!(p.contains(&"manylinux_2_17_x86_64".to_owned()));
        assert!(p.contains(&"manylinux2014_x86_64".to_owned()));
        assert!(
            !p.iter()
                .any(|t| t == "linux_x86_64" || t.contains("_2_37_"))
        );
    }

    #[test]
    fn the_dockerfile_installs_offline_and_quotes_packages() {
        let d = dockerfile(
            "research-bench/python:abc",
            "pip-23.2.1-py3-none-any.whl",
            &["tabulate".into(), "x>=1".into()],
        );
        assert!(d.starts_with("FROM research-bench/python:abc\n"), "{d}");
        assert!(d.contains("--no-index --find-links /tmp/rb-wheels"), "{d}");
        assert!(d.contains("'x>=1'"), "{d}");
        assert!(d.contains("pip-23.2.1-py3-none-any.whl/pip install"), "{d}");
    }

    #[test]
    fn pip_errors_name_the_missing_requirements() {
        let stderr = "ERROR: Could not find a version that satisfies the requirement nope-zz (from versions: none)\nERROR: No matching distribution found for nope-zz\n";
        assert_eq!(not_found(stderr), ["nope-zz"]);
    }
}
