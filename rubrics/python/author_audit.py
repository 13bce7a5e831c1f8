"""Audit hook of a task-author script's Python processes (research-bench rubrics).

Executed at interpreter start-up, before the script's own code, by a `.pth` line that
author_run.py installs, when RB_AUDIT_FD is set: writes one line to that pipe before a
file under RB_AUDIT_ROOTS (the agent's workspace) is imported, opened as code, executed or
started as a program. The line is in the pipe before any of that code runs, so the code cannot
take it back. Runs inside the script's process: a note, not a barrier.
"""


def _rb_install_audit():
    import os
    import sys

    try:
        fd = int(os.environ.get("RB_AUDIT_FD", ""))
    except ValueError:
        return
    roots = [r for r in os.environ.get("RB_AUDIT_ROOTS", "").split(os.pathsep) if r]
    if not roots:
        return
    # Folders of the image's Python (root-owned: nothing in them leads to the agent's files) are
    # told apart by their name, without resolving every module's path (~6 lookups each).
    safe = tuple(s.rstrip(os.sep) + os.sep
                 for s in os.environ.get("RB_AUDIT_SAFE", "").split(os.pathsep) if s)
    code_ext = (".py", ".pyc", ".pyx", ".so", ".sh", ".bash", ".R", ".r", ".jl", ".ipynb")
    realpath, join, getcwd, write = os.path.realpath, os.path.join, os.getcwd, os.write
    noted = set()

    def under(p):
        try:
            p = os.fsdecode(p)
            if not p or p.startswith("<"):
                return None  # code compiled from a string, not a file
            if safe and p.startswith(safe) and "/.." not in p and "/./" not in p:
                return None
            p = realpath(join(getcwd(), p))
        except (OSError, TypeError, ValueError):
            return None
        for r in roots:
            if p == r or p.startswith(r + os.sep):
                return p
        return None

    def note(how, path):
        if (how, path) in noted:
            return
        noted.add((how, path))
        # HOW, a tab, the path's UTF-8 bytes in hex (author_run.py reads them without json).
        line = how.encode() + b"\t" + path.encode("utf-8", "replace").hex().encode() + b"\n"
        try:
            write(fd, line)
        except OSError:
            pass

    def hook(event, args):
        try:
            if event == "open":
                path = args[0]
                if isinstance(path, (str, bytes)) and os.fsdecode(path).endswith(code_ext):
                    p = under(path)
                    if p:
                        note("python open of code", p)
            elif event == "exec":
                co = args[0]
                p = under(getattr(co, "co_filename", "<>")) if hasattr(co, "co_filename") else None
                if p:
                    note("python exec", p)
            elif event in ("subprocess.Popen", "os.exec", "os.posix_spawn", "os.spawn"):
                cands = [args[0]]
                if len(args) > 1 and isinstance(args[1], (list, tuple)):
                    cands += list(args[1])
                for c in cands:
                    if isinstance(c, (str, bytes, os.PathLike)):
                        p = under(c)
                        if p and os.path.isfile(p):
                            note("python started", p)
            elif event == "os.system":
                for tok in os.fsdecode(args[0]).split():
                    p = under(tok.strip("'\""))
                    if p and os.path.isfile(p):
                        note("python os.system", p)
            elif event == "ctypes.dlopen":
                p = under(args[0]) if isinstance(args[0], (str, bytes)) else None
                if p:
                    note("python dlopen", p)
        except Exception:
            pass

    sys.addaudithook(hook)


_rb_install_audit()
del _rb_install_audit
