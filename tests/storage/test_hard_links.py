"""A local store on a filesystem that makes no hard links (a FUSE mount of a bucket: gcsfuse#178,
azure-storage-fuse#599) is named in one line with the way out: the bucket's own URL, or a local disk. Where found:
the run's first write (the probe) through the CLI, exit 2 and nothing written, on a real FUSE mount without ``link``
(``tests/support/fuse_mount.py``; the kernel answers ``EPERM``); its neighbours: a record write, and the other
answers ``link(2)`` gives on such filesystems (``ENOSYS``, ``EOPNOTSUPP``, ``EXDEV``), with ``os.link`` made to answer
them."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from runner.core.errors import StorageError
from runner.core.record import TaskRecord
from runner.storage import ResultStore
from runner.storage.probe import check_conditional_writes
from tests.support.fuse_mount import mounted

TOY = ["--benchmark", "toy", "--solution", "calculator", "--sequential"]
WAY_OUT = ("pass the bucket's own URL as --storage (s3://BUCKET/PATH, gs://BUCKET/PATH, az://CONTAINER/PATH), or a "
           "folder on a local disk")


def _record(task_id: str) -> TaskRecord:
    return TaskRecord(run_id="r", task_id=task_id, repeat=0, status="ok", output=1,
                      started_at="2026-01-01T00:00:00+00:00", finished_at="2026-01-01T00:00:01+00:00")


@pytest.fixture
def bucket_mount(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """``(mount point, backing folder)`` of a FUSE filesystem without hard links."""
    with mounted(tmp_path / "backing", tmp_path / "mnt") as mountpoint:
        yield mountpoint, tmp_path / "backing"


def files(root: Path) -> list[str]:
    return sorted(str(path.relative_to(root)) for path in root.rglob("*"))


def test_a_run_on_a_fuse_mount_without_hard_links_is_one_line_and_writes_nothing(cli, bucket_mount) -> None:
    mountpoint, backing = bucket_mount
    with pytest.raises(PermissionError):  # what the kernel answers here for a FUSE filesystem without link
        (mountpoint / "a").write_text("a")
        os.link(mountpoint / "a", mountpoint / "b")
    (mountpoint / "a").unlink()

    done = cli(*TOY, "--storage", str(mountpoint / "runs" / "toy"))
    done.error_line(f"storage {mountpoint / 'runs' / 'toy'} is on a filesystem that makes no hard links (os.link "
                    "answered EPERM: Operation not permitted)", "the local store writes every record through one",
                    WAY_OUT)
    assert files(backing) == []


def test_a_record_written_on_a_fuse_mount_without_hard_links_names_them(bucket_mount) -> None:
    mountpoint, _ = bucket_mount
    store = ResultStore(str(mountpoint / "run"))
    with pytest.raises(StorageError) as raised:
        store.write_record(_record("a"))
    message = str(raised.value)
    assert message.startswith(f"cannot write {mountpoint / 'run' / 'records' / 'a' / '0.json'} "
                              "(HardLinksUnsupported: [Errno 1] os.link answered EPERM: Operation not permitted); "
                              "the filesystem makes no hard links")
    assert message.endswith(WAY_OUT)
    assert store.done_items() == set()


@pytest.mark.parametrize("code", [errno.EPERM, errno.ENOSYS, errno.EOPNOTSUPP, errno.EXDEV],
                         ids=["EPERM", "ENOSYS", "EOPNOTSUPP", "EXDEV"])
def test_the_probe_names_each_answer_of_a_filesystem_without_hard_links(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch,
                                                                        code: int) -> None:
    def refuse(source: str, target: str) -> None:
        raise OSError(code, os.strerror(code), source, None, target)

    monkeypatch.setattr(os, "link", refuse)
    store = ResultStore(str(tmp_path / "mnt" / "run"))
    (tmp_path / "mnt").mkdir()
    with pytest.raises(StorageError) as raised:
        check_conditional_writes(store)
    message = str(raised.value)
    assert message.startswith(f"storage {tmp_path / 'mnt' / 'run'} is on a filesystem that makes no hard links "
                              f"(os.link answered {errno.errorcode[code]}: {os.strerror(code)})")
    assert message.endswith(WAY_OUT)
    assert files(tmp_path) == ["mnt"]  # the probe left nothing, and made no folder of the run


def test_a_record_write_with_enosys_names_hard_links_and_the_way_out(cli, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The probe passed (another process made the folder, or the mount changed): the first record that cannot be
    linked stops the run (exit 3: the lease and run.json were written), with the same way out."""
    link = os.link

    def refuse_records(source: str, target: str) -> None:
        if "/records/" in str(target):
            raise OSError(errno.ENOSYS, os.strerror(errno.ENOSYS), source, None, target)
        link(source, target)

    monkeypatch.setattr(os, "link", refuse_records)
    storage = tmp_path / "run"
    done = cli(*TOY, "--storage", str(storage), "--limit", "3")
    line = done.fault_line(f"cannot write {storage}/records/toy-", "(HardLinksUnsupported: [Errno 38] os.link "
                           "answered ENOSYS: Function not implemented); the filesystem makes no hard links", WAY_OUT)
    assert "the records written so far are kept" in line
    assert ResultStore(str(storage)).done_items() == set()

