"""SciCode targets files (`test_data.h5`) in upstream's layout, read and written with h5py.

Runs on the host with the Python that has h5py and numpy (the repository's `.venv`, or
`RB_SCICODE_PYTHON`); the tasks crate ships this file with the grader's SciCode runner (for the
tagged JSON of values: `scicode_codec.encode`).

  python3 scicode_h5.py read TARGETS.h5 REQUEST.json OUT.json
      REQUEST.json: {"steps": [{"step_id": "1.1", "tests": 3}, ...]}
      OUT.json:     {"steps": {"1.1": [<encoded target of test 1>, ...]},
                     "errors": [{"step_id", "test", "cause"}]}
  python3 scicode_h5.py write CASES.json... OUT.h5
      Writes the targets of `scicode_cases.json` files (ours) in upstream's layout; prints
      {"written": steps, "errors": [{"step_id", "test", "cause"}]}.

The layout (upstream's `process_hdf5_to_tuple`): the group `<step>/test<n>` (n from 1) holds one
member per value, `var1`, `var2`, ..., read in the file's key order (h5py's: by name, so `var10`
sorts before `var2`, exactly as upstream reads it); one member is the target itself, several form
a tuple. A member is a dataset (bytes decode as UTF-8 text) or a group holding `list` (its items
in key order), `sparse_matrix` (`data`, `shape`, and `row`/`col` (COO), or `indices`/`indptr`
(CSR; BSR with `blocksize`)), or else a dict: one member per key, a key that parses as a float
becomes that float, a group member is a sparse matrix (its `sparse_matrix`).
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from scicode_codec import EncodeError, encode  # noqa: E402  (shipped beside this file)

import h5py  # noqa: E402
import numpy as np  # noqa: E402


class LayoutError(ValueError):
    pass


# ---------------------------------------------------------------------------------------------
# Reading: h5py objects -> tagged JSON (`encode`).


def _text_or_value(raw):
    if isinstance(raw, bytes):
        return raw.decode("utf-8", errors="strict")
    if isinstance(raw, np.ndarray) and raw.dtype.kind == "O":
        out = np.empty(raw.shape, dtype=object)
        for i, x in enumerate(raw.ravel()):
            out.ravel()[i] = x.decode("utf-8", errors="strict") if isinstance(x, bytes) else x
        return out
    if isinstance(raw, np.ndarray) and raw.dtype.kind == "S":
        return np.vectorize(lambda b: b.decode("utf-8", errors="strict"), otypes=[object])(raw)
    return raw


def _dataset(ds):
    return encode(_text_or_value(ds[()]))


def _sparse(group):
    """Tagged `$sparse` (COO triplets) for upstream's `sparse_matrix` group."""
    data = np.asarray(group["data"][()])
    shape = [int(x) for x in np.asarray(group["shape"][()]).ravel()]
    if len(shape) != 2:
        raise LayoutError("a sparse matrix's shape must have 2 entries, not %s" % shape)
    if "row" in group and "col" in group:
        row = np.asarray(group["row"][()], dtype=np.int64).ravel()
        col = np.asarray(group["col"][()], dtype=np.int64).ravel()
        fmt = "coo"
        values = data.ravel()
    elif "indices" in group and "indptr" in group:
        indices = np.asarray(group["indices"][()], dtype=np.int64).ravel()
        indptr = np.asarray(group["indptr"][()], dtype=np.int64).ravel()
        if "blocksize" in group:
            r, c = [int(x) for x in np.asarray(group["blocksize"][()]).ravel()]
            blocks = data.reshape(-1, r, c)
            rows, cols, values = [], [], []
            for brow in range(len(indptr) - 1):
                for k in range(indptr[brow], indptr[brow + 1]):
                    for i in range(r):
                        for j in range(c):
                            rows.append(brow * r + i)
                            cols.append(int(indices[k]) * c + j)
                            values.append(blocks[k, i, j])
            row, col, values, fmt = np.array(rows, np.int64), np.array(cols, np.int64), \
                np.array(values, dtype=data.dtype), "bsr"
        else:
            row = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
            col, values, fmt = indices, data.ravel(), "csr"
    else:
        raise LayoutError("a sparse_matrix group needs row/col or indices/indptr, has %s"
                          % sorted(group.keys()))
    if not (len(row) == len(col) == len(values)):
        raise LayoutError("a sparse matrix's data, rows and columns differ in length")
    return {"$sparse": {"format": fmt, "shape": shape, "dtype": values.dtype.name,
                        "row": [int(i) for i in row], "col": [int(i) for i in col],
                        "data": [encode(v) for v in values.tolist()]}}


def _dict(group):
    out = {}
    for key, obj in group.items():
        if isinstance(obj, h5py.Group):
            value = _sparse(obj["sparse_matrix"])
        else:
            value = _dataset(obj)
        try:
            k = float(key)
        except ValueError:
            k = key
        out[k] = value
    if all(isinstance(k, str) and not k.startswith("$") for k in out):
        return out
    return {"$dict": [[encode(k), v] for k, v in out.items()]}


def _group(group):
    """Upstream's `process_hdf5_datagroup`: decided by the first key."""
    for key in group.keys():
        if key == "list":
            return [_dataset(group["list"][k]) if isinstance(group["list"][k], h5py.Dataset)
                    else _group(group["list"][k]) for k in group["list"].keys()]
        if key == "sparse_matrix":
            return _sparse(group["sparse_matrix"])
        return _dict(group)
    return {}


def _member(obj):
    return _dataset(obj) if isinstance(obj, h5py.Dataset) else _group(obj)


def read_target(f, step_id, test):
    path = "%s/test%d" % (step_id, test)
    if path not in f:
        raise LayoutError("the targets file has no group `%s`" % path)
    group = f[path]
    if not isinstance(group, h5py.Group):
        raise LayoutError("`%s` is not a group" % path)
    keys = list(group.keys())
    if not keys:
        raise LayoutError("`%s` holds no value" % path)
    if len(keys) == 1:
        return _member(group[keys[0]])
    return {"$tuple": [_member(group[k]) for k in keys]}


def read(h5_path, request_path, out_path):
    with open(request_path) as f:
        request = json.load(f)
    steps, errors = {}, []
    with h5py.File(h5_path, "r") as f:
        for step in request["steps"]:
            sid = str(step["step_id"])
            values = []
            for test in range(1, int(step["tests"]) + 1):
                try:
                    values.append(read_target(f, sid, test))
                except (LayoutError, KeyError, ValueError, TypeError, EncodeError) as exc:
                    values.append(None)
                    errors.append({"step_id": sid, "test": test, "cause": str(exc)})
            steps[sid] = values
    with open(out_path, "w") as f:
        json.dump({"steps": steps, "errors": errors}, f, allow_nan=False)


# ---------------------------------------------------------------------------------------------
# Writing: our cases files -> upstream's layout (fixtures, and a user's export).


def _array(encoded):
    inner = encoded["$ndarray"]
    data = [_scalar(x) for x in inner["data"]]
    if inner["dtype"] == "object":
        if not all(isinstance(x, str) for x in data):
            raise LayoutError("an object array other than text has no HDF5 form")
        return np.array(data, dtype=h5py.string_dtype()).reshape(inner["shape"])
    return np.array(data, dtype=inner["dtype"]).reshape(inner["shape"])


def _scalar(v):
    if isinstance(v, dict) and set(v) == {"$float"}:
        return float(v["$float"])
    if isinstance(v, dict) and set(v) == {"$complex"}:
        return complex(_scalar(v["$complex"][0]), _scalar(v["$complex"][1]))
    if v is None or isinstance(v, (dict, list)):
        raise LayoutError("a %s is not a number or text" % type(v).__name__)
    return v


def _write_sparse(parent, name, inner):
    g = parent.create_group(name)
    g.create_dataset("data", data=np.array([_scalar(x) for x in inner["data"]],
                                           dtype=inner["dtype"]))
    g.create_dataset("shape", data=np.array(inner["shape"], dtype=np.int64))
    g.create_dataset("row", data=np.array(inner["row"], dtype=np.int64))
    g.create_dataset("col", data=np.array(inner["col"], dtype=np.int64))


def _write_member(parent, name, v):
    """One value as a dataset or a group of upstream's kinds."""
    if isinstance(v, dict) and "$ndarray" in v and len(v) == 1:
        parent.create_dataset(name, data=_array(v))
    elif isinstance(v, dict) and "$sparse" in v and len(v) == 1:
        g = parent.create_group(name)
        _write_sparse(g, "sparse_matrix", v["$sparse"])
    elif isinstance(v, list):
        g = parent.create_group(name).create_group("list")
        for i, item in enumerate(v):
            # Zero-padded: the file's key order is the list's order.
            _write_leaf(g, "item%06d" % i, item)
    elif isinstance(v, dict) and (set(v) == {"$dict"} or not any(k.startswith("$") for k in v)):
        pairs = v["$dict"] if set(v) == {"$dict"} else list(v.items())
        g = parent.create_group(name)
        for k, x in pairs:
            key = _scalar(k)
            if isinstance(key, str):
                try:
                    float(key)
                    raise LayoutError("the text key %r would read back as a number" % key)
                except ValueError:
                    pass
            elif isinstance(key, bool) or not isinstance(key, (int, float)):
                raise LayoutError("a dict key must be text or a number, not %r" % (key,))
            text = key if isinstance(key, str) else repr(float(key))
            if text in g or text in ("list", "sparse_matrix"):
                raise LayoutError("the dict key %r has no distinct HDF5 name" % (key,))
            if isinstance(x, dict) and "$sparse" in x and len(x) == 1:
                _write_sparse(g.create_group(text), "sparse_matrix", x["$sparse"])
            else:
                _write_leaf(g, text, x)
    elif isinstance(v, dict) and "$tuple" in v:
        raise LayoutError("a tuple inside a value has no form in upstream's layout")
    else:
        _write_leaf(parent, name, v)


def _plain(v):
    return [_plain(x) for x in v] if isinstance(v, list) else _scalar(v)


def _write_leaf(parent, name, v):
    if isinstance(v, dict) and "$ndarray" in v and len(v) == 1:
        parent.create_dataset(name, data=_array(v))
        return
    if isinstance(v, list):
        # A list inside a list or a dict is one array dataset in upstream's layout.
        parent.create_dataset(name, data=np.array(_plain(v)))
        return
    x = _scalar(v)
    if isinstance(x, str):
        parent.create_dataset(name, data=x.encode("utf-8"))
    elif isinstance(x, bool):
        parent.create_dataset(name, data=np.bool_(x))
    elif isinstance(x, int):
        parent.create_dataset(name, data=np.int64(x))
    elif isinstance(x, float):
        parent.create_dataset(name, data=np.float64(x))
    elif isinstance(x, complex):
        parent.create_dataset(name, data=np.complex128(x))
    else:
        raise LayoutError("a value of type %s has no HDF5 form" % type(x).__name__)


def write(cases_paths, out_path):
    errors, written = [], 0
    with h5py.File(out_path, "w") as f:
        for path in cases_paths:
            with open(path) as fh:
                problem = json.load(fh)
            for step in problem["steps"]:
                sid = str(step["step_id"])
                test = 0
                for case in step["test_cases"]:
                    if case.get("perturbed"):
                        continue
                    test += 1
                    target = case.get("target")
                    if target is None:
                        # A self-checking case: upstream still stores a value per case.
                        target = {"$ndarray": {"dtype": "bool", "shape": [], "data": [True]}}
                    group = f.create_group("%s/test%d" % (sid, test))
                    members = target["$tuple"] if (isinstance(target, dict)
                                                   and set(target) == {"$tuple"}) else [target]
                    if len(members) > 9:
                        errors.append({"step_id": sid, "test": test, "cause":
                                       "a tuple of %d values: upstream's order puts var10 before "
                                       "var2" % len(members)})
                    try:
                        for i, member in enumerate(members):
                            _write_member(group, "var%d" % (i + 1), member)
                    except (LayoutError, ValueError, TypeError) as exc:
                        errors.append({"step_id": sid, "test": test, "cause": str(exc)})
                written += 1
    print(json.dumps({"written": written, "errors": errors}))


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "read":
        read(sys.argv[2], sys.argv[3], sys.argv[4])
    elif len(sys.argv) >= 4 and sys.argv[1] == "write":
        write(sys.argv[2:-1], sys.argv[-1])
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)
