"""How a Python process of ours that loads the agent's code is readied (research-bench
rubrics): `setup_agent_process`, called first by the bridge's worker (`bridge_worker.py`).

The process runs `python3 -I -B`: `-I` ignores PYTHON* variables and the user site and puts
neither the working directory nor the script's folder on sys.path. The path becomes: the
forbidden modules' shadow folder, standard library, installed packages, this harness folder,
then the agent's workspace LAST, so an agent file named like a standard or installed module
(json.py, numpy.py, pytest.py, _pytest/, sitecustomize.py, a .pth file) is never imported in
its place. The forbidden-API guard is installed before any agent code runs.
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def setup_agent_process(ws):
    """Readies this interpreter to run the agent's code: the import path (standard library,
    installed packages, this harness, then the workspace last; first of all the shadow folder
    of the task's forbidden modules) and the forbidden-API guard, in place before any agent
    code runs. Every Python process of ours that loads agent code
    calls this first (this launcher, the bridge's worker)."""
    real_ws = os.path.realpath(ws) if ws else None
    sys.path[:] = [p for p in sys.path
                   if p and not (real_ws and os.path.realpath(p).startswith(real_ws))]
    # The task's forbidden modules: their real files are unreadable to this uid; the shadow
    # folder (root-owned, see forbid_setup.py) holds stand-ins that raise and report, and the
    # allowed parent packages (numpy without numpy.fft), so it comes first.
    shadow = os.environ.get("RB_SHADOW")
    if shadow and os.path.isdir(shadow):
        sys.path.insert(0, shadow)
    if HERE not in sys.path:
        sys.path.append(HERE)
    if os.environ.get("RB_FORBIDDEN"):
        import rb_guard  # noqa: F401  (stubs in place before the agent's code runs)
    if ws:
        sys.path.append(ws)

