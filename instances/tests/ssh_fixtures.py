"""Fixtures for SSH into instances: keys made with ssh-keygen, the gateway on a free port in a thread of the test
process, and the system OpenSSH client (``/usr/bin/ssh``, ``/usr/bin/scp``) to talk to it.

THE FAKE — ``host_shell`` — is the one stand-in: it makes the simulated backend enterable by running ``/bin/sh``
on this host in a temporary home folder (``enter_argv`` monkeypatched, ``simulated`` off). The gateway, the keys,
the database and the client are all real. To run the same tests against real machines, give them a running
instance of the local backend (``on_local``) in place of ``host_shell``'s.
"""

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from accounts import ssh_keys
from instances import ssh_gateway
from instances.backends import local
from instances.backends.simulated import SimulatedBackend
from instances.models import Instance
from instances.tests.fixtures import settle

CLIENT_OPTIONS = (
    "StrictHostKeyChecking=no",
    "UserKnownHostsFile=/dev/null",
    "BatchMode=yes",
    "IdentitiesOnly=yes",
    "LogLevel=ERROR",
    "ConnectTimeout=10",
)
# -F /dev/null: nothing from the machine's or the user's ssh_config.
SSH_OPTIONS = ["-F", "/dev/null", *(arg for option in CLIENT_OPTIONS for arg in ("-o", option))]


@pytest.fixture(scope="session")
def sftp_server() -> Path:
    """OpenSSH's sftp-server, which scp (SFTP by default) and sftp run in the machine: installed where this host
    lets a test do what ``make run`` does (root with apt-get), else the test skips and says how to install it."""
    path = Path(local.SFTP_SERVER)
    if not path.exists() and os.geteuid() == 0 and shutil.which("apt-get"):
        install = ["apt-get", "install", "-y", "-qq", "openssh-sftp-server"]
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        if subprocess.run(install, capture_output=True, env=env, check=False).returncode != 0:
            subprocess.run(["apt-get", "update", "-qq"], capture_output=True, env=env, check=False)
            subprocess.run(install, capture_output=True, env=env, check=False)
    if not path.exists():
        pytest.skip(f"no {path} here: apt-get install openssh-sftp-server (scp and sftp run it in the machine)")
    return path


@pytest.fixture
def host_shell(monkeypatch, tmp_path) -> Path:
    """FAKE BACKEND ENTRY: the simulated backend's instances "entered" as /bin/sh on this host, with the returned
    temporary folder as their home (and cwd, and SFTP root)."""
    home = tmp_path / "home"
    home.mkdir()

    def enter_argv(self, instance, command):
        shell = ["/bin/sh", "-l"] if command is None else ["/bin/sh", "-c", command]
        return ["/usr/bin/env", "-C", str(home), f"HOME={home}", *shell]

    monkeypatch.setattr(SimulatedBackend, "enter_argv", enter_argv)
    monkeypatch.setattr(SimulatedBackend, "simulated", False)
    return home


@pytest.fixture
def gateway(tmp_path):
    """The SSH gateway listening on a free port of 127.0.0.1, served by an event loop in a thread."""
    for program in ("ssh", "scp", "ssh-keygen"):
        assert shutil.which(program), f"these tests need the OpenSSH client's {program}"
    host_key = ssh_gateway.load_host_key(tmp_path / "gateway" / "host_key")
    running = ssh_gateway.GatewayThread("127.0.0.1", 0, host_key)
    yield running
    running.stop()


@dataclass(frozen=True)
class KeyPair:
    private: Path
    public: Path

    @property
    def public_text(self) -> str:
        return self.public.read_text()


def make_key(folder: Path, name: str, *, kind: str = "ed25519", bits: int | None = None) -> KeyPair:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    argv = ["ssh-keygen", "-q", "-t", kind, "-N", "", "-C", f"{name}@laptop", "-f", str(path)]
    subprocess.run([*argv, *(["-b", str(bits)] if bits else [])], check=True, capture_output=True)
    return KeyPair(path, path.with_suffix(".pub"))


@pytest.fixture
def owner_key(owner, tmp_path) -> KeyPair:
    """A key pair of the owner's, its public half added to their account."""
    pair = make_key(tmp_path / "keys", "owner")
    ssh_keys.add_ssh_key(owner, public_key=pair.public_text)
    return pair


@pytest.fixture
def stranger_key(stranger, tmp_path) -> KeyPair:
    pair = make_key(tmp_path / "keys", "stranger")
    ssh_keys.add_ssh_key(stranger, public_key=pair.public_text)
    return pair


@pytest.fixture
def running_instance(launch, host_shell) -> Instance:
    """A running instance of the owner's that the gateway can enter (through the fake above)."""
    instance = launch(name="ssh-box")
    settle()
    instance.refresh_from_db()
    assert instance.status == "running"
    return instance


def ssh(port: int, key: KeyPair, user, *command: str, options=(), input=None, timeout: float = 30):
    """``ssh -p port -i key user@127.0.0.1 command…`` with the system client; the completed process."""
    argv = ["ssh", "-p", str(port), "-i", str(key.private), *SSH_OPTIONS, *options, f"{user}@127.0.0.1", *command]
    return subprocess.run(argv, input=input, capture_output=True, timeout=timeout, check=False)


def scp(port: int, key: KeyPair, source: str, target: str, *options: str, timeout: float = 30):
    argv = ["scp", "-P", str(port), "-i", str(key.private), *SSH_OPTIONS, *options, source, target]
    return subprocess.run(argv, capture_output=True, timeout=timeout, check=False)
