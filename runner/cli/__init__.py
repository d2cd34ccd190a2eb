"""``python -m runner``: run, report, status, compare, list, submit (Kubernetes) and k8s.

No subcommand means ``run``. Bad input ends with exit status 2 and one line on stderr naming the problem and the
way out; a run that stopped after writing started (a model server that speaks another protocol, a storage outage)
with exit status 3, a spent budget with exit status 4, each with one line; an unexpected failure keeps its traceback
(exit status 1). Ctrl-C (SIGINT) and SIGTERM (what Kubernetes and ``timeout`` send) stop a run the same way: the
run is cancelled, its lease released, finished records kept, and one line says what is kept: nothing (stopped
before the run wrote its ``run.json``), no record yet, or the finished records (exit status 130 and 143, the shell's
128 + signal number).

A face: may import every layer below it (core, models, storage, registry, engine, serving, report, kuberay, the
evaluators); nothing imports it but ``runner/__main__.py``.
"""

from runner.cli.main import COMMANDS, build_parser, main

__all__ = ["COMMANDS", "build_parser", "main"]
