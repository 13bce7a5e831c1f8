"""SciCode runner (research-bench rubrics): the comparison helpers SciCode's snippets import from
`scicode.compare.cmp` (our own code, `install_scicode_shim`), and the trusted side's namespace
(`trusted_namespace`: the problem's dependencies, these helpers, numpy's strict closeness).
"""

import os
import sys


def cmp_tuple_or_list(a, b):
    """Element-wise allclose over tuples/lists."""
    import numpy as np
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if isinstance(y, (tuple, list)) and not isinstance(x, np.ndarray):
            if not cmp_tuple_or_list(x, y):
                return False
        elif not np.allclose(x, y):
            return False
    return True


def are_dicts_close(a, b, rtol=1e-05, atol=1e-08):
    """allclose over dicts with the same keys."""
    import numpy as np
    if set(a) != set(b):
        return False
    return all(np.allclose(a[k], b[k], rtol=rtol, atol=atol) for k in b)


def are_csc_matrix_close(a, b):
    """allclose over sparse matrices (dense comparison)."""
    import numpy as np
    return np.allclose(a.toarray(), b.toarray())


HELPERS = {"cmp_tuple_or_list": cmp_tuple_or_list, "are_dicts_close": are_dicts_close,
           "are_csc_matrix_close": are_csc_matrix_close}


def _strict():
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.append(here)
    import rb_strict  # shipped beside this file (the grader's harness, the importer's staging)
    rb_strict.install()


def install_scicode_shim():
    """Snippets import `scicode.compare.cmp`; provide our implementation under that name."""
    import types
    pkg = types.ModuleType("scicode")
    pkg.__path__ = []
    sub = types.ModuleType("scicode.compare")
    sub.__path__ = []
    cmp = types.ModuleType("scicode.compare.cmp")
    for name, fn in HELPERS.items():
        setattr(cmp, name, fn)
    pkg.compare, sub.cmp = sub, cmp
    sys.modules.setdefault("scicode", pkg)
    sys.modules.setdefault("scicode.compare", sub)
    sys.modules.setdefault("scicode.compare.cmp", cmp)


def trusted_namespace(deps):
    """The problem's dependencies and our helpers, loaded on the trusted side. numpy's
    closeness checks there refuse vacuous comparisons (`rb_strict`: an empty value against a
    non-empty one, arrays of different shapes broadcast together)."""
    _strict()
    install_scicode_shim()
    ns = {"__name__": "__scicode_trusted__"}
    exec(compile(deps, "<required_dependencies>", "exec"), ns)
    ns.update(HELPERS)
    return ns
