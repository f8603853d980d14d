"""Instance benchmarks: the launch API's latency, and launches per second through a real Celery worker."""

import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from urllib.parse import urlsplit
from wsgiref.simple_server import WSGIRequestHandler, make_server

import httpx
from django.conf import settings
from django.core.wsgi import get_wsgi_application
from django.db import connection
from django.db.models import F, Sum
from django.test import Client

from accounts import services as console_services
from accounts import ssh_keys
from accounts.models import User, WorkerHeartbeat
from bench import benchmark, size
from billing import price_version, wallet
from catalog import services as catalog_services
from catalog.models import Chip, Node, Zone
from config.celery import app
from core.errors import Unavailable
from instances import launching, lifecycle, runtime, ssh_gateway
from instances.backends import BackendError, JupyterServer, TransientBackendError, get_backend, local, local_volumes
from instances.backends.slurm import ENDED_STATES, SlurmClient
from instances.models import AccountLimit, Instance
from storage import tree
from tests.asgi_server import login_cookies

LAUNCHES = size(200, 40)
THROUGHPUT_LAUNCHES = size(100, 20)


def _user(email: str):
    user, _created = User.objects.get_or_create(email=email)
    wallet.adjust_balance(
        user=user, amount=Decimal("100000"), reason="bench", staff=None, idempotency_key=f"bench:{uuid.uuid4()}"
    )
    # The benchmarks run hundreds of machines for one account: the cards are their limit, not the account's.
    AccountLimit.objects.update_or_create(account=user, defaults={"max_machines": 10_000, "max_cpu_only": 10_000})
    return user


def _capacity(cards: int) -> None:
    """Enough 910B cards in the Xinchuang zone for the run (the bench database is thrown away afterwards)."""
    zone, chip = Zone.objects.get(slug="cn-east-xc"), Chip.objects.get(slug="ascend-910b")
    for n in range(cards // 8 + 1):
        name = f"bench-{uuid.uuid4().hex[:8]}-{n}"
        catalog_services.add_node(zone=zone, chip=chip, name=name, cards=8)


@benchmark("Instances: POST /api/v1/instances (launch)")
def launch_api(report):
    os.environ.update({"INSTANCES_SIM_PULL_SECONDS": "0", "INSTANCES_SIM_BOOT_SECONDS": "0"})
    _capacity(LAUNCHES)
    user = _user("bench-launch@example.com")
    token = console_services.create_api_token(user, name="bench", scope="read_write").plaintext
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}")
    body = {"chip": "ascend-910b", "cards": 1, "image": "pytorch-2.2-cann8", "name": "bench"}
    durations = []
    for _ in range(LAUNCHES):
        with report.timer() as t:
            response = client.post("/api/v1/instances", body, content_type="application/json")
        assert response.status_code == 201, response.content
        durations.append(t.seconds)
    report.add_latencies("launch server time", durations, note="in-process client; quote, funds, reserve, enqueue")
    app.control.purge()  # these launches' provisioning is not part of this benchmark


@benchmark("Instances: launches through the worker until running", quick=False)
def launches_through_worker(report):
    env = os.environ | {"INSTANCES_SIM_PULL_SECONDS": "0", "INSTANCES_SIM_BOOT_SECONDS": "0"}
    os.environ.update({"INSTANCES_SIM_PULL_SECONDS": "0", "INSTANCES_SIM_BOOT_SECONDS": "0"})
    _capacity(THROUGHPUT_LAUNCHES)
    user = _user("bench-worker@example.com")
    log = open(Path(settings.DATA_DIR) / "bench-worker.log", "wb")  # noqa: SIM115 (closed below)
    cmd = [sys.executable, "-m", "celery", "-A", "config", "worker", "-l", "WARNING", "-c", "2", "-n", "bench@%h"]
    worker = subprocess.Popen(cmd, env=env, cwd=settings.BASE_DIR, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not WorkerHeartbeat.objects.filter(hostname__startswith="bench@").exists():
            if time.monotonic() > deadline:
                raise RuntimeError("the bench worker did not start")
            time.sleep(0.2)
        request = launching.LaunchRequest(name="bench-w", chip="ascend-910b", image="pytorch-2.2-cann8")
        start = time.perf_counter()
        ids = [launching.launch(user, request).pk for _ in range(THROUGHPUT_LAUNCHES)]
        while Instance.objects.filter(pk__in=ids, status="running").count() < len(ids):
            if time.perf_counter() - start > 300:
                raise RuntimeError("launches did not all reach running within 5 minutes")
            time.sleep(0.05)
        seconds = time.perf_counter() - start
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        log.close()
    broker = settings.CELERY_BROKER_URL.split("://", 1)[0]
    note = f"{THROUGHPUT_LAUNCHES} launches, 1 worker × 2 processes, {broker} broker, simulated timings 0"
    report.add("launches per second", THROUGHPUT_LAUNCHES / seconds, unit="/s", note=note)


# Capacity under contention (SPEC §12) --------------------------------------------------------------------------

RACE_LAUNCHES, RACE_CARDS = 200, 64
# Each thread holds a database connection. CI's light run shares PostgreSQL (100 connections) with the other lane,
# whose own race test holds 50 at once: the light run races from fewer threads so the two never run the server out.
RACE_THREADS = size(50, 20)


@benchmark(f"Capacity: {RACE_LAUNCHES} concurrent launches for {RACE_CARDS} free cards")
def launch_race(report):
    """Every DCU node but eight fresh 8-card ones is drained, then 200 one-card launches race from 50 threads (20 in
    CI's light run).
    Exactly 64 must win and 136 be refused with where cards are free; none oversold (checked, else it fails)."""

    os.environ.update({"INSTANCES_SIM_PULL_SECONDS": "0", "INSTANCES_SIM_BOOT_SECONDS": "0"})
    zone, chip = Zone.objects.get(slug="cn-east-xc"), Chip.objects.get(slug="dcu-z100")
    drained = list(Node.objects.filter(chip=chip, drained=False).values_list("pk", flat=True))
    Node.objects.filter(pk__in=drained).update(drained=True)
    price_version.bump()  # an update() sends no signal; quotes must see where the chip is offered now
    fresh = [
        catalog_services.add_node(zone=zone, chip=chip, name=f"race-{uuid.uuid4().hex[:8]}", cards=8).pk
        for _ in range(RACE_CARDS // 8)
    ]
    user = _user("bench-race@example.com")

    def one(i):
        start = time.perf_counter()
        try:
            request = launching.LaunchRequest(name=f"race-{i}", chip="dcu-z100", image="pytorch-2.2-dtk24")
            outcome = launching.launch(user, request)
        except Unavailable as exc:
            outcome = exc
        finally:
            connection.close()
        return outcome, time.perf_counter() - start

    try:
        with report.timer() as t, ThreadPoolExecutor(max_workers=RACE_THREADS) as pool:
            results = list(pool.map(one, range(RACE_LAUNCHES)))
        won = [r for r, _s in results if isinstance(r, Instance)]
        held = Node.objects.filter(pk__in=fresh).aggregate(n=Sum("cards_reserved"))["n"]
        oversold = Node.objects.filter(cards_reserved__gt=F("cards")).count()
        if len(won) != RACE_CARDS or held != RACE_CARDS or oversold:
            raise RuntimeError(f"{len(won)} launches won, {held} cards held, {oversold} nodes oversold")
    finally:
        Node.objects.filter(pk__in=drained).update(drained=False)
        price_version.bump()
        app.control.purge()  # the winners' provisioning is not part of this benchmark
    database = "PostgreSQL row locks" if connection.vendor == "postgresql" else "SQLite write lock"
    report.add("all launches answered", t.seconds, unit="s", note=f"{RACE_THREADS} threads; {database}")
    report.add(
        f"launches that got cards (of {RACE_LAUNCHES})",
        len(won),
        unit="",
        note=f"{RACE_LAUNCHES - len(won)} refused naming where cards are free; 0 nodes oversold",
    )
    report.add_latencies("one launch under contention", [s for _r, s in results], note="threads of one process")


# The Slurm backend ---------------------------------------------------------------------------------

SLURM_RUNS = size(5, 2)


@benchmark("Instances on Slurm: launch → running through the console vs a bare sbatch")
def slurm_launch_overhead(report):
    """The platform's overhead on the same cluster: console = launch, the job, the agent's first report,
    reconcile; bare = ``sbatch --gres=gpu:mlu370:1`` until squeue says RUNNING. Skipped without a cluster."""

    try:
        SlurmClient(settings.SLURM).jobs()
    except BackendError as exc:
        if os.environ.get("CI") == "true":
            raise RuntimeError(f"CI=true and no Slurm cluster answers: {exc}") from exc
        report.add("skipped", 0, unit="", note=f"no Slurm cluster ({exc}); run scripts/slurm-local.sh start")
        return
    if not shutil.which("sbatch"):
        report.add("skipped", 0, unit="", note="sbatch is not installed here")
        return

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args):
            pass

    server = make_server("127.0.0.1", 0, get_wsgi_application(), handler_class=Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    settings.SLURM = {
        **settings.SLURM,
        "console_url": f"http://127.0.0.1:{server.server_port}",
        "job_prefix": f"bench-{uuid.uuid4().hex[:6]}-",
        "heartbeat_seconds": 5,
    }
    Node.objects.filter(zone__slug="cn-east-xc", chip__slug="mlu370-x8").update(backend_name="slurm")
    user = _user("bench-slurm@example.com")
    request = launching.LaunchRequest(name="bench-slurm", chip="mlu370-x8", image="pytorch-2.2-neuware")
    console, bare = [], []
    try:
        for _ in range(SLURM_RUNS):
            console.append(_launch_until_running_then_release(user, request, timeout=60))
            bare.append(_bare_sbatch())
    finally:
        server.shutdown()
        # A launch that failed half-way leaves its job behind: it would hold a card of the shared cluster.
        _cancel_jobs(settings.SLURM["job_prefix"])
    report.add_latencies("console launch → running", console, note="REST submit + agent's first report")
    report.add_latencies("bare sbatch → RUNNING", bare, note="sbatch --gres=gpu:mlu370:1, squeue polled")
    ratio = sorted(console)[len(console) // 2] / sorted(bare)[len(bare) // 2]
    report.add("platform overhead (median ratio)", ratio, unit="×", note=f"n={SLURM_RUNS} each, same cluster")


def _cancel_jobs(prefix: str) -> None:
    """Cancel every job of this benchmark that has not ended; a cluster gone away is no reason to hide the error."""

    operator = SlurmClient(settings.SLURM | {"user": "slurm"})
    try:
        for job in operator.jobs():
            if job.get("name", "").startswith(prefix) and job["job_state"] not in ENDED_STATES:
                operator.cancel(job["job_id"])
    except BackendError:
        pass


def _launch_until_running_then_release(user, request, *, timeout: float) -> float:
    """Seconds from the launch until the instance runs (driven here, as the worker would); then it is released."""

    start = time.perf_counter()
    instance = launching.launch(user, request)
    while Instance.objects.get(pk=instance.pk).status != "running":
        try:
            lifecycle.advance(instance.pk, "running")
        except TransientBackendError:
            time.sleep(0.2)  # the controller is away for a while (CI restarts it in a test): the worker retries too
        if time.perf_counter() - start > timeout:
            raise RuntimeError(f"a launch did not reach running within {timeout:.0f} s")
        time.sleep(0.02)
    took = time.perf_counter() - start
    lifecycle.release(Instance.objects.with_related().get(pk=instance.pk))
    while Instance.objects.get(pk=instance.pk).status != "released":
        try:
            lifecycle.advance(instance.pk, "released")
        except TransientBackendError:
            time.sleep(0.05)  # the machine is ending; its system disk goes after it
    return took


def _bare_sbatch() -> float:
    start = time.perf_counter()
    job = (
        subprocess.run(
            [
                "sbatch",
                "--parsable",
                "-p",
                "xinchuang",
                "--gres=gpu:mlu370:1",
                "-o",
                "/dev/null",
                "--wrap",
                "sleep 600",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        .stdout.strip()
        .split(";")[0]
    )
    try:
        state = ["squeue", "-h", "-j", job, "-o", "%T"]
        while subprocess.run(state, capture_output=True, text=True).stdout.strip() != "RUNNING":
            if time.perf_counter() - start > 60:
                raise RuntimeError("a bare sbatch did not reach RUNNING within 60 s")
            time.sleep(0.02)
        return time.perf_counter() - start
    finally:
        subprocess.run(["scancel", job], check=False)


LOCAL_RUNS = size(5, 2)


@benchmark("Instances on the local backend: launch → JupyterLab answering, vs JupyterLab started bare")
def local_launch_to_jupyter(report):
    """What a user waits for after a launch on ``make run``'s default: launch, the sandbox, JupyterLab answering
    on its socket, reconcile seeing it (the instance is running). Floor: the same runtime's JupyterLab started
    directly on a socket, no sandbox, no console. Skipped where the host cannot run sandboxes."""

    ok, why = local.availability()
    if not ok:
        if os.environ.get("CI") == "true":
            raise RuntimeError(f"CI=true and no sandboxes here: {why}")
        report.add("skipped", 0, unit="", note=f"no local sandboxes here: {why}")
        return
    runtime.ensure()
    # This benchmark's own sandbox root and nodes; both are given back at the end, so no later benchmark starts
    # real machines.
    previous_root = settings.LOCAL_SANDBOX_ROOT
    settings.LOCAL_SANDBOX_ROOT = Path(tempfile.mkdtemp(prefix="gpucloud-bench-", dir="/tmp"))
    backends_before = dict(Node.objects.values_list("pk", "backend_name"))
    Node.objects.update(backend_name="local")
    user = _user("bench-local@example.com")
    request = launching.LaunchRequest(name="bench-local", chip="ascend-910b", image="pytorch-2.2-cann8")
    console, bare = [], []
    try:
        for _ in range(LOCAL_RUNS):
            console.append(_launch_until_running_then_release(user, request, timeout=120))
            bare.append(_bare_jupyter(runtime.path()))
    finally:
        clear_sandboxes(user)
        settings.LOCAL_SANDBOX_ROOT = previous_root
        for pk, name in backends_before.items():
            Node.objects.filter(pk=pk).update(backend_name=name)
    report.add_latencies("launch → JupyterLab answering", console, note="sandbox, JupyterLab, reconcile; target ≤ 15 s")
    report.add_latencies("bare JupyterLab → answering", bare, note="the runtime's JupyterLab on a socket, no sandbox")
    ratio = sorted(console)[len(console) // 2] / sorted(bare)[len(bare) // 2]
    report.add("sandbox + console overhead (median ratio)", ratio, unit="×", note=f"n={LOCAL_RUNS} each")


def clear_sandboxes(*accounts) -> None:
    """Every machine of this run's sandbox root killed, every volume in it unmounted, and the root removed; the
    cloud storage of ``accounts`` (the benchmark's own) unmounted too: the host keeps an account's storage mounted
    for its next machine, and no other account's is touched."""
    root = Path(settings.LOCAL_SANDBOX_ROOT)
    backend = local.LocalBackend()
    for folder in (root / "instances").glob("*"):
        backend._kill(folder.name, local.read_state(folder.name))  # every process and mount gone first
    local_volumes.unmount_all(root)
    if tree.enabled():
        for account in accounts:
            local_volumes.unmount(tree.location() / str(account.public_id))
    shutil.rmtree(root, ignore_errors=True)


def _bare_jupyter(runtime_path: Path) -> float:
    folder = Path(tempfile.mkdtemp(prefix="gpucloud-bare-", dir="/tmp"))
    sock = folder / "jl.sock"
    start = time.perf_counter()
    process = subprocess.Popen(
        [
            str(runtime_path / "bin" / "jupyter"),
            "lab",
            "--no-browser",
            "--allow-root",
            f"--ServerApp.sock={sock}",
            "--IdentityProvider.token=bench",
            f"--ServerApp.root_dir={folder}",
            "--LabApp.news_url=None",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while True:
            if time.perf_counter() - start > 120:
                raise RuntimeError("a bare JupyterLab did not answer within 120 s")
            if sock.exists():
                try:
                    with socket.socket(socket.AF_UNIX) as client:
                        client.connect(str(sock))
                        client.sendall(b"GET /api/status HTTP/1.0\r\nAuthorization: token bench\r\n\r\n")
                        if client.recv(16).startswith(b"HTTP/1.1 200"):
                            return time.perf_counter() - start
                except OSError:
                    pass
            time.sleep(0.05)
    finally:
        process.kill()
        process.wait()
        shutil.rmtree(folder, ignore_errors=True)


# The SSH gateway ---------------------------------------------------------------------------------------------

SSH_ROUNDS = size(50, 5)


def _host_shell(instance, command):
    """The simulated machine entered as /bin/sh on this host: the benchmark measures the gateway, not a backend's
    own way in (nsenter into a sandbox adds its few milliseconds on top)."""
    return ["/bin/sh", "-c", command] if command is not None else ["/bin/sh", "-l"]


@benchmark("SSH gateway: connect → first command (ssh … true)")
def ssh_round_trip(report):
    """`ssh -p PORT <instance-id>@127.0.0.1 true` with the system OpenSSH client, end to end: TCP, key exchange,
    the owner's-key lookup, the session, the program and its exit status."""
    os.environ.update({"INSTANCES_SIM_PULL_SECONDS": "0", "INSTANCES_SIM_BOOT_SECONDS": "0"})
    _capacity(1)
    user = _user("bench-ssh@example.com")
    request = launching.LaunchRequest(name="bench-ssh", chip="ascend-910b", image="pytorch-2.2-cann8")
    instance = launching.launch(user, request)
    while Instance.objects.get(pk=instance.pk).status != "running":
        lifecycle.advance(instance.pk, "running")
    backend = get_backend(Instance.objects.get(pk=instance.pk).backend_name)
    backend.enter_argv = _host_shell  # shadows the backend's method for this run
    with tempfile.TemporaryDirectory() as folder:
        key = Path(folder) / "id_ed25519"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        ssh_keys.add_ssh_key(user, public_key=key.with_suffix(".pub").read_text())
        gateway = ssh_gateway.GatewayThread("127.0.0.1", 0, ssh_gateway.load_host_key(Path(folder) / "host_key"))
        options = ("BatchMode=yes", "StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null", "LogLevel=ERROR")
        argv = ["ssh", "-p", str(gateway.port), "-i", str(key), "-F", "/dev/null"]
        argv += [arg for option in options for arg in ("-o", option)]
        argv += [f"{instance.public_id}@127.0.0.1", "true"]
        durations = []
        try:
            for _ in range(SSH_ROUNDS):
                with report.timer() as t:
                    subprocess.run(argv, check=True, stdin=subprocess.DEVNULL)
                durations.append(t.seconds)
        finally:
            gateway.stop()
            del backend.enter_argv
            app.control.purge()
    report.add_latencies("ssh … true", durations, note="system OpenSSH client; Ed25519 keys; /bin/sh as the machine")


# The JupyterLab proxy ------------------------------------------------------------------------------------------

PROXY_DOWNLOAD_BYTES = 10 * 1024 * 1024
PROXY_ROUNDS = size(10, 3)
PROXY_CALLS = size(200, 20)


@benchmark("JupyterLab proxy: a 10 MB download and a small API call through the console vs straight from the socket")
def jupyter_proxy_overhead(report):
    """A 10 MB CSV file downloaded from a real JupyterLab (the local backend's runtime, on a Unix socket, under the
    instance's lab path) as a browser downloads it, and a small API call (``api/contents``, of which a lab page makes
    dozens): through the console (uvicorn serving config.asgi on 127.0.0.1, on the lab's own origin) and straight
    from the socket, by the same client code. JupyterLab, the console and the client are three
    processes, as in production. Skipped where the runtime cannot be built."""

    try:
        jupyter = runtime.ensure() / "bin" / "jupyter"
    except runtime.RuntimeUnavailable as exc:
        report.add("skipped", 0, unit="", note=f"no JupyterLab runtime here: {exc}")
        return
    _capacity(1)
    user = _user("bench-lab@example.com")
    request = launching.LaunchRequest(name="bench-lab", chip="ascend-910b", image="pytorch-2.2-cann8")
    instance = launching.launch(user, request)
    app.control.purge()  # its provisioning is not part of this benchmark
    folder = Path(tempfile.mkdtemp(prefix="jl-", dir="/tmp"))  # a short path: Unix socket paths stop at 107 bytes
    line = b"0.123456789,1.23456789,12.3456789,123.456789,1234.56789,12345.6789,123456.789\n"
    (folder / "data.csv").write_bytes((line * (PROXY_DOWNLOAD_BYTES // len(line) + 1))[:PROXY_DOWNLOAD_BYTES])
    server = JupyterServer(
        token=uuid.uuid4().hex, base_path=f"/instances/{instance.public_id}/lab/", socket=str(folder / "jupyter.sock")
    )
    try:
        with (
            _jupyter_process(jupyter, server, folder),
            _console_process(server, instance) as console,
            _splice_relay(server) as relay,
        ):
            times = _proxy_downloads(server, console, relay, user, f"{server.base_path}files/data.csv")
            calls = _proxy_downloads(
                server, console, relay, user, f"{server.base_path}api/contents", rounds=PROXY_CALLS
            )
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    report.add_latencies("10 MB straight from the socket", times["direct"], note="JupyterLab's /files/, httpx")
    report.add_latencies("10 MB through the console", times["proxied"], note="uvicorn process, httpx, socket")
    report.add_latencies("10 MB through a zero-copy relay", times["relay"], note=RELAY_NOTE)
    ratio = statistics.median(times["proxied"]) / statistics.median(times["direct"])
    report.add("10 MB: through the console ÷ straight (p50)", ratio, unit="×", note=f"{PROXY_ROUNDS} downloads each")
    ratio = statistics.median(times["relay"]) / statistics.median(times["direct"])
    report.add("10 MB: through a zero-copy relay ÷ straight (p50)", ratio, unit="×", note="the hop's own cost")
    ratio = statistics.median(times["proxied"]) / statistics.median(times["relay"])
    report.add(
        "10 MB: through the console ÷ through a zero-copy relay (p50)",
        ratio,
        unit="×",
        note="the console's cost above the hop's",
    )
    report.add_latencies("api/contents straight from the socket", calls["direct"], note="a kept connection")
    report.add_latencies("api/contents through the console", calls["proxied"], note="kept connections both hops")
    ratio = statistics.median(calls["proxied"]) / statistics.median(calls["direct"])
    report.add("api/contents: through the console ÷ straight (p50)", ratio, unit="×", note=f"{PROXY_CALLS} calls each")


@contextmanager
def _jupyter_process(jupyter: Path, server: JupyterServer, folder: Path):
    argv = [
        str(jupyter),
        "lab",
        "--no-browser",
        "--allow-root",
        f"--ServerApp.sock={server.socket}",
        f"--IdentityProvider.token={server.token}",
        f"--ServerApp.base_url={server.base_path}",
        f"--ServerApp.root_dir={folder}",
        "--LabApp.news_url=None",
    ]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_until_answering(
            httpx.Client(transport=httpx.HTTPTransport(uds=server.socket)),
            f"http://localhost{server.base_path}api/status",
            process,
        )
        yield process
    finally:
        process.kill()
        process.wait()


RELAY_NOTE = "splice(2) between the sockets, no HTTP, no cookie: the floor of any proxy (bench/splice_relay.py)"


@contextmanager
def _splice_relay(server: JupyterServer):
    """A relay that only joins a TCP connection to the lab's socket, copying nothing in user space, in a process of
    its own: what one more hop costs whatever the proxy does."""
    sock = socket.create_server(("127.0.0.1", 0))
    argv = [sys.executable, "-m", "bench.splice_relay", str(sock.fileno()), server.socket]
    process = subprocess.Popen(argv, cwd=settings.BASE_DIR, pass_fds=[sock.fileno()])
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        process.kill()
        process.wait()
        sock.close()


@contextmanager
def _console_process(server: JupyterServer, instance):
    """The console under uvicorn in a process of its own (instances/tests/lab_console.py), on a port bound here."""
    sock = socket.create_server(("127.0.0.1", 0))
    env = os.environ | {
        "LAB_SOCKET": server.socket,
        "LAB_TOKEN": server.token,
        "LAB_BASE_PATH": server.base_path,
        "LAB_BACKEND": instance.backend_name,
    }
    argv = [sys.executable, "-m", "instances.tests.lab_console", str(sock.fileno())]
    process = subprocess.Popen(argv, env=env, cwd=settings.BASE_DIR, pass_fds=[sock.fileno()])
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    try:
        _wait_until_answering(httpx.Client(), f"{url}/healthz", process)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)
        sock.close()


def _wait_until_answering(client: httpx.Client, url: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 120
    while True:
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not answer")
        try:
            client.get(url, timeout=5)
            return
        except httpx.TransportError:
            time.sleep(0.05)


def _proxy_downloads(
    server: JupyterServer, console_url: str, relay_url: str, user, path, *, rounds: int = 0
) -> dict[str, list[float]]:
    signed = {"Authorization": f"token {server.token}"}
    direct = httpx.Client(
        transport=httpx.HTTPTransport(uds=server.socket), base_url="http://localhost", headers=signed, timeout=60
    )
    relay = httpx.Client(base_url=relay_url, headers={**signed, "Host": "localhost"}, timeout=60)
    console = httpx.Client(base_url=console_url, cookies=login_cookies(user), timeout=60)
    response = console.get(path)  # to the lab's own origin and back once, as a browser goes, for the lab's cookie
    proxied = httpx.Client(
        base_url=console_url, headers={"Host": urlsplit(response.headers["location"]).netloc}, timeout=60
    )
    for _step in range(3):
        location = urlsplit(response.headers["location"])
        response = (proxied if location.netloc == proxied.headers["host"] else console).get(
            f"{location.path}?{location.query}"
        )
    if "gpucloud_lab" not in proxied.cookies:
        raise RuntimeError("the lab did not take the console's handoff")
    times: dict[str, list[float]] = {"direct": [], "proxied": [], "relay": []}
    for round_ in range((rounds or PROXY_ROUNDS) + 1):
        for name, client in (("direct", direct), ("proxied", proxied), ("relay", relay)):
            start = time.perf_counter()
            with client.stream("GET", path) as response:
                received = sum(len(chunk) for chunk in response.iter_raw())
            if response.status_code != 200 or (not rounds and received != PROXY_DOWNLOAD_BYTES):
                raise RuntimeError(f"{name}: {response.status_code}, {received} bytes")
            if round_:  # the first round warms both servers up (JupyterLab's file manager, the console's imports)
                times[name].append(time.perf_counter() - start)
    return times
