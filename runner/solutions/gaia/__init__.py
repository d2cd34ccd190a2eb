"""The GAIA baseline agent: :func:`gaia_agent` (``--solution gaia-agent``) and its tools.

May import ``runner.core``, ``runner.models``, GAIA's attachments (``runner.benchmarks.gaia``) and the live tools
(``runner.solutions.web``); never the engine or storage.
"""

from runner.solutions.gaia.agent import GAIA_SYSTEM_PROMPT, gaia_agent, parse_final_answer, solve_task
from runner.solutions.gaia.tools import Workspace, run_python

__all__ = ["GAIA_SYSTEM_PROMPT", "Workspace", "gaia_agent", "parse_final_answer", "run_python", "solve_task"]
