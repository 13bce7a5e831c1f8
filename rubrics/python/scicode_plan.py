"""SciCode runner (research-bench rubrics): splitting a test snippet (`plan`) into the agent part
and the trusted checks.

The agent part is the snippet with every assertion against `target` replaced by a call that
records the values the comparison needs (the agent's results, never `target`); the checks are
those comparisons, evaluated on the trusted side on the recorded values. `a, b = target` (or
`x = target`) is rewritten to `target[0]`, `target[1]` (`x` -> `target`). A function the
snippet defines may be called on `target` when it is pure test code (`_pure_helpers`): it is
then defined and called on the trusted side, on recorded data only.
"""

import ast
import builtins
import copy

from scicode_compare import HELPERS


class PlanError(ValueError):
    """The snippet uses `target` in a way whose comparison cannot be moved out of agent code."""


def mentions_target(node):
    return any(isinstance(n, ast.Name) and n.id == "target" for n in ast.walk(node))


def root_name(node):
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
        if not mentions_target(node):
            if not getattr(node, "_rb_keep", False):
                if self._is_trusted(node):
                    return node
                if isinstance(node, (ast.Name, ast.Lambda, ast.ListComp, ast.SetComp,
                                     ast.DictComp, ast.GeneratorExp, ast.NamedExpr, ast.Await,
                                     ast.Yield)):
                    return self._hole(node)
                root = root_name(node) if isinstance(node, (ast.Attribute, ast.Subscript,
                                                             ast.Call)) else None
                if root is not None and root not in self.trusted:
                    return self._hole(node)
        elif isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp,
                               ast.GeneratorExp, ast.NamedExpr)):
            raise PlanError("`target` inside a %s" % type(node).__name__)
        elif isinstance(node, ast.Call):
            root = root_name(node.func)
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
        for t_side, o_side in pairs(node):
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


def pairs(node):
    """Candidate (target side, other side) pairs of a comparison node."""
    if isinstance(node, ast.Call):
        args = node.args
        withs = [i for i, a in enumerate(args) if mentions_target(a)]
        if len(args) >= 2 and len(withs) == 1 and withs[0] in (0, 1):
            i = withs[0]
            return [(args[i], args[1 - i])]
        if len(args) == 1 and isinstance(args[0], ast.BinOp) and isinstance(args[0].op, ast.Sub):
            return pairs(args[0])
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        left, right = node.left, node.comparators[0]
        if mentions_target(right) and not mentions_target(left):
            return [(right, left)]
        if mentions_target(left) and not mentions_target(right):
            return [(left, right)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
        if mentions_target(node.right) and not mentions_target(node.left):
            return [(node.right, node.left)]
        if mentions_target(node.left) and not mentions_target(node.right):
            return [(node.left, node.right)]
    return []


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
            if not mentions_target(node.test):
                return node
            out = []
            for part in _conjuncts(node.test):
                if not mentions_target(part):
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
    if mentions_target(tree):
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
