"""The GAIA baseline agent: its final-answer parsing (GAIA's template), its tools (reading files, the calculator,
Python in a subprocess killed with its process group at its time limit), its loop against the scripted
OpenAI-compatible server (which stands in for a model server: no language model runs here), and its live tools
against the fake APIs on loopback."""

from __future__ import annotations

import asyncio
import time

import psutil
import pytest

from runner.benchmarks.gaia import GAIABenchmark
from runner.core.errors import ConfigError
from runner.core.task import Task
from runner.models import ChatModel, MockModel
from runner.registry import solution_spec
from runner.solutions.gaia import GAIA_SYSTEM_PROMPT, Workspace, parse_final_answer, run_python, solve_task
from runner.solutions.gaia.mock import arithmetic
from runner.solutions.tools import ToolError
from runner.solutions.web import LiveTools
from tests.support.fake_web import FakeWeb
from tests.support.gaia_sample import SALES, write_sample


@pytest.fixture
def tasks(tmp_path):
    return {task.id: task for task in GAIABenchmark(str(write_sample(tmp_path / "gaia")))}


@pytest.mark.parametrize(("text", "answer"), [
    ("Thinking...\nFINAL ANSWER: 42", "42"),
    ("FINAL ANSWER: first\nmore thoughts\nFINAL ANSWER:  Paris, Rome \n", "Paris, Rome"),
    ("**FINAL ANSWER:** seagull", "seagull"),
    ("Final answer: heron\n\nThat is all.", "heron"),
    ("FINAL ANSWER:\n\n  3.5", "3.5"),
    ("The answer is 42.", None), ("FINAL ANSWER:   ", None), (None, None),
])
def test_the_answer_is_what_follows_the_last_final_answer_marker(text, answer):
    assert parse_final_answer(text) == answer


def test_the_system_prompt_is_gaias():
    assert GAIA_SYSTEM_PROMPT.startswith("You are a general AI assistant. I will ask you a question. Report your "
                                         "thoughts, and finish your answer with the following template: FINAL "
                                         "ANSWER: [YOUR FINAL ANSWER].")
    assert GAIA_SYSTEM_PROMPT.endswith("depending of whether the element to be put in the list is a number or a "
                                       "string.")


async def test_python_runs_in_the_working_directory_without_the_runs_secrets(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret")
    (tmp_path / "data.txt").write_text("7")
    code = "import os, sys; print(int(open('data.txt').read()) * 6); print(os.environ.get('OPENAI_API_KEY')); " \
           "sys.exit(3)"
    result = await run_python(code, tmp_path, timeout=30)
    assert result == {"stdout": "42\nNone\n", "stderr": "", "exit_code": 3, "timed_out": False}
    failed = await run_python("1/0", tmp_path, timeout=30)
    assert failed["exit_code"] == 1 and "ZeroDivisionError" in failed["stderr"]


async def test_python_past_its_time_limit_is_killed_with_its_children(tmp_path):
    code = ("import subprocess, sys, time\n"
            "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\n"
            "print(child.pid, flush=True)\n"
            "time.sleep(120)\n")
    started = time.monotonic()
    result = await run_python(code, tmp_path, timeout=2)
    assert result["timed_out"] and result["exit_code"] is None and time.monotonic() - started < 30
    child = int(result["stdout"].split()[0])
    deadline = time.monotonic() + 10
    while psutil.pid_exists(child) and psutil.Process(child).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the program's child outlived the time limit"
        await asyncio.sleep(0.05)


async def test_a_cancelled_call_kills_the_program(tmp_path):
    marker = tmp_path / "pid"
    code = f"import os, time; open({str(marker)!r}, 'w').write(str(os.getpid())); time.sleep(120)"
    call = asyncio.create_task(run_python(code, tmp_path, timeout=120))
    while not marker.exists() or not marker.read_text():
        await asyncio.sleep(0.05)
    pid = int(marker.read_text())
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


async def test_a_programs_output_is_cut(tmp_path):
    result = await run_python("print('x' * 100000)", tmp_path, timeout=30, max_output=1000)
    assert result["stdout"] == "x" * 1000 + "\n[output cut at 1000 bytes]" and result["exit_code"] == 0


async def test_read_file_pages_through_the_attachment_and_stays_in_the_directory(tasks, monkeypatch):
    from runner.solutions.gaia import tools

    monkeypatch.setattr(tools, "MAX_CHARS", 20)
    with Workspace(tasks["l2-sales"].metadata["attachment"]) as workspace:
        assert (workspace.directory / "l2-sales.xlsx").is_file(), "the attachment is copied in"
        first = await workspace.run("read_file", {})
        assert first["reader"] == "openpyxl" and first["text"] == "## sheet Sales\nRegio"
        rest = await workspace.run("read_file", {"path": "l2-sales.xlsx", "offset": first["next_offset"]})
        assert rest["offset"] == 20 and rest["text"].startswith("n,Sales")
        (workspace.directory / "out.txt").write_text("written by a program")
        assert (await workspace.run("read_file", {"path": "out.txt"}))["text"] == "written by a program"
        with pytest.raises(ToolError, match="outside it"):
            await workspace.run("read_file", {"path": "../../etc/passwd"})
        with pytest.raises(ToolError, match="there is no file 'x.csv'; the working directory holds: l2-sales.xlsx, "
                                            "out.txt"):
            await workspace.run("read_file", {"path": "x.csv"})
        directory = workspace.directory
    assert not directory.exists()
    with Workspace(None) as workspace, pytest.raises(ToolError, match="this task has no attached file"):
        await workspace.run("read_file", {})


SALES_EPISODE = [
    {"tool_calls": [{"name": "read_file", "arguments": {}}]},
    {"tool_calls": [{"name": "python", "arguments": {
        "code": "import openpyxl\nsheet = openpyxl.load_workbook('l2-sales.xlsx').active\n"
                "print(sum(row[1] for row in sheet.iter_rows(min_row=2, values_only=True)))"}}]},
    {"tool_calls": [{"name": "calculator", "arguments": {"expression": "300 / 1"}},
                    {"name": "nope", "arguments": {}}]},
    {"content": "The sheet sums to 300.\nFINAL ANSWER: 300"},
]


async def test_the_agent_calls_its_tools_and_answers_in_gaias_template(model_server, tasks):
    model_server.set_policy(SALES_EPISODE)
    model = ChatModel.from_name("vllm:scripted", base_url=model_server.url)
    result = await solve_task(model, tasks["l2-sales"], LiveTools())
    assert result.output == {"model_answer": "300", "reasoning_trace": "The sheet sums to 300.\nFINAL ANSWER: 300"}
    calls = [step for step in result.trajectory if step["type"] == "tool_call"]
    assert [c["name"] for c in calls] == ["read_file", "python", "calculator", "nope"]
    assert calls[1]["result"]["stdout"] == f"{sum(v for _, v in SALES)}\n" and calls[2]["result"] == {"result": 300.0}
    assert calls[3]["error"].startswith("there is no tool 'nope'")
    assert result.meta["turns"] == 4 and result.meta["stopped"] == "answer"
    first = model_server.requests[0].body
    assert first["messages"][0]["content"].startswith(GAIA_SYSTEM_PROMPT)
    assert first["messages"][1]["content"].endswith("Attached file: l2-sales.xlsx (in your working directory: read "
                                                    "it with read_file, or open it by that name in python).")
    assert [t["function"]["name"] for t in first["tools"]] == ["read_file", "calculator", "python"]


async def test_a_model_that_never_uses_the_template_answers_none(model_server, tasks):
    model_server.set_policy(["I think it is 84."])
    model = ChatModel.from_name("vllm:scripted", base_url=model_server.url)
    result = await solve_task(model, tasks["l1-calc"], LiveTools(), max_turns=2)
    assert result.output["model_answer"] is None and result.meta["stopped"] == "max_turns"
    assert result.meta["turns"] == 3 and "tools" not in model_server.requests[-1].body


async def test_the_agent_uses_the_live_tools_when_they_are_on():
    script = [
        {"tool_calls": [{"name": "openmeteo", "arguments": {"location_name": "Berlin", "country": "Germany"}}]},
        {"tool_calls": [{"name": "wikipedia_page", "arguments": {"title": "Ed Wood"}}]},
        {"content": "FINAL ANSWER: 3.4"},
    ]
    with FakeWeb() as web:
        live = LiveTools("wikipedia,openmeteo", wikipedia_url=web.wikipedia_url, openmeteo_url=web.url)
        result = await solve_task(MockModel(script), Task(id="t", input="How cold is Berlin?",
                                                          metadata={"attachment": None}), live)
    calls = [step for step in result.trajectory if step["type"] == "tool_call"]
    assert calls[0]["result"]["current"]["temperature_2m"] == 3.4
    assert calls[1]["result"]["title"] == "Ed Wood" and result.output["model_answer"] == "3.4"


def test_the_agents_arguments_are_checked_before_anything_runs(tmp_path):
    benchmark = GAIABenchmark(str(write_sample(tmp_path / "gaia")))
    for arguments, message in (({"max_turns": 0}, "max_turns must be an integer of at least 1"),
                               ({"python_timeout": -1}, "python_timeout must be a positive number"),
                               ({"tools": "wikipedia,web"}, "unknown live tool 'web'")):
        with pytest.raises(ConfigError, match=message):
            solution_spec("gaia-agent", arguments, model="mock", benchmark=benchmark).check()


def test_the_mock_finds_the_arithmetic_of_a_question():
    assert arithmetic("What is 12 * (3 + 4)?") == "12 * (3 + 4)"
    assert arithmetic("In 2023, how many?") is None and arithmetic("Compute 2+2 then 10 - 3.5.") == "10 - 3.5"
