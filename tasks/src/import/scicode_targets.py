"""SciCode targets: derive them from gold code, then check the gold code against them.

Usage (inside a sandbox; the tasks crate ships this file with the grader's SciCode runner,
`scicode_runner.py` and its modules, and runs it there):
  python3 scicode_targets.py derive PROBLEMS.json OUT.json PROBLEM_TIMEOUT_SECS MEMORY_MB [--verify]
          [--perturbed-inputs]
      PROBLEMS.json: {"problems": [{"problem_id", "required_dependencies",
                       "steps": [{"step_id", "function_header", "gold_code" (or null),
                                  "tests": [snippet], "targets": [encoded] (optional)}]}]}
      Writes {"problems": {<problem_id>: <cases>}, "errors": [<error>...],
      "slowest_case_secs": {<problem_id>: seconds the gold code's slowest case took},
      "disagreements": [{"problem_id", "step_id", "test", "why"}]} (rewritten after every
      problem, so a crash keeps what was done), where <cases> is the `scicode_cases.json` format
      and <error> is {"problem_id", "step_id", "test", "stage", "cause", "limit"}. `targets`
      (from a targets file) win over derived ones; a difference is a disagreement. A problem
      with a gold file `gold_<index>.py` beside this script is verified with --verify.
  python3 scicode_targets.py check CASES.json SOLUTION.py
      Prints one JSON line: {"steps": [{"step_id", "passed", "total", "errors"}], "passed": bool}

A snippet is split as the grader splits it (`scicode_plan.plan`): the parts that compare
against `target` are recorded with the gold code loaded, and `target` is what they were compared
with. Snippets with no comparison against `target` (self-checking tests) get no target and run
unchanged. With --perturbed-inputs each case that compares against `target` also gets a
perturbed copy when one is safe (`scicode_perturb.perturbed_case`: float inputs moved a little,
target from the gold code), appended to its step and marked
{"perturbed": {"of": case, "inputs", "seed"}}; the problem's "perturbed_cases" counts them.
Each problem is derived in a child process of its own, so one that runs out of time
or memory is reported (with the step and test it was on) and the others go on.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# The grader's SciCode runner and its modules, shipped beside this file.
import scicode_runner  # noqa: E402,F401  (run below by its path; loads the modules it imports)
from scicode_codec import decode  # noqa: E402
from scicode_compare import (cmp_tuple_or_list, install_scicode_shim,  # noqa: E402
                             trusted_namespace)
from scicode_derive import derive_case  # noqa: E402
from scicode_perturb import perturbed_case, step_functions  # noqa: E402
from scicode_plan import PlanError, plan  # noqa: E402

RUNNER = os.path.join(HERE, "scicode_runner.py")
# Our code as loaded from this folder: this file, the runner and every module it imports (the
# gold code is never among them: it runs from its text). Its frames are left out of a cause;
# the runner's worker, the agent's uid, must be able to read it.
OURS = sorted({os.path.abspath(m.__file__) for m in list(sys.modules.values())
               if getattr(m, "__file__", None)
               and os.path.dirname(os.path.abspath(m.__file__)) == HERE})


def _error(problem_id, step_id, test, stage, cause, limit=None):
    return {"problem_id": problem_id, "step_id": step_id, "test": test, "stage": stage,
            "cause": cause, "limit": limit}


def _cause(exc):
    """The exception and the frames of the test and gold code (not ours)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if os.path.abspath(f.filename) not in OURS and "/usr/lib/python3" not in f.filename]
    head = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    if not frames:
        return head
    return head + "\n" + "".join(traceback.format_list(frames[-3:])).rstrip()


def disagreement(published, derived):
    """None when a published target and a derived one are the same value (numbers and arrays
    by `numpy.allclose` with `equal_nan`, sparse matrices as dense arrays, text exactly), else
    where and how they differ."""
    import numpy as np
    try:
        a, b = decode(published), decode(derived)
    except Exception as exc:  # noqa: BLE001
        return "a value does not decode: %s" % exc
    return _differ(a, b, "target", np)


def _differ(a, b, where, np):
    if hasattr(a, "toarray"):
        a = a.toarray()
    if hasattr(b, "toarray"):
        b = b.toarray()
    if isinstance(a, dict) and isinstance(b, dict):
        ka = {_key(k): v for k, v in a.items()}
        kb = {_key(k): v for k, v in b.items()}
        if set(ka) != set(kb):
            return "%s: keys %s vs %s" % (where, sorted(map(repr, ka)), sorted(map(repr, kb)))
        for k in ka:
            why = _differ(ka[k], kb[k], "%s[%r]" % (where, k), np)
            if why:
                return why
        return None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and not (
            _numeric(a, np) and _numeric(b, np)):
        if len(a) != len(b):
            return "%s: %d vs %d values" % (where, len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b)):
            why = _differ(x, y, "%s[%d]" % (where, i), np)
            if why:
                return why
        return None
    if isinstance(a, str) or isinstance(b, str):
        return None if a == b else "%s: %r vs %r" % (where, a, b)
    try:
        x, y = np.asarray(a), np.asarray(b)
        if x.dtype.kind in "OUS" or y.dtype.kind in "OUS":
            return None if x.tolist() == y.tolist() else "%s: %r vs %r" % (where, a, b)
        if x.shape != y.shape:
            return "%s: shape %s vs %s" % (where, x.shape, y.shape)
        if np.allclose(x, y, equal_nan=True):
            return None
        return "%s: differs by up to %.3g" % (where, float(np.max(np.abs(x - y))))
    except (TypeError, ValueError) as exc:
        return "%s: %r vs %r (%s)" % (where, a, b, exc)


def _numeric(v, np):
    try:
        return np.asarray(v).dtype.kind in "biufc"
    except (TypeError, ValueError):
        return False


def _key(k):
    """Dict keys as upstream reads a targets file: a key that parses as a float is that float."""
    if isinstance(k, bool):
        return k
    if isinstance(k, (int, float)):
        return float(k)
    if isinstance(k, str):
        try:
            return float(k)
        except ValueError:
            return k
    return k


def _derive_problem(problem, progress, perturbed=False):
    """In a child: the problem's cases, or raises after reporting where it was. With
    `perturbed`, each case comparing against `target` also gets a perturbed copy
    (`perturbed_case`), appended after the step's own cases.

    Upstream's semantics: a step's cases run in order in one namespace holding the gold code of
    that step and of the steps before it. A step with `targets` (from a targets file) takes
    them; with gold code too, each derived target is compared with the published one and a
    difference is reported (`disagreements`), the published one kept. A step without gold code
    takes the published targets after checking that every case can be graded."""
    install_scicode_shim()
    deps = problem["required_dependencies"]
    tns = trusted_namespace(deps)
    gold_ns = {"__name__": "__main__", "cmp_tuple_or_list": cmp_tuple_or_list}
    exec(compile(deps, "<required_dependencies>", "exec"), gold_ns)
    steps, errors, disagreements, copies = [], [], [], 0
    pid = problem["problem_id"]
    for step in problem["steps"]:
        progress(step["step_id"], None)
        gold = step.get("gold_code")
        published = step.get("targets")
        if gold is not None:
            try:
                exec(compile(gold, "<gold %s>" % step["step_id"], "exec"), gold_ns)
            except MemoryError:
                raise
            except Exception as exc:
                errors.append(_error(pid, step["step_id"], None, "gold code",
                                     "loading the step's gold code raised " + _cause(exc)))
                continue
        elif published is None:
            errors.append(_error(pid, step["step_id"], None, "derive",
                                 "the step has no gold code and no published targets: pass a "
                                 "targets file (--targets test_data.h5)"))
            continue
        step_ns = dict(gold_ns)
        cases = []
        for index, snippet in enumerate(step["tests"]):
            progress(step["step_id"], index + 1)
            mine = published[index] if published is not None and index < len(published) else None
            try:
                if gold is None:
                    p = plan(snippet, tns)
                    target, records = (mine if p["sites"] else None), None
                else:
                    target, records = derive_case(snippet, step_ns, tns)
            except MemoryError:
                raise
            except PlanError as exc:
                errors.append(_error(pid, step["step_id"], index + 1,
                                     "derive", "unsupported test: %s" % exc))
                continue
            except SyntaxError as exc:
                errors.append(_error(pid, step["step_id"], index + 1,
                                     "derive", "the test does not parse: %s (line %s)"
                                     % (exc.msg, exc.lineno)))
                continue
            except AssertionError as exc:
                errors.append(_error(pid, step["step_id"], index + 1,
                                     "derive", "the gold code fails the test's own assertion: "
                                     + _cause(exc)))
                continue
            except Exception as exc:
                errors.append(_error(pid, step["step_id"], index + 1, "derive",
                                     "running the test with the gold code raised " + _cause(exc)))
                continue
            if gold is not None and published is not None and target is not None:
                why = ("the targets file has no value for this test" if mine is None
                       else disagreement(mine, target))
                if why:
                    disagreements.append({"problem_id": pid, "step_id": step["step_id"],
                                          "test": index + 1, "why": why})
                if mine is not None:
                    target = mine
            if gold is None and target is None and plan(snippet, tns)["sites"]:
                errors.append(_error(pid, step["step_id"], index + 1, "derive",
                                     "the targets file has no value for this test"))
                continue
            case = {"test": snippet, "target": target}
            if records:
                case["records"] = records
            cases.append(case)
        if perturbed and gold is not None:
            originals = list(cases)
            for index, case in enumerate(originals):
                if case["target"] is None:
                    continue
                seed = zlib.crc32(("%s/%s/%d" % (pid, step["step_id"], index)).encode())
                try:
                    copy, _reason = perturbed_case(
                        case["test"], step_ns, tns, seed, step_functions(gold))
                    if copy is not None:
                        # Graded after the step's own cases, in the same namespace.
                        import numpy
                        numpy.random.seed(0)
                        derive_case(copy["test"], step_ns, tns)
                except MemoryError:
                    raise
                except Exception:  # noqa: BLE001 (a copy that cannot be made is left out)
                    copy = None
                if copy is not None:
                    copy["perturbed"]["of"] = index + 1
                    cases.append(copy)
                    copies += 1
        steps.append({"step_id": step["step_id"], "function_header": step["function_header"],
                      "test_cases": cases})
    out = {"problem_id": pid, "required_dependencies": deps, "steps": steps}
    if perturbed:
        out["perturbed_cases"] = copies
    return out, errors, disagreements


def _run_child(problem, timeout, perturbed=False):
    """Forks; returns (cases or None, errors, (step, test) reached, how it ended)."""
    rfd, wfd = os.pipe()
    result = tempfile.NamedTemporaryFile(suffix=".json", delete=False)
    result.close()
    pid = os.fork()
    if pid == 0:
        os.close(rfd)
        w = os.fdopen(wfd, "w", buffering=1)

        def progress(step, test):
            w.write(json.dumps([step, test]) + "\n")
        try:
            cases, errors, disagreements = _derive_problem(problem, progress, perturbed)
            payload = {"cases": cases, "errors": errors, "disagreements": disagreements}
        except MemoryError:
            payload = {"memory_error": True}
        except BaseException:
            payload = {"crash": traceback.format_exc()}
        try:
            with open(result.name, "w") as f:
                json.dump(payload, f, allow_nan=False)
        except BaseException:
            os._exit(3)
        os._exit(0)
    os.close(wfd)
    reached = [None, None]
    deadline = time.monotonic() + timeout
    timed_out = False
    buf = b""
    import select
    with os.fdopen(rfd, "rb") as r:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([r], [], [], left)
            if not ready:
                timed_out = True
                break
            data = os.read(r.fileno(), 65536)
            if not data:
                break
            buf += data
            *lines, buf = buf.split(b"\n")
            for line in lines:
                try:
                    reached = json.loads(line)
                except ValueError:
                    pass
    if timed_out:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _, status = os.waitpid(pid, 0)
    try:
        with open(result.name) as f:
            payload = json.load(f)
    except (OSError, ValueError):
        payload = None
    os.unlink(result.name)
    if timed_out:
        how = "timeout"
    elif payload is None and os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL:
        how = "killed"
    elif payload is None:
        how = "died (wait status %d)" % status
    else:
        how = None
    return payload, tuple(reached), how


def _verify(problem_id, cases, gold_path, timeout, memory_mb):
    """Runs the grader's own runner on the gold code: (errors, slowest case in seconds)."""
    work = tempfile.mkdtemp(prefix="verify-")
    os.chmod(work, 0o700)
    cases_path = os.path.join(work, "cases.json")
    with open(cases_path, "w") as f:
        json.dump(cases, f)
    result = os.path.join(work, "result.json")
    try:
        proc = subprocess.run([sys.executable, "-I", RUNNER, cases_path, gold_path, result,
                               str(max(1, int(timeout)))],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              timeout=timeout + 30)
        err = proc.stderr[-2000:].decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        return [_error(problem_id, None, None, "verify", "checking the gold code took longer "
                       "than %ss" % timeout, "time")], None
    try:
        with open(result) as f:
            report = json.load(f)
    except (OSError, ValueError):
        return [_error(problem_id, None, None, "verify",
                       "the grader's runner wrote no result: %s" % err)], None
    errors = []
    slowest = max((c.get("duration_secs") or 0.0 for s in report["steps"] for c in s["cases"]),
                  default=0.0)
    for step in report["steps"]:
        if step["status"] == "pass":
            continue
        bad = [c for c in step["cases"] if c["status"] != "pass"]
        if not bad:
            errors.append(_error(problem_id, step["step_id"], None, "verify",
                                 "gold code: %s: %s" % (step["status"], step["message"]),
                                 _limit_of(step["status"], step["message"])))
        for c in bad:
            errors.append(_error(problem_id, step["step_id"], c["case"], "verify",
                                 "the gold code does not pass its own derived case (%s): %s"
                                 % (c["status"], c["message"]),
                                 _limit_of(c["status"], c["message"])))
    return errors, slowest


def _limit_of(status, message):
    if status == "timeout":
        return "time"
    if message and ("MemoryError" in message or "out of memory" in message):
        return "memory"
    return None


def derive(problems_path, out_path, timeout, memory_mb, verify, perturbed=False):
    with open(problems_path) as f:
        problems = json.load(f)["problems"]
    os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
    os.chmod(HERE, 0o755)
    for path in OURS:
        os.chmod(path, 0o644)
    results, errors, timings, disagreements = {}, [], {}, []

    def save():
        tmp = out_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"problems": results, "errors": errors, "slowest_case_secs": timings,
                       "disagreements": disagreements}, f, allow_nan=False)
        os.replace(tmp, out_path)

    for index, problem in enumerate(problems):
        pid = problem["problem_id"]
        payload, (step, test), how = _run_child(problem, timeout, perturbed)
        if how is not None:
            if how == "timeout":
                cause, limit = "did not finish within %ss" % timeout, "time"
            elif how == "killed":
                cause, limit = ("killed by the kernel: out of memory (the sandbox allows %s MB)"
                                % memory_mb), "memory"
            else:
                cause, limit = "the derivation process %s" % how, None
            errors.append(_error(pid, step, test, "derive", cause, limit))
        elif "memory_error" in payload:
            errors.append(_error(pid, step, test, "derive",
                                 "MemoryError: out of memory (the sandbox allows %s MB)" % memory_mb,
                                 "memory"))
        elif "crash" in payload:
            errors.append(_error(pid, step, test, "derive", payload["crash"][-2000:]))
        elif payload["errors"]:
            errors.extend(payload["errors"])
            disagreements.extend(payload.get("disagreements") or [])
        else:
            cases = payload["cases"]
            disagreements.extend(payload.get("disagreements") or [])
            gold_path = os.path.join(HERE, "gold_%d.py" % index)
            if verify and os.path.exists(gold_path):
                os.chmod(gold_path, 0o644)
                bad, slowest = _verify(pid, cases, gold_path, timeout, memory_mb)
                if bad:
                    errors.extend(bad)
                    save()
                    continue
                timings[pid] = slowest
            results[pid] = cases
        save()
    save()


def check(cases_path, solution_path):
    """The grader's verdict on a solution, in the importer's report format. As in a grading
    container, the held-out cases are root-only and the solution is readable by the agent's
    uid, which the runner's worker runs as."""
    os.chmod(cases_path, 0o600)
    with tempfile.TemporaryDirectory() as hidden, tempfile.TemporaryDirectory() as ws:
        os.chmod(hidden, 0o700)
        os.chmod(ws, 0o755)
        copy = os.path.join(hidden, "cases.json")
        with open(cases_path) as src, open(copy, "w") as dst:
            dst.write(src.read())
        solution = os.path.join(ws, "solution.py")
        with open(solution_path) as src, open(solution, "w") as dst:
            dst.write(src.read())
        os.chmod(solution, 0o644)
        os.chmod(HERE, 0o755)
        for path in OURS:
            os.chmod(path, 0o644)
        result = os.path.join(hidden, "result.json")
        subprocess.run([sys.executable, "-I", RUNNER, copy, solution, result],
                       stdout=subprocess.DEVNULL)
        with open(result) as f:
            report = json.load(f)
    steps = []
    for s in report["steps"]:
        passed = sum(1 for c in s["cases"] if c["status"] == "pass")
        errors = ["case %s: %s: %s" % (c["case"], c["status"], c["message"])
                  for c in s["cases"] if c["status"] != "pass"]
        if s.get("message"):
            errors.append(s["message"])
        steps.append({"step_id": s["step_id"], "passed": passed, "total": len(s["cases"]),
                      "errors": errors})
    ok = all(s["status"] == "pass" for s in report["steps"]) and bool(report["steps"])
    print(json.dumps({"steps": steps, "passed": ok}))


if __name__ == "__main__":
    if len(sys.argv) >= 6 and sys.argv[1] == "derive":
        derive(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], "--verify" in sys.argv[6:],
               "--perturbed-inputs" in sys.argv[6:])
    elif len(sys.argv) == 4 and sys.argv[1] == "check":
        check(sys.argv[2], sys.argv[3])
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)
