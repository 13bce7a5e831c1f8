"""Test helper (runs in the grading container): derive SciCode targets from gold code and seed
mutants of the gold code.

Usage: python3 prepare.py PROBLEMS_JSONL OUT_DIR MAX_MUTANTS_PER_STEP RUNNER_DIR [WORKERS]
Writes OUT_DIR/<pid>/cases.json, OUT_DIR/<pid>/cases_perturbed.json (the same cases plus a
perturbed copy of each, as the importer's `--perturbed-inputs` makes them with
`scicode_perturb.perturbed_case`), OUT_DIR/<pid>/gold.py, OUT_DIR/<pid>/mutants/<n>.py and
OUT_DIR/manifest.json ([{"problem", "file", "step", "operator", "line", "before", "after"}],
where before/after are the changed line as `ast.unparse` writes it).
"""

import ast
import copy
import json
import math
import os
import sys
import zlib

import numpy as np


# ---------- targets ----------

def encode(v):
    if isinstance(v, np.ndarray):
        flat = [encode(x) for x in v.reshape(-1).tolist()]
        return {"$ndarray": {"dtype": str(v.dtype), "shape": list(v.shape), "data": flat}}
    if isinstance(v, np.generic):
        return encode(v.item())
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        if math.isnan(v):
            return {"$float": "nan"}
        if math.isinf(v):
            return {"$float": "inf" if v > 0 else "-inf"}
        return v
    if isinstance(v, complex):
        return {"$complex": [encode(v.real), encode(v.imag)]}
    if isinstance(v, tuple):
        return {"$tuple": [encode(x) for x in v]}
    if isinstance(v, list):
        return [encode(x) for x in v]
    if isinstance(v, dict):
        if all(isinstance(k, str) for k in v):
            return {k: encode(x) for k, x in v.items()}
        return {"$dict": [[encode(k), encode(x)] for k, x in v.items()]}
    raise TypeError("cannot encode %r" % type(v))


def uses_target(node):
    return any(isinstance(n, ast.Name) and n.id == "target" for n in ast.walk(node))


def other_side(node):
    """The expression compared with `target` inside an assert."""
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            args = list(n.args)
            if any(isinstance(a, ast.Name) and a.id == "target" for a in args):
                return next(a for a in args if not (isinstance(a, ast.Name) and a.id == "target"))
        if isinstance(n, ast.Compare):
            sides = [n.left] + list(n.comparators)
            if any(isinstance(a, ast.Name) and a.id == "target" for a in sides):
                return next(a for a in sides if not (isinstance(a, ast.Name) and a.id == "target"))
    raise ValueError("no comparison with target")


def derive(snippet, gold_ns):
    tree = ast.parse(snippet)
    idx = max(i for i, s in enumerate(tree.body) if isinstance(s, ast.Assert) and uses_target(s))
    expr = other_side(tree.body[idx])
    body = tree.body[:idx] + [ast.Assign(targets=[ast.Name("__rb_value", ast.Store())], value=expr)]
    mod = ast.fix_missing_locations(ast.Module(body=body, type_ignores=[]))
    ns = dict(gold_ns)
    exec(compile(mod, "<derive>", "exec"), ns)
    return ns["__rb_value"]


# ---------- mutants ----------

def dead_names(fn):
    """Names the function stores but never reads, except in statements that update them
    (`i = i + 1`, `i += 1`): mutating those statements cannot change any output."""
    stored, loaded = set(), set()
    for stmt in ast.walk(fn):
        if isinstance(stmt, (ast.Assign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            own = {t.id for t in targets if isinstance(t, ast.Name)}
            if isinstance(stmt, ast.AugAssign):
                own_reads = set()
            else:
                own_reads = own
            for n in ast.walk(stmt.value):
                if isinstance(n, ast.Name) and n.id not in own_reads:
                    loaded.add(n.id)
            stored |= own
            for t in targets:
                if not isinstance(t, ast.Name):
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name):
                            loaded.add(n.id)
        elif isinstance(stmt, ast.Name) and isinstance(stmt.ctx, ast.Load):
            pass
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            # Reads outside assignment statements (conditions, returns, calls) count.
            if not _inside_assignment(fn, n):
                loaded.add(n.id)
    return stored - loaded


def _inside_assignment(fn, target):
    for stmt in ast.walk(fn):
        if isinstance(stmt, (ast.Assign, ast.AugAssign)):
            for n in ast.walk(stmt):
                if n is target:
                    return True
    return False


class Sites(ast.NodeVisitor):
    """Collects (operator, path) mutation sites, skipping statements that only feed dead names."""

    def __init__(self):
        self.sites = []
        self.dead = set()

    def visit_FunctionDef(self, node):
        saved = self.dead
        self.dead = dead_names(node)
        for s in node.body:
            if isinstance(s, ast.Expr) and isinstance(getattr(s, "value", None), ast.Constant):
                continue  # docstring
            self.visit(s)
        self.dead = saved

    def _dead_stmt(self, node):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return all(isinstance(t, ast.Name) and t.id in self.dead for t in targets)

    def visit_Assign(self, node):
        if not self._dead_stmt(node):
            self.generic_visit(node)

    def visit_AugAssign(self, node):
        if not self._dead_stmt(node):
            if isinstance(node.op, (ast.Add, ast.Sub)):
                self.sites.append(("sign_flip", node))
            self.generic_visit(node)

    def visit_BinOp(self, node):
        if isinstance(node.op, (ast.Add, ast.Sub)):
            self.sites.append(("sign_flip", node))
        if isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
            self.sites.append(("drop_right_term", node))
            self.sites.append(("drop_left_term", node))
        self.generic_visit(node)

    def visit_UnaryOp(self, node):
        if isinstance(node.op, ast.USub):
            self.sites.append(("sign_flip", node))
        self.generic_visit(node)

    def visit_Subscript(self, node):
        s = node.slice
        if isinstance(s, (ast.Constant, ast.Name, ast.BinOp)) and not (isinstance(s, ast.Constant) and not isinstance(s.value, int)):
            self.sites.append(("off_by_one_index", node))
        self.generic_visit(node)

    def visit_Call(self, node):
        if len(node.args) >= 2 and ast.dump(node.args[0]) != ast.dump(node.args[1]) \
                and not any(isinstance(a, ast.Starred) for a in node.args[:2]):
            self.sites.append(("swap_arguments", node))
        self.generic_visit(node)


def apply(node, op):
    if op == "sign_flip":
        if isinstance(node, ast.UnaryOp):
            return node.operand
        node.op = ast.Sub() if isinstance(node.op, ast.Add) else ast.Add()
        return node
    if op == "drop_right_term":
        return node.left
    if op == "drop_left_term":
        if isinstance(node.op, ast.Sub):
            return ast.UnaryOp(op=ast.USub(), operand=node.right)
        return node.right
    if op == "off_by_one_index":
        node.slice = ast.BinOp(left=node.slice, op=ast.Add(), right=ast.Constant(1))
        return node
    if op == "swap_arguments":
        node.args[0], node.args[1] = node.args[1], node.args[0]
        return node
    raise ValueError(op)


class Replace(ast.NodeTransformer):
    def __init__(self, target_id, op):
        self.target_id, self.op = target_id, op

    def generic_visit(self, node):
        node = super().generic_visit(node)
        if getattr(node, "_rb_id", None) == self.target_id:
            return apply(node, self.op)
        return node


def mutants(code, limit):
    tree = ast.parse(code)
    finder = Sites()
    finder.visit(tree)
    sites = finder.sites
    # Spread the selection evenly over the sites (deterministic).
    if len(sites) > limit:
        step = len(sites) / limit
        sites = [sites[int(i * step)] for i in range(limit)]
    out = []
    original = ast.unparse(tree)
    for i, (op, node) in enumerate(sites):
        node._rb_id = i
    for i, (op, node) in enumerate(sites):
        mutated = Replace(i, op).visit(copy.deepcopy(tree))
        ast.fix_missing_locations(mutated)
        text = ast.unparse(mutated)
        if text != original:
            before, after = changed_line(original, text)
            out.append((op, getattr(node, "lineno", 0), text, before, after))
    return out


def changed_line(original, mutated):
    """The first line (normalised by `ast.unparse`) that differs: how a mutant is named in the
    ledger of equivalent mutants."""
    for a, b in zip(original.split("\n"), mutated.split("\n")):
        if a != b:
            return a.strip(), b.strip()
    return "", ""


def prepare_problem(job):
    """One problem (in a pool worker): writes its files; returns (manifest, perturbed log)."""
    line, out_dir, limit = job
    from scicode_compare import trusted_namespace
    from scicode_perturb import perturbed_case, step_functions
    manifest = []
    perturbed_log = []
    p = json.loads(line)
    pid = str(p["problem_id"])
    deps = p["required_dependencies"]
    steps = p["sub_steps"]
    gold_codes = [s["ground_truth_code"] for s in steps]
    gold_ns = {"__name__": "__main__"}
    exec(deps + "\n" + "\n\n".join(gold_codes), gold_ns)
    tns = trusted_namespace(deps)
    cases = {"problem_id": pid, "required_dependencies": deps, "steps": []}
    perturbed = {"problem_id": pid, "required_dependencies": deps, "steps": []}
    for s in steps:
        tcs = []
        for t in s["test_cases"]:
            np.random.seed(0)
            tcs.append({"test": t, "target": encode(derive(t, gold_ns))})
        copies = []
        for i, t in enumerate(s["test_cases"]):
            # The importer's seed: problem, step and case.
            seed = zlib.crc32(("%s/%s/%d" % (pid, s["step_number"], i)).encode())
            copy, why = perturbed_case(
                t, gold_ns, tns, seed, step_functions(s["ground_truth_code"]))
            if copy is not None:
                copy["perturbed"]["of"] = i + 1
                copies.append(copy)
            perturbed_log.append({"problem": pid, "step": s["step_number"], "case": i + 1,
                                  "inputs": copy["perturbed"]["inputs"] if copy else None,
                                  "skipped": why})
        cases["steps"].append({"step_id": s["step_number"], "function_header": s["function_header"],
                               "test_cases": tcs})
        perturbed["steps"].append({"step_id": s["step_number"],
                                   "function_header": s["function_header"],
                                   "test_cases": tcs + copies})
    d = os.path.join(out_dir, pid)
    os.makedirs(os.path.join(d, "mutants"), exist_ok=True)
    with open(os.path.join(d, "cases.json"), "w") as f:
        json.dump(cases, f)
    with open(os.path.join(d, "cases_perturbed.json"), "w") as f:
        json.dump(perturbed, f)
    with open(os.path.join(d, "gold.py"), "w") as f:
        f.write(deps + "\n\n" + "\n\n".join(gold_codes) + "\n")
    n = 0
    for k, s in enumerate(steps):
        for op, lineno, text, before, after in mutants(gold_codes[k], limit):
            codes = list(gold_codes)
            codes[k] = text
            name = "m%03d.py" % n
            n += 1
            with open(os.path.join(d, "mutants", name), "w") as f:
                f.write(deps + "\n\n" + "\n\n".join(codes) + "\n")
            manifest.append({"problem": pid, "file": "%s/mutants/%s" % (pid, name),
                             "step": s["step_number"], "operator": op, "line": lineno,
                             "before": before, "after": after})
    return manifest, perturbed_log


def main():
    sys.path.insert(0, sys.argv[4])
    from scicode_compare import install_scicode_shim
    install_scicode_shim()
    src, out_dir, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
    workers = int(sys.argv[5]) if len(sys.argv) > 5 else 1
    jobs = [(line, out_dir, limit) for line in open(src) if line.strip()]
    import multiprocessing
    with multiprocessing.get_context("fork").Pool(workers) as pool:
        # Problems in file order (the manifest is the same whatever the number of workers).
        done = pool.map(prepare_problem, jobs, chunksize=1)
    manifest = [m for ms, _ in done for m in ms]
    perturbed_log = [c for _, cs in done for c in cs]
    with open(os.path.join(out_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    print(json.dumps({"problems": len(set(m["problem"] for m in manifest)), "mutants": len(manifest),
                      "cases": len(perturbed_log),
                      "perturbed_copies": sum(1 for c in perturbed_log if c["inputs"]),
                      "not_perturbed": [c for c in perturbed_log if not c["inputs"]]}))


if __name__ == "__main__":
    main()
