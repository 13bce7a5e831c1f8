# Archives: a tar stream from the host extracted at / (owners and modes kept, names that
# leave the root refused), and a tree written as one tar stream (links stored, never
# followed): files move in and out as one stream each way.


def safe_name(name):
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise ValueError("tar entry %r leaves the root" % name)
    return "/" + "/".join(parts)


def make_parents(path, owner):
    """Missing ancestors of path: owned by owner (uid, gid), 0755."""
    missing = []
    parent = os.path.dirname(path)
    while parent not in ("/", "") and not os.path.lexists(parent):
        missing.append(parent)
        parent = os.path.dirname(parent)
    for d in reversed(missing):
        os.mkdir(d, 0o755)
        os.chown(d, owner[0], owner[1])
        os.chmod(d, 0o755)


def clear(path, keep_dir):
    """Removes whatever is at path unless it is a directory kept for a directory entry."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        if keep_dir:
            return
        import shutil

        shutil.rmtree(path)
    else:
        os.unlink(path)


def extract(stream, parents):
    """A tar stream (from the host) at /, owners and modes as in the headers; missing
    ancestors owned by parents (uid, gid)."""
    with tarfile.open(fileobj=stream, mode="r|") as tf:
        for m in tf:
            path = safe_name(m.name)
            if path == "/":
                continue
            make_parents(path, parents)
            if m.isdir():
                clear(path, keep_dir=True)
                if not os.path.isdir(path):
                    os.mkdir(path, 0o700)
                os.chown(path, m.uid, m.gid, follow_symlinks=False)
                os.chmod(path, m.mode & 0o7777)
            elif m.isreg():
                clear(path, keep_dir=False)
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
                with os.fdopen(fd, "wb") as f:
                    src = tf.extractfile(m)
                    while True:
                        chunk = src.read(CHUNK)
                        if not chunk:
                            break
                        f.write(chunk)
                    os.fchown(f.fileno(), m.uid, m.gid)
                    os.fchmod(f.fileno(), m.mode & 0o7777)
                os.utime(path, (m.mtime, m.mtime), follow_symlinks=False)
            elif m.issym():
                clear(path, keep_dir=False)
                os.symlink(m.linkname, path)
                os.chown(path, m.uid, m.gid, follow_symlinks=False)
            elif m.islnk():
                clear(path, keep_dir=False)
                os.link(safe_name(m.linkname), path, follow_symlinks=False)


def archive(path, out):
    """A tar of path (its own name first), links stored as links, never followed."""
    top = os.path.basename(path.rstrip("/")) or "root"
    with tarfile.open(fileobj=out, mode="w|", format=tarfile.PAX_FORMAT) as tf:
        stack = [(path, top)]
        while stack:
            p, arc = stack.pop()
            try:
                st = os.lstat(p)
                info = tf.gettarinfo(p, arc)
            except FileNotFoundError:
                continue
            if info is None:  # a socket
                continue
            if info.isreg():
                try:
                    fd = os.open(p, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
                except OSError:
                    continue
                with os.fdopen(fd, "rb") as f:
                    now = os.fstat(fd)
                    if not stat.S_ISREG(now.st_mode) or now.st_ino != st.st_ino:
                        continue
                    tf.addfile(info, f)
            else:
                tf.addfile(info)
            if info.isdir():
                try:
                    names = sorted(os.listdir(p), reverse=True)
                except OSError:
                    names = []
                for name in names:
                    stack.append((os.path.join(p, name), arc + "/" + name))
