"""Imported container images: importing a ~1 GB image from a registry against a bare ``skopeo copy`` of it (the
console's overhead: the size checks, the isolated copy, umoci's unpack onto a bounded disk, the file checks), and a
launch from an imported image against a launch from an official one on the local backend.

The registry is Debian's ``docker-registry`` on 127.0.0.1 with storage in a folder of this run; the image is built
here with umoci from random-content files (incompressible, so the layer is as large as its files) and pushed with
skopeo. Nothing leaves the host's loopback. Skipped where the tools (or, for the launch, sandboxes) are missing.
"""

import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from django.conf import settings

from bench import benchmark, size
from bench.instances import _launch_until_running_then_release, _user, clear_sandboxes
from catalog.models import Node
from config.celery import app
from instances import launching, runtime
from instances.backends import local
from marketplace.choices import ImageStatus
from marketplace.images import imports
from marketplace.models import Image

TOOLS = ("/usr/bin/skopeo", "/usr/bin/umoci", "/usr/bin/docker-registry", "/bin/busybox")
IMAGE_BYTES = size(1024**3, 32 * 1024**2)  # the image's files: ~1 GB for `make bench`, 32 MB in CI
FILES = 8
IMPORT_RUNS = size(2, 1)
LAUNCH_RUNS = size(3, 1)


def _missing() -> list[str]:
    return [tool for tool in TOOLS if not Path(tool).exists()]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class _Registry:
    """A registry without a password on the loopback, its storage under ``base``."""

    def __init__(self, base: Path):
        self.port = _free_port()
        config = base / "config.yml"
        config.write_text(
            "version: 0.1\nlog:\n  level: error\n"
            f"storage:\n  filesystem:\n    rootdirectory: {base / 'data'}\n"
            f"http:\n  addr: 127.0.0.1:{self.port}\n"
        )
        command = ["/usr/bin/docker-registry", "serve", str(config)]
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not self._answers():
            if time.monotonic() > deadline:
                raise RuntimeError("the benchmark's registry did not start")
            time.sleep(0.05)

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                return True
        except OSError:
            return False

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def _build(where: Path, total: int, *, cmd: list[str]) -> Path:
    """An OCI layout holding ``latest``: busybox as /bin/sh and ``total`` bytes of random content in FILES files."""
    root = where / "rootfs"
    (root / "bin").mkdir(parents=True)
    shutil.copy("/bin/busybox", root / "bin" / "busybox")
    for tool in ("sh", "sleep", "cat", "ls"):
        (root / "bin" / tool).symlink_to("busybox")
    if total:
        (root / "data").mkdir()
        for index in range(FILES):
            with open(root / "data" / f"part-{index}.bin", "wb") as part:
                left = total // FILES
                while left > 0:
                    chunk = os.urandom(min(left, 8 * 1024**2))
                    part.write(chunk)
                    left -= len(chunk)
    for folder, _dirs, names in os.walk(root):  # an image's usual modes, whatever this process's umask
        os.chmod(folder, 0o755)
        for name in names:
            if not os.path.islink(os.path.join(folder, name)):
                os.chmod(os.path.join(folder, name), 0o755 if name == "busybox" else 0o644)
    layout = where / "layout"
    image = f"{layout}:latest"
    subprocess.run(["umoci", "init", "--layout", str(layout)], check=True)
    subprocess.run(["umoci", "new", "--image", image], check=True)
    subprocess.run(["umoci", "insert", "--image", image, str(root), "/"], check=True, capture_output=True)
    config = ["umoci", "config", "--image", image] + [f"--config.cmd={part}" for part in cmd]
    subprocess.run([*config, "--config.env=PATH=/bin"], check=True)
    shutil.rmtree(root)
    return layout


def _push(layout: Path, registry: _Registry, name: str) -> str:
    reference = f"127.0.0.1:{registry.port}/{name}"
    copy = ["skopeo", "--insecure-policy", "copy", "--quiet", "--dest-tls-verify=false"]
    subprocess.run([*copy, f"oci:{layout}:latest", f"docker://{reference}"], check=True)
    return reference


def _bare_copy(reference: str, where: Path) -> tuple[float, float]:
    """Seconds of skopeo alone copying the image out of the registry into an OCI layout, and of that copy then
    unpacked by umoci alone (rootless, onto the plain disk): the two floors of an import."""
    target, unpacked = where / "bare", where / "bare-rootfs"
    shutil.rmtree(target, ignore_errors=True)
    copy = ["skopeo", "--insecure-policy", "copy", "--quiet", "--src-tls-verify=false"]
    began = time.perf_counter()
    subprocess.run([*copy, f"docker://{reference}", f"oci:{target}:latest"], check=True)
    copied = time.perf_counter() - began
    unpack = ["umoci", "raw", "unpack", "--rootless", "--image", f"{target}:latest", str(unpacked)]
    subprocess.run(unpack, check=True, capture_output=True)
    took = time.perf_counter() - began
    shutil.rmtree(target, ignore_errors=True)
    shutil.rmtree(unpacked, ignore_errors=True)
    return copied, took


def _import(user, reference: str) -> tuple[float, Image]:
    """Seconds of the console's import (the task's work, run here as the worker would)."""
    began = time.perf_counter()
    image = imports.start_import(user, reference)
    image.refresh_from_db()
    took = time.perf_counter() - began
    if image.status != ImageStatus.READY:
        raise RuntimeError(f"the benchmark's import failed: {image.status_detail}")
    return took, image


class _Imports:
    """The settings an import on the loopback needs, with the layout under ``root``, for the benchmark's length."""

    def __init__(self, root: Path):
        self.before = {
            name: getattr(settings, name)
            for name in ("IMAGE_IMPORT_ROOT", "IMAGE_IMPORT_ALLOW_LOOPBACK", "IMAGE_IMPORT_MAX_GB", "STORAGE_MAX_GB")
        }
        self.eager = app.conf.task_always_eager
        settings.IMAGE_IMPORT_ROOT = root
        settings.IMAGE_IMPORT_ALLOW_LOOPBACK = True
        settings.IMAGE_IMPORT_MAX_GB = settings.STORAGE_MAX_GB = max(4, 4 * IMAGE_BYTES / 1024**3)
        app.conf.task_always_eager = True  # the import task runs in this process, as a worker would run it

    def restore(self) -> None:
        for name, value in self.before.items():
            setattr(settings, name, value)
        app.conf.task_always_eager = self.eager


def _skip(report) -> bool:
    if not _missing():
        return False
    if os.environ.get("CI") == "true":
        raise RuntimeError(f"CI=true and {', '.join(_missing())} missing")
    report.add("skipped", 0, unit="", note=f"needs {', '.join(_missing())}")
    return True


@benchmark(f"Image import: a {IMAGE_BYTES / 1024**3:.2g} GB image from a registry vs a bare skopeo copy", quick=False)
def image_import(report):
    if _skip(report):
        return
    base = Path(tempfile.mkdtemp(prefix="gpucloud-bench-images-", dir="/tmp"))
    registry = _Registry(base)
    imported = _Imports(base / "layout-root")
    user = _user("bench-images@example.com")
    try:
        with report.timer() as t:
            reference = _push(_build(base / "build", IMAGE_BYTES, cmd=["/bin/sh"]), registry, "bench/big:1")
        report.add("build and push the image (setup)", t.seconds, unit="s", note="umoci + skopeo, random content")
        bare, bare_unpacked, console = [], [], []
        for _ in range(IMPORT_RUNS):
            copied, unpacked = _bare_copy(reference, base)
            bare.append(copied)
            bare_unpacked.append(unpacked)
            took, image = _import(user, reference)
            console.append(took)
            imports.remove_image(user, image)
    finally:
        imported.restore()
        registry.stop()
        shutil.rmtree(base, ignore_errors=True)
    note = f"n={IMPORT_RUNS}; copy, size checks, unpack onto a bounded disk, file checks"
    report.add("import (median)", _median(console), unit="s", note=note)
    report.add("bare skopeo copy (median)", _median(bare), unit="s", note="registry → OCI layout")
    floor = "the same copy, then umoci raw unpack --rootless alone"
    report.add("bare copy + unpack (median)", _median(bare_unpacked), unit="s", note=floor)
    report.add("import ÷ bare skopeo copy", _median(console) / _median(bare), unit="×", note=f"n={IMPORT_RUNS} each")
    report.add("import ÷ bare copy + unpack", _median(console) / _median(bare_unpacked), unit="×", note="")


def _median(values: list[float]) -> float:
    return sorted(values)[len(values) // 2]


@benchmark("Instances on the local backend: launch from an imported image vs from an official one", quick=False)
def imported_launch(report):
    """Launch → running of a machine booted from a small imported image (busybox), against the same from an
    official image (the runtime's root, running once its JupyterLab answers)."""
    if _skip(report):
        return
    ok, why = local.availability()
    if not ok:
        if os.environ.get("CI") == "true":
            raise RuntimeError(f"CI=true and no sandboxes here: {why}")
        report.add("skipped", 0, unit="", note=f"no local sandboxes here: {why}")
        return
    runtime.ensure()
    previous_root = settings.LOCAL_SANDBOX_ROOT
    settings.LOCAL_SANDBOX_ROOT = Path(tempfile.mkdtemp(prefix="gpucloud-bench-", dir="/tmp"))
    base = Path(tempfile.mkdtemp(prefix="gpucloud-bench-images-", dir="/tmp"))
    registry = _Registry(base)
    imported = _Imports(settings.LOCAL_SANDBOX_ROOT / "images")  # walkable by the sandboxes' users
    backends_before = dict(Node.objects.values_list("pk", "backend_name"))
    Node.objects.update(backend_name="local")
    user = _user("bench-images-launch@example.com")
    from_image, official = [], []
    try:
        reference = _push(_build(base / "build", 0, cmd=["/bin/sleep", "3600"]), registry, "bench/small:1")
        _took, image = _import(user, reference)
        variant = image.variants.get().slug
        for _ in range(LAUNCH_RUNS):
            request = launching.LaunchRequest(name="bench-image", no_card=True, cards=0, image=variant)
            from_image.append(_launch_until_running_then_release(user, request, timeout=120))
            request = launching.LaunchRequest(name="bench-official", no_card=True, cards=0, image="ubuntu-22.04")
            official.append(_launch_until_running_then_release(user, request, timeout=120))
    finally:
        clear_sandboxes(user)
        imported.restore()
        registry.stop()
        shutil.rmtree(base, ignore_errors=True)
        settings.LOCAL_SANDBOX_ROOT = previous_root
        for pk, name in backends_before.items():
            Node.objects.filter(pk=pk).update(backend_name=name)
    report.add_latencies("launch → running, imported image", from_image, note="sandbox up with the image's root")
    report.add_latencies("launch → running, official image", official, note="sandbox up, its JupyterLab answering")
    ratio = _median(official) / _median(from_image)
    report.add("official ÷ imported (median ratio)", ratio, unit="×", note=f"n={LAUNCH_RUNS} each")
