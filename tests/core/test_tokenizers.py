"""A served model's tokenizer loads in the worker's process as soon as its replica is announced, on a thread of its
own, whatever the process has imported: the first items' context checks then find it loaded (W7 in
docs/performance.md: loaded on the first call, it held every call in flight for about 5 s)."""

import subprocess
import sys
import threading
from pathlib import Path

from runner.core import tokenizers

ANNOUNCE_ALONE = r"""
import sys, threading
from runner.core import served
served.announce_tokenizer(sys.argv[1])
for thread in threading.enumerate():
    if thread.name == "runner-tokenizer-preload":
        thread.join()
from runner.core import tokenizers
found = tokenizers._load.cache_info().currsize, tokenizers.load(sys.argv[1])[1]
print(found, "runner.models" in sys.modules)
"""


def test_announcing_a_replica_loads_its_tokenizer_before_the_model_layer_is_imported(embedded_dir: Path) -> None:
    """A worker starts its replicas before it builds the solution (which imports the model layer): the load must
    not wait for that import."""
    done = subprocess.run([sys.executable, "-c", ANNOUNCE_ALONE, str(embedded_dir)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["(1,", "8192)", "False"]  # loaded once, SmolLM2's context, no model layer


def test_a_second_preload_of_one_tokenizer_starts_no_thread(embedded_dir: Path) -> None:
    tokenizers.preload(str(embedded_dir))
    before = {thread.ident for thread in threading.enumerate()}
    tokenizers.preload(str(embedded_dir))
    assert {thread.ident for thread in threading.enumerate()} <= before
    assert tokenizers.load(str(embedded_dir))[1] == 8192


def test_a_tokenizer_that_cannot_load_turns_the_check_off(tmp_path: Path) -> None:
    assert tokenizers.load(str(tmp_path / "no-model")) is None
