"""Comparisons that an empty or broadcast value cannot pass vacuously (research-bench rubrics).

Used where a verdict is decided on values that came from the agent's code: the bridge's trusted
test process and the SciCode runner's trusted side. `install()` makes numpy's closeness checks
(`allclose`, `isclose`, `array_equiv`, `numpy.testing.assert_*`) refuse an empty value compared
with a non-empty one and two arrays of different shapes compared by broadcasting (an array
against a scalar is still fine); numpy is patched when it loads, so nothing here imports it.
`install_approx()` does the same for `pytest.approx` of a scalar.
"""

import sys


def vacuous(a, b):
    """Why comparing `a` with `b` would hold vacuously, or None."""
    import math
    np = sys.modules.get("numpy")
    if np is None:
        # No array exists yet (the worker's arrays arrive as numpy's): nothing broadcasts.
        return None
    try:
        sa, sb = np.shape(a), np.shape(b)
    except Exception:  # noqa: BLE001 (ragged: the comparison itself decides)
        return None
    if sa == sb:
        return None
    if math.prod(sa) == 0 or math.prod(sb) == 0:
        return "an empty value (shape %s) compared with shape %s" % (
            (sa, sb) if math.prod(sa) == 0 else (sb, sa))
    if sa == () or sb == ():
        return None
    return "values of shapes %s and %s compared by broadcasting" % (sa, sb)


class _AfterImport:
    """Calls `then(module)` once each named module has loaded (numpy costs its import only
    when the tests use it)."""

    def __init__(self, hooks):
        self.hooks = dict(hooks)

    def find_spec(self, fullname, path=None, target=None):
        then = self.hooks.pop(fullname, None)
        if then is None:
            return None
        import importlib.machinery
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        real = spec.loader.exec_module

        def exec_module(module):
            real(module)
            then(module)
        spec.loader.exec_module = exec_module
        return spec


def install():
    hooks = {"numpy": _strict_numpy, "numpy.testing": _strict_numpy_testing}
    for name in list(hooks):
        if name in sys.modules:
            hooks.pop(name)(sys.modules[name])
    sys.meta_path.insert(0, _AfterImport(hooks))


def _wrap(real, f):
    f.__name__, f.__doc__, f.__wrapped__ = real.__name__, real.__doc__, real
    return f


def _strict_numpy(np):
    def boolean(real):
        def f(a, b, *args, **kwargs):
            if vacuous(a, b):
                return False
            return real(a, b, *args, **kwargs)
        return _wrap(real, f)

    def isclose(real):
        def f(a, b, *args, **kwargs):
            if vacuous(a, b):
                return np.False_
            return real(a, b, *args, **kwargs)
        return _wrap(real, f)

    np.allclose = boolean(np.allclose)
    np.array_equiv = boolean(np.array_equiv)
    np.isclose = isclose(np.isclose)


def _strict_numpy_testing(npt):
    def asserting(real):
        def f(actual, desired, *args, **kwargs):
            why = vacuous(actual, desired)
            if why:
                raise AssertionError("not comparable: %s" % why)
            return real(actual, desired, *args, **kwargs)
        return _wrap(real, f)

    for name in ("assert_allclose", "assert_array_almost_equal", "assert_almost_equal",
                 "assert_array_equal", "assert_equal", "assert_array_less",
                 "assert_array_almost_equal_nulp", "assert_array_max_ulp"):
        real = getattr(npt, name, None)
        if real is not None:
            setattr(npt, name, asserting(real))


def install_approx():
    try:
        from _pytest import python_api
    except ImportError:
        return
    scalar = python_api.ApproxScalar
    real_eq = scalar.__eq__

    def __eq__(self, actual):
        if vacuous(actual, self.expected):
            return False
        return real_eq(self, actual)
    scalar.__eq__ = __eq__
