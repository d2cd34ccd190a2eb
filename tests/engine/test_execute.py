"""execute_one: the one path of every work item (solutions of every shape, failures, timeouts, metrics once)."""

import asyncio
import json
import math
import sys
import time
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import structlog

from runner import MetricBase, MetricResult, MetricType, SolutionOutput, Task, record_usage, solution_factory
from runner.core.config import RunSettings
from runner.core.solution import SolutionSpec
from runner.engine.run_context import RunContext
from runner.engine.item.execute import ItemSite, execute_one
from runner.traffic.control import TrafficControl
from runner.engine.plan import WorkItem
from runner.engine.item.call_solution import Solution
from runner.storage import ResultStore


class CountingMetric(MetricBase):
    """Scores 1.0 when the output equals the expected value; counts its calls."""

    calls = 0

    def __init__(self, expected, name="match"):
        super().__init__(name=name, metric_type=MetricType.NUMERICAL)
        self.expected = expected

    async def __call__(self, solution):
        type(self).calls += 1
        return MetricResult(name=self.name, result=float(solution.output == self.expected))


class Broken(MetricBase):
    def __init__(self):
        super().__init__(name="broken")

    def __call__(self, solution):
        raise RuntimeError("metric bug")


class Label(MetricBase):
    def __init__(self):
        super().__init__(name="label", metric_type=MetricType.CATEGORY, categories=["short", "long"])

    def __call__(self, solution):
        return "short" if len(str(solution.output)) < 3 else "medium"


@pytest.fixture
def store(tmp_path):
    return ResultStore(str(tmp_path / "run"))


def built(target, **kwargs):
    """The solution ``target`` built and adapted as an executor does."""
    return Solution(SolutionSpec(target, kwargs=kwargs).build())


async def one(task, repeat, solution, store, *, index=0, attempt=1, owned=False, sync_in_thread=True, **settings):
    """``execute_one`` of (``task``, ``repeat``) with run id ``r`` and the run settings ``settings``."""
    settings = RunSettings(**settings)
    site = ItemSite(RunContext(None, None, store, "r", settings), solution, TrafficControl(settings),
                    sync_in_thread=sync_in_thread)
    return await execute_one(WorkItem(task, repeat, index), site, attempt=attempt, owned=owned)


async def run(solution, task, store, owned=False, **settings):
    result = await one(task, 0, built(solution), store, owned=owned, **settings)
    record = next(store.iter_records())
    return result, record


def make_task(expected=4, metrics=None):
    return Task(id="t1", input="2+2", ground_truth=expected, metrics=metrics or [CountingMetric(expected)],
                tags={"category": "add"})


def sync_one_arg(task):
    return 4


async def async_two_args(task, context):
    assert context.task_id == "t1" and context.repeat == 0 and context.attempt == 1
    context("AgentScope pre_print_hook call")
    return SolutionOutput(output=4, trajectory=[{"tool": "add", "args": [2, 2]}], meta={"model": "none"})


@pytest.mark.parametrize("solution", [sync_one_arg, async_two_args, lambda task: 4])
async def test_any_solution_shape_gives_an_ok_record(solution, store):
    result, record = await run(solution, make_task(), store)
    assert (result.status, result.written) == ("ok", True)
    assert record.status == "ok" and record.output == 4
    assert [(m.name, m.result) for m in record.metrics] == [("match", 1.0)]
    assert record.tags == {"category": "add"}


async def test_solution_factory_and_class_are_built_once(store):
    constructed = []

    @solution_factory
    def factory(model):
        constructed.append(model)
        return lambda task: 4

    class Agent:
        def __init__(self, model):
            constructed.append(model)

        async def __call__(self, task):
            return 4

    for target in (factory, Agent):
        solution = built(target, model="m")
        for repeat in range(3):
            await one(make_task(), repeat, solution, store)
    assert constructed == ["m", "m"]


async def test_each_metric_runs_exactly_once_per_item(store):
    CountingMetric.calls = 0
    task = make_task(metrics=[CountingMetric(4, "a"), CountingMetric(4, "b")])
    solution = built(sync_one_arg)
    for repeat in range(3):
        await one(task, repeat, solution, store)
    assert CountingMetric.calls == 6


async def test_a_raising_solution_is_an_error_record_and_metrics_still_score_it(store):
    def boom(task):
        raise ValueError("no answer")

    result, record = await run(boom, make_task(), store)
    assert result.status == "error"
    assert record.error.type == "ValueError" and "no answer" in record.error.message
    assert record.metrics[0].result == 0.0


async def test_a_raising_metric_is_an_error_result_and_other_metrics_keep_theirs(store):
    _, record = await run(sync_one_arg, make_task(metrics=[Broken(), CountingMetric(4)]), store)
    assert record.status == "error"
    broken, match = record.metrics
    assert broken.error.type == "RuntimeError" and broken.result is None
    assert match.result == 1.0


async def test_category_result_outside_its_categories_is_a_metric_error(store):
    _, record = await run(lambda task: "four", make_task(metrics=[Label()]), store)
    assert "not one of the categories" in record.metrics[0].error.message


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_hanging_solution_becomes_a_timeout_record(kind, store):
    def hang(task):
        time.sleep(5)

    async def ahang(task):
        await asyncio.sleep(5)

    start = time.monotonic()
    result, record = await run(hang if kind == "sync" else ahang, make_task(), store, timeout=0.2)
    assert time.monotonic() - start < 4
    assert result.status == "timeout" and record.status == "timeout"
    assert "0.2 s timeout" in record.error.message


async def test_the_record_keeps_the_input_as_given_before_the_solution_changed_it(store):
    class Opaque:
        def __repr__(self):
            return "<Opaque>"

    def mutating(task):
        task.input["question"] = "changed"
        return 4

    task = make_task()
    task.input = {"question": "2+2", "hint": Opaque()}
    _, record = await run(mutating, task, store, owned=True)
    assert record.status == "ok"
    assert record.input == {"question": "2+2", "hint": "<Opaque>"}


async def test_an_unserialisable_output_is_an_error_record(store):
    result, record = await run(lambda task: object(), make_task(), store)
    assert result.status == "error"
    assert record.error.type == "UnserialisableOutput"


async def test_an_unserialisable_trajectory_or_meta_is_an_error_record_that_keeps_the_rest(store):
    """A neighbour: an object JSON cannot hold in the trajectory or the metadata stopped the run (the record took
    the ``repr`` of the whole field where it needs a list or an object). Each such object is its ``repr`` now, the
    rest of the field and the other fields are kept."""
    class Opaque:
        def __repr__(self):
            return "<Opaque>"

    cycle: list = []
    cycle.append(cycle)
    solution = lambda task: SolutionOutput(output=4, trajectory=[{"step": 1}, Opaque()],  # noqa: E731
                                           meta={"tool": Opaque(), "n": 2})
    result, record = await run(solution, make_task(), store)
    assert (result.status, record.error.type) == ("error", "UnserialisableOutput")
    assert "the solution's trajectory is not JSON-serialisable (list)" in record.error.message
    assert (record.output, record.trajectory, record.solution_meta) == (
        4, [{"step": 1}, "<Opaque>"], {"tool": "<Opaque>", "n": 2})
    _, cyclic = await run(lambda task: SolutionOutput(output=4, meta={"cycle": cycle}), make_task(),
                          ResultStore(store.uri + "-cycle"))
    assert cyclic.error.type == "UnserialisableOutput" and cyclic.solution_meta == {"repr": "{'cycle': [[...]]}"}


async def test_success_false_marks_the_record_as_error(store):
    _, record = await run(lambda task: SolutionOutput(success=False, output=4), make_task(), store)
    assert record.status == "error" and record.metrics[0].result == 1.0


async def test_solution_retries_try_again_on_a_fresh_task(store):
    seen = []

    def flaky(task):
        seen.append(task.metadata["visits"])
        task.metadata["visits"] += 1
        if len(seen) < 3:
            raise RuntimeError("transient")
        return 4

    task = Task(id="t1", metrics=[CountingMetric(4)], metadata={"visits": 0})
    result, record = await run(flaky, task, store, solution_retries=2)
    assert result.status == "ok" and seen == [0, 0, 0]
    assert task.metadata["visits"] == 0
    assert record.tries == 3
    assert [(e.type, e.message, e.traceback) for e in record.try_errors] == [("RuntimeError", "transient", None)] * 2


async def test_a_record_keeps_every_try_when_all_of_them_fail(store):
    tries = iter(range(1, 10))

    def failing(task):
        raise ConnectionError(f"try {next(tries)}")

    result, record = await run(failing, make_task(), store, solution_retries=2)
    assert result.status == "error" and record.tries == 3
    assert [e.message for e in record.try_errors] == ["try 1", "try 2"]
    assert record.error.message == "try 3" and "Traceback" in record.error.traceback
    assert (result.error.type, result.error.message, result.error.traceback) == ("ConnectionError", "try 3", None)
    _, first = await run(sync_one_arg, make_task(), ResultStore(store.uri + "-first"))
    assert (first.tries, first.try_errors) == (1, [])


async def test_token_usage_lands_in_the_record(store):
    async def talks(task):
        record_usage("mock:model", input_tokens=10, output_tokens=3)
        record_usage("mock:model", input_tokens=5, output_tokens=2)
        return 4

    _, record = await run(talks, make_task(), store)
    assert record.usage["mock:model"].model_dump() == {"input_tokens": 15, "output_tokens": 5, "calls": 2}


async def test_a_second_attempt_never_overwrites_the_first_record(store):
    first = await one(make_task(), 0, built(sync_one_arg), store, attempt=1)
    second = await one(make_task(), 0, built(lambda t: 5), store, attempt=2)
    assert first.written and not second.written and not second.duplicate
    record = next(store.iter_records())
    assert record.attempt == 1 and record.output == 4


async def test_a_first_attempt_that_finds_another_writers_record_keeps_it_and_warns(store):
    solution = built(sync_one_arg)
    first = await one(make_task(), 0, solution, store, index=3)
    with structlog.testing.capture_logs() as logs:
        again = await one(make_task(), 0, solution, store, index=8)
    assert first.written and not first.duplicate
    assert again.duplicate
    warning = next(e for e in logs if e["event"] == "item.duplicate")
    assert warning["log_level"] == "warning"
    assert "task id 't1' repeat 0" in warning["detail"]
    assert "record of another writer, kept; a process writes to this storage without holding the run's lease" in \
        warning["detail"]
    assert [r.task_index for r in store.iter_records()] == [3]


class Returns(MetricBase):
    """A NUMERICAL metric that returns ``value`` as it is (bare, or in a ``MetricResult`` with ``wrapped``)."""

    def __init__(self, value, wrapped=False, allows_infinite=False):
        super().__init__(name="custom", allows_infinite=allows_infinite)
        self.value, self.wrapped = value, wrapped

    def __call__(self, solution):
        return MetricResult(name=self.name, result=self.value) if self.wrapped else self.value


def _strict_json(text):
    """``json.loads`` that refuses the non-standard constants NaN and Infinity."""
    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize(("value", "stored", "read_back"), [
    (float("nan"), "NaN", math.isnan),
    (math.inf, "Infinity", lambda v: v == math.inf),
    (-math.inf, "-Infinity", lambda v: v == -math.inf),
    (np.float64("nan"), "NaN", math.isnan),
    (np.float32(0.5), 0.5, lambda v: v == 0.5 and type(v) is float),
    (np.int64(3), 3, lambda v: v == 3 and type(v) is int),
    (np.bool_(True), True, lambda v: v is True),
    (np.array(0.25), 0.25, lambda v: v == 0.25),
    (Decimal("0.25"), 0.25, lambda v: v == 0.25),
    (Decimal("NaN"), "NaN", math.isnan),
    (True, True, lambda v: v is True),
    (None, None, lambda v: v is None),
    ("high", "high", lambda v: v == "high"),
    (int("9" * 400) - 3, int("9" * 399 + "6"), lambda v: v == int("9" * 399 + "6")),
    (-(10**400) - 3, -(10**400) - 3, lambda v: v == -(10**400) - 3),
    (Decimal("1e400"), 10**400, lambda v: v == 10**400 and type(v) is int),
    (Fraction(10**400, 3), 10**400 // 3, lambda v: v == 10**400 // 3),
    (7 * 10**4300, "7" + "0" * 4300, lambda v: v == "7" + "0" * 4300),
], ids=["nan", "inf", "-inf", "np.float64-nan", "np.float32", "np.int64", "np.bool_", "0-d array", "Decimal",
        "Decimal-NaN", "bool", "None", "str", "400 nines", "-1e400", "Decimal-1e400", "Fraction-1e400/3",
        "4301 digits"])
async def test_a_metric_result_is_stored_as_what_it_is_in_valid_json(store, value, stored, read_back):
    _, record = await run(sync_one_arg, make_task(metrics=[Returns(value)]), store)
    assert record.status == "ok" and record.metrics[0].error is None
    assert read_back(record.metrics[0].result)
    (path,) = (Path(store.uri.removeprefix("file://")) / "records").glob("*/0.json")
    assert _strict_json(path.read_text())["metrics"][0]["result"] == stored


async def test_non_finite_values_elsewhere_in_a_record_stay_valid_json(store):
    solution = lambda task: SolutionOutput(output={"loss": float("nan")}, meta={"bound": math.inf})  # noqa: E731
    await run(solution, make_task(metrics=[Returns(0.5, wrapped=True)]), store)
    (path,) = (Path(store.uri.removeprefix("file://")) / "records").glob("*/0.json")
    data = _strict_json(path.read_text())
    assert (data["output"], data["solution_meta"]) == ({"loss": "NaN"}, {"bound": "Infinity"})


async def test_integers_no_float_can_hold_are_kept_exactly_wherever_they_are(store):
    """Output, trajectory and metadata keep any integer exactly; one past the 4,300 digits JSON readers take is its
    digits' text, so the record still reads back."""
    big, huge = int("9" * 400), 10**4300
    solution = lambda task: SolutionOutput(output=big, trajectory=[{"tool": "pow", "result": huge}],  # noqa: E731
                                           meta={"digits": [big, -big]})
    _, record = await run(solution, make_task(metrics=[Returns(1, wrapped=True)]), store)
    assert record.status == "ok"
    assert (record.output, record.trajectory, record.solution_meta) == (
        big, [{"tool": "pow", "result": "1" + "0" * 4300}], {"digits": [big, -big]})
    (path,) = (Path(store.uri.removeprefix("file://")) / "records").glob("*/0.json")
    assert _strict_json(path.read_text())["output"] == big


LONE = "\ud835"
"""Half of the surrogate pair of U+1D7CE MATHEMATICAL BOLD DIGIT ZERO, as ``json.loads('"\\ud835"')`` gives it."""


class Says(MetricBase):
    """A metric whose name, result, message and metadata carry text with a lone surrogate; it raises with such a
    message when ``raises``."""

    def __init__(self, raises=False):
        super().__init__(name=("raises" if raises else "says") + LONE, metric_type=MetricType.CATEGORY,
                         categories=["ok" + LONE])
        self.raises = raises

    def __call__(self, solution):
        if self.raises:
            raise ValueError(f"cannot read {LONE}7")
        return MetricResult(name=self.name, result="ok" + LONE, message="judge said " + LONE,
                            metadata={"reply" + LONE: ["Score: " + LONE]})


async def test_text_with_unpaired_surrogates_is_stored_well_formed_wherever_it_is(store):
    """The issue's reply (``"\\ud835<number>"``) in the output, and its neighbours: the trajectory's tool arguments
    and results, the solution's metadata (keys too), a metric's name, label, message and metadata, a metric's and a
    solution's error messages. Each lone surrogate becomes U+FFFD; a pair split in two is joined again."""
    tries = iter(range(2))

    def solution(task):
        if next(tries) == 0:
            raise ConnectionError(f"reply {LONE} cut")
        return SolutionOutput(output=LONE + "7", trajectory=[
            {"role": "assistant", "tool_calls": [{"name": "lookup", "arguments": {"title": LONE}}]},
            {"role": "tool", "content": "\udfce" + LONE, "pair": "\ud835" + "\udfce"}], meta={LONE: LONE})

    result, record = await run(solution, make_task(metrics=[Says(), Says(raises=True)]), store, solution_retries=1)
    assert (result.status, record.tries) == ("error", 2)  # the raising metric: its error is the item's
    assert record.output == "\ufffd7"
    assert record.trajectory[0]["tool_calls"][0]["arguments"] == {"title": "\ufffd"}
    assert record.trajectory[1] == {"role": "tool", "content": "\ufffd\ufffd", "pair": "\U0001d7ce"}
    assert record.solution_meta == {"\ufffd": "\ufffd"}
    assert record.try_errors[0].message == "reply \ufffd cut"
    says, raised = record.metrics
    assert (says.name, says.result, says.message, says.metadata) == (
        "says\ufffd", "ok\ufffd", "judge said \ufffd", {"reply\ufffd": ["Score: \ufffd"]})
    assert raised.error.message == "cannot read \ufffd7"
    assert raised.name == "raises\ufffd"
    assert record.error.message == "metric 'raises\ufffd': ValueError: cannot read \ufffd7"
    (path,) = (Path(store.uri.removeprefix("file://")) / "records").glob("*/0.json")
    assert json.loads(path.read_bytes().decode("utf-8"))["output"] == "\ufffd7"


async def test_a_result_that_is_no_value_at_all_is_an_error_of_the_metric(store):
    _, record = await run(sync_one_arg, make_task(metrics=[Returns([0.5, 1.0])]), store)
    assert record.metrics[0].error.type == "TypeError"
    assert "result [0.5, 1.0] is a list; a metric's result is a number" in record.metrics[0].error.message


async def test_a_metric_that_allows_infinity_says_so_in_its_record(store):
    _, record = await run(sync_one_arg, make_task(metrics=[Returns(math.inf, allows_infinite=True)]), store)
    assert record.metrics[0].allows_infinite and record.metrics[0].result == math.inf


class Custom(BaseException):
    """A BaseException subclass a library might define."""


def sync_escape(kind):
    """A sync solution that leaves by ``kind``."""
    def solve(task):
        if kind == "sys.exit":
            sys.exit(3)
        if kind == "exit":
            exit()
        if kind == "GeneratorExit":
            raise GeneratorExit
        if kind == "CancelledError":
            raise asyncio.CancelledError
        raise Custom("custom base exception")
    return solve


def async_escape(kind):
    """The same, as an ``async def`` solution."""
    leave = sync_escape(kind)

    async def solve(task):
        await asyncio.sleep(0)
        return leave(task)
    return solve


ESCAPES = {"sys.exit": "SystemExit", "exit": "SystemExit", "GeneratorExit": "GeneratorExit",
           "CancelledError": "CancelledError", "Custom": "Custom"}


@pytest.mark.parametrize("where", ["sync in the loop", "sync in a thread", "async"])
@pytest.mark.parametrize("kind", list(ESCAPES))
async def test_any_way_out_of_a_solution_is_that_items_error_record_and_the_next_item_runs(kind, where, store):
    solution = built(async_escape(kind) if where == "async" else sync_escape(kind))
    result = await one(make_task(), 0, solution, store, sync_in_thread=where == "sync in a thread")
    record = next(store.iter_records())
    assert (result.status, record.status, record.error.type) == ("error", "error", ESCAPES[kind])
    assert record.metrics[0].result == 0.0                 # scored on the empty output, as any failure
    if kind.endswith("exit"):
        assert "sys.exit(" in record.error.message and "or exit() was called" in record.error.message
    after = await one(make_task(), 1, built(sync_one_arg), store)
    assert after.status == "ok"


async def test_a_keyboard_interrupt_on_the_main_thread_stops_the_run_but_one_raised_in_a_thread_is_an_error(store):
    def interrupt(task):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):                      # in this (the main) thread: a Ctrl-C
        await one(make_task(), 0, built(interrupt), store, sync_in_thread=False)
    assert list(store.iter_records()) == []
    result = await one(make_task(), 0, built(interrupt), store)  # in a daemon thread: the code's own
    assert result.status == "error" and next(store.iter_records()).error.type == "KeyboardInterrupt"


async def test_a_solution_that_hangs_is_cut_at_the_default_time_limit(store, monkeypatch):
    """No --timeout given: the default (DEFAULT_TIMEOUT_S, an hour; shortened here) still holds, for a solution that
    awaits for ever and (a neighbour) for a sync one that blocks in a worker's thread; 0 means no limit."""
    from runner.core import config

    monkeypatch.setattr(config, "DEFAULT_TIMEOUT_S", 0.3)

    async def awaits(task):
        await asyncio.Event().wait()

    def blocks(task):
        time.sleep(5)

    assert RunSettings().solution_limit == 0.3 and RunSettings(timeout=0).solution_limit is None
    for hangs in (awaits, blocks):
        started = time.monotonic()
        result = await one(make_task(), 0 if hangs is awaits else 1, built(hangs), store,
                           sync_in_thread=hangs is blocks)
        assert result.status == "timeout" and time.monotonic() - started < 3
    records = {record.repeat: record for record in store.iter_records()}
    assert records[0].error.message == records[1].error.message == "solution ran past the 0.3 s timeout"


async def test_cancelling_the_item_from_outside_is_not_an_error_record(store):
    async def slow(task):
        await asyncio.sleep(10)

    item = asyncio.ensure_future(one(make_task(), 0, built(slow), store, timeout=30.0))
    await asyncio.sleep(0.1)
    item.cancel()
    with pytest.raises(asyncio.CancelledError):
        await item
    assert list(store.iter_records()) == []


class SlowMetric(MetricBase):
    def __init__(self, kind):
        super().__init__(name=f"slow-{kind}", metric_type=MetricType.NUMERICAL)
        self.kind = kind

    def __call__(self, solution):
        if self.kind == "exit":
            sys.exit("metric quits")
        time.sleep(5)
        return 1.0


class SlowAsyncMetric(MetricBase):
    def __init__(self):
        super().__init__(name="slow-async", metric_type=MetricType.NUMERICAL)

    async def __call__(self, solution):
        await asyncio.sleep(5)
        return 1.0


async def test_a_metric_that_exits_is_a_metric_error_and_the_other_metrics_keep_their_results(store):
    _, record = await run(sync_one_arg, make_task(metrics=[SlowMetric("exit"), CountingMetric(4)]), store)
    assert record.status == "error" and record.error.type == "MetricError"
    quits, match = record.metrics
    assert quits.error.type == "SystemExit" and "sys.exit('metric quits')" in quits.error.message
    assert match.result == 1.0


@pytest.mark.parametrize("settings", [{"metric_timeout": 0.3}, {"timeout": 0.3}], ids=["metric_timeout", "timeout"])
async def test_a_metric_past_its_time_limit_makes_the_item_a_timeout(settings, store):
    start = time.monotonic()
    task = make_task(metrics=[SlowMetric("sleep"), SlowAsyncMetric(), CountingMetric(4)])
    result, record = await run(sync_one_arg, task, store, **settings)
    assert time.monotonic() - start < 2.5
    assert (result.status, record.error.type) == ("timeout", "MetricTimeout")
    assert [m.error.type if m.error else m.result for m in record.metrics] == ["TimeoutError", "TimeoutError", 1.0]
    assert "ran past its 0.3 s limit" in record.metrics[0].error.message


async def test_a_metric_result_of_none_in_a_metric_result_is_kept_and_counted(store):
    """``MetricResult(result=None)``, as a metric that could not decide writes it: the record keeps None, the item is
    ok, and the report counts the result as one it could not use."""
    _, record = await run(sync_one_arg, make_task(metrics=[Returns(None, wrapped=True)]), store)
    assert record.status == "ok" and record.metrics[0].error is None and record.metrics[0].result is None
