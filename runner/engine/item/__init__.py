"""The path of one work item, the same in every executor: :func:`~runner.engine.item.execute.execute_one` runs a
fresh copy of the task through the built solution (:mod:`.solution`) under its timeout, with anything user code does
besides returning caught (:mod:`.guard`) and a blocked event loop seen (:mod:`.watchdog`); scores it with every
metric once (:mod:`.scoring`); rolls the outcome up into one status and one record (:mod:`.record`, :mod:`.outcome`)
and writes it once.

May import ``core``, ``storage``, ``traffic`` and the engine's run-level modules (``context``, ``plan``, ``live``);
never the pool, Ray, a plug-in or a face.
"""
