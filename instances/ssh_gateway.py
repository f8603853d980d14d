"""The SSH gateway: ``ssh -p 2222 <instance-id>@<host>`` opens a shell (or runs a command, or transfers files with
scp and SFTP) in one of the user's running instances. ``manage.py ssh_gateway`` runs it as its own process.

The SSH user name is the instance's public id (with or without dashes). Only public-key logins exist, and a key
is let in when it is one of the SSH keys (``console.SSHKey``) of someone who may operate the instance (its owner,
or a team member whose role may) and the instance is running. While a connection lasts, that rule is looked up
again every ``ACCESS_RECHECK_SECONDS``; once it no longer holds (the person left the team or lost the role, the key
was deleted, an account disabled, the instance stopped) the connection's programs are hung up and it is closed. No
passwords, keyboard-interactive, port, agent or X11 forwarding. A session runs what the instance's backend says
enters the machine (``Backend.enter_argv``) under a pty when the client asked for one, with pipes otherwise, and
hands back its exit status. SFTP (and scp, which speaks SFTP or, with ``-O``, runs ``scp -t`` as a command) is
OpenSSH's own ``sftp-server`` started inside the machine the same way: files are read and written there, as the
machine's user, never by the gateway on the host (where a symlink made inside could lead it anywhere).
"""

import asyncio
import fcntl
import inspect
import logging
import os
import pty
import shlex
import signal
import socket
import struct
import termios
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import asyncssh
from asgiref.sync import sync_to_async
from asyncssh.constants import EXTENDED_DATA_STDERR
from asyncssh.stream import SSHReader, SSHWriter
from django.conf import settings
from django.db import DatabaseError, close_old_connections, connections
from django.utils import timezone, translation
from django.utils.translation import gettext_lazy as _

from accounts.models import SSHKey
from teams.access import owned

from .backends import BackendError, get_backend
from .choices import Status
from .models import Instance

log = logging.getLogger(__name__)

HOST_KEY_FILE = "ssh_gateway_host_key"
CHUNK = 65536
# After a pty session's program exits, what it wrote is still read out of the terminal until none has come for
# PTY_QUIET_SECONDS; a background process that keeps writing does not hold the session longer than
# PTY_DRAIN_SECONDS.
PTY_QUIET_SECONDS = 0.3
PTY_DRAIN_SECONDS = 3.0
# Between SIGHUP and SIGKILL for what a closed session leaves running.
HANGUP_GRACE_SECONDS = 2.0
# The shell that leads a pty session. The kernel hangs up a terminal when its session leader exits, and throws
# away what the program wrote that the gateway has not read yet; so the program is not the leader. This shell runs
# it on the terminal, lets go of the terminal, reports the status on its stderr (the gateway's socket) and exits
# only when the gateway closes that: after reading everything, or giving up on a background process that still
# holds the terminal.
SESSION_LEADER = """
trap : INT QUIT
"$@" 2>&1
code=$?
exec 0<&- 1>&-
echo "$code" >&2
read _ <&2
exit "$code"
"""
# Keys one connection may offer (OpenSSH's own server stops at 6): each costs a database lookup.
MAX_KEYS_PER_CONNECTION = 10


def _db(func: Callable) -> Callable:
    """``func`` run in Django's thread for synchronous code, with stale connections closed before and after, as
    a request would: the gateway runs for weeks and the database may restart under it."""

    def run(*args):
        close_old_connections()
        try:
            return func(*args)
        finally:
            close_old_connections()

    return sync_to_async(run, thread_sensitive=True)


# Host key ----------------------------------------------------------------------------------------------------


def host_key_path() -> Path:
    return Path(settings.DATA_DIR) / HOST_KEY_FILE


def load_host_key(path: Path) -> asyncssh.SSHKey:
    """The gateway's Ed25519 host key, made on the first start and kept: clients remember it, and a new one
    would greet every user with a host-key warning."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        draft = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as file:
            file.write(asyncssh.generate_private_key("ssh-ed25519").export_private_key())
        try:
            os.link(draft, path)  # two gateways starting at once: the first key is kept by both
        except FileExistsError:
            pass
        finally:
            os.unlink(draft)
    return asyncssh.read_private_key(path)


# Who may log in, and to what ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Grant:
    instance_pk: int
    key_pk: int


def instance_id(username: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(username)
    except ValueError:
        return None


def find_grant(public_id: uuid.UUID, fingerprint: str) -> Grant | None:
    """The running instance ``public_id`` and the key with ``fingerprint`` of someone who may operate it: its
    owner, or for a team's instance a member whose role may (``teams.access``). None when the instance is missing,
    not running, an endpoint, its owner or the key's owner is disabled, or no such person has that key. One query
    per matching key (usually one)."""
    return _first_grant(SSHKey.objects.filter(fingerprint=fingerprint), Instance.objects.filter(public_id=public_id))


def grant_holds(grant: Grant) -> bool:
    """Whether ``grant`` would still be given at login: the same rule as :func:`find_grant`, for the one key and
    instance of a session under way, which every open connection asks every ``ACCESS_RECHECK_SECONDS``. A member
    who left or lost the role, a deleted key, a disabled account or a stopped instance ends it. Two small queries."""
    keys, instances = SSHKey.objects.filter(pk=grant.key_pk), Instance.objects.filter(pk=grant.instance_pk)
    return _first_grant(keys, instances) == grant


def _first_grant(keys, instances) -> Grant | None:
    """Of ``keys`` and ``instances``: the first key of an active person who may operate one of the instances that
    is running (and is an instance, of an active owner), with that instance."""
    keys = keys.filter(user__is_active=True).values_list("pk", "user_id")
    running = instances.filter(kind=Instance.Kind.INSTANCE, status=Status.RUNNING, owner__is_active=True)
    for key_pk, user_id in keys:
        instance_pk = running.filter(owned(user_id, "change")).values_list("pk", flat=True).first()
        if instance_pk is not None:
            return Grant(instance_pk, key_pk)
    return None


def record_login(grant: Grant) -> None:
    SSHKey.objects.filter(pk=grant.key_pk).update(last_used_at=timezone.now())


def _running_instance(instance_pk: int) -> Instance:
    instance = Instance.objects.filter(pk=instance_pk, status=Status.RUNNING).first()
    if instance is None:
        raise BackendError(_("The instance is not running."))
    return instance


def enter_argv(instance_pk: int, command: str | None) -> list[str]:
    """What runs the session, from the instance's backend (checked again: it may have stopped since login)."""
    instance = _running_instance(instance_pk)
    return get_backend(instance.backend_name).enter_argv(instance, command)


class GatewayProcess(asyncssh.SSHServerProcess):
    """A session channel whose every request reaches the gateway's process handler, the SFTP subsystem included
    (asyncssh would otherwise serve SFTP itself, on the host): SFTP is OpenSSH's sftp-server inside the machine."""

    def subsystem_requested(self, subsystem: str) -> bool:
        return subsystem == "sftp"

    def session_started(self) -> None:
        # asyncssh's own session_started with its SFTP and scp branches left out.
        stdin = SSHReader(self, self._chan)
        stdout = SSHWriter(self, self._chan)
        stderr = SSHWriter(self, self._chan, EXTENDED_DATA_STDERR)
        handler = self._session_factory(stdin, stdout, stderr)
        if inspect.isawaitable(handler):
            self._conn.create_task(handler, stdin.logger)


class GatewayServer(asyncssh.SSHServer):
    """One client connection: public-key authentication against the instance owner's keys, and then the same
    access looked up again every ``ACCESS_RECHECK_SECONDS`` while the connection lasts: once it no longer holds,
    every session of the connection is hung up and the connection closed."""

    def __init__(self, gateway: "Gateway"):
        self.gateway = gateway
        self.instance_id: uuid.UUID | None = None
        self.grant: Grant | None = None
        self.peer = ""
        self.conn = None
        # asyncssh asks about a key twice (the client's query, then its signature): one lookup per key.
        self._checked: dict[tuple, Grant | None] = {}
        self.revoked = asyncio.Event()
        self.lost = asyncio.Event()
        self.sessions: set[asyncio.Task] = set()
        self._watcher: asyncio.Task | None = None

    def session_requested(self):
        if self.revoked.is_set():
            return False
        return GatewayProcess(self.gateway.session, None, 0, False)

    def connection_made(self, conn):
        self.conn = conn
        self.peer = conn.get_extra_info("peername", ("?", 0))[0]

    def connection_lost(self, exc):
        self.lost.set()
        if self._watcher is not None:
            self._watcher.cancel()

    def begin_auth(self, username):
        self.instance_id = instance_id(username)
        return True  # every user name must authenticate, so none tells whether an instance exists

    def password_auth_supported(self):
        return False

    def kbdint_auth_supported(self):
        return False

    def host_based_auth_supported(self):
        return False

    def public_key_auth_supported(self):
        return True

    async def validate_public_key(self, username, key):
        if self.instance_id is None:
            return False
        # Per instance and key: a client may change the user name between attempts.
        asked = (self.instance_id, key.get_fingerprint("sha256"))
        if asked not in self._checked and len(self._checked) >= MAX_KEYS_PER_CONNECTION:
            return False
        if asked not in self._checked:
            self._checked[asked] = await _db(find_grant)(*asked)
        grant = self._checked[asked]
        if grant is not None:
            self.grant = grant
        return grant is not None

    async def auth_completed(self):
        log.info("ssh login to %s with key %s from %s", self.instance_id, self.grant.key_pk, self.peer)
        self._watcher = asyncio.ensure_future(self._watch())
        self.gateway.watchers.add(self._watcher)
        self._watcher.add_done_callback(self.gateway.watchers.discard)
        await _db(record_login)(self.grant)

    async def _watch(self) -> None:
        """Look the grant up again every ACCESS_RECHECK_SECONDS; once it no longer holds, end the sessions (each
        hangs up its program and says why) and close the connection: the client closes it once its sessions have
        ended (after reading what they said last), else the gateway does. A database that cannot answer ends
        nothing: the next look-up decides."""
        while True:
            await asyncio.sleep(max(float(settings.ACCESS_RECHECK_SECONDS), 0.1))
            try:
                if not await _db(grant_holds)(self.grant):
                    break
            except DatabaseError:
                log.warning("ssh access to %s could not be checked again", self.instance_id, exc_info=True)
        log.info("ssh access to %s with key %s ended: closing its connection", self.instance_id, self.grant.key_pk)
        self.revoked.set()
        if self.sessions:
            await asyncio.wait(set(self.sessions), timeout=HANGUP_GRACE_SECONDS + 1)
        try:
            await asyncio.wait_for(self.lost.wait(), HANGUP_GRACE_SECONDS)
        except TimeoutError:
            self.conn.close()


# Sessions ----------------------------------------------------------------------------------------------------


def _language(env) -> str:
    """The client's language from the LANG it sent (OpenSSH sends LANG and LC_*): Chinese or English."""
    lang = env.get("LC_ALL") or env.get("LANG") or ""
    return "zh-hans" if lang.lower().startswith("zh") else "en"


def _say(process, message) -> None:
    with translation.override(_language(process.env)):
        process.stderr.write(f"{message}\n".encode())


def _child_env(process) -> dict[str, str]:
    """The environment of what the backend runs: nothing of the gateway's own (its secrets stay here)."""
    env = {"PATH": os.environ.get("PATH", os.defpath)}
    if term := process.get_terminal_type():
        env["TERM"] = term
    for name, value in process.env.items():
        if name == "LANG" or name.startswith("LC_"):
            env[name] = value
    return env


async def _copy_out(source: asyncio.StreamReader, sink) -> None:
    """The program's output to the client, until its end (EIO on a pty whose program has gone)."""
    while True:
        try:
            data = await source.read(CHUNK)
        except OSError:
            return
        if not data:
            return
        sink.write(data)
        await sink.drain()


async def _copy_in(process, sink: asyncio.StreamWriter, on_resize: Callable, pgid: int, *, close: bool) -> None:
    """The client's input to the program; window changes resize the pty and signals go to the program. With
    pipes, the client's EOF closes the program's stdin."""
    while True:
        try:
            data = await process.stdin.read(CHUNK)
        except asyncssh.TerminalSizeChanged as change:
            on_resize(change.term_size)
            continue
        except asyncssh.SignalReceived as received:
            _signal(pgid, getattr(signal, f"SIG{received.signal}", None))
            continue
        except asyncssh.BreakReceived:
            continue  # a soft EOF (^D at a pty) reads as the end of input: asyncssh raises nothing for it
        if not data:
            break
        try:
            sink.write(data)
            await sink.drain()
        except (BrokenPipeError, ConnectionResetError):
            return  # the program stopped reading (or exited)
    if close:
        sink.close()


def _signal(pgid: int, signum) -> None:
    if signum is None:
        return
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        pass


async def _end(child: asyncio.subprocess.Process) -> None:
    """Hang up what a session leaves running: its whole process group, SIGKILL if SIGHUP is not enough."""
    _signal(child.pid, signal.SIGHUP)
    try:
        await asyncio.wait_for(child.wait(), HANGUP_GRACE_SECONDS)
    except TimeoutError:
        _signal(child.pid, signal.SIGKILL)
        await child.wait()


async def _with_pipes(process, argv: list[str], env: dict) -> int:
    child = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        start_new_session=True,
    )
    feed = asyncio.ensure_future(_copy_in(process, child.stdin, lambda size: None, child.pid, close=True))
    try:
        await asyncio.gather(_copy_out(child.stdout, process.stdout), _copy_out(child.stderr, process.stderr))
        return await child.wait()
    finally:
        feed.cancel()
        if child.returncode is None:
            await _end(child)


def _resize(fd: int, size) -> None:
    width, height, pixwidth, pixheight = size
    if width and height:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, pixwidth, pixheight))


async def _pty_streams(master: int):
    """A reader and a writer on the pty's master side (two file descriptors: each transport closes its own), and
    the reading transport, to close with the session."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    reading, _protocol = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(master, "rb", 0)
    )
    writing, protocol = await loop.connect_write_pipe(
        lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()), os.fdopen(os.dup(master), "wb", 0)
    )
    return reader, reading, asyncio.StreamWriter(writing, protocol, None, loop)


async def _in_pty(process, argv: list[str], env: dict) -> int:
    master, terminal = pty.openpty()
    _resize(master, process.get_terminal_size())
    ours, theirs = socket.socketpair()
    try:
        # setsid -c: a session of its own with the pty as its controlling terminal (job control, ^C, SIGWINCH).
        command = ["setsid", "-c", "/bin/sh", "-c", SESSION_LEADER, "session-leader", *argv]
        child = await asyncio.create_subprocess_exec(*command, stdin=terminal, stdout=terminal, stderr=theirs, env=env)
    except BaseException:
        os.close(master)
        os.close(terminal)
        ours.close()
        raise
    finally:
        theirs.close()
    # The gateway keeps the terminal open itself until the output is read: the kernel passes what the program wrote
    # on to the master side in a worker of its own, and a master whose terminal nobody holds any more reads EIO,
    # even before that arrives — under load, the program's last words were lost.
    held = terminal
    reader, reading, writer = await _pty_streams(master)
    sink = _Counting(process.stdout)
    output = asyncio.ensure_future(_copy_out(reader, sink))
    feed = asyncio.ensure_future(_copy_in(process, writer, lambda size: _resize(master, size), child.pid, close=False))
    try:
        code = await _reported_status(ours, child)
        await _until_quiet(sink, output)
        return code
    finally:
        os.close(held)
        ours.close()  # the session leader may go
        feed.cancel()
        output.cancel()
        writer.close()
        reading.close()
        if child.returncode is None:
            await _end(child)


class _Counting:
    """A writer that counts what passes through it (the drain reads whether output still comes)."""

    def __init__(self, sink):
        self.sink, self.written = sink, 0

    def write(self, data) -> None:
        self.written += len(data)
        self.sink.write(data)

    async def drain(self) -> None:
        await self.sink.drain()


async def _until_quiet(sink: _Counting, output: asyncio.Future) -> None:
    """Wait while the program's output still comes: until none has come for PTY_QUIET_SECONDS (or it ended), at
    most PTY_DRAIN_SECONDS."""
    deadline = asyncio.get_running_loop().time() + PTY_DRAIN_SECONDS
    seen = -1
    while seen != sink.written and not output.done():
        seen = sink.written
        left = deadline - asyncio.get_running_loop().time()
        if left <= 0:
            return
        try:
            await asyncio.wait_for(asyncio.shield(output), min(PTY_QUIET_SECONDS, left))
        except TimeoutError:
            pass


async def _reported_status(ours: socket.socket, child: asyncio.subprocess.Process) -> int:
    """The program's exit status, as the session leader reports it once the program has ended; the leader's own
    when it ended without a report (killed, or setsid could not start it)."""
    ours.setblocking(False)
    report = b""
    while chunk := await asyncio.get_running_loop().sock_recv(ours, 64):
        report += chunk
        last = report.rstrip(b"\n").rsplit(b"\n", 1)[-1]
        if report.endswith(b"\n") and last.isdigit():
            return int(last)
    return await child.wait()


async def _run(process, grant: Grant) -> None:
    command = process.command
    if process.subsystem == "sftp":
        command = f"exec {shlex.quote(settings.SSH_SFTP_SERVER)}"
    elif process.subsystem:
        _say(process, _("This gateway offers no %(name)s subsystem.") % {"name": process.subsystem})
        process.exit(1)
        return
    try:
        argv = await _db(enter_argv)(grant.instance_pk, command)
    except BackendError as exc:
        _say(process, exc)
        process.exit(1)
        return
    env = _child_env(process)
    code = await (_in_pty if process.get_terminal_type() else _with_pipes)(process, argv, env)
    if code < 0:
        process.exit_with_signal(signal.Signals(-code).name.removeprefix("SIG"))
    else:
        process.exit(code)


# The gateway -------------------------------------------------------------------------------------------------


class Gateway:
    """The listening gateway and its sessions under way, which end (their programs hung up) when it stops, and each
    connection's watch over its access."""

    def __init__(self):
        self.acceptor = None
        self.sessions: set[asyncio.Task] = set()
        self.watchers: set[asyncio.Task] = set()

    @property
    def port(self) -> int:
        return self.acceptor.get_port()

    async def start(self, host: str, port: int, host_key: asyncssh.SSHKey) -> "Gateway":
        self.acceptor = await asyncssh.listen(
            host,
            port,
            server_factory=lambda: GatewayServer(self),
            server_host_keys=[host_key],
            encoding=None,
            line_editor=False,
            agent_forwarding=False,
            x11_forwarding=False,
            gss_host=None,
            keepalive_interval=30,
        )
        return self

    async def session(self, process) -> None:
        task = asyncio.current_task()
        server = process.get_extra_info("connection").get_owner()
        self.sessions.add(task)
        server.sessions.add(task)
        closed = asyncio.ensure_future(process.wait_closed())
        revoked = asyncio.ensure_future(server.revoked.wait())
        work = asyncio.ensure_future(_run(process, server.grant))
        try:
            # A client that goes away closes the channel, and access that ends ends the session: either way the
            # work is cancelled and its program hung up.
            await asyncio.wait({work, closed, revoked}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for pending in (work, closed, revoked):
                pending.cancel()
            await asyncio.gather(work, closed, revoked, return_exceptions=True)
            self.sessions.discard(task)
            server.sessions.discard(task)
        if server.revoked.is_set() and work.cancelled():
            _say(process, _("Your access to this instance has ended: the session is closed."))
            process.exit(255)
        elif not work.cancelled() and (error := work.exception()) is not None:
            log.error("ssh session failed", exc_info=error)
            process.exit(1)

    async def close(self) -> None:
        if self.acceptor is not None:
            self.acceptor.close()
            await self.acceptor.wait_closed()
        for task in [*self.sessions, *self.watchers]:
            task.cancel()
        await asyncio.gather(*self.sessions, *self.watchers, return_exceptions=True)
        await sync_to_async(connections.close_all, thread_sensitive=True)()  # the database thread's connections


async def serve(host: str, port: int) -> None:
    """Run the gateway until SIGINT or SIGTERM."""
    gateway = await Gateway().start(host, port, load_host_key(host_key_path()))
    log.info("ssh gateway listening on %s:%s", host, gateway.port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    await stop.wait()
    await gateway.close()


class GatewayThread:
    """A gateway served by an event loop in a thread of this process, for tests and benchmarks."""

    def __init__(self, host: str, port: int, host_key: asyncssh.SSHKey):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="ssh-gateway", daemon=True)
        self.thread.start()
        start = Gateway().start(host, port, host_key)
        self.gateway = asyncio.run_coroutine_threadsafe(start, self.loop).result(timeout=10)

    @property
    def port(self) -> int:
        return self.gateway.port

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.gateway.close(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()
