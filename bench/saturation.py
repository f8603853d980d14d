"""Pages at saturation, each against the framework's floor measured in the same run.

The floor is a bare Django project (``bench.floor``: the default middleware, one view rendering a template from a
list, 9 KB, or as long as a given page with ``?bytes=``). It and the console are served by the same gunicorn (2 sync
workers, DEBUG off) on the same 2 cores, one asked at a time; locust without think time (4 clients) asks for one page
for a fixed time. Each page is compared with two floors: the 9 KB one, asked before the first page, between each two
pages and after the last (the mean of the runs on either side of the page), and a floor of the page's own size,
asked right before and right after it (the target, ≤ 4×, is against this one: "a bare Django view of the same
size"). The machine's speed drifts over a run, by a fifth on a shared one, so a floor measured minutes away from a
page is not that page's floor. The same bare page behind a login is measured beside it: the share of a logged-in
page's cost that is the session and the user alone. Beside each throughput, the server's own CPU time per request
(its gunicorn processes', read before and after each run) compares the page with the floor of its size without the
load generator's share and without what other processes on a shared machine take.
"""

import csv
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import requests
from django.conf import settings
from django.test import Client
from django.urls import reverse

from bench import LIGHT, benchmark, size
from bench.pages import _free_port, _history
from marketplace.choices import HubVisibility
from marketplace.models import HubItem, Image

CLIENTS = 4
SECONDS = size(15, 3)
FLOOR_SECONDS = size(8, 4)  # each floor run between two pages


class _Gunicorn:
    def __init__(self, app: str, **env):
        self.app, self.env = app, env

    def __enter__(self):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(Path(settings.DATA_DIR) / f"gunicorn-{self.port}.log", "wb")  # noqa: SIM115 (closed in exit)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", self.app, "-b", f"127.0.0.1:{self.port}", "-w", "2"],
            env=os.environ | {"DEBUG": "false"} | self.env,
            cwd=settings.BASE_DIR,
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                requests.get(self.url + "/", timeout=30, allow_redirects=False)
                return self
            except requests.RequestException:  # not listening yet, or its first answer slow on a busy machine
                time.sleep(0.2)
        raise RuntimeError(f"gunicorn serving {self.app} did not answer")

    def cpu_seconds(self) -> float:
        """The CPU time (user and system) the server's processes have used so far: its workers and their master."""
        master = psutil.Process(self.process.pid)
        processes = [master, *master.children(recursive=True)]
        total = 0.0
        for process in processes:
            try:
                times = process.cpu_times()
            except psutil.NoSuchProcess:  # a worker that ended between the listing and the read
                continue
            total += times.user + times.system
        return total

    def __exit__(self, *exc):
        self.process.terminate()
        self.process.wait(timeout=30)
        self.log.close()


def _saturate(server: "_Gunicorn", path: str, cookie: str = "", seconds: int = SECONDS) -> tuple[float, float, int]:
    """(requests per second, p95 in ms, requests) of locust without think time on one page; ``server.cpu_ms`` is then
    the server's CPU time per request of that run, in milliseconds."""
    url = server.url
    out = Path(settings.DATA_DIR) / "saturation"
    out.mkdir(parents=True, exist_ok=True)
    for _ in range(3):  # warm: templates compiled, caches filled, connections open
        requests.get(url + path, headers={"Cookie": cookie} if cookie else {}, timeout=30)
    cpu_before = server.cpu_seconds()
    # On a loaded machine locust's own start can take a short run's whole time, leaving a run with no request at
    # all: such a run is made again, once, for twice as long. A failed request is never retried.
    for attempt in range(2):
        subprocess.run(
            [
                sys.executable,
                "-m",
                "locust",
                "-f",
                str(Path(__file__).parent / "saturate_locustfile.py"),
                "--headless",
                "--only-summary",
                "-u",
                str(CLIENTS),
                "-r",
                str(CLIENTS),
                "-t",
                f"{seconds * (attempt + 1)}s",
                "--host",
                url,
                "--csv",
                str(out / "run"),
                "--exit-code-on-error",
                "0",
            ],
            env=os.environ | {"BENCH_PATH": path, "BENCH_COOKIE": cookie},
            cwd=settings.BASE_DIR,
            check=True,
            capture_output=True,
        )
        with open(out / "run_stats.csv", newline="") as f:
            total = next(row for row in csv.DictReader(f) if row["Name"] == "Aggregated")
        made, failed = int(total["Request Count"]), int(total["Failure Count"])
        if made or failed:
            break
    if made == 0 or failed:
        raise RuntimeError(f"{path}: {failed} of {made} requests failed")
    # The server's own CPU per request: what other processes on a shared machine take does not count in it (the
    # throughput above moves with them), so two runs minutes apart compare where throughputs do not.
    server.cpu_ms = (server.cpu_seconds() - cpu_before) * 1000 / made
    return float(total["Requests/s"]), float(total["95%"]), made


def _pages(history) -> list[tuple[str, str, bool]]:
    """(label, path, logged in) of the pages measured: every page the long-history user opens, signed in."""

    wanted = {"dashboard", "instance list", "instance detail", "wallet", "transactions", "statement", "cloud disks"}
    pages = [(label, path, True) for label, path in history.pages() if label in wanted]
    pages += [
        ("pricing", reverse("catalog:pricing"), True),
        ("marketplace", reverse("marketplace:list"), True),
        ("hub", reverse("marketplace:hub"), True),
        ("cloud storage", reverse("storage:index"), True),
        ("teams", reverse("teams:list"), True),
        ("endpoints", reverse("endpoints:list"), True),
    ]
    image = Image.objects.listed().order_by("pk").first()
    if image is not None:
        pages.append(("image detail", reverse("marketplace:image", args=[image.slug]), True))
    item = HubItem.objects.filter(visibility=HubVisibility.PUBLIC, taken_down_at__isnull=True).order_by("pk").first()
    if item is not None:
        org, name = item.repo.split("/", 1)
        pages.append(("repository", reverse("marketplace:hub-item", args=[org, name]), True))
    return pages


@benchmark("Pages at saturation (locust, no think time → gunicorn), each against a bare Django page", quick=False)
def saturation(report):
    history = _history()
    client = Client()
    client.force_login(history.user)
    # As a browser does: its first page sets the CSRF cookie, and every later request sends it back with the session's.
    client.get(reverse("console:dashboard"))
    cookie = "; ".join(
        f"{name}={client.cookies[name].value}"
        for name in (settings.SESSION_COOKIE_NAME, settings.CSRF_COOKIE_NAME)
        if name in client.cookies
    )
    # The floor is measured before the first page, between each two pages and after the last, and each page is
    # compared with the mean of the floor runs on either side of it: on a shared machine the speed drifts over the
    # minutes a run takes, and a floor measured minutes away from a page is not that page's floor.
    # The same bare page behind a login as well (its session and user read from a SQLite file, as the console's are):
    # what a logged-in page pays before any work of its own.
    floor_env = {"FLOOR_DATABASE": str(Path(settings.DATA_DIR) / "floor.sqlite3")}
    prepare = [sys.executable, "-m", "bench.floor.prepare"]
    made = subprocess.run(prepare, env=os.environ | floor_env, cwd=settings.BASE_DIR, check=True, capture_output=True)
    floor_cookie = made.stdout.decode().strip()
    measured, floors, sized, cpu = [], [], [], []
    # Both servers are up throughout; the one not being asked is idle.
    with _Gunicorn("bench.floor.wsgi:application", **floor_env) as floor, _Gunicorn("config.wsgi") as console:
        floors.append(_saturate(floor, "/", seconds=FLOOR_SECONDS))
        behind_login, behind_login_p95, behind_login_made = _saturate(floor, "/in/", floor_cookie)
        for label, path, logged_in in _pages(history):
            headers = {"Cookie": cookie} if logged_in else {}
            size = len(requests.get(console.url + path, headers=headers, timeout=30).content)
            same_size = f"/?bytes={size}"
            # CI's light run asks the floor of the page's size once, after it; the full run before and after it.
            floor_cpu = []
            before_page = None if LIGHT else _saturate(floor, same_size, seconds=FLOOR_SECONDS)
            if before_page is not None:
                floor_cpu.append(floor.cpu_ms)
            measured.append((label, *_saturate(console, path, cookie if logged_in else "")))
            page_cpu = console.cpu_ms
            after_page = _saturate(floor, same_size, seconds=FLOOR_SECONDS)
            floor_cpu.append(floor.cpu_ms)
            runs = [run[0] for run in (before_page, after_page) if run is not None]
            sized.append((size, sum(runs) / len(runs)))
            cpu.append((page_cpu, sum(floor_cpu) / len(floor_cpu)))
            if not LIGHT:  # CI's light run asks the 9 KB floor before the first page and after the last only
                floors.append(_saturate(floor, "/", seconds=FLOOR_SECONDS))
        if LIGHT:
            floors.append(_saturate(floor, "/", seconds=FLOOR_SECONDS))
    before, after = floors[0][0], floors[-1][0]
    floor_p95 = max(p95 for _rps, p95, _made in floors)
    floor_rps = sum(rps for rps, _p95, _made in floors) / len(floors)
    setup = f"gunicorn 2 sync workers, {CLIENTS} clients, {SECONDS} s a page, {FLOOR_SECONDS} s a floor run"
    low, high = min(rps for rps, _p, _m in floors), max(rps for rps, _p, _m in floors)
    note = (
        f"mean of {len(floors)} runs between the pages, {low:.0f}–{high:.0f}/s ({before:.0f}/s first, "
        f"{after:.0f}/s last); p95 ≤ {floor_p95:.0f} ms; 9 KB; {setup}"
    )
    report.add("floor: bare Django page", floor_rps, unit="/s", note=note)
    note = f"p95 {behind_login_p95:.0f} ms; {behind_login_made:,} requests; the session and user read, then the page"
    report.add("floor behind a login", behind_login, unit="/s", note=note)
    report.add("floor behind a login: floor ÷ it", before / behind_login, unit="×", note="what logging in costs")
    logged_in_pages = {label for label, _path, logged in _pages(history) if logged}
    for index, (label, rps, p95, made) in enumerate(measured):
        # The floor runs on either side of the page (in a light run, the first and the last).
        beside_floor = (floors[0][0] + floors[-1][0]) / 2 if LIGHT else (floors[index][0] + floors[index + 1][0]) / 2
        report.add(f"{label}", rps, unit="/s", note=f"p95 {p95:.0f} ms (floor {floor_p95:.0f}); {made:,} requests")
        beside = f"; {behind_login / rps:.1f}× of the floor behind a login" if label in logged_in_pages else ""
        note = f"floor beside it {beside_floor:.0f}/s{beside}"
        report.add(f"{label}: floor ÷ page", beside_floor / rps, unit="×", note=note)
        size, same_size_rps = sized[index]
        note = f"target ≤ 4; the floor at the page's {size / 1024:.0f} KB: {same_size_rps:.0f}/s, before and after it"
        report.add(f"{label}: floor of its size ÷ page", same_size_rps / rps, unit="×", note=note)
        page_cpu, floor_cpu = cpu[index]
        note = (
            f"the server's CPU per request: {page_cpu:.2f} ms, the floor of its size {floor_cpu:.2f} ms (the load "
            "generator's share left out: the same on a busy machine)"
        )
        report.add(f"{label}: server CPU per request ÷ the floor's", page_cpu / floor_cpu, unit="×", note=note)
