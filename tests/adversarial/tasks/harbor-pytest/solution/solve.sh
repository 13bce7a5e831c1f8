#!/bin/sh
set -eu
cat > solution.py <<'PY'
def answer():
    return sum(p for p in range(2, 100) if all(p % d for d in range(2, int(p ** 0.5) + 1)))
PY
