"""W10 (issue 35): an evaluation matrix against the same cells run one by one.

``python scripts/bench_w10.py`` times whole commands, each in a process of its own, interleaved over ``--reps``
rounds (default 2), on the embedded model's CPU replicas:

- **served**: 2 models (the embedded model, and a second folder of the same weights named as another model) x 3
  benchmarks (HotpotQA's reader on the official sample and on BeeAI's example dataset, whose 2 records are all it
  has, and the toy benchmark with the chat solution; ``--items`` items each, default 20), 2 workers:
  - **matrix**: one ``python -m runner matrix`` of the 6 cells;
  - **separate**: the 6 cells as 6 ``python -m runner`` runs, one after another (each starts Ray and its replicas).
  Targets: the matrix at most 0.5 x the separate runs' total; replica starts at most models x workers (4: each
  model loaded once per worker at most), counted from the matrix's ``matrix.json``.
- **lm-eval**: the same 2 models x 3 lm-eval tasks of the tests (generation, two multiple choice; lm-eval's ``HFLM``
  in the workers, one load per model and worker shared by its 3 cells), 2 workers:
  - **matrix**: one ``python -m runner matrix``;
  - **lm_eval**: ``lm_eval --model hf --tasks A,B,C`` once per model, one after another.
  Target: the matrix at most 1.0 x lm_eval's total.

Each time is the command's wall time, Ray's start, the replicas' and models' loads and lm-eval's task index
included. The numbers go in docs/performance.md and the README's table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scripts.bench_w9 import timed  # noqa: E402
from tests.benchmarks.lmeval.conftest import write_tasks  # noqa: E402

EMBEDDED = "transformers:smollm2-135m-instruct"
SHARED = REPO.parent / "shared" / "data"
LM_TASKS = "hotpot_gen,hotpot_yesno,hotpot_type"


def second_model(work: Path, model_dir: Path) -> str:
    """The embedded model's weights in a folder of its own: another model to the runner (and to lm_eval)."""
    folder = work / "models" / "smollm2-copy"
    folder.mkdir(parents=True)
    for file in model_dir.iterdir():
        (folder / file.name).symlink_to(file)
    return f"transformers:{folder}"


def served_cells(items: int) -> list[dict]:
    sample = SHARED / "hotpotqa_dev_sample" / "hotpot_dev_distractor_v1_100.json"
    beeai = SHARED / "hotpotqa_beeai" / "dataset.json"
    return [
        {"benchmark": "hotpotqa", "args": {"answer_only": True}, "solution": "hotpotqa-reader", "data_dir": str(sample),
         "key": "hotpot-dev", "limit": items, "judge_model": "none"},
        {"benchmark": "hotpotqa", "args": {"answer_only": True}, "solution": "hotpotqa-reader", "data_dir": str(beeai),
         "key": "hotpot-beeai", "limit": items, "judge_model": "none"},
        {"benchmark": "toy", "args": {"n_tasks": items}, "solution": "chat", "solution_args": {"max_tokens": 16},
         "key": "toy"},
    ]


def single_run(model: str, cell: dict, storage: Path) -> list[str]:
    """The ``python -m runner`` command of one cell, alone."""
    command = [sys.executable, "-m", "runner", "-b", cell["benchmark"], "--model", model, "--workers", "2",
               "--storage", str(storage), "--log-format", "json", "--progress", "off"]
    for key, value in cell.get("args", {}).items():
        command += ["-B", f"{key}={json.dumps(value) if not isinstance(value, str) else value}"]
    for key, value in cell.get("solution_args", {}).items():
        command += ["-S", f"{key}={json.dumps(value) if not isinstance(value, str) else value}"]
    if model != EMBEDDED:  # the matrix serves it; a run alone is told to (the embedded model it serves anyway)
        command += ["--serve", model]
    for key in ("solution", "data_dir", "limit", "judge_model"):
        if key in cell:
            command += [f"--{key.replace('_', '-')}", str(cell[key])]
    return command


def matrix_command(work: Path, name: str, models: list[str], cells: list[dict], storage: Path) -> list[str]:
    config = work / f"{name}.yaml"
    config.write_text(yaml.safe_dump({"models": models, "benchmarks": cells, "storage": str(storage),
                                      "worker": {"num_workers": 2}, "log_format": "json", "progress": "off"}))
    return [sys.executable, "-m", "runner", "matrix", "--config", str(config)]


def replica_starts(storage: Path) -> int:
    manifest = json.loads((storage / "matrix.json").read_text())
    return sum(load["replica_starts"] for load in manifest["loads"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--items", type=int, default=20, help="items of each served cell")
    parser.add_argument("--docs", type=int, default=20, help="documents of each lm-eval task")
    parser.add_argument("--only", choices=("served", "lm-eval"), help="one of the two comparisons")
    parser.add_argument("--out", type=Path, help="write the results here as JSON")
    args = parser.parse_args()
    from runner.serving import embedded

    model_dir = embedded.model_dir()
    work = Path(tempfile.mkdtemp(prefix="bench-w10-"))
    models = [EMBEDDED, second_model(work, model_dir)]
    tasks = write_tasks(work / "tasks", SHARED, {"hotpot_gen": args.docs, "hotpot_yesno": args.docs,
                                                 "hotpot_type": args.docs})
    lm_cells = [{"benchmark": "lm-eval", "args": {"tasks": task, "include_path": str(tasks)}}
                for task in LM_TASKS.split(",")]
    results: dict[str, dict[str, list[float]]] = {"served": {}, "lm-eval": {}}
    starts: list[int] = []
    for rep in range(args.reps):
        out = work / f"r{rep}"
        if args.only in (None, "served"):
            storage = out / "matrix"
            seconds = timed(matrix_command(work, f"served{rep}", models, served_cells(args.items), storage), work)
            results["served"].setdefault("matrix", []).append(seconds)
            starts.append(replica_starts(storage))
            total = 0.0
            for index, (model, cell) in enumerate((m, c) for m in models for c in served_cells(args.items)):
                total += timed(single_run(model, cell, out / f"alone-{index}"), work)
            results["served"].setdefault("separate", []).append(total)
            print(f"rep {rep} served: matrix {seconds:.1f} s ({starts[-1]} replica starts), 6 runs {total:.1f} s",
                  flush=True)
        if args.only in (None, "lm-eval"):
            seconds = timed(matrix_command(work, f"lm{rep}", models, lm_cells, out / "lm-matrix"), tasks)
            total = 0.0
            for index, model in enumerate(models):
                pretrained = model_dir if model == EMBEDDED else model.partition(":")[2]
                total += timed([sys.executable, "-m", "lm_eval", "--model", "hf", "--model_args",
                                f"pretrained={pretrained}", "--device", "cpu", "--batch_size", "1", "--tasks",
                                LM_TASKS, "--include_path", str(tasks), "--output_path",
                                str(out / f"lm-eval-{index}")], tasks)
            results["lm-eval"].setdefault("matrix", []).append(seconds)
            results["lm-eval"].setdefault("lm_eval", []).append(total)
            print(f"rep {rep} lm-eval: matrix {seconds:.1f} s, lm_eval x 2 {total:.1f} s", flush=True)
    print(f"\nW10 on {os.cpu_count()} CPUs; median (min) wall seconds")
    for name, seconds in results.items():
        if not seconds:
            continue
        base = statistics.median(seconds["separate" if name == "served" else "lm_eval"])
        cells = [f"{way} {statistics.median(s):.1f} ({min(s):.1f}) = {statistics.median(s) / base:.2f} x"
                 for way, s in seconds.items()]
        print(f"{name}: " + "; ".join(cells))
    if starts:
        print(f"replica starts of the served matrix: {starts} (models x workers = {len(models) * 2})")
    if args.out:
        args.out.write_text(json.dumps({"items": args.items, "docs": args.docs, "seconds": results,
                                        "replica_starts": starts}, indent=2))


if __name__ == "__main__":
    main()
