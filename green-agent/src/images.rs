//! Image names of tasks → image references the engine has. Platform images (`python`, `sci`)
//! come from `sandbox::images`: built offline on first use and cached by recipe hash. A run
//! builds the missing ones in the background, all at once ([`ImageBuilds`]): its trials whose
//! image is there start at once, the others wait for their own image only.
//! Tasks with `pip_install` get a per-task image on top (`sandbox::images::derived`).

use std::collections::BTreeMap;

use futures::FutureExt as _;
use futures::future::{BoxFuture, Shared};
use sandbox::Backend as _;
use sandbox::docker::DockerBackend;
use sandbox::images::ImageProgress;

/// Prints build progress on stderr (build output lines go to the debug log).
fn show(p: ImageProgress) {
    match p {
        ImageProgress::UpToDate { tag } => tracing::info!(%tag, "image up to date"),
        ImageProgress::WaitingForLock { path } => {
            eprintln!(
                "images: waiting for another build to finish (lock {})",
                path.display()
            )
        }
        ImageProgress::Step { tag, step } => eprintln!("images: {tag}: {step}"),
        ImageProgress::Output(line) => tracing::debug!(target: "images", "{line}"),
        ImageProgress::Built { tag, elapsed } => {
            eprintln!("images: built {tag} in {:.0?}", elapsed)
        }
    }
}

/// Resolves (building if needed) a task's image for a run: `python`/`sci` are platform
/// images; anything else must already exist in the engine (there is no registry).
pub async fn resolve_for_run(docker: &DockerBackend, name: &str) -> Result<String, String> {
    sandbox::images::ensure_named(docker, name, show)
        .await
        .map_err(|e| match e {
            sandbox::SandboxError::ImageMissing(r) => missing(&r),
            other => other.to_string(),
        })
}

/// The message of an image reference the engine lacks.
fn missing(reference: &str) -> String {
    format!(
        "image {reference} is not in the Docker engine and cannot be pulled (no registry); use `python`, `sci` or a locally built image"
    )
}

/// A build's outcome, awaited by every trial of its image.
type Build = Shared<BoxFuture<'static, Result<(), String>>>;
/// A build started: `(tag, recipe size, its task)`.
type Started = (String, usize, tokio::task::JoinHandle<Result<(), String>>);

/// The platform images a run builds in the background (tag → its build). Dropping it stops
/// builds still running (their `mmdebstrap` is killed; the next start cleans up).
#[derive(Default)]
pub struct ImageBuilds {
    /// Each build with its rank (see [`ImageBuilds::rank`]).
    builds: BTreeMap<String, (Build, usize)>,
    handles: Vec<tokio::task::AbortHandle>,
}

impl std::fmt::Debug for ImageBuilds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImageBuilds")
            .field("building", &self.builds.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Drop for ImageBuilds {
    fn drop(&mut self) {
        for h in &self.handles {
            h.abort();
        }
    }
}

impl ImageBuilds {
    /// The builds started: `(tag, recipe size, task)`; a smaller recipe ranks first.
    fn new(started: Vec<Started>) -> Self {
        let mut by_size: Vec<(String, usize)> =
            started.iter().map(|(t, n, _)| (t.clone(), *n)).collect();
        by_size.sort_by_key(|(_, n)| *n);
        let mut builds = ImageBuilds::default();
        for (tag, _, task) in started {
            let rank = 1 + by_size.iter().position(|(t, _)| *t == tag).unwrap_or(0);
            builds.handles.push(task.abort_handle());
            let build = async move {
                task.await
                    .unwrap_or_else(|e| Err(format!("the build stopped: {e}")))
            }
            .boxed()
            .shared();
            builds.builds.insert(tag, (build, rank));
        }
        builds
    }

    /// Waits until the image `tag` exists (at once when it was there already); `Err` names
    /// why its build failed.
    pub async fn ready(&self, tag: &str) -> Result<(), String> {
        match self.builds.get(tag) {
            Some((build, _)) => build.clone().await,
            None => Ok(()),
        }
    }

    /// When the image `tag` is built, in the order trials should start: 0 for an image that
    /// exists, then the builds from the smallest recipe up (they finish in about that order).
    pub fn rank(&self, tag: &str) -> usize {
        self.builds.get(tag).map_or(0, |(_, rank)| *rank)
    }

    /// The first failed build: `(tag, reason)` (builds still running count as not failed).
    pub fn failed(&self) -> Option<(String, String)> {
        self.builds.iter().find_map(|(tag, (b, _))| match b.peek() {
            Some(Err(reason)) => Some((tag.clone(), reason.clone())),
            _ => None,
        })
    }
}

/// The image references of a run's tasks (name → reference) and the builds of the platform
/// images still missing, started now in the background. An image reference that is not a
/// recipe must exist already: `Err((name, reason))` otherwise.
pub async fn start_for_run(
    docker: &DockerBackend,
    names: &[String],
) -> Result<(BTreeMap<String, String>, ImageBuilds), (String, String)> {
    let mut resolved = BTreeMap::new();
    let mut started = Vec::new();
    for name in names {
        let name = name.as_str();
        if resolved.contains_key(name) {
            continue;
        }
        let reference = sandbox::images::resolve(name).await;
        let exists = docker
            .image_exists(&reference)
            .await
            .map_err(|e| (name.to_owned(), e.to_string()))?;
        match sandbox::images::recipe(name) {
            Some(recipe) if !exists => {
                let size = recipe.packages.len();
                let docker = docker.clone();
                let task = tokio::spawn(async move {
                    sandbox::images::ensure(&docker, &recipe, show)
                        .await
                        .map(drop)
                        .map_err(|e| e.to_string())
                });
                started.push((reference.clone(), size, task));
            }
            Some(_) => {}
            None if exists => {}
            None => return Err((name.to_owned(), missing(&reference))),
        }
        resolved.insert(name.to_owned(), reference);
    }
    Ok((resolved, ImageBuilds::new(started)))
}

/// Resolves (building if needed) the per-task image of `packages` on the resolved platform
/// image `base`: `images: pip download …`, `images: built …` on stderr; reused when it exists.
pub async fn derive_for_run(
    docker: &DockerBackend,
    base: &str,
    packages: &[String],
) -> Result<String, String> {
    sandbox::images::derived::ensure(docker, base, packages, |p| match p {
        ImageProgress::UpToDate { tag } => {
            eprintln!("images: {tag} ({}) up to date, reused", packages.join(" "))
        }
        other => show(other),
    })
    .await
    .map_err(|e| e.to_string())
}

/// The images `which` names, or every recipe when it names none.
fn named_or_every_recipe(which: &[String]) -> Vec<String> {
    if which.is_empty() {
        sandbox::images::recipe_names()
            .iter()
            .map(|s| (*s).to_owned())
            .collect()
    } else {
        which.to_vec()
    }
}

/// This machine's Docker Engine, or an error saying it is needed.
async fn connect_here() -> anyhow::Result<DockerBackend> {
    DockerBackend::connect()
        .await
        .map_err(|e| anyhow::Error::new(e).context("cannot use Docker"))
}

/// `green-agent images build [python|sci]` (default: every recipe).
pub async fn build(which: &[String]) -> anyhow::Result<()> {
    let names = named_or_every_recipe(which);
    for n in &names {
        if sandbox::images::recipe(n).is_none() {
            anyhow::bail!(
                "unknown image recipe `{n}`: choose from {}",
                sandbox::images::recipe_names().join(", ")
            );
        }
    }
    let docker = connect_here().await?;
    // every recipe at once (each has its own build lock; they share downloaded packages)
    let built = futures::future::join_all(names.iter().map(|n| resolve_for_run(&docker, n))).await;
    let mut first_error = None;
    for (n, tag) in names.iter().zip(built) {
        match tag {
            Ok(tag) => println!("{n}: {tag}"),
            Err(e) => {
                eprintln!("{n}: {e}");
                first_error.get_or_insert(anyhow::anyhow!("building image `{n}`: {e}"));
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// `green-agent images distribute --to ENGINE... [IMAGES]`: every image (recipes built here
/// first when missing) to every engine, one line per (image, engine).
pub async fn distribute(to: &[String], which: &[String]) -> anyhow::Result<()> {
    let names = named_or_every_recipe(which);
    let here = connect_here().await?;
    let mut refs = Vec::new();
    for n in &names {
        refs.push(
            resolve_for_run(&here, n)
                .await
                .map_err(anyhow::Error::msg)?,
        );
    }
    let mut engines = Vec::new();
    for url in to {
        let engine = DockerBackend::connect_to(url).await.map_err(|e| {
            anyhow::anyhow!("cannot reach the engine at {url}: {e}; is its API listening there?")
        })?;
        engines.push((url, engine));
    }
    let mut failed = 0;
    for r in &refs {
        for (url, engine) in &engines {
            match sandbox::distribute::distribute(&here, engine, r).await {
                Ok(sandbox::distribute::Distributed::Present { .. }) => {
                    println!("{r} → {url}: present already");
                }
                Ok(sandbox::distribute::Distributed::Sent { bytes, elapsed, .. }) => {
                    println!(
                        "{r} → {url}: sent {:.0} MB in {:.1} s",
                        bytes as f64 / 1e6,
                        elapsed.as_secs_f64()
                    );
                }
                Err(e) => {
                    eprintln!("{r} → {url}: {e}");
                    failed += 1;
                }
            }
        }
    }
    if failed > 0 {
        anyhow::bail!("{failed} image copies failed (see above)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn trials_wait_for_their_own_image_and_smaller_recipes_rank_first() {
        let (release, gate) = tokio::sync::oneshot::channel::<()>();
        let big = tokio::spawn(async move {
            let _ = gate.await;
            Err("mmdebstrap ended with exit status: 100".to_owned())
        });
        let small = tokio::spawn(async { Ok(()) });
        let builds = ImageBuilds::new(vec![
            ("rb/sci:1".into(), 14, big),
            ("rb/python:1".into(), 8, small),
        ]);
        assert_eq!(
            builds.rank("rb/present:1"),
            0,
            "an existing image ranks first"
        );
        assert_eq!(builds.rank("rb/python:1"), 1);
        assert_eq!(builds.rank("rb/sci:1"), 2);
        assert_eq!(builds.ready("rb/present:1").await, Ok(()));
        assert_eq!(builds.ready("rb/python:1").await, Ok(()));
        assert_eq!(builds.failed(), None, "the larger build is still running");
        let waiting = builds.ready("rb/sci:1");
        release.send(()).expect("send");
        let failed = waiting.await.expect_err("its build failed");
        assert!(failed.contains("exit status: 100"), "{failed}");
        let (tag, reason) = builds.failed().expect("failed build");
        assert_eq!(tag, "rb/sci:1");
        assert_eq!(reason, failed);
    }

    #[tokio::test]
    async fn dropping_the_builds_stops_those_still_running() {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let never = tokio::spawn(async move {
            let _keep = tx;
            std::future::pending::<Result<(), String>>().await
        });
        drop(ImageBuilds::new(vec![("rb/python:1".into(), 8, never)]));
        // the task was aborted: its end drops the sender
        assert!(
            tokio::time::timeout(std::time::Duration::from_secs(5), rx)
                .await
                .expect("aborted in time")
                .is_err()
        );
    }
}
