"""unittest runner with per-test JSON results (research-bench rubrics).

Usage (in the trusted process of the bridge): bridge_trusted.py unittest TESTS_PATH RESULT_JSON [CANARY_FILE]
TESTS_PATH is a directory (discovered with pattern test*.py) or a single file. The canary
module (tests that must fail and one that must pass) runs after the held-out tests.
Writes {"tests": [{"name", "status": pass|fail|error, "message"}], "load_error": str|null}.
"""

import importlib.util
import json
import os
import sys
import traceback
import unittest


class Result(unittest.TestResult):
    def __init__(self):
        super().__init__()
        self.rows = []

    def addSuccess(self, test):
        self.rows.append({"name": test.id(), "status": "pass", "message": None})

    def addFailure(self, test, err):
        self.rows.append({"name": test.id(), "status": "fail",
                          "message": self._exc_info_to_string(err, test)[-4000:]})

    def addError(self, test, err):
        self.rows.append({"name": test.id(), "status": "error",
                          "message": self._exc_info_to_string(err, test)[-4000:]})

    def addSkip(self, test, reason):
        self.rows.append({"name": test.id(), "status": "fail", "message": "skipped: %s" % reason})

    def addExpectedFailure(self, test, err):
        self.rows.append({"name": test.id(), "status": "pass", "message": "expected failure"})

    def addUnexpectedSuccess(self, test):
        self.rows.append({"name": test.id(), "status": "fail", "message": "unexpected success"})

    def addSubTest(self, test, subtest, err):
        if err is not None:
            status = "fail" if issubclass(err[0], test.failureException) else "error"
            self.rows.append({"name": subtest.id(), "status": status,
                              "message": self._exc_info_to_string(err, test)[-4000:]})


def load_file(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return unittest.defaultTestLoader.loadTestsFromModule(mod)


def main():
    path, out = sys.argv[1], sys.argv[2]
    canary = sys.argv[3] if len(sys.argv) > 3 else None
    load_error = None
    try:
        if os.path.isdir(path):
            sys.path.insert(0, path)
            suite = unittest.defaultTestLoader.discover(path, pattern="test*.py", top_level_dir=path)
        else:
            sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
            stem = os.path.splitext(os.path.basename(path))[0]
            suite = load_file(stem, path)
    except BaseException:
        suite, load_error = None, traceback.format_exc()[-4000:]
    result = Result()
    if suite is not None:
        suite.run(result)
    if canary:
        try:
            load_file("rb_canary", canary).run(result)
        except BaseException:
            pass
    with open(out, "w") as f:
        json.dump({"tests": result.rows, "load_error": load_error}, f)


if __name__ == "__main__":
    main()
