"""The machine's own ``/etc``: a few generated files instead of the host's.

:func:`write_etc` writes them into a folder the sandbox binds read-only at ``/etc``; :data:`HOST_BINDS` are the
host's files and folders bound read-only over it, which carry nothing of the host's own (certificates, the dynamic
linker's cache, the alternatives' links that ``/usr/bin`` leads through, Python's site configuration). The host's
users, groups, password hashes, hostname, resolver, SSH keys, cron and services stay out of sight.

Everything a machine's ``/etc`` holds is written by :func:`write_etc` in one place: a caller that needs more
(a resolver for a network, package mirrors) passes it as ``files`` (``{"pip.conf": "…"}``) or ``nameservers``.
"""

import os
import shutil
from pathlib import Path

# Bound read-only over the generated folder where the host has them (bwrap's --ro-bind-try).
HOST_BINDS = (
    "ssl",
    "ca-certificates",
    "ca-certificates.conf",
    "alternatives",
    "ld.so.cache",
    "terminfo",
    "python3",
    "python3.11",
    "fonts",
)
# Copied from the host where it has them: facts about the distribution and the usual tables, nothing of the
# host's own.
HOST_COPIES = ("os-release", "debian_version", "lsb-release", "services", "protocols", "mime.types", "inputrc")

NO_NETWORK_RESOLVER = "# This machine has no network: no name server.\n"


def files_for(hostname: str, *, nameservers=(), files: dict[str, str] | None = None) -> dict[str, str]:
    """The generated files, by name under ``/etc``."""
    resolver = "".join(f"nameserver {address}\n" for address in nameservers) or NO_NETWORK_RESOLVER
    generated = {
        "passwd": ("root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"),
        "group": "root:x:0:\nnogroup:x:65534:\n",
        "hostname": f"{hostname}\n",
        "hosts": f"127.0.0.1\tlocalhost\n127.0.1.1\t{hostname}\n::1\tlocalhost ip6-localhost ip6-loopback\n",
        "resolv.conf": resolver,
        "nsswitch.conf": (
            "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\nnetworks: files\n"
            "protocols: files\nservices: files\n"
        ),
        "host.conf": "multi on\n",
        "timezone": "Etc/UTC\n",
        "shells": "/bin/sh\n/bin/bash\n/usr/bin/bash\n",
        "profile": (
            'export PATH="${PATH:-/usr/local/bin:/usr/bin:/bin}"\n'
            'for script in /etc/profile.d/*.sh; do [ -r "$script" ] && . "$script"; done; unset script\n'
            'if [ -n "$BASH_VERSION" ] && [ -f /etc/bash.bashrc ]; then . /etc/bash.bashrc; fi\n'
        ),
        "bash.bashrc": ("[ -z \"$PS1\" ] && return\nPS1='\\u@\\h:\\w\\$ '\n"),
    }
    return {**generated, **(files or {})}


def write_etc(folder: Path, hostname: str, *, nameservers=(), files: dict[str, str] | None = None) -> None:
    """The machine's ``/etc`` in ``folder`` (root's, readable by all): the generated files, copies of
    :data:`HOST_COPIES`, a link for the clock and the mount table, and an empty place for each of
    :data:`HOST_BINDS` the host has, where bwrap binds it."""
    folder.mkdir(mode=0o755, parents=True, exist_ok=True)
    os.chmod(folder, 0o755)
    for name, text in files_for(hostname, nameservers=nameservers, files=files).items():
        path = folder / name
        for parent in reversed(path.relative_to(folder).parents[:-1]):  # readable inside, whatever the umask
            (folder / parent).mkdir(exist_ok=True)
            os.chmod(folder / parent, 0o755)
        path.write_text(text)
        os.chmod(path, 0o644)
    for name in HOST_COPIES:
        source = Path("/etc") / name
        if source.is_file():
            shutil.copyfile(source, folder / name)
            os.chmod(folder / name, 0o644)
    for name, target in (("localtime", "/usr/share/zoneinfo/Etc/UTC"), ("mtab", "../proc/self/mounts")):
        (folder / name).unlink(missing_ok=True)
        (folder / name).symlink_to(target)
    for name in HOST_BINDS:
        source = Path("/etc") / name
        if source.is_dir():
            (folder / name).mkdir(exist_ok=True)
        elif source.exists():
            (folder / name).touch()


def bwrap_binds() -> list[str]:
    """bwrap's arguments that bind :data:`HOST_BINDS` over the generated ``/etc`` (after it is bound)."""
    argv = []
    for name in HOST_BINDS:
        if (Path("/etc") / name).exists():
            argv += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    return argv
