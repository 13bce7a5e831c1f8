//! No way to raise privileges in a swarm sandbox: `no-new-privileges` when the engine applied
//! the service's `no_new_privileges` (newer engines), else no setuid/setgid file left on the
//! container's root filesystem, removed by a root `chmod` before the sandbox is handed out
//! (before any agent or graded code runs).
//!
//! The files are listed once per image: a fresh container holds exactly its image's files,
//! and no process in it can create a setuid file owned by another user. The list comes from
//! the image's layer folders on this host when the storage driver exposes them
//! (`overlay2`, `fuse-overlayfs`: the union of the layers is a superset of what the container
//! sees; a file a later layer deleted is skipped by the `chmod` script), which takes well under
//! a second, else from `find` inside the container, which takes most of a minute for a large
//! image on a loaded `fuse-overlayfs` engine.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::SwarmBackend;
use crate::{ExecRequest, Sandbox, SandboxError};

/// Lists the setuid/setgid files of the root filesystem, NUL-separated (not crossing mounts).
const LIST_SETID: &str = "find / -xdev -type f -perm /6000 -print0";

/// Removes the setuid/setgid bits of each argument that exists as a regular file.
const STRIP_SETID: &str = "for f in \"$@\"; do if [ -f \"$f\" ] && [ ! -L \"$f\" ]; then chmod ug-s -- \"$f\" || exit 1; fi; done";

/// Makes sure no program in the container can gain privileges (see the module docs).
/// `nnp`: whatever runs in the container already has `no_new_privs` (the engine applied it,
/// or the sandbox runner set it on itself).
pub(super) async fn harden(
    backend: &SwarmBackend,
    container: &dyn Sandbox,
    nnp: bool,
    image_id: &str,
    name: &str,
) -> Result<(), SandboxError> {
    if nnp {
        return Ok(());
    }
    let cell = backend
        .setid_files
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .entry(image_id.to_string())
        .or_default()
        .clone();
    let files = cell
        .get_or_try_init(|| async {
            if let Some(dirs) = layer_dirs(backend, image_id).await {
                match tokio::task::spawn_blocking(move || scan_layers(&dirs)).await {
                    Ok(Ok(files)) => return Ok(files),
                    Ok(Err(e)) => tracing::debug!(error = %e, "walking the image's layers failed; listing inside the container"),
                    Err(e) => tracing::debug!(error = %e, "layer walk task failed"),
                }
            }
            list_in_container(container, name).await
        })
        .await?;
    if files.is_empty() {
        return Ok(());
    }
    let mut argv = vec![
        "sh".to_string(),
        "-c".into(),
        STRIP_SETID.into(),
        "strip".into(),
    ];
    argv.extend(files.iter().cloned());
    let outcome = container.exec(root_exec(argv)).await?;
    if !outcome.success() {
        return Err(SandboxError::Scheduling {
            service: name.to_string(),
            detail: format!(
                "the engine ignored no_new_privileges and removing setuid/setgid bits failed ({}): {}",
                outcome.ended(),
                String::from_utf8_lossy(&outcome.stderr).trim()
            ),
        });
    }
    tracing::debug!(service = %name, files = files.len(), "no no-new-privileges on this engine: removed setuid/setgid bits");
    Ok(())
}

fn root_exec(argv: Vec<String>) -> ExecRequest {
    let mut request = ExecRequest::new(argv);
    request.user = Some("0:0".into());
    request.workdir = Some("/".into());
    request.timeout = Duration::from_secs(600);
    request
}

/// The image's layer folders on this host, when the storage driver is an overlay one and
/// every folder is readable here.
async fn layer_dirs(backend: &SwarmBackend, image_id: &str) -> Option<Vec<PathBuf>> {
    let info = backend.docker.client().inspect_image(image_id).await.ok()?;
    let driver = info.graph_driver?;
    if !matches!(driver.name.as_str(), "overlay2" | "fuse-overlayfs") {
        return None;
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(upper) = driver.data.get("UpperDir") {
        dirs.push(PathBuf::from(upper));
    }
    if let Some(lower) = driver.data.get("LowerDir") {
        dirs.extend(
            lower
                .split(':')
                .filter(|d| !d.is_empty())
                .map(PathBuf::from),
        );
    }
    let readable = !dirs.is_empty() && dirs.iter().all(|d| std::fs::read_dir(d).is_ok());
    readable.then_some(dirs)
}

/// The paths (from `/`) of the regular files with a setuid or setgid bit in any of `layers`,
/// sorted and without duplicates. Never follows a link.
fn scan_layers(layers: &[PathBuf]) -> std::io::Result<Vec<String>> {
    let mut found = std::collections::BTreeSet::new();
    for layer in layers {
        let mut stack = vec![layer.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir)? {
                let entry = entry?;
                let kind = entry.file_type()?;
                if kind.is_dir() {
                    stack.push(entry.path());
                } else if kind.is_file() {
                    let mode = entry.metadata()?.permissions().mode();
                    if mode & 0o6000 != 0 {
                        found.insert(in_image(layer, &entry.path()));
                    }
                }
            }
        }
    }
    Ok(found.into_iter().collect())
}

/// `/relative/path` of `path` inside `layer`.
fn in_image(layer: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(layer).unwrap_or(path);
    format!("/{}", rel.to_string_lossy())
}

/// The setuid/setgid files of a fresh container, listed inside it.
async fn list_in_container(
    container: &dyn Sandbox,
    name: &str,
) -> Result<Vec<String>, SandboxError> {
    let outcome = container
        .exec(root_exec(vec!["sh".into(), "-c".into(), LIST_SETID.into()]))
        .await?;
    if !outcome.success() || outcome.truncated {
        return Err(SandboxError::Scheduling {
            service: name.to_string(),
            detail: format!(
                "the engine ignored no_new_privileges and listing setuid/setgid files failed ({}): {}",
                outcome.ended(),
                String::from_utf8_lossy(&outcome.stderr).trim()
            ),
        });
    }
    Ok(outcome
        .stdout
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layer_scan_finds_setuid_and_setgid_files_only_and_follows_no_link() {
        let lower = tempfile::tempdir().expect("tempdir");
        let upper = tempfile::tempdir().expect("tempdir");
        let make = |root: &Path, rel: &str, mode: u32| {
            let p = root.join(rel);
            std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
            std::fs::write(&p, "x").expect("write");
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).expect("chmod");
        };
        make(lower.path(), "usr/bin/su", 0o4755);
        make(lower.path(), "usr/bin/plain", 0o755);
        make(upper.path(), "usr/bin/wall", 0o2755);
        make(upper.path(), "usr/bin/su", 0o4755);
        // A link to a setuid file is not a file of its own.
        std::os::unix::fs::symlink(
            lower.path().join("usr/bin/su"),
            upper.path().join("su-link"),
        )
        .expect("symlink");
        let found =
            scan_layers(&[upper.path().to_path_buf(), lower.path().to_path_buf()]).expect("scan");
        assert_eq!(found, ["/usr/bin/su", "/usr/bin/wall"]);
    }
}
