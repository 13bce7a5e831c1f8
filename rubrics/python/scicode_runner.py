"""SciCode step runner (research-bench rubrics): a verdict the graded code cannot forge.

Usage: python3 -I scicode_runner.py CASES_JSON AGENT_FILE RESULT_JSON [SNIPPET_TIMEOUT_SECS] [--fail-fast]

--fail-fast (for mutation testing): stop at the first case that does not pass; later cases
and steps are reported as `not_run`.

Trust boundary. This process (the *trusted side*: started isolated, `python3 -I`, so nothing of
the agent's is on its import path) reads the held-out cases and never loads the agent's code.
Each test snippet is split (see `plan`) into
  - the *agent part*: the snippet itself, with every assertion against `target` replaced by a
    call that records the values the comparison needs (the agent's results, never `target`);
  - the *checks*: those comparisons, evaluated here with our own numpy on the recorded values.
The agent part runs in a worker process (`--worker`; as uid 1000 when we are root, with the
environment we were given, e.g. the forbidden-API hook) that loads the problem's dependencies
and the agent's file. Values cross back as tagged JSON (`encode`/`decode`: numbers, strings,
arrays of numeric dtypes, sparse matrices; never pickle), read here with size caps. `target`
never enters the worker.

Upstream's semantics: a step's cases run in order in ONE namespace (deps, the agent's file, then
each case), so a case may use names an earlier case defined; canaries use names of their own.
`a, b = target` (or `x = target`) is rewritten to `target[0]`, `target[1]` (`x` -> `target`).
A function the snippet defines may be called on `target` when it is pure test code
(`_pure_helpers`): it is then defined and called here, on recorded data only.

Snippets that check themselves (assertions not against `target`, which must run with the
agent's code) are judged by the worker's report; each step therefore also runs canaries: cases
with a per-run nonce that must fail and one that must pass, placed at random among the real
ones. A must-fail canary reported as passed marks the step `tampering_detected`.

RESULT_JSON: {"problem_id", "steps": [{"step_id", "status": pass|fail|error|timeout|not_run,
  "cases": [{"case", "status", "message", "duration_secs", "perturbed_of"?,
  "in_agent_process"?}], "message"}],
  (`perturbed_of`: the case a perturbed copy was made from, see `perturbed_case`;
  `in_agent_process`: how many of the case's checks the worker judged, see `_self_checks`)
  "tampering_detected": bool}
A step whose canaries caught tampering has status `fail` and a message starting with
`tampering_detected`.

Also a library for the importer's `scicode_targets.py` (derivation uses the same split).
"""

import ast
import builtins
import copy
import json
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import traceback

MAX_MSG = 2000
MAX_RESULT_BYTES = 512 * 1024 * 1024
MAX_SOLUTION_BYTES = 8 * 1024 * 1024
AGENT_UID = 1000

# ---------------------------------------------------------------------------------------------
# Values as tagged JSON. Plain JSON, or {"$float": "nan"|"inf"|"-inf"}, {"$complex": [re, im]},
# {"$tuple": [...]}, {"$dict": [[k, v], ...]}, {"$ndarray": {"dtype", "shape", "data"}},
# {"$sparse": {"format", "shape", "dtype", "row", "col", "data"}}.

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


# ---------------------------------------------------------------------------------------------
# The comparison helpers SciCode's snippets import from `scicode.compare.cmp` (our own code).


def cmp_tuple_or_list(a, b):
    """Element-wise allclose over tuples/lists."""
    import numpy as np
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(y, (tuple, list)) and not isinstance(x, np.ndarray):
            if not cmp_tuple_or_list(x, y):
                return False
        elif not np.allclose(x, y):
            return False
    return True


def are_dicts_close(a, b, rtol=1e-05, atol=1e-08):
    """allclose over dicts with the same keys."""
    import numpy as np
    if set(a) != set(b):
        return False
    return all(np.allclose(a[k], b[k], rtol=rtol, atol=atol) for k in b)


def are_csc_matrix_close(a, b):
    """allclose over sparse matrices (dense comparison)."""
    import numpy as np
    return np.allclose(a.toarray(), b.toarray())


HELPERS = {"cmp_tuple_or_list": cmp_tuple_or_list, "are_dicts_close": are_dicts_close,
           "are_csc_matrix_close": are_csc_matrix_close}


def _strict():
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.append(here)
    import rb_strict  # shipped beside this file (the grader's harness, the importer's staging)
    rb_strict.install()


def install_scicode_shim():
    """Snippets import `scicode.compare.cmp`; provide our implementation under that name."""
    import types
    pkg = types.ModuleType("scicode")
    pkg.__path__ = []
    sub = types.ModuleType("scicode.compare")
    sub.__path__ = []
    cmp = types.ModuleType("scicode.compare.cmp")
    for name, fn in HELPERS.items():
        setattr(cmp, name, fn)
    pkg.compare, sub.cmp = sub, cmp
    sys.modules.setdefault("scicode", pkg)
    sys.modules.setdefault("scicode.compare", sub)
    sys.modules.setdefault("scicode.compare.cmp", cmp)


def trusted_namespace(deps):
    """The problem's dependencies and our helpers, loaded on the trusted side. numpy's
    closeness checks there refuse vacuous comparisons (`rb_strict`: an empty value against a
    non-empty one, arrays of different shapes broadcast together)."""
    _strict()
    install_scicode_shim()
    ns = {"__name__": "__scicode_trusted__"}
    exec(compile(deps, "<required_dependencies>", "exec"), ns)
    ns.update(HELPERS)
    return ns


# ---------------------------------------------------------------------------------------------
# Splitting a snippet into the agent part and the trusted checks.


class PlanError(ValueError):
    """The snippet uses `target` in a way whose comparison cannot be moved out of agent code."""


def _mentions_target(node):
    return any(isinstance(n, ast.Name) and n.id == "target" for n in ast.walk(node))


def _root_name(node):
    while True:
        if isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        elif isinstance(node, ast.Call):
            node = node.func
        elif isinstance(node, ast.Name):
            return node.id
        else:
            return None


def _stored_names(tree):
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, ast.arg):
            out.add(n.arg)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            for a in n.names:
                out.add((a.asname or a.name).split(".")[0])
    return out


def _snippet_imports(tree):
    """Top-level `import` statements of the snippet (replayed on the trusted side), minus the
    `scicode` helpers (ours already)."""
    out = []
    for stmt in tree.body:
        if isinstance(stmt, ast.Import):
            out.append(stmt)
        elif isinstance(stmt, ast.ImportFrom) and not (stmt.module or "").startswith("scicode"):
            out.append(stmt)
    return out


class _Holes:
    """Replaces the parts of a check that need agent code with `__h[i]`."""

    def __init__(self, trusted, helpers=()):
        self.trusted = trusted
        # Functions the snippet defines that are pure test code (`_pure_helpers`): a comparison
        # may call them on `target` (they then run on the trusted side, on recorded data).
        self.helpers = set(helpers)
        self.used_helpers = set()
        self.exprs = []

    def _is_trusted(self, node):
        return all(n.id in self.trusted for n in ast.walk(node)
                   if isinstance(n, ast.Name) and n.id != "target")

    def _hole(self, node):
        self.exprs.append(node)
        sub = ast.Subscript(value=ast.Name(id="__h", ctx=ast.Load()),
                            slice=ast.Constant(value=len(self.exprs) - 1), ctx=ast.Load())
        return ast.copy_location(sub, node)

    def visit(self, node):
        if isinstance(node, ast.Name) and node.id == "target":
            return node
        if not _mentions_target(node):
            if not getattr(node, "_rb_keep", False):
                if self._is_trusted(node):
                    return node
                if isinstance(node, (ast.Name, ast.Lambda, ast.ListComp, ast.SetComp,
                                     ast.DictComp, ast.GeneratorExp, ast.NamedExpr, ast.Await,
                                     ast.Yield)):
                    return self._hole(node)
                root = _root_name(node) if isinstance(node, (ast.Attribute, ast.Subscript,
                                                             ast.Call)) else None
                if root is not None and root not in self.trusted:
                    return self._hole(node)
        elif isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                               ast.GeneratorExp, ast.NamedExpr)):
            raise PlanError("`target` inside a %s" % type(node).__name__)
        elif isinstance(node, ast.Call):
            root = _root_name(node.func)
            if isinstance(node.func, ast.Name) and root in self.helpers:
                node.func._rb_keep = True
                self.used_helpers.add(root)
            elif root is None or (root not in self.trusted and root != "target"):
                raise PlanError("the comparison calls `%s`, which is not a function of the "
                                "problem's dependencies, of scicode.compare or a function the "
                                "test defines from those alone"
                                % ast.unparse(node.func))
        for field, old in ast.iter_fields(node):
            if isinstance(old, list):
                setattr(node, field, [self.visit(x) if isinstance(x, ast.AST) and
                                      not isinstance(x, (ast.expr_context, ast.operator,
                                                         ast.cmpop, ast.boolop, ast.unaryop))
                                      else x for x in old])
            elif isinstance(old, ast.AST) and not isinstance(
                    old, (ast.expr_context, ast.operator, ast.cmpop, ast.boolop, ast.unaryop)):
                setattr(node, field, self.visit(old))
        return node


def _mark_chains(part):
    """`f(x).toarray()` against `target.toarray()`: the method runs on the trusted side, on the
    recorded `f(x)` (so that `target` is what `f(x)` was)."""
    for node in ast.walk(part):
        for t_side, o_side in _pairs(node):
            while True:
                if (isinstance(t_side, ast.Attribute) and isinstance(o_side, ast.Attribute)
                        and t_side.attr == o_side.attr):
                    o_side._rb_keep = True
                    t_side, o_side = t_side.value, o_side.value
                elif (isinstance(t_side, ast.Call) and isinstance(o_side, ast.Call)
                      and isinstance(t_side.func, ast.Attribute)
                      and isinstance(o_side.func, ast.Attribute)
                      and t_side.func.attr == o_side.func.attr
                      and [ast.dump(a) for a in t_side.args] == [ast.dump(a) for a in o_side.args]
                      and not t_side.keywords and not o_side.keywords):
                    o_side._rb_keep = True
                    o_side.func._rb_keep = True
                    t_side, o_side = t_side.func.value, o_side.func.value
                else:
                    break


def _conjuncts(test):
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        out = []
        for v in test.values:
            out.extend(_conjuncts(v))
        return out
    return [test]


def plan(snippet, trusted_names):
    """Splits a test snippet. Returns {"agent": source, "sites": [check source...],
    "imports": source}: the agent source calls `__record(site, [values])` where the snippet
    asserted against `target`; each check (an expression over `__h` and `target`) is evaluated
    on the trusted side. Raises PlanError (or SyntaxError) for a snippet it cannot split."""
    tree = _substitute_target_aliases(ast.parse(snippet))
    stored = _stored_names(tree)
    trusted = (set(trusted_names) | set(dir(builtins))) - stored - {"target"}
    for imp in _snippet_imports(tree):
        for a in imp.names:
            trusted.add((a.asname or a.name).split(".")[0])
    trusted |= set(HELPERS)
    helpers = _pure_helpers(tree, trusted)
    used_helpers = set()
    sites = []

    class Split(ast.NodeTransformer):
        def visit_Assert(self, node):
            if not _mentions_target(node.test):
                return node
            out = []
            for part in _conjuncts(node.test):
                if not _mentions_target(part):
                    out.append(ast.copy_location(ast.Assert(test=part, msg=None), node))
                    continue
                _mark_chains(part)
                holes = _Holes(trusted, helpers)
                check = holes.visit(part)
                used_helpers.update(holes.used_helpers)
                sites.append(ast.unparse(check))
                call = ast.Call(func=ast.Name(id="__record", ctx=ast.Load()),
                                args=[ast.Constant(value=len(sites) - 1),
                                      ast.List(elts=holes.exprs, ctx=ast.Load())],
                                keywords=[])
                out.append(ast.copy_location(ast.Expr(value=call), node))
            return out

    tree = Split().visit(tree)
    ast.fix_missing_locations(tree)
    if _mentions_target(tree):
        line = next(n.lineno for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id == "target")
        raise PlanError("line %d uses `target` outside an assertion (only assertions that "
                        "compare against `target` are supported)" % line)
    preamble = _snippet_imports(ast.parse(snippet))
    if used_helpers:
        # Every pure helper (they may call each other), defined as the test wrote them.
        preamble += [copy.deepcopy(helpers[name]) for name in sorted(helpers)]
    imports = ast.Module(body=preamble, type_ignores=[])
    return {"agent": ast.unparse(tree), "sites": sites, "imports": ast.unparse(imports),
            "in_process": _self_checks(tree)}


def _self_checks(tree):
    """How many checks stay in the agent part (assertions not against `target`, calls of
    `assert*`/`testing.assert*` functions): their verdict is the worker's report, decided in
    the agent's process (the stated exception; only the canaries guard it)."""
    n = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert):
            n += 1
        elif isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name.startswith("assert"):
                n += 1
    return n


def _substitute_target_aliases(tree):
    """Upstream's tests often unpack the target first (`a, b, c = target`, `x = target`): the
    statement goes and each name becomes `target[i]` (or `target`) where it is read, so the
    comparisons are against `target` again. A name taken from `target` that is assigned again
    is refused."""
    aliases, body = {}, []
    for stmt in tree.body:
        if (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.value, ast.Name) and stmt.value.id == "target"):
            t = stmt.targets[0]
            if isinstance(t, ast.Name):
                aliases[t.id] = None
                continue
            if isinstance(t, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Name)
                                                            for e in t.elts):
                for i, e in enumerate(t.elts):
                    aliases[e.id] = i
                continue
        body.append(stmt)
    if not aliases:
        return tree
    tree.body = body
    for n in ast.walk(tree):
        if isinstance(n, ast.Name) and n.id in aliases and not isinstance(n.ctx, ast.Load):
            raise PlanError("`%s` is taken from `target` and then assigned again" % n.id)
        if isinstance(n, ast.arg) and n.arg in aliases:
            raise PlanError("`%s` is taken from `target` and is also a parameter" % n.arg)

    class Sub(ast.NodeTransformer):
        def visit_Name(self, node):
            if node.id not in aliases:
                return node
            ref = ast.Name(id="target", ctx=ast.Load())
            if aliases[node.id] is not None:
                ref = ast.Subscript(value=ref, slice=ast.Constant(value=aliases[node.id]),
                                    ctx=ast.Load())
            return ast.copy_location(ref, node)
    tree = Sub().visit(tree)
    ast.fix_missing_locations(tree)
    return tree


def _pure_helpers(tree, trusted):
    """{name: def} of the top-level functions the snippet defines that are pure test code: every
    name they read is a parameter or local of theirs, a trusted name (the problem's
    dependencies, builtins, the snippet's imports, scicode.compare) or another pure helper; no
    `global`/`nonlocal`. Only these may be called on `target`, on the trusted side: there they
    get recorded data, never an object of the agent's."""
    defs = {s.name: s for s in tree.body if isinstance(s, ast.FunctionDef)}

    def free(fn):
        if any(isinstance(n, (ast.Global, ast.Nonlocal)) for n in ast.walk(fn)):
            return None
        bound = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
        for n in ast.walk(fn):
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load):
                bound.add(n.id)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n is not fn:
                bound.add(n.name)
            elif isinstance(n, ast.arg):
                bound.add(n.arg)
            elif isinstance(n, (ast.Import, ast.ImportFrom)):
                for a in n.names:
                    bound.add((a.asname or a.name).split(".")[0])
        loads = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        return loads - bound
    frees = {name: free(fn) for name, fn in defs.items()}
    pure = set()
    changed = True
    while changed:
        changed = False
        for name, names in frees.items():
            if name not in pure and names is not None and names <= trusted | pure | {name}:
                pure.add(name)
                changed = True
    return {name: defs[name] for name in pure}


# ---------------------------------------------------------------------------------------------
# Deriving `target` from recorded values (the importer, with gold code).


class _Unknown(Exception):
    pass


def _peel(t_side, o_side, ns):
    """(path, other side) when `t_side` is `target` reached through subscripts, or through the
    same attribute/method chain as `o_side`; None otherwise."""
    path = []
    while True:
        if isinstance(t_side, ast.Name) and t_side.id == "target":
            return list(reversed(path)), o_side
        if isinstance(t_side, ast.Subscript) and not _mentions_target(t_side.slice):
            key = eval(compile(ast.Expression(body=t_side.slice), "<key>", "eval"), ns)
            if isinstance(key, (slice, list)) or getattr(key, "ndim", 0):
                return None
            if hasattr(key, "item"):
                key = key.item()
            path.append(key)
            t_side = t_side.value
        elif (isinstance(t_side, ast.Attribute) and isinstance(o_side, ast.Attribute)
              and t_side.attr == o_side.attr):
            t_side, o_side = t_side.value, o_side.value
        elif (isinstance(t_side, ast.Call) and isinstance(o_side, ast.Call)
              and isinstance(t_side.func, ast.Attribute) and isinstance(o_side.func, ast.Attribute)
              and t_side.func.attr == o_side.func.attr
              and [ast.dump(a) for a in t_side.args] == [ast.dump(a) for a in o_side.args]):
            t_side, o_side = t_side.func.value, o_side.func.value
        else:
            return None


def _pairs(node):
    """Candidate (target side, other side) pairs of a comparison node."""
    if isinstance(node, ast.Call):
        args = node.args
        withs = [i for i, a in enumerate(args) if _mentions_target(a)]
        if len(args) >= 2 and len(withs) == 1 and withs[0] in (0, 1):
            i = withs[0]
            return [(args[i], args[1 - i])]
        if len(args) == 1 and isinstance(args[0], ast.BinOp) and isinstance(args[0].op, ast.Sub):
            return _pairs(args[0])
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, right = node.left, node.comparators[0]
        if _mentions_target(right) and not _mentions_target(left):
            return [(right, left)]
        if _mentions_target(left) and not _mentions_target(right):
            return [(left, right)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
        if _mentions_target(node.right) and not _mentions_target(node.left):
            return [(node.right, node.left)]
        if _mentions_target(node.left) and not _mentions_target(node.right):
            return [(node.left, node.right)]
    return []


def target_pieces(check, holes, ns):
    """[(path, value)] that the check compares with `target`, evaluated with `holes` bound
    ([] for a check that only inspects `target`, e.g. `target.dtype == bool`)."""
    tree = ast.parse(check, mode="eval")
    env = dict(ns)
    env["__h"] = holes
    out = []
    pending = [tree.body]
    while pending:
        node = pending.pop(0)
        found = None
        for t_side, o_side in _pairs(node):
            peeled = _peel(t_side, o_side, env)
            if peeled is not None:
                found = peeled
                break
        if found is not None:
            path, other = found
            value = eval(compile(ast.Expression(body=other), "<other side>", "eval"), env)
            out.append((path, value))
            continue
        pending.extend(c for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr))
    return out


def assemble(pieces):
    """Builds `target` from [(path, value)]; the first value for a path wins."""
    whole = [v for p, v in pieces if not p]
    if whole:
        return whole[0]
    tree = {}
    for path, value in pieces:
        node = tree
        for key in path[:-1]:
            node = node.setdefault(key, {})
            if not isinstance(node, dict):
                raise PlanError("`target` is used both whole and indexed")
        node.setdefault(path[-1], value)

    def build(node):
        if not isinstance(node, dict):
            return node
        keys = list(node)
        if all(isinstance(k, int) and not isinstance(k, bool) for k in keys):
            n = max(keys) + 1
            if sorted(keys) != list(range(n)) and min(keys) >= 0:
                raise PlanError("`target[i]` is compared for i in %s only" % sorted(keys))
            return tuple(build(node[k]) for k in sorted(keys))
        return {k: build(v) for k, v in node.items()}
    return build(tree)


def derive_case(snippet, ns, tns):
    """(encoded target, record count) of one snippet run in `ns` (the step's namespace, with
    the gold code loaded; the snippet's names stay in it for the step's later cases, as in
    upstream's harness). (None, 0) for a snippet that checks itself."""
    p = plan(snippet, tns)
    events = []
    ns["__record"] = lambda site, values: events.append((site, list(values)))
    exec(compile(p["agent"], "<test>", "exec"), ns)
    if not p["sites"]:
        return None, 0
    trusted = dict(tns)
    if p["imports"]:
        exec(compile(p["imports"], "<snippet imports>", "exec"), trusted)
    pieces = []
    for site, values in events:
        # Values cross as data, as they do when grading.
        holes = [decode(encode(v)) for v in values]
        pieces.extend(target_pieces(p["sites"][site], holes, trusted))
    if not pieces:
        raise PlanError("the comparison against `target` never ran")
    return encode(assemble(pieces)), len(events)


# ---------------------------------------------------------------------------------------------
# Perturbed inputs (the importer's opt-in `--perturbed-inputs`): a copy of a test case whose
# float inputs are moved a little, with its target derived from the gold code. It reaches
# faults that the benchmark's own inputs cannot see (a zero phase, a sparse state, a real
# matrix), while staying inside what the function accepts:
#   - only floating-point values move (Python floats and complex numbers, float/complex
#     arrays, lists and tuples of them); ints, bools, strings, int arrays never do (indices,
#     sizes, counts, flags);
#   - shape, dtype and container types are kept; a scalar 0.0, an all-zero array, a strictly
#     monotone 1-D array (a grid, time points) and an array of only -1/0/1 (masks, spins) are
#     left alone;
#   - real values stay real (also when held as complex numbers), except in a Hermitian matrix;
#   - symmetric and Hermitian matrices stay so; non-negative arrays stay non-negative; unit
#     vectors and probability vectors are renormalised; a positive (semi-)definite symmetric
#     matrix must stay so, and a unit-trace one keeps its trace;
#   - a copy is kept only when the gold code runs on it, every value of its target is finite,
#     and the target is well conditioned: the gold code's values at a second point 1e-9 away
#     (relative) still pass the snippet's own comparison against it.
# The noise is seeded from the snippet, so an import is reproducible; the perturbed values are
# written into the copy's snippet as literals (no randomness at grading time).

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
    return any(isinstance(n, ast.Call) and _root_name(n.func) in names for n in ast.walk(stmt))


def _inputs(tree, step_functions):
    """(k, names): the first statement that compares against `target` or calls a function of
    the step under test, and the names assigned before it that are read from it on (the test's
    inputs). A name whose value comes from the step's own functions is an output, never an
    input."""
    k = next((i for i, stmt in enumerate(tree.body)
              if _mentions_target(stmt) or _calls(stmt, step_functions)), None)
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
    return _check_case(meta, events, tns)[0] == "pass"


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
    if not _mentions_target(tree):
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


# ---------------------------------------------------------------------------------------------
# The worker: runs agent parts (agent side).


class _Timeout(BaseException):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def _short(text):
    return text if len(text) <= MAX_MSG else text[:MAX_MSG] + "... [cut]"


def _run_cases(deps, agent_src, agent_path, cases, timeout, fail_fast):
    """In the worker's per-step child: per case {"token", "status", "message", "records",
    "duration_secs"}; status is done|fail|error|timeout."""
    signal.signal(signal.SIGALRM, _alarm)
    base = {"__name__": "__main__", "cmp_tuple_or_list": cmp_tuple_or_list}
    try:
        signal.alarm(timeout)
        exec(compile(deps, "<required_dependencies>", "exec"), base)
        exec(compile(agent_src, agent_path, "exec"), base)
        signal.alarm(0)
    except _Timeout:
        return "timeout", [], "loading the solution took longer than %ss" % timeout
    except BaseException:
        signal.alarm(0)
        return "error", [], _short("loading the solution failed:\n" + traceback.format_exc())
    results = []
    # Upstream's harness: a step's cases run in order in one namespace (a later case may use
    # what an earlier one defined).
    ns = dict(base)
    for i, case in enumerate(cases):
        records = []
        ns["__record"] = lambda site, values, records=records: records.append(
            [site, [encode(v) for v in values]])
        start = time.monotonic()
        try:
            signal.alarm(timeout)
            exec(compile(case["agent"], "<test case>", "exec"), ns)
            signal.alarm(0)
            status, msg = "done", None
        except _Timeout:
            status, msg = "timeout", ("snippet exceeded %ss (the limit is `case_timeout_secs` of "
                                      "the task's scicode_steps grader)" % timeout)
        except AssertionError:
            signal.alarm(0)
            status, msg = "fail", _short(traceback.format_exc(limit=-2))
        except BaseException:
            signal.alarm(0)
            status, msg = "error", _short(traceback.format_exc(limit=-3))
        results.append({"token": case["token"], "status": status, "message": msg,
                        "records": records if status == "done" else [],
                        "duration_secs": time.monotonic() - start})
        if fail_fast and status != "done":
            break
    return "ran", results, None


def worker(job_path, out_dir):
    """Agent side: one forked child per step, each writing `<out_dir>/<index>.json`."""
    install_scicode_shim()
    with open(job_path) as f:
        job = json.load(f)
    try:
        import numpy  # noqa: F401  (warm the import once, before forking per step)
    except ImportError:
        pass
    try:
        with open(job["agent_path"], "rb") as f:
            agent_src = f.read(MAX_SOLUTION_BYTES + 1)
        if len(agent_src) > MAX_SOLUTION_BYTES:
            raise ValueError("solution file larger than 8 MiB")
        agent_src = agent_src.decode("utf-8")
        load_error = None
    except (OSError, ValueError) as e:
        agent_src, load_error = "", "cannot read the solution %s: %s" % (job["agent_path"], e)
    for index, step in enumerate(job["steps"]):
        out_path = os.path.join(out_dir, "%d.json" % index)
        if load_error:
            with open(out_path, "w") as f:
                json.dump({"status": "error", "cases": [], "message": load_error}, f)
            continue
        pid = os.fork()
        if pid == 0:
            try:
                status, cases, msg = _run_cases(job["deps"], agent_src, job["agent_path"],
                                                step["cases"], job["timeout"], job["fail_fast"])
                payload = {"status": status, "cases": cases, "message": msg}
            except BaseException:
                payload = {"status": "error", "cases": [], "message": _short(traceback.format_exc())}
            try:
                with open(out_path, "w") as f:
                    json.dump(payload, f)
            except BaseException:
                os._exit(3)
            os._exit(0)
        _, wstatus = os.waitpid(pid, 0)
        if not os.path.exists(out_path):
            if os.WIFSIGNALED(wstatus) and os.WTERMSIG(wstatus) == signal.SIGKILL:
                why = ("the step's process was killed (SIGKILL), most likely out of memory: the "
                       "limit is the task's `environment.memory_mb` (task.toml)")
            else:
                why = "the step's process died without reporting (wait status %d)" % wstatus
            with open(out_path, "w") as f:
                json.dump({"status": "error", "cases": [], "message": why}, f)


# ---------------------------------------------------------------------------------------------
# The trusted side.


def _read_capped(path, cap):
    """Reads a file written by the worker without following links; None if absent."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        data = f.read(cap + 1)
    if len(data) > cap:
        raise ValueError("the worker's result is larger than %d bytes" % cap)
    return data


def _no_dump():
    """Forbids same-uid processes (the worker) from reading our memory or tracing us."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
    except Exception:
        pass


def _canaries(rng, trusted_names):
    """Cases only tampering can report wrongly: (agent source, must_pass). Names and values are
    fresh per run."""
    a, b = rng.randint(1000, 10 ** 6), rng.randint(1, 999)
    x = a / 7.0
    # The step's cases share one namespace: a canary's names must not be a test's.
    name = lambda: (rng.choice("xyzuvw") + rng.choice(["", "_in", "0", "_ref", "s"])
                    + str(rng.randint(100, 10 ** 6)))
    n1, n2 = name(), name()
    out = [("%s = %d\nassert %s == %d" % (n1, a, n1, a), True),
           ("%s = %d + 1\nassert %s == %d" % (n1, a, n1, a), False)]
    if "np" in trusted_names:
        out.append(("%s = np.array([%r, %d.0])\nassert np.allclose(%s, np.array([%r, %d.0]))"
                    % (n2, x, b, n2, x * 1.5 + 1.0, b), False))
        out.append(("%s = np.array([%r])\nnp.testing.assert_allclose(%s, np.array([%r]))"
                    % (n1, x, n1, x * 2 + 1.0), False))
    return out


def _evaluate(check, records_for_site, tns):
    """Runs one trusted check: (ok, message)."""
    code = compile(check, "<check>", "eval")
    try:
        holes = [decode(v) for v in records_for_site]
        env = dict(tns)
        env["__h"] = holes
        ok = eval(code, env)
        ok = bool(ok)
    except Exception as exc:
        return False, _short("the comparison `%s` raised %s: %s" % (check, type(exc).__name__, exc))
    return ok, None if ok else "assertion failed: `%s`" % check


def main():
    args = [a for a in sys.argv[1:] if a != "--fail-fast"]
    fail_fast = "--fail-fast" in sys.argv[1:]
    if args and args[0] == "--worker":
        worker(args[1], args[2])
        return
    if not sys.flags.isolated:
        # The trusted side never runs with anyone else's import path.
        os.execv(sys.executable, [sys.executable, "-I", os.path.abspath(__file__)] + sys.argv[1:])
    _no_dump()
    cases_path, agent_path, result_path = args[0:3]
    timeout = int(args[3]) if len(args) > 3 else 60
    with open(cases_path) as f:
        problem = json.load(f)
    if os.geteuid() != 0 and os.access(os.path.dirname(os.path.abspath(cases_path)), os.W_OK):
        # Not root: the worker runs as our uid, so the held-out copy must go before it starts.
        try:
            os.unlink(cases_path)
        except OSError:
            pass
    deps = problem.get("required_dependencies") or ""
    try:
        tns = trusted_namespace(deps)
        tns_error = None
    except BaseException:
        tns, tns_error = {}, _short(traceback.format_exc())
    rng = random.SystemRandom()

    # Plan every case; the worker gets agent parts only.
    job_steps, expect = [], []
    for step in problem["steps"]:
        cases, meta = [], []
        for i, case in enumerate(step["test_cases"]):
            token = "%032x" % rng.getrandbits(128)
            try:
                p = plan(case["test"], tns)
                cases.append({"token": token, "agent": p["agent"]})
                meta.append({"case": i + 1, "token": token, "plan": p,
                             "target": case.get("target"),
                             "records": case.get("records"),
                             "perturbed_of": (case.get("perturbed") or {}).get("of")})
            except (PlanError, SyntaxError) as exc:
                meta.append({"case": i + 1, "token": None,
                             "error": "the test snippet cannot be graded: %s" % exc})
        canaries = []
        # Under --fail-fast (mutation testing) the worker stops at the first failure: no canaries.
        for src, must_pass in ([] if fail_fast else _canaries(rng, tns)):
            token = "%032x" % rng.getrandbits(128)
            canaries.append({"token": token, "must_pass": must_pass})
            cases.insert(rng.randint(0, len(cases)), {"token": token, "agent": src})
        job_steps.append({"step_id": str(step["step_id"]), "cases": cases})
        expect.append((meta, canaries))

    steps_out = []
    tampered = False
    if tns_error is not None:
        for step in problem["steps"]:
            steps_out.append({"step_id": str(step["step_id"]), "status": "error", "cases": [],
                              "message": "the problem's dependencies do not load:\n" + tns_error})
    else:
        for step, job_step, (meta, canaries) in zip(problem["steps"], job_steps, expect):
            sid = str(step["step_id"])
            if fail_fast and any(s["status"] != "pass" for s in steps_out):
                steps_out.append({"step_id": sid, "status": "not_run", "cases": [], "message": None})
                continue
            # One worker per step: a fresh process, and under --fail-fast no step runs after
            # the first that fails.
            (status, reports, message), = _run_worker([job_step], deps, agent_path, timeout,
                                                      fail_fast)
            out = _judge_step(sid, status, reports, message, meta, canaries, tns, fail_fast)
            tampered = tampered or out.pop("tampered")
            steps_out.append(out)
    with open(result_path, "w") as f:
        json.dump({"problem_id": str(problem.get("problem_id", "")), "steps": steps_out,
                   "tampering_detected": tampered}, f)


def _run_worker(job_steps, deps, agent_path, timeout, fail_fast):
    """Runs the agent parts; returns per step (status, {token: report}, message)."""
    root = os.geteuid() == 0
    work = tempfile.mkdtemp(prefix="scicode-")
    os.chmod(work, 0o711)
    job_path = os.path.join(work, "job.json")
    with open(job_path, "w") as f:
        json.dump({"deps": deps, "agent_path": os.path.abspath(agent_path), "timeout": timeout,
                   "fail_fast": fail_fast, "steps": job_steps}, f)
    os.chmod(job_path, 0o644)
    out_dir = os.path.join(work, "out")
    os.mkdir(out_dir)
    if root:
        os.chown(out_dir, AGENT_UID, AGENT_UID)
    else:
        os.chmod(out_dir, 0o700)
    cases = sum(len(s["cases"]) for s in job_steps)
    budget = timeout * (cases + 2 * len(job_steps)) + 10
    kwargs = {}
    if root:
        kwargs = {"user": AGENT_UID, "group": AGENT_UID, "extra_groups": []}
    cwd = os.path.dirname(os.path.abspath(agent_path)) or "/"
    timed_out = False
    try:
        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker", job_path,
                                 out_dir], cwd=cwd if os.path.isdir(cwd) else "/",
                                env=dict(os.environ), stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                start_new_session=True, **kwargs)
        try:
            _, err = proc.communicate(timeout=budget)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            _, err = proc.communicate()
        # Nothing the worker left behind keeps running.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        err_tail = (err or b"")[-MAX_MSG:].decode("utf-8", "replace")
    except OSError as exc:
        err_tail = "cannot start the worker: %s" % exc
    out = []
    for index in range(len(job_steps)):
        try:
            data = _read_capped(os.path.join(out_dir, "%d.json" % index), MAX_RESULT_BYTES)
            res = json.loads(data) if data is not None else None
        except (ValueError, OSError) as exc:
            res, err_tail = None, "unreadable worker result: %s" % exc
        if not isinstance(res, dict):
            if timed_out:
                out.append(("timeout", {}, "the steps exceeded their %ss budget" % budget))
            else:
                out.append(("error", {}, _short("the step's process died without reporting; "
                                                "stderr tail:\n" + err_tail)))
            continue
        reports = {}
        for r in res.get("cases") or []:
            if isinstance(r, dict) and isinstance(r.get("token"), str):
                reports.setdefault(r["token"], r)
        out.append((str(res.get("status")), reports, res.get("message")))
    return out


def _judge_step(sid, status, reports, message, meta, canaries, tns, fail_fast):
    if status in ("error", "timeout") and not reports:
        return {"step_id": sid, "status": status if status in ("error", "timeout") else "error",
                "cases": [], "message": _short(str(message)), "tampered": False}
    # Canaries first: a step whose canaries were misreported is not judged on its cases.
    for c in canaries:
        r = reports.get(c["token"])
        if r is None:
            continue
        passed = r.get("status") == "done"
        if not c["must_pass"] and passed:
            return {"step_id": sid, "status": "fail", "cases": [], "tampered": True,
                    "message": "tampering_detected: a check that must fail was reported as "
                               "passed (the agent's code changed how tests run)"}
        if c["must_pass"] and not passed:
            return {"step_id": sid, "status": "fail", "cases": [], "tampered": False,
                    "message": "a check that must pass failed in the agent's process (its code "
                               "broke the test environment): %s" % _short(str(r.get("message")))}
    results = []
    for m in meta:
        if m.get("error"):
            results.append({"case": m["case"], "status": "error", "message": m["error"],
                            "duration_secs": 0.0})
            if fail_fast:
                break
            continue
        r = reports.get(m["token"])
        if r is None:
            if fail_fast and results and results[-1]["status"] != "pass":
                break
            results.append({"case": m["case"], "status": "timeout" if status == "timeout" else "error",
                            "message": "no report for this case", "duration_secs": 0.0})
            if fail_fast:
                break
            continue
        st = r.get("status")
        duration = r.get("duration_secs") if isinstance(r.get("duration_secs"), (int, float)) else 0.0
        if st != "done":
            mapped = st if st in ("fail", "timeout") else "error"
            results.append({"case": m["case"], "status": mapped,
                            "message": _short(str(r.get("message"))), "duration_secs": duration})
            if fail_fast:
                break
            continue
        verdict, msg = _check_case(m, r.get("records"), tns)
        results.append({"case": m["case"], "status": verdict, "message": msg,
                        "duration_secs": duration})
        if m["plan"].get("in_process"):
            # A pass here includes checks the agent's process judged itself.
            results[-1]["in_agent_process"] = m["plan"]["in_process"]
        if fail_fast and verdict != "pass":
            break
    copies = {m["case"]: m.get("perturbed_of") for m in meta if m.get("perturbed_of")}
    for r in results:
        if r["case"] in copies:
            r["perturbed_of"] = copies[r["case"]]
    statuses = [r["status"] for r in results]
    if statuses and len(statuses) == len(meta) and all(s == "pass" for s in statuses):
        overall = "pass"
    elif "timeout" in statuses:
        overall = "timeout"
    elif "error" in statuses and "fail" not in statuses:
        overall = "error"
    else:
        overall = "fail"
    return {"step_id": sid, "status": overall, "cases": results, "message": None,
            "tampered": False}


def _check_case(meta, records, tns):
    """The trusted verdict on one case's recorded values."""
    sites = meta["plan"]["sites"]
    if not sites:
        return "pass", None
    if not isinstance(records, list):
        return "error", "the case recorded no values"
    try:
        target = decode(meta["target"])
    except Exception as exc:
        return "error", "the held-out target does not decode: %s" % exc
    env = dict(tns)
    if meta["plan"]["imports"]:
        try:
            exec(compile(meta["plan"]["imports"], "<snippet imports>", "exec"), env)
        except Exception as exc:
            return "error", "the snippet's imports fail on the trusted side: %s" % exc
    env["target"] = target
    seen = [0] * len(sites)
    for rec in records:
        if (not isinstance(rec, list) or len(rec) != 2 or not isinstance(rec[0], int)
                or not 0 <= rec[0] < len(sites) or not isinstance(rec[1], list)):
            return "error", "malformed record from the agent's process"
        seen[rec[0]] += 1
        ok, msg = _evaluate(sites[rec[0]], rec[1], env)
        if not ok:
            return "fail", msg
    expected = meta.get("records")
    if isinstance(expected, int):
        if len(records) != expected:
            return "fail", ("the comparisons against `target` ran %d time(s), expected %d"
                            % (len(records), expected))
    elif 0 in seen:
        return "fail", "a comparison against `target` never ran"
    return "pass", None


if __name__ == "__main__":
    main()
