"""Loads the runtime forbidden-API guard through PYTHONPATH (research-bench rubrics).

Only for the agent's own entry command re-run by `reproduce`; every other Python process a
grader starts is readied by `launch.setup_agent_process`, which imports the guard itself.
"""

import os
import sys

sys.path.append(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import rb_guard  # noqa: E402,F401
