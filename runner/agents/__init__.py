"""Built-in solutions (reference agents) and their tools.

``SOLUTIONS`` maps each built-in name to an import path; modules are imported only when their solution is used.
"""

SOLUTIONS: dict[str, str] = {
    "acebench": "runner.agents.acebench:ACEBenchAgent",
    "calculator": "runner.agents.calculator:calculator",
    "chat": "runner.agents.chat:chat",
    "hotpotqa-agent": "runner.agents.hotpotqa:hotpotqa_agent",
    "reference": "runner.agents.reference:reference",
}
