"""Static forbidden-API scan (research-bench rubrics).

Usage: python3 forbidden_scan.py FORBIDDEN_JSON [--inputs TASK_INPUTS SNAPSHOT] FILE...
(with --inputs, a file left as the task gave it, the same bytes at the same path under
TASK_INPUTS as under SNAPSHOT, is the task's and not scanned)
Prints one JSON object: {"hits": [{"file", "line", "name", "forbidden", "how"}],
                         "unparsed": [{"file", "error"}]}
Every file the agent wrote is read, whatever its name: Python source whole; a notebook's code
cells; any other text file line by line (each line, and each quoted string on it, that parses
as Python is scanned together with the others, so a `.pyx`, a text file the agent's code
exec's, a shell script's `python3 -c '...'` or here-document are covered). Binary files are
skipped. Resolves import aliases (`import numpy as np`, `from numpy import fft as F`), attribute
chains (`np.fft.fft`), `getattr(mod, "name")`, `__import__("x")`,
`importlib.import_module("x")` and `sys.modules["x"]` (also with names built from constant
strings: `"numpy." + "fft"`), scans the constant strings given to `exec`/`eval`/`compile` as
code, and flags what it cannot resolve: `getattr` with a computed name on a module that holds a
forbidden callable, an import or `sys.modules` lookup of a computed name (a hit on every
forbidden name). A Python file that cannot be parsed (or whose nesting exhausts the parser) is
reported under "unparsed" and scanned line by line. Run as root with `python3 -I`.
"""

import ast
import json
import os
import re
import sys


def dotted(node, aliases):
    """Full dotted name of an attribute chain rooted at an imported alias, else None."""
    parts = []
    while True:
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id == "getattr" and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
            parts.append(node.args[1].value)
            node = node.args[0]
        elif isinstance(node, ast.Name):
            root = aliases.get(node.id)
            if root is None:
                return None
            return ".".join([root] + list(reversed(parts)))
        else:
            return None


def const_str(node):
    """A string built from constants only (`"a"`, `"a" + "b"`, `f"a{'b'}"`), else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = const_str(node.left), const_str(node.right)
        return a + b if a is not None and b is not None else None
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            if isinstance(v, ast.FormattedValue):
                v = v.value
            p = const_str(v)
            if p is None:
                return None
            parts.append(p)
        return "".join(parts)
    return None


# A name the scan could not resolve (a computed import): a hit on every forbidden name.
ANY = "*"


def is_sys_modules(node, aliases):
    return dotted(node, aliases) == "sys.modules"


def scan(tree):
    aliases = {}
    used = []  # (line, name, how)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                used.append((node.lineno, a.name, "import"))
                if a.asname:
                    aliases[a.asname] = a.name
                else:
                    top = a.name.split(".")[0]
                    aliases[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            used.append((node.lineno, node.module, "from-import"))
            for a in node.names:
                full = node.module + "." + a.name
                used.append((node.lineno, full, "from-import"))
                aliases[a.asname or a.name] = full
    for node in ast.walk(tree):
        if isinstance(node, (ast.Attribute,)):
            name = dotted(node, aliases)
            if name:
                used.append((node.lineno, name, "attribute"))
        elif isinstance(node, ast.Call):
            f = node.func
            fname = f.id if isinstance(f, ast.Name) else dotted(f, aliases)
            if isinstance(f, ast.Name) and fname in aliases:
                fname = aliases[fname]
            target = const_str(node.args[0]) if node.args else None
            if fname in ("__import__", "importlib.import_module", "builtins.__import__",
                         "importlib.__import__"):
                if target:
                    used.append((node.lineno, target, "dynamic import"))
                elif node.args:
                    used.append((node.lineno, ANY, "import of a computed name"))
            if (isinstance(f, ast.Attribute) and f.attr in ("get", "__getitem__", "pop",
                                                           "setdefault")
                    and is_sys_modules(f.value, aliases) and node.args):
                if target:
                    used.append((node.lineno, target, "sys.modules lookup"))
                else:
                    used.append((node.lineno, ANY, "sys.modules lookup of a computed name"))
            if fname == "getattr":
                name = dotted(node, aliases)
                if name:
                    used.append((node.lineno, name, "getattr"))
                elif len(node.args) >= 2 and const_str(node.args[1]) is None:
                    base = dotted(node.args[0], aliases)
                    if base:
                        used.append((node.lineno, base + ".*", "computed getattr"))
            if fname in ("exec", "eval", "compile", "builtins.exec", "builtins.eval") and target:
                try:
                    inner = ast.parse(target)
                except (SyntaxError, ValueError, RecursionError, MemoryError):
                    inner = None
                if inner is not None:
                    for _line, name, how in scan(inner):
                        used.append((node.lineno, name, "exec'd string: " + how))
        elif isinstance(node, ast.Subscript) and is_sys_modules(node.value, aliases):
            key = const_str(node.slice)
            if key:
                used.append((node.lineno, key, "sys.modules lookup"))
            else:
                used.append((node.lineno, ANY, "sys.modules lookup of a computed name"))
        elif isinstance(node, ast.Name) and node.id in aliases:
            used.append((getattr(node, "lineno", 0), aliases[node.id], "name"))
    return used


def matches(name, forbidden):
    if name == ANY:
        return True
    if name.endswith(".*"):
        # A computed attribute of a module: a hit when the module is, holds or lies inside a
        # forbidden name.
        base = name[:-2]
        return base == forbidden or base.startswith(forbidden + ".") \
            or forbidden.startswith(base + ".")
    return name == forbidden or name.startswith(forbidden + ".")


MAX_BYTES = 4 * 1024 * 1024
WHOLE_BYTES = 256 * 1024
QUOTED = re.compile(r"'([^'\\]*(?:\\.[^'\\]*)*)'" + r'|"([^"\\]*(?:\\.[^"\\]*)*)"')
MAGIC = re.compile(r"^\s*[%!]")


def parse_whole(text, path):
    return ast.parse(text, filename=path)


KEYWORDS = ("import", "modules", "getattr", "exec", "eval", "compile", "vars")
WORD = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def salvage(text, forbidden):
    """The statements of a text that is not Python as a whole: every line, and every quoted
    string on a line, that parses alone (stripped of its indentation), as one module. Only lines
    that can matter are parsed (a data file's rows are not): those naming an import, a lookup,
    dynamic code or a forbidden top-level name, then those naming a name they bound."""
    lines = text.splitlines()
    words = set(KEYWORDS) | {f.split(".")[0] for f in forbidden}
    body = []
    done = set()

    def take(n, line):
        pieces = [line.strip()]
        for m in QUOTED.finditer(line):
            inner = m.group(1) if m.group(1) is not None else m.group(2)
            pieces += [p.strip() for p in inner.replace("\\n", "\n").split("\n")]
            pieces += [p.strip() for p in inner.split(";")]
        bound = set()
        for piece in pieces:
            if not piece or MAGIC.match(piece):
                continue
            try:
                tree = ast.parse(piece)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                continue
            for st in tree.body:
                for sub in ast.walk(st):
                    if hasattr(sub, "lineno"):
                        sub.lineno = n
                    if isinstance(sub, ast.alias):
                        bound.add((sub.asname or sub.name).split(".")[0])
                    elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                        bound.add(sub.id)
                body.append(st)
        return bound

    for _ in range(2):
        new = set()
        for n, line in enumerate(lines, 1):
            if n in done or len(line) > 20000:
                continue
            if any(w in words for w in WORD.findall(line)):
                done.add(n)
                new |= take(n, line)
        words |= new
    return ast.Module(body=body, type_ignores=[])


def notebook_code(raw):
    try:
        nb = json.loads(raw)
        cells = nb.get("cells", []) if isinstance(nb, dict) else []
    except (ValueError, RecursionError):
        return None
    out = []
    for c in cells:
        if isinstance(c, dict) and c.get("cell_type") == "code":
            src = c.get("source", "")
            out.append("".join(src) if isinstance(src, list) else str(src))
    return "\n".join(out)


def trees_of(path, raw, forbidden):
    """(tree, None) to scan, or (None, error) when nothing could be read; (None, None) for a
    binary file."""
    if b"\0" in raw[:8192]:
        return None, None
    text = raw.decode("utf-8", errors="replace")
    if path.endswith(".ipynb"):
        code = notebook_code(raw)
        if code is not None:
            text = code
    error = None
    # Parsed whole: Python source, and other text small enough to be code (a large data file,
    # whose rows may parse as tuples, is read line by line).
    if path.endswith((".py", ".pyw", ".ipynb")) or len(text) <= WHOLE_BYTES:
        try:
            return parse_whole(text, path), None
        except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
            error = (type(e).__name__ + ": " + str(e))[:500]
    try:
        return salvage(text, forbidden), (error if path.endswith(".py") else None)
    except RecursionError as e:
        return None, "RecursionError: " + str(e)[:400]


def task_input(path, inputs, snap):
    """Whether `path` (under `snap`) is a task input left unchanged: the same bytes at the same
    place under `inputs`."""
    rel = os.path.relpath(path, snap)
    if rel.startswith(".."):
        return False
    original = os.path.join(inputs, rel)
    try:
        if os.path.getsize(original) != os.path.getsize(path):
            return False
        with open(original, "rb") as a, open(path, "rb") as b:
            return a.read() == b.read()
    except OSError:
        return False


def main():
    forbidden = json.loads(sys.argv[1])
    files = sys.argv[2:]
    inputs = snap = None
    if files[:1] == ["--inputs"]:
        inputs, snap, files = files[1], files[2], files[3:]
    out = {"hits": [], "unparsed": []}
    for path in files:
        if inputs and task_input(path, inputs, snap):
            continue
        try:
            with open(path, "rb") as f:
                raw = f.read(MAX_BYTES)
        except OSError as e:
            out["unparsed"].append({"file": path, "error": (type(e).__name__ + ": " + str(e))[:500]})
            continue
        tree, error = trees_of(path, raw, forbidden)
        if error:
            out["unparsed"].append({"file": path, "error": error})
        if tree is None:
            continue
        try:
            used = scan(tree)
        except RecursionError as e:
            out["unparsed"].append({"file": path, "error": "RecursionError: " + str(e)[:400]})
            continue
        seen = set()
        for line, name, how in used:
            for fb in forbidden:
                if matches(name, fb) and (line, fb) not in seen:
                    seen.add((line, fb))
                    out["hits"].append({"file": path, "line": line, "name": name,
                                        "forbidden": fb, "how": how})
    out["hits"].sort(key=lambda h: (h["file"], h["line"]))
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
