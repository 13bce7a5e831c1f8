//! Host-side tar handling for copy-in and copy-out: building an archive of a directory with
//! chosen ownership, and extracting an untrusted archive under a size cap without ever writing
//! outside the destination or leaving a symlink that points out of it.

use std::io::{Read, Write};
use std::path::{Component, Path, PathBuf};

use bytes::{Buf, Bytes};

use crate::{CopiedOut, EscapingLinks, SandboxError};

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> SandboxError + '_ {
    move |source| SandboxError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Appends the contents of `dir` under the archive path `prefix`, owned by `uid:gid`, with the
/// mode bits of `clear` cleared on every entry. The walk is iterative (an explicit stack, entries
/// in name order, each folder before its contents), so a tree of any depth costs no stack.
pub(crate) fn append_tree_at<W: Write>(
    builder: &mut tar::Builder<W>,
    dir: &Path,
    prefix: &Path,
    owner: (u32, u32),
    clear: u32,
) -> Result<(), SandboxError> {
    // Folders still to list, each as its path relative to `dir`; the next one on top.
    let mut pending: Vec<PathBuf> = vec![PathBuf::new()];
    while let Some(rel) = pending.pop() {
        let here = dir.join(&rel);
        let mut entries: Vec<_> = std::fs::read_dir(&here)
            .map_err(io_err(&here))?
            .collect::<Result<_, _>>()
            .map_err(io_err(&here))?;
        entries.sort_by_key(|e| e.file_name());
        // A folder's entries together, in name order; then its subfolders' contents, the first
        // subfolder next (pushed in reverse). Every folder's own entry precedes its contents.
        let mut subdirs = Vec::new();
        for entry in entries {
            let name = rel.join(entry.file_name());
            if append_entry(builder, &entry.path(), &prefix.join(&name), owner, clear)? {
                subdirs.push(name);
            }
        }
        pending.extend(subdirs.into_iter().rev());
    }
    Ok(())
}

/// Appends one entry (not a folder's contents); `true` when it is a folder.
fn append_entry<W: Write>(
    builder: &mut tar::Builder<W>,
    path: &Path,
    archived: &Path,
    (uid, gid): (u32, u32),
    clear: u32,
) -> Result<bool, SandboxError> {
    let meta = std::fs::symlink_metadata(path).map_err(io_err(path))?;
    let mut header = tar::Header::new_gnu();
    header.set_metadata_in_mode(&meta, tar::HeaderMode::Complete);
    header.set_mode(header.mode().map_err(io_err(path))? & !clear);
    header.set_uid(u64::from(uid));
    header.set_gid(u64::from(gid));
    header.set_username("").ok();
    header.set_groupname("").ok();
    let ft = meta.file_type();
    if ft.is_dir() {
        header.set_size(0);
        builder
            .append_data(&mut header, archived, std::io::empty())
            .map_err(io_err(path))?;
        return Ok(true);
    }
    if ft.is_file() {
        let file = std::fs::File::open(path).map_err(io_err(path))?;
        builder
            .append_data(&mut header, archived, file)
            .map_err(io_err(path))?;
    } else if ft.is_symlink() {
        let target = std::fs::read_link(path).map_err(io_err(path))?;
        header.set_size(0);
        builder
            .append_link(&mut header, archived, &target)
            .map_err(io_err(path))?;
    } else {
        tracing::warn!(path = %path.display(), "skipping a special file on copy-in");
    }
    Ok(false)
}

/// A blocking [`Read`] over chunks sent from async code.
pub(crate) struct ChannelReader {
    rx: tokio::sync::mpsc::Receiver<Bytes>,
    current: Bytes,
    /// Set by the sender's side when it was dropped before the stream's end: the channel's
    /// close is then an error, not the end of the archive.
    canceled: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl ChannelReader {
    pub(crate) fn new(
        rx: tokio::sync::mpsc::Receiver<Bytes>,
        canceled: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) -> Self {
        Self {
            rx,
            current: Bytes::new(),
            canceled,
        }
    }
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            match self.rx.blocking_recv() {
                Some(chunk) => self.current = chunk,
                None if self.canceled.load(std::sync::atomic::Ordering::SeqCst) => {
                    // Not `Interrupted`: readers retry that.
                    return Err(std::io::Error::other("the copy-out was canceled"));
                }
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current[..n]);
        self.current.advance(n);
        Ok(n)
    }
}

/// Lexically normalises `path` (no symlink resolution); `None` if it climbs above its start.
fn normalise(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// Entries left out of a copy-out, listed up to [`CopiedOut::MAX_LISTED`].
struct Dropped {
    listed: Vec<String>,
    count: usize,
}

impl Dropped {
    fn add(&mut self, rel: &Path, kind: &str) {
        self.count += 1;
        if self.listed.len() < CopiedOut::MAX_LISTED {
            let name = if rel.as_os_str().is_empty() {
                ".".to_owned()
            } else {
                rel.display().to_string()
            };
            self.listed.push(format!("{name} ({kind})"));
        }
    }
}

/// How many path components below the copied item an extracted entry may have: deeper
/// entries are dropped (listed like special files) and the rest of the tree is kept, so no
/// walk over an agent's tree meets more depth than this.
pub const MAX_TREE_DEPTH: usize = 128;

/// Extracts an archive whose first path component is the copied item itself (as Docker's
/// archive API and [`build_path_tar`] produce) so that the item lands at `dest`.
///
/// Refuses (with [`SandboxError::PathOutsideSandbox`]) entries with absolute or `..` paths,
/// writes through symlinks, and (unless `escaping` says otherwise) symlinks or hard links whose
/// target leaves the copied tree; stops with [`SandboxError::OverSizeCap`] once regular files
/// (hard links counted again) total more than `max_bytes`. FIFOs, sockets and devices are never
/// created: they are listed as dropped, like whatever `escaping` leaves out, and so are entries
/// deeper than [`MAX_TREE_DEPTH`].
pub(crate) fn extract_capped<R: Read>(
    reader: R,
    dest: &Path,
    max_bytes: u64,
    shown_path: &str,
    escaping: EscapingLinks,
) -> Result<CopiedOut, SandboxError> {
    let regular_only = escaping == EscapingLinks::RegularFilesOnly;
    let skip_escaping = escaping != EscapingLinks::Refuse;
    let mut archive = tar::Archive::new(reader);
    let mut total: u64 = 0;
    let mut dropped = Dropped {
        listed: Vec::new(),
        count: 0,
    };
    let mut links: Vec<(PathBuf, PathBuf)> = Vec::new();
    let outside = |entry: &Path| SandboxError::PathOutsideSandbox {
        path: format!("{shown_path} (entry `{}`)", entry.display()),
    };
    let mut add_size = |size: u64| {
        total = total.saturating_add(size);
        if total > max_bytes {
            return Err(SandboxError::OverSizeCap {
                path: shown_path.to_string(),
                size: total,
                cap: max_bytes,
            });
        }
        Ok(())
    };
    for entry in archive.entries().map_err(io_err(dest))? {
        let mut entry = entry.map_err(io_err(dest))?;
        let raw = entry.path().map_err(io_err(dest))?.into_owned();
        // Strip the first component (the copied item's own name).
        let Some(normal) = normalise(&raw) else {
            return Err(outside(&raw));
        };
        if raw
            .components()
            .any(|c| matches!(c, Component::ParentDir | Component::RootDir))
        {
            return Err(outside(&raw));
        }
        let rel: PathBuf = normal.components().skip(1).collect();
        if rel.components().count() > MAX_TREE_DEPTH {
            // Cut: what lies deeper is never written; the rest of the tree is kept.
            dropped.add(&rel, &format!("deeper than {MAX_TREE_DEPTH} levels"));
            continue;
        }
        // A copied file (no components left) is written to `dest` itself.
        let target = if rel.as_os_str().is_empty() {
            dest.to_path_buf()
        } else {
            dest.join(&rel)
        };
        refuse_symlinked_parents(dest, &rel).map_err(|()| outside(&raw))?;
        let kind = entry.header().entry_type();
        match kind {
            tar::EntryType::Directory => {
                if !target.is_dir() {
                    std::fs::create_dir_all(&target).map_err(io_err(&target))?;
                }
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                add_size(entry.header().size().map_err(io_err(dest))?)?;
                if let Some(parent) = target.parent() {
                    std::fs::create_dir_all(parent).map_err(io_err(parent))?;
                }
                remove_if_link(&target)?;
                let mut file = std::fs::File::create(&target).map_err(io_err(&target))?;
                std::io::copy(&mut entry, &mut file).map_err(io_err(&target))?;
                if let Ok(mode) = entry.header().mode() {
                    use std::os::unix::fs::PermissionsExt;
                    let _ = std::fs::set_permissions(
                        &target,
                        std::fs::Permissions::from_mode(mode & 0o777),
                    );
                }
            }
            tar::EntryType::Symlink => {
                if regular_only {
                    // Never created, wherever it points (a loop, `..`, a held-out file).
                    dropped.add(&rel, "symlink");
                    continue;
                }
                let link = entry
                    .link_name()
                    .map_err(io_err(dest))?
                    .ok_or_else(|| outside(&raw))?
                    .into_owned();
                // The target, resolved from the link's directory, must stay in the tree.
                if rel.as_os_str().is_empty() {
                    // The copied path itself is a link: never followed, never copied.
                    return Err(outside(&raw));
                }
                let from = rel.parent().unwrap_or(Path::new("")).join(&link);
                if link.is_absolute() || normalise(&from).is_none() {
                    if skip_escaping {
                        tracing::warn!(entry = %raw.display(), target = %link.display(), "copy-out skipped a symlink leaving the tree");
                        dropped.add(&rel, "symlink leaving the tree");
                        continue;
                    }
                    return Err(outside(&raw));
                }
                if let Some(parent) = target.parent() {
                    std::fs::create_dir_all(parent).map_err(io_err(parent))?;
                }
                remove_if_link(&target)?;
                std::os::unix::fs::symlink(&link, &target).map_err(io_err(&target))?;
                links.push((target, rel));
            }
            tar::EntryType::Link => {
                let link = entry
                    .link_name()
                    .map_err(io_err(dest))?
                    .ok_or_else(|| outside(&raw))?
                    .into_owned();
                let source = normalise(&link).and_then(|link_norm| {
                    let link_rel: PathBuf = link_norm.components().skip(1).collect();
                    refuse_symlinked_parents(dest, &link_rel).ok()?;
                    let source = dest.join(&link_rel);
                    let meta = std::fs::symlink_metadata(&source).ok()?;
                    meta.is_file().then_some((source, meta.len()))
                });
                let Some((source, size)) = source else {
                    if skip_escaping {
                        dropped.add(&rel, "hard link to nothing copied");
                        continue;
                    }
                    return Err(outside(&raw));
                };
                add_size(size)?;
                remove_if_link(&target)?;
                std::fs::hard_link(&source, &target).map_err(io_err(&target))?;
            }
            other => {
                let what = match other {
                    tar::EntryType::Fifo => "FIFO",
                    tar::EntryType::Char | tar::EntryType::Block => "device",
                    _ => "special file",
                };
                tracing::debug!(entry = %raw.display(), ?kind, "skipping a special entry on copy-out");
                dropped.add(&rel, what);
            }
        }
    }
    // A chain of individually harmless links can still resolve outside: check them for real.
    if links.is_empty() {
        return Ok(CopiedOut {
            bytes: total,
            dropped: dropped.listed,
            dropped_count: dropped.count,
        });
    }
    let root = dest.canonicalize().map_err(io_err(dest))?;
    for (link, rel) in links {
        if let Ok(resolved) = link.canonicalize()
            && !resolved.starts_with(&root)
        {
            let _ = std::fs::remove_file(&link);
            if skip_escaping {
                tracing::warn!(link = %link.display(), "copy-out removed a symlink chain leaving the tree");
                dropped.add(&rel, "symlink chain leaving the tree");
                continue;
            }
            return Err(SandboxError::PathOutsideSandbox {
                path: format!(
                    "{shown_path} (symlink `{}` resolves outside)",
                    link.display()
                ),
            });
        }
    }
    Ok(CopiedOut {
        bytes: total,
        dropped: dropped.listed,
        dropped_count: dropped.count,
    })
}

/// Fails if any existing component of `dest/rel` below `dest` (excluding the last) is a symlink.
fn refuse_symlinked_parents(dest: &Path, rel: &Path) -> Result<(), ()> {
    let mut p = dest.to_path_buf();
    let n = rel.components().count();
    for c in rel.components().take(n.saturating_sub(1)) {
        p.push(c);
        if std::fs::symlink_metadata(&p)
            .map(|m| m.file_type().is_symlink())
            .unwrap_or(false)
        {
            return Err(());
        }
    }
    Ok(())
}

fn remove_if_link(path: &Path) -> Result<(), SandboxError> {
    if std::fs::symlink_metadata(path)
        .map(|m| m.file_type().is_symlink())
        .unwrap_or(false)
    {
        std::fs::remove_file(path).map_err(io_err(path))?;
    }
    Ok(())
}

/// Writes a tar of `path` (file, directory or symlink, not followed) whose first component is
/// `path`'s own name: the shape [`extract_capped`] expects (what `docker cp` sends).
#[cfg(test)]
pub(crate) fn build_path_tar<W: Write>(path: &Path, out: W) -> Result<W, SandboxError> {
    let mut builder = tar::Builder::new(out);
    builder.follow_symlinks(false);
    let name = path
        .file_name()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("root"));
    let meta = std::fs::symlink_metadata(path).map_err(io_err(path))?;
    if meta.is_dir() {
        builder.append_dir_all(&name, path).map_err(io_err(path))?;
    } else {
        builder
            .append_path_with_name(path, &name)
            .map_err(io_err(path))?;
    }
    builder.into_inner().map_err(io_err(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tar_with(entries: &[(&str, tar::EntryType, &[u8], Option<&str>)]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (name, kind, data, link) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_entry_type(*kind);
            h.set_mode(0o644);
            h.set_size(data.len() as u64);
            if let Some(link) = link {
                h.set_link_name(link).expect("link name");
            }
            // Write the raw name so `..` survives (the builder would refuse it).
            let bytes = name.as_bytes();
            h.as_old_mut().name[..bytes.len()].copy_from_slice(bytes);
            h.set_cksum();
            b.append(&h, *data).expect("append");
        }
        b.into_inner().expect("tar")
    }

    /// Extracting `tar` (rooted at `/out`) into `dest` is refused as a path outside the sandbox.
    fn assert_outside(tar: &[u8], dest: &Path, mode: EscapingLinks) {
        let err = extract_capped(tar, dest, 100, "/out", mode).expect_err("refused");
        assert!(
            matches!(err, SandboxError::PathOutsideSandbox { .. }),
            "{err}"
        );
    }

    #[test]
    fn extracts_a_tree_to_dest() {
        let dir = tempfile::tempdir().expect("tempdir");
        let src = dir.path().join("src");
        std::fs::create_dir_all(src.join("sub")).expect("mkdir");
        std::fs::write(src.join("a.txt"), "hello").expect("write");
        std::fs::write(src.join("sub/b.txt"), "world!").expect("write");
        std::os::unix::fs::symlink("a.txt", src.join("link")).expect("symlink");
        let tar = build_path_tar(&src, Vec::new()).expect("tar");
        let dest = dir.path().join("out");
        let n = extract_capped(&tar[..], &dest, 100, "/src", EscapingLinks::Refuse)
            .expect("extract")
            .bytes;
        assert_eq!(n, 11);
        assert_eq!(
            std::fs::read_to_string(dest.join("sub/b.txt")).expect("read"),
            "world!"
        );
        assert_eq!(
            std::fs::read_to_string(dest.join("link")).expect("read"),
            "hello"
        );
    }

    #[test]
    fn refuses_dotdot_entries() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tar = tar_with(&[
            ("out", tar::EntryType::Directory, b"", None),
            ("out/../../evil", tar::EntryType::Regular, b"x", None),
        ]);
        assert_outside(&tar, &dir.path().join("o"), EscapingLinks::Refuse);
        assert!(!dir.path().join("evil").exists());
    }

    #[test]
    fn refuses_escaping_symlinks_and_writes_through_links() {
        let dir = tempfile::tempdir().expect("tempdir");
        for (name, link) in [("out/l", "/etc/passwd"), ("out/l", "../../x")] {
            let tar = tar_with(&[
                ("out", tar::EntryType::Directory, b"", None),
                (name, tar::EntryType::Symlink, b"", Some(link)),
            ]);
            assert_outside(&tar, &dir.path().join("o1"), EscapingLinks::Refuse);
        }
        // A chain: up -> ../.. (inside: points to `out`), then esc -> a/b/up/.. (lexically
        // inside, really outside).
        let tar = tar_with(&[
            ("out", tar::EntryType::Directory, b"", None),
            ("out/a/b", tar::EntryType::Directory, b"", None),
            ("out/a/b/up", tar::EntryType::Symlink, b"", Some("../..")),
            ("out/esc", tar::EntryType::Symlink, b"", Some("a/b/up/..")),
        ]);
        assert_outside(&tar, &dir.path().join("o2"), EscapingLinks::Refuse);
        // Writing through a link inside the archive.
        let tar = tar_with(&[
            ("out", tar::EntryType::Directory, b"", None),
            ("out/d", tar::EntryType::Symlink, b"", Some(".")),
            ("out/d/f", tar::EntryType::Regular, b"x", None),
        ]);
        assert_outside(&tar, &dir.path().join("o3"), EscapingLinks::Refuse);
    }

    #[test]
    fn skip_mode_leaves_escaping_links_out_and_keeps_the_rest() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tar = tar_with(&[
            ("out", tar::EntryType::Directory, b"", None),
            ("out/venv/bin", tar::EntryType::Directory, b"", None),
            (
                "out/venv/bin/python",
                tar::EntryType::Symlink,
                b"",
                Some("/usr/bin/python3"),
            ),
            ("out/up", tar::EntryType::Symlink, b"", Some("../..")),
            ("out/ok", tar::EntryType::Symlink, b"", Some("venv")),
            ("out/result.txt", tar::EntryType::Regular, b"42", None),
        ]);
        let dest = dir.path().join("o");
        let got =
            extract_capped(&tar[..], &dest, 100, "/out", EscapingLinks::Skip).expect("extract");
        assert_eq!(got.bytes, 2);
        assert_eq!(
            got.dropped,
            [
                "venv/bin/python (symlink leaving the tree)",
                "up (symlink leaving the tree)"
            ]
        );
        assert_eq!(
            std::fs::read_to_string(dest.join("result.txt")).expect("read"),
            "42"
        );
        assert!(std::fs::symlink_metadata(dest.join("venv/bin/python")).is_err());
        assert!(std::fs::symlink_metadata(dest.join("up")).is_err());
        assert!(dest.join("ok").is_dir(), "links inside the tree stay");
        // The copied path itself being a link is refused in either mode.
        let tar = tar_with(&[("out", tar::EntryType::Symlink, b"", Some("/etc"))]);
        assert_outside(&tar, &dir.path().join("o2"), EscapingLinks::Skip);
    }

    #[test]
    fn regular_files_only_drops_links_fifos_and_devices_and_keeps_the_rest() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tar = tar_with(&[
            ("out", tar::EntryType::Directory, b"", None),
            (
                "out/held",
                tar::EntryType::Symlink,
                b"",
                Some("/grader/hidden/x"),
            ),
            (
                "out/passwd",
                tar::EntryType::Symlink,
                b"",
                Some("/etc/passwd"),
            ),
            ("out/up", tar::EntryType::Symlink, b"", Some("..")),
            ("out/loop", tar::EntryType::Symlink, b"", Some("loop")),
            ("out/inside", tar::EntryType::Symlink, b"", Some("good.txt")),
            ("out/result.txt", tar::EntryType::Fifo, b"", None),
            ("out/zero", tar::EntryType::Char, b"", None),
            ("out/disk", tar::EntryType::Block, b"", None),
            ("out/sub", tar::EntryType::Directory, b"", None),
            ("out/sub/good.txt", tar::EntryType::Regular, b"42", None),
            (
                "out/hard",
                tar::EntryType::Link,
                b"",
                Some("out/sub/good.txt"),
            ),
            (
                "out/hard-out",
                tar::EntryType::Link,
                b"",
                Some("out/nothing"),
            ),
        ]);
        let dest = dir.path().join("o");
        let got = extract_capped(
            &tar[..],
            &dest,
            100,
            "/out",
            EscapingLinks::RegularFilesOnly,
        )
        .expect("never refused");
        assert_eq!(got.bytes, 4, "a hard link counts again against the cap");
        assert_eq!(got.dropped_count, 9);
        assert_eq!(
            got.dropped,
            [
                "held (symlink)",
                "passwd (symlink)",
                "up (symlink)",
                "loop (symlink)",
                "inside (symlink)",
                "result.txt (FIFO)",
                "zero (device)",
                "disk (device)",
                "hard-out (hard link to nothing copied)",
            ]
        );
        assert_eq!(
            std::fs::read(dest.join("sub/good.txt")).expect("read"),
            b"42"
        );
        assert_eq!(std::fs::read(dest.join("hard")).expect("read"), b"42");
        fn tree(dir: &Path, base: &Path, out: &mut Vec<String>) {
            for e in std::fs::read_dir(dir).expect("read_dir") {
                let e = e.expect("entry");
                let ft = e.file_type().expect("type");
                assert!(ft.is_file() || ft.is_dir(), "{e:?}");
                out.push(
                    e.path()
                        .strip_prefix(base)
                        .expect("rel")
                        .display()
                        .to_string(),
                );
                if ft.is_dir() {
                    tree(&e.path(), base, out);
                }
            }
        }
        let mut left = Vec::new();
        tree(&dest, &dest, &mut left);
        left.sort();
        assert_eq!(left, ["hard", "sub", "sub/good.txt"]);
        // The copied path itself being a link: nothing copied, nothing refused.
        let tar = tar_with(&[("out", tar::EntryType::Symlink, b"", Some("/etc"))]);
        let got = extract_capped(
            &tar[..],
            &dir.path().join("o2"),
            100,
            "/out",
            EscapingLinks::RegularFilesOnly,
        )
        .expect("not refused");
        assert_eq!(got.dropped, [". (symlink)"]);
        assert!(!dir.path().join("o2").exists());
    }

    #[test]
    fn stops_over_the_cap() {
        let dir = tempfile::tempdir().expect("tempdir");
        let tar = tar_with(&[
            ("out", tar::EntryType::Directory, b"", None),
            ("out/a", tar::EntryType::Regular, b"12345", None),
            ("out/b", tar::EntryType::Regular, b"67890", None),
        ]);
        let err = extract_capped(
            &tar[..],
            &dir.path().join("o"),
            8,
            "/out",
            EscapingLinks::Refuse,
        )
        .expect_err("cap");
        match err {
            SandboxError::OverSizeCap { size, cap, .. } => assert_eq!((size, cap), (10, 8)),
            other => panic!("unexpected {other}"),
        }
    }

    #[test]
    fn dir_tar_sets_ownership() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("d")).expect("mkdir");
        std::fs::write(dir.path().join("d/f"), "x").expect("write");
        let mut builder = tar::Builder::new(Vec::new());
        append_tree_at(&mut builder, dir.path(), Path::new("top"), (1000, 1001), 0).expect("tar");
        let tar = builder.into_inner().expect("tar");
        let mut archive = tar::Archive::new(&tar[..]);
        let mut names = Vec::new();
        for e in archive.entries().expect("entries") {
            let e = e.expect("entry");
            assert_eq!(e.header().uid().expect("uid"), 1000);
            assert_eq!(e.header().gid().expect("gid"), 1001);
            names.push(e.path().expect("path").display().to_string());
        }
        assert_eq!(names, ["top/d", "top/d/f"]);
    }

    /// A folder `depth` levels deep (each level `d`) with a file `f` at the bottom.
    fn deep_tree(root: &Path, depth: usize) -> PathBuf {
        let mut p = root.to_path_buf();
        for _ in 0..depth {
            p.push("d");
            std::fs::create_dir(&p).expect("mkdir");
        }
        std::fs::write(p.join("f"), "x").expect("write");
        p
    }

    #[test]
    fn a_deep_tree_is_archived_on_a_small_stack() {
        let dir = tempfile::tempdir().expect("tempdir");
        // 1500 levels: a recursive walk (one frame per level) overflows 128 KiB.
        deep_tree(dir.path(), 1500);
        let root = dir.path().to_path_buf();
        let entries = std::thread::Builder::new()
            .stack_size(128 * 1024)
            .spawn(move || {
                let mut builder = tar::Builder::new(Vec::new());
                append_tree_at(&mut builder, &root, Path::new("top"), (0, 0), 0).expect("tar");
                let tar = builder.into_inner().expect("tar");
                let mut archive = tar::Archive::new(&tar[..]);
                archive.entries().expect("entries").count()
            })
            .expect("spawn")
            .join()
            .expect("no overflow");
        assert_eq!(entries, 1501);
    }

    #[test]
    fn an_archive_deeper_than_the_cap_is_cut_and_the_rest_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let src = tempfile::tempdir().expect("tempdir");
        let out = src.path().join("out");
        std::fs::create_dir(&out).expect("mkdir");
        std::fs::write(out.join("top.txt"), "42").expect("write");
        deep_tree(&out, MAX_TREE_DEPTH + 20);
        let tar = build_path_tar(&out, Vec::new()).expect("tar");
        let dest = dir.path().join("o");
        let got = extract_capped(
            &tar[..],
            &dest,
            1 << 20,
            "/out",
            EscapingLinks::RegularFilesOnly,
        )
        .expect("cut, not refused");
        // 20 folders below the cap, and the file at the bottom.
        assert_eq!(got.dropped_count, 21, "{:?}", got.dropped);
        assert!(
            got.dropped[0].ends_with(&format!("(deeper than {MAX_TREE_DEPTH} levels)")),
            "{:?}",
            got.dropped
        );
        assert_eq!(std::fs::read(dest.join("top.txt")).expect("kept"), b"42");
        let kept: PathBuf = std::iter::repeat_n("d", MAX_TREE_DEPTH).collect();
        assert!(dest.join(&kept).is_dir());
        assert!(!dest.join(kept.join("d")).exists());
    }
}
