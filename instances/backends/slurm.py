"""The Slurm backend: each instance is a batch job holding typed GRES cards of its chip, talked to through
slurmrestd (REST, JWT over TCP; slurmrestd refuses to run as root, so it runs as its own system user).

Per zone (``settings.SLURM`` merged with ``settings.SLURM_ZONES[<zone slug>]``): the REST URL, a token or the HS256
key file to sign one, the unix user jobs run as, the on-demand and spot partitions, the chip → GRES type map
(always a typed ``gpu:<type>:<n>``: an untyped request mixes chips), each type's first GRES index on a node, and
the instance root every node of the zone shares (system disks under ``instances/``, data disks under ``disks/``:
that is how disks follow an instance to another node).

The mapping:

* launch/start → a job on the zone's partition running the instance agent (``agent/gpucloud_agent.py``), named
  ``<prefix><public id>``; spot instances go to the spot partition with ``requeue``, on-demand ones without it
  (a node failure fails them instead of restarting them behind the console's back);
* stop and arrears → SIGUSR1 to the job (the agent writes the checkpoint marker and passes it on), then after the
  grace period a cancel. The signal time is kept in the job's ``comment`` so that repeated calls are idempotent
  and every console process agrees, signed (:func:`mark`): the job's own user can rewrite its comment. REST
  rejects ``--signal=B:USR1@…`` (22.05), so the console signals itself;
* preemption: Slurm sends SIGTERM at once (``GraceTime=0``; the agent checkpoints within ``KillWait``) and requeues
  the job. The console cancels the requeued copy as soon as it sees it — relaunching is the owner's one click,
  which submits a new job — and marks it ``preempted`` so the state survives until the job vanishes;
* release → cancel and delete the system disk; data disks stay.

Tenants apart: each owner's jobs run as the owner's own unix account (``job_user_template``, e.g.
``gpucloud-u{owner}``), so one tenant's code cannot read another's processes (``/proc/<pid>/environ`` holds the
secrets, ``JUPYTER_TOKEN`` and the agent's token) or files. The console submits as that account (a JWT it signs for
it, or a token of root or SlurmUser, which may act for any user), creates the account when it is missing and
``job_uid_base`` is set and the console is root on the cluster's host, and gives the account its folders with mode
0700: the system disk, the data disks, the owner's storage and a log folder of its own; the agent writes its files
0600. With an empty template every job runs as ``user``, a shared account: nothing keeps tenants apart, so launches
with secrets are refused (:meth:`SlurmBackend.isolates_owners`) and the instance page says the machine is shared.

Finished jobs vanish from Slurm after ``MinJobAge``: a vanished job its agent reported from ran from its agent's
first report to its last (:func:`forgotten_job_phase`), so its minutes are billed and it is never submitted again;
one no agent reported from is ``ABSENT``, and the lifecycle reads it by the instance's wanted state. The instance is
RUNNING (and billed) only once its agent has reported from this job, so a job that never got its cards, or whose
agent never came up, costs nothing.

Getting into the machine:

* JupyterLab runs in the job beside the workload (the agent's ``--jupyter``, from the zone's ``jupyter_python``;
  by default the local backend's runtime once it is built here, which the nodes must see at the same path). Its
  password is ``JUPYTER_TOKEN`` in the job's environment, derived per instance from the secret key. The agent
  reports where it listens, and the console's proxy (``/instances/<id>/lab/``) goes there — but an agent runs as
  the same unix user as the owner's code, so its word is the owner's. **The rule**: the console uses a reported
  address only when it is ``http://<host>:<port>`` with ``<host>`` the job's own node (its ``batch_host`` as Slurm
  reports it, or an address that name resolves to: 127.0.0.1 on the single-node local cluster) and ``<port>``
  1024 or above (:func:`lab_address_allowed`). The proxy then reaches nothing the job could not reach itself from
  its node, and no system service there: never another host, never the console's own host unless that host is
  the job's node.
* A shell is ``srun --jobid <job> --overlap`` from the console's host, as the instance's account (the console
  switches to it when it runs as root), with a pty when the caller has a terminal, in the instance's home and with the
  workload's environment, which the agent writes to the system disk. The home folder is the system disk's
  ``root/``.
"""

import base64
import errno
import hashlib
import hmac
import json
import logging
import os
import pwd
import shlex
import shutil
import socket
import stat
import subprocess
import tempfile
import time
import uuid
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import requests
from django.conf import settings
from django.db.models import Case, Max, Min, Value, When
from django.utils.crypto import constant_time_compare, salted_hmac
from django.utils.text import get_text_list
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, pgettext
from django.views.decorators.debug import sensitive_variables

from agent import gpucloud_agent as agent_module
from catalog.models import Node
from core.attaching import disk_folder

from .. import conf, images, runtime
from ..choices import Status
from ..environment import boot_environment
from ..models import AgentReport, Instance, InstanceEvent
from . import local_image, slurm_hub, slurm_image
from .base import (
    SECRETS_NEED_OWN_ACCOUNT,
    Backend,
    BackendError,
    BackendStatus,
    JupyterServer,
    MetricPoint,
    Phase,
    TransientBackendError,
)
from .local import lab_path

ACTIVE_STATES = frozenset({"PENDING", "CONFIGURING", "RUNNING", "SUSPENDED", "REQUEUED", "REQUEUE_HOLD"})
ENDED_STATES = frozenset(
    {"CANCELLED", "COMPLETED", "FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "PREEMPTED"}
)
CHECKPOINT_TAG = "gpucloud:checkpoint@"
PREEMPTED_TAG = "gpucloud:preempted@"
# Slurm error numbers: "this request can never run here"; the job is unknown or already over.
NO_SUCH_CONFIGURATION = 2014
GONE = frozenset({2017, 2021})


logger = logging.getLogger(__name__)


def zone_settings(zone_slug: str) -> dict:
    """The cluster-wide Slurm settings with the zone's overrides applied."""
    merged = dict(getattr(settings, "SLURM", {}))
    merged.update(getattr(settings, "SLURM_ZONES", {}).get(zone_slug, {}))
    return merged


def job_account(config: dict, owner_id) -> str:
    """The unix account the owner's jobs run as: ``job_user_template`` with the owner's id, or the shared ``user``
    when the template is empty."""
    template = config.get("job_user_template", "")
    return template.format(owner=owner_id) if template else config["user"]


def job_name(config: dict, public_id) -> str:
    """The name the console gives an instance's jobs in the zone."""
    return f"{config.get('job_prefix', 'inst-')}{public_id}"


def per_owner_accounts(config: dict) -> bool:
    return bool(config.get("job_user_template"))


@dataclass(frozen=True)
class Account:
    name: str
    uid: int
    gid: int


def ensure_account(config: dict, owner_id) -> Account:
    """The owner's unix account on the console's host, created first when it is missing and ``job_uid_base`` is set
    and the console is root (uid and gid: the base + the owner's id, the same on every host that creates it)."""
    name = job_account(config, owner_id)
    account = find_account(name)
    if account is None and per_owner_accounts(config) and int(config.get("job_uid_base") or 0) and os.geteuid() == 0:
        _create_account(name, int(config["job_uid_base"]) + int(owner_id))
        account = find_account(name)
    if account is None:
        raise BackendError(_("The cluster has no unix account %(name)s to run this instance as.") % {"name": name})
    if os.geteuid() not in (0, account.uid):
        # Its folders are handed to the account and its layout written as it: only root can do either.
        raise BackendError(
            _("The console cannot run this instance as its owner's own account %(name)s: it does not run as root.")
            % {"name": name}
        )
    return account


def find_account(name: str) -> Account | None:
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    return Account(name, entry.pw_uid, entry.pw_gid)


def _create_account(name: str, uid: int) -> None:
    """A system account without a password, a home or a lastlog entry (the instance's home is its system disk). Two
    workers may race: the loser's error is ignored and the account looked up again."""
    subprocess.run(["groupadd", "--gid", str(uid), name], capture_output=True, check=False)
    subprocess.run(
        [
            "useradd",
            "--no-log-init",
            "--no-create-home",
            "--home-dir",
            "/nonexistent",
            "--shell",
            "/bin/bash",
            "--uid",
            str(uid),
            "--gid",
            str(uid),
            name,
        ],
        capture_output=True,
        check=False,
    )


def agent_path(config: dict) -> str:
    """The agent file the jobs run: ``agent_path`` when the zone names one, else a copy of this checkout's agent in
    ``<root>/tools/`` (root's, readable by every account), named by its content so that an upgrade never changes
    a file a running job has open. The checkout itself may be private (a home folder at 0700) and its accounts
    must never run anything they could write."""
    if config.get("agent_path"):
        return config["agent_path"]
    source = Path(agent_module.__file__)
    body = source.read_bytes()
    tools = Path(config["root"]) / "tools"
    target = tools / f"gpucloud_agent-{hashlib.sha256(body).hexdigest()[:16]}.py"
    if target.is_file() and not target.is_symlink() and target.read_bytes() == body:
        return str(target)
    tools.mkdir(parents=True, exist_ok=True)
    os.chmod(tools, 0o755)
    fd, staging = tempfile.mkstemp(dir=tools, prefix=".agent-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(body)
        os.chmod(staging, 0o644)
        os.replace(staging, target)
    finally:
        if os.path.exists(staging):
            os.unlink(staging)
    return str(target)


def agent_token(public_id) -> str:
    """The per-instance credential the agent reports with: derived from the secret key, never stored."""
    digest = hmac.new(settings.SECRET_KEY.encode(), f"instance-agent|{public_id}".encode(), hashlib.sha256)
    return "gca_" + digest.hexdigest()


def check_agent_token(public_id, token: str) -> bool:
    return bool(token) and hmac.compare_digest(agent_token(public_id), token)


def jupyter_token(public_id) -> str:
    """The password of the instance's JupyterLab (``JUPYTER_TOKEN`` in its job): derived like the agent's token,
    never stored. The console's proxy signs every request with it; it never reaches a page."""
    digest = hmac.new(settings.SECRET_KEY.encode(), f"instance-jupyter|{public_id}".encode(), hashlib.sha256)
    return digest.hexdigest()


def jupyter_python(config: dict) -> str:
    """What runs JupyterLab in the job: the zone's ``jupyter_python`` (a Python with JupyterLab, or its
    ``jupyter``), else the local backend's runtime when it has been built here; ``off``: no JupyterLab."""
    configured = config.get("jupyter_python", "")
    if configured:
        return "" if configured == "off" else configured
    return str(runtime.path() / "bin" / "python") if runtime.is_ready() else ""


def lab_address(url) -> tuple[str, int] | None:
    """The host and port of a JupyterLab address an agent reported, when it has the one shape allowed:
    ``http://<host>:<port>``, nothing else, on a port from 1024 (below are the node's system services)."""
    if not isinstance(url, str):
        return None
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme != "http" or not parts.hostname or port is None or port < 1024:
        return None
    if parts.username or parts.password or parts.path not in ("", "/") or parts.query or parts.fragment:
        return None
    return parts.hostname, port


def node_addresses(node: str) -> set[str]:
    """The job's node by its Slurm name and every address that name resolves to."""
    if not node:
        return set()
    found = {node.lower()}
    try:
        found |= {info[4][0] for info in socket.getaddrinfo(node, None, type=socket.SOCK_STREAM)}
    except OSError:
        pass
    return found


def lab_address_allowed(url, node: str) -> bool:
    """Whether the console's proxy may go to ``url``, the JupyterLab address the agent of a job on ``node``
    reported: the right shape (:func:`lab_address`) and the job's own node. The agent runs as the same unix user as
    the owner's code, so anything else could turn the proxy on another host or on the console's own services."""
    address = lab_address(url)
    return address is not None and address[0] in node_addresses(node)


def _b64(data: bytes) -> bytes:
    return base64.urlsafe_b64encode(data).rstrip(b"=")


def sign_jwt(key: bytes, user: str, lifespan: int = 3600, now: float | None = None) -> str:
    """An HS256 token for ``user`` as slurmctld checks it (the ``sun`` claim names the user)."""
    now = int(now if now is not None else time.time())
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = _b64(json.dumps({"iat": now, "exp": now + lifespan, "sun": user}).encode())
    signature = _b64(hmac.new(key, header + b"." + payload, hashlib.sha256).digest())
    return (header + b"." + payload + b"." + signature).decode()


class SlurmClient:
    """slurmrestd's v0.0.38 API with a JWT. Connection trouble is transient; Slurm's refusals are permanent."""

    def __init__(self, config: dict):
        self.base = config["rest_url"].rstrip("/") + "/slurm/" + config.get("api_version", "v0.0.38")
        self.user = config["user"]
        self.static_token = config.get("token", "")
        self.key_file = config.get("jwt_key_file", "")
        self.timeout = float(config.get("timeout", 10))
        self._token, self._token_expires = "", 0.0
        self.session = requests.Session()

    def _headers(self) -> dict:
        if self.static_token:
            token = self.static_token
        else:
            if time.time() > self._token_expires - 60:
                try:
                    key = Path(self.key_file).read_bytes()
                except OSError as exc:
                    raise BackendError(f"cannot read the Slurm JWT key {self.key_file}: {exc}") from exc
                self._token, self._token_expires = sign_jwt(key, self.user), time.time() + 3600
            token = self._token
        return {"X-SLURM-USER-NAME": self.user, "X-SLURM-USER-TOKEN": token}

    def call(self, method: str, path: str, body=None, *, missing_ok: bool = False) -> dict:
        try:
            response = self.session.request(
                method, self.base + path, json=body, headers=self._headers(), timeout=self.timeout
            )
        except requests.RequestException as exc:
            raise TransientBackendError(f"the Slurm controller is unreachable: {exc}") from exc
        try:
            data = response.json()
        except ValueError:
            data = {}
        if response.status_code in (401, 403):
            raise BackendError(f"slurmrestd refused the credentials for user {self.user!r}")
        errors = data.get("errors") or []
        if response.status_code >= 500 and not errors:
            raise TransientBackendError(f"slurmrestd answered HTTP {response.status_code}")
        if missing_ok and any(_number(e) in GONE for e in errors):
            return data
        if errors and not data.get("job_id"):  # a held submit has a job id *and* an error: it was accepted
            error = SlurmError(errors)
            if method == "GET" or any(_transient(n) for n in error.numbers):
                raise TransientBackendError(f"the Slurm controller did not answer: {error}") from error
            raise error
        return data

    def jobs(self) -> list[dict]:
        return self.call("GET", "/jobs").get("jobs", [])

    def job(self, job_id) -> dict | None:
        jobs = self.call("GET", f"/job/{job_id}", missing_ok=True).get("jobs") or []
        return jobs[0] if jobs else None

    def submit(self, script: str, job: dict) -> str:
        return str(self.call("POST", "/job/submit", {"script": script, "job": job})["job_id"])

    def update(self, job_id, fields: dict) -> None:
        self.call("POST", f"/job/{job_id}", fields, missing_ok=True)

    def signal(self, job_id, name: str) -> None:
        self.call("DELETE", f"/job/{job_id}?signal={name}", missing_ok=True)

    def cancel(self, job_id) -> None:
        self.call("DELETE", f"/job/{job_id}", missing_ok=True)


def _number(error: dict):
    return error.get("error_code", error.get("error_number"))


def _transient(number) -> bool:
    """Slurm's communication errors (10xx, 18xx: the controller is down or restarting) and unspecified ones."""
    return number == -1 or (isinstance(number, int) and (1000 <= number < 1100 or 1800 <= number < 1900))


class SlurmError(BackendError):
    def __init__(self, errors: list[dict]):
        self.errors = errors
        self.numbers = {_number(e) for e in errors}
        super().__init__("; ".join(e.get("error") or e.get("description") or "?" for e in errors))


# Reading a job ---------------------------------------------------------------------------------------------------


def mark(tag: str, job_id, at: float) -> str:
    """A mark the console keeps in a job's comment (its checkpoint signal, its preemption): the tag, the time, and a
    signature over both and the job's id. A job's own user may rewrite its comment — so may the owner's code, from
    any job of the account — so only a mark the console signed counts (:func:`_tagged_time`)."""
    value = f"{at:.3f}"
    return f"{tag}{value}:{_mark_signature(tag, job_id, value)}"


def _mark_signature(tag: str, job_id, value: str) -> str:
    return salted_hmac("instances.backends.slurm.mark", f"{tag}{job_id}@{value}", algorithm="sha256").hexdigest()[:32]


def _tagged_time(job: dict, tag: str) -> float | None:
    """The time of the console's own ``tag`` mark on ``job``; None without one, or with one the console did not
    sign (for this job)."""
    comment = job.get("comment") or ""
    if not comment.startswith(tag):
        return None
    value, _sep, signature = comment[len(tag) :].partition(":")
    if not constant_time_compare(signature, _mark_signature(tag, job.get("job_id"), value)):
        return None
    try:
        return float(value)
    except ValueError:
        return None


def _marked(job: dict) -> bool:
    return _tagged_time(job, CHECKPOINT_TAG) is not None or _tagged_time(job, PREEMPTED_TAG) is not None


def _at(epoch) -> datetime | None:
    return datetime.fromtimestamp(epoch, tz=UTC) if epoch else None


def waiting_message(reason: str, *, cards: int, chip: str, cpus: int = 0, memory_gb: int = 0) -> str:
    """Why a pending job waits, in plain words for the instance page. Waiting for resources names all the job asks
    of one node: Slurm does not say which of them is short, and a node with free cards may lack the CPUs or memory."""
    if reason == "Resources":
        sizes = {"cards": cards, "chip": chip, "cpus": cpus, "memory": memory_gb}
        if cpus and cards:
            return _("waiting for a node with %(cards)s free %(chip)s cards, %(cpus)s vCPUs and %(memory)s GB") % sizes
        if cpus:
            return _("waiting for a node with %(cpus)s free vCPUs and %(memory)s GB") % sizes
        return _("waiting for %(cards)s free %(chip)s cards") % sizes
    if reason == "Priority":
        return _("queued behind other instances waiting for %(chip)s cards") % {"chip": chip}
    if reason in {"JobHeldUser", "JobHeldAdmin"}:
        return _("held by the cluster's operator")
    if reason in {"PartitionDown", "PartitionInactive", "NodeDown", "ReqNodeNotAvail", "PartitionNodeLimit"}:
        return _("the zone's nodes are unavailable right now")
    if reason in {"BeginTime", "None", ""}:
        return _("waiting for the scheduler")
    return _("waiting in the cluster's queue (%(reason)s)") % {"reason": reason}


ENDED_MESSAGES = {
    "COMPLETED": gettext_lazy("the instance's workload exited"),
    "FAILED": gettext_lazy("the instance's job failed"),
    "TIMEOUT": gettext_lazy("the instance's job reached its time limit"),
    "NODE_FAIL": gettext_lazy("the node running the instance failed"),
    "OUT_OF_MEMORY": gettext_lazy("the instance ran out of memory"),
    "BOOT_FAIL": gettext_lazy("the node could not boot the instance"),
    "DEADLINE": gettext_lazy("the instance's job reached its deadline"),
    "CANCELLED": gettext_lazy("the cluster cancelled the instance's job"),
}


def job_phase(
    job: dict | None,
    *,
    wanted: str,
    reported: bool,
    grace: float,
    cards: int,
    chip: str,
    spot_partition: str,
    cpus: int = 0,
    memory_gb: int = 0,
    now: float | None = None,
    lab: bool = False,
    shared: bool = False,
    agent_reported: bool | None = None,
) -> BackendStatus:
    """What a Slurm job means for its instance. ``reported``: the agent has reported from this job (or no report is
    required); ``agent_reported``: one really came (default: ``reported``), which tells an ended job that ran from one
    cancelled while pending; ``lab``: its latest report gives a JupyterLab address the console may use; ``shared``:
    it runs as the shared account."""
    if job is None:
        return BackendStatus(Phase.ABSENT)
    now = now if now is not None else time.time()
    state = job.get("job_state", "")
    signalled = _tagged_time(job, CHECKPOINT_TAG)
    preempted = _tagged_time(job, PREEMPTED_TAG)
    requeued = job.get("restart_cnt", 0) > 0 and job.get("partition") == spot_partition
    if preempted is not None:
        return BackendStatus(Phase.PREEMPTED, since=_at(preempted), ready_in=0)
    if state == "PREEMPTED":  # cancelled by the preemption: it ended then
        return BackendStatus(Phase.PREEMPTED, since=_at(job.get("end_time") or job.get("submit_time")), ready_in=0)
    if requeued and state in {"PENDING", "REQUEUED", "REQUEUE_HOLD"}:
        # A requeued spot job's submit time is the moment it was preempted.
        return BackendStatus(Phase.PREEMPTED, since=_at(job.get("submit_time") or job.get("end_time")), ready_in=0)
    if state in {"RUNNING", "CONFIGURING", "SUSPENDED"} and signalled is not None:
        left = max(signalled + grace - now, 0)
        return BackendStatus(Phase.STOPPING, since=_at(signalled), ready_in=left)
    if state == "RUNNING":
        if reported:
            access = _access(job, lab=lab, shared=shared)
            return BackendStatus(Phase.RUNNING, since=_at(job.get("start_time")), access=access)
        return BackendStatus(
            Phase.BOOTING, since=_at(job.get("submit_time")), ready_in=0.5, message=_("starting the instance agent")
        )
    if state in {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD"}:
        reason = job.get("state_reason", "")
        message = waiting_message(reason, cards=cards, chip=chip, cpus=cpus, memory_gb=memory_gb)
        return BackendStatus(Phase.BOOTING, since=_at(job.get("submit_time")), ready_in=1.0, message=message)
    if state in {"COMPLETING", "SUSPENDED"}:
        return BackendStatus(Phase.STOPPING, since=_at(job.get("end_time")), ready_in=1.0)
    ended_at = min(job.get("end_time") or now, now)
    # A job its agent reported from ran on its cards from its start time. Slurm keeps whole seconds: one that ran for
    # less than a second ends in the second it started, and ran into it all the same.
    started = job.get("start_time") or 0
    ran = agent_reported if agent_reported is not None else reported
    ran_from = _at(started) if ran and 0 < started <= ended_at else None
    ended = _at(min(max(ended_at, started + 1), now) if ran_from is not None else ended_at)
    if signalled is not None or wanted != "running":
        return BackendStatus(Phase.STOPPED, since=ended, ran_from=ran_from)
    message = str(ENDED_MESSAGES.get(state, state.lower()))
    return BackendStatus(Phase.FAILED, since=ended, message=message, ran_from=ran_from)


@dataclass(frozen=True)
class AgentRun:
    """What the console itself recorded of a job from its agent's reports: the first and the last, and whether its
    workload's exit came."""

    first: datetime
    last: datetime
    exited: bool


def forgotten_job_phase(
    run: AgentRun, *, wanted: str, stale_after: float, now: datetime | None = None
) -> BackendStatus:
    """What a job Slurm no longer lists, but whose agent reported from it, means for its instance. Slurm forgets an
    ended job ``MinJobAge`` after it ended (300 s by default), so a console that looked away longer finds only its
    agent's reports: the job ran from the first report to the last (to the exit's report, or to the last heartbeat
    once the agent has been silent for ``stale_after`` seconds; reports are kept for a day, so the first is the
    earliest kept). While the machine is wanted running, an agent that still reports keeps the instance as it is:
    the job is not taken for ended, and never submitted twice; a machine being stopped is stopped at the last."""
    now = now or datetime.now(tz=UTC)
    if wanted == "running" and not run.exited and (now - run.last).total_seconds() < stale_after:
        message = _("the cluster does not list the instance's job; its agent still reports")
        return BackendStatus(Phase.BOOTING, since=run.first, ready_in=1.0, message=message)
    ended = min(run.last, now)
    if wanted != "running":
        return BackendStatus(Phase.STOPPED, since=ended, ran_from=run.first)
    message = _("the cluster no longer lists the instance's job; it ran until its agent's last report")
    return BackendStatus(Phase.FAILED, since=ended, message=message, ran_from=run.first)


def changed_request(job: dict, requested: dict) -> list[str]:
    """What of the job's request its user changed from what the console asked for (``requested``: the partition
    and whether it is the spot one, the cards per node as ``tres_per_node``, the time limit in minutes or None). A
    job's own user may change its pending job with ``scontrol update``: move a spot job off the preemptible
    partition, ask for more cards or nodes, lift its time limit — none of which the console bills. Only what Slurm
    never changes by itself is compared (it may raise a job's CPUs to fit its memory, or allocate whole cores)."""
    changes = []
    if requested["spot"] and job.get("partition") != requested["partition"]:
        changes.append(_("partition %(name)s") % {"name": job.get("partition")})
    cards = (job.get("tres_per_node") or "").replace("gres/", "gres:")
    # Cards asked per job, task or socket: gres entries there (newer Slurm also lists CPUs per task there).
    elsewhere = [job.get(key) or "" for key in ("tres_per_job", "tres_per_task", "tres_per_socket")]
    elsewhere = [value for value in elsewhere if "gres" in value]
    if cards != requested["tres_per_node"] or elsewhere:
        changes.append(_("cards %(cards)s") % {"cards": ", ".join(filter(None, (cards, *elsewhere))) or "-"})
    if (job.get("node_count") or 1) > 1:
        changes.append(_("%(count)s nodes") % {"count": job["node_count"]})
    limit, asked = job.get("time_limit"), requested["time_limit"]
    if asked and (limit is None or limit > asked):
        shown = _("%(minutes)s minutes") % {"minutes": limit} if limit is not None else pgettext("time limit", "none")
        changes.append(_("time limit %(limit)s") % {"limit": shown})
    return changes


def _account_owner(name: str, template: str) -> int | None:
    """The owner whose per-owner account ``name`` is under ``template`` (``gpucloud-u{owner}``), or None."""
    prefix, _owner, suffix = template.partition("{owner}")
    if not (name.startswith(prefix) and name.endswith(suffix)) or len(name) <= len(prefix) + len(suffix):
        return None
    middle = name[len(prefix) : len(name) - len(suffix)]
    return int(middle) if middle.isascii() and middle.isdigit() else None


def _accounts_jobs(listing: list[dict], members: list[tuple[str, dict]]) -> list[tuple[dict, int, dict]]:
    """(job, owner id, zone settings) for each job of the listing that has not ended (a stopped or suspended job
    holds its cards too) and runs as one of the zones' per-owner accounts."""
    found = []
    for job in listing:
        if job.get("job_state") in ENDED_STATES | {"COMPLETING"}:
            continue
        for _slug, config in members:
            owner = _account_owner(job.get("user_name") or "", config["job_user_template"])
            if owner is not None:
                found.append((job, owner, config))
                break
    return found


# A starting machine that has a job id recorded may be submitting another (a reclaimed spot job goes back to the
# cluster as a new job): a job of its name this recent may be that one, its id not yet recorded.
JUST_SUBMITTED_SECONDS = 10


def _unclaimed(backend_name: str, foreign: list[tuple[dict, int, dict]], now: float):
    """Those of ``foreign`` that no instance claims. An instance reconcile still looks at (a live one, or a reclaimed
    spot one in its notice window) claims the job the console recorded submitting for it. One that is not reclaimed
    and has no id recorded yet (submitted, the worker not yet back, or lost in between) claims the first job of its
    name submitted since its run was asked for: the console's own, which a tenant's copy can only follow. A
    starting one also claims the newest of its name submitted in the last seconds (a reclaimed spot job going back
    to the cluster, its new id not yet recorded)."""
    owners = {owner for _job, owner, _config in foreign}
    instances = list(
        Instance.objects.reconciled()
        .filter(backend_name=backend_name, owner_id__in=owners)
        .values_list("pk", "owner_id", "public_id", "status", "backend_job_id", "zone__slug")
    )
    starts = _run_starts([pk for pk, *_rest in instances])
    by_name: dict[tuple, list[dict]] = {}
    for job, owner, _config in foreign:
        by_name.setdefault((owner, job.get("name")), []).append(job)
    ids, claimed_by_name, configs = set(), set(), {}
    for _pk, owner, public_id, status, job_id, slug in instances:
        if job_id:
            ids.add((owner, str(job_id)))
        if status == Status.PREEMPTED:
            continue
        config = configs.setdefault(slug, zone_settings(slug))
        named = _since_start(by_name.get((owner, job_name(config, public_id)), []), starts.get(public_id))
        if named and not job_id:
            claimed_by_name.add(str(named[0]["job_id"]))
        if named and job_id and status == Status.STARTING:
            if now - named[-1].get("submit_time", 0) < JUST_SUBMITTED_SECONDS:
                claimed_by_name.add(str(named[-1]["job_id"]))
    return [
        (job, owner, config)
        for job, owner, config in foreign
        if (owner, str(job["job_id"])) not in ids and str(job["job_id"]) not in claimed_by_name
    ]


def _since_start(named: list[dict], start) -> list[dict]:
    """Of the jobs of an instance's name, those submitted since its run was asked for (``start``; None: all), in the
    order Slurm numbered them. The first is the console's own submission, which a copy the tenant submits under the
    same name can only follow. Slurm counts whole seconds, so a job of the same second as the request counts."""
    since = int(start.timestamp()) if start is not None else 0
    return sorted((job for job in named if job.get("submit_time", 0) >= since), key=lambda job: job["job_id"])


def _own_of_name(named: list[dict], config: dict, start, recorded=None) -> dict | None:
    """An instance's job among the jobs of its name (``named``), of those that run as its account (a job's user may
    rename its own jobs, so a name alone proves nothing): before its job's id is recorded (``start``, when its run
    was asked for), the first since then, the one the sweep spares (:func:`_since_start`); once one is recorded
    (``recorded``), the newest of it and those submitted after it: itself, or a requeued spot job's new id where
    Slurm no longer lists it (a restarted instance's earlier jobs stay listed until Slurm forgets them, and are not
    its machine)."""
    mine = [job for job in named if _owned(job, config)]
    if start is not None:
        first = _since_start(mine, start)[:1]
        return first[0] if first else None
    if recorded is not None:
        mine = [job for job in mine if _job_number(job["job_id"]) >= _job_number(recorded)]
    return max(mine, key=lambda job: _job_number(job["job_id"])) if mine else None


def _job_number(job_id) -> int:
    """A job's id as Slurm numbers them, in the order it was submitted (-1 for anything else)."""
    text = str(job_id)
    return int(text) if text.isdigit() else -1


def _owned(job: dict, config: dict) -> bool:
    """Whether ``job`` runs as the instance's account (``job_user``)."""
    return job.get("user_name", config["job_user"]) == config["job_user"]


def _queue_entry(job: dict | None) -> dict | None:
    if job is None:
        return None
    return {"job_id": str(job["job_id"]), "state": job.get("job_state", ""), "reason": job.get("state_reason", "")}


def job_node(job: dict) -> str:
    return job.get("batch_host") or job.get("nodes") or ""


def _access(job: dict, *, lab: bool = False, shared: bool = False) -> dict:
    """What the instance page offers: a shell (``srun`` into the job) always, JupyterLab once the agent reported
    where it answers; ``shared_account`` when the job runs as the account every owner's jobs share."""
    return {
        "simulated": False,
        "node": job_node(job),
        "job_id": str(job["job_id"]),
        "attach_command": f"srun --jobid {job['job_id']} --overlap --pty bash",
        "ssh": True,
        "jupyter": lab,
        "shared_account": shared,
    }


# The listings of each cluster's jobs read in the current reconcile beat, by (REST address, console user); None outside
# one (SlurmBackend.one_listing).
_beat_listings: ContextVar[dict | None] = ContextVar("slurm_beat_listings", default=None)


def _listing_key(config) -> tuple:
    """Which listing of jobs a zone's settings read: a cluster's REST address, as the console's user."""
    return config["rest_url"], config["user"]


# The backend -----------------------------------------------------------------------------------------------------


class SlurmBackend(Backend):
    name = "slurm"
    simulated = False
    has_scheduler = True

    def __init__(self):
        self._clients: dict[tuple, SlurmClient] = {}

    # Configuration
    def config(self, instance) -> dict:
        """The zone's settings, with ``job_user``: the account the instance's jobs run as."""
        config = zone_settings(instance.zone.slug)
        return config | {"job_user": job_account(config, instance.owner_id)}

    def client(self, config: dict, *, as_console: bool = False) -> SlurmClient:
        """A client acting as the instance's account (``job_user``): Slurm lets a job's own user submit, signal and
        cancel it. ``as_console``: as the console's ``user``, for reading the queue."""
        user = config["user"] if as_console else config.get("job_user", config["user"])
        key = (config["rest_url"], user, config.get("token", ""), config.get("jwt_key_file", ""))
        if key not in self._clients:
            self._clients[key] = SlurmClient(config | {"user": user})
        return self._clients[key]

    def isolates_owners(self, zone) -> bool:
        """Whether the zone's jobs run as their owner's own account: only then are secrets injected."""
        return per_owner_accounts(zone_settings(zone.slug))

    def job_name(self, instance, config=None) -> str:
        config = config or self.config(instance)
        return job_name(config, instance.public_id)

    def root(self, config: dict) -> Path:
        return Path(config["root"])

    def system_disk(self, instance, config=None) -> Path:
        return self.root(config or self.config(instance)) / "instances" / str(instance.public_id)

    def gres(self, instance, config: dict) -> tuple[str, int]:
        """The typed GRES for the instance's chip and the first index of that type on a node."""
        gres_type = config.get("gres_types", {}).get(instance.chip.slug)
        if not gres_type:
            raise BackendError(f"zone {instance.zone.slug} maps no Slurm GRES type to chip {instance.chip.slug}")
        return gres_type, int(config.get("gres_offsets", {}).get(gres_type, 0))

    # Jobs
    def _named(self, jobs: list[dict], instance, config: dict) -> dict | None:
        """The instance's job found by its name among ``jobs`` (:func:`_own_of_name`)."""
        name = self.job_name(instance, config)
        start = None if instance.backend_job_id else _run_starts([instance]).get(instance.public_id)
        named = [job for job in jobs if job.get("name") == name]
        return _own_of_name(named, config, start, instance.backend_job_id or None)

    def _current_job(self, instance, config) -> dict | None:
        """The instance's job: the one the console recorded submitting, whatever its name now; before that, the one
        of its name :meth:`_named` finds."""
        client = self.client(config)
        if instance.backend_job_id:
            job = client.job(instance.backend_job_id)
            if job is not None and _owned(job, config):
                return job
        return self._named(client.jobs(), instance, config)

    @sensitive_variables("description")
    def submit(self, instance) -> str:
        config = self.config(instance)
        client = self.client(config)
        job = self._named(client.jobs(), instance, config)
        if job and job.get("job_state") in ACTIVE_STATES and not _marked(job):
            if not (job.get("restart_cnt", 0) > 0 and instance.spot):
                return str(job["job_id"])  # already submitted: retries and reconcile land here
        account = self.prepare_account(instance, config)
        image = local_image.ready_root(instance.image)
        # The job's description first: it refuses what the zone's accounts may not be given (secrets on a shared
        # account) before anything of the machine is written where the account's jobs read.
        script, description = self.job_description(instance, config, account, image=image)
        if image is not None:
            # The machine boots the image's root under bubblewrap on the node (slurm_image); the boot files are
            # written afresh at each start, readable by the instance's account alone.
            for folder in slurm_image.data_folders(config):
                _make_dirs(folder, like=self.root(config))
            group = account.gid if account else _group_of(config["job_user"])
            slurm_image.write_boot(instance, config, image, self.system_disk(instance, config), group)
        try:
            return client.submit(script, description)
        except SlurmError as exc:
            if NO_SUCH_CONFIGURATION in exc.numbers:
                chip = instance.chip.label if instance.chip_id else _("CPU-only")
                raise BackendError(
                    _("no node of this zone's cluster has %(cards)s %(chip)s cards, %(vcpus)s vCPUs and %(memory)s GB")
                    % {
                        "cards": instance.cards,
                        "chip": chip,
                        "vcpus": instance.spec.vcpus,
                        "memory": instance.spec.memory_gb,
                    }
                ) from exc
            raise

    def prepare_account(self, instance, config: dict) -> Account | None:
        """With per-owner accounts: the owner's account, and the instance's folders (system disk, data disks, the
        owner's storage, its log folder) made or handed over to it with mode 0700. None with the shared account."""
        root = self.root(config)
        _make_dirs(root / "logs", like=root)
        if not per_owner_accounts(config):
            return None
        account = ensure_account(config, instance.owner_id)
        system = self.system_disk(instance, config)
        _make_dirs(system.parent, like=root)
        for folder in (system, self.log_folder(config)):
            _make_private(folder, account, like=root)
        return account  # data disks and storage are the account's from attachments.apply, after every submit

    def log_folder(self, config: dict) -> Path:
        """Where the jobs' output files go: ``logs/`` of the root, and a folder of the account's own in it with
        per-owner accounts (Slurm writes them as the job's user, readable by all)."""
        logs = self.root(config) / "logs"
        return logs / config["job_user"] if per_owner_accounts(config) else logs

    # The job's environment holds the owner's secrets: Django's error reports list a failing frame's variables.
    @sensitive_variables("job")
    def job_description(
        self, instance, config: dict, account: Account | None = None, *, image: dict | None = None
    ) -> tuple[str, dict]:
        root = self.root(config)
        logs = self.log_folder(config)
        family = instance.chip.backend if instance.chip_id else "cpu"
        # -I (isolated): the owner's variables reach the agent too, and PYTHONPATH or PYTHONHOME must not change it.
        command = [
            config.get("agent_python", "python3"),
            "-I",
            agent_path(config),
            "--instance",
            str(instance.public_id),
            "--root",
            str(root),
            "--family",
            family,
            "--console",
            config.get("console_url", ""),
            "--interval",
            str(config.get("heartbeat_seconds", 15)),
        ]
        requested = self.requested(instance, config)
        job = {
            "name": self.job_name(instance, config),
            "partition": requested["partition"],
            "current_working_directory": str(root),
            "standard_output": str(logs / log_name(instance.public_id, "%j")),
            "requeue": bool(instance.spot),
            "environment": self.job_environment(instance, config),
            # The spec's vCPUs and RAM, which a cluster that confines jobs (cgroups) gives the machine and no more;
            # without them a job gets the partition's defaults (often one CPU).
            "cpus_per_task": requested["cpus"],
            "memory_per_node": requested["memory_mb"],
        }
        if instance.time_limit_minutes:
            job["time_limit"] = instance.time_limit_minutes  # Slurm ends the job then, state TIMEOUT
        if instance.chip_id:
            gres_type, offset = self.gres(instance, config)
            job["gres"] = f"gpu:{gres_type}:{instance.cards}"
            command += ["--offset", str(offset)]
        # A machine booted from an image runs no JupyterLab: its Python is the platform's, not the image's.
        if (lab := jupyter_python(config)) and image is None:
            command += ["--jupyter", lab]
        if account is not None:
            command += ["--private"]
        # The owner's start command is the workload the agent runs (and signals); without one, the zone's default.
        # From an image, the workload is the image's sandbox, which runs the start command (or the image's own).
        workload = ["/bin/sh", "-c", instance.start_command] if instance.start_command else config.get("workload")
        if image is not None:
            devices = config.get("card_devices", {}).get(gres_type, []) if instance.chip_id else []
            if instance.chip_id and not any("index}" in pattern for pattern in devices):
                # The image's machine would boot without the cards it is billed for.
                raise BackendError(
                    _(
                        "This zone's cluster names no device files for %(chip)s cards: a machine from an imported "
                        "image cannot use them."
                    )
                    % {"chip": instance.chip.label}
                )
            disk = self.system_disk(instance, config)
            workload = slurm_image.workload(instance, config, disk, devices, offset if instance.chip_id else 0)
        if workload:
            command += ["--", *workload]
        # exec: the agent is the batch shell itself, so the signals Slurm and the console send reach it.
        return "#!/bin/bash\nexec " + shlex.join(command) + "\n", job

    def job_environment(self, instance, config: dict) -> dict:
        """The job's environment, which the agent passes on to the workload: the platform's defaults, the owner's
        variables and secrets (``boot_environment``: names the platform sets are refused at launch), JupyterLab's
        password (the owner's own server, so the workload may see it), and the agent's own credential, which the
        agent keeps from the workload. Slurm keeps it with the job for its operators only; its REST job listings do
        not show it. A job of the shared account gets no secrets: every tenant's code could read them."""
        if instance.secret_names and not per_owner_accounts(config):
            raise BackendError(SECRETS_NEED_OWN_ACCOUNT)
        # Unbuffered Python output: the logs panel shows a running script's prints as they come, not in 4 KB bursts.
        defaults = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1"}
        credentials = {
            "JUPYTER_TOKEN": jupyter_token(instance.public_id),
            "GPUCLOUD_AGENT_TOKEN": agent_token(instance.public_id),
        }
        return defaults | boot_environment(instance) | credentials

    def queue_entry(self, instance) -> dict | None:
        """The instance's current job as ``squeue`` shows it: id, state, and the reason (``%r``) it waits or ended."""
        return _queue_entry(self._current_job(instance, self.config(instance)))

    def queue_entries(self, instances) -> dict:
        """The same for many instances: one listing of each cluster's jobs."""
        result = {}
        for members in self._by_cluster(instances).values():
            starts = _run_starts([i for i, _c in members if not i.backend_job_id])
            for public_id, job in self._listed_jobs(members, starts).items():
                result[public_id] = _queue_entry(job)
        return result

    @contextmanager
    def one_listing(self):
        """The sweep and the statuses of one reconcile beat read each cluster's jobs once: slurmrestd lists every job
        of the cluster for each ``GET /jobs``, which on a large cluster is most of what a beat asks of it. A look at
        one instance (after a stop, say) always lists afresh."""
        token = _beat_listings.set({})
        try:
            yield
        finally:
            _beat_listings.reset(token)

    def _cluster_jobs(self, config) -> list[dict]:
        """Every job of the zone's cluster, as the console's REST user lists them: the beat's listing where one was
        read already (:meth:`one_listing`)."""
        kept, key = _beat_listings.get(), _listing_key(config)
        if kept is not None and key in kept:
            return kept[key]
        listing = self.client(config, as_console=True).jobs()
        if kept is not None:
            kept[key] = listing
        return listing

    def _listed_jobs(self, members, starts: dict) -> dict:
        """Public id → each instance's job, from one listing of the cluster's jobs: the job the console recorded
        submitting, whatever its name now (a job's user may rename it); before that, the first of the instance's name
        that runs as its account since its run was asked for (``starts``), the job the sweep spares
        (:func:`_unclaimed`); a recorded job Slurm no longer lists, the newest of its name that runs as its account (a
        requeued spot job's new id): :func:`_own_of_name`."""
        listing = self._cluster_jobs(members[0][1])
        by_id, by_name = {}, {}
        for job in listing:
            by_id[str(job.get("job_id"))] = job
            by_name.setdefault(job.get("name"), []).append(job)
        jobs = {}
        for instance, config in members:
            job = by_id.get(str(instance.backend_job_id)) if instance.backend_job_id else None
            if job is None or not _owned(job, config):
                start = None if instance.backend_job_id else starts.get(instance.public_id)
                named = by_name.get(self.job_name(instance, config), [])
                job = _own_of_name(named, config, start, instance.backend_job_id or None)
            jobs[instance.public_id] = job
        return jobs

    def _by_cluster(self, instances) -> dict[tuple, list]:
        by_cluster: dict[tuple, list] = {}
        for instance in instances:
            config = self.config(instance)
            by_cluster.setdefault(_listing_key(config), []).append((instance, config))
        return by_cluster

    def logs(self, instance, *, tail: int = 200) -> str:
        """The end of the current job's output file: the start command's stdout and stderr, with the agent's own
        lines (the job has no separate error file). Read backwards from the end, so a long run's log costs only the
        tail; a job whose file is not there yet has no logs."""
        path = self.log_file(instance)
        if path is None:
            return ""
        try:
            return tail_file(path, tail)
        except FileNotFoundError:
            return ""
        except OSError as exc:
            raise TransientBackendError(f"cannot read the instance's log {path}: {exc}") from exc

    def log_file(self, instance, config=None) -> Path | None:
        """The current job's output file; before the console knows the job, the instance's newest one."""
        folder = self.log_folder(config or self.config(instance))
        job_id = str(instance.backend_job_id or "")
        if job_id.isdigit():
            return folder / log_name(instance.public_id, job_id)
        files = list(folder.glob(log_name(instance.public_id, "*")))
        return max(files, key=lambda path: path.lstat().st_mtime, default=None)

    def stop(self, instance, *, grace_seconds: float) -> None:
        config = self.config(instance)
        client = self.client(config)
        job = self._current_job(instance, config)
        if job is None or job.get("job_state") not in ACTIVE_STATES:
            return
        if job.get("job_state") != "RUNNING":
            client.update(job["job_id"], {"comment": mark(CHECKPOINT_TAG, job["job_id"], time.time())})
            client.cancel(job["job_id"])  # nothing to checkpoint yet
            return
        signalled = _tagged_time(job, CHECKPOINT_TAG)
        if signalled is None:
            signalled = time.time()
            client.update(job["job_id"], {"comment": mark(CHECKPOINT_TAG, job["job_id"], signalled)})
            client.signal(job["job_id"], "SIGUSR1")
        # The grace runs from when the stop was asked (the console's record): the job's user can erase the mark.
        asked = instance.stop_requested_at.timestamp() if instance.stop_requested_at else signalled
        if time.time() >= min(asked, signalled) + grace_seconds:
            client.cancel(job["job_id"])

    def release(self, instance) -> None:
        """Cancel the job; once it has ended (its agent writes a last checkpoint on the way out), delete the system
        disk. Until then this raises a transient error, so the release task and reconcile come back."""
        config = self.config(instance)
        job = self._current_job(instance, config)
        if job is not None and job.get("job_state") in ACTIVE_STATES | {"COMPLETING"}:
            if job.get("job_state") != "COMPLETING":
                self.client(config).cancel(job["job_id"])
            raise TransientBackendError(f"waiting for job {job['job_id']} to end before deleting the system disk")
        shutil.rmtree(self.system_disk(instance, config), ignore_errors=True)
        slurm_image.remove_boot(config, instance.public_id)
        slurm_hub.remove(config, instance.public_id)

    def status(self, instance) -> BackendStatus:
        return self.status_many([instance])[instance.public_id]

    def status_many(self, instances) -> dict:
        result = {}
        for members in self._by_cluster(instances).values():
            starts = _run_starts([i for i, _c in members if i.status == Status.STARTING or not i.backend_job_id])
            latest = self._listed_jobs(members, starts)
            reported = _reported(latest)
            labs = _labs(latest)
            for instance, _config in members:
                job = latest[instance.public_id]
                if job is not None and instance.public_id in starts and _ended_before(job, starts[instance.public_id]):
                    latest[instance.public_id] = None  # the previous run's job: this run has not been submitted yet
            # The agent's own record of a run, where Slurm's may be gone: a job it no longer lists, and a starting
            # instance's job that may have run and been preempted between two looks.
            unseen = [
                i
                for i, _c in members
                if i.backend_job_id and (latest[i.public_id] is None or i.status == Status.STARTING)
            ]
            runs = _agent_runs(unseen, starts)
            for instance, config in members:
                job = latest[instance.public_id]
                run = runs.get(instance.public_id)
                if job is None and run is not None:
                    stale = 3 * float(config.get("heartbeat_seconds", 15))
                    status = forgotten_job_phase(run, wanted=instance.wanted, stale_after=stale)
                else:
                    status = self._phase(instance, config, job, reported, labs)
                if status.phase == Phase.PREEMPTED and instance.status == Status.STARTING and run is not None:
                    status = replace(status, ran_from=run.first)  # it ran from its agent's first report
                result[instance.public_id] = status
        return result

    def requested(self, instance, config: dict) -> dict:
        """What the console asks of the cluster for the instance's job, as Slurm lists a job's request."""
        cards = f"gres:gpu:{self.gres(instance, config)[0]}:{instance.cards}" if instance.chip_id else ""
        return {
            "partition": config["spot_partition"] if instance.spot else config["partition"],
            "spot": bool(instance.spot),
            "tres_per_node": cards,
            "cpus": instance.spec.vcpus,
            "memory_mb": instance.spec.memory_gb * 1024,
            "time_limit": instance.time_limit_minutes or None,
        }

    def sweep(self) -> int:
        """Cancel the jobs that run as a zone's per-owner accounts and that no instance claims (:func:`_unclaimed`).
        A tenant's code runs as its account on the cluster, so it can submit jobs of its own (``sbatch`` from inside
        its machine), requeue one of its machine's ended jobs (``scontrol requeue``), or keep one running past its
        machine's end: cards the console would never bill. The jobs are listed before the instances are read: a job
        submitted after the listing is not judged by it. Returns how many it cancelled."""
        zones = Node.objects.filter(backend_name=self.name).values_list("zone__slug", flat=True).distinct()
        clusters: dict[str, list] = {}
        for slug in set(zones):
            config = zone_settings(slug)
            if per_owner_accounts(config) and config.get("rest_url"):
                clusters.setdefault(config["rest_url"], []).append((slug, config))
        cancelled = 0
        for members in clusters.values():
            listing = self._cluster_jobs(members[0][1])
            foreign = _accounts_jobs(listing, members)
            unclaimed = _unclaimed(self.name, foreign, time.time()) if foreign else []
            for job, _owner, config in unclaimed:
                logger.warning("cancelling Slurm job %s of %s: no instance claims it", job["job_id"], job["user_name"])
                try:
                    self.client(config | {"job_user": job["user_name"]}).cancel(job["job_id"])
                except BackendError as exc:  # the others are still cancelled; this one at the next beat
                    logger.warning("cancelling Slurm job %s: %s", job["job_id"], exc)
                    continue
                cancelled += 1
            kept = _beat_listings.get()
            if unclaimed and kept is not None:  # the statuses must not see a cancelled copy as running
                kept.pop(_listing_key(members[0][1]), None)
        return cancelled

    def _phase(self, instance, config, job, reported, labs) -> BackendStatus:
        if changes := self._changes(instance, config, job):
            return self._end_changed(instance, config, job, changes)
        key = (instance.public_id, str(job["job_id"])) if job else None
        status = job_phase(
            job,
            wanted=instance.wanted,
            reported=key in reported or not config.get("require_heartbeat", True),
            agent_reported=key in reported,
            grace=_grace(instance),
            cards=instance.cards,
            cpus=instance.spec.vcpus,
            memory_gb=instance.spec.memory_gb,
            spot_partition=config["spot_partition"],
            chip=instance.chip.label if instance.chip_id else "",
            lab=bool(job) and lab_address_allowed(labs.get(key), job_node(job)),
            shared=not per_owner_accounts(config),
        )
        if status.phase == Phase.PREEMPTED and job.get("job_state") in ACTIVE_STATES:
            self._hold_preempted(config, job, status.since)
        return replace(status, job_id=str(job["job_id"])) if job else status

    def _changes(self, instance, config, job) -> list[str]:
        """What the job's user changed of this run's job, the one the console recorded submitting (not a previous
        run's). Slurm's requeued copy of a reclaimed spot job is unchanged, and the preemption path ends it."""
        if job is None or job.get("job_state") not in ACTIVE_STATES or str(job["job_id"]) != instance.backend_job_id:
            return []
        if _marked(job):  # the console is stopping it or has ended it as preempted
            return []
        try:
            requested = self.requested(instance, config)
        except BackendError:  # the zone no longer maps the chip: nothing to compare with
            return []
        return changed_request(job, requested)

    def _end_changed(self, instance, config, job, changes) -> BackendStatus:
        """A job changed on the cluster is not the machine the console bills: it is cancelled, and the machine fails
        saying what changed. One that already runs has run on its cards from its start."""
        try:
            self.client(config).cancel(job["job_id"])
        except BackendError as exc:  # the machine's stop cancels it again
            logger.warning("cancelling changed Slurm job %s: %s", job["job_id"], exc)
        logger.warning(
            "cancelled Slurm job %s of %s: changed outside the console (%s)", job["job_id"], instance.public_id, changes
        )
        message = _("its Slurm job was changed on the cluster (%(changes)s), so the console ended it") % {
            "changes": get_text_list(changes, _("and"))
        }
        started = job.get("start_time") or 0
        ran_from = _at(started) if job.get("job_state") == "RUNNING" and 0 < started <= time.time() else None
        return BackendStatus(
            Phase.FAILED, since=_at(time.time()), message=message, ran_from=ran_from, changed_outside=True
        )

    def _hold_preempted(self, config, job, since) -> None:
        # Slurm would restart the requeued copy by itself after ~2 minutes, holding cards the console no longer
        # bills; relaunching is the owner's decision and a new job. The tag keeps the preemption time visible.
        client = self.client(config)
        at = since.timestamp() if since else time.time()
        try:
            client.update(job["job_id"], {"comment": mark(PREEMPTED_TAG, job["job_id"], at)})
            client.cancel(job["job_id"])
        except BackendError as exc:  # the next look holds it again; the others are looked at meanwhile
            logger.warning("holding preempted Slurm job %s: %s", job["job_id"], exc)

    def metrics(self, instance, *, minutes: int = 30) -> list[MetricPoint]:
        from ..heartbeats import metric_points

        return metric_points(instance, minutes=minutes)

    # Entering the machine: JupyterLab in the job, a shell through srun, SFTP in the home

    def jupyter(self, instance) -> JupyterServer | None:
        """The running job's JupyterLab, from its agent's latest report, when the address is one the console may
        use (:func:`lab_address_allowed`): read from the database, as the proxy asks on every request."""
        if instance.status != Status.RUNNING or not instance.backend_job_id:
            return None
        url = _lab_url(instance)
        if not lab_address_allowed(url, (instance.access or {}).get("node", "")):
            return None
        return JupyterServer(token=jupyter_token(instance.public_id), base_path=lab_path(instance.public_id), url=url)

    def enter_argv(self, instance, command: str | None) -> list[str]:
        """``srun --overlap`` into the running job: as the instance's account, in its home, with the workload's
        environment (the agent's file), ``--pty`` when the caller's stdin is a terminal. srun passes the exit status
        through; ``-QQ`` keeps its own notes ("task 0: Exited with exit code 1") out of the user's output, and
        ``--unbuffered`` passes output on as it comes (srun holds it back to whole lines otherwise, which stalls a
        byte protocol such as SFTP's)."""
        config = self.config(instance)
        job_id = self._running_job_id(instance, config)
        system = self.system_disk(instance, config)
        environment = system / agent_module.ENVIRONMENT
        image = images.boot_root(instance.image)
        if image is not None:  # into the image's sandbox, whose only shell may be /bin/sh
            program = ["/bin/sh", "-l"] if command is None else ["/bin/sh", "-c", command]
            agent = [config.get("agent_python", "python3"), "-I", agent_path(config)]
            inside = slurm_image.enter_command(image, system, agent, program)
        else:
            program = ["/bin/bash", "-l"] if command is None else ["/bin/bash", "-c", command]
            inside = ["/bin/sh", "-c", f'. {shlex.quote(str(environment))} && cd "$HOME" && exec "$@"', "sh", *program]
        # --export=TERM: nothing of the console's environment reaches the machine but the terminal's type.
        srun = ["srun", "-QQ", "--jobid", job_id, "--overlap", "--unbuffered", "--export=TERM"]
        srun += ["--chdir", str(system / "root"), *inside]
        pty_when_a_terminal = 'if [ -t 0 ]; then srun=$1; shift; exec "$srun" --pty "$@"; fi; exec "$@"'
        return [*self._as_jobs_user(config), "/bin/sh", "-c", pty_when_a_terminal, "sh", *srun]

    def _running_job_id(self, instance, config: dict) -> str:
        """The instance's job, asked of Slurm: srun's own errors are kept quiet, so a job that is gone is told here."""
        job = self._current_job(instance, config) if instance.status == Status.RUNNING else None
        if job is None or job.get("job_state") != "RUNNING" or _tagged_time(job, CHECKPOINT_TAG) is not None:
            raise BackendError(_("The instance is not running."))
        return str(job["job_id"])

    def _as_jobs_user(self, config: dict) -> list[str]:
        """Slurm lets only a job's own user (or its operators) start steps in it: a console running as root becomes
        the instance's account first."""
        if os.geteuid() != 0:
            return []
        user = config["job_user"]
        return ["setpriv", f"--reuid={user}", f"--regid={_group_of(user)}", "--init-groups", "--"]

    # Disks and mounts: a layout file on the system disk, applied at once here and by the agent on each heartbeat
    def _edit_layout(self, instance, change, disk: str = "") -> None:
        """Change the layout with ``change``; ``disk``: the data disk being attached, which the account gets."""
        config = self.config(instance)
        root, system = self.root(config), self.system_disk(instance, config)
        if per_owner_accounts(config):
            self._edit_layout_as_account(instance, config, change, disk)
            return
        _make_dirs(system / ".gpucloud", like=root)
        previous = agent_module.read_layout(system)
        layout = {"disks": list(previous.get("disks", [])), "mounts": list(previous.get("mounts", []))}
        change(layout)
        # Shared with the jobs' group, as the instance root is (the console's own umask keeps its files private).
        agent_module.write_layout(system, layout, mode=0o664)
        made = agent_module.apply_layout(root, system, layout, previous=previous)
        _share_folders(made)
        owner = root.stat()
        _give_to(owner.st_uid, owner.st_gid, [system / agent_module.LAYOUT, *made])

    def _edit_layout_as_account(self, instance, config: dict, change, disk: str) -> None:
        """The system disk is the account's: the console (root) gives the account the disk being attached, and the
        account itself writes the layout and makes the links (the agent's ``--write-layout``), so no link the
        account made there leads root anywhere. The layout the account could edit is only read, never trusted for a
        path root acts on."""
        root, system = self.root(config), self.system_disk(instance, config)
        account = ensure_account(config, instance.owner_id)
        _make_private(system, account, like=root)
        previous = _read_private_layout(system)
        layout = {"disks": list(previous.get("disks", [])), "mounts": list(previous.get("mounts", []))}
        change(layout)
        if disk:
            _make_private(root / "disks" / str(uuid.UUID(disk)), account, like=root)
        # The agent as the jobs run it: a Python and a file the account can read, wherever the console lives.
        agent = [config.get("agent_python", "python3"), "-I", agent_path(config)]
        done = subprocess.run(
            [*agent, "--write-layout", str(root), str(system)],
            input=json.dumps(layout),
            capture_output=True,
            text=True,
            user=account.uid,
            group=account.gid,
            extra_groups=[],
            umask=0o077,
            cwd="/",
            env={"PATH": "/usr/bin:/bin"},
            check=False,
            timeout=60,
        )
        if done.returncode != 0:
            raise BackendError(f"writing the layout as {account.name} failed: {done.stderr.strip()[-500:]}")

    def _source(self, config: dict, source: str, target: str, instance) -> str:
        """Where a mount's source lives on the nodes: the owner's storage, an absolute path, or the instance's copy of
        a hub item (:mod:`.slurm_hub`)."""
        if source.startswith("/"):
            return source
        if source.startswith("cloudstorage/") or target == "/root/shared":
            shared = Path(config.get("shared_root") or self.root(config) / "shared") / source.rsplit("/", 1)[-1]
            _make_dirs(shared, like=self.root(config))
            if per_owner_accounts(config):
                _make_private(shared, ensure_account(config, instance.owner_id), like=self.root(config))
            return str(shared)
        if not per_owner_accounts(config):
            raise BackendError(
                _(
                    "Models and datasets are not mounted in machines that share one account on the cluster, where "
                    "every tenant could read them: download them in the machine with hf download."
                )
            )
        return str(slurm_hub.lay_out(config, instance.public_id, source, ensure_account(config, instance.owner_id)))

    def attach_disk(self, instance, disk_id: str, size_gb: int | None = None, name: str = "") -> None:
        # The agent on the nodes knows no names: the layout tells it each disk's folder in /root/data.
        self._edit_layout(instance, lambda layout: _place_disk(layout["disks"], str(disk_id), name), disk=str(disk_id))

    def detach_disk(self, instance, disk_id: str) -> None:
        self._edit_layout(instance, lambda layout: _drop_disk(layout["disks"], str(disk_id)))

    def mount(self, instance, source: str, target: str) -> None:
        if not target.startswith("/root/") or ".." in target.split("/"):
            raise BackendError(f"mounts go under /root/, not {target!r}")
        entry = {
            "source": self._source(self.config(instance), source, target, instance),
            "target": target,
            "read_only": not (source.startswith("cloudstorage/") or target == "/root/shared"),
        }
        self._edit_layout(instance, lambda layout: _replace_mount(layout["mounts"], entry))

    def unmount(self, instance, target: str) -> None:
        self._edit_layout(instance, lambda layout: _replace_mount(layout["mounts"], {"target": target}, drop=True))
        repo = slurm_hub.repo_of(target)
        if repo:
            slurm_hub.remove(self.config(instance), instance.public_id, repo)


def log_name(public_id, job_id: str) -> str:
    """The name of a job's output file under the instance root's ``logs/`` (``%j``: Slurm puts the job id in)."""
    return f"{public_id}-{job_id}.log"


def tail_file(path: Path, lines: int, *, block: int = 64 * 1024, max_bytes: int = 4 * 1024 * 1024) -> str:
    """The last ``lines`` lines of ``path`` as text (UTF-8; bytes that are not show as U+FFFD), read in blocks from
    the end until enough line ends are seen: the cost is the tail's, not the file's. At most ``max_bytes`` are read,
    so a line longer than that is cut at its start. The jobs' user writes the folder the file is in: a link or
    anything but a regular file there is read as no file (FileNotFoundError), so it never leads the console
    elsewhere."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise FileNotFoundError(errno.ENOENT, "a link, not the job's output file", str(path)) from exc
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise FileNotFoundError(errno.ENOENT, "not a regular file", str(path))
    with os.fdopen(fd, "rb") as file:
        end = file.seek(0, os.SEEK_END)
        start, chunks, line_ends = end, [], 0
        # One more line end than lines: the first line read is whole only if the line end before it was read too.
        while start > 0 and line_ends <= lines and end - start < max_bytes:
            size = min(block, start, max_bytes - (end - start))
            start -= size
            file.seek(start)
            chunk = file.read(size)
            chunks.append(chunk)
            line_ends += chunk.count(b"\n")
    data = b"".join(reversed(chunks))
    if start > 0 and line_ends > lines:
        data = data.split(b"\n", 1)[1]  # the partial first line (a multi-byte character may be cut there too)
    text = data.decode("utf-8", errors="replace")
    return "\n".join(text.removesuffix("\n").split("\n")[-lines:]) if text else ""


def _place_disk(disks: list, disk_id: str, name: str) -> None:
    """The layout's entry for a disk: ``{"id", "folder"}``, the folder as on every backend (:func:`disk_folder`: its
    name, ``-2``… when another disk of the machine has it), worked out again at each attach and start: a disk at
    ``<name>-2`` moves to ``<name>`` once the other disk is gone, as on the local backend, and one the layout had
    under its id (a bare id: written before disks had folders of their own) moves to its name. It keeps its place in
    the list."""
    others = [agent_module.disk_of(entry) for entry in disks]
    taken = {folder for other, folder in filter(None, others) if other != disk_id}
    entry = {"id": disk_id, "folder": disk_folder(name, disk_id, taken)}
    mine = [i for i, other in enumerate(others) if other and other[0] == disk_id]
    if mine:
        disks[mine[0]] = entry  # where it was in the list
        disks[:] = [d for i, d in enumerate(disks) if i not in mine[1:]]
    else:
        disks.append(entry)


def _drop_disk(disks: list, disk_id: str) -> None:
    """No entry of the disk left in the layout, bare id or ``{"id", "folder"}``."""
    disks[:] = [entry for entry in disks if (agent_module.disk_of(entry) or ("",))[0] != disk_id]


def _replace_mount(mounts: list, entry: dict, drop: bool = False) -> None:
    mounts[:] = [m for m in mounts if m["target"] != entry["target"]]
    if not drop:
        mounts.append(entry)


def _make_dirs(path: Path, *, like: Path) -> None:
    """Create ``path`` owned like ``like`` (the instance root): the agent runs as the jobs' user and writes there."""
    missing = []
    probe = path
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    path.mkdir(parents=True, exist_ok=True)
    _share_folders(missing)  # group-writable for the agent, whatever the console's umask
    try:
        owner = like.stat()
        for folder in missing:
            os.chown(folder, owner.st_uid, owner.st_gid)
    except (PermissionError, FileNotFoundError):
        pass  # not root: the directories are ours, shared with the jobs' group


def _share_folders(paths) -> None:
    """The folders among ``paths`` (just made by the console) made 2775, for the jobs' group; links are skipped."""
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        except OSError:
            continue  # a link or a file (the layout's links), or gone
        try:
            os.fchmod(fd, 0o2775)
        except OSError:
            pass
        finally:
            os.close(fd)


def _give_to(uid: int, gid: int, paths) -> None:
    """Hand what the console made on a system disk to the jobs' user: the agent runs as that user and must write
    there. Without the right to (the console is not root, with the shared account), group permissions serve."""
    for path in paths:
        try:
            os.lchown(path, uid, gid)
        except (PermissionError, FileNotFoundError):
            return


def _read_private_layout(system: Path) -> dict:
    """The layout on a system disk its account owns, read without following a link the account may have made."""
    flags = os.O_RDONLY | os.O_NOFOLLOW
    fds = []
    try:
        fds.append(os.open(system, flags | os.O_DIRECTORY))
        fds.append(os.open(".gpucloud", flags | os.O_DIRECTORY, dir_fd=fds[-1]))
        # Non-blocking and a regular file only: a FIFO there would hang the console.
        fds.append(os.open("layout.json", flags | os.O_NONBLOCK, dir_fd=fds[-1]))
        if not stat.S_ISREG(os.fstat(fds[-1]).st_mode):
            return {}
        with os.fdopen(os.dup(fds[-1]), "rb") as file:
            layout = json.loads(file.read(1024 * 1024))
    except (OSError, ValueError):
        return {}
    finally:
        for fd in fds:
            os.close(fd)
    # What the account wrote there may have any shape: only well-formed entries are kept.
    disks = layout.get("disks") if isinstance(layout, dict) else None
    mounts = layout.get("mounts") if isinstance(layout, dict) else None
    return {
        "disks": agent_module.clean_layout({"disks": disks})["disks"],
        "mounts": [m for m in mounts if isinstance(m, dict) and isinstance(m.get("target"), str)]
        if isinstance(mounts, list)
        else [],
    }


def _make_private(folder: Path, account: Account, *, like: Path) -> None:
    """``folder`` made (its parents owned like ``like``) and given to ``account`` with mode 0700. A folder another
    user owned (made before per-owner accounts) is handed over with everything in it; links are never followed."""
    if folder.is_symlink():
        raise BackendError(f"{folder} is a symbolic link, not a folder to give to {account.name}")
    _make_dirs(folder, like=like)
    top = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        info = os.fstat(top)
        if info.st_uid != account.uid:
            # Everything inside first, the folder itself last. The walk holds each folder open and names entries
            # relative to it, never by a path: a folder swapped for a link while it runs is not followed, so
            # nothing outside is ever given away.
            for _path, dirs, files, dir_fd in os.fwalk(folder, follow_symlinks=False):
                for name in dirs + files:
                    try:
                        os.chown(name, account.uid, account.gid, dir_fd=dir_fd, follow_symlinks=False)
                    except FileNotFoundError:
                        pass  # removed while the walk ran
        if (info.st_uid, info.st_gid) != (account.uid, account.gid):
            os.fchown(top, account.uid, account.gid)
        os.fchmod(top, 0o700)
    finally:
        os.close(top)


def _grace(instance) -> float:
    return conf.spot_notice_seconds() if instance.status == "preempted" else conf.stop_grace_seconds()


def _reported(latest: dict) -> set:
    """(public id, job id) pairs whose agent has reported: one query for every instance."""
    jobs = {str(j["job_id"]) for j in latest.values() if j}
    if not jobs:
        return set()
    rows = AgentReport.objects.filter(instance__public_id__in=list(latest), job_id__in=jobs)
    return set(rows.values_list("instance__public_id", "job_id").distinct())


def _agent_runs(instances, starts: dict) -> dict:
    """Public id → the :class:`AgentRun` of each instance's current job (its ``backend_job_id``), where its agent
    reported from it — for a starting instance, only reports since this start was asked for: one query."""
    if not instances:
        return {}
    current = {i.public_id: str(i.backend_job_id) for i in instances}
    exited = Case(When(event=AgentReport.Event.EXITED, then=Value(1)), default=Value(0))
    rows = (
        AgentReport.objects.filter(instance__in=instances, job_id__in=set(current.values()))
        .values("instance__public_id", "job_id")
        .annotate(first=Min("at"), last=Max("at"), exited=Max(exited))
        .order_by()
    )
    runs = {}
    for row in rows:
        public_id = row["instance__public_id"]
        start = starts.get(public_id)
        if row["job_id"] != current[public_id] or (start is not None and row["first"] < start):
            continue  # another job's reports, or the previous run's
        runs[public_id] = AgentRun(row["first"], row["last"], bool(row["exited"]))
    return runs


def _labs(latest: dict) -> dict:
    """(public id, job id) → the JupyterLab address in that job's latest report, where there is one: one query."""
    jobs = {str(j["job_id"]) for j in latest.values() if j}
    if not jobs:
        return {}
    mine = AgentReport.objects.filter(instance__public_id__in=list(latest), job_id__in=jobs)
    newest = mine.values("instance_id", "job_id").annotate(last=Max("id")).values("last").order_by()
    rows = AgentReport.objects.filter(id__in=newest).values_list("instance__public_id", "job_id", "data__jupyter")
    return {(public_id, job_id): lab.get("url") for public_id, job_id, lab in rows if isinstance(lab, dict)}


def _lab_url(instance) -> str | None:
    """The JupyterLab address in the latest report of the instance's current job."""
    reports = AgentReport.objects.filter(instance=instance, job_id=str(instance.backend_job_id))
    lab = reports.order_by("-at", "-id").values_list("data__jupyter", flat=True).first()
    return lab.get("url") if isinstance(lab, dict) else None


def _group_of(user: str) -> int:
    try:
        return pwd.getpwnam(user).pw_gid
    except KeyError as exc:
        raise BackendError(f"no user {user!r} on the console's host to run srun as") from exc


def _run_starts(starting) -> dict:
    """When each starting instance's current run was asked for (its latest move to ``starting``): one query."""
    if not starting:
        return {}
    rows = (
        InstanceEvent.objects.filter(instance__in=starting, new="starting")
        .values("instance__public_id")
        .annotate(at=Max("at"))
        .order_by()
    )
    return {row["instance__public_id"]: row["at"] for row in rows}


def _ended_before(job: dict, moment) -> bool:
    """A job submitted before the run was asked for belongs to an earlier run. Slurm counts whole seconds, so a
    job submitted in the same second as the request counts as this run's."""
    return job.get("submit_time", 0) < int(moment.timestamp())
