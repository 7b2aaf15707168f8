# Runs rdma-core's Python test suite (Debian's python3-pyverbs) one test at a time and
# reports each test's outcome on file descriptor 3, for `cargo xtask rdma-core-tests`.
#
#   driver.py SUITE_DIR --list [SUITE OPTIONS...]
#   driver.py SUITE_DIR --run IDS_FILE [SUITE OPTIONS...]
#
# SUITE_DIR holds the suite's `tests` package (its run_tests.py, args_parser.py, ...).
# The suite's own options (--dev, --port, --gid, ...) follow and are parsed by its own
# args_parser, exactly as run_tests.py does. The suite is loaded the way run_tests.py
# loads it. Report lines (tab-separated, one per line):
#
#   TEST <id>                          (with --list)
#   START <id>
#   RESULT <id> <status> <reason>      status: passed, failed, error, skipped,
#                                      expected-failure, unexpected-success
#
# Tracebacks and everything the tests print go to stdout/stderr, which the caller logs.
# The caller enforces the time bound of each test: it kills this process when a test
# outlives it and starts it again with the tests that remain.

import os
import sys
import traceback
import unittest
from importlib.machinery import SourceFileLoader


def one_line(text):
    return " ".join(str(text).split())[:300]


class Outcome(unittest.TestResult):
    """Records the outcome of the test being run (subtests included: the worst wins)."""

    RANK = {"passed": 0, "expected-failure": 0, "skipped": 1,
            "unexpected-success": 2, "failed": 3, "error": 4}

    def __init__(self):
        super().__init__()
        self.status = None
        self.reason = ""

    def note(self, status, reason=""):
        if self.status is None or self.RANK[status] > self.RANK[self.status]:
            self.status = status
            self.reason = reason

    def describe(self, test, err):
        text = "".join(traceback.format_exception(*err))
        sys.stderr.write(f"\n===== {test.id()}\n{text}")
        sys.stderr.flush()
        return one_line(traceback.format_exception_only(err[0], err[1])[-1])

    def addSuccess(self, test):
        super().addSuccess(test)
        self.note("passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self.note("failed", self.describe(test, err))

    def addError(self, test, err):
        super().addError(test, err)
        self.note("error", self.describe(test, err))

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self.note("skipped", one_line(reason))

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self.note("expected-failure")

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self.note("unexpected-success", "expected to fail, passed")

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            if issubclass(err[0], test.failureException):
                self.note("failed", self.describe(subtest, err))
            else:
                self.note("error", self.describe(subtest, err))


def flatten(suite):
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            yield from flatten(item)
        else:
            yield item


def main():
    suite_dir = os.path.abspath(sys.argv[1])
    mode = sys.argv[2]
    tests_dir = os.path.join(suite_dir, "tests")
    if mode == "--list":
        ids_file, rest = None, sys.argv[3:]
    elif mode == "--run":
        ids_file, rest = sys.argv[3], sys.argv[4:]
    else:
        sys.exit(f"unknown mode {mode}")
    report = os.fdopen(3, "w", buffering=1)

    # As run_tests.py: its directory on the path, the package loaded as `tests`, the
    # suite's own options parsed by its own parser.
    sys.path.insert(0, tests_dir)
    sys.argv = [os.path.join(tests_dir, "run_tests.py")] + rest
    from args_parser import parser
    parser.parse_args()
    module = SourceFileLoader("tests", os.path.join(tests_dir, "__init__.py")).load_module()
    cases = {t.id(): t for t in flatten(unittest.defaultTestLoader.loadTestsFromModule(module))}

    if ids_file is None:
        for test_id in cases:
            report.write(f"TEST\t{test_id}\n")
        return

    with open(ids_file) as f:
        wanted = [line.strip() for line in f if line.strip()]
    for test_id in wanted:
        report.write(f"START\t{test_id}\n")
        case = cases.get(test_id)
        outcome = Outcome()
        if case is None:
            outcome.note("error", "no such test")
        else:
            # A suite of one, so class and module fixtures run around it.
            unittest.TestSuite([case]).run(outcome)
            if outcome.status is None:
                outcome.note("error", "the test reported no outcome")
        sys.stdout.flush()
        sys.stderr.flush()
        report.write(f"RESULT\t{test_id}\t{outcome.status}\t{outcome.reason}\n")


if __name__ == "__main__":
    main()
