# SPDX-License-Identifier: MIT
"""Runs Twisted's trial with the tests' loopback address moved.

    python3 trial_at.py ADDR RESULT.json TEST...

TEST: modules or test case ids, as trial takes them.  Writes the outcome
of every test case to RESULT.json ({id: "pass" | "fail" | "skip"}); a
case that trial reports as an expected failure counts as a skip, one
that unexpectedly passes as a failure.  ADDR "-" moves nothing
(loopback.py).
"""
import json
import sys

from loopback import move_sockets


def cases(suite):
    try:
        tests = iter(suite)
    except TypeError:
        yield suite
        return
    for test in tests:
        yield from cases(test)


def outcomes(ids, result):
    verdict = dict.fromkeys(ids, "pass")
    for test, _ in result.skips + result.expectedFailures:
        verdict[test.id()] = "skip"
    for test, _ in result.failures + result.errors:
        verdict[test.id()] = "fail"
    for test in result.unexpectedSuccesses:
        verdict[(test[0] if isinstance(test, tuple) else test).id()] = "fail"
    return verdict


def main():
    addr, result_path = sys.argv[1], sys.argv[2]
    if addr != "-":
        move_sockets(addr)
    from twisted.scripts import trial

    config = trial.Options()
    config.parseOptions(["--reporter=text"] + sys.argv[3:])
    runner = trial._makeRunner(config)
    suite = trial._getSuite(config)
    # The run empties the suite: its cases are listed first.
    ids = [test.id() for test in cases(suite)]
    result = runner.run(suite)
    with open(result_path, "w") as f:
        json.dump(outcomes(ids, result), f, indent=0, sort_keys=True)
    return 0 if result.wasSuccessful() else 1


if __name__ == "__main__":
    sys.exit(main())
