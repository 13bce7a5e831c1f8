#!/bin/bash
# Harbor-style verifier: writes the reward (1 or 0) to /logs/verifier/reward.txt and prints
# why it failed.
set -u
mkdir -p /logs/verifier
python3 - <<'PY'
def primes_below(n):
    sieve = [True] * n
    sieve[0:2] = [False, False]
    for i in range(2, int(n ** 0.5) + 1):
        if sieve[i]:
            sieve[i * i::i] = [False] * len(sieve[i * i::i])
    return [i for i, p in enumerate(sieve) if p]

want = primes_below(200)
try:
    with open("/workspace/primes.txt") as f:
        got = [int(line) for line in f.read().split()]
except OSError as e:
    got = None
    print("primes.txt cannot be read: %s" % e.strerror)
except ValueError as e:
    got = None
    print("primes.txt holds something other than integers: %s" % e)
if got is not None and got != want:
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    print("primes.txt holds %d numbers, %d expected" % (len(got), len(want)))
    if missing:
        print("missing primes: %s" % ", ".join(map(str, missing[:20])))
    if extra:
        print("not primes below 200: %s" % ", ".join(map(str, extra[:20])))
    if not missing and not extra:
        print("the right primes, but not once each in increasing order")
reward = 1 if got == want else 0
with open("/logs/verifier/reward.txt", "w") as f:
    f.write("%d\n" % reward)
PY
