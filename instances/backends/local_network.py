"""Outbound network for a local sandbox: slirp4netns in the machine's network namespace, behind nftables rules.

bwrap gives each machine a network namespace of its own (``--unshare-net``) with only a loopback. Where the
machine's zone allows egress and the host has ``slirp4netns`` and ``nft``, :func:`attach` (as root, once the
sandbox's first process exists):

1. loads :func:`ruleset` into the namespace (``nsenter --net=/proc/<pid>/ns/net nft -f -``) while it still has
   nothing but its loopback, so no packet leaves before the rules are in place. The rules drop output to every
   private, link-local, shared, loopback (other than through ``lo``), multicast and reserved range, to the host's
   own addresses, and all IPv6 but the loopback; the only private address allowed is slirp's DNS, 10.0.2.3, port 53.
2. starts ``slirp4netns --configure --disable-host-loopback`` on it: ``tap0`` with 10.0.2.100/24, a default route
   through 10.0.2.2, DNS at 10.0.2.3. slirp4netns runs in a sandbox and a seccomp filter of its own
   (``--enable-sandbox --enable-seccomp``) and opens no API socket, so nothing is forwarded inward. It starts in
   a mount namespace whose mounts are all private (``unshare``): its sandbox makes only ``/`` private in the copy
   of the mounts it takes and then detaches the copy, and from the host's own namespace that detaching reached
   back through every shared mount: the disks and cloud storage in each running machine's mount hub were
   unmounted on the host and inside the machine.

The namespace belongs to bwrap's user namespace, where the machine's user is root. That root holds no
``CAP_NET_ADMIN`` there (bwrap, started by the unprivileged sandbox user, gives its processes none, and
``BWRAP_CAP_DROPS`` says so to bwrap explicitly; a shell entering the machine drops every capability)
and may not make a user namespace of its own (``--disable-userns``), so it can neither change these rules nor the
interface.

slirp4netns is the host's process (its pid is in the instance's state): the backend kills it with the machine.
Where the tools are missing, machines keep only their loopback and the log says why.
"""

import ipaddress
import logging
import os
import signal
import subprocess
import time
from pathlib import Path

log = logging.getLogger(__name__)

SLIRP4NETNS = "/usr/bin/slirp4netns"
NFT = "/usr/sbin/nft"
NSENTER = "/usr/bin/nsenter"
UNSHARE = "/usr/bin/unshare"
TAP = "tap0"
MTU = 65520
GATEWAY = "10.0.2.2"
DNS = "10.0.2.3"
GUEST = "10.0.2.100"
TABLE = "gpucloud_egress"
BWRAP_CAP_DROPS = ("--cap-drop", "CAP_NET_ADMIN", "--cap-drop", "CAP_NET_RAW")
READY_SECONDS = 10.0
# Never reachable from a machine: this network, private, shared (carrier-grade NAT), loopback, link-local,
# multicast and reserved. 10.0.2.0/24 is slirp's own network inside 10/8: its DNS is allowed before these drops.
BLOCKED = (
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "224.0.0.0/4",
    "240.0.0.0/4",
)


class NetworkError(Exception):
    """The machine could not be given its network; it keeps its loopback only."""


def availability() -> tuple[bool, str]:
    """Whether this host can give machines outbound network, and why not."""
    missing = [Path(path).name for path in (SLIRP4NETNS, NFT, NSENTER, UNSHARE) if not Path(path).exists()]
    if missing:
        return False, f"{', '.join(missing)} not installed: machines have their loopback only"
    if os.geteuid() != 0:
        return False, "the console does not run as root: machines have their loopback only"
    return True, ""


def host_addresses() -> list[str]:
    """The host's own IPv4 addresses (slirp would reach its services through them), outside :data:`BLOCKED`."""
    try:
        done = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return []
    blocked = [ipaddress.ip_network(net) for net in BLOCKED]
    found = []
    for line in done.stdout.splitlines():
        fields = line.split()
        if "inet" not in fields:
            continue
        address = ipaddress.ip_interface(fields[fields.index("inet") + 1]).ip
        if not any(address in net for net in blocked) and str(address) not in found:
            found.append(str(address))
    return found


def ruleset(own=()) -> str:
    """The machine's output filter (nft syntax), replacing whatever its namespace had."""
    drops = ", ".join((*BLOCKED, *own))
    return (
        f"table inet {TABLE}\n"
        f"delete table inet {TABLE}\n"
        f"table inet {TABLE} {{\n"
        "  chain output {\n"
        "    type filter hook output priority 0; policy accept;\n"
        '    oifname "lo" accept\n'
        "    meta nfproto ipv6 drop\n"
        f"    ip daddr {DNS} udp dport 53 accept\n"
        f"    ip daddr {DNS} tcp dport 53 accept\n"
        f"    ip daddr {{ {drops} }} drop\n"
        "  }\n"
        "}\n"
    )


def netns(pid: int) -> str:
    return f"/proc/{pid}/ns/net"


def apply_rules(pid: int) -> None:
    """Load :func:`ruleset` into the network namespace of the sandbox process ``pid``."""
    try:
        done = subprocess.run(
            [NSENTER, f"--net={netns(pid)}", NFT, "-f", "-"],
            input=ruleset(host_addresses()),
            capture_output=True,
            text=True,
            timeout=15,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NetworkError(f"nft: {exc}") from exc
    if done.returncode != 0:
        raise NetworkError(f"nft: {done.stderr.strip()[:300]}")


def attach(pid: int, logfile: Path) -> int:
    """The rules, then slirp4netns, in the network namespace of the sandbox process ``pid``; slirp4netns's pid
    once its interface is up. Raises :class:`NetworkError` (slirp4netns not left running) when either fails."""
    apply_rules(pid)
    ready_read, ready_write = os.pipe()
    argv = [
        # unshare execs slirp4netns: the pid in the instance's state and the one stop() kills stay slirp4netns's.
        UNSHARE,
        "--mount",
        "--propagation",
        "private",
        "--",
        SLIRP4NETNS,
        "--configure",
        f"--mtu={MTU}",
        "--disable-host-loopback",
        "--enable-sandbox",
        "--enable-seccomp",
        f"--ready-fd={ready_write}",
        "--netns-type=path",
        netns(pid),
        TAP,
    ]
    try:
        with open(logfile, "ab") as out:
            slirp = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=out,
                cwd="/",
                pass_fds=(ready_write,),
                start_new_session=True,
                env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
            )
    except OSError as exc:
        os.close(ready_read)
        raise NetworkError(f"slirp4netns: {exc}") from exc
    finally:
        os.close(ready_write)
    try:
        os.set_blocking(ready_read, False)
        deadline = time.monotonic() + READY_SECONDS
        while time.monotonic() < deadline:
            try:
                if os.read(ready_read, 1) == b"1":
                    return slirp.pid
            except BlockingIOError:
                pass
            if slirp.poll() is not None:
                break
            time.sleep(0.02)
    finally:
        os.close(ready_read)
    stop(slirp.pid)
    raise NetworkError("slirp4netns did not bring the machine's interface up")


def stop(pid: int | None) -> None:
    """slirp4netns gone (it exits by itself when the machine's namespace does; this does not wait for that)."""
    if not pid:
        return
    try:
        if Path(os.readlink(f"/proc/{pid}/exe")).name != Path(SLIRP4NETNS).name:
            return  # the pid is someone else's now
        os.kill(pid, signal.SIGKILL)
    except OSError:
        return
    try:
        os.waitpid(pid, 0)  # our child when this process started it
    except ChildProcessError:
        pass
