"""SciCode runner (research-bench rubrics): the trusted verdict. A case's recorded values are
checked against `target` here (`check_case`), never in the agent's process; a step is judged
on its worker's reports (`judge_step`), its canaries (`canary_cases`: cases with a per-run nonce
that must fail and one that must pass, placed at random among the real ones) first.
"""

from scicode_codec import decode, short


def canary_cases(rng, trusted_names):
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
        return False, short("the comparison `%s` raised %s: %s" % (check, type(exc).__name__, exc))
    return ok, None if ok else "assertion failed: `%s`" % check


def judge_step(sid, status, reports, message, meta, canaries, tns, fail_fast):
    if status in ("error", "timeout") and not reports:
        return {"step_id": sid, "status": status if status in ("error", "timeout") else "error",
                "cases": [], "message": short(str(message)), "tampered": False}
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
                               "broke the test environment): %s" % short(str(r.get("message")))}
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
                            "message": short(str(r.get("message"))), "duration_secs": duration})
            if fail_fast:
                break
            continue
        verdict, msg = check_case(m, r.get("records"), tns)
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


def check_case(meta, records, tns):
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
