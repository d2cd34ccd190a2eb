"""Progress: counts, errors, and a rate that leaves start-up out."""

import time

from runner.engine.progress import Progress


def test_rate_counts_from_the_first_finished_item():
    progress = Progress(total=5, bar=False, interval=3600)
    time.sleep(0.3)                      # start-up: no item finished yet
    progress.advance("ok")
    assert progress.snapshot()["rate"] is None and progress.snapshot()["eta_s"] is None
    time.sleep(0.05)
    progress.advance("error")
    progress.advance("timeout")
    snap = progress.snapshot()
    assert (snap["done"], snap["errors"], snap["total"]) == (3, 2, 5)
    # two items in the ~0.05 s since the first one, not three in the ~0.35 s since the start
    assert snap["rate"] > 3 / 0.35
    assert snap["eta_s"] == round(2 / snap["rate"], 1)
