"""Local lm-eval tasks over the shared HotpotQA data, loaded through the product's real path (``-B include_path``),
and lm-eval's own command run on them as the reference.

The Hugging Face Hub is not reachable here, so the tasks are lm-eval YAMLs over local JSON files written from
``../shared/data/hotpotqa_dev_sample`` at test time (nothing copied into the project). They cover each output type:

- ``hotpot_gen``: ``generate_until`` with two filter ensembles and 3-shot prompts drawn from a training split;
- ``hotpot_yesno``: ``multiple_choice`` (the yes/no questions);
- ``hotpot_type``: ``multiple_choice`` whose prompt is a ``!function`` of the folder's own ``utils.py`` (it must
  score on Ray workers, which cannot import that file by name);
- ``hotpot_mc``: a group of the two, its ``acc`` the size-weighted mean (as MMLU's groups);
- ``hotpot_ppl``: ``loglikelihood_rolling`` over paragraphs (corpus-level perplexities), its ``data_files``
  relative to the task folder, read from the working directory as lm-eval reads them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

EMBEDDED = "transformers:smollm2-135m-instruct"
TASKS = "hotpot_gen,hotpot_mc,hotpot_ppl"
LEAVES = ("hotpot_gen", "hotpot_yesno", "hotpot_type", "hotpot_ppl")
N_DOCS = {"hotpot_gen": 8, "hotpot_yesno": 10, "hotpot_type": 10, "hotpot_ppl": 6}
OFFLINE = {"HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}

GEN = """\
task: hotpot_gen
dataset_path: json
dataset_kwargs:
  data_files:
    train: {data}/gen_train.json
    test: {data}/gen_test.json
training_split: train
test_split: test
fewshot_split: train
output_type: generate_until
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_target: " {{{{answer}}}}"
target_delimiter: ""
num_fewshot: 3
generation_kwargs:
  until: ["\\n", "Question:"]
  do_sample: false
  max_gen_toks: 12
filter_list:
  - name: strict-match
    filter:
      - function: regex
        regex_pattern: "^ ?([^\\\\n]+)"
      - function: take_first
  - name: flexible-extract
    filter:
      - function: regex
        group_select: -1
        regex_pattern: "([A-Z][\\\\w]+)"
      - function: take_first
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
    ignore_punctuation: true
metadata:
  version: 1.0
"""

YESNO = """\
task: hotpot_yesno
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}/yesno_test.json
test_split: test
output_type: multiple_choice
doc_to_text: "Question: {{{{question}}}}\\nAnswer:"
doc_to_choice: ["yes", "no"]
doc_to_target: "{{{{0 if answer == 'yes' else 1}}}}"
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
  - metric: acc_norm
    aggregation: mean
    higher_is_better: true
metadata:
  version: 2.0
"""

TYPE = """\
task: hotpot_type
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}/type_test.json
test_split: test
output_type: multiple_choice
doc_to_text: !function utils.type_prompt
doc_to_choice: ["bridge", "comparison"]
doc_to_target: "{{{{0 if type == 'bridge' else 1}}}}"
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""

UTILS = '''\
"""Prompt functions of the local test tasks (loaded by lm-eval from this file, by path)."""


def type_prompt(doc):
    return f"Is this question a bridge or a comparison question?\\nQuestion: {doc['question']}\\nAnswer:"
'''

GROUP = """\
group: hotpot_mc
task:
  - hotpot_yesno
  - hotpot_type
aggregate_metric_list:
  - metric: acc
    aggregation: mean
    weight_by_size: true
metadata:
  version: 1.0
"""

PPL = """\
task: hotpot_ppl
dataset_path: json
dataset_kwargs:
  data_files:
    test: data/ppl_test.json
test_split: test
output_type: loglikelihood_rolling
doc_to_text: ""
doc_to_target: "{{{{text}}}}"
metric_list:
  - metric: word_perplexity
    aggregation: weighted_perplexity
    higher_is_better: false
  - metric: byte_perplexity
    aggregation: weighted_perplexity
    higher_is_better: false
  - metric: bits_per_byte
    aggregation: bits_per_byte
    higher_is_better: false
metadata:
  version: 1.0
"""


def write_tasks(folder: Path, shared: Path, sizes: dict[str, int] | None = None) -> Path:
    """The task folder (YAMLs, ``utils.py``, ``data/``) from the shared HotpotQA files, with ``sizes`` documents per
    task (default :data:`N_DOCS`; ``scripts/bench_w9.py`` takes more)."""
    sizes = {**N_DOCS, **(sizes or {})}
    data = folder / "data"
    data.mkdir(parents=True, exist_ok=True)
    simplified = json.loads((shared / "hotpotqa_dev_sample" / "hotpot_dev_v1_simplified.json").read_text())
    numbered = [{"id": index, **record} for index, record in enumerate(simplified)]
    spans = [record for record in numbered if record["answer"] not in ("yes", "no")]
    yesno = [record for record in numbered if record["answer"] in ("yes", "no")]
    bridges = [record for record in spans if record["type"] == "bridge"]
    comparisons = [record for record in spans if record["type"] == "comparison"]
    files: dict[str, Any] = {
        "gen_train.json": spans[:40],
        "gen_test.json": spans[40:40 + sizes["hotpot_gen"]],
        "yesno_test.json": yesno[:sizes["hotpot_yesno"]],
        "type_test.json": [record for pair in zip(bridges[100:], comparisons[100:]) for record in pair][
            :sizes["hotpot_type"]],
    }
    distractor = json.loads((shared / "hotpotqa_dev_sample" / "hotpot_dev_distractor_v1_100.json").read_text())
    files["ppl_test.json"] = [{"title": title, "text": " ".join(sentences)}
                              for record in distractor[:10] for title, sentences in record["context"][:3]][
        :sizes["hotpot_ppl"]]
    for name, records in files.items():
        (data / name).write_text(json.dumps(records))
    for name, text in (("hotpot_gen.yaml", GEN), ("hotpot_yesno.yaml", YESNO), ("hotpot_type.yaml", TYPE),
                       ("hotpot_mc.yaml", GROUP), ("hotpot_ppl.yaml", PPL)):
        (folder / name).write_text(text.format(data=data))
    (folder / "utils.py").write_text(UTILS)
    return folder


@pytest.fixture(scope="session")
def lm_tasks(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    """The local task folder (see the module docstring); lm-eval reads ``hotpot_ppl``'s data relative to it."""
    return write_tasks(tmp_path_factory.mktemp("lm-tasks"), shared_data)


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """No Hub here: datasets and transformers read local files only."""
    for name, value in OFFLINE.items():
        monkeypatch.setenv(name, value)


def run_lm_eval(tasks: Path, out: Path, model_args: str, *, model: str = "hf", extra: tuple[str, ...] = ()
                ) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """``lm_eval --model MODEL --model_args ARGS --tasks TASKS --include_path TASKS --batch_size 1 --log_samples`` in
    the task folder, and what it wrote: the results dictionary and each task's samples.

    Raises:
        AssertionError: the command failed (its output in the message).
    """
    command = [sys.executable, "-m", "lm_eval", "--model", model, "--model_args", model_args, "--tasks", TASKS,
               "--include_path", str(tasks), "--batch_size", "1", "--log_samples", "--output_path", str(out), *extra]
    if model == "hf":
        command += ["--device", "cpu"]
    done = subprocess.run(command, cwd=tasks, env={**os.environ, **OFFLINE}, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    (results_file,) = out.glob("*/results_*.json")
    samples = {}
    for path in out.glob("*/samples_*.jsonl"):
        task = path.name.removeprefix("samples_").rsplit("_", 1)[0]
        samples[task] = [json.loads(line) for line in path.read_text().splitlines()]
    return json.loads(results_file.read_text()), samples


@pytest.fixture(scope="session")
def lm_eval_reference(lm_tasks: Path, embedded_dir: Path, tmp_path_factory: pytest.TempPathFactory
                      ) -> tuple[dict[str, Any], dict[str, list[dict[str, Any]]]]:
    """``lm_eval --model hf`` itself on the embedded model's weights at batch size 1: the numbers to match."""
    return run_lm_eval(lm_tasks, tmp_path_factory.mktemp("lm-eval-out"), f"pretrained={embedded_dir}")
