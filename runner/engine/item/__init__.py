"""The path of one work item, the same in every executor: :func:`~runner.engine.item.execute.execute_one` runs a
fresh copy of the task through the built solution (:mod:`.call_solution`) under its timeout, with anything user code does
besides returning caught (:mod:`.guard`) and a blocked event loop seen (:mod:`.watchdog`); scores it with every
metric once (:mod:`.scoring`); rolls the outcome up into one status and one record (:mod:`.build_record`, :mod:`.outcome`)
and writes it once.

``execute_one`` is the one entry: the sequential executor and every Ray worker call it, and its steps are private to
this package. The sequential executor passes ``write_behind=True`` to write each record on its own loop while the
next item runs. The one other way to a record is :func:`~runner.engine.item.execute.record_fault`, by which an
executor records an item that could not end where it ran; no solution runs there.

The types an executor sees (the first three importable from :mod:`.execute`):

- :class:`~runner.engine.item.outcome.ItemResult`: what the executor gets back for each item and acts on: the
  record's status, whether this write stored it, the cause of a failure, the metric values for the live statistics.
  Never the record.
- :class:`~runner.engine.item.execute.PendingWrite`: with ``write_behind`` only, the built record not yet written:
  its status and cause (for the server watch) and :meth:`~runner.engine.item.execute.PendingWrite.write`.
- :class:`~runner.engine.item.outcome.Fault`: why an executor records an item itself (status, error type, message,
  the worker it happened on), given to ``record_fault``.
- :class:`~runner.engine.item.watchdog.Alarm`: the watchdog's, why a worker (or the sequential executor's item loop)
  must be given up (a blocked loop, memory over the limit), naming the item it blames; the executor turns it into a
  ``Fault``.

Inside the package, :class:`~runner.engine.item.outcome.SolutionOutcome` is how the solution ended (its output or
error, times, tries), and the roll-up of that outcome and the metrics into one status is :mod:`.build_record`'s own.

May import ``core``, ``storage``, ``traffic`` and the engine's run-level modules (``context``, ``plan``, ``live``);
never the pool, Ray, a plug-in or a face.
"""
