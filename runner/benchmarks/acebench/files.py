"""ACEBench's data files: where they come from, their checksums, and reading them from any fsspec location.

The files are the authors' ``data_all/`` folder of https://github.com/chenchen0103/ACEBench at commit
:data:`COMMIT` (MIT licence): ``data_<lang>/data_<category>.json`` (prompts) and
``data_<lang>/possible_answer/data_<category>.json`` (ground truth), JSON Lines despite the extension, aligned line
by line. With no data folder they are downloaded from :data:`BASE_URL` into a cache folder and each is checked
against :data:`SHA256` (computed from that commit) before use.
"""

from __future__ import annotations

import os
from pathlib import Path

from runner.benchmarks.datafiles import DataFiles
from runner.benchmarks.download import cache_dir as runner_cache_dir
from runner.benchmarks.download import fetch

COMMIT = "56dd66cf6439b0d9655ee1b353e4cd745c6f664e"
BASE_URL = f"https://raw.githubusercontent.com/chenchen0103/ACEBench/{COMMIT}/data_all"
URL_ENV = "RUNNER_ACEBENCH_URL"
"""Overrides :data:`BASE_URL` (a mirror laid out like ``data_all/``); checksums are verified all the same."""

SHA256: dict[str, str] = {
    "data_en/data_agent_multi_step.json": "c04b7561a2a5b31b3c4fd3067807ab4e0a7907f5a72cd5ec987da3469eac1fe9",
    "data_en/data_agent_multi_turn.json": "0380631f379510fad4aab885b9679cfe99e66cf3a01e92f570f9180141f637d0",
    "data_en/data_normal_atom_bool.json": "59695e59c0d92cd22ec418bfd6f936d0d44a8d6e1fc16e6cb033b12213c57b0b",
    "data_en/data_normal_atom_enum.json": "a2e870f8ba23687ba182a2bb0bdba0a7e02c21b67f3ebc5cc07a71fc2007d31b",
    "data_en/data_normal_atom_list.json": "2e6c7c35e18379c886c17ae2f52d62637e92a388a1f810025c57206698c3e7ff",
    "data_en/data_normal_atom_number.json": "eba9d748fcd08f142abf053fe2eecc573c98232f218ff412eb9ea5350abca422",
    "data_en/data_normal_atom_object_deep.json": "2df8cd21fcf7388ee4fa0d98f0587292ba4c14b7c8bde059b3dca18ad885d1ec",
    "data_en/data_normal_atom_object_short.json": "eef597c5400e17e1c23a7548505e48139a3648d6e5bd5feabbc9b12fcf7a1a76",
    "data_en/data_normal_multi_turn_user_adjust.json": "b05dd0fe2afb02270ecbdfddfc7a8b1606339c234d5098749742e79bc51ea8cc",
    "data_en/data_normal_multi_turn_user_switch.json": "3ed94d09401c53a99c23edc8b60ebfda8d4ae486f9bea19f87b6000a66588cf0",
    "data_en/data_normal_preference.json": "61413bbfb5f94b3ad74f348d9f33c8c10b531dfcf6e5429caa3f1a91fa64252d",
    "data_en/data_normal_similar_api.json": "f3ae38a6b56ab27c47bd929f16468598636ff76ecc095ff60c41c8b5a9ee843f",
    "data_en/data_normal_single_turn_parallel_function.json": "7b9b9200cf5224e93f20bf14f076bead8e75d451a7dd6956d346fb1200412235",
    "data_en/data_normal_single_turn_single_function.json": "45278849617f4b3e290db1da13929ba0a43fc4cb3332b461560a519e32af82f2",
    "data_en/data_special_error_param.json": "3ce0f322934d8a8a96eb8bae945949f61c53b74505ba0d65c4850f98e8ba3bae",
    "data_en/data_special_incomplete.json": "186f593f8f2be7e709c5878f57d23f401c51e326ffcadcd62f9c5c08c8e34f3b",
    "data_en/data_special_irrelevant.json": "20bb62a9c48b1daf852870096f5d70d53a09a07b8f90a7c09815c6d934e8f41e",
    "data_en/possible_answer/data_agent_multi_step.json": "5081e9b5be93d8f9a52b91ee013250f1ae64a10d3edbe2d1225bb0beb99b160e",
    "data_en/possible_answer/data_agent_multi_turn.json": "ad077af54920d614438c28b3c7483d556b1a732d0dd0973c867e497c7c0a828b",
    "data_en/possible_answer/data_normal_atom_bool.json": "16c5c8d009d37a0dd5e398838c62857ad2ebae1eb0c0ee1a52eed39a654df86e",
    "data_en/possible_answer/data_normal_atom_enum.json": "01fe289a43c49b4118f063c9acc7422bc3193771fed2c1f2fbee009e44cc21ed",
    "data_en/possible_answer/data_normal_atom_list.json": "e71b36d87d6f3b5129026e511acb12d560d4f6ed18009fa38b82980e8a0c5f51",
    "data_en/possible_answer/data_normal_atom_number.json": "7b4b580781f54d7c2a308bf125753a852895b7069b75c0397d2f2131398bf5ea",
    "data_en/possible_answer/data_normal_atom_object_deep.json": "bf681a1cd84fb286562f3ba57ce9d28946a7cdcf8661b2aad125d69d4beecab7",
    "data_en/possible_answer/data_normal_atom_object_short.json": "cbe2efb23ae18454f28cdb3e5aaf223e30c2249b73d0722956f588124970e184",
    "data_en/possible_answer/data_normal_multi_turn_user_adjust.json": "a570117cde521c5d1c16adc2d461b8845c969a3334192bd357dec13cf6657889",
    "data_en/possible_answer/data_normal_multi_turn_user_switch.json": "ca0c10778a899fecd3b9767dae7d188d9924a0dbb191e2e6bc0b5808b8baa37e",
    "data_en/possible_answer/data_normal_preference.json": "ed9da0b58446812e8be562fb0594989bd759c249c1cdcd722a9dee5e89ee6644",
    "data_en/possible_answer/data_normal_similar_api.json": "0976f8fd3f11b9d5ba3783dc746158aeea3fdb1b34a46b07f3c4c731375a8543",
    "data_en/possible_answer/data_normal_single_turn_parallel_function.json": "fac555edad6f61927093504f10bdaef3cf54fbd587affcf3ce52b9f4ec0d3aa0",
    "data_en/possible_answer/data_normal_single_turn_single_function.json": "e541ad06ecaf49310105209222b9788711cc15d684174276f56224e584b8589d",
    "data_en/possible_answer/data_special_error_param.json": "5e4c8b8ca768d65372fac1e54c16ef90bf6c8869b8163a00a4afcc47867249b8",
    "data_en/possible_answer/data_special_incomplete.json": "2995a33b6c539bc29fe38a326a58d7989c6cf1b1bdaa22ff76c8d318b92f5f6d",
    "data_en/possible_answer/data_special_irrelevant.json": "cd3f1d66e554869e8870677acc07df78c6ebf8bbba6e600cbb825072181566b8",
    "data_zh/data_agent_multi_step.json": "dcf74daf8dce797c1c86cbcf54e6fd63d6b83425d50bc7076ad98810b14b6b68",
    "data_zh/data_agent_multi_turn.json": "847df81f26e188e7c1eff8d010acf5f3c415cbe3a89ebc414efee013dc81c06e",
    "data_zh/data_normal_atom_bool.json": "0b945e4a0d2018875b6e50a28e55359d94609681853c50a87d205a115be55bf8",
    "data_zh/data_normal_atom_enum.json": "806ece8b2753779816185a4060e68667053ab46144bb2b294c434bc3d9116f85",
    "data_zh/data_normal_atom_list.json": "da4839021796e66eb149917ebfe839dd25589faf2310e5360e8d04d1c102db88",
    "data_zh/data_normal_atom_number.json": "924456f46cada50acd4330c8b7f3790ce12837480991d1a6f3098fd73cb8ebb7",
    "data_zh/data_normal_atom_object_deep.json": "7d59db54e4d486fb29e985bfccc752afac92fe67a739c0f3ea2303dfd89f87af",
    "data_zh/data_normal_atom_object_short.json": "1c7107737f539243629cbbf118a83138428c05da5574658caf6c8ff8ed0a252d",
    "data_zh/data_normal_multi_turn_user_adjust.json": "15370d45110dbb2fae7b18b1a738b5f08db5f3c5b4faf8fd01ea716335754721",
    "data_zh/data_normal_multi_turn_user_switch.json": "18f5baf129f7fdfc72c9aaf43b1d9c51e846491f890fa616a66e007cfe676962",
    "data_zh/data_normal_preference.json": "cce33ef074d89bc5a5e87090fc36d22720f83af936501065dcef87723c27e761",
    "data_zh/data_normal_similar_api.json": "ecf3324eabfd91a626f97c91a550213601cce84b4eb410e3c12a5e05eff9cb91",
    "data_zh/data_normal_single_turn_parallel_function.json": "8479e8739e25a58ae61f18b5d68f3843dc76f22c3ce155353d56036d4778f894",
    "data_zh/data_normal_single_turn_single_function.json": "95e8a10c3fc98d706d69a2b47cc7ec1a18449eb24e1dcb616b232b0a8a83aff4",
    "data_zh/data_special_error_param.json": "2c728affde4a5551c38d59eef4d36aa0997bc23e2deb097532536a854cf7f4d2",
    "data_zh/data_special_incomplete.json": "e2e6b3383679d3e6970590be6972bb7b36f2dad47aba3ed18b83556d00f7d5fc",
    "data_zh/data_special_irrelevant.json": "3a43bf88e1b77be69f2d078a978979e7b37d402735af5cd764f116f09bbbc29f",
    "data_zh/possible_answer/data_agent_multi_step.json": "4ca297f2c1d5f8eee3a45cd3e7d8cce7f2bb89d1f22a8e12fd033f6c50a7069b",
    "data_zh/possible_answer/data_agent_multi_turn.json": "ea11d8cc8fdef39660699ec219b0eef71d261226f8018ed6c35571206e53ec00",
    "data_zh/possible_answer/data_normal_atom_bool.json": "c9e9bb15872a71284742de8f9db241ead8621682bb4b0ba1894550cec95be571",
    "data_zh/possible_answer/data_normal_atom_enum.json": "57a75036ca6901619d7f6ed37371d82063524e1e02dacc58ba1e68c73e3d0888",
    "data_zh/possible_answer/data_normal_atom_list.json": "586834aabc928c93df20af270656bdf2846ae7761a490daf4fbfd11b51e4f7bf",
    "data_zh/possible_answer/data_normal_atom_number.json": "093288870e5a7d6243d2e598c5ea2ccaa7a84e95a523af70b17a5b43bef11cd7",
    "data_zh/possible_answer/data_normal_atom_object_deep.json": "15bd565c36852d3d93e68f4dee5189b6b0a87dfd9947544dda82759d46b67eb9",
    "data_zh/possible_answer/data_normal_atom_object_short.json": "e4cd896db9292b7eb350d2551d8ce63a60d537b66dd28b13c64e2118afad3483",
    "data_zh/possible_answer/data_normal_multi_turn_user_adjust.json": "15accc1f8dfb0f44aa04cde0a26a552d425ce104dbaa5c6dbc85b7d0115842e5",
    "data_zh/possible_answer/data_normal_multi_turn_user_switch.json": "89257a02b15a6d5b52166f51fdd125ec322ba6728e5389f5bda7e8751dbeb8fd",
    "data_zh/possible_answer/data_normal_preference.json": "6ea2c90fb29a36964e5700f1a81a21b7284f8362d7aa809c30c4ea4d5a0d7aa5",
    "data_zh/possible_answer/data_normal_similar_api.json": "aa3e5b569c31ac4ca4b728d9fcb105a992566ddea15964e9f55e29aa945ab384",
    "data_zh/possible_answer/data_normal_single_turn_parallel_function.json": "0786f04adcc1672ebd7d938fc8f602da674c3312b4c8b5f3d7d990523bc8891a",
    "data_zh/possible_answer/data_normal_single_turn_single_function.json": "5e4a4f3268e46095392b6208bec3aefd015467404985d45853155ec6f036edf4",
    "data_zh/possible_answer/data_special_error_param.json": "e57c471a4a4f906b92c2ab3f67052a31ef4c580c11b8dc5941152a4fbce3d246",
    "data_zh/possible_answer/data_special_incomplete.json": "d1401ce3075dadf31b476f0074221efd7aeef548d6e13c99471110eed3743570",
    "data_zh/possible_answer/data_special_irrelevant.json": "cd3f1d66e554869e8870677acc07df78c6ebf8bbba6e600cbb825072181566b8",
}
"""sha256 of every file at :data:`COMMIT`, keyed by its path relative to ``data_all/``."""

LANGUAGES = ("en", "zh")
NORMAL_CATEGORIES = (
    "normal_single_turn_single_function",
    "normal_single_turn_parallel_function",
    "normal_multi_turn_user_adjust",
    "normal_multi_turn_user_switch",
    "normal_similar_api",
    "normal_preference",
    "normal_atom_bool",
    "normal_atom_enum",
    "normal_atom_number",
    "normal_atom_list",
    "normal_atom_object_short",
    "normal_atom_object_deep",
)
SPECIAL_CATEGORIES = ("special_incomplete", "special_error_param", "special_irrelevant")
AGENT_CATEGORIES = ("agent_multi_turn", "agent_multi_step")
CATEGORIES = NORMAL_CATEGORIES + SPECIAL_CATEGORIES + AGENT_CATEGORIES
"""All 17 categories, in the authors' order within each group (normal, special, agent)."""


def prompt_path(language: str, category: str) -> str:
    """``data_<lang>/data_<category>.json``, relative to the data folder."""
    return f"data_{language}/data_{category}.json"


def answer_path(language: str, category: str) -> str:
    """``data_<lang>/possible_answer/data_<category>.json``, relative to the data folder."""
    return f"data_{language}/possible_answer/data_{category}.json"


def needed_files(language: str, categories: tuple[str, ...]) -> list[str]:
    """The relative paths of the prompt and answer files of ``categories`` in ``language``."""
    return [path for c in categories for path in (prompt_path(language, c), answer_path(language, c))]


def default_cache_dir() -> Path:
    """``$RUNNER_CACHE_DIR/acebench/<commit>`` (default ``~/.cache/runner/acebench/<commit>``)."""
    return runner_cache_dir("acebench", COMMIT)


def ensure_downloaded(relatives: list[str], cache_dir: Path | None = None, base_url: str | None = None) -> Path:
    """Make sure every file in ``relatives`` is in the cache, verified against :data:`SHA256`; returns the cache
    folder. Missing or corrupt cached files are downloaded (again) through :func:`runner.benchmarks.download.fetch`.

    Args:
        relatives: paths relative to ``data_all/`` (see :func:`needed_files`).
        cache_dir: the cache folder (default :func:`default_cache_dir`).
        base_url: where ``data_all/`` lives (default ``$RUNNER_ACEBENCH_URL`` or :data:`BASE_URL`).

    Raises:
        BenchmarkError: a download failed or does not verify; the message names the file and the fix.
    """
    cache = cache_dir or default_cache_dir()
    url_root = (base_url or os.environ.get(URL_ENV) or BASE_URL).rstrip("/")
    for relative in relatives:
        fetch(f"{url_root}/{relative}", cache / relative, algorithm="sha256", digest=SHA256[relative],
              fix=f"set {URL_ENV} to a faithful mirror, or pass --data-dir with a copy of data_all/")
    return cache


DATA = DataFiles(
    label="ACEBench",
    sha256=SHA256,
    pinned=f"commit {COMMIT[:7]}",
    pinned_file="the file of that commit",
    layout="the data folder must hold the repository's data_all/ layout (data_<lang>/data_<category>.json and "
           "data_<lang>/possible_answer/...), or leave out --data-dir to download it",
)
"""Reading, checking and decoding ACEBench's files (:class:`~runner.benchmarks.datafiles.DataFiles`)."""
