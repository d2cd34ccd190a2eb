"""The GAIA dataset as the Hugging Face hub has it, read from the user's copy or downloaded with the user's token.

GAIA (Mialon et al., 2023, arXiv:2311.12983) is gated on the hub (``gaia-benchmark/GAIA``) and its terms forbid
redistribution, so nothing of it ships here. The hub's layout, which ``--data-dir`` must have::

    <root>/2023/validation/metadata.jsonl    one JSON object per task (until the October 2025 update)
    <root>/2023/validation/metadata.parquet  the same records (the hub's format since October 2025)
    <root>/2023/validation/<file_name>       each task's attached file, named by the record's ``file_name``
    <root>/2023/test/...                     the same for the test split

A record has ``task_id``, ``Question``, ``Level`` (1, 2 or 3), ``Final answer`` (``"?"`` on the test split, whose
answers are private), ``file_name`` (``""`` when the task has no file), ``Annotator Metadata`` and, since October
2025, ``file_path`` (the attachment's path from the root, e.g. ``2023/test/<id>.pdf``). ``--data-dir`` may also name
the split folder itself (``<root>/2023/validation``).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fsspec
from fsspec.implementations.local import LocalFileSystem

from runner.benchmarks.download import cache_dir
from runner.core.errors import BenchmarkError

YEAR = "2023"
"""The hub's only release folder."""
SPLITS = ("validation", "test")
LEVELS = ("1", "2", "3")
HIDDEN_ANSWER = "?"
"""The ``Final answer`` of every test-split task: the answers are private, scored by the leaderboard."""

HUB_REPO = "gaia-benchmark/GAIA"
HUB_URL = f"https://huggingface.co/datasets/{HUB_REPO}"
HUB_REVISION = "682dd723ee1e1697e00360edccf2366dc8418dd9"
"""The dataset's commit downloaded by default (the Parquet layout of October 2025; ``-B revision=main`` takes the
newest). A commit pins the content: the hub serves every file of a commit by its hash."""

METADATA_FILES = ("metadata.jsonl", "metadata.parquet")
REQUIRED_FIELDS = ("task_id", "Question", "Level", "Final answer")
INSTALL_HINT = "pip install 'ray-bench-runner[gaia]'"


@dataclass(frozen=True)
class GAIARecord:
    """One GAIA task as the metadata holds it.

    Args:
        task_id: the task's id (a UUID).
        question: the question.
        level: ``"1"``, ``"2"`` or ``"3"``.
        final_answer: the answer, ``None`` on the test split (``"?"`` in the data).
        file_name: the attached file's name in the split folder, ``""`` when there is none.
    """

    task_id: str
    question: str
    level: str
    final_answer: str | None
    file_name: str = ""


@dataclass(frozen=True)
class SplitLocation:
    """Where a split's files are: ``url`` (a local path or any fsspec URL of the split folder), the fsspec
    ``storage_options`` to open it, and, for a download, the hub ``revision`` it came from (so that a worker
    without the local copy can fetch a file itself)."""

    url: str
    storage_options: dict[str, Any]
    revision: str | None = None

    def file_url(self, name: str) -> str:
        """The URL of the file ``name`` in the split folder."""
        return f"{self.url.rstrip('/')}/{name}"


def _join(root: str, *parts: str) -> str:
    return "/".join([root.rstrip("/"), *parts])


def _names(fs: Any, path: str) -> list[str]:
    return sorted(os.path.basename(p.rstrip("/")) for p in fs.ls(path, detail=False))


def locate_split(data_dir: str, split: str, storage_options: dict[str, Any] | None = None) -> SplitLocation:
    """The split folder under ``data_dir``: ``<data_dir>/2023/<split>``, or ``data_dir`` itself when it holds the
    metadata.

    Raises:
        BenchmarkError: ``data_dir`` does not exist or cannot be listed, or it has no metadata of ``split`` (the
            message says what the folder holds instead).
    """
    options = dict(storage_options or {})
    candidates = [_join(data_dir, YEAR, split), data_dir]
    try:
        fs, root = fsspec.url_to_fs(data_dir, **options)
        exists = fs.isdir(root)
        found = next((candidate for candidate in candidates if exists and any(
            fs.isfile(_join(fsspec.url_to_fs(candidate, **options)[1], name)) for name in METADATA_FILES)), None)
        holds: list[str] = []
        if exists and found is None:
            holds = [f"{YEAR}/{name}" for name in _names(fs, _join(root, YEAR))] if fs.isdir(_join(root, YEAR)) \
                else _names(fs, root)[:8]
    except (OSError, ValueError, ImportError) as exc:
        raise BenchmarkError(f"cannot read GAIA --data-dir {data_dir} ({type(exc).__name__}: {exc})") from None
    if not exists:
        raise BenchmarkError(f"GAIA --data-dir {data_dir}: no such folder; pass the folder that holds "
                             f"{YEAR}/{split}/metadata.jsonl (or metadata.parquet), laid out as {HUB_URL}")
    if found is not None:
        return SplitLocation(found, options)
    raise BenchmarkError(f"GAIA --data-dir {data_dir} has no {YEAR}/{split}/metadata.jsonl or metadata.parquet "
                         f"(it holds: {', '.join(holds) or 'nothing'}); pass the dataset's root folder, laid out as "
                         f"{HUB_URL}")


def _parse_jsonl(data: bytes, where: str) -> list[dict[str, Any]]:
    rows = []
    for number, line in enumerate(data.decode("utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise BenchmarkError(f"GAIA metadata {where} line {number} is not JSON ({exc}); replace the file "
                                 f"with the hub's") from None
        if not isinstance(row, dict):
            raise BenchmarkError(f"GAIA metadata {where} line {number} is not a JSON object; replace the file "
                                 f"with the hub's")
        rows.append(row)
    return rows


def _parse_parquet(data: bytes, where: str) -> list[dict[str, Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise BenchmarkError(f"GAIA metadata {where} is Parquet, which needs pyarrow: {INSTALL_HINT}") from None
    try:
        return pq.read_table(io.BytesIO(data)).to_pylist()
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several error classes for a damaged file
        raise BenchmarkError(f"GAIA metadata {where} is not a readable Parquet file ({type(exc).__name__}: "
                             f"{exc}); replace it with the hub's") from None


def read_metadata(location: SplitLocation) -> tuple[list[dict[str, Any]], str]:
    """The raw rows of the split's metadata (``metadata.jsonl`` if present, else ``metadata.parquet``) and the URL
    read.

    Raises:
        BenchmarkError: neither file exists, or the one read is unreadable or malformed.
    """
    fs, folder = fsspec.url_to_fs(location.url, **location.storage_options)
    for name in METADATA_FILES:
        path = _join(folder, name)
        if not fs.isfile(path):
            continue
        where = location.file_url(name)
        try:
            with fs.open(path, "rb") as handle:
                data = handle.read()
        except OSError as exc:
            raise BenchmarkError(f"cannot read GAIA metadata {where} ({type(exc).__name__}: {exc})") from None
        rows = _parse_jsonl(data, where) if name.endswith(".jsonl") else _parse_parquet(data, where)
        return rows, where
    raise BenchmarkError(f"GAIA split folder {location.url} has no metadata.jsonl or metadata.parquet; pass the "
                         f"dataset's root folder, laid out as {HUB_URL}")


def _level(value: Any, where: str) -> str:
    try:
        level = str(int(str(value).strip()))
    except ValueError:
        level = ""
    if level not in LEVELS:
        raise BenchmarkError(f"GAIA metadata {where}: Level {value!r} is not 1, 2 or 3; replace the file with the "
                             f"hub's")
    return level


def parse_records(rows: list[dict[str, Any]], where: str) -> list[GAIARecord]:
    """:class:`GAIARecord` objects from the metadata's rows.

    Raises:
        BenchmarkError: a row lacks a required field, has a bad level, or repeats a task id (naming the row).
    """
    records: list[GAIARecord] = []
    seen: set[str] = set()
    for index, row in enumerate(rows):
        missing = [name for name in REQUIRED_FIELDS if name not in row]
        if missing:
            raise BenchmarkError(f"GAIA metadata {where}, record {index}: no {', '.join(missing)}; the file is not "
                                 f"GAIA's metadata (fields {', '.join(REQUIRED_FIELDS)}, file_name)")
        task_id = str(row["task_id"])
        if task_id in seen:
            raise BenchmarkError(f"GAIA metadata {where}: task {task_id} appears twice; replace the file with the "
                                 f"hub's")
        seen.add(task_id)
        answer = row["Final answer"]
        final_answer = None if answer is None or str(answer) == HIDDEN_ANSWER else str(answer)
        records.append(GAIARecord(task_id=task_id, question=str(row["Question"]),
                                  level=_level(row["Level"], f"{where}, task {task_id}"),
                                  final_answer=final_answer, file_name=str(row.get("file_name") or "")))
    if not records:
        raise BenchmarkError(f"GAIA metadata {where} holds no tasks; replace it with the hub's")
    return records


def check_attachments(records: list[GAIARecord], location: SplitLocation, shown: int = 5) -> None:
    """Check that every attached file the records name is in the split folder (one listing).

    Raises:
        BenchmarkError: files are missing (the message counts and names them, and says how to get them).
    """
    wanted = sorted({record.file_name for record in records if record.file_name})
    if not wanted:
        return
    fs, folder = fsspec.url_to_fs(location.url, **location.storage_options)
    try:
        present = {os.path.basename(p.rstrip("/")) for p in fs.ls(folder, detail=False)}
    except OSError as exc:
        raise BenchmarkError(f"cannot list GAIA split folder {location.url} ({type(exc).__name__}: {exc})") from None
    missing = [name for name in wanted if name not in present]
    if missing:
        more = f" and {len(missing) - shown} more" if len(missing) > shown else ""
        raise BenchmarkError(
            f"GAIA split folder {location.url} lacks {len(missing)} of the {len(wanted)} attached files the "
            f"metadata names ({', '.join(missing[:shown])}{more}); copy the whole split folder from {HUB_URL}, "
            f"or leave out --data-dir to download it with HF_TOKEN")


def load_split(location: SplitLocation) -> list[GAIARecord]:
    """Read and check a split: its metadata and the presence of every attached file.

    Raises:
        BenchmarkError: as :func:`read_metadata`, :func:`parse_records` and :func:`check_attachments`.
    """
    rows, where = read_metadata(location)
    records = parse_records(rows, where)
    check_attachments(records, location)
    return records


def download_split(split: str, revision: str = HUB_REVISION) -> SplitLocation:
    """The split downloaded from the hub at ``revision`` with the user's token, into
    ``$RUNNER_CACHE_DIR/gaia/<revision>/`` (a complete earlier download is used without asking the hub again).

    The token is ``HF_TOKEN`` or the one ``huggingface-cli login`` saved (``huggingface_hub.get_token``); its
    account must have accepted GAIA's terms on the dataset's page.

    Raises:
        BenchmarkError: ``huggingface_hub`` missing, no token, access refused (terms not accepted, token
            rejected), an unknown revision, or the hub unreachable; each in one line with the fix.
    """
    root = cache_dir("gaia", revision)
    location = SplitLocation(str(root / YEAR / split), {}, revision)
    if (root / YEAR / split).is_dir():
        try:
            load_split(location)
            return location
        except BenchmarkError:
            pass  # incomplete or damaged: download again (the hub client fetches what is missing)
    try:
        import huggingface_hub
        from huggingface_hub.errors import (
            GatedRepoError,
            HfHubHTTPError,
            LocalEntryNotFoundError,
            RepositoryNotFoundError,
            RevisionNotFoundError,
        )
    except ImportError:
        raise BenchmarkError(f"downloading GAIA needs huggingface_hub: {INSTALL_HINT}, or pass your copy with "
                             "--data-dir") from None
    token = huggingface_hub.get_token()
    if not token:
        raise BenchmarkError(f"GAIA is gated: set HF_TOKEN to a token of a Hugging Face account that accepted the "
                             f"terms at {HUB_URL} (or pass your copy with --data-dir)")
    try:
        huggingface_hub.snapshot_download(repo_id=HUB_REPO, repo_type="dataset", revision=revision,
                                          allow_patterns=[f"{YEAR}/{split}/*"], local_dir=str(root), token=token)
    except GatedRepoError:
        raise BenchmarkError(f"the hub refused GAIA to this HF_TOKEN's account: accept the terms at {HUB_URL} "
                             "while logged in, then run again") from None
    except RevisionNotFoundError:
        raise BenchmarkError(f"GAIA has no revision {revision!r} on the hub; pass -B revision=main or a commit of "
                             f"{HUB_URL}/commits/main") from None
    except RepositoryNotFoundError:
        raise BenchmarkError(f"the hub did not accept HF_TOKEN for {HUB_REPO} (an invalid or expired token); "
                             "create a token at https://huggingface.co/settings/tokens") from None
    except (LocalEntryNotFoundError, HfHubHTTPError, OSError) as exc:
        raise BenchmarkError(f"cannot download GAIA from the hub ({type(exc).__name__}: {exc}); check the "
                             "network, or pass your copy with --data-dir") from None
    return location


def local_copy(name: str, location: SplitLocation) -> Path:
    """A local path of the split's file ``name``: the file itself on a local disk; else a copy in
    ``$RUNNER_CACHE_DIR/gaia/files/`` fetched once per machine from the split's fsspec URL, or, for a download
    this machine does not have (a worker of a cluster), from the hub at the download's revision.

    Raises:
        FileNotFoundError: the file cannot be found or fetched (the message says why).
    """
    url = location.file_url(name)
    fs, path = fsspec.url_to_fs(url, **location.storage_options)
    if isinstance(fs, LocalFileSystem):
        if os.path.isfile(path):
            return Path(path)
        if location.revision is not None:
            return _from_hub(name, location)
        raise FileNotFoundError(f"attached file {url} is missing")
    target = cache_dir("gaia", "files", hashlib.sha256(location.url.encode()).hexdigest()[:16]) / name
    if not target.is_file():
        partial = target.with_name(target.name + ".part")
        try:
            fs.get_file(path, str(partial))
        except OSError as exc:
            partial.unlink(missing_ok=True)
            raise FileNotFoundError(f"cannot fetch attached file {url} ({type(exc).__name__}: {exc})") from None
        os.replace(partial, target)
    return target


def _from_hub(name: str, location: SplitLocation) -> Path:
    split_folder = Path(location.url)
    relative = f"{split_folder.parent.name}/{split_folder.name}/{name}"
    try:
        import huggingface_hub

        path = huggingface_hub.hf_hub_download(repo_id=HUB_REPO, repo_type="dataset", filename=relative,
                                               revision=location.revision)
    except Exception as exc:  # noqa: BLE001 - any hub failure leaves the file unavailable, said in one line
        raise FileNotFoundError(f"attached file {relative} is not on this machine and the hub did not give it "
                                f"({type(exc).__name__}: {exc}); set HF_TOKEN on every worker") from None
    return Path(path)
