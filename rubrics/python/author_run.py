"""Runs a task-author script (Harbor verifier, `command`) and notes whether it executed a
workspace program (research-bench rubrics).

Usage (as root, `python3 -I -S -B`): author_run.py UID GID ROOTS HARBOR ARGV...
ROOTS: os.pathsep-separated folders holding the agent's files (/workspace, /app). HARBOR: "" for
a plain script (`command`); for a Harbor verifier, the run's copy of its tests: this process
then first lays out Harbor's paths as root (`/logs/verifier` emptied, root-owned, 1777, with
root-made empty `reward.txt`/`reward.json` writable by all, which the script can write but
neither replace nor chmod; `/tests` -> HARBOR when that folder exists and `/tests` does not;
`/app` -> the first root when absent), and once every process of the uid is killed, reads both
reward files with the uid's rights (a link planted there reads nothing the uid cannot): the
report's "layout" (an error text, when the layout failed: the script is not run) and "reward"
({"reward.txt": R, "reward.json": R}, R = {"text": ...} or {"missing": true} or
{"too_large": true}). One root exec instead of three. The script runs
as UID:GID (no supplementary groups) in the current directory with the current environment plus
RB_AUDIT_FD (the write end of a pipe only this process reads) and RB_AUDIT_ROOTS. Its Python
processes load `author_audit.py` (through a `.pth` file in the image's site-packages, read even
by `python3 -I`), whose audit hook writes a line to that pipe before a workspace module is
imported or a workspace file is opened as code or started; meanwhile this process looks every
few milliseconds at the uid's processes for one whose program or arguments are workspace
programs (a process seen again after an exec is looked at again). What the script's children write to the pipe after that cannot take a line back.
The script's standard output goes to standard error (beside its own), so this process's standard
output carries only the report, {"events": [{"how", "path"}], "outlived": [{"pid", "exe"}]},
which no process of the uid can write to, and "reaped": true once every process of the uid was
killed at the end (`kill -9 -1` with its rights); the exit status is the script's.

This process is the script's subreaper: a process of the script's whose parent ended before it
(a daemon, a child left running) becomes ours and is listed under "outlived" (those still
running when the script ends are killed then). Agent code the script ran can only write the
script's verdict after the script wrote it from such a process (or from the script's own
process, where it is listed as agent code the script ran).
"""

import os
import select
# `_signal`, not `signal`: the same calls without the enum module's start-up cost.
import _signal
import stat
import sys
import sysconfig

HERE = os.path.dirname(os.path.abspath(__file__))
CODE_EXT = (".py", ".pyc", ".pyx", ".so", ".sh", ".bash", ".R", ".r", ".jl", ".pl", ".rb",
            ".js", ".ipynb")
PTH = "zz_research_bench_audit.pth"


def dumps(v):
    """JSON text of plain data (dicts, lists, str, bool, int, None): the report, without the
    json module's start-up cost (it imports `re`)."""
    if v is True:
        return "true"
    if v is False:
        return "false"
    if v is None:
        return "null"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        # Surrogates (undecodable bytes of a path) become U+FFFD: JSON readers refuse them.
        return '"' + "".join(c if " " <= c and c not in '"\\' and c != "\x7f" and
                             not "\ud800" <= c <= "\udfff" else
                             "\\ufffd" if "\ud800" <= c <= "\udfff" else
                             "\\u%04x" % ord(c) for c in v) + '"'
    if isinstance(v, dict):
        return "{" + ", ".join(dumps(str(k)) + ": " + dumps(x) for k, x in v.items()) + "}"
    return "[" + ", ".join(dumps(x) for x in v) + "]"


def install_hook():
    site = sysconfig.get_path("purelib")
    os.makedirs(site, exist_ok=True)
    line = ("import os; exec(open(os.environ['RB_AUDIT_HOOK']).read()) "
            "if os.environ.get('RB_AUDIT_FD') and os.environ.get('RB_AUDIT_HOOK') else None\n")
    path = os.path.join(site, PTH)
    try:
        with open(path) as f:
            if f.read() == line:
                return
    except OSError:
        pass
    with open(path, "w") as f:
        f.write(line)
    os.chmod(path, 0o644)


def under(path, roots):
    return any(path == r or path.startswith(r + os.sep) for r in roots)


def is_program(path):
    """A file that runs as code: by name, by its execute bits, or by a `#!` line."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode):
        return False
    if path.endswith(CODE_EXT) or st.st_mode & 0o111:
        return True
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return False


def look(uid, roots, seen, events):
    """The uid's processes whose program or arguments are workspace programs."""
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return
    for pid in pids:
        base = "/proc/" + pid
        try:
            if os.stat(base).st_uid != uid:
                continue
            exe = os.path.realpath(os.readlink(base + "/exe"))
            with open(base + "/cmdline", "rb") as f:
                args = [a.decode("utf-8", "replace") for a in f.read(65536).split(b"\0") if a]
            cwd = os.readlink(base + "/cwd")
        except OSError:
            continue
        key = (pid, exe, tuple(args))
        if key in seen:
            continue
        seen.add(key)
        if under(exe, roots):
            events.append({"how": "process", "path": exe})
            continue
        for a in args[1:]:
            p = os.path.realpath(os.path.join(cwd, a))
            if under(p, roots) and is_program(p):
                events.append({"how": "process argument", "path": p})
                break


def safe_folders(roots):
    """The image's Python folders (standard library, installed packages), resolved, that hold
    no agent root: the audit hook skips resolving paths inside them."""
    import site
    names = {sysconfig.get_path(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    names.update(site.getsitepackages())
    out = []
    for n in names:
        if not n or not os.path.isdir(n):
            continue
        p = os.path.realpath(n)
        st = os.stat(p)
        if st.st_uid != 0 or st.st_mode & 0o022:
            continue  # not root's alone
        if any(under(r, [p]) or under(p, [r]) for r in roots):
            continue
        out.append(p)
    return sorted(out)


def become_subreaper():
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(36, 1, 0, 0, 0) == 0  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def exe_of(pid):
    try:
        return os.readlink("/proc/%d/exe" % pid)
    except OSError:
        return "?"


def reap(uid, gid):
    """Kills every process of the uid at once (`kill -9 -1` with its rights, from a child of
    ours: what a process forked meanwhile cannot escape), so the caller needs no exec of its
    own for it. Whether it was done."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            try:
                os.kill(-1, _signal.SIGKILL)
            except ProcessLookupError:
                pass  # nothing of the uid's left
            os._exit(0)
        except BaseException:
            os._exit(1)
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return False
    # Children the reaped processes left to us (we are their subreaper): collected.
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                break
        except ChildProcessError:
            break
    return os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0


REWARDS = (("reward.txt", 4096), ("reward.json", 65536))
VERIFIER_LOGS = "/logs/verifier"


def harbor_layout(tests, workspace):
    """Harbor's paths for the verifier, as root (see the module's text). An error text, or
    None."""
    import shutil
    try:
        if os.path.lexists(VERIFIER_LOGS):
            if os.path.isdir(VERIFIER_LOGS) and not os.path.islink(VERIFIER_LOGS):
                shutil.rmtree(VERIFIER_LOGS)
            else:
                os.unlink(VERIFIER_LOGS)
        os.makedirs(VERIFIER_LOGS)
        os.chown(VERIFIER_LOGS, 0, 0)
        os.chmod(VERIFIER_LOGS, 0o1777)
        for name, _ in REWARDS:
            path = os.path.join(VERIFIER_LOGS, name)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            os.fchown(fd, 0, 0)
            os.fchmod(fd, 0o666)
            os.close(fd)
        if os.path.islink("/tests"):
            os.unlink("/tests")
        if os.path.isdir(tests) and not os.path.lexists("/tests"):
            os.symlink(tests, "/tests")
        if workspace and not os.path.lexists("/app"):
            os.symlink(workspace, "/app")
    except OSError as e:
        return "cannot prepare %s: %s" % (VERIFIER_LOGS, e)
    return None


def read_rewards(uid, gid):
    """Both reward files, read by a child with the uid's rights (a link planted there reads
    nothing the uid cannot): {name: {"text"} | {"missing"} | {"too_large"}}, or None when the
    child failed."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            # Per file: M (missing), L (too large) or T, 8 hex digits of length, the bytes.
            data = b""
            for name, cap in REWARDS:
                try:
                    with open(os.path.join(VERIFIER_LOGS, name), "rb") as f:
                        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                            data += b"M00000000"
                            continue
                        got = f.read(cap + 1)
                except OSError:
                    data += b"M00000000"
                    continue
                if len(got) > cap:
                    data += b"L00000000"
                else:
                    data += b"T%08x" % len(got) + got
            while data:
                data = data[os.write(w, data):]
            os._exit(0)
        except BaseException:
            os._exit(1)
    os.close(w)
    chunks = []
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
        return None
    data, out = b"".join(chunks), {}
    for name, _ in REWARDS:
        kind, size = data[:1], int(data[1:9] or b"0", 16)
        body, data = data[9:9 + size], data[9 + size:]
        if kind == b"T":
            out[name] = {"text": body.decode("utf-8", "replace")}
        elif kind == b"L":
            out[name] = {"too_large": True}
        elif kind == b"M":
            out[name] = {"missing": True}
        else:
            return None
    return out


def main():
    uid, gid = int(sys.argv[1]), int(sys.argv[2])
    first_root = sys.argv[3].split(os.pathsep)[0]
    roots = [os.path.realpath(r) for r in sys.argv[3].split(os.pathsep) if r]
    harbor = sys.argv[4]
    argv = sys.argv[5:]
    if harbor:
        failed = harbor_layout(harbor, first_root)
        if failed:
            sys.stdout.write(dumps({"layout": failed}))
            sys.stdout.flush()
            sys.exit(0)
    install_hook()
    become_subreaper()
    r, w = os.pipe()
    os.set_inheritable(w, True)
    env = dict(os.environ)
    env.update({"RB_AUDIT_FD": str(w), "RB_AUDIT_ROOTS": os.pathsep.join(roots),
                "RB_AUDIT_HOOK": os.path.join(HERE, "author_audit.py"),
                "RB_AUDIT_SAFE": os.pathsep.join(safe_folders(roots))})
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.dup2(2, 1)
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            os.execvpe(argv[0], argv, env)
        except OSError as e:
            os.write(2, ("cannot run %s: %s\n" % (argv[0], e)).encode())
        os._exit(127)
    os.close(w)
    os.set_blocking(r, False)
    _signal.signal(_signal.SIGTERM, lambda *_: os.kill(pid, _signal.SIGKILL))
    events, seen, buf = [], set(), b""
    outlived, exes = [], {}
    status = None
    while status is None:
        # Our children: the script, and any process of its whose parent ended first.
        while True:
            try:
                done, status_raw = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if done == 0:
                break
            if done == pid:
                status = status_raw
            else:
                outlived.append({"pid": done, "exe": exes.get(done, "?")})
        for key in seen:
            exes.setdefault(int(key[0]), key[1])
        look(uid, roots, seen, events)
        ready, _, _ = select.select([r], [], [], 0 if status is not None else 0.01)
        while ready:
            try:
                chunk = os.read(r, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            if len(buf) < 1 << 20:
                buf += chunk
            ready, _, _ = select.select([r], [], [], 0)
    # What still runs of the script's once it ended outlived it: listed, then killed (before
    # anyone reads the verdict).
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) == os.getpid():
            continue
        try:
            if os.stat("/proc/" + p).st_uid != uid:
                continue
        except OSError:
            continue
        outlived.append({"pid": int(p), "exe": exe_of(int(p))})
        try:
            os.kill(int(p), _signal.SIGKILL)
        except OSError:
            pass
    reaped = reap(uid, gid)
    rewards = read_rewards(uid, gid) if harbor and reaped else None
    # The hook's lines: HOW, a tab, the path's UTF-8 bytes in hex.
    for line in buf.split(b"\n"):
        how, tab, path = line.partition(b"\t")
        if not tab:
            continue
        try:
            path = bytes.fromhex(path.decode("ascii")).decode("utf-8", "replace")
        except ValueError:
            continue
        events.append({"how": how.decode("utf-8", "replace")[:40] or "python",
                       "path": path[:500]})
    uniq = []
    for e in events:
        if e not in uniq:
            uniq.append(e)
    report = {"events": uniq[:50], "outlived": outlived[:20], "reaped": reaped}
    if rewards is not None:
        report["reward"] = rewards
    sys.stdout.write(dumps(report))
    sys.stdout.flush()
    if os.WIFEXITED(status):
        sys.exit(os.WEXITSTATUS(status))
    sys.exit(128 + os.WTERMSIG(status))


if __name__ == "__main__":
    main()
