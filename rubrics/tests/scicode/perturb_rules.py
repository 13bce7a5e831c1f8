"""Test helper (runs in the grading container): the safety rules of
`scicode_perturb.perturb_value` and `perturbed_case`. Prints "ok" or fails an assertion."""

import sys

import numpy as np

sys.path.insert(0, sys.argv[1])
import scicode_perturb as r  # noqa: E402
from scicode_compare import install_scicode_shim, trusted_namespace  # noqa: E402

install_scicode_shim()
rng = np.random.default_rng(7)

# What never moves: ints, bools, int arrays, strings, zero scalars, grids, masks, all zeros.
for v in (3, True, np.int64(4), np.arange(5), "x", 0.0, np.linspace(0, 1, 9),
          np.array([1.0, -1.0, 0.0, 1.0]), np.zeros(4), [1, 2, 3], np.array([np.nan, 1.0])):
    assert r.perturb_value(v, rng) is None, v

# Floats move a little; type, shape, dtype and containers are kept.
x = r.perturb_value(2.5, rng)
assert isinstance(x, float) and x != 2.5 and abs(x - 2.5) <= 0.03, x
a = np.array([[0.3, 1.2], [0.7, 0.1], [2.0, 0.5]], dtype=np.float32)
b = r.perturb_value(a, rng)
assert b.shape == a.shape and b.dtype == a.dtype and not np.array_equal(a, b)
nested = r.perturb_value(([0.5, 1.5], [2.5, 3.5]), rng)
assert isinstance(nested, tuple) and isinstance(nested[0], list) and isinstance(nested[0][0], float)

# Real values held as complex stay real; a Hermitian matrix stays Hermitian (and may turn complex).
c = r.perturb_value(complex(0.5, 0.0), rng)
assert isinstance(c, complex) and c.imag == 0 and c != 0.5
h = np.array([[1.0, 0.2], [0.2, 3.0]], dtype=complex)
hp = r.perturb_value(h, rng)
assert np.array_equal(hp, hp.conj().T) and np.any(hp.imag != 0)
zr = r.perturb_value(np.array([0.5, 1.5, 0.2], dtype=complex), rng)
assert np.all(zr.imag == 0)

# Symmetric positive definite stays so; a non-negative vector stays non-negative; unit vectors
# and probability vectors keep their norm.
spd = np.array([[4.0, 1.0, 0.0], [1.0, 3.0, 1.0], [0.0, 1.0, 2.0]])
for _ in range(20):
    s = r.perturb_value(spd, rng)
    assert s is None or (np.array_equal(s, s.T) and np.linalg.eigvalsh(s).min() > 0)
ghz = np.zeros(16)
ghz[0] = ghz[15] = 1 / np.sqrt(2)
g = r.perturb_value(ghz, rng)
assert abs(np.linalg.norm(g) - 1) < 1e-12 and np.count_nonzero(g) > 2 and np.all(g >= 0)
prob = r.perturb_value(np.array([0.5, 0.2, 0.3]), rng)
assert abs(prob.sum() - 1) < 1e-12 and np.all(prob >= 0)

# A whole case: the step's own outputs never move, its inputs do, the copy is seeded.
gold = "import numpy as np\ndef f(v, n):\n    return np.sum(v) * n\n"
ns = {"__name__": "__main__"}
exec(gold, ns)
tns = trusted_namespace("import numpy as np")
snippet = ("v = np.array([0.5, 0.25, 2.0])\nn = 3\nout = f(v, n)\n"
           "assert np.allclose(out, target)\n")
case, why = r.perturbed_case(snippet, ns, tns, 42, r.step_functions(gold))
assert case is not None, why
assert case["perturbed"]["inputs"] == ["v"], case
again, _ = r.perturbed_case(snippet, ns, tns, 42, r.step_functions(gold))
assert again == case, "seeded: the same copy every time"
assert case["test"].index("v = __import__") < case["test"].index("out = f(v, n)")
assert r.perturbed_case("assert f(np.array([1.0]), 2) == target\n", ns, tns, 1,
                        {"f"})[0] is None
# A target that changes entirely 1e-9 away is ill-conditioned: no copy.
ns["g"] = lambda v: float(np.sin(v[0] * 1e12))
case, why = r.perturbed_case("v = np.array([0.5, 0.25])\nassert np.allclose(g(v), target)\n",
                             ns, tns, 3, {"g"})
assert case is None and "ill-conditioned" in why, (case, why)
print("ok")
