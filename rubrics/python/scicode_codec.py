"""SciCode runner (research-bench rubrics): what crosses between the worker (agent side) and the
trusted side. Values as tagged JSON: plain JSON, or {"$float": "nan"|"inf"|"-inf"},
{"$complex": [re, im]}, {"$tuple": [...]}, {"$dict": [[k, v], ...]},
{"$ndarray": {"dtype", "shape", "data"}}, {"$sparse": {"format", "shape", "dtype", "row", "col",
"data"}}; never pickle. `decode` builds only plain values, numeric arrays and sparse matrices
(safe on untrusted input). Messages are capped (`short`).
"""

import math
import sys

MAX_MSG = 2000

_DTYPES = {"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
           "float16", "float32", "float64", "float128", "longdouble", "complex64", "complex128",
           "complex256", "clongdouble", "object"}


class EncodeError(TypeError):
    pass


def encode(value):
    np = sys.modules.get("numpy")
    if value is None or isinstance(value, (bool, str)):
        return value
    if np is not None:
        if isinstance(value, np.ndarray):
            kind = value.dtype.kind
            if kind in "biufc":
                return {"$ndarray": {"dtype": value.dtype.name, "shape": list(value.shape),
                                     "data": [encode(v) for v in value.ravel().tolist()]}}
            if kind in "OUS":
                return {"$ndarray": {"dtype": "object", "shape": list(value.shape),
                                     "data": [encode(v) for v in value.ravel().tolist()]}}
            raise EncodeError("cannot encode an array of dtype %s" % value.dtype)
        if isinstance(value, np.generic):
            return encode(value.item())
    sp = sys.modules.get("scipy.sparse")
    if sp is not None and sp.issparse(value):
        coo = value.tocoo()
        return {"$sparse": {"format": value.format, "shape": list(coo.shape),
                            "dtype": coo.dtype.name,
                            "row": [int(i) for i in coo.row], "col": [int(i) for i in coo.col],
                            "data": [encode(v) for v in coo.data.tolist()]}}
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isnan(value):
            return {"$float": "nan"}
        if math.isinf(value):
            return {"$float": "inf" if value > 0 else "-inf"}
        return value
    if isinstance(value, complex):
        return {"$complex": [encode(value.real), encode(value.imag)]}
    if isinstance(value, tuple):
        return {"$tuple": [encode(v) for v in value]}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) and not k.startswith("$") for k in value):
            return {k: encode(v) for k, v in value.items()}
        return {"$dict": [[encode(k), encode(v)] for k, v in value.items()]}
    raise EncodeError("cannot pass a value of type %s to the comparison" % type(value).__name__)


def decode(v):
    """Builds only plain values, numeric arrays and sparse matrices (safe on untrusted input)."""
    if isinstance(v, list):
        return [decode(x) for x in v]
    if not isinstance(v, dict):
        return v
    if len(v) == 1:
        (tag, inner), = v.items()
        if tag == "$float":
            return float(inner)
        if tag == "$complex":
            return complex(float(decode(inner[0])), float(decode(inner[1])))
        if tag == "$tuple":
            return tuple(decode(x) for x in inner)
        if tag == "$dict":
            return {_hashable(decode(k)): decode(x) for k, x in inner}
        if tag == "$ndarray":
            import numpy as np
            dtype = str(inner["dtype"])
            if dtype not in _DTYPES:
                raise ValueError("unsupported dtype %r" % dtype)
            shape = [int(n) for n in inner["shape"]]
            data = [decode(x) for x in inner["data"]]
            if math.prod(shape) != len(data):
                raise ValueError("array data does not match its shape")
            if dtype == "object":
                array = np.empty(len(data), dtype=object)
                for i, x in enumerate(data):
                    array[i] = x
                return array.reshape(shape)
            return np.array(data, dtype=dtype).reshape(shape)
        if tag == "$sparse":
            import numpy as np
            import scipy.sparse as sp
            dtype = str(inner["dtype"])
            if dtype not in _DTYPES or dtype == "object":
                raise ValueError("unsupported sparse dtype %r" % dtype)
            shape = tuple(int(n) for n in inner["shape"])
            data = np.array([decode(x) for x in inner["data"]], dtype=dtype)
            coo = sp.coo_matrix((data, (np.array(inner["row"], dtype=np.int64),
                                        np.array(inner["col"], dtype=np.int64))), shape=shape)
            fmt = str(inner.get("format", "csr"))
            return coo.asformat(fmt if fmt in ("csr", "csc", "coo", "lil", "dok", "bsr", "dia")
                                else "csr")
    return {k: decode(x) for k, x in v.items()}


def _hashable(k):
    if isinstance(k, list):
        return tuple(_hashable(x) for x in k)
    return k


def short(text):
    return text if len(text) <= MAX_MSG else text[:MAX_MSG] + "... [cut]"
