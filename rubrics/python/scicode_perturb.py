"""SciCode runner (research-bench rubrics): perturbed inputs (the importer's opt-in
`--perturbed-inputs`): a copy of a test case whose float inputs are moved a little, with its
target derived from the gold code. It reaches faults that the benchmark's own inputs cannot
see (a zero phase, a sparse state, a real matrix), while staying inside what the function
accepts:
  - only floating-point values move (Python floats and complex numbers, float/complex
    arrays, lists and tuples of them); ints, bools, strings, int arrays never do (indices,
    sizes, counts, flags);
  - shape, dtype and container types are kept; a scalar 0.0, an all-zero array, a strictly
    monotone 1-D array (a grid, time points) and an array of only -1/0/1 (masks, spins) are
    left alone;
  - real values stay real (also when held as complex numbers), except in a Hermitian matrix;
  - symmetric and Hermitian matrices stay so; non-negative arrays stay non-negative; unit
    vectors and probability vectors are renormalised; a positive (semi-)definite symmetric
    matrix must stay so, and a unit-trace one keeps its trace;
  - a copy is kept only when the gold code runs on it, every value of its target is finite,
    and the target is well conditioned: the gold code's values at a second point 1e-9 away
    (relative) still pass the snippet's own comparison against it.
The noise is seeded from the snippet, so an import is reproducible; the perturbed values are
written into the copy's snippet as literals (no randomness at grading time).
"""

import ast

from scicode_derive import derive_case
from scicode_codec import encode
from scicode_judge import check_case
from scicode_plan import mentions_target, root_name, plan

PERTURB_REL = 1e-2
PERTURB_MAX_ELEMENTS = 4096
_PROBE_REL = 1e-9


def _np():
    import numpy as np
    return np


def _is_float_scalar(v):
    np = _np()
    if isinstance(v, bool) or isinstance(v, (int, np.integer, np.bool_)):
        return False
    return isinstance(v, (float, complex, np.floating, np.complexfloating))


def _as_float_array(v):
    """A float/complex array for `v` (an array, or a rectangular nested list/tuple holding at
    least one float), or None."""
    np = _np()
    if isinstance(v, np.ndarray):
        return v if v.dtype.kind in "fc" else None
    if not isinstance(v, (list, tuple)) or not v:
        return None

    def leaves(x):
        if isinstance(x, (list, tuple)):
            for y in x:
                yield from leaves(y)
        else:
            yield x
    items = list(leaves(v))
    if not all(_is_float_scalar(x) or isinstance(x, (int, np.integer)) for x in items):
        return None
    if isinstance(items[0], bool) or not any(_is_float_scalar(x) for x in items):
        return None
    try:
        a = np.array(v)
    except (ValueError, TypeError):
        return None
    return a if a.dtype.kind in "fc" and a.size == len(items) else None


def _rebuild(template, a):
    """`a` in the container types of `template` (Python floats/complex at the leaves)."""
    if isinstance(template, (list, tuple)):
        out = [_rebuild(t, x) for t, x in zip(template, a)]
        return tuple(out) if isinstance(template, tuple) else out
    x = a.item() if hasattr(a, "item") else a
    return complex(x) if isinstance(x, complex) else float(x)


def _perturb_array(a, rng, rel):
    """A perturbed copy of a float/complex array, or None when it must stay as it is."""
    np = _np()
    if a.size == 0 or a.size > PERTURB_MAX_ELEMENTS or not np.all(np.isfinite(a)):
        return None
    scale = float(np.max(np.abs(a)))
    if scale == 0.0 or np.all(np.isin(a, (-1.0, 0.0, 1.0))):
        return None
    if a.ndim == 1 and a.size >= 3 and a.dtype.kind == "f":
        d = np.diff(a)
        if np.all(d > 0) or np.all(d < 0):
            return None
    noise = rng.standard_normal(a.shape)
    square = a.ndim == 2 and a.shape[0] == a.shape[1] and a.shape[0] > 1
    hermitian = square and np.array_equal(a, a.conj().T)
    if a.dtype.kind == "c" and (hermitian or np.any(a.imag != 0)):
        # Real values held as complex stay real, except in a Hermitian matrix (which stays
        # Hermitian).
        noise = noise + 1j * rng.standard_normal(a.shape)
    if hermitian:
        noise = (noise + noise.conj().T) / 2
    nonneg = a.dtype.kind == "f" and bool(np.all(a >= 0))
    if nonneg:
        noise = np.abs(noise)
    b = a + rel * scale * noise
    if a.ndim == 1:
        norm2 = float(np.linalg.norm(a))
        if abs(norm2 - 1.0) < 1e-9:
            b = b / np.linalg.norm(b)
        elif nonneg and abs(float(np.sum(a)) - 1.0) < 1e-9:
            b = b / np.sum(b)
    if hermitian:
        eig = np.linalg.eigvalsh(a)
        if abs(complex(np.trace(a)) - 1.0) < 1e-9 and eig.min() >= -1e-12:
            b = b / np.trace(b).real
        if eig.min() > 0 and np.linalg.eigvalsh(b).min() <= 0:
            return None
        if eig.min() >= -1e-12 and np.linalg.eigvalsh(b).min() < -1e-12:
            return None
    return b.astype(a.dtype)


def perturb_value(v, rng, rel=PERTURB_REL):
    """A perturbed copy of one input value (same type, shape, dtype), or None."""
    np = _np()
    if _is_float_scalar(v):
        x = complex(v) if isinstance(v, (complex, np.complexfloating)) else float(v)
        if x == 0 or not np.isfinite(x):
            return None
        u = rng.uniform(-1.0, 1.0)
        if isinstance(x, complex):
            # A real value held as a complex number stays real.
            v2 = rng.uniform(-1.0, 1.0) if x.imag != 0 else 0.0
            y = x * complex(1 + rel * u, rel * v2)
        else:
            y = x * (1 + rel * u)
        return type(v)(y) if isinstance(v, np.generic) else y
    a = _as_float_array(v)
    if a is None:
        return None
    b = _perturb_array(a, rng, rel)
    if b is None:
        return None
    return b if isinstance(v, np.ndarray) else _rebuild(v, b)


def _literal(v):
    """Python source that rebuilds `v` exactly (finite floats round-trip through repr)."""
    np = _np()
    if isinstance(v, np.ndarray):
        return "__import__('numpy').array(%r, dtype=%r)" % (v.tolist(), v.dtype.name)
    if isinstance(v, np.generic):
        return "__import__('numpy').%s(%r)" % (v.dtype.name, v.item())
    return repr(v)


def _calls(stmt, names):
    return any(isinstance(n, ast.Call) and root_name(n.func) in names for n in ast.walk(stmt))


def _inputs(tree, step_functions):
    """(k, names): the first statement that compares against `target` or calls a function of
    the step under test, and the names assigned before it that are read from it on (the test's
    inputs). A name whose value comes from the step's own functions is an output, never an
    input."""
    k = next((i for i, stmt in enumerate(tree.body)
              if mentions_target(stmt) or _calls(stmt, step_functions)), None)
    if k is None:
        return None, []
    assigned, outputs = set(), set(step_functions)
    for stmt in tree.body[:k]:
        stored = {n.id for n in ast.walk(stmt)
                  if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        read = {n.id for n in ast.walk(stmt)
                if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        if read & outputs:
            outputs |= stored
        assigned |= stored
    names = []
    for stmt in tree.body[k:]:
        for n in ast.walk(stmt):
            if (isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in assigned
                    and n.id not in outputs and n.id not in names
                    and not n.id.startswith("__")):
                names.append(n.id)
    return k, names


def step_functions(gold_code):
    """The names of the functions a step's gold code defines (the functions under test)."""
    try:
        tree = ast.parse(gold_code)
    except SyntaxError:
        return set()
    return {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def _values_pass(snippet, gold_ns, tns, target, records):
    """Whether the gold code's values on `snippet` pass the snippet's comparison against the
    encoded `target`."""
    p = plan(snippet, tns)
    events = []
    ns = dict(gold_ns)
    ns["__record"] = lambda site, values: events.append([site, [encode(v) for v in values]])
    exec(compile(p["agent"], "<probe>", "exec"), ns)
    meta = {"plan": p, "target": target, "records": records}
    return check_case(meta, events, tns)[0] == "pass"


def _finite(encoded):
    if isinstance(encoded, dict):
        if set(encoded) == {"$float"}:
            return False
        return all(_finite(v) for v in encoded.values())
    if isinstance(encoded, list):
        return all(_finite(v) for v in encoded)
    return True


def perturbed_case(snippet, gold_ns, tns, seed, functions):
    """A perturbed copy of a test case of a step whose gold code defines `functions`:
    ({"test", "target", "records", "perturbed": {"inputs", "seed"}}, None), or (None, reason)
    when there is nothing safe to perturb or the copy is not kept. The perturbed values are
    assigned just before the first statement that calls the step's functions or compares
    against `target`."""
    np = _np()
    tree = ast.parse(snippet)
    if not mentions_target(tree):
        return None, "the test does not compare against `target`"
    k, names = _inputs(tree, set(functions))
    if not names:
        return None, "no input is assigned before the step's function is called"
    ns = dict(gold_ns)
    setup = ast.Module(body=tree.body[:k], type_ignores=[])
    np.random.seed(0)
    exec(compile(setup, "<setup>", "exec"), ns)

    def build(rel, base, salt):
        rng = np.random.default_rng([seed, salt])
        lines, moved, values = [], [], {}
        for name in names:
            if name not in base:
                continue
            new = perturb_value(base[name], rng, rel)
            if new is None:
                continue
            values[name] = new
            moved.append(name)
            lines.append("%s = %s" % (name, _literal(new)))
        if not moved:
            return None, None, None
        body = tree.body[:k] + ast.parse("\n".join(lines)).body + tree.body[k:]
        text = ast.unparse(ast.Module(body=body, type_ignores=[]))
        return text, moved, values

    text, moved, values = build(PERTURB_REL, ns, 0)
    if text is None:
        return None, "no float input to perturb"
    try:
        np.random.seed(0)
        target, records = derive_case(text, dict(gold_ns), tns)
    except Exception as exc:  # noqa: BLE001 (the gold code may reject the input: no copy)
        return None, "the gold code fails on the perturbed inputs: %s" % type(exc).__name__
    if target is None or not _finite(target):
        return None, "the target on the perturbed inputs is not finite"
    probe, _, _ = build(_PROBE_REL, dict(ns, **values), 1)
    try:
        np.random.seed(0)
        stable = probe is not None and _values_pass(probe, gold_ns, tns, target, records)
    except Exception:  # noqa: BLE001
        stable = False
    if not stable:
        return None, "the target is ill-conditioned at the perturbed inputs"
    return {"test": text, "target": target, "records": records,
            "perturbed": {"inputs": moved, "seed": seed}}, None
