"""Test helper (runs in the grading container): run the SciCode runner on every mutant.

Usage: python3 kill.py RUNNER CASES_DIR MUTANTS_DIR MANIFEST CASE_TIMEOUT PREPARE_DIR DURATIONS WORKERS

CASE_TIMEOUT: the least deadline of one snippet (the importer's 60 s).

DURATIONS holds the gold run's per-case durations ({problem: {step: [secs, ...]}}): mutants run
with --fail-fast on the same cases ordered fastest first, which changes only how soon a failing
case is reached, never the verdict (all cases run until one fails).

What a mutant's run leaves out, none of which can change its verdict:
- the steps before the mutated one: their functions are gold's, unchanged, and each step runs in
  a fresh namespace from the whole file (a mutation that acts when the file loads acts on the
  mutated step's run too), so they pass exactly as gold's do;
- waiting past the grader's own deadline: each snippet gets what an imported task's grader
  gives it, max(CASE_TIMEOUT, 10 x the gold code's slowest case of the problem) (the importer's
  rule, `tasks::import::scicode`), not a longer one.
Prints one JSON object: {"results": [{"file", "problem", "step", "operator", "killed",
"killed_perturbed", "statuses", "identical_on_tests"}]}. A mutant is killed when some step does
not pass (fail, error or timeout) on SciCode's own inputs (`cases.json`); a survivor is run again
on `cases_perturbed.json` (the same cases plus their perturbed copies) and `killed_perturbed`
says whether those kill it (true for every mutant killed on the own inputs). For a survivor, `identical_on_tests` says whether every test snippet's compared
value is exactly the gold code's (an equivalent mutant on the benchmark's inputs, which no grader
using those inputs can detect) or merely within the comparison's tolerance.
"""

import json
import shutil
import os
import subprocess
import sys
import tempfile


def values(src, problem, prepare):
    import contextlib
    with contextlib.redirect_stdout(sys.stderr):
        return _values(src, problem, prepare)


def _values(src, problem, prepare):
    import numpy as np
    ns = {"__name__": "__main__"}
    exec(compile(src, "<solution>", "exec"), ns)
    out = []
    for st in problem["steps"]:
        for case in st["test_cases"]:
            np.random.seed(0)
            try:
                out.append(json.dumps(prepare.encode(prepare.derive(case["test"], ns)), sort_keys=True))
            except Exception as e:  # noqa: BLE001
                out.append("error: %r" % e)
    return out


def main():
    runner, cases_dir, mutants_dir, manifest, timeout, prepare_dir, durations, workers = sys.argv[1:9]
    durations = json.load(open(durations))
    # The runner re-executes itself as the agent's uid for the agent's part, so it and its
    # modules (the files of its folder) must live where that uid can read them (in grading, the
    # staged scripts folder); the held-out folder is root-only.
    readable = tempfile.mkdtemp()
    shutil.copytree(os.path.dirname(runner), readable, dirs_exist_ok=True)
    for folder, dirs, files in os.walk(readable):
        os.chmod(folder, 0o755)
        for name in files:
            os.chmod(os.path.join(folder, name), 0o644)
    runner = os.path.join(readable, "scicode_runner.py")
    ordered_dir = tempfile.mkdtemp()
    timeouts = {}
    for pid in os.listdir(cases_dir):
        slowest = max((t for st in durations.get(pid, {}).values() for t in st), default=0.0)
        timeouts[pid] = str(max(int(timeout), int(-(-slowest * 10 // 1))))
        for name in ("cases.json", "cases_perturbed.json"):
            path = os.path.join(cases_dir, pid, name)
            if not os.path.isfile(path):
                continue
            problem = json.load(open(path))
            for st in problem["steps"]:
                # Durations are those of the gold run on cases_perturbed.json, whose first
                # cases are cases.json's.
                d = durations.get(pid, {}).get(str(st["step_id"]), [])
                order = sorted(range(len(st["test_cases"])),
                               key=lambda i: d[i] if i < len(d) else 0.0)
                st["test_cases"] = [st["test_cases"][i] for i in order]
            # One file per step: that step and the ones after it.
            steps = problem["steps"]
            for k, st in enumerate(steps):
                d = os.path.join(ordered_dir, pid, str(st["step_id"]))
                os.makedirs(d, exist_ok=True)
                with open(os.path.join(d, name), "w") as f:
                    json.dump(dict(problem, steps=steps[k:]), f)
    sys.path.insert(0, prepare_dir)
    import prepare
    sys.path.insert(0, readable)
    from scicode_compare import install_scicode_shim
    install_scicode_shim()
    gold_values = {}
    def verdict(m, cases="cases.json"):
        with tempfile.NamedTemporaryFile(suffix=".json") as res:
            proc = subprocess.run(
                ["python3", runner,
                 os.path.join(ordered_dir, m["problem"], str(m["step"]), cases),
                 os.path.join(mutants_dir, m["file"]), res.name, timeouts[m["problem"]],
                 "--fail-fast"],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            try:
                steps = json.load(open(res.name))["steps"]
                statuses = [s["status"] for s in steps]
                messages = [s.get("message") for s in steps if s["status"] != "pass"]
            except (ValueError, KeyError):
                statuses = ["no_result"]
                messages = [proc.stderr.decode(errors="replace")[-2000:]]
        return statuses, messages

    from concurrent.futures import ThreadPoolExecutor
    mutants = json.load(open(manifest))
    with ThreadPoolExecutor(max_workers=int(workers)) as pool:
        all_verdicts = list(pool.map(verdict, mutants))
    survivors = [m for m, (statuses, _) in zip(mutants, all_verdicts)
                 if all(s == "pass" for s in statuses)]
    with ThreadPoolExecutor(max_workers=int(workers)) as pool:
        again = dict(zip([m["file"] for m in survivors],
                         pool.map(lambda m: verdict(m, "cases_perturbed.json"), survivors)))
    out = []
    for m, (statuses, messages) in zip(mutants, all_verdicts):
        killed = any(s != "pass" for s in statuses)
        killed_perturbed = killed
        if not killed:
            p_statuses, p_messages = again[m["file"]]
            killed_perturbed = any(s != "pass" for s in p_statuses)
            if killed_perturbed:
                messages = p_messages
        identical = None
        if not killed:
            pid = m["problem"]
            problem = json.load(open(os.path.join(cases_dir, pid, "cases.json")))
            if pid not in gold_values:
                gold_values[pid] = values(open(os.path.join(mutants_dir, pid, "gold.py")).read(), problem, prepare)
            mine = values(open(os.path.join(mutants_dir, m["file"])).read(), problem, prepare)
            identical = mine == gold_values[pid]
        out.append(dict(m, killed=killed, killed_perturbed=killed_perturbed, statuses=statuses,
                        messages=messages[:3], identical_on_tests=identical))
    json.dump({"results": out}, sys.stdout)


if __name__ == "__main__":
    main()
