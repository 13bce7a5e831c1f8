"""The agent's side of the bridge (research-bench rubrics): a worker process, as the agent's
uid, that loads the agent's modules and runs its code on request of the trusted test process.

Run as: python3 -I -B bridge_worker.py WORKSPACE   (by bridge_pair.py; RB_BRIDGE_FDS="IN,OUT")

Everything here may be replaced by the agent's code once it runs: this process is the agent's.
What it sends back is data (`rb_values`), checked by the trusted side like any other input.

Requests (`{"id", "op", ...}`), each answered `{"re": id, "ok": value}` or
`{"re": id, "err": {...}}`:
  find {name, path}           where the module would load from, in that path entry
  import {name, path?}        imports a module (path appended to the import path, last)
  load_path {name, path}      loads a module from a file (importlib's spec_from_file_location)
  reload {h}                  importlib.reload
  getattr/setattr/delattr {h, name[, value]}
  call {h, args, kwargs}      also answers `wb`: the arguments the call changed in place
  builtin {fn, h, args}       repr, str, len, iter, next, float, int, index, complex, dir,
                              format, asarray, getitem, setitem, delitem, contains, enter, exit
                              (no arithmetic, ordering or truth: the trusted side computes
                              only with plain values)
  run {argv, shell, cwd, env, input, timeout, capture, merge}  a command, as this uid
  run_path {path, run_name}   runpy.run_path; answers the module's globals
While a call runs, the agent's code may call a callable of the trusted side (`{"$cb": id}`):
the worker sends `{"id", "op": "callback", "cb", "args", "kwargs"}` and serves the trusted
side's nested requests until that callback's answer comes.
A request may carry `release: [ids]`: references the trusted side no longer holds.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

MAX_TEXT = 64 * 1024


class Worker:
    def __init__(self, rfd, wfd, values):
        self.rfd, self.wfd, self.values = rfd, wfd, values
        self.handles = {}
        self.by_obj = {}
        self.next_id = 1
        self.next_req = 1
        self.encoder = values.Encoder(self.refer)

    # -- references -------------------------------------------------------------------------
    def refer(self, obj):
        key = id(obj)
        hid = self.by_obj.get(key)
        if hid is None:
            hid = self.next_id
            self.next_id += 1
            self.handles[hid] = obj
            self.by_obj[key] = hid
        ref = {"$h": hid, "type": _type_name(obj), "kind": _kind(obj)}
        if ref["kind"] == "exc_class":
            ref["mro"] = _mro(obj)
        return ref

    def resolve(self, tag, body):
        if tag == "$h":
            hid = body.get("$h")
            if hid not in self.handles:
                raise LookupError("unknown reference %r" % (hid,))
            return self.handles[hid]
        cb = body.get("$cb")
        if type(cb) is not int:
            raise ValueError("bad callback reference")
        return _callback(self, cb)

    def release(self, ids):
        for hid in ids or ():
            obj = self.handles.pop(hid, None)
            if obj is not None:
                self.by_obj.pop(id(obj), None)

    def enc(self, value):
        return self.encoder.encode(value)

    def dec(self, value):
        return self.values.decode(value, self.resolve)

    # -- the loop ---------------------------------------------------------------------------
    def send(self, msg):
        self.values.write_message(self.wfd, msg)

    def serve(self, until=None):
        """Serves requests; with `until` (a callback's request id), returns its answer."""
        while True:
            msg = self.values.read_message(self.rfd)
            if not isinstance(msg, dict):
                continue
            if until is not None and msg.get("re") == until:
                return msg
            if "op" not in msg:
                continue
            self.release(msg.get("release"))
            rid = msg.get("id")
            try:
                result = self.handle(msg)
                answer = {"re": rid, "ok": result[0]}
                if result[1]:
                    answer["wb"] = result[1]
            except BaseException as e:  # noqa: BLE001 (the agent's failures are answers)
                answer = {"re": rid, "err": self.error(e)}
            try:
                self.send(answer)
            except self.values.ValueError_ as e:
                self.send({"re": rid, "err": self.error(e)})

    def error(self, e):
        import traceback
        cls = type(e)
        out = {"type": cls.__name__[:200], "mro": _mro(cls), "msg": _text(e),
               "tb": "".join(traceback.format_exception(e))[-8000:]}
        if _is_agent(cls):
            out["cls"] = self.refer(cls)
        return out

    def callback(self, cb, args, kwargs):
        rid = -self.next_req
        self.next_req += 1
        self.send({"id": rid, "op": "callback", "cb": cb,
                   "args": self.enc(list(args)), "kwargs": self.enc(dict(kwargs))})
        answer = self.serve(until=rid)
        if "ok" in answer:
            return self.dec(answer["ok"])
        err = answer.get("err") or {}
        raise _CallbackError("the test's callable raised %s: %s" % (
            str(err.get("type", "?"))[:200], str(err.get("msg", ""))[:2000]))

    # -- requests ---------------------------------------------------------------------------
    def handle(self, msg):
        op = msg["op"]
        if op == "find":
            return self.enc(self.find(msg["name"], msg["path"])), None
        if op == "import":
            import importlib
            path = msg.get("path")
            if path and path not in sys.path:
                sys.path.append(path)
            return self.enc(importlib.import_module(msg["name"])), None
        if op == "load_path":
            return self.enc(_load_path(msg["name"], msg["path"])), None
        if op == "reload":
            import importlib
            return self.enc(importlib.reload(self.handles[msg["h"]])), None
        if op == "getattr":
            return self.enc(getattr(self.handles[msg["h"]], str(msg["name"]))), None
        if op == "setattr":
            setattr(self.handles[msg["h"]], str(msg["name"]), self.dec(msg["value"]))
            return None, None
        if op == "delattr":
            delattr(self.handles[msg["h"]], str(msg["name"]))
            return None, None
        if op == "call":
            return self.call(msg)
        if op == "builtin":
            return self.enc(self.builtin(msg["fn"], self.handles[msg["h"]],
                                         self.dec(msg.get("args", [])))), None
        if op == "run":
            return self.run(msg), None
        if op == "run_path":
            import runpy
            g = runpy.run_path(str(msg["path"]), run_name=str(msg.get("run_name", "<run_path>")))
            return self.enc({k: v for k, v in g.items() if not k.startswith("__")}), None
        raise ValueError("unknown request %r" % (op,))

    def find(self, name, path):
        import importlib.machinery
        spec = importlib.machinery.PathFinder.find_spec(str(name), [str(path)])
        if spec is None:
            return None
        locs = spec.submodule_search_locations
        return {"origin": spec.origin if isinstance(spec.origin, str) else None,
                "package": locs is not None,
                "locations": [str(p) for p in locs] if locs is not None else None}

    def call(self, msg):
        fn = self.handles[msg["h"]]
        raw_args, raw_kwargs = msg.get("args", []), msg.get("kwargs", {"$d": []})
        args, kwargs = self.dec(raw_args), self.dec(raw_kwargs)
        result = fn(*args, **kwargs)
        out = self.enc(result)
        # Arguments changed in place (an array filled, a list appended to) travel back.
        wb = []
        for i, (before, value) in enumerate(zip(raw_args, args)):
            if _mutable(value):
                after = self.enc(value)
                if after != before:
                    wb.append([i, after])
        for pair in raw_kwargs.get("$d", []) if isinstance(raw_kwargs, dict) else []:
            key = pair[0]
            if isinstance(key, str) and key in kwargs and _mutable(kwargs[key]):
                after = self.enc(kwargs[key])
                if after != pair[1]:
                    wb.append([key, after])
        return out, wb

    def builtin(self, fn, obj, args):
        import operator
        simple = {"repr": repr, "str": str, "len": len, "iter": iter, "next": next,
                  "float": float, "int": int, "index": operator.index, "complex": complex}
        if fn in simple:
            v = simple[fn](obj)
            if fn in ("repr", "str"):
                v = v[:MAX_TEXT] if type(v) is str else "<not text>"
            return v
        if fn == "dir":
            return [str(n) for n in dir(obj)][:10000]
        if fn == "format":
            return format(obj, *args)[:MAX_TEXT]
        if fn == "asarray":
            import numpy as np
            return np.asarray(obj, *args)
        if fn == "getitem":
            return obj[args[0]]
        if fn == "setitem":
            obj[args[0]] = args[1]
            return None
        if fn == "delitem":
            del obj[args[0]]
            return None
        if fn == "contains":
            return args[0] in obj
        if fn == "enter":
            return obj.__enter__()
        if fn == "exit":
            return bool(obj.__exit__(None, None, None))
        raise ValueError("unknown builtin %r" % (fn,))

    def run(self, msg):
        import subprocess
        argv = msg.get("argv")
        shell = bool(msg.get("shell"))
        if shell:
            if not isinstance(argv, str):
                argv = " ".join(str(a) for a in argv)
        elif isinstance(argv, str):
            argv = [argv]
        else:
            argv = [str(a) for a in argv]
        capture = bool(msg.get("capture"))
        env = msg.get("env")
        p = subprocess.run(
            argv, shell=shell, cwd=msg.get("cwd") or None,
            env={str(k): str(v) for k, v in env.items()} if isinstance(env, dict) else None,
            input=self.dec(msg["input"]) if msg.get("input") is not None else None,
            timeout=msg.get("timeout"),
            stdout=subprocess.PIPE if capture else None,
            stderr=(subprocess.STDOUT if msg.get("merge") else subprocess.PIPE) if capture else None)
        return self.enc({"returncode": p.returncode, "stdout": p.stdout, "stderr": p.stderr})


class _CallbackError(RuntimeError):
    pass


def _callback(worker, cb):
    def call(*args, **kwargs):
        return worker.callback(cb, args, kwargs)
    call.__name__ = call.__qualname__ = "test_callable_%d" % cb
    return call


def _mutable(value):
    np = sys.modules.get("numpy")
    t = type(value)
    return t in (list, dict, bytearray) or (np is not None and t is np.ndarray)


def _text(e):
    try:
        s = str(e)
    except BaseException:  # noqa: BLE001
        s = "<unprintable>"
    return s[:4000] if type(s) is str else "<not text>"


def _type_name(obj):
    t = obj if isinstance(obj, type) else type(obj)
    try:
        return ("%s.%s" % (t.__module__, t.__qualname__))[:200]
    except BaseException:  # noqa: BLE001
        return "?"


def _kind(obj):
    import types
    if isinstance(obj, types.ModuleType):
        return "module"
    if isinstance(obj, type):
        return "exc_class" if issubclass(obj, BaseException) else "class"
    if callable(obj):
        return "callable"
    return "object"


def _mro(cls):
    out = []
    for c in getattr(cls, "__mro__", ())[:20]:
        try:
            out.append([str(c.__module__)[:200], str(c.__qualname__)[:200]])
        except BaseException:  # noqa: BLE001
            pass
    return out


def _is_agent(cls):
    mod = sys.modules.get(getattr(cls, "__module__", ""), None)
    f = getattr(mod, "__file__", None) if mod is not None else None
    if not f:
        return cls.__module__ not in ("builtins",)
    import sysconfig
    f = os.path.realpath(f)
    trusted = [os.path.realpath(p) for p in (sysconfig.get_paths().get(k) for k in
               ("stdlib", "platstdlib", "purelib", "platlib")) if p]
    trusted += [os.path.realpath(p) for p in sys.path[:3] if p]
    return not any(f.startswith(t + os.sep) for t in trusted)


def _load_path(name, path):
    import importlib.util
    spec = importlib.util.spec_from_file_location(str(name), str(path))
    if spec is None or spec.loader is None:
        raise ImportError("cannot load %s" % path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[str(name)] = mod
    spec.loader.exec_module(mod)
    return mod


# Installed packages slow to import that the agent's code is likely to need: imported ahead
# (`preload`) while the trusted side is still starting, not while a test waits for them.
PRELOAD = ("numpy", "scipy", "pandas")
PRELOAD_FILES = 64
PRELOAD_ENTRIES = 4096
PRELOAD_BYTES = 64 * 1024


def preload(ws):
    """Imports the PRELOAD packages (and their submodules) that the agent's Python files at the
    workspace's top level and one folder down import, as they would: after
    `setup_agent_process`, so through the same import path (forbidden modules' stand-ins
    first). A module the workspace itself holds is not preloaded, nor a forbidden one (its
    stand-in would report the import as ours), nor one that fails."""
    import importlib
    import json
    import re
    try:
        forbidden = [str(f) for f in json.loads(os.environ.get("RB_FORBIDDEN") or "[]")]
    except ValueError:
        return
    found = []
    pattern = re.compile(r"^[ \t]*(?:import|from)[ \t]+((?:%s)(?:\.[A-Za-z_][A-Za-z0-9_]*)*)"
                         r"(?![A-Za-z0-9_])" % "|".join(PRELOAD), re.M)
    files = 0
    try:
        top = list(os.scandir(ws))
    except OSError:
        return
    entries = [(e, True) for e in top]
    for e, may_descend in entries:
        if files >= PRELOAD_FILES or len(entries) > PRELOAD_ENTRIES:
            break
        try:
            if e.is_dir(follow_symlinks=False):
                if may_descend and not e.name.startswith("."):
                    entries.extend((c, False) for c in os.scandir(e.path))
                continue
            if not e.name.endswith(".py") or not e.is_file(follow_symlinks=False):
                continue
            files += 1
            with open(e.path, "rb") as f:
                text = f.read(PRELOAD_BYTES).decode("utf-8", "replace")
        except OSError:
            continue
        for name in pattern.findall(text):
            if name not in found:
                found.append(name)
    for name in found:
        if any(name == f or name.startswith(f + ".") for f in forbidden):
            continue
        top = name.partition(".")[0]
        if os.path.exists(os.path.join(ws, top)) or os.path.exists(os.path.join(ws, top + ".py")):
            continue
        try:
            importlib.import_module(name)
        except BaseException:  # noqa: BLE001 (the agent's own import will say why)
            pass


def main():
    ws = sys.argv[1]
    rfd, wfd = (int(x) for x in os.environ.pop("RB_BRIDGE_FDS").split(","))
    sys.path.append(HERE)
    import launch
    import rb_values
    launch.setup_agent_process(ws)
    preload(ws)
    worker = Worker(rfd, wfd, rb_values)
    try:
        worker.serve()
    except rb_values.ChannelClosed:
        pass


if __name__ == "__main__":
    main()
