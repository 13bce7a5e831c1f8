"""Runtime forbidden-API guard (research-bench rubrics).

Imported by launch.py's setup_agent_process before any agent code (and, for the agent's own re-run entry command,
through hook/sitecustomize.py). RB_FORBIDDEN: JSON list of dotted names (modules such as
`numpy.fft`, or callables such as `numpy.fft.fft`); RB_AGENT_ROOTS: os.pathsep-separated
directories whose code is the agent's; RB_TRUSTED_ROOTS: extra directories whose code is ours
or the task's (held-out tests); RB_FORBIDDEN_LOG: file receiving one JSON line per violation.

Code counts as the agent's when its file lies under an agent root, or outside every trusted
place (standard library, installed packages, this harness, the trusted roots), e.g. a helper
the agent wrote to /tmp. Code compiled from a string (exec, eval, compile: a made-up file name
such as `<string>` or `<frozen x>`, other than the import machinery's own) counts as the agent's.

Not the boundary: a forbidden module's real files are unreadable to the agent's uid and its
import resolves to a stand-in (forbid_setup.py). This guard is the fallback reporter, and the
only guard for forbidden names that are callables inside an allowed module (numpy.linalg.solve),
which no file permission separates; whatever runs in the agent's process can reach what it wraps
(the real function sits in the stub's closure), so for those it reports and hinders, no more.

Enforcement, whatever the indirection (getattr with a computed name, importlib, __import__,
exec of a string, an alias, a helper module that re-exports): every callable of a forbidden
module (and of its submodules), and every forbidden callable, is replaced by a stub that raises
when called from agent code; imports of a forbidden module from agent code raise ImportError.
Library-internal use (numpy importing numpy.fft for itself) is not affected.
"""

import builtins
import json
import os
import sys
import sysconfig

_FORBIDDEN = json.loads(os.environ.get("RB_FORBIDDEN", "[]"))
_LOG = os.environ.get("RB_FORBIDDEN_LOG", "")


def _roots(var):
    return [os.path.realpath(r) for r in os.environ.get(var, "").split(os.pathsep) if r]


_AGENT = _roots("RB_AGENT_ROOTS") or [os.path.realpath("/workspace")]
_TRUSTED = set(_roots("RB_TRUSTED_ROOTS"))
_TRUSTED.add(os.path.dirname(os.path.realpath(__file__)))
for _k in ("stdlib", "platstdlib", "purelib", "platlib"):
    _p = sysconfig.get_paths().get(_k)
    if _p:
        _TRUSTED.add(os.path.realpath(_p))
for _p in sys.path:
    # At this point sys.path holds only the interpreter's own folders (setup_agent_process adds the
    # workspace after importing us).
    if _p and os.path.isdir(_p):
        _TRUSTED.add(os.path.realpath(_p))
_TRUSTED = [t for t in _TRUSTED if not any(t == a or t.startswith(a + os.sep) for a in _AGENT)]
_real_import = builtins.__import__
_MACHINERY = ("<frozen importlib._bootstrap>", "<frozen importlib._bootstrap_external>")
_verdicts = {}


def _under(path, roots):
    return any(path == r or path.startswith(r + os.sep) for r in roots)


def _file_is_agent(filename):
    v = _verdicts.get(filename)
    if v is None:
        path = os.path.realpath(filename)
        v = _under(path, _AGENT) or not _under(path, _TRUSTED)
        _verdicts[filename] = v
    return v


def _agent_frame(depth):
    """Whether the code `depth` frames up is the agent's (dynamic code: its creator's)."""
    try:
        f = sys._getframe(depth + 1)
    except ValueError:
        return None
    while f is not None:
        name = f.f_code.co_filename
        if name in _MACHINERY:
            f = f.f_back
            continue
        if name.startswith("<"):
            # Compiled from a string: who compiled it is not known from here (a string exec'd
            # from a trusted frame's callback would borrow that trust).
            return name
        if name:
            return name if _file_is_agent(name) else None
        f = f.f_back
    return None


def _hit(name, forbidden):
    return name == forbidden or name.startswith(forbidden + ".")


def _record(name, forbidden, filename, how):
    if _LOG:
        try:
            with open(_LOG, "a") as f:
                f.write(json.dumps({"name": name, "forbidden": forbidden, "file": filename,
                                    "how": how}) + "\n")
        except OSError:
            pass


def _check(names, filename, how):
    for n in names:
        for fb in _FORBIDDEN:
            if _hit(n, fb):
                _record(n, fb, filename, how)
                raise ImportError("forbidden API %s (forbidden by the task: %s)" % (n, fb))


def _stub(fn, label):
    def guard(*args, **kwargs):
        caller = _agent_frame(1)
        if caller:
            _record(label, _forbidden_of(label), caller, "call")
            raise RuntimeError("forbidden API %s called by the agent's code" % label)
        return fn(*args, **kwargs)

    guard.__name__ = label.rsplit(".", 1)[-1]
    guard.__rb_guard__ = True
    return guard


def _forbidden_of(label):
    for fb in _FORBIDDEN:
        if _hit(label, fb):
            return fb
    return label


def _is_plain_callable(v):
    return callable(v) and not isinstance(v, type) and not isinstance(v, type(sys)) \
        and not getattr(v, "__rb_guard__", False)


def _wrap_module(mod_name, mod):
    if getattr(mod, "__rb_forbidden_stub__", False):
        return  # a stand-in made by forbid_setup.py: nothing real to wrap
    for attr in list(getattr(mod, "__dict__", {})):
        try:
            v = mod.__dict__[attr]
        except KeyError:
            continue
        if _is_plain_callable(v):
            try:
                setattr(mod, attr, _stub(v, mod_name + "." + attr))
            except (AttributeError, TypeError):
                pass


_busy = []


def _wrap_callables():
    # Every pass looks again: a module seen while it was still initialising (numpy.fft during
    # `import numpy`) gains its functions later. Guarded callables are skipped. Not re-entered
    # (an attribute lookup may import).
    if _busy:
        return
    _busy.append(True)
    try:
        _wrap_pass()
    finally:
        _busy.pop()


_seen = set()
_matching = []


def _wrap_pass():
    if len(_seen) != len(sys.modules):
        for mod_name in list(sys.modules):
            if mod_name in _seen:
                continue
            _seen.add(mod_name)
            if any(_hit(mod_name, fb) for fb in _FORBIDDEN):
                _matching.append(mod_name)
    for mod_name in _matching:
        mod = sys.modules.get(mod_name)
        if mod is not None:
            _wrap_module(mod_name, mod)
    for fb in _FORBIDDEN:
        mod_name, _, attr = fb.rpartition(".")
        mod = sys.modules.get(mod_name) if mod_name else None
        if mod is None:
            continue
        v = getattr(mod, attr, None)
        if _is_plain_callable(v):
            try:
                setattr(mod, attr, _stub(v, fb))
            except (AttributeError, TypeError):
                pass


def _guarded_import(name, globals=None, locals=None, fromlist=(), level=0):
    if level == 0:
        caller = _agent_frame(1)
        if caller:
            names = [name] + [name + "." + f for f in (fromlist or ()) if f != "*"]
            _check(names, caller, "import")
    module = _real_import(name, globals, locals, fromlist, level)
    _wrap_callables()
    return module


if _FORBIDDEN:
    builtins.__import__ = _guarded_import
    import importlib

    _real_import_module = importlib.import_module

    def _guarded_import_module(name, package=None):
        caller = _agent_frame(1)
        if caller:
            _check([name], caller, "importlib")
        module = _real_import_module(name, package)
        _wrap_callables()
        return module

    importlib.import_module = _guarded_import_module
    _real_reload = importlib.reload

    def _guarded_reload(module):
        # A reload puts the module's real functions back: wrapped again before it returns.
        mod = _real_reload(module)
        _wrap_callables()
        return mod

    importlib.reload = _guarded_reload
    importlib.__import__ = _guarded_import
    _wrap_callables()
