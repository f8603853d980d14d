"""``manage.py use_local [--off] [--install] [--check]``: run the catalog's nodes as sandboxes on this host.

The embedded default of ``make run``. It checks that this host can run sandboxes (root, bubblewrap, namespaces),
installs what it needs first with ``--install`` when it can (root on Debian/Ubuntu: bubblewrap, the SFTP server
that scp and sftp run inside a machine, and lxcfs, which shows a machine its own memory and CPUs in /proc), builds
the runtime (JupyterLab, numpy, and the tiny demo model that CPU-only inference endpoints serve, trained here) once,
and moves every node that is on the simulated backend to the local one. Where the host cannot, the nodes stay
simulated and the command says why. ``--off`` moves local nodes back to the simulated backend. Instances keep the
backend they were launched on.
"""

import shutil
import subprocess
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from catalog.models import Node
from instances import runtime
from instances.backends import local, local_lxcfs, local_network

# The Debian packages a machine on this host needs, by a file each one installs.
PACKAGES = {
    "bubblewrap": local.BWRAP,
    "openssh-sftp-server": local.SFTP_SERVER,
    "lxcfs": local_lxcfs.LXCFS,
    "slirp4netns": local_network.SLIRP4NETNS,  # outbound network for machines in zones with egress
    "nftables": local_network.NFT,
}


def missing_packages() -> list[str]:
    return [package for package, path in PACKAGES.items() if not Path(path).exists()]


class Command(BaseCommand):
    help = "Run the catalog's simulated nodes as real sandboxes on this host (the local backend), where it can."

    def add_arguments(self, parser):
        parser.add_argument("--off", action="store_true", help="back to the simulated backend")
        parser.add_argument("--install", action="store_true", help="apt-get install what is missing")
        parser.add_argument(
            "--check", action="store_true", help="check the host and build the runtime; move no node (CI)"
        )

    def handle(self, *args, off, install, check, **options):
        if off:
            moved = Node.objects.filter(backend_name="local").update(backend_name="simulated")
            self.stdout.write(f"{moved} node(s) back on the simulated backend")
            return
        missing = missing_packages()
        if missing and install and shutil.which("apt-get"):
            self.stdout.write(f"Installing {' '.join(missing)} (apt-get install)…")
            subprocess.run(["apt-get", "install", "-y", "-qq", *missing], capture_output=True, check=False)
        ok, why = local.availability()
        if ok and (missing := missing_packages()):
            self.stdout.write(self.style.WARNING(f"Missing here: {' '.join(missing)} (apt-get install them)."))
        if ok:
            try:
                if not runtime.is_ready():
                    self.stdout.write(
                        "Building the instances' runtime (JupyterLab, numpy, the tiny demo model) once; about a minute…"
                    )
                path = runtime.ensure()
            except runtime.RuntimeUnavailable as exc:
                ok, why = False, str(exc)
        if not ok and check:
            raise CommandError(f"this host cannot run sandboxes: {why}")
        if not ok:
            self.stdout.write(
                self.style.WARNING(
                    f"Instances run on the SIMULATED backend here: {why}. There is no machine to enter; "
                    "the instance pages say so."
                )
            )
            return
        if check:
            self.stdout.write(f"This host runs sandboxes; runtime in {path}")
            return
        moved = Node.objects.filter(backend_name="simulated").update(backend_name="local")
        total = Node.objects.filter(backend_name="local").count()
        self.stdout.write(
            f"Instances run as sandboxes on this host: {total} node(s) on the local backend "
            f"({moved} moved); runtime in {path}"
        )
