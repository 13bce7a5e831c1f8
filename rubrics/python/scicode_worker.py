"""SciCode runner (research-bench rubrics): the worker, the agent side (`scicode_runner.py
--worker JOB OUT_DIR`; as uid 1000 when the trusted side is root). It loads the problem's
dependencies and the agent's file and runs the agent parts of a step's cases in order in ONE
namespace (upstream's semantics), one forked child per step; values cross back as tagged JSON
(`scicode_codec`). `target` never enters it.
"""

import json
import os
import signal
import time
import traceback

from scicode_codec import encode, short
from scicode_compare import cmp_tuple_or_list, install_scicode_shim

MAX_SOLUTION_BYTES = 8 * 1024 * 1024


class _Timeout(BaseException):
    pass


def _alarm(signum, frame):
    raise _Timeout()


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
        return "error", [], short("loading the solution failed:\n" + traceback.format_exc())
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
            status, msg = "fail", short(traceback.format_exc(limit=-2))
        except BaseException:
            signal.alarm(0)
            status, msg = "error", short(traceback.format_exc(limit=-3))
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
                payload = {"status": "error", "cases": [], "message": short(traceback.format_exc())}
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
