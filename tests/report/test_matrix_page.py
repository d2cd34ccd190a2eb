"""``matrix.html`` as a browser shows it: headless Chromium (Debian's ``chromium``) renders the page of a matrix whose
two models truly differ, and the screenshot and the DOM it built are looked at: the heatmap's cells, the baseline's
row, the significant cell marked, the links to each cell's own report."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from runner.report.matrix import SHADES

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars"]


def chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None, ("Debian's chromium is needed: run scripts/test-prerequisites.sh (the README's test "
                                  "command does)")
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True,
                          timeout=120)


@pytest.fixture(scope="module")
def matrix_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from runner.cli import main

    root = tmp_path_factory.mktemp("matrix") / "m"
    status = main(["matrix", "--model", "mock", "--model", "mock:echo", "--bench", "{benchmark: toy, args: "
                   "{n_tasks: 40}}", "--bench", "{benchmark: toy, args: {n_tasks: 10}, key: toy10}",
                   "-s", "tests.support.solutions:model_skill", "--baseline", "mock", "--sequential",
                   "--storage", str(root), "--log-format", "json"])
    assert status == 0
    return root


def test_the_heatmap_marks_what_differs_from_the_baseline_after_holm(matrix_root: Path, tmp_path: Path) -> None:
    page = matrix_root / "matrix.html"
    dom = chromium("--dump-dom", page.as_uri(), profile=tmp_path / "profile").stdout
    assert "<table class=\"heatmap\">" in dom
    manifest = json.loads((matrix_root / "matrix.json").read_text())
    headlines = {cell["path"]: cell["headline"] for cell in manifest["cells"]}
    # echo misses the 20 tasks of even ids of 40 (McNemar: 20 discordant, p = 2e-6) and 5 of 10 (p = 0.0625):
    # only the first survives Holm.
    assert headlines["cells/echo/toy"]["significant"] is True
    assert headlines["cells/echo/toy10"]["significant"] is False
    assert dom.count("cell sig") == 1
    # Colour says one thing: echo below the baseline on toy after Holm (red); toy10's 0.5 against 1.0 is not shown
    # to differ after Holm, so it is white like the baseline, whatever its value.
    shades = re.findall(r'data-status="done" style="background:(#[0-9a-f]{6})"', dom)
    assert sorted(shades) == sorted([SHADES["below"], SHADES["none"], SHADES["none"], SHADES["none"]])
    assert dom.count('href="cells/') == 4 and "(baseline)" in dom
    assert all((matrix_root / cell["path"] / "report.html").exists() for cell in manifest["cells"])


def test_the_page_renders_to_a_screenshot_with_its_heatmap(matrix_root: Path, tmp_path: Path) -> None:
    from PIL import Image

    shot = tmp_path / "matrix.png"
    done = chromium(f"--screenshot={shot}", "--window-size=1100,900", (matrix_root / "matrix.html").as_uri(),
                    profile=tmp_path / "profile")
    assert done.returncode == 0, done.stderr[-2000:]
    image = Image.open(shot).convert("RGB")
    assert image.size == (1100, 900)
    pixels = {colour: count for count, colour in image.getcolors(maxcolors=1 << 20) or []}
    assert len(pixels) > 50   # text, table lines and shaded cells, not a blank page
    # The one coloured cell of the heatmap: echo on toy, below the baseline after Holm (the legend's swatches are
    # 12 x 12 pixels).
    assert pixels.get(_rgb(SHADES["below"]), 0) > 5000 and pixels.get(_rgb(SHADES["above"]), 0) < 200


def _rgb(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]


@pytest.fixture(scope="module")
def sweep_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A sweep of three checkpoints (at a scripted server's URL: no replica to start) against the baseline ``mock``
    on toy, whose headline score has a standard error: every checkpoint misses the tasks of even ids."""
    import yaml

    from runner.cli import main
    from tests.support.model_server import ScriptedModelServer

    folder = tmp_path_factory.mktemp("sweep")
    ckpts = folder / "ckpts"
    for step in (100, 200, 300):
        (ckpts / f"step_{step}").mkdir(parents=True)
        (ckpts / f"step_{step}" / "config.json").write_text(json.dumps({"model_type": "llama"}))
        (ckpts / f"step_{step}" / "model.safetensors").write_bytes(b"weights %d" % step)
    server = ScriptedModelServer(models=[str(ckpts / f"step_{step}") for step in (100, 200, 300)]).start()
    try:
        (folder / "matrix.yaml").write_text(yaml.safe_dump({
            "models": ["mock", {"model": f"vllm:{ckpts}/step_*", "model_base_url": server.url}],
            "benchmarks": [{"benchmark": "toy", "args": {"n_tasks": 20}}], "baseline": "mock",
            "solution": "tests.support.solutions:model_skill", "executor": "sequential",
            "storage": str(folder / "m"), "log_format": "json"}))
        assert main(["matrix", "--config", str(folder / "matrix.yaml"), "--html"]) == 0
    finally:
        server.stop()
    return folder / "m"


def test_the_step_chart_draws_each_headlines_band_and_the_baselines_line(sweep_root: Path, tmp_path: Path) -> None:
    """Issue 42: toy's headline is its score, whose standard error the benchmark gives: each checkpoint's cell has
    its interval in the heatmap, the step chart its 95 % band, and the baseline's score (1.0) is a dashed line."""
    manifest = json.loads((sweep_root / "matrix.json").read_text())
    headlines = {cell["model_key"]: cell["headline"] for cell in manifest["cells"]}
    assert headlines["step_200"]["metric"] == "score" and headlines["step_200"]["value"] == 0.5
    low, high = headlines["step_200"]["ci"]
    assert low < 0.5 < high
    dom = chromium("--dump-dom", (sweep_root / "matrix.html").as_uri(), profile=tmp_path / "profile").stdout
    [chart] = re.findall(r'<section id="steps">.*?</section>', dom, flags=re.S)
    assert "fill-opacity: 0.18" in chart or "opacity: 0.18" in chart  # the band
    assert "stroke-dasharray" in chart and "baseline mock" in chart  # the baseline's line, labelled
    shot = tmp_path / "sweep.png"
    done = chromium(f"--screenshot={shot}", "--window-size=1100,1400", (sweep_root / "matrix.html").as_uri(),
                    profile=tmp_path / "profile")
    assert done.returncode == 0, done.stderr[-2000:]
    from PIL import Image

    band = sum(count for count, (r, g, b) in Image.open(shot).convert("RGB").getcolors(maxcolors=1 << 20) or []
               if abs(r - 220) <= 2 and abs(g - 229) <= 2 and abs(b - 248) <= 2)  # the accent at 18 % over white
    assert band > 5000, band
