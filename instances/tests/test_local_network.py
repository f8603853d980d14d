"""A local machine's outbound network: the package index answers from inside, the host and private ranges never do.

No test here sends a packet to a private-range address other than slirp's own gateway and DNS inside the machine's
virtual network: the private-range drops are checked by reading the machine's rules back.
"""

import os
import socket
import subprocess
import threading

import pytest

from catalog.models import Zone
from instances.backends import local, local_network

pytestmark = [pytest.mark.sandbox, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def egress(on_local):
    """The local backend with slirp4netns and nftables: skipped where they are missing, but not on CI."""
    ok, why = local_network.availability()
    if not ok:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs outbound network for machines: {why}")
        pytest.skip(why)
    return on_local


def netns_pid(instance) -> int:
    state = local.read_state(instance.public_id)
    assert state.get("slirp_pid"), "the machine has no outbound interface"
    return state["netns_pid"]


def ruleset(instance) -> str:
    done = subprocess.run(
        ["nsenter", f"--net=/proc/{netns_pid(instance)}/ns/net", "nft", "list", "ruleset"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def test_a_machine_downloads_from_the_package_index(egress, running, client, owner):
    instance = running()
    client.force_login(owner)
    page = client.get(instance.get_absolute_url()).content.decode()
    assert 'id="sandbox-network"' in page and 'id="sandbox-no-network"' not in page
    assert egress.run(instance, "cat /etc/resolv.conf").stdout.strip() == "nameserver 10.0.2.3"
    done = egress.run(instance, "python3 -m pip download -q --no-deps -d /tmp/x six && ls /tmp/x", timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().startswith("six-")


def test_the_hosts_loopback_is_out_of_reach(egress, running):
    instance = running()
    accepted = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]

        def accept():
            listener.settimeout(15)
            try:
                accepted.append(listener.accept())
            except OSError:
                pass

        waiter = threading.Thread(target=accept)
        waiter.start()
        code = (
            "import socket\n"
            "for host in ('10.0.2.2', '127.0.0.1'):\n"
            "    s = socket.socket(); s.settimeout(3)\n"
            f"    print(host, s.connect_ex((host, {port})))\n"
        )
        done = egress.run(instance, f'python3 -c "{code}"')
        # Wake the waiter: the host's own connection is the one it gets when nothing from inside came first.
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        waiter.join()
    answers = dict(line.split() for line in done.stdout.splitlines())
    assert answers["10.0.2.2"] != "0", "the host's loopback answered through slirp's gateway"
    assert answers["127.0.0.1"] == str(__import__("errno").ECONNREFUSED), "the machine's own loopback"
    assert len(accepted) == 1 and accepted[0][1][0] == "127.0.0.1"
    accepted[0][0].close()


def test_private_ranges_are_dropped_and_the_machine_cannot_lift_the_rules(egress, running):
    instance = running()
    rules = ruleset(instance)
    for net in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "100.64.0.0/10", "127.0.0.0/8"):
        assert net in rules, f"{net} is not in the machine's rules:\n{rules}"
    assert "ip daddr 10.0.2.3 udp dport 53 accept" in rules and "meta nfproto ipv6 drop" in rules
    for address in local_network.host_addresses():
        assert address in rules

    # The machine's root may not flush them nor take its interface down: neither a shell entering it nor the
    # machine's own first process (whose capabilities JupyterLab and the start command inherit) holds
    # CAP_NET_ADMIN.
    flush = egress.run(instance, "nft flush ruleset")
    assert flush.returncode != 0 and "Operation not permitted" in flush.stderr, flush.stderr
    status = dict(line.split(":", 1) for line in open(f"/proc/{netns_pid(instance)}/status").read().splitlines())
    assert int(status["CapEff"], 16) & (1 << 12) == 0  # CAP_NET_ADMIN
    assert ruleset(instance) == rules


def test_a_zone_without_egress_keeps_the_loopback_only(egress, running, client, owner):
    Zone.objects.update(egress=False)
    instance = running()
    client.force_login(owner)
    page = client.get(instance.get_absolute_url()).content.decode()
    assert 'id="sandbox-no-network"' in page and 'id="sandbox-network"' not in page
    done = egress.run(instance, "cat /proc/net/dev")
    interfaces = [line.split(":")[0].strip() for line in done.stdout.splitlines()[2:]]
    assert interfaces == ["lo"]
    assert not local.read_state(instance.public_id).get("slirp_pid")
    assert "nameserver" not in egress.run(instance, "cat /etc/resolv.conf").stdout


def test_slirp4netns_dies_with_the_machine(egress, running):
    instance = running()
    slirp = local.read_state(instance.public_id)["slirp_pid"]
    assert os.path.exists(f"/proc/{slirp}")
    local.LocalBackend()._kill(instance.public_id, local.read_state(instance.public_id))
    assert not os.path.exists(f"/proc/{slirp}") or open(f"/proc/{slirp}/stat").read().split()[2] == "Z"


def test_a_machine_whose_slirp4netns_died_gets_its_network_back_at_the_next_beat(egress, running):
    instance = running()
    slirp = local.read_state(instance.public_id)["slirp_pid"]
    local_network.stop(slirp)
    assert egress.run(instance, "grep -c tap0: /proc/net/dev").stdout.strip() == "0"  # the interface went with it

    local.LocalBackend().status(instance)  # what the reconcile beat asks

    again = local.read_state(instance.public_id)["slirp_pid"]
    assert again != slirp and os.path.exists(f"/proc/{again}")
    assert egress.run(instance, "grep -c tap0: /proc/net/dev").stdout.strip() == "1"
    assert "meta nfproto ipv6 drop" in ruleset(instance)  # its rules in place with the new interface
    done = egress.run(instance, "python3 -m pip download -q --no-deps -d /tmp/x six && ls /tmp/x", timeout=120)
    assert done.returncode == 0 and done.stdout.strip().startswith("six-"), done.stderr[-2000:]


def test_the_operators_mirrors_are_written_into_the_machine(egress, running, settings):
    settings.MIRROR_PIP_INDEX = "https://pypi.mirror.example/simple"
    settings.MIRROR_HF_ENDPOINT = "https://hf.mirror.example"
    instance = running()
    done = egress.run(instance, "python3 -m pip config list; echo $HF_ENDPOINT")
    assert done.stdout.split() == ["global.index-url='https://pypi.mirror.example/simple'", "https://hf.mirror.example"]


def test_without_mirrors_pip_uses_its_index_and_the_hub_its_relay(egress, running):
    instance = running()
    done = egress.run(instance, "python3 -m pip config list; echo $HF_ENDPOINT")
    assert done.stdout.split() == [f"http://127.0.0.1:{local.HUB_RELAY_PORT}"]


def test_the_start_command_finds_the_network_up(egress, running):
    instance = running(start_command="grep -c tap0: /proc/net/dev > /root/at-start; sleep 600")
    assert (egress.home(instance) / "at-start").read_text() == "1\n"
    assert egress.run(instance, "echo $GPUCLOUD_NETWORK").stdout == "outbound\n"


def test_without_slirp4netns_a_machine_runs_on_its_loopback_and_the_log_says_why(egress, running, monkeypatch, caplog):
    monkeypatch.setattr(local_network, "SLIRP4NETNS", "/nonexistent/slirp4netns")
    instance = running()
    assert "slirp4netns not installed" in caplog.text
    done = egress.run(instance, "cat /proc/net/dev")
    assert [line.split(":")[0].strip() for line in done.stdout.splitlines()[2:]] == ["lo"]


def test_a_slirp4netns_started_later_leaves_the_cloud_storage_of_running_machines_mounted(egress, running):
    # /root/shared is a mount below the machine's mount hub, which the host shares with the machine: a slirp4netns
    # started afterwards (here the machine's own, brought back after it died) must not unmount it on either side.
    instance = running()
    assert egress.run(instance, "touch /root/shared/kept").returncode == 0
    local_network.stop(local.read_state(instance.public_id)["slirp_pid"])

    local.LocalBackend().status(instance)  # what the reconcile beat asks: a new slirp4netns

    assert local.read_state(instance.public_id)["slirp_pid"]
    assert f"{egress.folder(instance)}/mnt/shared" in local._mount_points()
    assert egress.run(instance, "ls /root/shared").stdout.split() == ["kept"]
