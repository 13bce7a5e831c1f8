"""Plain data across the bridge between the trusted test process and the agent's worker
(research-bench rubrics).

Values cross as tagged JSON, never pickle. What one side builds from the other's message is
made of the builtin types, numpy arrays of numeric, bool or text dtype and numpy scalars only;
everything else stays on its side behind a reference:

  JSON null/true/false/int/str   as themselves
  float                          a JSON number, or {"$f": "nan"|"inf"|"-inf"}
  complex                        {"$c": [re, im]}
  bytes / bytearray              {"$b": base64} / {"$ba": base64}
  list / tuple / set / frozenset [...] / {"$t": [...]} / {"$s": [...]} / {"$fs": [...]}
  dict                           {"$d": [[key, value], ...]}
  named tuple                    {"$nt": {"name", "fields", "items"}}
  numpy array                    {"$a": {"dtype", "shape", "data": base64 of C-order bytes}}
  numpy scalar                   {"$n": {"dtype", "data": base64}}
  slice / range / path           {"$sl": [start, stop, step]} / {"$r": [...]} / {"$p": str}
  a reference                    {"$h": id, "type": name, "kind": ...} (to an object of the
                                 worker's) or {"$cb": id} (to a callable of the trusted side)

`Encoder.encode` takes a `refer(obj)` callback for what is not plain data; `decode` takes
`resolve(tag, body)` for references. Both bound the nesting depth; `decode` checks every dtype,
shape and size against the bytes it was given.
"""

import base64
import json
import math
import sys

MAX_DEPTH = 64
# One message, either way (a request, an answer, a callback).
MAX_MESSAGE = 256 * 1024 * 1024

_ARRAY_KINDS = "biufcUS"


class ValueError_(ValueError):
    """A message that does not hold well-formed plain data."""


def _np():
    return sys.modules.get("numpy")


def _float(x):
    if math.isnan(x):
        return {"$f": "nan"}
    if math.isinf(x):
        return {"$f": "inf" if x > 0 else "-inf"}
    return x


def _is_namedtuple(value):
    fields = getattr(type(value), "_fields", None)
    return isinstance(value, tuple) and isinstance(fields, tuple) and all(
        isinstance(f, str) for f in fields)


class Encoder:
    """Encodes a value; `refer(obj)` returns the reference (a dict) for what is not plain."""

    def __init__(self, refer):
        self.refer = refer

    def encode(self, value, depth=0):
        if depth > MAX_DEPTH:
            return self.refer(value)
        t = type(value)
        if value is None or t is bool or t is str:
            return value
        if t is int:
            return value
        if t is float:
            return _float(value)
        np = _np()
        if np is not None:
            if t is np.ndarray:
                if value.dtype.kind in _ARRAY_KINDS and not value.dtype.fields:
                    a = np.ascontiguousarray(value)
                    return {"$a": {"dtype": a.dtype.str, "shape": list(a.shape),
                                   "data": base64.b64encode(a.tobytes()).decode("ascii")}}
                return self.refer(value)
            if isinstance(value, np.generic) and t.__module__ == "numpy":
                if value.dtype.kind in _ARRAY_KINDS:
                    return {"$n": {"dtype": value.dtype.str,
                                   "data": base64.b64encode(value.tobytes()).decode("ascii")}}
                return self.refer(value)
        if t is complex:
            return {"$c": [_float(value.real), _float(value.imag)]}
        if t is bytes:
            return {"$b": base64.b64encode(value).decode("ascii")}
        if t is bytearray:
            return {"$ba": base64.b64encode(bytes(value)).decode("ascii")}
        d = depth + 1
        if t is list:
            return [self.encode(v, d) for v in value]
        if t is tuple:
            return {"$t": [self.encode(v, d) for v in value]}
        if t is set:
            return {"$s": [self.encode(v, d) for v in value]}
        if t is frozenset:
            return {"$fs": [self.encode(v, d) for v in value]}
        if t is dict or _stdlib_mapping(t):
            return {"$d": [[self.encode(k, d), self.encode(v, d)] for k, v in value.items()]}
        if _is_namedtuple(value):
            return {"$nt": {"name": str(t.__name__), "fields": list(t._fields),
                            "items": [self.encode(v, d) for v in tuple(value)]}}
        if t is slice:
            return {"$sl": [self.encode(value.start, d), self.encode(value.stop, d),
                            self.encode(value.step, d)]}
        if t is range:
            return {"$r": [value.start, value.stop, value.step]}
        if _is_path(value):
            return {"$p": str(value)}
        return self.refer(value)


def _stdlib_mapping(t):
    return t.__module__ == "collections" and t.__name__ in ("OrderedDict", "defaultdict", "Counter")


def _is_path(value):
    pathlib = sys.modules.get("pathlib")
    return pathlib is not None and type(value).__module__ == "pathlib" and isinstance(
        value, pathlib.PurePath)


_NAMEDTUPLES = {}


def _namedtuple(name, fields):
    key = (name, tuple(fields))
    cls = _NAMEDTUPLES.get(key)
    if cls is None:
        import collections
        import keyword
        safe = name if name.isidentifier() and not keyword.iskeyword(name) else "Result"
        cls = collections.namedtuple(safe, fields, rename=True)
        _NAMEDTUPLES[key] = cls
    return cls


def _check_float(x):
    if type(x) is float or type(x) is int:
        return float(x)
    if isinstance(x, dict) and set(x) == {"$f"} and x["$f"] in ("nan", "inf", "-inf"):
        return float(x["$f"])
    raise ValueError_("not a float: %r" % (x,))


def _b64(s, what):
    if not isinstance(s, str):
        raise ValueError_("%s: not base64 text" % what)
    try:
        return base64.b64decode(s.encode("ascii"), validate=True)
    except Exception as e:  # noqa: BLE001 (binascii.Error, UnicodeEncodeError)
        raise ValueError_("%s: bad base64 (%s)" % (what, e)) from None


def _dtype(np, s):
    if not isinstance(s, str) or len(s) > 16:
        raise ValueError_("bad dtype %r" % (s,))
    try:
        dt = np.dtype(s)
    except TypeError:
        raise ValueError_("bad dtype %r" % (s,)) from None
    if dt.kind not in _ARRAY_KINDS or dt.fields or dt.subdtype is not None or dt.hasobject:
        raise ValueError_("dtype %r is not plain data" % (s,))
    return dt


def _hashable(v):
    try:
        hash(v)
    except TypeError:
        raise ValueError_("unhashable key or set item of type %s" % type(v).__name__) from None
    return v


def decode(v, resolve, depth=0):
    """Builds the value a message describes; `resolve(tag, body)` turns a reference into an
    object of this side (a proxy, or one of our own callables)."""
    if depth > MAX_DEPTH + 2:
        raise ValueError_("value nested deeper than %d levels" % MAX_DEPTH)
    t = type(v)
    if v is None or t is bool or t is int or t is str:
        return v
    if t is float:
        return v
    d = depth + 1
    if t is list:
        return [decode(x, resolve, d) for x in v]
    if t is not dict or len(v) == 0:
        raise ValueError_("not a tagged value: %r" % (type(v).__name__,))
    if "$h" in v or "$cb" in v:
        return resolve("$h" if "$h" in v else "$cb", v)
    if len(v) != 1:
        raise ValueError_("a tagged value has one key")
    (tag, body), = v.items()
    if tag == "$f":
        return _check_float(v)
    if tag == "$c":
        if not isinstance(body, list) or len(body) != 2:
            raise ValueError_("bad complex")
        return complex(_check_float(body[0]), _check_float(body[1]))
    if tag == "$b":
        return _b64(body, "bytes")
    if tag == "$ba":
        return bytearray(_b64(body, "bytearray"))
    if tag in ("$t", "$s", "$fs"):
        if not isinstance(body, list):
            raise ValueError_("bad %s" % tag)
        items = [decode(x, resolve, d) for x in body]
        if tag == "$t":
            return tuple(items)
        items = [_hashable(x) for x in items]
        return set(items) if tag == "$s" else frozenset(items)
    if tag == "$d":
        if not isinstance(body, list):
            raise ValueError_("bad dict")
        out = {}
        for pair in body:
            if not isinstance(pair, list) or len(pair) != 2:
                raise ValueError_("bad dict item")
            out[_hashable(decode(pair[0], resolve, d))] = decode(pair[1], resolve, d)
        return out
    if tag == "$nt":
        if not isinstance(body, dict) or not isinstance(body.get("fields"), list) \
                or not isinstance(body.get("items"), list) \
                or len(body["fields"]) != len(body["items"]) \
                or not all(isinstance(f, str) for f in body["fields"]):
            raise ValueError_("bad named tuple")
        cls = _namedtuple(str(body.get("name", "Result"))[:100], body["fields"])
        return cls(*[decode(x, resolve, d) for x in body["items"]])
    if tag == "$a":
        import numpy as np
        if not isinstance(body, dict) or not isinstance(body.get("shape"), list):
            raise ValueError_("bad array")
        dt = _dtype(np, body.get("dtype"))
        shape = body["shape"]
        if len(shape) > 32 or not all(type(n) is int and n >= 0 for n in shape):
            raise ValueError_("bad array shape")
        raw = _b64(body.get("data"), "array")
        if math.prod(shape) * dt.itemsize != len(raw):
            raise ValueError_("array data (%d bytes) does not match shape %s of %s"
                              % (len(raw), shape, dt))
        return np.frombuffer(raw, dtype=dt).reshape(shape).copy()
    if tag == "$n":
        import numpy as np
        if not isinstance(body, dict):
            raise ValueError_("bad numpy scalar")
        dt = _dtype(np, body.get("dtype"))
        raw = _b64(body.get("data"), "scalar")
        if len(raw) != dt.itemsize:
            raise ValueError_("numpy scalar of %d bytes for %s" % (len(raw), dt))
        return np.frombuffer(raw, dtype=dt)[0].copy()
    if tag == "$sl":
        if not isinstance(body, list) or len(body) != 3:
            raise ValueError_("bad slice")
        return slice(*[decode(x, resolve, d) for x in body])
    if tag == "$r":
        if not isinstance(body, list) or len(body) != 3 or not all(type(n) is int for n in body):
            raise ValueError_("bad range")
        return range(*body)
    if tag == "$p":
        if not isinstance(body, str):
            raise ValueError_("bad path")
        import pathlib
        return pathlib.Path(body)
    raise ValueError_("unknown tag %r" % (tag[:40],))


# ---------------------------------------------------------------------------------------------
# Framing: an 8-byte big-endian length, then that many bytes of UTF-8 JSON.

class ChannelClosed(EOFError):
    """The other side has gone (its end of the pipe closed)."""


def write_message(fd, obj):
    import os
    data = json.dumps(obj, separators=(",", ":"), allow_nan=False).encode("utf-8")
    if len(data) > MAX_MESSAGE:
        raise ValueError_("message of %d bytes is over the %d-byte bound" % (len(data), MAX_MESSAGE))
    buf = memoryview(len(data).to_bytes(8, "big") + data)
    while buf:
        try:
            n = os.write(fd, buf)
        except BrokenPipeError:
            raise ChannelClosed("the other side closed the channel") from None
        buf = buf[n:]


def _read_exact(fd, n):
    import os
    chunks, left = [], n
    while left:
        b = os.read(fd, min(left, 1 << 20))
        if not b:
            raise ChannelClosed("the other side closed the channel")
        chunks.append(b)
        left -= len(b)
    return b"".join(chunks)


def read_message(fd):
    n = int.from_bytes(_read_exact(fd, 8), "big")
    if n > MAX_MESSAGE:
        raise ValueError_("message of %d bytes is over the %d-byte bound" % (n, MAX_MESSAGE))
    try:
        return json.loads(_read_exact(fd, n).decode("utf-8"))
    except (ValueError, RecursionError) as e:  # bad UTF-8 or JSON, an int over Python's digit bound
        raise ValueError_("unreadable message: %s" % e) from None
