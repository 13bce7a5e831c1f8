"""SciCode runner (research-bench rubrics): deriving `target` from recorded values (the importer,
with gold code loaded): a snippet split as the grader splits it (`scicode_plan.plan`) is run,
and the other side of each comparison against `target` is what `target` was.
"""

import ast

from scicode_codec import decode, encode
from scicode_plan import PlanError, mentions_target, pairs, plan


def _peel(t_side, o_side, ns):
    """(path, other side) when `t_side` is `target` reached through subscripts, or through the
    same attribute/method chain as `o_side`; None otherwise."""
    path = []
    while True:
        if isinstance(t_side, ast.Name) and t_side.id == "target":
            return list(reversed(path)), o_side
        if isinstance(t_side, ast.Subscript) and not mentions_target(t_side.slice):
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
        for t_side, o_side in pairs(node):
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
