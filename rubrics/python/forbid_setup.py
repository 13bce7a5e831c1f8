"""Makes a task's forbidden modules unavailable to agent processes (research-bench rubrics).

Usage (as root, `python3 -I -B`, cwd `/`): forbid_setup.py FORBIDDEN_JSON SHADOW_DIR GID
Prints one JSON object: {"denied": [paths], "stubs": [dotted names], "callables": [names],
"stdlib": [names]}.

For every forbidden name that is an installed module (found without importing anything):
- its real files (a package's folder, or a module's file and its cached bytecode) become
  root:GID, 0750 (folders) / 0640 (files): the agent's uid can neither import nor read them,
  root and the members of GID (the trusted side: our harness, held-out tests run by a trusted
  uid) still can;
- SHADOW_DIR (root-owned, read-only to others; put first on an agent process's import path)
  gets a stand-in: for a top-level module, a stub that raises ImportError when imported; for a
  submodule of an allowed package (numpy.fft), a copy of each parent package made of links to
  the real files except the forbidden child, which is a stub whose names raise. Every use of a
  stub by code outside the standard library and installed packages appends a finding to
  RB_FORBIDDEN_LOG (the same JSON lines as rb_guard.py).
A forbidden name that is not a module (a callable such as numpy.linalg.solve) is listed under
"callables", and a module of the standard library (which our own harness in the agent's process,
pytest, may import) under "stdlib": for those, rb_guard.py's in-process wrappers are the only
guard.
Idempotent: a second run with the same arguments changes nothing more.
"""

import importlib.machinery
import json
import os
import shutil
import sys

STUB = '''"""research-bench: %(name)s is forbidden by this task. This stub stands in for it."""
import os as _rb_os
import sys as _rb_sys

__rb_forbidden_stub__ = True
_RB_NAME = %(name)r
_RB_SHADOW = %(shadow)r


def _rb_trusted_places():
    import sysconfig
    out = [_RB_SHADOW]
    for k in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(k)
        if p:
            out.append(_rb_os.path.realpath(p))
    for p in _rb_sys.path:
        if p and ("site-packages" in p or "dist-packages" in p):
            out.append(_rb_os.path.realpath(p))
    out += [_rb_os.path.realpath(r) for r in
            _rb_os.environ.get("RB_TRUSTED_ROOTS", "").split(_rb_os.pathsep) if r]
    return out


def _rb_user():
    """The first caller outside the import machinery and the standard library: None when it is
    an installed library or trusted code (their own optional use), else its file name."""
    import sysconfig
    std = [_rb_os.path.realpath(sysconfig.get_paths()[k]) for k in ("stdlib", "platstdlib")]
    trusted = _rb_trusted_places()
    f = _rb_sys._getframe(1)
    while f is not None:
        name = f.f_code.co_filename
        if name.startswith("<frozen") or name == __file__:
            f = f.f_back
            continue
        if name.startswith("<"):
            return name
        p = _rb_os.path.realpath(name)
        inside = lambda roots: any(p == r or p.startswith(r + _rb_os.sep) for r in roots)
        if inside(std) and not inside(trusted[1:]):
            f = f.f_back
            continue
        return None if inside(trusted) else name
    return None


def _rb_report(what, how):
    user = _rb_user()
    log = _rb_os.environ.get("RB_FORBIDDEN_LOG", "")
    if user is None or not log:
        return
    try:
        import json
        with open(log, "a") as f:
            f.write(json.dumps({"name": what, "forbidden": _RB_NAME, "file": user,
                                "how": how}) + "\\n")
    except OSError:
        pass


if %(top)r:
    _rb_report(_RB_NAME, "import")
    raise ModuleNotFoundError("%(name)s is forbidden by this task", name=_RB_NAME)


def __getattr__(attr):
    if attr.startswith("__") and attr.endswith("__"):
        raise AttributeError(attr)
    _rb_report(_RB_NAME + "." + attr, "use")
    raise AttributeError("%(name)s.%%s: %(name)s is forbidden by this task" %% attr)
'''


def find(dotted):
    """(spec of every part) without importing; None when a part is not a module."""
    specs = []
    path = None
    for part in dotted.split("."):
        try:
            spec = importlib.machinery.PathFinder.find_spec(part, path)
        except (ImportError, ValueError, OSError):
            spec = None
        if spec is None:
            return None
        specs.append(spec)
        path = spec.submodule_search_locations
        if path is None and part != dotted.split(".")[-1]:
            return None
    return specs


def deny(spec, gid, denied):
    targets = list(spec.submodule_search_locations or [])
    if not targets and spec.origin and os.path.isfile(spec.origin):
        targets.append(spec.origin)
        base = os.path.basename(spec.origin).split(".")[0]
        cache = os.path.join(os.path.dirname(spec.origin), "__pycache__")
        if os.path.isdir(cache):
            targets += [os.path.join(cache, c) for c in os.listdir(cache)
                        if c.split(".")[0] == base]
    for t in targets:
        st = os.lstat(t)
        os.chown(t, 0, gid, follow_symlinks=False)
        if os.path.isdir(t):
            os.chmod(t, 0o750)
        else:
            os.chmod(t, 0o640)
        denied.append(t)
    return st


def entry_module(entry):
    """The module name a folder entry provides (`fft`, `fft.py`, `fft.cpython-311-...so`)."""
    return entry.split(".")[0]


def write_stub(path, name, shadow, top):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "__init__.py"), "w") as f:
        f.write(STUB % {"name": name, "shadow": shadow, "top": top})


def build(node, real_dirs, here, prefix, shadow):
    """Shadow folder `here` for the allowed package `prefix` (real folders `real_dirs`): links to
    every real entry except the children in `node`, which are stubs or deeper shadows."""
    os.makedirs(here, exist_ok=True)
    for real in real_dirs:
        for e in sorted(os.listdir(real)):
            if entry_module(e) in node or os.path.lexists(os.path.join(here, e)):
                continue
            os.symlink(os.path.join(real, e), os.path.join(here, e))
    for child, (stub, deeper, spec) in node.items():
        name = prefix + "." + child
        if stub:
            write_stub(os.path.join(here, child), name, shadow, False)
        else:
            build(deeper, list(spec.submodule_search_locations or []),
                  os.path.join(here, child), name, shadow)


def in_stdlib(spec):
    import sysconfig
    std = [os.path.realpath(sysconfig.get_paths()[k]) for k in ("stdlib", "platstdlib")]
    places = list(spec.submodule_search_locations or []) + [spec.origin or ""]
    for p in places:
        p = os.path.realpath(p) if p else ""
        if p and any(p == r or p.startswith(r + os.sep) for r in std) \
                and "-packages" not in p:
            return True
    return False


def main():
    forbidden = json.loads(sys.argv[1])
    shadow, gid = sys.argv[2], int(sys.argv[3])
    out = {"denied": [], "stubs": [], "callables": [], "stdlib": []}
    tree = {}  # top -> [stub?, children, spec]
    for name in sorted(set(forbidden), key=lambda n: n.count(".")):
        specs = find(name)
        if specs is None:
            parent = find(name.rpartition(".")[0]) if "." in name else None
            if parent is not None:
                out["callables"].append(name)
            continue
        if in_stdlib(specs[0]):
            out["stdlib"].append(name)
            continue
        parts = name.split(".")
        node = tree
        covered = False
        for i, part in enumerate(parts[:-1]):
            entry = node.setdefault(part, [False, {}, specs[i]])
            if entry[0]:
                covered = True
                break
            node = entry[1]
        if covered:
            continue
        node[parts[-1]] = [True, {}, specs[-1]]
        deny(specs[-1], gid, out["denied"])
        out["stubs"].append(name)
    if os.path.lexists(shadow):
        shutil.rmtree(shadow)
    os.makedirs(shadow)
    for top, (stub, children, spec) in tree.items():
        if stub:
            write_stub(os.path.join(shadow, top), top, shadow, True)
        else:
            build(children, list(spec.submodule_search_locations or []),
                  os.path.join(shadow, top), top, shadow)
    for d, dirs, files in os.walk(shadow):
        os.chown(d, 0, 0)
        os.chmod(d, 0o755)
        for f in files:
            p = os.path.join(d, f)
            if not os.path.islink(p):
                os.chown(p, 0, 0)
                os.chmod(p, 0o644)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
