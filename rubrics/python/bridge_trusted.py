"""The trusted side of the bridge (research-bench rubrics): runs the held-out tests in a process
that never runs the agent's code and never holds one of its objects.

Run as: python3 -I -S -B bridge_trusted.py MODE ARGS...   (by bridge_pair.py, as a uid of its
own with no other process; RB_BRIDGE_FDS="IN,OUT" connect it to the agent's worker). Without
`site`'s start-up (`-S`: no `.pth` code, no sitecustomize, ~50 lookups fewer): the installed
packages' folders are added as `site` adds them (`add_site_packages`).
MODE pytest: pytest.main(ARGS); MODE unittest: unittest_runner.py ARGS.

What the held-out tests import from anywhere but the standard library, the installed packages,
this harness and the held-out copies (the workspace, /tmp, ...) is a stand-in module whose
attribute reads, calls and operators are requests to the worker (`bridge_worker.py`). Plain
data crosses as values built here (`rb_values`: numbers, text, bytes, containers, numpy arrays
and scalars); everything else stays in the worker behind a reference (`Remote`), whose every
use is again a request. A callable of the tests passed to the agent's code stays here and is
called on the worker's request. Equality of a reference is identity: no agent `__eq__` decides
a comparison.

Also, in this process:
- an agent module never shadows a trusted one (a `statistics.py` in the workspace is not the
  standard library's, even with the workspace first on the import path);
- loaders given an agent file directly (`spec_from_file_location`, `runpy.run_path`, an
  extension module) load it in the worker instead;
- numpy's and pytest's closeness checks refuse vacuous comparisons (an empty value against a
  non-empty one, arrays of different shapes broadcast together);
- `subprocess.run` and its kin, `os.system`, run the command in the worker, as the agent's uid;
  starting a process any other way fails (the launcher allows this uid one process);
- unpickling admits only plain data (no agent class or function can be named).
"""

import builtins
import os
import sys
import types
import weakref

HERE = os.path.dirname(os.path.abspath(__file__))


class AgentProtocolError(RuntimeError):
    """The agent's worker answered out of turn or with malformed data."""


class AgentWorkerGone(RuntimeError):
    """The agent's worker ended (its code exited, crashed or was killed at the deadline)."""


class AgentExit(RuntimeError):
    """The agent's code raised SystemExit, KeyboardInterrupt or GeneratorExit."""


# ---------------------------------------------------------------------------------------------
# Trusted places

def _real(p):
    return os.path.realpath(p)


class Places:
    def __init__(self, workspace, extra):
        # The interpreter's own import path (`-I`: standard library, installed packages; no
        # working folder, no variable) is root's: its folders are trusted, and so are its
        # entries that do not exist (the standard library's zip): the default finders, not a
        # stand-in, answer for them.
        initial = [p for p in sys.path if p]
        roots = {HERE, os.path.dirname(os.__file__)}
        for p in sys.path:
            if p and os.path.isdir(p):
                roots.add(p)
        roots.update(extra)
        self.cache = {}
        self.workspace = _real(workspace)
        self.roots = sorted({_real(r) for r in roots} - {"/"})
        self.roots = [r for r in self.roots if not self._under(r, [self.workspace])]
        self.initial = frozenset(
            p for p in initial
            if not self._under(os.path.normpath(p), [self.workspace, os.path.normpath(workspace)]))
        self.trusted_path = [p for p in sys.path if p and self.trusted(p)]

    @staticmethod
    def _under(path, roots):
        return any(path == r or path.startswith(r + os.sep) for r in roots)

    def trusted(self, path):
        # The trusted roots are folders no agent code can write (root's, the trusted uid's):
        # a path under one, read as written, needs no look-up; any other path is resolved
        # (a link, an alias such as /lib for /usr/lib) before it is judged. Every look-up
        # counts: a non-root process pays ~75 us a path component on fuse-overlayfs.
        v = self.cache.get(path)
        if v is None and path in self.initial:
            v = self.cache[path] = True
        if v is None:
            p = os.path.normpath(os.path.join(os.getcwd(), path)) if not os.path.isabs(path) \
                else os.path.normpath(path)
            v = self._judge(p) or self._judge(_real(p))
            self.cache[path] = v
        return v

    def _judge(self, p):
        return not self._under(p, [self.workspace]) and self._under(p, self.roots)


# ---------------------------------------------------------------------------------------------
# The channel

class Bridge:
    def __init__(self, rfd, wfd, values):
        self.rfd, self.wfd, self.values = rfd, wfd, values
        self.next_id = 1
        self.callbacks = {}
        self.cb_ids = {}
        self.remotes = weakref.WeakValueDictionary()
        self.modules = {}
        self.exc_classes = {}
        self.pending_release = set()
        self.gone = None
        self.encoder = values.Encoder(self.refer)

    # references ---------------------------------------------------------------------------
    def refer(self, obj):
        rid = _rid(obj)
        if rid is not None:
            return {"$h": rid}
        if isinstance(obj, type) and obj in self.exc_classes.values():
            for hid, c in self.exc_classes.items():
                if c is obj:
                    return {"$h": hid}
        if callable(obj):
            cid = self.cb_ids.get(id(obj))
            if cid is None or self.callbacks.get(cid) is not obj:
                cid = len(self.callbacks) + 1
                self.callbacks[cid] = obj
                self.cb_ids[id(obj)] = cid
            return {"$cb": cid}
        raise TypeError(
            "cannot pass a %s to the agent's code: only plain data (numbers, text, bytes, "
            "lists, tuples, dicts, sets, numpy arrays) and callables cross to the agent's "
            "process" % type(obj).__name__)

    def resolve(self, tag, body):
        if tag == "$cb":
            raise AgentProtocolError("the agent's worker sent a callback reference")
        hid = body.get("$h")
        if type(hid) is not int:
            raise AgentProtocolError("bad reference")
        self.pending_release.discard(hid)
        kind = body.get("kind")
        if kind == "module":
            m = self.modules.get(hid)
            if m is None:
                m = RemoteModule("<agent module %d>" % hid)
                _bind(m, self, hid)
                self.modules[hid] = m
            return m
        if kind == "exc_class":
            return self.exc_class(hid, body)
        r = self.remotes.get(hid)
        if r is None:
            r = Remote.__new__(Remote)
            object.__setattr__(r, "_rb", (self, hid, str(body.get("type", "?"))[:200],
                                          str(kind)))
            self.remotes[hid] = r
        return r

    def exc_class(self, hid, body):
        cls = self.exc_classes.get(hid)
        if cls is None:
            mro = body.get("mro") if isinstance(body.get("mro"), list) else []
            base = self.safe_exception(mro[1:]) or RuntimeError
            name = str(mro[0][1]).rsplit(".", 1)[-1] if mro and isinstance(mro[0], list) \
                and len(mro[0]) == 2 else "AgentError"
            if not name.isidentifier():
                name = "AgentError"
            cls = type(name, (base,), {"__module__": "agent"})
            self.exc_classes[hid] = cls
        return cls

    def safe_exception(self, mro):
        for entry in mro:
            if not (isinstance(entry, list) and len(entry) == 2):
                continue
            mod, qual = str(entry[0]), str(entry[1])
            if mod == "builtins":
                cls = getattr(builtins, qual, None)
            else:
                m = sys.modules.get(mod)
                if m is None or isinstance(m, RemoteModule) or not _module_trusted(m):
                    continue
                cls = m
                for part in qual.split("."):
                    cls = m.__dict__.get(part) if cls is m else getattr(cls, part, None)
                    if cls is None:
                        break
            if isinstance(cls, type) and issubclass(cls, BaseException):
                if issubclass(cls, (SystemExit, KeyboardInterrupt, GeneratorExit)):
                    return AgentExit
                return cls
        return None

    def enc(self, value):
        return self.encoder.encode(value)

    def dec(self, value):
        try:
            return self.values.decode(value, self.resolve)
        except self.values.ValueError_ as e:
            raise AgentProtocolError("the agent's worker sent malformed data: %s" % e) from None

    # requests -----------------------------------------------------------------------------
    def request(self, op, **fields):
        if self.gone is not None:
            raise AgentWorkerGone(self.gone)
        rid = self.next_id
        self.next_id += 1
        msg = {"id": rid, "op": op}
        msg.update(fields)
        if self.pending_release:
            msg["release"] = sorted(self.pending_release)
            self.pending_release.clear()
        try:
            self.values.write_message(self.wfd, msg)
            while True:
                answer = self.values.read_message(self.rfd)
                if not isinstance(answer, dict):
                    raise AgentProtocolError("the agent's worker sent a non-object message")
                if answer.get("op") == "callback":
                    self.serve_callback(answer)
                    continue
                if answer.get("re") != rid:
                    raise AgentProtocolError("the agent's worker answered out of turn")
                return answer
        except self.values.ChannelClosed:
            self.gone = ("the agent's code ended its process (it exited, crashed, or was "
                         "killed at the grading deadline)")
            raise AgentWorkerGone(self.gone) from None
        except self.values.ValueError_ as e:
            self.gone = "the agent's worker broke the channel: %s" % e
            raise AgentWorkerGone(self.gone) from None

    def value(self, op, **fields):
        answer = self.request(op, **fields)
        if "ok" in answer:
            return self.dec(answer["ok"]), answer.get("wb")
        self.raise_error(answer.get("err"))

    def get(self, op, **fields):
        return self.value(op, **fields)[0]

    def raise_error(self, err):
        if not isinstance(err, dict):
            raise AgentProtocolError("the agent's worker sent a malformed error")
        msg = str(err.get("msg", ""))[:4000]
        tb = str(err.get("tb", ""))[-8000:]
        cls = None
        ref = err.get("cls")
        if isinstance(ref, dict) and type(ref.get("$h")) is int:
            cls = self.exc_class(ref["$h"], ref)
        if cls is None:
            mro = err.get("mro") if isinstance(err.get("mro"), list) else []
            cls = self.safe_exception(mro) or RuntimeError
        try:
            exc = cls(msg)
        except Exception:  # noqa: BLE001 (a trusted class with another signature)
            exc = RuntimeError("%s: %s" % (cls.__name__, msg))
        exc.agent_traceback = tb
        if tb:
            try:
                exc.add_note("In the agent's code:\n" + tb)
            except AttributeError:
                pass
        raise exc

    def serve_callback(self, msg):
        rid = msg.get("id")
        try:
            fn = self.callbacks[msg.get("cb")]
            args = self.dec(msg.get("args", []))
            kwargs = self.dec(msg.get("kwargs", {"$d": []}))
            if not isinstance(args, list) or not isinstance(kwargs, dict):
                raise AgentProtocolError("bad callback arguments")
            answer = {"re": rid, "ok": self.enc(fn(*args, **kwargs))}
        except AgentWorkerGone:
            raise
        except Exception as e:  # noqa: BLE001 (the test's callable failing is an answer)
            answer = {"re": rid, "err": {"type": type(e).__name__, "msg": str(e)[:4000]}}
        self.values.write_message(self.wfd, answer)

    def call(self, hid, args, kwargs):
        enc_args = self.enc(list(args))
        value, wb = self.value("call", h=hid, args=enc_args, kwargs=self.enc(dict(kwargs)))
        for item in wb or ():
            self.write_back(args, kwargs, item)
        return value

    def write_back(self, args, kwargs, item):
        if not (isinstance(item, list) and len(item) == 2):
            return
        key, raw = item
        if type(key) is int and 0 <= key < len(args):
            target = args[key]
        elif type(key) is str and key in kwargs:
            target = kwargs[key]
        else:
            return
        new = self.dec(raw)
        np = sys.modules.get("numpy")
        t = type(target)
        if t is list and type(new) is list:
            target[:] = new
        elif t is dict and type(new) is dict:
            target.clear()
            target.update(new)
        elif t is bytearray and type(new) is bytearray:
            target[:] = new
        elif np is not None and t is np.ndarray and type(new) is np.ndarray \
                and new.shape == target.shape and target.flags.writeable:
            target[...] = new

    def release(self, hid):
        self.pending_release.add(hid)


def _bind(module, bridge, hid):
    module.__dict__["__rb__"] = (bridge, hid)


def _rid(obj):
    if isinstance(obj, Remote):
        return object.__getattribute__(obj, "_rb")[1]
    if isinstance(obj, RemoteModule):
        return obj.__dict__["__rb__"][1]
    return None


def _module_trusted(m):
    f = getattr(m, "__file__", None)
    return f is None or PLACES.trusted(f)


# ---------------------------------------------------------------------------------------------
# Stand-ins

_REMOTE_DUNDERS = {"__name__", "__qualname__", "__doc__", "__all__", "__version__", "__module__",
                   "__defaults__", "__kwdefaults__", "__annotations__", "__self__", "__func__"}


def _remote_name(name):
    return not (name.startswith("__") and name.endswith("__")) or name in _REMOTE_DUNDERS


class RemoteModule(types.ModuleType):
    """A module of the agent's, loaded in the worker."""

    def __getattr__(self, name):
        if "__rb__" not in self.__dict__ or not _remote_name(name):
            raise AttributeError(name)
        bridge, hid = self.__dict__["__rb__"]
        if name == "__all__":
            try:
                return bridge.get("getattr", h=hid, name=name)
            except AttributeError:
                names = bridge.get("builtin", fn="dir", h=hid, args=[])
                return [n for n in names if isinstance(n, str) and not n.startswith("_")]
        return bridge.get("getattr", h=hid, name=name)

    def __setattr__(self, name, value):
        if name.startswith("__") and name.endswith("__") or "__rb__" not in self.__dict__:
            self.__dict__[name] = value
            return
        bridge, hid = self.__dict__["__rb__"]
        bridge.get("setattr", h=hid, name=name, value=bridge.enc(value))

    def __delattr__(self, name):
        if name.startswith("__") and name.endswith("__") or "__rb__" not in self.__dict__:
            del self.__dict__[name]
            return
        bridge, hid = self.__dict__["__rb__"]
        bridge.get("delattr", h=hid, name=name)

    def __dir__(self):
        if "__rb__" not in self.__dict__:
            return list(self.__dict__)
        bridge, hid = self.__dict__["__rb__"]
        names = bridge.get("builtin", fn="dir", h=hid, args=[])
        return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


def _r(self):
    return object.__getattribute__(self, "_rb")


def _builtin(fn, *args):
    def method(self):
        bridge, hid = _r(self)[:2]
        return bridge.get("builtin", fn=fn, h=hid, args=bridge.enc(list(args)))
    return method


def _typed(fn, types_, what):
    def method(self, *args):
        bridge, hid = _r(self)[:2]
        v = bridge.get("builtin", fn=fn, h=hid, args=bridge.enc(list(args)))
        if not isinstance(v, types_) or (bool not in types_ and type(v) is bool and fn != "bool"):
            raise TypeError("the agent's %s() answered a %s, not %s" % (fn, type(v).__name__, what))
        return v
    return method


class Remote:
    """An object of the agent's, held in the worker; every use is a request."""

    __slots__ = ("_rb", "__weakref__")

    def __getattr__(self, name):
        if not _remote_name(name):
            raise AttributeError(name)
        bridge, hid = _r(self)[:2]
        return bridge.get("getattr", h=hid, name=name)

    def __setattr__(self, name, value):
        bridge, hid = _r(self)[:2]
        bridge.get("setattr", h=hid, name=name, value=bridge.enc(value))

    def __delattr__(self, name):
        bridge, hid = _r(self)[:2]
        bridge.get("delattr", h=hid, name=name)

    def __call__(self, *args, **kwargs):
        bridge, hid = _r(self)[:2]
        return bridge.call(hid, args, kwargs)

    def __del__(self):
        try:
            bridge, hid = _r(self)[:2]
            bridge.release(hid)
        except Exception:  # noqa: BLE001 (interpreter shutdown)
            pass

    # Identity, never the agent's __eq__.
    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        return self is not other

    def __hash__(self):
        return hash((Remote, _r(self)[1]))

    def __repr__(self):
        bridge, hid, tname = _r(self)[:3]
        try:
            return bridge.get("builtin", fn="repr", h=hid, args=[])
        except Exception:  # noqa: BLE001
            return "<agent %s>" % tname

    # Numbers are values built here, never objects of the agent's: arithmetic, ordering and
    # truth of an agent object would let its own methods decide a comparison.
    def __bool__(self):
        raise TypeError("the truth of an object of the agent's (%s) is not tested: agent code "
                        "must return plain values (bool, numbers, arrays)" % _r(self)[2])

    __str__ = _typed("str", (str,), "text")
    __len__ = _typed("len", (int,), "an int")
    __float__ = _typed("float", (float,), "a float")
    __int__ = _typed("int", (int,), "an int")
    __index__ = _typed("index", (int,), "an int")
    __complex__ = _typed("complex", (complex,), "a complex")
    __format__ = _typed("format", (str,), "text")
    __iter__ = _builtin("iter")
    __next__ = _builtin("next")
    def __dir__(self):
        v = _builtin("dir")(self)
        return [n for n in v if isinstance(n, str)] if isinstance(v, list) else []

    def __getitem__(self, key):
        return _builtin("getitem", key)(self)

    def __setitem__(self, key, value):
        _builtin("setitem", key, value)(self)

    def __delitem__(self, key):
        _builtin("delitem", key)(self)

    def __contains__(self, item):
        return bool(_builtin("contains", item)(self))

    def __enter__(self):
        return _builtin("enter")(self)

    def __exit__(self, *exc):
        _builtin("exit")(self)
        return False

    def __array__(self, dtype=None, copy=None):
        import numpy as np
        a = _builtin("asarray")(self)
        if not isinstance(a, np.ndarray):
            raise TypeError("the agent's object did not convert to an array")
        return a.astype(dtype) if dtype is not None else a

    def __reduce_ex__(self, protocol):
        raise TypeError("an object of the agent's cannot be pickled")


def _not_a_number(name):
    def method(self, *args):
        raise TypeError("%s on an object of the agent's (%s): agent code must return plain "
                        "numbers or arrays for the tests to compute with" % (name, _r(self)[2]))
    return method


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "and", "or",
              "xor", "lshift", "rshift", "divmod"):
    setattr(Remote, "__%s__" % _name, _not_a_number(_name))
    setattr(Remote, "__r%s__" % _name, _not_a_number(_name))
for _name in ("lt", "le", "gt", "ge", "abs", "neg", "pos", "invert", "round", "trunc", "floor",
              "ceil"):
    setattr(Remote, "__%s__" % _name, _not_a_number(_name))


# ---------------------------------------------------------------------------------------------
# Imports

class AgentLoader:
    def __init__(self, bridge, path_entry=None, file=None):
        self.bridge, self.path_entry, self.file = bridge, path_entry, file

    def create_module(self, spec):
        m = RemoteModule(spec.name)
        return m

    def exec_module(self, module):
        bridge = self.bridge
        if "__rb__" in module.__dict__:
            value = bridge.get("reload", h=module.__dict__["__rb__"][1])
        elif self.file is not None:
            value = bridge.get("load_path", name=module.__name__, path=self.file)
        else:
            value = bridge.get("import", name=module.__name__, path=self.path_entry)
        if not isinstance(value, RemoteModule):
            raise ImportError("the agent's worker did not answer a module for %s" % module.__name__)
        hid = value.__dict__["__rb__"][1]
        _bind(module, bridge, hid)
        bridge.modules[hid] = module


class AgentPathFinder:
    """The finder for an import path entry that is not ours (the workspace, /tmp, ...)."""

    def __init__(self, bridge, entry):
        self.bridge, self.entry = bridge, entry

    def find_spec(self, fullname, target=None):
        import importlib.machinery
        import importlib.util
        top = fullname.partition(".")[0]
        # An agent module never takes the place of one of ours.
        if top == fullname and importlib.machinery.PathFinder.find_spec(
                fullname, PLACES.trusted_path) is not None:
            return None
        if top in sys.builtin_module_names:
            return None
        found = self.bridge.get("find", name=fullname, path=self.entry)
        if not isinstance(found, dict):
            return None
        spec = importlib.util.spec_from_loader(
            fullname, AgentLoader(self.bridge, self.entry), is_package=bool(found.get("package")))
        origin = found.get("origin")
        if isinstance(origin, str):
            spec.origin = origin
        locs = found.get("locations")
        if found.get("package") and isinstance(locs, list):
            spec.submodule_search_locations = [str(p) for p in locs]
        return spec

    def invalidate_caches(self):
        pass


def install_imports(bridge):
    import importlib.machinery
    import importlib.util

    def hook(entry):
        if not isinstance(entry, str) or not entry or PLACES.trusted(entry or "."):
            raise ImportError("a trusted path entry")
        return AgentPathFinder(bridge, entry)

    sys.path_hooks.insert(0, hook)
    sys.path_importer_cache.clear()

    def untrusted(loader):
        path = getattr(loader, "path", None)
        return isinstance(path, str) and not PLACES.trusted(path)

    for cls in (importlib.machinery.SourceFileLoader, importlib.machinery.SourcelessFileLoader):
        real_exec = cls.exec_module

        def exec_module(self, module, _real=real_exec):
            if untrusted(self):
                module.__class__ = RemoteModule
                AgentLoader(bridge, file=self.path).exec_module(module)
                return
            _real(self, module)
        cls.exec_module = exec_module

    ext = importlib.machinery.ExtensionFileLoader
    real_create, real_ext_exec = ext.create_module, ext.exec_module

    def create_module(self, spec, _real=real_create):
        if untrusted(self):
            m = RemoteModule(spec.name)
            AgentLoader(bridge, file=self.path).exec_module(m)
            return m
        return _real(self, spec)

    def ext_exec(self, module, _real=real_ext_exec):
        if isinstance(module, RemoteModule):
            return None
        return _real(self, module)
    ext.create_module, ext.exec_module = create_module, ext_exec

    import runpy
    real_run_path = runpy.run_path

    def run_path(path_name, init_globals=None, run_name=None):
        if not PLACES.trusted(os.fspath(path_name)):
            return bridge.get("run_path", path=os.fspath(path_name),
                              run_name=run_name or "<run_path>")
        return real_run_path(path_name, init_globals, run_name)
    runpy.run_path = run_path


# ---------------------------------------------------------------------------------------------
# Processes: run in the worker, as the agent's uid

def install_processes(bridge):
    import subprocess

    def run(args, *, input=None, capture_output=False, stdout=None, stderr=None, shell=False,
            cwd=None, timeout=None, check=False, text=None, encoding=None, errors=None,
            env=None, universal_newlines=None, **_ignored):
        textual = bool(text or universal_newlines or encoding or errors)
        capture = capture_output or stdout is not None or stderr is not None
        merge = stderr == subprocess.STDOUT
        data = input.encode(encoding or "utf-8") if isinstance(input, str) else input
        argv = args if isinstance(args, str) else [os.fspath(a) for a in args]
        r = bridge.get("run", argv=argv, shell=bool(shell),
                       cwd=os.fspath(cwd) if cwd is not None else None,
                       env={str(k): str(v) for k, v in env.items()} if env is not None else None,
                       input=bridge.enc(data) if data is not None else None,
                       timeout=timeout, capture=capture, merge=merge)
        if not isinstance(r, dict) or type(r.get("returncode")) is not int:
            raise AgentProtocolError("bad answer to a command run")
        out, err = r.get("stdout"), r.get("stderr")
        if not isinstance(out, (bytes, type(None))) or not isinstance(err, (bytes, type(None))):
            raise AgentProtocolError("bad output of a command run")
        if textual:
            out = out.decode(encoding or "utf-8", errors or "replace") if out is not None else None
            err = err.decode(encoding or "utf-8", errors or "replace") if err is not None else None
        cp = subprocess.CompletedProcess(args, r["returncode"], out, err)
        if check:
            cp.check_returncode()
        return cp

    def call(args, **kw):
        return run(args, **kw).returncode

    def check_call(args, **kw):
        run(args, check=True, **kw)
        return 0

    def check_output(args, **kw):
        kw.setdefault("stdout", subprocess.PIPE)
        return run(args, check=True, **kw).stdout

    def getstatusoutput(cmd):
        r = run(cmd, shell=True, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        out = r.stdout[:-1] if r.stdout.endswith("\n") else r.stdout
        return r.returncode, out

    def getoutput(cmd):
        return getstatusoutput(cmd)[1]

    def system(cmd):
        return run(cmd, shell=True).returncode << 8

    subprocess.run, subprocess.call, subprocess.check_call = run, call, check_call
    subprocess.check_output = check_output
    subprocess.getstatusoutput, subprocess.getoutput = getstatusoutput, getoutput
    os.system = system


# ---------------------------------------------------------------------------------------------
# Unpickling: plain data only

_PICKLE_ALLOWED = {
    ("builtins", n) for n in ("set", "frozenset", "complex", "slice", "range", "bytearray",
                              "list", "dict", "tuple", "int", "float", "str", "bytes", "bool")
} | {("collections", "OrderedDict"), ("collections", "defaultdict"), ("_codecs", "encode"),
     ("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "_reconstruct"),
     ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "_reconstruct"),
     ("numpy._core.multiarray", "scalar")}


def install_pickle_guard():
    import pickle

    class PlainUnpickler(pickle.Unpickler):
        def find_class(self, module, name):
            if (module, name) in _PICKLE_ALLOWED:
                return super().find_class(module, name)
            raise pickle.UnpicklingError(
                "grading unpickles plain data only; %s.%s is not allowed" % (module, name))

    def load(file, **kw):
        return PlainUnpickler(file, **kw).load()

    def loads(data, /, **kw):
        import io
        return PlainUnpickler(io.BytesIO(data), **kw).load()

    pickle.Unpickler, pickle.load, pickle.loads = PlainUnpickler, load, loads


# ---------------------------------------------------------------------------------------------

PLACES = None


def add_site_packages():
    """Puts on the import path what `site` would: each installed-packages folder, then the
    folders its `.pth` files name (their `import` lines are not run)."""
    import site
    for sitedir in site.getsitepackages():
        if not os.path.isdir(sitedir):
            continue
        if sitedir not in sys.path:
            sys.path.append(sitedir)
        try:
            names = sorted(n for n in os.listdir(sitedir)
                           if n.endswith(".pth") and not n.startswith("."))
        except OSError:
            continue
        for name in names:
            try:
                with open(os.path.join(sitedir, name), encoding="utf-8") as f:
                    lines = f.read().splitlines()
            except (OSError, UnicodeDecodeError):
                continue
            for line in lines:
                line = line.rstrip()
                if not line or line.startswith("#") or line.startswith(("import ", "import\t")):
                    continue
                p = os.path.abspath(os.path.join(sitedir, line))
                if p not in sys.path and os.path.exists(p):
                    sys.path.append(p)


def main():
    global PLACES
    mode, args = sys.argv[1], sys.argv[2:]
    rfd, wfd = (int(x) for x in os.environ.pop("RB_BRIDGE_FDS").split(","))
    workspace = os.environ.get("RB_WORKSPACE", "/workspace")
    extra = [p for p in os.environ.get("RB_TRUSTED_ROOTS", "").split(os.pathsep) if p]
    if sys.flags.no_site:
        add_site_packages()
    sys.path.append(HERE)
    import rb_strict
    import rb_values
    PLACES = Places(workspace, extra)
    bridge = Bridge(rfd, wfd, rb_values)
    install_imports(bridge)
    # As for the agent's own processes, the workspace is on the import path, last: its modules
    # load in the worker, and never in place of one of ours.
    sys.path.append(workspace)
    install_processes(bridge)
    install_pickle_guard()
    rb_strict.install()
    if mode == "pytest":
        os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        import pytest
        rb_strict.install_approx()
        code = pytest.main(args)
        sys.stdout.flush()
        sys.exit(int(code))
    elif mode == "unittest":
        import unittest_runner
        sys.argv = ["unittest_runner.py"] + args
        unittest_runner.main()
    else:
        sys.exit("bridge_trusted.py: unknown mode %r" % mode)


if __name__ == "__main__":
    main()
