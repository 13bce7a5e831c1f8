"""Static list of held-out tests (research-bench rubrics), run as root with `python3 -I -S`.

Usage: python3 -I -S -B list_tests.py FRAMEWORK PATH [CANARY_PATH CANARY [CANARY_LITE]]
(`-S`: no `site` start-up, whose `.pth` files cost ~50 ms; the installed packages' folders are
put on the path here, without their `.pth` files, to tell installed modules apart.)
FRAMEWORK pytest|unittest (Python files) or testthat (R files). Prints one JSON object:
{"files": {STEM: [test names a run must report]}, "all": [every test-like name defined]}.
The trusted side compares what a test run (agent code in-process) reports with this list.

With CANARY_PATH, the canary module is written there (a new file, 0644): CANARY_LITE (the same
tests without numpy, which costs an import) when given and no held-out file can involve
numpy (it imports no installed third-party module, names no numpy, imports nothing
dynamically), else CANARY. Exit 72: it could not be written.
"""

import ast
import importlib.util
import json
import os
import re
import sys

if sys.flags.no_site:
    import site

    sys.path.extend(p for p in site.getsitepackages() if p not in sys.path)

# What a held-out test may import without numpy coming into play.
NUMPY_FREE = {"pytest", "_pytest", "pluggy", "iniconfig", "packaging"}


def py_files(path, framework):
    if os.path.isfile(path):
        return [(path, True)]
    out = []
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for f in sorted(files):
            if not f.endswith(".py"):
                continue
            if framework == "pytest" and not (f.startswith("test_") or f.endswith("_test.py")):
                out.append((os.path.join(root, f), False))
                continue
            if framework == "unittest" and not f.startswith("test"):
                out.append((os.path.join(root, f), False))
                continue
            out.append((os.path.join(root, f), True))
    return out


def python(path, framework):
    files, names = {}, set()
    for file, collected in py_files(path, framework):
        try:
            with open(file, "rb") as f:
                tree = ast.parse(f.read(), filename=file)
        except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
                names.add(node.name)
        if not collected:
            continue
        top = []
        for node in tree.body:
            if (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                    and node.name.startswith("test") and framework == "pytest"):
                top.append(node.name)
            elif isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b) for b in node.bases]
                testcase = any(b.endswith("TestCase") for b in bases)
                if not (testcase or (framework == "pytest" and node.name.startswith("Test"))):
                    continue
                if framework == "pytest" and any(isinstance(n, ast.FunctionDef) and n.name == "__init__"
                                                 for n in node.body):
                    continue
                for n in node.body:
                    if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name.startswith("test"):
                        top.append(n.name)
        stem = os.path.splitext(os.path.basename(file))[0]
        if top:
            files.setdefault(stem, []).extend(top)
    return {"files": files, "all": sorted(names)}


TEST_THAT = re.compile(r"""test_that\s*\(\s*(?:desc\s*=\s*)?(["'])((?:\\.|(?!\1).)*)\1""")


def testthat(path):
    files, names = {}, set()
    paths = [path] if os.path.isfile(path) else [
        os.path.join(path, f) for f in sorted(os.listdir(path))
        if re.match(r"^test.*\.[rR]$", f)]
    for file in paths:
        try:
            with open(file, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        descs = [m.group(2) for m in TEST_THAT.finditer(text)]
        names.update(descs)
        files[os.path.basename(file)] = descs
    return {"files": files, "all": sorted(names)}


def may_involve_numpy(path, framework):
    """Whether the held-out Python files at `path` can reach numpy (conservative: anything
    unreadable, unparsable or dynamic counts as yes)."""
    for file, _ in py_files(path, framework):
        try:
            with open(file, "rb") as f:
                data = f.read()
            tree = ast.parse(data, filename=file)
        except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
            return True
        if b"numpy" in data or b"import_module" in data or b"__import__" in data:
            return True
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top in NUMPY_FREE:
                    continue
                # Installed in the image (the workspace is not on this path: the agent's own
                # modules are not found, and a module of the agent's cannot bring numpy into a
                # comparison the held-out tests make).
                try:
                    if importlib.util.find_spec(top) is not None:
                        return True
                except (ImportError, ValueError):
                    return True
    return False


def plant(dest, text):
    try:
        fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(dest, 0o644)
    except OSError as e:
        print("cannot write the canary %s: %s" % (dest, e), file=sys.stderr)
        sys.exit(72)


def main():
    framework, path = sys.argv[1], sys.argv[2]
    out = testthat(path) if framework == "testthat" else python(path, framework)
    if len(sys.argv) > 4:
        dest, text = sys.argv[3], sys.argv[4]
        lite = sys.argv[5] if len(sys.argv) > 5 else ""
        if lite and framework != "testthat" and not may_involve_numpy(path, framework):
            text = lite
        plant(dest, text)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
