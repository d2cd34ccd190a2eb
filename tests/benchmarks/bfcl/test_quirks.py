"""What the official evaluator does that looks wrong, shown on the official code itself and kept by ours
(``docs/bfcl.md`` lists them), and the few places where ours deliberately does not run what the official code runs."""

from __future__ import annotations

import copy

import pytest

from runner.benchmarks.bfcl import Environment
from runner.benchmarks.bfcl.decode import DecodeError, parse_python, strip_prompting
from runner.benchmarks.bfcl.scoring import decode_ast
from runner.core.solution import SolutionOutput
from tests.benchmarks.bfcl.outputs import multi_turn_variants


def _task(bfcl_tasks, task_id):
    category = task_id.rsplit("_", 1)[0]
    return next(task for task in bfcl_tasks[category] if task.id == task_id)


def _both(reference_scorer, text):
    """(official decoded, ours decoded) of prompting text, Python."""
    official = reference_scorer.model_handler_utils.default_decode_ast_prompting(text)
    return official, decode_ast(text, "python")


@pytest.mark.parametrize(("text", "decoded"), [
    ("[f('x', b=1)]", [{"f": {"b": 1}}]),                       # positional arguments are dropped
    ("[f(a=+5, b=not 1, c=~2)]", [{"f": {"a": -5, "b": -1, "c": -2}}]),   # every unary operator negates
    ("[f(a=g(1), b=g(x=1))]", [{"f": {"a": "g(1)", "b": {"g": {"x": 1}}}}]),  # nested calls: text or a dict
    ("[f(a=2*3, b='ab'*2, c=2**-1)]", [{"f": {"a": 6, "b": "abab", "c": 0.5}}]),  # arithmetic is computed
    ("[f(a=x[0], b=city)]", [{"f": {"a": "x[0]", "b": "city"}}]),   # subscripts and names as their text
    ("f(a=1)", [{"f": {"a": 1}}]),                               # the missing brackets are added
    ("```\n[f(a=1)]\n```", [{"f": {"a": 1}}]),                   # a bare fence is stripped
    ("[f(a=1), g()]", [{"f": {"a": 1}}, {"g": {}}]),
])
def test_decoding_quirks_are_the_official_ones(reference_scorer, text, decoded) -> None:
    official, ours = _both(reference_scorer, text)
    assert official == ours == decoded


@pytest.mark.parametrize("text", [
    "```python\n[f(a=1)]\n```",    # "python" stays in front of the list: a subscript, not a call
    "[f(a={1, 2})]",                # sets are not read
    "[f(a=lambda: 1)]",
    "[f(a=x+1)]",                   # eval of an unknown name
    "Sure: [f(a=1)]",
    "[f(a=1), 3]",
])
def test_what_fails_to_decode_fails_in_both(reference_scorer, text) -> None:
    with pytest.raises(Exception):  # noqa: B017 - the official decoder raises whatever Python raises
        reference_scorer.model_handler_utils.default_decode_ast_prompting(text)
    with pytest.raises(DecodeError):
        decode_ast(text, "python")


def test_a_python_fence_fails_an_item_that_a_bare_fence_passes(bfcl_tasks, official_verdict) -> None:
    task = _task(bfcl_tasks, "simple_python_0")
    for fence, expected in (("```\n", True), ("```python\n", False)):
        output = f"{fence}[calculate_triangle_area(base=10, height=5)]\n```"
        assert official_verdict(task, output)["valid"] is expected
        assert task.metrics[0](SolutionOutput(output=output)).result == float(expected)


def test_expressions_the_official_decoder_evals_beyond_literals_are_not_run_here(reference_scorer) -> None:
    # The official decoder hands a binary operation to eval: builtins run (and so would anything else).
    assert reference_scorer.model_handler_utils.default_decode_ast_prompting("[f(a=len('ab')+1)]") == [{"f": {"a": 3}}]
    with pytest.raises(DecodeError, match="not evaluated"):
        decode_ast("[f(a=len('ab')+1)]", "python")
    with pytest.raises(DecodeError, match="too large"):
        parse_python("[f(a=10**10**10)]")


def test_java_prompting_text_loses_a_hashmap_initializer_while_a_tool_call_keeps_it(bfcl_tasks, official_verdict):
    # tree-sitter reads `new HashMap<..>() {{ put(..); }}` as an object creation and BFCL's parser keeps only
    # `new HashMap<..>()`: a map with entries cannot be written in prompting mode.
    task = _task(bfcl_tasks, "simple_java_1")
    hashmap = 'new HashMap<String, String>() {{ put("limit", 50); put("schemaFilter", "public"); }}'
    text = f'[SQLCompletionAnalyzer.makeProposalsFromObject(object="Customers", useShortName=true, params={hashmap})]'
    calls = [{"name": "SQLCompletionAnalyzer_makeProposalsFromObject",
              "arguments": {"object": "Customers", "useShortName": "true", "params": hashmap}}]
    for output, expected in ((text, False), (calls, True)):
        assert official_verdict(task, output)["valid"] is expected
        assert task.metrics[0](SolutionOutput(output=output)).result == float(expected)
    assert decode_ast(text, "java")[0]["SQLCompletionAnalyzer.makeProposalsFromObject"]["params"] == \
        "new HashMap<String,String>()"


def test_official_instances_carry_over_between_scorings_of_one_item(bfcl_tasks, reference_scorer, official_entries):
    """The official executor keeps each item's API instances in module globals (keyed by model name and item id):
    scoring a wrong answer and then the right one in one process fails the right one. Ours starts fresh each time."""
    task = _task(bfcl_tasks, "multi_turn_base_4")
    right = multi_turn_variants(task, 0, every_kind=False)["gold"]
    wrong = [*right[:-1], ["[post_tweet(content='Another text', mentions=['@Julia'], tags=['#currenttechtrend'])]"]]
    runner_module = reference_scorer.eval_runner

    def official(output):
        entry = copy.deepcopy(official_entries("multi_turn_base")[task.id])
        return runner_module._evaluate_single_multi_turn_entry(
            reference_scorer.prompting, task.id, copy.deepcopy(output), copy.deepcopy(task.ground_truth), entry,
            "carry-over", "multi_turn_base")["valid"]

    assert official(wrong) is False
    assert official(right) is False          # the right answer, scored after the wrong one, fails
    for output, expected in ((wrong, 0.0), (right, 1.0), (right, 1.0)):
        assert task.metrics[0](SolutionOutput(output=output)).result == expected


def test_calls_in_a_turn_whose_ground_truth_is_empty_are_not_checked(bfcl_tasks, official_verdict) -> None:
    """miss_param items end a turn with an empty ground truth (the model should ask for what is missing); the
    official checker skips those turns (``multi_turn_irrelevance_checker`` exists but is never called)."""
    task = next(t for t in bfcl_tasks["multi_turn_miss_param"] if [] in t.ground_truth)
    empty = task.ground_truth.index([])
    answer = copy.deepcopy(multi_turn_variants(task, 0, every_kind=False)["gold"])
    answer[empty] = ["[ls()]", "[pwd()]"] if "GorillaFileSystem" in task.input["involved_classes"] else answer[empty]
    assert official_verdict(task, answer)["valid"] is True
    assert task.metrics[0](SolutionOutput(output=answer)).result == 1.0


def test_method_names_inside_strings_are_rewritten_as_the_official_executor_does(bfcl_tasks) -> None:
    task = _task(bfcl_tasks, "multi_turn_base_4")
    environment = Environment(task.input["involved_classes"], task.input["initial_config"], False, "m", task.id)
    environment.execute(["authenticate_twitter(username='john', password='john1234')"])
    environment.execute(["post_tweet(content='run ls() first')"])
    tweets = environment.state()["TwitterAPI"]["tweets"]
    content = tweets[max(tweets)]["content"]
    assert content.startswith("run m_multi_turn_base_4_GorillaFileSystem_instance.ls() first")


def test_refused_and_unknown_calls_become_error_results(bfcl_tasks) -> None:
    task = _task(bfcl_tasks, "multi_turn_base_4")
    environment = Environment(task.input["involved_classes"], task.input["initial_config"], False, "m", task.id)
    assert environment.execute(["exit()", "print(x=1)", "ls(bogus=1)"]) == [
        "Error during execution: Function call exit is not allowed.",
        "Error during execution: name 'print' is not defined",
        "Error during execution: GorillaFileSystem.ls() got an unexpected keyword argument 'bogus'",
    ]
    assert strip_prompting("```python\n[f()]\n```") == "[python\n[f()]"
