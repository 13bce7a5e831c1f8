//! The platform's base images, built without a registry: `mmdebstrap --variant=apt` from the
//! machine's own apt sources into a root filesystem tar, imported with Docker's import API and
//! tagged `research-bench/<name>:<first 12 hex of sha256(recipe)>`, so an unchanged recipe is
//! never rebuilt. A host-wide `flock` per recipe keeps concurrent processes from building the
//! same image twice; different recipes build at the same time (they share the downloaded
//! packages, which each build publishes file by file with a rename).
//! [`derived`]: per-task images, a platform image plus wheels from PyPI.

pub mod derived;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bollard::query_parameters::CreateImageOptions;
use futures::StreamExt;
use sha2::{Digest, Sha256};

use crate::child::{ChildSpec, SupervisedChild};
use crate::docker::{DockerBackend, api_error};
use crate::{Backend, SandboxError};

/// Host-wide locks serialising the builds of one recipe: `<prefix><name>.lock`.
const LOCK_PREFIX: &str = "/var/tmp/research-bench-images-";
/// Where the apt sources handed to mmdebstrap come from (the machine's own).
pub const HOST_APT_SOURCES: &str = "/etc/apt/sources.list.d/debian.sources";
/// Work dirs of builds in `/var/tmp` start with this, then the recipe's name and `-`.
pub(crate) const BUILD_DIR_PREFIX: &str = "research-bench-image-";
/// A build that takes longer than this is killed and reported as failed.
pub(crate) const BUILD_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// Bumped when the build procedure changes in a way the recipe text does not show.
const BUILD_PROCEDURE: &str = "mmdebstrap-import-v2-norecommends";
/// Downloaded packages kept between builds (`python` and `sci` share most of theirs).
pub const APT_CACHE_DIR: &str = "/var/cache/research-bench/apt-archives";

/// What to build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRecipe {
    /// Short name (`python`, `sci`).
    pub name: String,
    /// Debian suite.
    pub suite: String,
    /// Debian packages installed on top of the `apt` variant.
    pub packages: Vec<String>,
    /// The non-root user created in the image: `(name, uid)`; its group has the same id.
    pub user: (String, u32),
    /// `ENV` lines of the image config.
    pub env: Vec<String>,
}

const PYTHON_PACKAGES: &[&str] = &[
    "python3",
    "python3-numpy",
    "python3-scipy",
    "python3-pandas",
    "python3-matplotlib",
    "python3-pytest",
    "ca-certificates",
    "procps",
];

const SCI_EXTRA_PACKAGES: &[&str] = &[
    "gcc",
    "g++",
    "make",
    "cmake",
    "r-base-core",
    "r-cran-testthat",
];

/// The recipe called `name` (`python` or `sci`).
pub fn recipe(name: &str) -> Option<ImageRecipe> {
    let mut packages: Vec<String> = PYTHON_PACKAGES.iter().map(|p| p.to_string()).collect();
    match name {
        "python" => {}
        "sci" => packages.extend(SCI_EXTRA_PACKAGES.iter().map(|p| p.to_string())),
        _ => return None,
    }
    Some(ImageRecipe {
        name: name.to_string(),
        suite: "bookworm".to_string(),
        packages,
        user: ("agent".to_string(), 1000),
        env: vec![
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".to_string(),
            "LANG=C.UTF-8".to_string(),
            "MPLBACKEND=Agg".to_string(),
            "PYTHONDONTWRITEBYTECODE=1".to_string(),
        ],
    })
}

/// Every recipe name.
pub fn recipe_names() -> &'static [&'static str] {
    &["python", "sci"]
}

fn canonical_text(recipe: &ImageRecipe) -> String {
    let mut packages = recipe.packages.clone();
    packages.sort();
    packages.dedup();
    format!(
        "procedure={BUILD_PROCEDURE}\nname={}\nsuite={}\npackages={}\nuser={}:{}\nenv={}\n",
        recipe.name,
        recipe.suite,
        packages.join(","),
        recipe.user.0,
        recipe.user.1,
        recipe.env.join("\n  "),
    )
}

/// `research-bench/<name>:<first 12 hex of sha256(recipe)>`.
pub fn tag(recipe: &ImageRecipe) -> String {
    let digest = Sha256::digest(canonical_text(recipe).as_bytes());
    format!(
        "research-bench/{}:{}",
        recipe.name,
        &hex::encode(digest)[..12]
    )
}

/// `python`/`sci` → the recipe's tag; anything else is an image reference and passes through.
pub async fn resolve(name_or_ref: &str) -> String {
    match recipe(name_or_ref) {
        Some(r) => tag(&r),
        None => name_or_ref.to_string(),
    }
}

/// What [`ensure`] is doing (for progress displays).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageProgress {
    /// The image exists already: nothing to do.
    UpToDate { tag: String },
    /// Another process holds the build lock.
    WaitingForLock { path: PathBuf },
    /// A build step started.
    Step { tag: String, step: String },
    /// A line of build output.
    Output(String),
    /// The image was built and tagged.
    Built { tag: String, elapsed: Duration },
}

/// Makes sure the recipe's image exists, building it if needed; returns its tag. A no-op (one
/// API call) when the tag exists.
pub async fn ensure(
    backend: &DockerBackend,
    recipe: &ImageRecipe,
    progress: impl Fn(ImageProgress),
) -> Result<String, SandboxError> {
    let tag = tag(recipe);
    if backend.image_exists(&tag).await? {
        progress(ImageProgress::UpToDate { tag: tag.clone() });
        return Ok(tag);
    }
    let _lock = acquire_lock(&lock_path(&recipe.name), &progress).await?;
    // Someone else may have built it while we waited.
    if backend.image_exists(&tag).await? {
        progress(ImageProgress::UpToDate { tag: tag.clone() });
        return Ok(tag);
    }
    let prefix = build_dir_prefix(&recipe.name);
    remove_stale_build_dirs(&prefix);
    let started = Instant::now();
    let work = tempfile::Builder::new()
        .prefix(&prefix)
        .tempdir_in("/var/tmp")
        .map_err(|source| SandboxError::Io {
            path: "/var/tmp".into(),
            source,
        })?;
    let rootfs = work.path().join("rootfs.tar");
    progress(ImageProgress::Step {
        tag: tag.clone(),
        step: format!(
            "mmdebstrap {} ({} packages)",
            recipe.suite,
            recipe.packages.len()
        ),
    });
    run_mmdebstrap(recipe, &tag, &rootfs, work.path(), &progress).await?;
    let bootstrap_time = started.elapsed();
    progress(ImageProgress::Step {
        tag: tag.clone(),
        step: "docker import".to_string(),
    });
    import(backend, recipe, &tag, &rootfs).await?;
    let elapsed = started.elapsed();
    tracing::info!(%tag, ?elapsed, mmdebstrap = ?bootstrap_time, import = ?(elapsed - bootstrap_time), "built image");
    progress(ImageProgress::Built {
        tag: tag.clone(),
        elapsed,
    });
    Ok(tag)
}

/// [`ensure`] for a name or reference: recipes are built if needed, any other reference must
/// exist already ([`SandboxError::ImageMissing`] otherwise).
pub async fn ensure_named(
    backend: &DockerBackend,
    name_or_ref: &str,
    progress: impl Fn(ImageProgress),
) -> Result<String, SandboxError> {
    match recipe(name_or_ref) {
        Some(r) => ensure(backend, &r, progress).await,
        None => {
            if backend.image_exists(name_or_ref).await? {
                Ok(name_or_ref.to_string())
            } else {
                Err(SandboxError::ImageMissing(name_or_ref.to_string()))
            }
        }
    }
}

/// The build lock of the recipe called `name`.
pub(crate) fn lock_path(name: &str) -> PathBuf {
    PathBuf::from(format!("{LOCK_PREFIX}{name}.lock"))
}

/// What the work dirs of the recipe called `name` start with.
pub(crate) fn build_dir_prefix(name: &str) -> String {
    format!("{BUILD_DIR_PREFIX}{name}-")
}

/// Work dirs of this recipe's builds whose process died (we hold the recipe's lock, so none
/// is in use; other recipes' builds, which may be running, are left alone).
fn remove_stale_build_dirs(prefix: &str) {
    let Ok(entries) = std::fs::read_dir("/var/tmp") else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(prefix) {
            tracing::info!(dir = %entry.path().display(), "removing a dead build's work dir");
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

pub(crate) async fn acquire_lock(
    path: &Path,
    progress: &impl Fn(ImageProgress),
) -> Result<nix::fcntl::Flock<std::fs::File>, SandboxError> {
    use nix::fcntl::{Flock, FlockArg};
    let io = |source| SandboxError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(io)?;
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(lock),
        Err((file, _)) => {
            progress(ImageProgress::WaitingForLock {
                path: path.to_path_buf(),
            });
            tokio::task::spawn_blocking(move || Flock::lock(file, FlockArg::LockExclusive))
                .await
                .map_err(|e| io(std::io::Error::other(e)))?
                .map_err(|(_, errno)| io(std::io::Error::from(errno)))
        }
    }
}

pub(crate) fn build_error(tag: &str, step: &str, detail: impl Into<String>) -> SandboxError {
    SandboxError::ImageBuild {
        image: tag.to_string(),
        step: step.to_string(),
        detail: detail.into(),
    }
}

async fn run_mmdebstrap(
    recipe: &ImageRecipe,
    tag: &str,
    rootfs: &Path,
    workdir: &Path,
    progress: &impl Fn(ImageProgress),
) -> Result<(), SandboxError> {
    let (user, uid) = &recipe.user;
    // The build's downloads land in its own folder first, then move into the shared cache one
    // file at a time (a build reading the cache never sees half a package).
    let downloads = workdir.join("downloads");
    std::fs::create_dir_all(&downloads).map_err(|source| SandboxError::Io {
        path: downloads.clone(),
        source,
    })?;
    let mut args: Vec<String> = vec![
        "-c".into(),
        // mmdebstrap logs to stderr: fold it into stdout so progress sees every line.
        "exec \"$@\" 2>&1".into(),
        "sh".into(),
        "mmdebstrap".into(),
        "--variant=apt".into(),
        format!("--include={}", recipe.packages.join(",")),
        "--aptopt=Acquire::Retries \"3\"".into(),
        "--aptopt=APT::Install-Recommends \"false\"".into(),
        // Reuse downloaded packages across builds.
        "--skip=essential/unlink".into(),
        "--setup-hook=mkdir -p \"$1\"/var/cache/apt/archives/".into(),
        format!("--setup-hook=sync-in {APT_CACHE_DIR} /var/cache/apt/archives/"),
        format!(
            "--customize-hook=sync-out /var/cache/apt/archives {}",
            downloads.display()
        ),
        // No fsync per file: the result is a tar, not a live system (same output, faster).
        "--dpkgopt=force-unsafe-io".into(),
        "--dpkgopt=path-exclude=/usr/share/doc/*".into(),
        "--dpkgopt=path-include=/usr/share/doc/*/copyright".into(),
        "--dpkgopt=path-exclude=/usr/share/man/*".into(),
        "--dpkgopt=path-exclude=/usr/share/locale/*".into(),
        format!(
            "--customize-hook=chroot \"$1\" useradd --create-home --uid {uid} --user-group --shell /bin/bash {user}"
        ),
        recipe.suite.clone(),
        rootfs.display().to_string(),
    ];
    if Path::new(HOST_APT_SOURCES).exists() {
        args.push(HOST_APT_SOURCES.to_string());
    }
    std::fs::create_dir_all(APT_CACHE_DIR).map_err(|source| SandboxError::Io {
        path: APT_CACHE_DIR.into(),
        source,
    })?;
    let mut child = SupervisedChild::spawn(ChildSpec {
        program: "sh".into(),
        args,
        env: std::collections::BTreeMap::new(),
        clear_env: false,
        cwd: workdir.to_path_buf(),
        limits: None,
    })
    .map_err(|e| build_error(tag, "mmdebstrap", format!("{e} (is mmdebstrap installed?)")))?;
    let mut last_lines: std::collections::VecDeque<String> = std::collections::VecDeque::new();
    let drive = async {
        while let Some(line) = child.next_stdout_line().await {
            if last_lines.len() == 20 {
                last_lines.pop_front();
            }
            last_lines.push_back(line.clone());
            progress(ImageProgress::Output(line));
        }
        child.wait().await
    };
    let exit = match tokio::time::timeout(BUILD_TIMEOUT, drive).await {
        Ok(exit) => exit,
        Err(_) => {
            child.kill_tree();
            return Err(build_error(tag, "mmdebstrap", "timed out after 30 minutes"));
        }
    };
    if !exit.success() {
        return Err(build_error(
            tag,
            "mmdebstrap",
            format!(
                "ended with {}; last output:\n{}",
                exit,
                last_lines.into_iter().collect::<Vec<_>>().join("\n")
            ),
        ));
    }
    publish_downloads(&downloads, Path::new(APT_CACHE_DIR));
    Ok(())
}

/// Moves the packages a build downloaded into the shared cache: each one copied under a hidden
/// temporary name, then renamed, so a concurrent build's `sync-in` sees whole files only.
/// Best effort: a package that cannot be cached is downloaded again next time.
fn publish_downloads(from: &Path, cache: &Path) {
    let Ok(entries) = std::fs::read_dir(from) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let text = name.to_string_lossy();
        if !text.ends_with(".deb") || text.starts_with('.') || cache.join(&name).exists() {
            continue;
        }
        let partial = cache.join(format!(".partial-{}-{text}", std::process::id()));
        let copied = std::fs::copy(entry.path(), &partial)
            .and_then(|_| std::fs::rename(&partial, cache.join(&name)));
        if let Err(e) = copied {
            tracing::debug!(package = %text, error = %e, "not cached");
            let _ = std::fs::remove_file(&partial);
        }
    }
}

async fn import(
    backend: &DockerBackend,
    recipe: &ImageRecipe,
    tag: &str,
    rootfs: &Path,
) -> Result<(), SandboxError> {
    let (repo, version) = tag.rsplit_once(':').unwrap_or((tag, "latest"));
    let file = tokio::fs::File::open(rootfs)
        .await
        .map_err(|source| SandboxError::Io {
            path: rootfs.to_path_buf(),
            source,
        })?;
    let body = bollard::body_try_stream(tokio_util::io::ReaderStream::with_capacity(
        file,
        1024 * 1024,
    ));
    let mut changes: Vec<String> = recipe.env.iter().map(|e| format!("ENV {e}")).collect();
    changes.push("CMD [\"/bin/bash\"]".to_string());
    // The upload of a large root filesystem can take longer than the default request timeout.
    let client = backend.client().clone().with_timeout(BUILD_TIMEOUT);
    let mut stream = client.create_image(
        Some(CreateImageOptions {
            from_src: Some("-".to_string()),
            repo: Some(repo.to_string()),
            tag: Some(version.to_string()),
            changes,
            message: Some(format!("research-bench recipe {}", recipe.name)),
            ..Default::default()
        }),
        Some(body),
        None,
    );
    while let Some(item) = stream.next().await {
        item.map_err(|e| match e {
            bollard::errors::Error::DockerStreamError { error } => {
                build_error(tag, "docker import", error)
            }
            e => api_error("docker", "import_image", e),
        })?;
    }
    if !backend.image_exists(tag).await? {
        return Err(build_error(
            tag,
            "docker import",
            "the image is missing after import",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recipes_and_tags() {
        let python = recipe("python").expect("python");
        let sci = recipe("sci").expect("sci");
        assert!(recipe("nope").is_none());
        assert!(sci.packages.contains(&"r-cran-testthat".to_string()));
        assert!(sci.packages.contains(&"python3-scipy".to_string()));
        let t = tag(&python);
        assert!(t.starts_with("research-bench/python:"), "{t}");
        assert_eq!(t.len(), "research-bench/python:".len() + 12);
        assert_eq!(t, tag(&python), "stable");
        assert_ne!(tag(&python).split(':').nth(1), tag(&sci).split(':').nth(1));
        let mut changed = python.clone();
        changed.packages.push("git".into());
        assert_ne!(tag(&changed), t, "a recipe change changes the tag");
    }

    #[tokio::test]
    async fn the_build_lock_excludes_a_second_holder_until_released() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("images.lock");
        let first = acquire_lock(&path, &|_| {}).await.expect("first");
        let waited = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&waited);
        let p2 = path.clone();
        let second = tokio::spawn(async move {
            acquire_lock(&p2, &move |p| {
                if matches!(p, ImageProgress::WaitingForLock { .. }) {
                    flag.store(true, std::sync::atomic::Ordering::SeqCst);
                }
            })
            .await
            .map(|_| ())
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            !second.is_finished(),
            "the second holder got the lock while it was held"
        );
        assert!(waited.load(std::sync::atomic::Ordering::SeqCst));
        drop(first);
        tokio::time::timeout(Duration::from_secs(5), second)
            .await
            .expect("second gets the lock once released")
            .expect("join")
            .expect("lock");
    }

    #[test]
    fn each_recipe_has_its_own_lock_and_work_dirs() {
        assert_ne!(lock_path("python"), lock_path("sci"));
        let (p, s) = (build_dir_prefix("python"), build_dir_prefix("sci"));
        assert!(!p.starts_with(&s) && !s.starts_with(&p), "{p} {s}");
    }

    #[test]
    fn downloads_reach_the_cache_whole_and_only_once() {
        let from = tempfile::tempdir().expect("tempdir");
        let cache = tempfile::tempdir().expect("tempdir");
        for (name, body) in [
            ("a_1_amd64.deb", "new"),
            ("c_1_amd64.deb", "from this build"),
            (".partial-7-b_1_amd64.deb", "half"),
            ("lock", ""),
        ] {
            std::fs::write(from.path().join(name), body).expect("write");
        }
        std::fs::write(cache.path().join("c_1_amd64.deb"), "cached").expect("write");
        publish_downloads(from.path(), cache.path());
        let mut names: Vec<String> = std::fs::read_dir(cache.path())
            .expect("read")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["a_1_amd64.deb", "c_1_amd64.deb"]);
        let read = |n: &str| std::fs::read_to_string(cache.path().join(n)).expect("read");
        assert_eq!(read("a_1_amd64.deb"), "new");
        assert_eq!(read("c_1_amd64.deb"), "cached", "a cached package is kept");
    }

    #[test]
    fn ensure_can_run_on_a_spawned_task() {
        // A compile-time property: this only builds if `ensure`'s future is `Send`.
        fn assert_send<T: Send>(_: &T) {}
        fn check<'a>(backend: &'a DockerBackend, recipe: &'a ImageRecipe) {
            let fut = ensure(backend, recipe, |_| {});
            assert_send(&fut);
        }
        let _: fn(&DockerBackend, &ImageRecipe) = check;
    }

    #[tokio::test]
    async fn resolve_maps_names_and_passes_references() {
        assert_eq!(resolve("python").await, tag(&recipe("python").expect("r")));
        assert_eq!(resolve("debian:bookworm").await, "debian:bookworm");
        assert_eq!(
            resolve("research-bench/python:dev").await,
            "research-bench/python:dev"
        );
    }
}
