//! The bridge between the trusted test process and the agent's worker (`python/bridge_*.py`),
//! in a real grading container: what an honest held-out test can do with the agent's code
//! (values of every plain kind, objects behind references, callbacks, arguments changed in
//! place, the agent's exceptions, commands, files loaded by path), and what the agent's code
//! cannot do to the process that decides (shadow a module, hand over a number that is not one,
//! pass an empty or broadcast value, smuggle a pickle, break the channel, outlive the budget).

mod common;

use std::time::Duration;

use common::Grading;
use rubrics::{GradeReport, Status};

const SPEC: &str = "[[graders]]\nname = \"t\"\ndimension = \"code_correctness\"\ncheck = { kind = \"pytest\", hidden_tests = \"tests\" }\n";

/// The agent's module for the behaviour tests.
const AGENT: &[u8] = br#"import collections, os, subprocess
import numpy as np

Pair = collections.namedtuple("Pair", "lo hi")


class ConvergenceError(ValueError):
    pass


class Counter:
    def __init__(self, start=0):
        self.n = start

    def bump(self, by=1):
        self.n += by
        return self

    def __len__(self):
        return self.n

    def __iter__(self):
        return iter(range(self.n))

    def __getitem__(self, i):
        return i * 10


def echo(x):
    return x


def uid():
    return os.getuid()


def apply(f, xs):
    return [f(x) for x in xs]


def fill(a, v):
    a[...] = v


def append(xs, v):
    xs.append(v)


def pair():
    return Pair(1, 2)


def fails():
    raise ConvergenceError("did not converge")


def divide(a, b):
    return a / b


def counter():
    return Counter(3)


def gen(n):
    for i in range(n):
        yield i * i


def exits():
    raise SystemExit(3)
"#;

const BEHAVIOUR: &[u8] = br#"import importlib.util, math, os, pickle, subprocess, sys
import numpy as np
import pytest

import agent


def test_the_test_and_the_agent_run_as_different_uids():
    assert os.getuid() not in (0, 1000, 2000)
    assert agent.uid() == 1000


@pytest.mark.parametrize("v", [
    None, True, 3, -(2 ** 80), 1.5, float("inf"), 1 + 2j, "text \u00e9", b"\x00\xff",
    bytearray(b"ab"), [1, [2, [3]]], (1, (2,)), {"k": [1, 2], 3: "x", (1, 2): None},
    {1, 2}, frozenset({3}), range(2, 9, 3), slice(1, None, 2),
])
def test_plain_values_round_trip(v):
    got = agent.echo(v)
    assert got == v and type(got) is type(v)


def test_nan_round_trips():
    assert math.isnan(agent.echo(float("nan")))


@pytest.mark.parametrize("dtype", ["float64", "float32", "int64", "uint8", "bool", "complex128", "<U3"])
def test_arrays_round_trip_with_dtype_and_shape(dtype):
    a = np.arange(12).reshape(3, 4).astype(dtype)
    got = agent.echo(a)
    assert type(got) is np.ndarray and got.dtype == a.dtype and got.shape == a.shape
    assert np.array_equal(got, a)


def test_numpy_scalars_keep_their_type():
    got = agent.echo(np.float32(1.25))
    assert type(got) is np.float32 and got == 1.25


def test_named_tuples_compare_as_tuples():
    p = agent.pair()
    assert p == (1, 2) and p.lo == 1 and p.hi == 2


def test_objects_stay_in_the_worker_behind_a_reference():
    c = agent.counter()
    assert c.n == 3
    assert c.bump(2) is c
    assert c.n == 5 and len(c) == 5 and list(c) == [0, 1, 2, 3, 4] and c[2] == 20
    c.n = 1
    assert c.n == 1
    assert list(agent.gen(4)) == [0, 1, 4, 9]


def test_classes_are_callable_and_exceptions_are_catchable():
    assert agent.Counter(7).n == 7
    with pytest.raises(agent.ConvergenceError, match="did not converge"):
        agent.fails()
    with pytest.raises(ValueError):
        agent.fails()
    with pytest.raises(ZeroDivisionError):
        agent.divide(1, 0)


def test_a_system_exit_in_the_agent_code_fails_only_that_call():
    with pytest.raises(RuntimeError):
        agent.exits()
    assert agent.echo(1) == 1


def test_callables_of_the_test_are_called_back():
    assert agent.apply(lambda x: x * 2, [1, 2, 3]) == [2, 4, 6]
    assert agent.apply(np.sin, [0.0]) == [0.0]


def test_arguments_changed_in_place_travel_back():
    a = np.zeros(3)
    agent.fill(a, 7.0)
    assert a.tolist() == [7.0, 7.0, 7.0]
    xs = [1]
    agent.append(xs, 2)
    assert xs == [1, 2]


def test_a_module_loaded_by_path_loads_in_the_worker():
    spec = importlib.util.spec_from_file_location("byfile", os.path.join(os.environ["WORKSPACE"], "byfile.py"))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    assert m.where() == 1000


def test_commands_run_as_the_agent_uid():
    out = subprocess.run(["id", "-u"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1000"
    assert subprocess.check_output("id -u", shell=True).strip() == b"1000"


def test_the_trusted_process_cannot_start_a_process_of_its_own():
    with pytest.raises(OSError):
        os.fork()


def test_a_workspace_module_never_shadows_the_standard_library():
    import statistics
    assert "/workspace" not in (statistics.__file__ or "")
    assert statistics.mean([1, 2, 3]) == 2


def test_agent_objects_are_not_numbers_and_compare_by_identity():
    c = agent.counter()
    with pytest.raises(TypeError):
        c + 1
    with pytest.raises(TypeError):
        abs(c)
    with pytest.raises(TypeError):
        c < 1
    with pytest.raises(TypeError):
        bool(c)
    assert c != agent.counter()


def test_empty_and_broadcast_values_are_not_close_to_anything():
    empty = agent.echo(np.zeros(0))
    assert not np.allclose(empty, 1.0)
    assert not np.allclose(empty, [1.0, 2.0])
    assert not np.allclose(agent.echo(np.ones(1)), np.ones(3))
    assert not np.all(np.isclose(empty, 1.0))
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(empty, 1.0)
    assert not (empty == pytest.approx(1.0))
    assert np.allclose(agent.echo(np.ones(3)), 1.0)


def test_unpickling_admits_plain_data_only():
    assert pickle.loads(pickle.dumps({"a": [1, 2.5, (3,)]})) == {"a": [1, 2.5, (3,)]}
    assert np.array_equal(pickle.loads(pickle.dumps(np.arange(3))), np.arange(3))
    with pytest.raises(pickle.UnpicklingError):
        pickle.loads(pickle.dumps(subprocess.CompletedProcess))
"#;

const BYFILE: &[u8] = b"import os\n\n\ndef where():\n    return os.getuid()\n";

/// A statistics.py the agent leaves in the workspace: the tests' own standard library wins.
const SHADOW: &[u8] = b"def mean(xs):\n    return 42\n";

fn show(r: &GradeReport) {
    for g in &r.graders {
        for t in &g.tests {
            if t.status != Status::Pass {
                eprintln!(
                    "{} {:?}: {}",
                    t.name,
                    t.status,
                    t.message.as_deref().unwrap_or("")
                );
            }
        }
    }
}

#[tokio::test]
async fn what_an_honest_test_does_with_the_agent_code_works_across_the_bridge() {
    let g = Grading::new(
        "python",
        &[
            ("agent.py", AGENT),
            ("byfile.py", BYFILE),
            ("statistics.py", SHADOW),
        ],
        &[("tests/test_behaviour.py", BEHAVIOUR)],
    )
    .await;
    let r = g.grade(SPEC, None, Duration::from_secs(240)).await;
    g.remove().await;
    show(&r);
    let t = &r.graders[0];
    assert!(t.tests.len() >= 40, "{:?}", t.tests);
    assert_eq!(t.status, Status::Pass, "{:?}", t.details);
    assert_eq!(r.score, Some(1.0));
}

/// The agent's code breaks the channel in every way a process can: garbage on the pipe,
/// answers out of turn, a forged reference, values nested past the bound, a huge length,
/// its own exit. Each breaks at most what follows it; the report is written and scores 0
/// for what could not be tested.
const BREAKER: &[u8] = br#"import os, sys

def deep():
    x = []
    for _ in range(100000):
        x = [x]
    return x

def huge_length():
    # write a frame header announcing a message over the bound on every open pipe we can see
    for fd in range(3, 20):
        try:
            os.write(fd, (2 ** 40).to_bytes(8, "big"))
        except OSError:
            pass
    return 1

def good():
    return 2

def die():
    os._exit(9)
"#;

const BREAKER_TESTS: &[u8] = br#"import agent


def test_1_deep():
    v = agent.deep()
    assert v is not None


def test_2_good_after_deep():
    assert agent.good() == 2


def test_3_huge_length():
    assert agent.huge_length() == 1


def test_4_after_the_channel_broke():
    assert agent.good() == 2


def test_5_die():
    agent.die()
"#;

#[tokio::test]
async fn an_agent_that_breaks_the_channel_fails_its_tests_and_the_report_is_still_written() {
    let g = Grading::new(
        "python",
        &[("agent.py", BREAKER)],
        &[("tests/test_breaker.py", BREAKER_TESTS)],
    )
    .await;
    let r = g.grade(SPEC, None, Duration::from_secs(240)).await;
    g.remove().await;
    show(&r);
    let t = &r.graders[0];
    assert!(!t.status.is_infrastructure(), "{:?}", t.status);
    assert_eq!(t.tests.len(), 5, "{:?}", t.tests);
    let passed: Vec<&str> = t
        .tests
        .iter()
        .filter(|x| x.status == Status::Pass)
        .map(|x| x.name.as_str())
        .collect();
    // A value nested past the bound stays behind a reference; the channel lives on.
    assert!(
        passed.iter().any(|n| n.ends_with("test_1_deep")),
        "{passed:?}"
    );
    assert!(
        passed.iter().any(|n| n.ends_with("test_2_good_after_deep")),
        "{passed:?}"
    );
    // A garbled channel fails the call that garbled it and everything after it.
    assert_eq!(passed.len(), 2, "{passed:?}");
}

const SLEEPER: &[u8] =
    b"import time\n\ndef slow():\n    time.sleep(3600)\n\ndef fast():\n    return 1\n";
const SLEEPER_TESTS: &[u8] =
    b"import agent\n\n\ndef test_a_fast():\n    assert agent.fast() == 1\n\n\ndef test_b_slow():\n    agent.slow()\n";

#[tokio::test]
async fn agent_code_past_the_budget_is_stopped_and_what_passed_before_is_kept() {
    let g = Grading::new(
        "python",
        &[("agent.py", SLEEPER)],
        &[("tests/test_sleep.py", SLEEPER_TESTS)],
    )
    .await;
    let started = std::time::Instant::now();
    // Under load the preparation alone may take seconds: the budget leaves room for it.
    let r = g.grade(SPEC, None, Duration::from_secs(60)).await;
    let took = started.elapsed();
    g.remove().await;
    show(&r);
    let t = &r.graders[0];
    assert_eq!(t.status, Status::Timeout, "{:?}", t.details);
    assert!(took < Duration::from_secs(120), "{took:?}");
    assert!(
        t.tests
            .iter()
            .any(|x| x.name.ends_with("test_a_fast") && x.status == Status::Pass),
        "{:?}",
        t.tests
    );
}
