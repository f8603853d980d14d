"""The local backend from inside and outside: a real bubblewrap sandbox per instance.

What the owner notices: the machine comes up with JupyterLab answering, a shell inside runs commands, the home
keeps its files across a stop and a start, release deletes it while data disks keep theirs. What nobody inside
may do: read the console's database, settings or data folder, another user's storage or another instance's
home; reach PostgreSQL, Redis or the console over the network; take the host down with a fork bomb or a memory
hog.
"""

import base64
import json
import os
import shlex
import shutil
import signal
import socket
import stat as stats
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from catalog.models import InstanceSpec
from instances import backends, lifecycle
from instances.backends import get_backend, local, local_home, local_lxcfs
from instances.choices import Status
from instances.models import AgentReport, Instance
from instances.secrets import create_secret
from marketplace import seed as hub_catalog
from marketplace.hub import blobs, repos
from marketplace.models import HubItem
from storage import disks, mounts
from teams import services as teams
from tests.asgi_server import browser, lab_browser
from tests.fixtures.factories import UserFactory
from tests.fixtures.services import wait_until

pytestmark = [pytest.mark.sandbox, pytest.mark.django_db(transaction=True)]


def fresh(instance):
    return Instance.objects.with_related().get(pk=instance.pk)


def processes_of(uid: int) -> list[int]:
    """The live (not zombie) processes of a host user."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = open(f"/proc/{entry}/status").read()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if int(fields["Uid"].split()[0]) == uid and not fields["State"].strip().startswith("Z"):
            found.append(int(entry))
    return found


def mounts_under(path) -> list[str]:
    return [p for p in local._mount_points() if p == str(path) or p.startswith(f"{path}/")]


def test_a_launched_instance_runs_jupyterlab_and_a_shell_inside(on_local, running):
    instance = running()
    assert instance.access["simulated"] is False

    server = get_backend("local").jupyter(instance)
    assert server.socket and server.base_path == f"/instances/{instance.public_id}/lab/"

    done = on_local.run(
        instance, "echo $((6*7)); hostname; id -u; python -c 'import numpy; print(numpy.arange(3).sum())'"
    )
    assert done.returncode == 0, done.stderr
    answer, hostname, uid, numpy_sum = done.stdout.split()
    assert answer == "42" and hostname.startswith("gpu-") and uid == "0" and numpy_sum == "3"

    # Exit statuses pass through; the home is the instance's own.
    assert on_local.run(instance, "exit 3").returncode == 3
    on_local.run(instance, "echo 你好 > /root/hello.txt")
    assert (on_local.home(instance) / "hello.txt").read_text(encoding="utf-8") == "你好\n"


def test_nothing_of_the_host_is_reachable_from_inside(on_local, running, tmp_path):
    instance = running()
    other = running(name="other")
    console_port = int(django_settings.LOCAL_AGENT_CONSOLE_URL.rsplit(":", 1)[1].split("/")[0])
    database = django_settings.DATABASES["default"]["NAME"]
    probes = {
        "the console's data folder": f"ls {django_settings.DATA_DIR}",
        "the console's code and settings": f"cat {django_settings.BASE_DIR / 'config' / 'settings.py'}",
        "the database file": f"cat {database}",
        "another instance's home": f"ls {on_local.home(other)}",
        "the sandbox root": f"ls {on_local.root}",
        "the host's password hashes": "cat /etc/shadow",
    }
    for what, command in probes.items():
        done = on_local.run(instance, command)
        assert done.returncode != 0, f"{what} was readable from inside: {done.stdout[:200]}"

    for port in (5432, 6379, console_port):
        code = f"import socket; s = socket.socket(); s.settimeout(2); print(s.connect_ex(('127.0.0.1', {port})))"
        done = on_local.run(instance, f'python -c "{code}"')
        assert done.stdout.strip() != "0", f"port {port} of the host answered from inside"
    # The host itself still answers on the console's port: the refusal above is the sandbox's doing.
    with socket.create_connection(("127.0.0.1", console_port), timeout=2):
        pass

    # The environment holds nothing of the console's.
    done = on_local.run(instance, "env")
    for secret in ("SECRET_KEY", "DATABASE_URL", "GPUCLOUD_AGENT_TOKEN", "STRIPE"):
        assert secret not in done.stdout


def test_a_fork_bomb_and_a_memory_hog_are_contained(on_local, running, settings):
    settings.LOCAL_PIDS = 64
    settings.LOCAL_MEMORY_MB = 256
    victim = running(name="victim")
    neighbour = running(name="neighbour")

    fork_bomb = (
        "import os, time\n"
        "n = 0\n"
        "try:\n"
        "    while True:\n"
        "        if os.fork() == 0:\n"
        "            time.sleep(3)\n"
        "            os._exit(0)\n"
        "        n += 1\n"
        "except OSError:\n"
        "    print('capped', n)\n"
    )
    bomb = on_local.run(victim, f"python -c {shlex.quote(fork_bomb)}", timeout=60)
    assert "capped" in bomb.stdout
    hog = on_local.run(victim, "python -c \"b = bytearray(1024 * 1024 * 1024); print('allocated')\"", timeout=60)
    assert "allocated" not in hog.stdout and hog.returncode != 0

    # The neighbour and the host keep working.
    assert on_local.run(neighbour, "echo ok").stdout.strip() == "ok"
    assert os.fork  # the test process itself is alive and forking below
    assert on_local.run(neighbour, "python -c 'print(1 + 1)'").stdout.strip() == "2"


def test_stop_kills_every_process_start_brings_the_home_back_release_deletes_it(on_local, running):
    instance = running()
    on_local.run(instance, "echo kept > /root/notes.txt; (sleep 300 & sleep 300 &) >/dev/null 2>&1")
    uid = local.sandbox_uid(instance)
    assert len(processes_of(uid)) >= 3  # the agent, bwrap, JupyterLab, the sleeps…

    lifecycle.stop(fresh(instance))
    on_local.settle(until=lambda: fresh(instance).status == Status.STOPPED, message="the stop")
    assert processes_of(uid) == []
    assert mounts_under(on_local.folder(instance)) == []
    assert get_backend("local").jupyter(fresh(instance)) is None

    lifecycle.start(fresh(instance))
    on_local.settle(until=lambda: fresh(instance).status == Status.RUNNING, message="the restart")
    assert on_local.run(fresh(instance), "cat /root/notes.txt").stdout == "kept\n"

    lifecycle.release(fresh(instance))
    on_local.settle(until=lambda: fresh(instance).status == Status.RELEASED, message="the release")
    assert not on_local.home(instance).exists()


def test_disks_and_hub_items_are_real_bind_mounts_and_disks_outlive_the_instance(on_local, running):
    instance = running()
    backend = get_backend("local")

    # Attached while the machine runs: the disk appears inside at once, writable.
    backend.attach_disk(instance, "disk-1")
    done = on_local.run(instance, "echo 数据 > /root/data/disk-1/kept.txt && cat /root/data/disk-1/kept.txt")
    assert done.stdout == "数据\n", done.stderr

    # A hub item is read-only inside, whatever the user tries.
    item = on_local.root / "hub" / "qwen" / "Qwen2-7B"
    item.mkdir(parents=True)
    (item / "config.json").write_text('{"model_type": "qwen2"}')
    os.chmod(item / "config.json", 0o644)  # as the hub lays a repository out (the console's umask is 077)
    backend.mount(instance, "qwen/Qwen2-7B", "/root/public/qwen/Qwen2-7B")
    assert on_local.run(instance, "cat /root/public/qwen/Qwen2-7B/config.json").stdout == '{"model_type": "qwen2"}'
    assert on_local.run(instance, "echo x > /root/public/qwen/Qwen2-7B/config.json").returncode != 0
    assert on_local.run(instance, "rm /root/public/qwen/Qwen2-7B/config.json").returncode != 0
    assert (item / "config.json").exists()

    # The owner's cloud storage is /root/shared.
    backend.mount(instance, f"cloudstorage/{instance.owner.public_id}", "/root/shared")
    on_local.run(instance, "echo shared > /root/shared/from-inside.txt")
    assert (on_local.storage(instance.owner) / "from-inside.txt").read_text() == "shared\n"

    # Attaching again while running stacks nothing: each mount is made once.
    backend.attach_disk(fresh(instance), "disk-1")
    assert len(mounts_under(on_local.folder(instance) / "mnt")) == 4  # the hub itself, the disk, the item, the storage

    lifecycle.release(fresh(instance))
    on_local.settle(until=lambda: fresh(instance).status == Status.RELEASED, message="the release")
    assert not on_local.home(instance).exists()
    assert mounts_under(on_local.folder(instance)) == []
    assert (on_local.root / "disks" / "disk-1" / "kept.txt").read_text(encoding="utf-8") == "数据\n"
    assert (on_local.storage(instance.owner) / "from-inside.txt").exists()


def test_a_starter_dataset_with_real_files_mounts_and_loads_inside(on_local, running):

    hub_catalog.load()  # as `make run` does: the starter entries' real files are committed and laid out
    instance = running()

    mounts.mount(instance.owner, instance, "gpucloud/console-zh-en")
    read = on_local.run(
        instance,
        'python3 -c "import json; rows = [json.loads(l) for l in '
        "open('/root/datasets/gpucloud/console-zh-en/data/train.jsonl')]; "
        "print(len(rows), [r['zh'] for r in rows if r['en'] == 'Metadata only'][0])\"",
    )
    count, label = read.stdout.split()
    assert int(count) > 1000 and label == "仅有元数据", read.stderr


def test_the_chart_reads_the_machines_own_cgroup_not_the_hosts(on_local, running):

    instance = running()
    held = on_local.run(instance, "python3 -c 'import time; b = b\"x\" * (600 << 20); time.sleep(6)'")
    assert held.returncode == 0, held.stderr

    # 600 MiB of its 2 GiB limit is over a quarter of this machine's memory, however much the host has; reports
    # come every second here.
    mine = AgentReport.objects.filter(instance=instance, source="cgroup")
    on_local.settle(until=lambda: mine.filter(memory_used__gte=25).exists(), timeout=30, message="the report")
    assert not AgentReport.objects.filter(instance=instance, source="host").exists()


def test_the_quick_start_notebook_is_in_the_home_and_runs(on_local, running):
    instance = running()

    ran = on_local.run(
        instance,
        "cd /root && jupyter nbconvert --to notebook --execute --output /tmp/ran.ipynb quickstart.ipynb >/dev/null 2>&1"
        " && python3 -c \"import json; cells = json.load(open('/tmp/ran.ipynb'))['cells']; "
        "print(''.join(''.join(o.get('text', [])) for o in cells[-1]['outputs']))\"",
        timeout=120,
    )

    assert ran.returncode == 0, ran.stderr
    assert "loss" in ran.stdout and "step   40" in ran.stdout
    on_local.run(instance, "rm /root/quickstart.ipynb")
    lifecycle.stop(fresh(instance))
    on_local.settle(until=lambda: fresh(instance).status == Status.STOPPED, message="the stop")
    lifecycle.start(fresh(instance))
    on_local.settle(until=lambda: fresh(instance).status == Status.RUNNING, message="the start")
    assert on_local.run(instance, "ls /root/quickstart.ipynb").returncode != 0  # given once: deleted, it stays gone


def test_free_and_uptime_inside_show_the_machines_own_memory_and_time(on_local, running, settings):

    if local_lxcfs.ensure() is None:
        why = "lxcfs cannot run here (not installed, or no /dev/fuse): /proc shows the host's figures"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs a machine's own /proc figures: {why}")
        pytest.skip(why)
    instance = running()

    total = on_local.run(instance, "free -m | awk '/^Mem:/ {print $2}'").stdout.strip()
    uptime = float(on_local.run(instance, "cut -d' ' -f1 /proc/uptime").stdout)

    assert int(total) == settings.LOCAL_MEMORY_MB  # its limit, however much the host has
    assert uptime < 600  # since the machine started, not the host


def test_nproc_inside_counts_the_machines_cpus_and_two_machines_get_different_ones(on_local, running, settings):
    host = len(os.sched_getaffinity(0))
    if host < 2:
        pytest.skip("one CPU on this host: every machine runs on it")
    settings.LOCAL_CPUS = 1.0
    settings.LOCAL_HOST_CPUS = 8  # room for both whatever this host holds: the test is about where they run
    first, second = running(), running()

    counted = [on_local.run(m, "nproc").stdout.strip() for m in (first, second)]
    ran_on = [on_local.run(m, "taskset -pc $$ | cut -d: -f2").stdout.strip() for m in (first, second)]

    assert counted == ["1", "1"]  # the host has more; each machine has one
    assert ran_on[0] != ran_on[1]  # spread over the host's CPUs, not both on the first
    lab = on_local.run(first, "python -c 'import os; print(len(os.sched_getaffinity(0)))'")
    assert lab.stdout.strip() == "1", lab.stderr  # Python's thread pools size themselves from the same


@pytest.fixture
def own_lxcfs(settings):
    """An lxcfs of this test's own (the host's one serves the machines of the other tests), stopped after it. Its
    folder is right under /tmp: the machines' users search their way to it."""

    folder = Path(tempfile.mkdtemp(prefix="gpucloud-lxcfs-", dir="/tmp"))
    settings.LOCAL_LXCFS_DIR = str(folder / "lxcfs")
    yield local_lxcfs
    pidfile = folder / ".lxcfs.pid"
    if pidfile.exists():
        try:
            os.kill(int(pidfile.read_text()), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    subprocess.run(["umount", "-l", settings.LOCAL_LXCFS_DIR], capture_output=True, check=False)
    shutil.rmtree(folder, ignore_errors=True)


def test_a_machine_started_after_lxcfs_died_still_shows_its_own_memory(on_local, running, settings, own_lxcfs):
    root = own_lxcfs.ensure()
    if root is None:
        why = "lxcfs cannot run here (not installed, or no /dev/fuse): /proc shows the host's figures"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs a machine's own /proc figures: {why}")
        pytest.skip(why)
    os.kill(int((root.parent / ".lxcfs.pid").read_text()), signal.SIGKILL)
    for _ in range(50):  # the kernel ends the FUSE connection once the process is reaped
        try:
            os.stat(root)
        except OSError:
            break
        time.sleep(0.1)

    instance = running()

    total = on_local.run(instance, "free -m | awk '/^Mem:/ {print $2}'")
    assert total.stdout.strip() == str(settings.LOCAL_MEMORY_MB), total.stderr


FILL = "import os, sys; f = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY); os.posix_fallocate(f, 0, {mb} << 20)"


def test_a_data_disk_holds_its_size_and_no_more_grows_while_running_and_its_bytes_go_with_it(on_local, running):

    instance = running()
    disk = disks.create(instance.owner, name="small", size_gb=1, zone=instance.zone)
    disks.attach(instance.owner, disk.public_id, instance.public_id)
    inside = disk.device_path

    # 1.2 GB does not fit on a 1 GB disk: the machine is told so, the host's disk is untouched.
    full = on_local.run(instance, f"python -c '{FILL.format(mb=1200)}' {inside}/big")
    assert full.returncode != 0 and "No space left on device" in full.stderr
    # Grown to 2 GB (at once where the host may resize a mounted file system, else at the machine's next start),
    # the same file system takes it, files kept.
    on_local.run(instance, f"rm -f {inside}/big; echo 数据 > {inside}/kept.txt")
    disks.grow(instance.owner, disk.public_id, 2)
    lifecycle.stop(fresh(instance))
    on_local.settle(until=lambda: fresh(instance).status == Status.STOPPED, message="the stop")
    lifecycle.start(fresh(instance))
    on_local.settle(until=lambda: fresh(instance).status == Status.RUNNING, message="the start")
    fill = f"python -c '{FILL.format(mb=1200)}' {inside}/big"
    done = on_local.run(fresh(instance), f"cat {inside}/kept.txt && {fill} && df -k {inside}")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("数据\n")
    assert int(done.stdout.splitlines()[-1].split()[1]) > 1_800_000  # KB: the file system is 2 GB now

    # Deleted, its bytes leave the host.
    disks.detach(instance.owner, disk.public_id)
    assert on_local.run(fresh(instance), f"ls {inside}/big").returncode != 0
    disks.delete(instance.owner, disk.public_id)  # committed at once here: the bytes go on commit
    folder = on_local.root / "disks" / str(disk.public_id)
    assert not folder.exists() and not folder.with_name(f"{disk.public_id}.img").exists()


def test_the_cloud_storage_folder_is_limited_to_the_storage_ceiling(on_local, running, settings):
    settings.STORAGE_MAX_GB = 1
    instance = running()
    full = on_local.run(instance, f"python -c '{FILL.format(mb=1200)}' /root/shared/big")
    assert full.returncode != 0 and "No space left on device" in full.stderr
    fits = on_local.run(instance, f"rm /root/shared/big; python -c '{FILL.format(mb=100)}' /root/shared/fits")
    assert fits.returncode == 0, fits.stderr


def test_a_teams_machine_has_the_teams_folder_at_shared_team_and_no_members_own(on_local, running, owner):

    team = teams.create_team(owner, name="Vision", slug="vision")
    instance = running(user=team.account, name="team-box")

    # The start mounted the team's cloud storage, read-write; /root/shared (a person's own) is not there at all.
    done = on_local.run(instance, "echo 团队 > /root/shared-team/note.txt && ls -d /root/shared || echo no-shared")
    assert done.stdout.splitlines() == ["no-shared"], done.stderr
    note = on_local.storage(team.account) / "note.txt"
    assert note.read_text(encoding="utf-8") == "团队\n"
    assert not on_local.storage(owner).exists()


def test_the_quick_start_script_really_trains_and_its_curve_and_log_reach_the_console(on_local, running):
    instance = running()

    def curve():
        return get_backend("local").training_curves(fresh(instance)).get("loss", [])

    on_local.settle(until=lambda: len(curve()) >= 3, timeout=60, message="the quick-start curve")
    steps = [step for step, _value in curve()]
    assert steps == sorted(steps) and steps[0] >= 1
    assert fresh(instance).agent_reports.exists()
    assert "quick" in get_backend("local").logs(fresh(instance), tail=50).lower()


def test_a_web_app_inside_opens_through_the_console_for_its_owner_only(on_local, running, console_server, stranger):

    instance = running()
    on_local.run(instance, "cd /root && (nohup python -m http.server 7860 >/dev/null 2>&1 &)")
    on_local.run(instance, "printf 你好 > /root/gradio-says.txt")  # the machine's own file (the console's are 0600)
    owner, other = lab_browser(console_server, instance.owner, instance.public_id), browser(console_server, stranger)

    def answer():
        response = owner.get(f"/instances/{instance.public_id}/lab/proxy/7860/gradio-says.txt")
        return response if response.status_code == 200 else None

    response = wait_until(answer, timeout=30, message="the app on port 7860 through the console")
    assert response.content.decode() == "你好"
    # The port panel lists it, read from the machine's own network namespace, with the link that just answered.
    assert get_backend("local").listening_ports(fresh(instance)) == [7860]
    panel = browser(console_server, instance.owner).get(f"/instances/{instance.public_id}/ports/").content.decode()
    assert f'href="/instances/{instance.public_id}/lab/proxy/7860/"' in panel and "Gradio · 7860" in panel
    assert other.get(f"/instances/{instance.public_id}/lab/proxy/7860/gradio-says.txt").status_code == 404


def test_the_start_command_runs_at_boot_with_the_variables_and_secrets_and_its_output_is_the_log(
    on_local, running, owner
):

    create_secret(owner, "HF_TOKEN", "hf_s3cr3t")
    instance = running(
        start_command='echo "hello $GREETING"; echo "token ${#HF_TOKEN} chars"; echo 中文输出; exit 7',
        env={"GREETING": "世界"},
        secrets=["HF_TOKEN"],
    )
    backend = get_backend("local")

    def log():
        return backend.logs(fresh(instance), tail=20)

    on_local.settle(until=lambda: "exited with status 7" in log(), timeout=30, message="the start command")
    assert "hello 世界" in log() and "token 9 chars" in log() and "中文输出" in log()
    assert "hf_s3cr3t" not in log()  # the command printed its length, not the value
    # A shell in the machine has the same variables; the machine stays up after its start command ends.
    assert on_local.run(fresh(instance), 'echo "$GREETING $HF_TOKEN"').stdout == "世界 hf_s3cr3t\n"
    assert fresh(instance).status == Status.RUNNING


def test_a_worker_restart_finds_its_machines_again(on_local, running):

    instance = running()
    on_local.run(instance, "echo before > /root/f")
    backends._instances.clear()  # a new worker process: no memory of what it started

    lifecycle.reconcile()
    assert fresh(instance).status == Status.RUNNING
    assert get_backend("local").jupyter(fresh(instance)) is not None
    assert on_local.run(fresh(instance), "cat /root/f").stdout == "before\n"


def test_symlinks_made_inside_never_lead_the_host_side_anywhere(on_local, running, settings):

    instance = running()
    etc_before = os.stat("/etc")
    target = "/var/run/postgresql/.s.PGSQL.5432" if os.path.exists("/var/run/postgresql") else "/dev/log"
    done = on_local.run(
        instance,
        "rm -rf /root/.gpucloud /root/data && ln -s /etc /root/.gpucloud && ln -s /etc /root/data"
        f" && rm -f /run/gpucloud/jupyter.sock && ln -s {target} /run/gpucloud/jupyter.sock",
    )
    assert done.returncode == 0, done.stderr

    # The console keeps talking to the JupyterLab it checked, not to what the machine's socket path now names.
    server = get_backend("local").jupyter(fresh(instance))
    assert server is not None and stats.S_ISSOCK(os.lstat(server.socket).st_mode)
    assert os.lstat(server.socket).st_uid == local.sandbox_uid(instance)
    # Once that link is gone (say, JupyterLab restarted), a symlink in its place is never followed.
    os.unlink(server.socket)
    assert get_backend("local").jupyter(fresh(instance)) is None

    # A stop and a start (root prepares the machine again) leave the host's /etc as it was.
    lifecycle.stop(fresh(instance))
    on_local.settle(until=lambda: fresh(instance).status == Status.STOPPED, message="the stop")
    lifecycle.start(fresh(instance))
    on_local.settle(until=lambda: fresh(instance).status == Status.RUNNING, message="the restart")
    etc_after = os.stat("/etc")
    assert (etc_after.st_uid, etc_after.st_gid, etc_after.st_mode) == (
        etc_before.st_uid,
        etc_before.st_gid,
        etc_before.st_mode,
    )
    assert not os.path.exists("/etc/checkpoint.json")


def test_the_home_holds_no_more_than_the_system_disk_and_keeps_its_files_across_a_stop_and_a_start(on_local, running):

    # Given a spec with a 1 GB system disk, and a neighbour on the same host.
    InstanceSpec.objects.filter(chip__slug="ascend-910b", cards=1).update(system_disk_gb=1)
    instance = running()
    neighbour = running(name="neighbour")
    image = on_local.folder(instance) / local_home.IMAGE
    assert instance.access["disk_gb"] == 1 and image.stat().st_size == 1024**3
    assert image.stat().st_blocks * 512 < 64 * 1024**2  # sparse: the host gives only what is used
    assert image.stat().st_uid == 0 and image.stat().st_mode & 0o077 == 0  # nothing inside can reach the image
    done = on_local.run(instance, "ls -A /root; df -k /root | tail -1")
    assert "lost+found" not in done.stdout and int(done.stdout.split()[-5]) < 1024 * 1024, done.stdout

    # When the machine writes past its size, the write fails inside…
    on_local.run(instance, "echo kept > /root/notes.txt")
    fill = on_local.run(instance, "dd if=/dev/zero of=/root/fill bs=1M count=1200", timeout=120)
    assert fill.returncode != 0 and "No space left on device" in fill.stderr
    # …and nothing else notices: the host has its space, the neighbour and the console keep writing.
    assert shutil.disk_usage(on_local.root).free > 2 * 1024**3
    assert on_local.run(neighbour, "echo ok > /root/ok && cat /root/ok").stdout == "ok\n"
    assert on_local.run(instance, "rm /root/fill && echo freed > /root/after.txt").returncode == 0

    # A stop unmounts the home once the machine's processes are gone; a start mounts the same files again.
    lifecycle.stop(fresh(instance))
    on_local.settle(until=lambda: fresh(instance).status == Status.STOPPED, message="the stop")
    assert mounts_under(on_local.folder(instance)) == [] and local_home.loop_devices(image) == []
    assert get_backend("local").system_disk_usage(fresh(instance)) >= len("kept\n") + len("freed\n")
    assert mounts_under(on_local.folder(instance)) == []  # measured through a mount of its own, undone
    lifecycle.start(fresh(instance))
    on_local.settle(until=lambda: fresh(instance).status == Status.RUNNING, message="the restart")
    assert on_local.run(fresh(instance), "cat /root/notes.txt /root/after.txt").stdout == "kept\nfreed\n"

    # Release deletes the image, and no loop device holds it any more.
    lifecycle.release(fresh(instance))
    on_local.settle(until=lambda: fresh(instance).status == Status.RELEASED, message="the release")
    assert not image.exists() and not on_local.home(instance).exists()
    assert mounts_under(on_local.folder(instance)) == [] and local_home.loop_devices(image) == []


def test_a_plain_folder_home_from_before_images_keeps_its_files_and_says_it_has_no_limit(on_local, running, launch):
    # Given an instance whose home was a plain folder before homes were images (made as the old backend made it).
    instance = running()
    lifecycle.stop(fresh(instance))
    on_local.settle(until=lambda: fresh(instance).status == Status.STOPPED, message="the stop")
    folder = on_local.folder(instance)
    (folder / local_home.IMAGE).unlink()
    (on_local.home(instance) / "old.txt").write_text("from before\n")
    os.chown(on_local.home(instance) / "old.txt", local.sandbox_uid(instance), local.sandbox_uid(instance))

    lifecycle.start(fresh(instance))
    on_local.settle(until=lambda: fresh(instance).status == Status.RUNNING, message="the restart")
    assert on_local.run(fresh(instance), "cat /root/old.txt").stdout == "from before\n"
    assert fresh(instance).access["disk_gb"] == 0 and not (folder / local_home.IMAGE).exists()
    assert mounts_under(on_local.home(instance)) == []


def test_without_loop_devices_a_new_home_is_a_plain_folder_and_the_page_says_so(
    on_local, running, settings, client, owner
):
    settings.LOCAL_HOME_QUOTA = "off"  # as on a host without /dev/loop-control
    instance = running()
    assert instance.access["disk_gb"] == 0
    assert not (on_local.folder(instance) / local_home.IMAGE).exists()
    assert on_local.run(instance, "echo ok > /root/ok && cat /root/ok").stdout == "ok\n"
    client.force_login(owner)
    page = client.get(instance.get_absolute_url()).content.decode()
    assert 'id="sandbox-disk-unlimited"' in page and 'id="sandbox-disk"' not in page


def test_the_model_hub_answers_inside_and_nothing_else_of_the_console_does(on_local, running):
    """``snapshot_download`` inside a machine with no network fetches a published repository through the agent's
    relay (HF_ENDPOINT is set); the console's other addresses are refused there."""

    publisher = on_local_user()
    repos.create_repo(publisher, name="tiny", organization="demo", private=False, kind="model")
    config = b'{"model_type": "gpt2", "n_layer": 2}\n'
    lines = [
        json.dumps({"key": "header", "value": {"summary": "first"}}).encode(),
        json.dumps(
            {
                "key": "file",
                "value": {"path": "config.json", "content": base64.b64encode(config).decode(), "encoding": "base64"},
            }
        ).encode(),
    ]
    repos.commit(publisher, "model", "demo/tiny", "main", iter(lines))

    instance = running()
    code = (
        "from huggingface_hub import snapshot_download; p = snapshot_download('demo/tiny'); "
        "print(open(p + '/config.json').read(), end='')"
    )
    done = on_local.run(instance, f'echo "$HF_ENDPOINT"; python -c "{code}"', timeout=90)
    assert done.returncode == 0, done.stderr[-2000:]
    endpoint, rest = done.stdout.split("\n", 1)
    assert endpoint == "http://127.0.0.1:8860" and rest.encode() == config

    # Mounted, the same files are there with nothing copied: the mount's files are the stored blobs themselves.

    mounts.mount(instance.owner, instance, "demo/tiny")  # public: anyone may mount it
    seen = on_local.run(instance, "cat /root/public/demo/tiny/config.json")
    assert seen.returncode == 0 and seen.stdout.encode() == config, seen.stderr
    blob = HubItem.objects.get(repo="demo/tiny").head.files.get(path="config.json").blob
    assert os.path.samefile(on_local.root / "hub" / "demo" / "tiny" / "config.json", blobs.local_path(blob))

    for path in ("/billing/", "/api/v1/instances", "/instances/", "/ops/", "/api/models/../../billing/"):
        probe = (
            "import urllib.request, urllib.error\n"
            "try:\n"
            f"    print(urllib.request.urlopen('http://127.0.0.1:8860{path}').status)\n"
            "except urllib.error.HTTPError as e:\n"
            "    print(e.code)\n"
        )
        answer = on_local.run(instance, f"python -c {shlex.quote(probe)}")
        assert answer.stdout.strip() == "403", (path, answer.stdout, answer.stderr[-500:])
    # A second request smuggled behind a hub address (a bare line feed ends the first for the server) is refused.
    smuggle = (
        "import socket; s = socket.create_connection(('127.0.0.1', 8860)); "
        "s.sendall(b'GET /demo/tiny/resolve/main/config.json HTTP/1.1\\r\\nHost: x\\r\\nX: y\\n\\r\\n"
        "GET /api/v1/me HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n'); print(s.recv(4096).decode().split(chr(13))[0])"
    )
    answer = on_local.run(instance, f"python -c {shlex.quote(smuggle)}")
    assert answer.stdout.strip() == "HTTP/1.1 400 Bad Request", (answer.stdout, answer.stderr[-500:])


def on_local_user():

    return UserFactory(email="publisher@example.com")
