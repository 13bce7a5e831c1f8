//! Staging agent CLIs on the host. Claude Code and Codex ship as PyPI wheels that bundle their
//! native binaries (`claude-agent-sdk`: `claude_agent_sdk/_bundled/claude`;
//! `openai-codex-cli-bin`: `codex_cli_bin/bin/codex` plus its helper binaries). [`stage`]
//! copies a CLI's files once into `<cache>/<name>/<sha256>/` (content-addressed, checksummed,
//! reused when present and intact) and returns the directory the green agent mounts read-only
//! at `/opt/platform/agents/<name>/`.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::drivers::{AGENTS_DIR, DriverKind};

/// Errors of staging.
#[derive(Debug, thiserror::Error)]
pub enum StagingError {
    #[error(
        "{driver} cannot be staged: only claude-code and codex come from Python wheels (opencode: stage its binary yourself and pass --agent-bin)"
    )]
    Unsupported { driver: &'static str },
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
    /// The binary's path inside the container.
    pub binary: String,
    /// sha256 of the main binary (hex).
    pub sha256: String,
    /// Whether this call copied the files (false: reused).
    pub copied: bool,
}

/// Where the wheels put the binaries, relative to `site-packages`: (main binary, extra files,
/// wheel name).
fn wheel_layout(
    driver: DriverKind,
) -> Result<(&'static str, &'static [&'static str], &'static str), StagingError> {
    match driver {
        DriverKind::ClaudeCode => Ok(("claude_agent_sdk/_bundled/claude", &[], "claude-agent-sdk")),
        DriverKind::Codex => Ok((
            "codex_cli_bin/bin/codex",
            &["codex_cli_bin/bin/codex-code-mode-host"],
            "openai-codex-cli-bin",
        )),
        other => Err(StagingError::Unsupported {
            driver: other.name(),
        }),
    }
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

/// Stages `driver`'s CLI from the venv at `venv` into `cache_dir`.
pub fn stage(
    driver: DriverKind,
    venv: &Path,
    cache_dir: &Path,
) -> Result<StagedAgent, StagingError> {
    let (main, extras, wheel) = wheel_layout(driver)?;
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
    let binary_name = driver.binary_name().unwrap_or("agent");
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let first = stage(DriverKind::Codex, &venv, &cache).expect("stage");
        assert!(first.copied);
        assert_eq!(first.mount_path, "/opt/platform/agents/codex");
        assert_eq!(first.binary, "/opt/platform/agents/codex/codex");
        assert_eq!(
            fs::read(first.host_dir.join("codex")).expect("read"),
            b"#!/bin/sh\necho codex\n"
        );
        assert!(first.host_dir.join("codex-code-mode-host").is_file());
        assert_eq!(first.sha256.len(), 64);
        let second = stage(DriverKind::Codex, &venv, &cache).expect("stage again");
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
        let third = stage(DriverKind::Codex, &venv, &cache).expect("repair");
        assert!(third.copied);
        assert_eq!(
            fs::read(third.host_dir.join("codex")).expect("read"),
            b"#!/bin/sh\necho codex\n"
        );
    }

    #[test]
    fn missing_wheel_and_unsupported_driver_are_clear_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        let err = stage(DriverKind::ClaudeCode, dir.path(), dir.path()).expect_err("no wheel");
        assert!(err.to_string().contains("claude-agent-sdk"), "{err}");
        let err = stage(DriverKind::Opencode, dir.path(), dir.path()).expect_err("unsupported");
        assert!(err.to_string().contains("--agent-bin"), "{err}");
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
