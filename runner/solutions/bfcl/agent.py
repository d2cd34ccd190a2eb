"""The ``bfcl`` solution: a model answers BFCL items as BFCL's own handlers make it answer them.

The loops follow ``BaseHandler`` of ``bfcl-eval`` 2026.3.23 (``bfcl_eval/model_handler/base_handler.py``:
``inference_single_turn_FC``, ``inference_single_turn_prompting``, ``inference_multi_turn_FC``,
``inference_multi_turn_prompting``) with the messages of its OpenAI-compatible handler
(``bfcl_eval/model_handler/api_inference/openai_completion.py``):

- single-turn: one call; the output is the reply text (prompting) or the list of tool calls (native);
- multi-turn: per user turn, steps until a step holds no call that decodes (or after
  :data:`~runner.solutions.bfcl.prompts.MAXIMUM_STEP_LIMIT` more steps, which stops the item: BFCL's force
  termination); each step's calls run on the item's own simulated APIs and their results go back (tool messages,
  or one user message in prompting mode). Functions held out in miss_func are offered at their turn with BFCL's
  message. The output holds, per turn, the list of the steps' outputs: what the ``accuracy`` metric scores.
"""

from __future__ import annotations

import copy
from typing import Any, Literal

from runner.benchmarks.bfcl import Environment
from runner.benchmarks.bfcl.decode import DecodeError
from runner.benchmarks.bfcl.multi_turn import is_empty_execute_response
from runner.benchmarks.bfcl.scoring import decode_execute
from runner.core.errors import ConfigError
from runner.core.plugin import declare
from runner.core.solution import SolutionOutput
from runner.core.task import Task
from runner.models import ChatModel, ChatReply, tool_message
from runner.solutions.bfcl.prompts import (
    MAXIMUM_STEP_LIMIT,
    additional_functions_message,
    convert_to_tool,
    execution_results_message,
    with_system_prompt,
)

MOCK_POLICY = "bfcl"
"""The mock policy that bare ``--model mock`` plays with this solution (:mod:`runner.solutions.bfcl.mock`)."""


def step_output(reply: ChatReply, native: bool) -> Any:
    """What one model reply contributes to the output: its text (prompting) or its tool calls, each
    ``{"name", "arguments"}`` with the arguments as the server sent them (native; ``[]`` when it called none)."""
    if not native:
        return reply.text
    return [{"name": call.name, "arguments": call.raw_arguments} for call in reply.tool_calls]


@declare("bfcl", needs={"model", "model_base_url"}, mock_policy="runner.solutions.bfcl.mock:policy")
class BFCLAgent:
    """The model-driven BFCL solution (``--solution bfcl``, or ``--model X`` alone).

    Built once per worker; an instance is stateless across items (each multi-turn item gets fresh simulated APIs),
    so concurrent items can share it, and it pickles.

    Args:
        model: ``provider:model`` (``--model``); bare ``mock`` plays ``mock:bfcl``.
        model_base_url: its server's API root (``--model-base-url``).
        mode: ``prompting`` (BFCL's default system prompt, calls written as text; works with any chat model) or
            ``native`` (the functions offered as tools through BFCL's own conversion; the server must support
            function calling).
        temperature, max_tokens: sampling settings (``None``: the server's defaults; BFCL samples at 0.001).

    Raises:
        ConfigError: an unknown ``mode``, or a model that cannot be built.
    """

    def __init__(self, model: str, model_base_url: str | None = None,
                 mode: Literal["prompting", "native"] = "prompting", temperature: float | None = None,
                 max_tokens: int | None = None) -> None:
        self.check_arguments(mode=mode)
        self.native = mode == "native"
        self.model = ChatModel.from_name(model, base_url=model_base_url, temperature=temperature,
                                         max_tokens=max_tokens, mock_policy=MOCK_POLICY)

    @staticmethod
    def check_arguments(mode: str = "prompting", **_: Any) -> None:
        """Reject an unknown ``mode`` before anything is written.

        Raises:
            ConfigError: naming the values it takes.
        """
        if mode not in ("prompting", "native"):
            raise ConfigError(f"bfcl: mode={mode!r}; use -S mode=prompting or -S mode=native")

    async def __call__(self, task: Task) -> SolutionOutput:
        """Answer one BFCL item.

        Raises:
            ModelError: a model call failed for good (the engine records the item as an error).
        """
        if "involved_classes" in task.input:
            return await self._multi_turn(task)
        return await self._single_turn(task)

    def _meta(self, **extra: Any) -> dict[str, Any]:
        return {"model": self.model.name, "mode": "native" if self.native else "prompting", **extra}

    async def _single_turn(self, task: Task) -> SolutionOutput:
        functions = task.input["functions"]
        turn = task.input["question"][0]
        if self.native:
            messages, tools = copy.deepcopy(turn), convert_to_tool(functions)
        else:
            messages, tools = with_system_prompt(turn, functions), None
        reply = await self.model.chat(messages, tools=tools)
        return SolutionOutput(success=True, output=step_output(reply, self.native),
                              trajectory=[*messages, reply.to_message(reasoning=True)],
                              meta=self._meta(finish_reason=reply.finish_reason, served_model=reply.model))

    async def _multi_turn(self, task: Task) -> SolutionOutput:
        inputs = task.input
        category = str(inputs.get("category", ""))
        environment = Environment(inputs["involved_classes"], inputs.get("initial_config") or {},
                                  long_context="long_context" in category, label="inference", item_id=task.id)
        functions = list(inputs["functions"])
        missed = inputs.get("missed_function") or {}
        tools = convert_to_tool(functions) if self.native else None
        messages: list[dict[str, Any]] = []
        trajectory: list[Any] = []
        turns: list[list[Any]] = []
        forced = False
        for index, turn_messages in enumerate(inputs["question"]):
            turn_messages = copy.deepcopy(turn_messages)
            if str(index) in missed:
                if self.native:
                    functions = functions + missed[str(index)]
                    tools = convert_to_tool(functions)
                turn_messages = [additional_functions_message(missed[str(index)], self.native)]
            if index == 0 and not self.native:
                turn_messages = with_system_prompt(turn_messages, functions)
            messages.extend(turn_messages)
            trajectory.extend(turn_messages)
            steps: list[Any] = []
            count = 0
            while True:
                reply = await self.model.chat(messages, tools=tools)
                messages.append(reply.to_message())
                trajectory.append(reply.to_message(reasoning=True))
                output = step_output(reply, self.native)
                steps.append(output)
                try:
                    calls = decode_execute(output)
                except DecodeError:
                    break
                if is_empty_execute_response(calls):
                    break
                results = environment.execute(calls)
                if self.native:
                    answers = [tool_message(call.id, result) for call, result in zip(reply.tool_calls, results)]
                else:
                    answers = [execution_results_message(results, calls)]
                messages.extend(answers)
                trajectory.extend(answers)
                count += 1
                if count > MAXIMUM_STEP_LIMIT:
                    forced = True
                    break
            turns.append(steps)
            if forced:
                break
        return SolutionOutput(success=True, output=turns, trajectory=trajectory,
                              meta=self._meta(forced_to_stop=forced, steps=[len(steps) for steps in turns]))
