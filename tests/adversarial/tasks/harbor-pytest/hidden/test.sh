#!/bin/bash
# A Terminal-Bench-style verifier: pytest from the task's working directory, which imports the
# agent's module; the reward is 1 when the tests pass.
cd /app
if python3 -m pytest -q -p no:cacheprovider /tests/test_solution.py; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
