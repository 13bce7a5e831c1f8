"""SciCode step runner (research-bench rubrics): a verdict the graded code cannot forge.

Usage: python3 -I scicode_runner.py CASES_JSON AGENT_FILE RESULT_JSON [SNIPPET_TIMEOUT_SECS] [--fail-fast]

--fail-fast (for mutation testing): stop at the first case that does not pass; later cases
and steps are reported as `not_run`.

Trust boundary. This process (the *trusted side*: started isolated, `python3 -I`, so nothing of
the agent's is on its import path) reads the held-out cases and never loads the agent's code.
Each test snippet is split (`scicode_plan.plan`) into
  - the *agent part*: the snippet itself, with every assertion against `target` replaced by a
    call that records the values the comparison needs (the agent's results, never `target`);
  - the *checks*: those comparisons, evaluated here with our own numpy on the recorded values.
The agent part runs in a worker process (`--worker`; as uid 1000 when we are root, with the
environment we were given, e.g. the forbidden-API hook) that loads the problem's dependencies
and the agent's file. Values cross back as tagged JSON (`scicode_codec`: numbers, strings,
arrays of numeric dtypes, sparse matrices; never pickle), read here with size caps. `target`
never enters the worker.

Upstream's semantics: a step's cases run in order in ONE namespace (deps, the agent's file, then
each case), so a case may use names an earlier case defined; canaries use names of their own.
`a, b = target` (or `x = target`) is rewritten to `target[0]`, `target[1]` (`x` -> `target`).
A function the snippet defines may be called on `target` when it is pure test code
(`scicode_plan._pure_helpers`): it is then defined and called here, on recorded data only.

Snippets that check themselves (assertions not against `target`, which must run with the
agent's code) are judged by the worker's report; each step therefore also runs canaries: cases
with a per-run nonce that must fail and one that must pass, placed at random among the real
ones. A must-fail canary reported as passed marks the step `tampering_detected`.

RESULT_JSON: {"problem_id", "steps": [{"step_id", "status": pass|fail|error|timeout|not_run,
  "cases": [{"case", "status", "message", "duration_secs", "perturbed_of"?,
  "in_agent_process"?}], "message"}],
  (`perturbed_of`: the case a perturbed copy was made from, see
  `scicode_perturb.perturbed_case`; `in_agent_process`: how many of the case's checks the
  worker judged, see `scicode_plan._self_checks`)
  "tampering_detected": bool}
A step whose canaries caught tampering has status `fail` and a message starting with
`tampering_detected`.

One file per job, all shipped together (`rubrics::grade::SCICODE_FILES`) into one folder:
this entry (the trusted side's run: plan, start the worker, judge), `scicode_codec` (values and
messages across the process boundary), `scicode_compare` (`scicode.compare` and the trusted
namespace), `scicode_plan` (the split), `scicode_judge` (the trusted verdict), `scicode_worker`
(the agent side), `scicode_derive` and `scicode_perturb` (the importer's `scicode_targets.py`:
targets derived with the same split, perturbed copies), and `rb_strict` (numpy's strict
closeness). They import each other by name from this folder, which this entry puts on the import
path (`-I` leaves the script's folder off it) after the standard library and the installed
packages, as the harness's other scripts do: the workspace is never on the trusted side's path.
"""

import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.append(HERE)

from scicode_codec import MAX_MSG, short  # noqa: E402  (from HERE, above)
from scicode_compare import trusted_namespace  # noqa: E402
from scicode_judge import canary_cases, judge_step  # noqa: E402
from scicode_plan import PlanError, plan  # noqa: E402
from scicode_worker import worker  # noqa: E402

MAX_RESULT_BYTES = 512 * 1024 * 1024
AGENT_UID = 1000


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
        tns, tns_error = {}, short(traceback.format_exc())
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
        for src, must_pass in ([] if fail_fast else canary_cases(rng, tns)):
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
            out = judge_step(sid, status, reports, message, meta, canaries, tns, fail_fast)
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
                out.append(("error", {}, short("the step's process died without reporting; "
                                                "stderr tail:\n" + err_tail)))
            continue
        reports = {}
        for r in res.get("cases") or []:
            if isinstance(r, dict) and isinstance(r.get("token"), str):
                reports.setdefault(r["token"], r)
        out.append((str(res.get("status")), reports, res.get("message")))
    return out


if __name__ == "__main__":
    main()
