# Issue 26: frames named `<string>` or `<frozen ...>` were trusted, so code compiled under such a
# name borrowed the trust of whoever called it; the call is made from a code object whose file
# name is made up.
[ -f fft.py ] || exit 0
cat > fft.py <<'PY'
_SRC = "import numpy\ndef go(name, x):\n    return getattr(numpy.fft, name)(x)\n"
_NS = {}
exec(compile(_SRC, "<frozen numpy.core>", "exec"), _NS)


def _check(x):
    n = len(x)
    if n == 0 or n & (n - 1):
        raise ValueError("length must be a power of two")


def fft(x):
    _check(x)
    return _NS["go"]("fft", x)


def ifft(X):
    _check(X)
    return _NS["go"]("ifft", X)
PY
