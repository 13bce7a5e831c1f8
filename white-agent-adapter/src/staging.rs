//! Staging agent CLIs on the host, as each driver's [`Staging`] says. Claude Code and Codex ship
//! as PyPI wheels that bundle their native binaries (`claude-agent-sdk`:
//! `claude_agent_sdk/_bundled/claude`; `openai-codex-cli-bin`: `codex_cli_bin/bin/codex` plus
//! its helper binaries); Python agents (Aider, mini-swe-agent) are package trees that
//! `scripts/bootstrap` installs with `pip install --target` into `<agent-packages>/<name>/`.
//! [`stage`] copies a CLI's files once into `<cache>/<name>/<sha256>/` (content-addressed:
//! a binary by its checksum, a package tree by the checksums pip recorded for every file;
//! reused when present and intact) and returns the directory the green agent mounts read-only
//! at `/opt/platform/agents/<name>/`.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::contract::paths::AGENTS_DIR;
use crate::drivers::{DriverKind, Staging};

/// Errors of staging.
#[derive(Debug, thiserror::Error)]
pub enum StagingError {
    #[error(
        "{driver} cannot be staged here: stage its binary yourself and pass --agent-bin (or it needs no staging)"
    )]
    Unsupported { driver: &'static str },
    #[error(
        "the {driver} packages were not found at {path}; install them with scripts/bootstrap (pinned in scripts/agent-packages/{driver}.txt) or set agent_packages"
    )]
    PackagesNotFound { driver: &'static str, path: PathBuf },
    #[error(
        "the {driver} binary was not found at {path}; install the {wheel} wheel into the venv (scripts/python-requirements.txt)"
    )]
    NotFound {
        driver: &'static str,
        path: PathBuf,
        wheel: &'static str,
    },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "cannot write the staging cache at {path}: {source}; check that the cache directory is writable"
    )]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "staged copy {path} does not match its checksum after copying; the disk or the source changed, try again"
    )]
    Corrupt { path: PathBuf },
}

/// A staged CLI: mount `host_dir` read-only at `mount_path`; the binary is `binary`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StagedAgent {
    pub driver: DriverKind,
    /// The cache directory holding the copies.
    pub host_dir: PathBuf,
    /// Where to mount it in the container (`/opt/platform/agents/<name>`).
    pub mount_path: String,
    /// The binary's path inside the container (`python3` for a package tree).
    pub binary: String,
    /// The content address: sha256 of the main binary, or of a package tree's records (hex).
    pub sha256: String,
    /// Whether this call copied the files (false: reused).
    pub copied: bool,
}

/// The venv's `site-packages` (`<venv>/lib/python3.*/site-packages`), if found.
pub fn site_packages(venv: &Path) -> Option<PathBuf> {
    let lib = venv.join("lib");
    let mut candidates: Vec<PathBuf> = fs::read_dir(&lib)
        .ok()?
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.starts_with("python3"))
        })
        .map(|path| path.join("site-packages"))
        .filter(|path| path.is_dir())
        .collect();
    candidates.sort();
    candidates.pop()
}

fn sha256_file(path: &Path) -> Result<String, StagingError> {
    let read_err = |source| StagingError::Read {
        path: path.to_owned(),
        source,
    };
    let mut file = fs::File::open(path).map_err(read_err)?;
    let mut hasher = Sha256::new();
    let mut buffer = vec![0u8; 1024 * 1024];
    loop {
        let n = file.read(&mut buffer).map_err(read_err)?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

fn copy_checked(source: &Path, dest: &Path, expected: &str) -> Result<(), StagingError> {
    let write_err = |source| StagingError::Write {
        path: dest.to_owned(),
        source,
    };
    // A unique temporary name: concurrent stagers never write the same file.
    let tmp = dest.with_extension(format!(
        "partial-{}-{}",
        std::process::id(),
        uuid::Uuid::new_v4().simple()
    ));
    fs::copy(source, &tmp).map_err(write_err)?;
    if sha256_file(&tmp)? != expected {
        let _ = fs::remove_file(&tmp);
        return Err(StagingError::Corrupt {
            path: dest.to_owned(),
        });
    }
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&tmp, fs::Permissions::from_mode(0o555)).map_err(write_err)?;
    fs::rename(&tmp, dest).map_err(write_err)
}

/// Where a driver's staged files come from.
#[derive(Debug, Clone, Copy)]
pub struct Sources<'a> {
    /// The platform's Python venv (wheels holding binary CLIs).
    pub venv: &'a Path,
    /// Where `scripts/bootstrap` installs Python agents' package trees (`<dir>/<name>/`).
    pub agent_packages: &'a Path,
}

/// Stages `driver`'s CLI from `sources` into `cache_dir`.
pub fn stage(
    driver: DriverKind,
    sources: Sources<'_>,
    cache_dir: &Path,
) -> Result<StagedAgent, StagingError> {
    match driver.driver().staging() {
        Staging::Wheel {
            wheel,
            binary,
            main,
            extras,
        } => stage_wheel(
            driver,
            sources.venv,
            cache_dir,
            (wheel, binary, main, extras),
        ),
        Staging::Packages => stage_packages(driver, sources.agent_packages, cache_dir),
        Staging::None | Staging::Operator { .. } => Err(StagingError::Unsupported {
            driver: driver.name(),
        }),
    }
}

fn stage_wheel(
    driver: DriverKind,
    venv: &Path,
    cache_dir: &Path,
    (wheel, binary_name, main, extras): (&'static str, &'static str, &'static str, &[&'static str]),
) -> Result<StagedAgent, StagingError> {
    let site = site_packages(venv).unwrap_or_else(|| venv.join("lib/python3/site-packages"));
    let source = site.join(main);
    if !source.is_file() {
        return Err(StagingError::NotFound {
            driver: driver.name(),
            path: source,
            wheel,
        });
    }
    let digest = sha256_file(&source)?;
    let dir = cache_dir.join(driver.name()).join(&digest);
    let staged_binary = dir.join(binary_name);
    let marker = dir.join(".complete");
    let intact = marker.is_file()
        && fs::read_to_string(&marker).is_ok_and(|recorded| recorded.trim() == digest)
        && sha256_file(&staged_binary).is_ok_and(|actual| actual == digest);
    let mut copied = false;
    if !intact {
        fs::create_dir_all(&dir).map_err(|source| StagingError::Write {
            path: dir.clone(),
            source,
        })?;
        copy_checked(&source, &staged_binary, &digest)?;
        for extra in extras {
            let extra_source = site.join(extra);
            if extra_source.is_file() {
                let name = extra_source
                    .file_name()
                    .map(PathBuf::from)
                    .unwrap_or_default();
                let extra_digest = sha256_file(&extra_source)?;
                copy_checked(&extra_source, &dir.join(name), &extra_digest)?;
            }
        }
        fs::write(&marker, &digest).map_err(|source| StagingError::Write {
            path: marker.clone(),
            source,
        })?;
        copied = true;
        tracing::info!(driver = driver.name(), dir = %dir.display(), "staged agent CLI");
    }
    let mount_path = format!("{AGENTS_DIR}/{}", driver.name());
    Ok(StagedAgent {
        driver,
        host_dir: dir,
        binary: format!("{mount_path}/{binary_name}"),
        mount_path,
        sha256: digest,
        copied,
    })
}

/// The files of a tree (relative paths, sorted), no links followed; links are listed apart.
fn tree_files(root: &Path) -> Result<(Vec<PathBuf>, Vec<PathBuf>), StagingError> {
    let mut files = Vec::new();
    let mut links = Vec::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(rel) = pending.pop() {
        let dir = root.join(&rel);
        let entries = fs::read_dir(&dir).map_err(|source| StagingError::Read {
            path: dir.clone(),
            source,
        })?;
        for entry in entries {
            let entry = entry.map_err(|source| StagingError::Read {
                path: dir.clone(),
                source,
            })?;
            let kind = entry.file_type().map_err(|source| StagingError::Read {
                path: entry.path(),
                source,
            })?;
            let child = rel.join(entry.file_name());
            if kind.is_dir() {
                pending.push(child);
            } else if kind.is_file() {
                files.push(child);
            } else if kind.is_symlink() {
                links.push(child);
            }
        }
    }
    files.sort();
    links.sort();
    Ok((files, links))
}

/// The content address of a package tree: sha256 over its file list and the checksums pip
/// recorded for every installed file (`*.dist-info/RECORD`), so a reinstall of other versions
/// gets another folder while staging reads a few kilobytes, not the tree.
fn tree_digest(root: &Path, files: &[PathBuf]) -> Result<String, StagingError> {
    let mut hasher = Sha256::new();
    for rel in files {
        hasher.update(rel.as_os_str().as_encoded_bytes());
        hasher.update([0]);
        let is_record = rel.file_name().is_some_and(|n| n == "RECORD")
            && rel
                .parent()
                .and_then(Path::file_name)
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.ends_with(".dist-info"));
        if is_record {
            let path = root.join(rel);
            let text = fs::read(&path).map_err(|source| StagingError::Read { path, source })?;
            hasher.update(&text);
        }
    }
    Ok(hex::encode(hasher.finalize()))
}

/// Copies a file keeping its modification time (so the compiled bytecode pip wrote stays valid).
fn copy_keeping_mtime(source: &Path, dest: &Path) -> Result<(), StagingError> {
    let write_err = |source| StagingError::Write {
        path: dest.to_owned(),
        source,
    };
    fs::copy(source, dest).map_err(write_err)?;
    let modified = fs::metadata(source)
        .and_then(|m| m.modified())
        .map_err(|e| StagingError::Read {
            path: source.to_owned(),
            source: e,
        })?;
    fs::File::options()
        .write(true)
        .open(dest)
        .and_then(|f| f.set_modified(modified))
        .map_err(write_err)
}

fn stage_packages(
    driver: DriverKind,
    packages: &Path,
    cache_dir: &Path,
) -> Result<StagedAgent, StagingError> {
    let source = packages.join(driver.name());
    if !source.is_dir() {
        return Err(StagingError::PackagesNotFound {
            driver: driver.name(),
            path: source,
        });
    }
    let (files, links) = tree_files(&source)?;
    let digest = tree_digest(&source, &files)?;
    let dir = cache_dir.join(driver.name()).join(&digest);
    let marker = dir.join(".complete");
    let intact = fs::read_to_string(&marker).is_ok_and(|recorded| recorded.trim() == digest);
    let mut copied = false;
    if !intact {
        // Into a fresh folder beside the final one, renamed at the end: a concurrent stager
        // or a crash never leaves a half-copied tree under the address.
        let partial = cache_dir.join(driver.name()).join(format!(
            "{digest}.partial-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        let write_err = |path: &Path| {
            let path = path.to_owned();
            move |source| StagingError::Write { path, source }
        };
        for rel in &files {
            let dest = partial.join(rel);
            if let Some(parent) = dest.parent() {
                fs::create_dir_all(parent).map_err(write_err(parent))?;
            }
            copy_keeping_mtime(&source.join(rel), &dest)?;
        }
        for rel in &links {
            let target = fs::read_link(source.join(rel)).map_err(|e| StagingError::Read {
                path: source.join(rel),
                source: e,
            })?;
            let dest = partial.join(rel);
            if let Some(parent) = dest.parent() {
                fs::create_dir_all(parent).map_err(write_err(parent))?;
            }
            std::os::unix::fs::symlink(&target, &dest).map_err(write_err(&dest))?;
        }
        fs::write(partial.join(".complete"), &digest).map_err(write_err(&partial))?;
        if dir.exists() {
            let _ = fs::remove_dir_all(&dir);
        }
        if let Err(err) = fs::rename(&partial, &dir) {
            let _ = fs::remove_dir_all(&partial);
            // Another stager won the race with the same content.
            if !fs::read_to_string(&marker).is_ok_and(|recorded| recorded.trim() == digest) {
                return Err(StagingError::Write {
                    path: dir.clone(),
                    source: err,
                });
            }
        }
        copied = true;
        tracing::info!(driver = driver.name(), dir = %dir.display(), files = files.len(), "staged agent packages");
    }
    let mount_path = format!("{AGENTS_DIR}/{}", driver.name());
    Ok(StagedAgent {
        driver,
        host_dir: dir,
        binary: "python3".to_owned(),
        mount_path,
        sha256: digest,
        copied,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sources(venv: &Path) -> Sources<'_> {
        Sources {
            venv,
            agent_packages: venv,
        }
    }

    #[test]
    fn a_package_tree_is_staged_by_its_records_with_times_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let packages = dir.path().join("packages");
        let tree = packages.join("aider");
        fs::create_dir_all(tree.join("aider")).expect("mkdir");
        fs::create_dir_all(tree.join("aider_chat-1.0.dist-info")).expect("mkdir");
        fs::write(tree.join("aider/__init__.py"), "x = 1\n").expect("write");
        fs::write(
            tree.join("aider_chat-1.0.dist-info/RECORD"),
            "aider/__init__.py,sha256=a,6\n",
        )
        .expect("write");
        std::os::unix::fs::symlink("aider/__init__.py", tree.join("link.py")).expect("link");
        let old = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        fs::File::options()
            .write(true)
            .open(tree.join("aider/__init__.py"))
            .and_then(|f| f.set_modified(old))
            .expect("mtime");
        let cache = dir.path().join("cache");
        let src = Sources {
            venv: dir.path(),
            agent_packages: &packages,
        };
        let first = stage(DriverKind::Aider, src, &cache).expect("stage");
        assert!(first.copied);
        assert_eq!(first.mount_path, "/opt/platform/agents/aider");
        let copy = first.host_dir.join("aider/__init__.py");
        assert_eq!(fs::read_to_string(&copy).expect("read"), "x = 1\n");
        assert_eq!(
            fs::metadata(&copy)
                .and_then(|m| m.modified())
                .expect("mtime"),
            old
        );
        assert!(
            fs::symlink_metadata(first.host_dir.join("link.py"))
                .expect("link")
                .is_symlink()
        );
        let again = stage(DriverKind::Aider, src, &cache).expect("again");
        assert!(!again.copied);
        assert_eq!(again.host_dir, first.host_dir);
        // Other recorded versions: another address.
        fs::write(
            tree.join("aider_chat-1.0.dist-info/RECORD"),
            "aider/__init__.py,sha256=b,6\n",
        )
        .expect("write");
        let other = stage(DriverKind::Aider, src, &cache).expect("other");
        assert!(other.copied);
        assert_ne!(other.host_dir, first.host_dir);
    }

    fn fake_venv(root: &Path) -> PathBuf {
        let venv = root.join("venv");
        let site = venv.join("lib/python3.11/site-packages");
        fs::create_dir_all(site.join("codex_cli_bin/bin")).expect("mkdir");
        fs::write(
            site.join("codex_cli_bin/bin/codex"),
            b"#!/bin/sh\necho codex\n",
        )
        .expect("write");
        fs::write(
            site.join("codex_cli_bin/bin/codex-code-mode-host"),
            b"helper",
        )
        .expect("write");
        venv
    }

    #[test]
    fn stages_once_then_reuses_and_repairs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let venv = fake_venv(dir.path());
        let cache = dir.path().join("cache");
        let first = stage(DriverKind::Codex, sources(&venv), &cache).expect("stage");
        assert!(first.copied);
        assert_eq!(first.mount_path, "/opt/platform/agents/codex");
        assert_eq!(first.binary, "/opt/platform/agents/codex/codex");
        assert_eq!(
            fs::read(first.host_dir.join("codex")).expect("read"),
            b"#!/bin/sh\necho codex\n"
        );
        assert!(first.host_dir.join("codex-code-mode-host").is_file());
        assert_eq!(first.sha256.len(), 64);
        let second = stage(DriverKind::Codex, sources(&venv), &cache).expect("stage again");
        assert!(!second.copied);
        assert_eq!(second.host_dir, first.host_dir);
        // A corrupted copy is detected and replaced.
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(
            first.host_dir.join("codex"),
            fs::Permissions::from_mode(0o755),
        )
        .expect("chmod");
        fs::write(first.host_dir.join("codex"), b"tampered").expect("tamper");
        let third = stage(DriverKind::Codex, sources(&venv), &cache).expect("repair");
        assert!(third.copied);
        assert_eq!(
            fs::read(third.host_dir.join("codex")).expect("read"),
            b"#!/bin/sh\necho codex\n"
        );
    }

    #[test]
    fn missing_wheel_and_unsupported_driver_are_clear_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err =
            stage(DriverKind::ClaudeCode, sources(dir.path()), dir.path()).expect_err("no wheel");
        assert!(err.to_string().contains("claude-agent-sdk"), "{err}");
        let err =
            stage(DriverKind::Opencode, sources(dir.path()), dir.path()).expect_err("unsupported");
        assert!(err.to_string().contains("--agent-bin"), "{err}");
        let err =
            stage(DriverKind::Aider, sources(dir.path()), dir.path()).expect_err("not installed");
        assert!(
            err.to_string().contains("scripts/agent-packages/aider.txt"),
            "{err}"
        );
    }

    /// The real wheels in the repository's venv, when present (CI always has them).
    #[test]
    fn real_wheels_are_found_in_the_venv() {
        let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv");
        let site = site_packages(&venv)
            .expect("the repository venv must exist (scripts/bootstrap-tests creates it)");
        assert!(site.join("claude_agent_sdk/_bundled/claude").is_file());
        assert!(site.join("codex_cli_bin/bin/codex").is_file());
    }
}
