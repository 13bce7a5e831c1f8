//! Copy in and out of a container through Docker's archive API.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bollard::query_parameters::{DownloadFromContainerOptions, UploadToContainerOptions};
use bytes::Bytes;
use futures::StreamExt;

use super::{DockerSandbox, api_error, status_of};
use crate::spec_check::check_sandbox_path;
use crate::tarball;
use crate::{CopiedOut, CopyIn, EscapingLinks, SandboxError};

/// Numeric `uid:gid` for the container user spec (`1000`, `1000:1000`, `root`, `agent`, ...).
pub(super) async fn resolve_user(
    sandbox: &DockerSandbox,
    user: &str,
) -> Result<(u32, u32), SandboxError> {
    let (u, g) = match user.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (user, None),
    };
    if let Ok(uid) = u.parse::<u32>() {
        let gid = match g {
            Some(g) => g.parse::<u32>().ok(),
            None => Some(uid),
        };
        if let Some(gid) = gid {
            return Ok((uid, gid));
        }
    }
    if u == "root" && g.is_none_or(|g| g == "root" || g == "0") {
        return Ok((0, 0));
    }
    // A name: look it up in the image's /etc/passwd.
    let passwd = read_small_file(sandbox, "/etc/passwd").await?;
    for line in passwd.lines() {
        let fields: Vec<&str> = line.split(':').collect();
        if fields.len() >= 4 && fields[0] == u {
            let uid = fields[2].parse().unwrap_or(1000);
            let gid = g
                .and_then(|g| g.parse().ok())
                .unwrap_or_else(|| fields[3].parse().unwrap_or(uid));
            return Ok((uid, gid));
        }
    }
    Err(SandboxError::InvalidSpec(format!(
        "user `{user}` does not exist in the image; use a numeric uid[:gid]"
    )))
}

async fn read_small_file(sandbox: &DockerSandbox, path: &str) -> Result<String, SandboxError> {
    let mut stream = sandbox.docker.download_from_container(
        &sandbox.id,
        Some(DownloadFromContainerOptions {
            path: path.to_string(),
        }),
    );
    let mut raw = Vec::new();
    while let Some(chunk) = stream.next().await {
        let chunk =
            chunk.map_err(|e| api_error(&sandbox.endpoint, "download_from_container", e))?;
        raw.extend_from_slice(&chunk);
        if raw.len() > 4 * 1024 * 1024 {
            break;
        }
    }
    let mut archive = tar::Archive::new(&raw[..]);
    let mut text = String::new();
    if let Some(Ok(mut entry)) = archive
        .entries()
        .map_err(|source| SandboxError::Io {
            path: path.into(),
            source,
        })?
        .next()
    {
        use std::io::Read;
        entry
            .read_to_string(&mut text)
            .map_err(|source| SandboxError::Io {
                path: path.into(),
                source,
            })?;
    }
    Ok(text)
}

/// Creates `dir` (and missing parents) owned by the sandbox user; chowns it if it exists.
pub(super) async fn ensure_dir(sandbox: &DockerSandbox, dir: &str) -> Result<(), SandboxError> {
    check_sandbox_path(dir)?;
    let path = Path::new(dir);
    // Walk up to the deepest existing ancestor, then upload the missing chain into it.
    let mut missing: Vec<&std::ffi::OsStr> = Vec::new();
    let mut cursor = path;
    while let (Some(parent), Some(name)) = (cursor.parent(), cursor.file_name()) {
        missing.push(name);
        let parent_str = parent.to_string_lossy().to_string();
        match upload_chain(sandbox, &parent_str, &missing).await {
            Ok(()) => return Ok(()),
            Err(e) if status_of(&e) == Some(404) => cursor = parent,
            Err(e) => return Err(api_error(&sandbox.endpoint, "upload_to_container", e)),
        }
    }
    Ok(())
}

/// Uploads directory entries `a`, `a/b`, ... (`names` is deepest first) into `parent`.
async fn upload_chain(
    sandbox: &DockerSandbox,
    parent: &str,
    names: &[&std::ffi::OsStr],
) -> Result<(), bollard::errors::Error> {
    let (uid, gid) = sandbox.ids;
    let mut builder = tar::Builder::new(Vec::new());
    let mut rel = std::path::PathBuf::new();
    for name in names.iter().rev() {
        rel.push(name);
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Directory);
        header.set_mode(0o755);
        header.set_uid(u64::from(uid));
        header.set_gid(u64::from(gid));
        header.set_size(0);
        header.set_mtime(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
        );
        builder
            .append_data(&mut header, &rel, std::io::empty())
            .map_err(|err| bollard::errors::Error::IOError { err })?;
    }
    let tar = builder
        .into_inner()
        .map_err(|err| bollard::errors::Error::IOError { err })?;
    sandbox
        .docker
        .upload_to_container(
            &sandbox.id,
            Some(UploadToContainerOptions {
                path: parent.to_string(),
                ..Default::default()
            }),
            bollard::body_full(Bytes::from(tar)),
        )
        .await
}

pub(super) async fn copy_in(
    sandbox: &DockerSandbox,
    host_dir: &Path,
    sandbox_dir: &str,
) -> Result<(), SandboxError> {
    check_sandbox_path(sandbox_dir)?;
    if !host_dir.is_dir() {
        return Err(SandboxError::InvalidSpec(format!(
            "copy-in source `{}` is not a directory",
            host_dir.display()
        )));
    }
    let path = Path::new(sandbox_dir);
    let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
        // The root itself: contents only.
        let item = CopyIn::new(host_dir, "/");
        return upload_items(sandbox, vec![item], "/").await;
    };
    // One upload into the parent: the directory's own entry (created, or re-owned, as the
    // sandbox user, 0755) followed by its contents. Only when the parent is missing does the
    // chain of directories get created first (a second upload).
    let item = CopyIn::new(host_dir, format!("/{}", name.to_string_lossy()));
    let parent = parent.to_string_lossy().into_owned();
    match upload_items(sandbox, vec![item.clone()], &parent).await {
        Err(SandboxError::NotFound { .. }) => {
            ensure_dir(sandbox, &parent).await?;
            upload_items(sandbox, vec![item], &parent).await?;
        }
        other => other?,
    }
    tracing::debug!(sandbox = %sandbox.name, from = %host_dir.display(), to = sandbox_dir, "copied in");
    Ok(())
}

/// Spools `items` (destinations relative to `at`) into one tar and uploads it at `at`.
async fn upload_items(
    sandbox: &DockerSandbox,
    items: Vec<CopyIn>,
    at: &str,
) -> Result<(), SandboxError> {
    let ids = sandbox.ids;
    let spool = tokio::task::spawn_blocking(move || spool_items(&items, ids))
        .await
        .map_err(|e| SandboxError::Io {
            path: std::env::temp_dir(),
            source: std::io::Error::other(e),
        })??;
    upload_spool(sandbox, spool, at).await
}

/// Streams a spooled tar into the container, extracted at `path`.
async fn upload_spool(
    sandbox: &DockerSandbox,
    spool: std::fs::File,
    path: &str,
) -> Result<(), SandboxError> {
    let stream = tokio_util::io::ReaderStream::new(tokio::fs::File::from_std(spool));
    // A large workspace can take longer to upload than the default request timeout.
    let client = sandbox
        .docker
        .clone()
        .with_timeout(std::time::Duration::from_secs(30 * 60));
    client
        .upload_to_container(
            &sandbox.id,
            Some(UploadToContainerOptions {
                path: path.to_string(),
                ..Default::default()
            }),
            bollard::body_try_stream(stream),
        )
        .await
        .map_err(|e| match status_of(&e) {
            Some(404) => SandboxError::NotFound {
                path: path.to_string(),
            },
            _ => api_error(&sandbox.endpoint, "upload_to_container", e),
        })
}

/// Builds one tar, rooted at `/`, holding every item at its destination, and spools it to a
/// temp file.
pub(crate) fn spool_items(
    items: &[CopyIn],
    default_owner: (u32, u32),
) -> Result<std::fs::File, SandboxError> {
    let tmp_err = |source| SandboxError::Io {
        path: std::env::temp_dir(),
        source,
    };
    let file = tempfile::tempfile().map_err(tmp_err)?;
    let mut builder = tar::Builder::new(file);
    builder.follow_symlinks(false);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    for item in items {
        let rel = Path::new(item.sandbox_path.trim_start_matches('/'));
        let (uid, gid) = item.owner.unwrap_or(default_owner);
        let clear = if item.read_only { 0o022 } else { 0 };
        let host = &item.host_path;
        let io = |source| SandboxError::Io {
            path: host.clone(),
            source,
        };
        let meta = std::fs::metadata(host).map_err(io)?;
        if meta.is_dir() {
            if !rel.as_os_str().is_empty() {
                let mut header = tar::Header::new_gnu();
                header.set_entry_type(tar::EntryType::Directory);
                header.set_mode(item.mode.unwrap_or(0o755) & !clear);
                header.set_uid(u64::from(uid));
                header.set_gid(u64::from(gid));
                header.set_size(0);
                header.set_mtime(now);
                builder
                    .append_data(&mut header, rel, std::io::empty())
                    .map_err(io)?;
            }
            tarball::append_tree_at(&mut builder, host, rel, (uid, gid), clear)?;
        } else if meta.is_file() {
            if rel.file_name().is_none() {
                return Err(SandboxError::InvalidSpec(format!(
                    "copy-in destination `{}` names no file for `{}`",
                    item.sandbox_path,
                    host.display()
                )));
            }
            let mut header = tar::Header::new_gnu();
            header.set_metadata_in_mode(&meta, tar::HeaderMode::Complete);
            if let Some(mode) = item.mode {
                header.set_mode(mode);
            }
            header.set_mode(header.mode().map_err(io)? & !clear);
            header.set_uid(u64::from(uid));
            header.set_gid(u64::from(gid));
            header.set_username("").ok();
            header.set_groupname("").ok();
            let f = std::fs::File::open(host).map_err(io)?;
            builder.append_data(&mut header, rel, f).map_err(io)?;
        } else {
            return Err(SandboxError::InvalidSpec(format!(
                "copy-in source `{}` is neither a directory nor a regular file",
                host.display()
            )));
        }
    }
    let mut file = builder.into_inner().map_err(tmp_err)?;
    use std::io::Seek;
    file.rewind().map_err(tmp_err)?;
    Ok(file)
}

/// Creates the working directory `workdir` (owned by the sandbox user, 0755) and copies every
/// item in, in ONE upload (for a container not started yet).
pub(super) async fn copy_in_with_workdir(
    sandbox: &DockerSandbox,
    workdir: &str,
    items: &[CopyIn],
) -> Result<(), SandboxError> {
    let empty = tempfile::tempdir().map_err(|source| SandboxError::Io {
        path: std::env::temp_dir(),
        source,
    })?;
    let mut all = Vec::with_capacity(items.len() + 1);
    all.push(CopyIn::new(empty.path(), workdir));
    all.extend(items.iter().cloned());
    upload_items(sandbox, all, "/").await?;
    tracing::debug!(sandbox = %sandbox.name, items = items.len(), "copied in before the start (one upload)");
    Ok(())
}

/// Copies every item into the container in ONE upload (see [`crate::Sandbox::copy_in_many`]).
pub(super) async fn copy_in_many(
    sandbox: &DockerSandbox,
    items: &[CopyIn],
) -> Result<(), SandboxError> {
    if items.is_empty() {
        return Ok(());
    }
    for item in items {
        check_sandbox_path(&item.sandbox_path)?;
    }
    upload_items(sandbox, items.to_vec(), "/").await?;
    tracing::debug!(sandbox = %sandbox.name, items = items.len(), "copied in (one upload)");
    Ok(())
}

pub(super) async fn copy_out(
    sandbox: &DockerSandbox,
    sandbox_path: &str,
    host_dest: &Path,
    max_bytes: u64,
    links: EscapingLinks,
) -> Result<CopiedOut, SandboxError> {
    check_sandbox_path(sandbox_path)?;
    if sandbox_path == "/" {
        return Err(SandboxError::InvalidSpec(
            "copy-out of the whole filesystem is not supported; name a directory".into(),
        ));
    }
    let stream = sandbox.docker.download_from_container(
        &sandbox.id,
        Some(DownloadFromContainerOptions {
            path: sandbox_path.to_string(),
        }),
    );
    let (extracted, stream_error) =
        extract_stream(stream, sandbox_path, host_dest, max_bytes, links).await;
    if let Some(e) = stream_error {
        return Err(match status_of(&e) {
            Some(404) => SandboxError::NotFound {
                path: sandbox_path.to_string(),
            },
            _ => api_error(&sandbox.endpoint, "download_from_container", e),
        });
    }
    extracted
}

/// Extracts a tar stream of `sandbox_path` (its own name first, as Docker's archive API and
/// the swarm backend's runner send it) into `host_dest` with every copy-out check
/// ([`tarball::extract_capped`]: no entry or link leaving the tree, `max_bytes`, `links`).
/// Stops reading once the extractor stops. Returns the extraction's result and the stream's
/// error, if it failed.
///
/// Cancellable: dropping the future drops the stream (the HTTP response: the engine or the
/// runner stops writing the archive) and tells the extractor, which stops at its next read
/// and then removes `host_dest` when this copy-out created it (nothing half-copied stays on
/// the host; a `host_dest` that existed before is left as the copy-out found it or
/// partially filled).
pub(crate) async fn extract_stream<S, E>(
    mut stream: S,
    sandbox_path: &str,
    host_dest: &Path,
    max_bytes: u64,
    links: EscapingLinks,
) -> (Result<CopiedOut, SandboxError>, Option<E>)
where
    S: futures::Stream<Item = Result<Bytes, E>> + Unpin,
{
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(16);
    let canceled = Arc::new(AtomicBool::new(false));
    let feed = Feed {
        tx: Some(tx),
        canceled: canceled.clone(),
    };
    let dest = host_dest.to_path_buf();
    let shown = sandbox_path.to_string();
    let created = std::fs::symlink_metadata(&dest).is_err();
    let extractor = tokio::task::spawn_blocking(move || {
        let extracted = tarball::extract_capped(
            tarball::ChannelReader::new(rx, canceled.clone()),
            &dest,
            max_bytes,
            &shown,
            links,
        );
        if canceled.load(Ordering::SeqCst) && created {
            remove_copy(&dest);
        }
        extracted
    });
    let mut feed = feed;
    let mut stream_error = None;
    while let Some(chunk) = stream.next().await {
        match chunk {
            Ok(chunk) => {
                if !feed.send(chunk).await {
                    // The extractor stopped (cap, refusal): stop downloading.
                    break;
                }
            }
            Err(e) => {
                stream_error = Some(e);
                break;
            }
        }
    }
    feed.finish();
    drop(stream);
    let extracted = match extractor.await {
        Ok(extracted) => extracted,
        Err(e) => Err(SandboxError::Io {
            path: host_dest.to_path_buf(),
            source: std::io::Error::other(e),
        }),
    };
    (extracted, stream_error)
}

/// The sending side of an extraction: dropped before [`Feed::finish`] (the copy-out's future
/// was dropped), it marks the extraction canceled before closing the channel.
struct Feed {
    tx: Option<tokio::sync::mpsc::Sender<Bytes>>,
    canceled: Arc<AtomicBool>,
}

impl Feed {
    /// Hands a chunk to the extractor; `false` once it stopped reading.
    async fn send(&mut self, chunk: Bytes) -> bool {
        match &self.tx {
            Some(tx) => tx.send(chunk).await.is_ok(),
            None => false,
        }
    }

    /// The stream ended (or broke off): closes the channel, the extractor sees the end.
    fn finish(&mut self) {
        self.tx = None;
    }
}

impl Drop for Feed {
    fn drop(&mut self) {
        if self.tx.is_some() {
            // Before the channel closes (`tx` is dropped after this body).
            self.canceled.store(true, Ordering::SeqCst);
        }
    }
}

/// Removes what a canceled copy-out wrote at `dest` (a file or a tree).
fn remove_copy(dest: &Path) {
    let removed = match std::fs::symlink_metadata(dest) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(dest),
        Ok(_) => std::fs::remove_file(dest),
        Err(_) => Ok(()),
    };
    if let Err(e) = removed {
        tracing::warn!(path = %dest.display(), error = %e, "could not remove a canceled copy-out");
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;
    use std::time::{Duration, Instant};

    use bytes::Bytes;

    use super::extract_stream;
    use crate::EscapingLinks;

    /// A tar of `root/` holding `files` files of 4 KiB each.
    fn tree_tar(files: usize) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        let mut dir = tar::Header::new_gnu();
        dir.set_entry_type(tar::EntryType::Directory);
        dir.set_mode(0o755);
        dir.set_size(0);
        b.append_data(&mut dir, "root", std::io::empty())
            .expect("dir");
        for i in 0..files {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(tar::EntryType::Regular);
            h.set_mode(0o644);
            h.set_size(4096);
            b.append_data(&mut h, format!("root/f{i}"), &[b'x'; 4096][..])
                .expect("file");
        }
        b.into_inner().expect("tar")
    }

    /// Waits up to 5 s for `path` to be gone.
    async fn gone(path: &std::path::Path) -> bool {
        let until = Instant::now() + Duration::from_secs(5);
        while std::fs::symlink_metadata(path).is_ok() {
            if Instant::now() > until {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        true
    }

    /// Dropping a copy-out midway (its budget ran out): the stream is dropped, the extractor
    /// stops and removes the half-written copy it created; nothing stays on the host.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_dropped_copy_out_leaves_nothing_on_the_host() {
        let tar = tree_tar(64);
        let half = tar.len() / 2;
        let first = futures::stream::iter(vec![Ok::<_, Infallible>(Bytes::copy_from_slice(
            &tar[..half],
        ))]);
        // Half the archive, then a stream that never ends (a stalled engine).
        let stream = futures::StreamExt::chain(first, futures::stream::pending());
        let host = tempfile::tempdir().expect("tempdir");
        let dest = host.path().join("out");
        let copy = extract_stream(stream, "/workspace", &dest, u64::MAX, EscapingLinks::Refuse);
        let waited = tokio::time::timeout(Duration::from_millis(300), copy).await;
        assert!(waited.is_err(), "the copy-out cannot end: half its stream");
        assert!(gone(&dest).await, "the partial copy was removed");
        assert_eq!(
            std::fs::read_dir(host.path()).expect("host dir").count(),
            0,
            "nothing else was left"
        );

        // A destination that existed before is not removed (it is not the copy-out's).
        let kept = host.path().join("kept");
        std::fs::create_dir(&kept).expect("mkdir");
        std::fs::write(kept.join("mine"), "x").expect("write");
        let first = futures::stream::iter(vec![Ok::<_, Infallible>(Bytes::copy_from_slice(
            &tar[..half],
        ))]);
        let stream = futures::StreamExt::chain(first, futures::stream::pending());
        let copy = extract_stream(stream, "/workspace", &kept, u64::MAX, EscapingLinks::Refuse);
        assert!(
            tokio::time::timeout(Duration::from_millis(300), copy)
                .await
                .is_err()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(
            kept.join("mine").is_file(),
            "a folder it did not create stays"
        );

        // Not dropped: the whole copy stays.
        let whole = futures::stream::iter(vec![Ok::<_, Infallible>(Bytes::from(tar))]);
        let done = host.path().join("done");
        let (copied, error) =
            extract_stream(whole, "/workspace", &done, u64::MAX, EscapingLinks::Refuse).await;
        assert!(error.is_none());
        assert_eq!(copied.expect("copied").bytes, 64 * 4096);
        assert_eq!(std::fs::read_dir(&done).expect("copy").count(), 64);
    }
}
