"""The local sandbox's boundary, tried from inside a real machine.

Every byte a machine writes stops at a size of its own (its sockets folder, /tmp, /var, /dev/shm, the start
command's log while it runs) and never lands on the host's disk; a seccomp filter refuses what a machine never
needs; the machine has an /etc of its own, and neither a process inside nor its mount table shows a host folder; and
two consoles on one host never share sandbox uids.
"""

import json
import os
import shlex
import subprocess
import time

import pytest
from django.conf import settings as django_settings

from instances.backends import BackendError, get_backend, local, local_uids
from instances.choices import Status
from instances.models import Instance

pytestmark = [pytest.mark.sandbox, pytest.mark.django_db(transaction=True)]


def fresh(instance):
    return Instance.objects.with_related().get(pk=instance.pk)


def test_every_writable_place_outside_the_disks_stops_small_and_off_the_hosts_disk(on_local, running, settings):
    settings.LOCAL_TMP_MB = 32
    instance = running()
    try:
        # A gigabyte into the sockets folder: refused after a few MiB, on a file system of its own.
        done = on_local.run(instance, "dd if=/dev/zero of=/run/gpucloud/big bs=1M count=1024", timeout=120)
        assert done.returncode != 0 and "No space left on device" in done.stderr, done.stderr[-300:]
        written = on_local.run(instance, "stat -c %s /run/gpucloud/big").stdout.strip()
        assert int(written) <= django_settings.LOCAL_RUN_MB * 1024 * 1024
        host_side = local.sockets(instance.public_id) / "big"
        assert os.stat(host_side).st_dev != os.stat(on_local.root).st_dev  # not on the host's disk
    finally:
        on_local.run(instance, "rm -f /run/gpucloud/big")

    for place, limit_mb in (("/tmp", 32), ("/var/tmp", django_settings.LOCAL_VAR_MB), ("/dev/shm", 64)):
        done = on_local.run(instance, f"dd if=/dev/zero of={place}/big bs=1M count=1024; rm -f {place}/big")
        assert "No space left on device" in done.stderr, (place, done.stderr[-300:])
        copied = int(done.stderr.split(" bytes")[0].split("\n")[-1])
        assert copied <= limit_mb * 1024 * 1024, place
    # The root bubblewrap builds the machine in, and /dev, take nothing at all.
    for path in ("/big", "/run/big", "/dev/big", "/opt/big"):
        done = on_local.run(instance, f"echo x > {path}")
        assert done.returncode != 0 and "Read-only file system" in done.stderr, (path, done.stderr)
    # /dev/null and the machine's JupyterLab (its socket is in the sockets folder) still work.
    assert on_local.run(instance, "echo x > /dev/null && echo ok").stdout == "ok\n"
    assert get_backend("local").jupyter(fresh(instance)) is not None


SPEW = "import sys\nn = 0\nwhile True:\n    n += 1\n    sys.stdout.write(f'line {n} ' + 'x' * 500 + '\\n')\n"


def test_a_start_command_that_spews_keeps_its_log_within_2_mb_while_it_runs(on_local, running):
    instance = running(start_command=f"exec python -u -c {shlex.quote(SPEW)}")
    log = on_local.folder(instance) / "console.log"
    backend = get_backend("local")

    def last_line_number() -> int:
        last = backend.logs(fresh(instance), tail=2).splitlines()
        numbers = [int(line.split()[1]) for line in last if line.startswith("line ") and len(line.split()) > 2]
        return numbers[-1] if numbers else 0

    largest, seen = 0, []
    deadline = time.monotonic() + 12
    while time.monotonic() < deadline:
        largest = max(largest, log.stat().st_size)
        seen.append(last_line_number())
        time.sleep(0.01)
    assert largest <= local.LOG_BYTES, f"the log reached {largest} bytes"
    # It really spewed (far past 2 MB in the while), and the log shows the newest lines, not the first ones.
    assert seen[-1] * 510 > 4 * local.LOG_BYTES, seen[-1]
    assert seen[-1] > max(seen[: len(seen) // 2])
    assert fresh(instance).status == Status.RUNNING


def test_a_seccomp_filter_refuses_what_a_machine_never_needs(on_local, running):
    instance = running()
    # Every process of the machine (the init, JupyterLab, the start command, the hub relay) and a shell entering
    # it are filtered; only bwrap's own process 1, which runs nothing of the user's, is not.
    status = "for p in /proc/[0-9]*; do [ $p = /proc/1 ] || echo $(cat $p/comm) $(grep Seccomp: $p/status); done"
    seen = on_local.run(instance, status).stdout.splitlines()
    assert len(seen) >= 4 and all(line.endswith("Seccomp: 2") for line in seen if "Seccomp" in line), seen
    assert on_local.run(instance, "grep Seccomp: /proc/self/status").stdout.split() == ["Seccomp:", "2"]

    calls = {
        "keyctl": "libc.syscall(250, 0, 0, 0, 0, 0)",
        "unshare a user namespace": "libc.unshare(0x10000000)",
        "unshare a mount namespace": "libc.unshare(0x00020000)",
        "mount": "libc.mount(b'none', b'/tmp', b'tmpfs', 0, None)",
        "bpf": "libc.syscall(321, 0, 0, 0)",
        "personality without address randomisation": "libc.personality(0x0040000)",
    }
    for what, call in calls.items():
        code = f"import ctypes; libc = ctypes.CDLL(None, use_errno=True); r = {call}; print(r, ctypes.get_errno())"
        done = on_local.run(instance, f'python -c "{code}"')
        assert done.stdout.split() == ["-1", "1"], (what, done.stdout, done.stderr[-300:])  # EPERM
    # What the machine is for still works under it: Python with numpy, pip, a fork, threads.
    work = "python -c 'import numpy, threading; print(numpy.ones(3).sum())' && pip --version >/dev/null && echo ok"
    assert on_local.run(instance, work, timeout=60).stdout.split() == ["3.0", "ok"]


def test_no_process_inside_shows_a_host_path(on_local, running):
    instance = running()
    on_local.run(instance, "(sleep 300 &) >/dev/null 2>&1")
    dump = (
        "import os, json\n"
        "seen = {}\n"
        "for pid in os.listdir('/proc'):\n"
        "    if pid.isdigit():\n"
        "        for name in ('cmdline', 'environ'):\n"
        "            try:\n"
        "                seen[f'{pid}/{name}'] = open(f'/proc/{pid}/{name}', 'rb').read().decode('utf-8', 'replace')\n"
        "            except OSError as e:\n"
        "                seen[f'{pid}/{name}'] = f'unreadable: {e}'\n"
        "print(json.dumps(seen))\n"
    )
    done = on_local.run(instance, f"python -c {shlex.quote(dump)}")
    seen = json.loads(done.stdout)
    assert len([k for k in seen if k.endswith("/cmdline")]) >= 4  # bwrap's, the init, JupyterLab, sleep, …
    assert "unreadable" not in seen["1/cmdline"] and "unreadable" not in seen["1/environ"]
    host_paths = {str(django_settings.DATA_DIR), str(django_settings.BASE_DIR), str(on_local.root)}
    for key, text in seen.items():
        for path in host_paths:
            assert path not in text, f"/proc/{key} shows {path}: {text[:300]}"


def test_the_machines_mount_table_names_no_host_folder(on_local, running):
    instance = running()
    backend = get_backend("local")
    backend.attach_disk(instance, "disk-1", 1, name="scratch")
    backend.mount(instance, f"cloudstorage/{instance.owner.public_id}", "/root/shared")
    table = on_local.run(instance, "cat /proc/self/mountinfo").stdout
    points = {line.split()[4] for line in table.splitlines()}
    for inside in ("/opt/gpucloud/boot", "/opt/gpucloud/workloads", "/mnt/gpucloud", "/run/gpucloud", "/root"):
        assert inside in points, (inside, table)
    assert any(point.startswith("/mnt/gpucloud/data/") for point in points), table  # the disk
    host_paths = {str(django_settings.DATA_DIR), str(django_settings.BASE_DIR), str(on_local.root)}
    for line in table.splitlines():
        for path in host_paths:
            assert path not in line, f"the machine's mount table shows {path}: {line}"
    # The boot files (the seccomp filter an SSH shell loads, the environment) belong to no user of the machine: its
    # root reads them through its group and can change none of them.
    owners = on_local.run(instance, "stat -c '%u %a' /opt/gpucloud/boot /opt/gpucloud/boot/seccomp.bpf").stdout
    assert owners.split("\n")[:2] == ["65534 550", "65534 440"], owners
    assert on_local.run(instance, "chmod 600 /opt/gpucloud/boot/env; echo x >> /opt/gpucloud/boot/env").returncode != 0
    assert "GPUCLOUD_INSTANCE" in on_local.run(instance, "cat /opt/gpucloud/boot/env").stdout


def test_the_machine_has_an_etc_of_its_own(on_local, running):
    instance = running()
    assert on_local.run(instance, "ls /etc/shadow").returncode != 0
    assert on_local.run(instance, "cat /etc/hostname").stdout.strip() == local.hostname(instance)
    assert on_local.run(instance, "hostname").stdout.strip() == local.hostname(instance)
    users = on_local.run(instance, "cut -d: -f1 /etc/passwd").stdout.split()
    assert users == ["root", "nobody"]
    names = on_local.run(instance, f"whoami; getent hosts {local.hostname(instance)}").stdout.split()
    assert names[:2] == ["root", "127.0.1.1"], names
    # Python finds the certificate authorities (pip and HTTPS need them) and the bash login shell starts.
    certs = "import ssl; c = ssl.create_default_context(); print(len(c.get_ca_certs()) > 0 or c.cert_store_stats())"
    assert on_local.run(instance, f'python -c "{certs}"').stdout.strip() not in ("", "False")
    assert on_local.run(instance, "bash -lc 'echo login-ok'").stdout == "login-ok\n"
    # Nothing the machine does changes it.
    assert on_local.run(instance, "echo 'evil:x:0:0::/:/bin/sh' >> /etc/passwd").returncode != 0


def test_a_second_console_whose_sandbox_uids_overlap_is_refused(on_local, launch, settings, tmp_path):
    settings.LOCAL_SANDBOX_UID_REGISTRY = tmp_path / "registry"
    # Another console on this host, with its own data folder, holds the range of ours and runs a machine in it.
    other_data = tmp_path / "other-console"
    other_data.mkdir()
    settings.DATA_DIR, ours = other_data, settings.DATA_DIR
    local_uids.claim()
    settings.DATA_DIR = ours
    first, end = local_uids.extent()
    as_theirs = ["setpriv", f"--reuid={end - 1}", f"--regid={end - 1}", "--clear-groups", "sleep", "120"]
    its_machine = subprocess.Popen(as_theirs)
    try:
        instance = launch(chip="ascend-910b", cards=1)
        on_local.settle(until=lambda: fresh(instance).status == Status.FAILED, message="the refusal")
        assert "overlap" in fresh(instance).status_detail
        assert not (on_local.folder(instance) / "root").exists()  # nothing of the machine was made

        # A range of its own is fine.
        settings.LOCAL_SANDBOX_UID_BASE = first + settings.LOCAL_SANDBOX_UID_RANGE
        local_uids.claim()
        settings.LOCAL_SANDBOX_UID_BASE = first
        with pytest.raises(BackendError, match="overlap"):
            local_uids.claim()
    finally:
        its_machine.kill()
        its_machine.wait()
    # That console runs nothing in the range any more (a console gone, or one whose machines are all stopped):
    # its claim gives way for good, so this console's own machines never make it look alive again.
    deadline = time.monotonic() + 15
    while True:
        try:
            local_uids.claim()
            break
        except BackendError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)  # the killed process, and any machine the earlier launch left, to be gone
    assert len(list((tmp_path / "registry").glob("*.json"))) == 1  # ours alone: the other claim is gone


def test_an_owner_id_past_the_range_gets_no_uid(settings):
    settings.LOCAL_SANDBOX_UID_RANGE = 1000
    assert local_uids.uid_for(999) == int(settings.LOCAL_SANDBOX_UID_BASE) + 999
    with pytest.raises(BackendError):
        local_uids.uid_for(1000)
