"""``matrix.html`` as a browser shows it: headless Chromium (Debian's ``chromium``) renders the page of a matrix whose
two models truly differ, and the screenshot and the DOM it built are looked at: the heatmap's cells, the baseline's
row, the significant cell marked, the links to each cell's own report."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars"]


def chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None, "Debian's chromium is needed: run scripts/test-prerequisites.sh (the README's test command does)"
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
    colours = {colour for _, colour in image.getcolors(maxcolors=1 << 20) or []}
    assert len(colours) > 50   # text, table lines and shaded cells, not a blank page
    # The heatmap's shading (rgb(shade, shade + 15, 255)): bluish pixels in the page.
    assert any(b == 255 and r < 200 and g - r == 15 for r, g, b in colours)
