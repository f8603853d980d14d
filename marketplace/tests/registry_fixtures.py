"""A real Docker Registry v2 (Debian's ``docker-registry``) on 127.0.0.1 behind a password, and tiny images built
with umoci from busybox-static and pushed to it with skopeo — what imports are tested against.

Nothing here sends a byte anywhere but the host's own loopback.
"""

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

REGISTRY = "/usr/bin/docker-registry"
BUSYBOX = "/bin/busybox"
USER, PASSWORD = "alice", "registry-s3cret"
TOOLS = ("/usr/bin/skopeo", "/usr/bin/umoci", REGISTRY, BUSYBOX, "/usr/bin/htpasswd")
MARKER = "made by the image import test\n"


def _missing() -> list[str]:
    return [tool for tool in TOOLS if not Path(tool).exists()]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


@pytest.fixture(scope="session")
def registry(tmp_path_factory):
    """``host:port`` of a password-protected registry on the loopback (USER / PASSWORD)."""
    if _missing():
        pytest.skip(f"needs {', '.join(_missing())} (apt-get install skopeo umoci docker-registry busybox-static)")
    base = tmp_path_factory.mktemp("registry")
    htpasswd = subprocess.run(["htpasswd", "-Bbn", USER, PASSWORD], capture_output=True, text=True, check=True)
    (base / "htpasswd").write_text(htpasswd.stdout)
    port = _free_port()
    (base / "config.yml").write_text(
        "version: 0.1\nlog:\n  level: error\n"
        f"storage:\n  filesystem:\n    rootdirectory: {base / 'data'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
        f"auth:\n  htpasswd:\n    realm: tests\n    path: {base / 'htpasswd'}\n"
    )
    server = subprocess.Popen(
        [REGISTRY, "serve", str(base / "config.yml")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        for _ in range(100):
            if _answers(port):
                break
            time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=10)


def build_image(
    where: Path, files: dict[str, str], *, cmd: list[str], env: list[str], extra=None, ports: tuple[str, ...] = ()
) -> Path:
    """An OCI layout at ``where`` holding one image ``latest``: busybox as /bin/sh, ``files`` (path → text), then
    ``extra(rootfs)`` to add anything else (a setuid file, a symlink), with ``cmd``, ``env`` and the exposed
    ``ports`` ("8080/tcp") as its config."""
    root = where / "rootfs"
    (root / "bin").mkdir(parents=True)
    shutil.copy(BUSYBOX, root / "bin" / "busybox")
    for tool in ("sh", "cat", "echo", "ls", "env", "sleep", "id"):
        (root / "bin" / tool).symlink_to("busybox")
    for path, text in files.items():
        (root / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (root / path.lstrip("/")).write_text(text)
    for folder, _dirs, names in os.walk(root):  # an image's usual modes, whatever the test's umask
        os.chmod(folder, 0o755)
        for name in names:
            if not os.path.islink(os.path.join(folder, name)):
                os.chmod(os.path.join(folder, name), 0o755 if name == "busybox" else 0o644)
    if extra:
        extra(root)
    layout = f"{where / 'layout'}:latest"
    subprocess.run(["umoci", "init", "--layout", str(where / "layout")], check=True)
    subprocess.run(["umoci", "new", "--image", layout], check=True)
    subprocess.run(["umoci", "insert", "--image", layout, str(root), "/"], check=True, capture_output=True)
    config = ["umoci", "config", "--image", layout, "--config.workingdir", "/"]
    config += [f"--config.cmd={part}" for part in cmd] + [f"--config.env={item}" for item in env]
    config += [f"--config.exposedports={port}" for port in ports]
    subprocess.run(config, check=True)
    return where / "layout"


def push(layout: Path, registry: str, name: str) -> str:
    """Push the layout's ``latest`` to ``registry`` as ``name``; returns the reference."""
    reference = f"{registry}/{name}"
    subprocess.run(
        [
            "skopeo",
            "--insecure-policy",
            "copy",
            "--quiet",
            "--dest-tls-verify=false",
            f"--dest-creds={USER}:{PASSWORD}",
            f"oci:{layout}:latest",
            f"docker://{reference}",
        ],
        check=True,
    )
    return reference


@pytest.fixture(scope="session")
def tiny_image(registry, tmp_path_factory):
    """The reference of a tiny image in the registry: busybox, a marker file at /marker, a CMD that prints its env;
    and what a hostile image plants for the dynamic loader the host's programs inside would run through: an
    /etc/ld.so.preload and an LD_PRELOAD naming a library of its own."""
    layout = build_image(
        tmp_path_factory.mktemp("tiny"),
        {"/marker": MARKER, "/etc/ld.so.preload": "/planted.so\n"},
        cmd=["/bin/sh", "-c", 'echo "tiny image started: GREETING=$GREETING"; sleep 600'],
        env=["PATH=/bin", "GREETING=hello-from-the-image", "LD_PRELOAD=/planted.so", "not.a.shell.name=1"],
    )
    return push(layout, registry, "team/tiny:1")


@pytest.fixture(scope="session")
def tiny_mlu_image(registry, tmp_path_factory):
    """The tiny image with a Cambricon runtime library (an empty ``libcnrt.so``): the import suggests the MLU
    family, so it launches on the cluster's MLU370 cards. Its CMD prints its env and the card it was given."""
    layout = build_image(
        tmp_path_factory.mktemp("tiny-mlu"),
        {"/marker": MARKER, "/lib/libcnrt.so": ""},
        cmd=["/bin/sh", "-c", 'echo "tiny image started: GREETING=$GREETING cards=$MLU_VISIBLE_DEVICES"; sleep 600'],
        env=["PATH=/bin", "GREETING=hello-from-the-image"],
    )
    return push(layout, registry, "team/tiny-mlu:1")


@pytest.fixture
def image_imports(settings, tmp_path):
    """Imports land in this test's folder and may reach the tests' registry on the loopback."""
    settings.IMAGE_IMPORT_ROOT = tmp_path / "images"
    settings.IMAGE_IMPORT_ALLOW_LOOPBACK = True
    return settings.IMAGE_IMPORT_ROOT
