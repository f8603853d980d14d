"""The bounded space an image is unpacked in: one its worker left behind (killed mid-unpack) is unmounted and removed
by the next unpack beside it; one in use is left alone. Needs root and loop devices, as the spaces do."""

import fcntl
import multiprocessing
import os
import signal
from pathlib import Path

import pytest

from instances.backends import local_home
from marketplace.images import bounded

needs_loop = pytest.mark.skipif(bool(local_home.unavailable()), reason=f"no loop mounts: {local_home.unavailable()}")
MIB = 1024**2


def _mounted_under(folder: Path) -> list[str]:
    prefix = f"{folder.resolve()}/"
    return [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines() if prefix in line.split()[1]]


def _hold_a_space(beside: Path, ready, release) -> None:
    with bounded.space(beside, 8 * MIB) as folder:
        (folder / "layer").write_bytes(b"x" * 1024)
        ready.set()
        release.wait(60)


def _worker(beside: Path):
    context = multiprocessing.get_context("fork")
    ready, release = context.Event(), context.Event()
    process = context.Process(target=_hold_a_space, args=(beside, ready, release))
    process.start()
    assert ready.wait(60), "the worker did not make its space"
    return process, release


@needs_loop
def test_a_space_its_killed_worker_left_mounted_is_removed_by_the_next_unpack(tmp_path):
    process, _release = _worker(tmp_path)
    assert len(_mounted_under(tmp_path)) == 1
    os.kill(process.pid, signal.SIGKILL)  # as the OOM killer or a deploy ends a worker
    process.join(10)
    assert len(_mounted_under(tmp_path)) == 1 and list(tmp_path.glob(".bounded-*"))

    with bounded.space(tmp_path, 8 * MIB) as folder:
        assert _mounted_under(tmp_path) == [str(folder.resolve())]  # only the new one
    assert _mounted_under(tmp_path) == [] and list(tmp_path.glob(".bounded-*")) == []


@needs_loop
def test_a_space_in_use_by_a_live_worker_is_left_alone(tmp_path):
    process, release = _worker(tmp_path)
    try:
        assert bounded.clear_abandoned(tmp_path) == 0
        (held,) = _mounted_under(tmp_path)
        assert (Path(held) / "layer").read_bytes() == b"x" * 1024
    finally:
        release.set()
        process.join(30)
    assert _mounted_under(tmp_path) == [] and list(tmp_path.glob(".bounded-*")) == []


def test_a_space_between_its_lock_file_and_its_lock_is_not_taken_for_abandoned(tmp_path, monkeypatch):
    """A space's lock file exists a moment before its maker holds the lock: a second unpack that clears abandoned
    spaces in that moment leaves the space being made alone."""
    real_flock = fcntl.flock
    cleared = []
    calls = []

    def flock_after_another_unpack(fd, operation):
        calls.append(operation)
        if len(calls) == 1:  # another worker's unpack beside it, in the window between open() and flock()
            cleared.append(bounded.clear_abandoned(tmp_path))
        return real_flock(fd, operation)

    monkeypatch.setattr(bounded.fcntl, "flock", flock_after_another_unpack)
    monkeypatch.setattr(bounded.local_home, "unavailable", lambda: "no loop mounts in this test")
    with bounded.space(tmp_path, 1024 * 1024) as folder:
        assert folder.is_dir()
    assert cleared == [0], "the space being made was removed as abandoned"
