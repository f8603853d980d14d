"""The JupyterLab proxy in front of a real JupyterLab: the local backend's runtime, or the Python that
``JUPYTER_PYTHON=/path/to/python`` names (skipped without either). JupyterLab listens on a Unix socket with the
console path as its base_url, as the local backend starts it; the console runs under uvicorn.

It proves what the fake cannot: JupyterLab's page comes through without its token, Jupyter accepts the token header
and skips its XSRF check for the writes JupyterLab makes without Django's token, and a kernel runs code over the
proxied websocket.
"""

import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import expect

from instances import runtime
from instances.backends import JupyterServer, get_backend
from tests.asgi_server import lab_browser, lab_origin, login_cookies, open_websocket


def _jupyter_python() -> str:
    """``JUPYTER_PYTHON``, else the local backend's runtime once built (``manage.py use_local --check``; CI does)."""

    if os.environ.get("JUPYTER_PYTHON"):
        return os.environ["JUPYTER_PYTHON"]
    return str(runtime.path() / "bin" / "python") if runtime.is_ready() else ""


JUPYTER_PYTHON = _jupyter_python()
pytestmark = [
    pytest.mark.sandbox,
    pytest.mark.skipif(not JUPYTER_PYTHON, reason="no JupyterLab runtime: run manage.py use_local --check"),
]


@pytest.fixture
def jupyterlab(console_server, launch, monkeypatch):
    """A real JupyterLab for a new instance of the owner's, on a Unix socket; the backend says it answers there."""
    instance = launch()
    folder = Path(tempfile.mkdtemp(prefix="jl-", dir="/tmp"))  # a short path: Unix socket paths stop at 107 bytes
    server = JupyterServer(
        token=uuid.uuid4().hex, base_path=f"/instances/{instance.public_id}/lab/", socket=str(folder / "jupyter.sock")
    )
    command = [
        JUPYTER_PYTHON,
        "-m",
        "jupyterlab",
        "--no-browser",
        f"--ServerApp.sock={server.socket}",
        f"--IdentityProvider.token={server.token}",
        f"--ServerApp.base_url={server.base_path}",
        f"--ServerApp.root_dir={folder}",
    ] + (["--allow-root"] if os.geteuid() == 0 else [])
    log = open(folder / "jupyter.log", "wb")  # noqa: SIM115 (closed below)
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=folder)
    monkeypatch.setattr(get_backend(instance.backend_name), "jupyter", lambda inst: server)
    try:
        _wait_until_up(server, process)
        yield server
    finally:
        process.terminate()
        process.wait(timeout=20)
        log.close()
        shutil.rmtree(folder, ignore_errors=True)


def _wait_until_up(server: JupyterServer, process) -> None:
    client = httpx.Client(transport=httpx.HTTPTransport(uds=server.socket))
    headers = {"Authorization": f"token {server.token}"}
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and process.poll() is None:
        try:
            if client.get(f"http://localhost{server.base_path}api/status", headers=headers).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    pytest.fail("JupyterLab did not start (see its log in the test's folder)")


def test_jupyterlab_pages_writes_and_kernels_work_through_the_console(console_server, jupyterlab, owner):
    base = jupyterlab.base_path
    client = lab_browser(console_server, owner, base.split("/")[2])
    origin = f"http://{client.headers['host']}"

    page = client.get(f"{base}lab")
    assert page.status_code == 200 and "jupyter-config-data" in page.text
    assert jupyterlab.token not in page.text and '"token": ""' in page.text
    assert any(f"Path={base}" in cookie for cookie in page.headers.get_list("set-cookie"))

    # A write as JupyterLab makes it: from the lab's origin, with no Jupyter XSRF header.
    created = client.post(f"{base}api/kernels", json={"name": "python3"}, headers={"Origin": origin})
    assert created.status_code == 201, created.text
    kernel = created.json()["id"]

    with open_websocket(console_server, f"{base}api/kernels/{kernel}/channels?session_id=s1", lab=client) as ws:
        ws.send(json.dumps(_execute_request("print(6 * 7)")))
        assert _printed(ws) == "42\n"
    assert client.delete(f"{base}api/kernels/{kernel}", headers={"Origin": origin}).status_code == 204


def _execute_request(code: str) -> dict:
    header = {
        "msg_id": uuid.uuid4().hex,
        "session": "s1",
        "username": "owner",
        "msg_type": "execute_request",
        "version": "5.3",
        "date": "2026-01-01T00:00:00Z",
    }
    content = {"code": code, "silent": False, "store_history": False, "user_expressions": {}, "allow_stdin": False}
    return {"header": header, "parent_header": {}, "metadata": {}, "content": content, "channel": "shell"}


def _printed(ws) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        message = json.loads(ws.recv(timeout=60))
        if message.get("msg_type") == "stream":
            return message["content"]["text"]
    pytest.fail("the kernel printed nothing")


@pytest.mark.browser
def test_jupyterlab_runs_a_notebook_in_chromium_through_the_console(console_server, jupyterlab, owner, page):
    cookies = [
        {"name": name, "value": value, "url": console_server.url} for name, value in login_cookies(owner).items()
    ]
    page.context.add_cookies(cookies)
    errors = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)

    page.goto(f"{console_server.url}{jupyterlab.base_path}lab")  # the console hands the page on to the lab's origin
    assert page.url.startswith(lab_origin(console_server, jupyterlab.base_path.split("/")[2]) + jupyterlab.base_path)
    page.locator('.jp-LauncherCard[data-category="Notebook"]').first.click(timeout=60_000)
    # The kernel's status comes over the proxied websocket; a cell run before it is connected is not run.
    expect(page.locator(".jp-StatusBar-Widget", has_text="| Idle")).to_be_visible(timeout=60_000)
    cell = page.locator(".jp-Notebook .jp-Cell .cm-content").first
    cell.click()
    page.keyboard.type("print(6 * 7)")
    page.keyboard.press("Shift+Enter")

    expect(page.locator(".jp-OutputArea-output").first).to_have_text("42", timeout=60_000)
    assert not [e for e in errors if "Content Security Policy" in e or "WebSocket" in e], errors
