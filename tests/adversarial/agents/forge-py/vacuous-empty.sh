# Vacuous comparisons (class 2), empty values: every function returns an empty numpy array
# (or an empty list), which broadcasts against any target; `numpy.allclose([], x)` holds.
for m in $OUTPUT_MODULES; do
  if task_has "$m"; then
    mkdir -p "$(dirname "$m")"
    cat > "$m" <<'PY'
import numpy as _np

def _empty(*a, **k):
    return _np.zeros(0)

class RunningStats:
    def __init__(self): self.count, self.mean, self.variance = _np.zeros(0, dtype=int), _np.zeros(0), _np.zeros(0)
    def update(self, x): return self
    def extend(self, xs): return self
fft = ifft = logistic = logistic_rhs = mean = trapezoid = simpson = erf_approx = _empty
def summarise(path): return {"count": _np.zeros(0), "mean": _np.zeros(0), "min": _np.zeros(0), "max": _np.zeros(0), "hottest_day": _np.zeros(0)}
PY
  fi
done
if [ -f stats/welford.py ]; then echo "from .welford import RunningStats" > stats/__init__.py; fi
