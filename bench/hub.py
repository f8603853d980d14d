"""Hub benchmarks: the Hugging Face API's download (``resolve``) and LFS upload throughput, through a real server.

The console runs under gunicorn (2 sync workers, as in production) on 127.0.0.1 against the bench database; a
client streams a file through it. Each figure has its floor measured in the same run: for downloads, the same
gunicorn serving the same file from a bare WSGI app (``bare_files``), and reading it straight from disk; for
uploads, hashing and writing the same bytes locally.
"""

import hashlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests
from django.conf import settings

from accounts import services as console_services
from accounts.models import User
from bench import benchmark, size
from marketplace.hub import blobs, repos
from marketplace.models import HubBlob, HubItem

MB = 1024 * 1024
CHUNK = 1024 * 1024


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Server:
    """gunicorn serving ``app`` (the console by default) with this process's settings (database, media root)."""

    def __init__(self, app: str = "config.wsgi", **env):
        self.app, self.env = app, env

    def __enter__(self):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                self.app,
                "-b",
                f"127.0.0.1:{self.port}",
                "-w",
                "2",
                "--timeout",
                "300",
                "--log-level",
                "warning",
            ],
            cwd=settings.BASE_DIR,
            env=os.environ | self.env,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                requests.head(f"{self.url}/healthz", timeout=30)
                return self
            except requests.RequestException:  # not listening yet, or its first answer slow on a busy machine
                time.sleep(0.2)
        raise RuntimeError("gunicorn did not answer")

    def __exit__(self, *exc):
        self.process.terminate()
        self.process.wait(timeout=30)


def _publisher():
    user, _ = User.objects.get_or_create(email="bench-hub@example.com")
    token = console_services.create_api_token(user, name="bench", scope="read_write").plaintext
    if not HubItem.objects.filter(repo="bench/weights").exists():
        repos.create_repo(user, name="weights", organization="bench", private=False, kind="model")
    return user, token


def _upload(url: str, token: str, data: bytes) -> float:
    """The LFS path as huggingface_hub takes it: batch, PUT to the signed address, verify, commit. Seconds of PUT."""
    oid = hashlib.sha256(data).hexdigest()
    auth = {"Authorization": f"Bearer {token}"}
    wanted = {"operation": "upload", "transfers": ["basic"], "objects": [{"oid": oid, "size": len(data)}]}
    batch = requests.post(f"{url}/bench/weights.git/info/lfs/objects/batch", headers=auth, timeout=60, json=wanted)
    batch = batch.json()
    actions = batch["objects"][0]["actions"]
    started = time.perf_counter()
    put = requests.put(actions["upload"]["href"], data=data, timeout=300)
    seconds = time.perf_counter() - started
    put.raise_for_status()
    requests.post(
        actions["verify"]["href"], headers=auth, json={"oid": oid, "size": len(data)}, timeout=60
    ).raise_for_status()
    lfs_file = {"path": "model.bin", "algo": "sha256", "oid": oid, "size": len(data)}
    lines = [{"key": "header", "value": {"summary": "bench"}}, {"key": "lfsFile", "value": lfs_file}]
    body = "".join(json.dumps(line) + "\n" for line in lines).encode()
    commit = f"{url}/api/models/bench/weights/commit/main"
    requests.post(commit, data=body, headers=auth, timeout=60).raise_for_status()
    return seconds


def _local_write(data: bytes) -> float:
    """The upload's floor: hashing the bytes and writing them to a file on the same disk, fsynced."""
    with tempfile.NamedTemporaryFile(dir=settings.MEDIA_ROOT) as handle:
        started = time.perf_counter()
        digest = hashlib.sha256()
        for i in range(0, len(data), CHUNK):
            digest.update(data[i : i + CHUNK])
            handle.write(data[i : i + CHUNK])
        handle.flush()
        os.fsync(handle.fileno())
        return time.perf_counter() - started


def _download(url: str) -> tuple[float, int]:
    started = time.perf_counter()
    received = 0
    with requests.get(url, stream=True, timeout=300) as answer:
        answer.raise_for_status()
        for chunk in answer.iter_content(CHUNK):
            received += len(chunk)
    return time.perf_counter() - started, received


def _read_directly(path: Path) -> float:
    started = time.perf_counter()
    with open(path, "rb") as handle:
        while handle.read(CHUNK):
            pass
    return time.perf_counter() - started


@benchmark("Hub: a 100 MB file through the Hugging Face API (LFS upload, resolve download)")
def hub_throughput(report):
    megabytes = size(100, 8)
    data = os.urandom(megabytes * MB)
    _user, token = _publisher()
    Path(settings.MEDIA_ROOT).mkdir(parents=True, exist_ok=True)
    with _Server() as server:
        upload = _upload(server.url, token, data)
        floor_up = _local_write(data)
        runs, direct = [], []
        path = Path(blobs.local_path(HubBlob.objects.get(sha256=hashlib.sha256(data).hexdigest())))
        for _ in range(5):  # the file is in the page cache after the first: every side reads from memory
            seconds, received = _download(f"{server.url}/bench/weights/resolve/main/model.bin")
            assert received == len(data)
            runs.append(seconds)
            direct.append(_read_directly(path))
    bare = []
    with _Server("bench.bare_files:application", BENCH_BARE_FILE=str(path)) as server:
        for _ in range(5):
            seconds, received = _download(server.url)
            assert received == len(data)
            bare.append(seconds)
    mb = len(data) / MB
    down, floor_down, floor_read = mb / min(runs), mb / min(bare), mb / min(direct)
    report.add("resolve download", down, unit="MB/s", note="gunicorn, 2 sync workers; requests, 1 MB chunks")
    report.add("the same file from a bare WSGI app", floor_down, unit="MB/s", note="the floor: same server and client")
    report.add("download ratio", down / floor_down, unit="× floor", note="target ≥ 0.7")
    report.add("reading the stored file", floor_read, unit="MB/s", note="open() and read() from the page cache")
    report.add("download vs reading the file", down / floor_read, unit="×", note="what HTTP itself costs here")
    up, floor = mb / upload, mb / floor_up
    report.add("LFS upload (PUT to the signed address)", up, unit="MB/s", note="stream, SHA-256, stored once")
    report.add("hashing and writing locally", floor, unit="MB/s", note="the floor: sha256 + write + fsync")
    report.add("upload ratio", up / floor, unit="× floor")
