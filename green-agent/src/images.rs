//! Image names of tasks → image references the engine has. Platform images (`python`, `sci`)
//! come from `sandbox::images`: built offline on first use and cached by recipe hash; tasks
//! with `pip_install` get a per-task image on top (`sandbox::images::derived`).

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
    sandbox::images::ensure_named(docker, name, show).await.map_err(|e| match e {
        sandbox::SandboxError::ImageMissing(r) => format!(
            "image {r} is not in the Docker engine and cannot be pulled (no registry); use `python`, `sci` or a locally built image"
        ),
        other => other.to_string(),
    })
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
    for n in &names {
        let tag = resolve_for_run(&docker, n)
            .await
            .map_err(anyhow::Error::msg)?;
        println!("{n}: {tag}");
    }
    Ok(())
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
