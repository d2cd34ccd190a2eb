"""The AgentScope seed's "Creating Custom Benchmarks and Metrics" example, with only its import line changed,
run through both constructor forms of GeneralEvaluator."""

import json

import pytest

from runner import (
    BenchmarkBase,
    FileEvaluatorStorage,
    GeneralEvaluator,
    MetricBase,
    MetricResult,
    MetricType,
    SolutionOutput,
    Task,
)


class CheckEqual(MetricBase):
    def __init__(self, gt: float):
        super().__init__(
            name="exact-match",
            metric_type=MetricType.NUMERICAL,
            description="Check if output equals ground truth",
            categories=[],
        )
        self.gt = gt

    async def __call__(self, sol: SolutionOutput) -> MetricResult:
        is_correct = sol.output == self.gt
        return MetricResult(
            name=self.name,
            result=1.0 if is_correct else 0.0,
            message="correct" if is_correct else "incorrect",
        )


class ToyBenchmark(BenchmarkBase):
    def __init__(self):
        super().__init__(name="Toy", description="Demo benchmark")
        self.tasks = [
            Task(
                id="t1",
                input="What is 2+2?",
                ground_truth=4,
                metrics=[CheckEqual(4)],
                metadata={},
            ),
            Task(
                id="t2",
                input="What is 3*3?",
                ground_truth=9,
                metrics=[CheckEqual(9)],
                metadata={},
            ),
        ]

    def __iter__(self):
        yield from self.tasks


async def solve(task, pre_print_hook):
    """AgentScope's solution signature: (task, pre_print_hook); answers t1 right and t2 wrong."""
    return SolutionOutput(success=True, output=4, trajectory=[])


def sync_solve(task):
    return {"t1": 4, "t2": 9}[task.id]


async def test_seed_form_with_solution_func(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    evaluator = GeneralEvaluator(benchmark=ToyBenchmark(), solution_func=solve, storage=FileEvaluatorStorage())
    summary = await evaluator.run()
    assert summary.metrics["exact-match"].mean == 0.5
    assert summary.completed == 2 and summary.n_tasks == 2
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert run_dir.name.startswith("toy-")
    assert json.loads((run_dir / "summary.json").read_text())["metrics"]["exact-match"]["n"] == 2


async def test_agentscope_v1_form_with_repeats(tmp_path):
    evaluator = GeneralEvaluator(
        name="toy-eval", benchmark=ToyBenchmark(), n_repeat=2, storage=FileEvaluatorStorage(str(tmp_path)), n_workers=1
    )
    summary = await evaluator.run(sync_solve)
    assert summary.metrics["exact-match"].mean == 1.0
    assert summary.completed == 4 and summary.n_repeats == 2
    assert summary.pass_at_k["exact-match"] == {"1": 1.0, "2": 1.0}
    assert sorted(p.name for p in (tmp_path / "records" / "t1").iterdir()) == ["0.json", "1.json"]


async def test_rerun_on_the_same_storage_executes_nothing(tmp_path):
    calls = []

    def counted(task):
        calls.append(task.id)
        return 4

    for _ in range(2):
        evaluator = GeneralEvaluator(benchmark=ToyBenchmark(), storage=FileEvaluatorStorage(str(tmp_path)), show=False)
        await evaluator.run(counted)
    assert calls == ["t1", "t2"]
    assert evaluator.outcome.executed == 0 and evaluator.outcome.skipped == 2


async def test_no_solution_is_a_clear_error(tmp_path):
    from runner.core.errors import ConfigError

    with pytest.raises(ConfigError, match="no solution"):
        await GeneralEvaluator(benchmark=ToyBenchmark(), storage=FileEvaluatorStorage(str(tmp_path))).run()


class MockReActAgent:
    """Stands for the seed's ``ReActAgent`` on ``DashScopeChatModel("qwen-max")``, a hosted model that cannot be
    reached here: the same ``run(input) -> message with .content`` shape, answered by our offline ``mock:echo``
    model through the model layer (its tokens are recorded like a real model's)."""

    def __init__(self) -> None:
        from runner.models import ChatModel, user_message

        self.model, self.user_message = ChatModel.from_name("mock:echo"), user_message

    async def run(self, text):
        reply = await self.model.chat([self.user_message(str(text))])
        return type("Msg", (), {"content": reply.text})()


@pytest.fixture
def acebench_mirror(acebench_dir, tmp_path, monkeypatch):
    """``ACEBenchmark()`` with no arguments downloads the authors' files at the pinned commit and checks their
    sha256; here the "download" reads the shared copy through ``RUNNER_ACEBENCH_URL`` (a mirror, any fsspec URL)
    into an empty cache, so the same checks run offline."""
    monkeypatch.setenv("RUNNER_ACEBENCH_URL", str(acebench_dir))
    monkeypatch.setenv("RUNNER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path / "cache"


def _seed_solve():
    agent = MockReActAgent()

    async def solve(task):
        msg = await agent.run(task.input)
        return msg.content

    return solve


async def test_agentscope_general_evaluator_on_acebench_seed(acebench_mirror, tmp_path):
    """The seed's "Debugging with GeneralEvaluator" block, with only its import line changed."""
    from runner import ACEBenchmark, FileEvaluatorStorage, GeneralEvaluator

    solve = _seed_solve()
    evaluator = GeneralEvaluator(
        benchmark=ACEBenchmark(),
        solution_func=solve,
        storage=FileEvaluatorStorage(),
    )

    await evaluator.run()

    assert sorted(path.name for path in (acebench_mirror / "acebench").rglob("*.json"))  # the pinned files, cached
    (run_dir,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["n_tasks"] == 1023 and summary["completed"] == 1023
    assert summary["usage"]["mock:echo"]["calls"] >= 1023  # the agent's model was called for every task


async def test_agentscope_ray_evaluator_on_acebench_seed(acebench_mirror, tmp_path, ray_session):
    """The seed's "Implementing Parallel Evaluation with RayEvaluator" block (``max_workers=4``; the test cluster
    fits 2, and the run goes on with those), with only its import lines changed."""
    from runner import ACEBenchmark, FileEvaluatorStorage, RayEvaluator

    solve = _seed_solve()
    evaluator = RayEvaluator(
        benchmark=ACEBenchmark(),
        solution_func=solve,
        storage=FileEvaluatorStorage(),
        max_workers=4,
    )

    await evaluator.run()

    (run_dir,) = (tmp_path / "runs").iterdir()
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["n_tasks"] == 1023 and summary["completed"] == 1023
    assert evaluator.executor is not None and evaluator.executor.size == 4
    assert len({worker["pid"] for worker in evaluator.executor.workers}) == 2


def test_acebenchmark_without_network_or_data_dir_is_one_line(tmp_path, monkeypatch):
    """No network and no ``data_dir``: one line naming the way out for a Python user too."""
    from runner import ACEBenchmark
    from runner.core.errors import BenchmarkError

    monkeypatch.setenv("RUNNER_ACEBENCH_URL", str(tmp_path / "nowhere"))
    monkeypatch.setenv("RUNNER_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(BenchmarkError) as raised:
        ACEBenchmark().size()
    message = str(raised.value)
    assert "\n" not in message and "data_dir=" in message and "--data-dir" in message


def test_beeai_adapter_constructions_seed():
    """BeeAI's "Adapters" snippets, with only their import lines changed and the hosted ``openai:gpt-4o`` replaced
    by the offline mock (``ollama:llama3.1:8b`` stays: building it reaches no server)."""
    from deepeval.models import DeepEvalBaseLLM
    from ragas.llms.base import InstructorBaseRagasLLM

    from runner.integrations import DeepEvalLLM
    from runner.models import ChatModel

    # Create from a model name string
    eval_llm = DeepEvalLLM.from_name("mock:echo")

    # Or wrap an existing ChatModel
    model = ChatModel.from_name("ollama:llama3.1:8b")
    wrapped = DeepEvalLLM(model)

    assert isinstance(eval_llm, DeepEvalBaseLLM) and eval_llm.generate("ping") == "ping"
    assert wrapped.get_model_name() == "ollama:llama3.1:8b" and wrapped.load_model() is model

    from runner.integrations import InstructorRagasLLM

    # Create from a model name string
    eval_llm = InstructorRagasLLM.from_name("mock:echo")

    # Or wrap an existing ChatModel
    model = ChatModel.from_name("ollama:llama3.1:8b")
    wrapped = InstructorRagasLLM(model)

    assert isinstance(eval_llm, InstructorBaseRagasLLM) and isinstance(wrapped, InstructorBaseRagasLLM)
    assert eval_llm.chat_model.name == "mock:echo" and wrapped.chat_model is model
