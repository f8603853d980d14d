"""The interface every compute backend implements (simulated, Slurm, later Kubernetes).

The platform reserves cards and chooses the node; a backend runs the machine there. Every call is idempotent:
tasks may be retried and reconcile may repeat any of them.
"""

import enum
from abc import ABC, abstractmethod
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime

from django.utils.translation import gettext_lazy

# Why a launch with secrets is refused where every owner's machine runs as the same unix user.
SECRETS_NEED_OWN_ACCOUNT = gettext_lazy(
    "This zone runs every instance under one shared unix account, where other users' code could read your secrets: "
    "launch without secrets here, or in a zone whose instances run under your own account."
)


class BackendError(Exception):
    """A permanent refusal: the instance fails with this message."""


class TransientBackendError(BackendError):
    """Try again later (the task retries with backoff)."""


class Phase(enum.StrEnum):
    ABSENT = "absent"  # the backend knows no such job
    BOOTING = "booting"  # pulling the image or booting
    RUNNING = "running"
    STOPPING = "stopping"  # checkpoint signal sent, within the grace period
    STOPPED = "stopped"
    PREEMPTED = "preempted"  # spot capacity reclaimed (the notice window may still run)
    FAILED = "failed"  # the node died or the job crashed
    RELEASED = "released"


@dataclass(frozen=True)
class BackendStatus:
    phase: Phase
    since: datetime | None = None  # when the phase began (e.g. the preemption moment)
    ready_in: float | None = None  # seconds until a booting machine should be up, when known
    message: str = ""
    access: dict = field(default_factory=dict)
    # An ended or reclaimed machine the console never saw running (a cluster ran it and ended or preempted it
    # between two looks): when it began to run, so that its minutes are billed as any machine's. None when it never
    # ran.
    ran_from: datetime | None = None
    # A failed machine that failed because what it runs was changed outside the console (its owner's code changed
    # its cluster job's request): the console ended it.
    changed_outside: bool = False
    # The backend's id of the job it found for the machine, where it has jobs: the console records it if it has
    # none (a worker lost between submitting and recording it).
    job_id: str = ""


@dataclass(frozen=True)
class MetricPoint:
    at: datetime
    card_utilisation: float  # percent
    memory_used: float  # percent


@dataclass(frozen=True)
class JupyterServer:
    """Where a running instance's Jupyter server answers, for the console's reverse proxy. Exactly one of
    ``socket`` (a Unix socket on the console's host) and ``url`` (``http://host:port`` on the node) is set; every
    request carries ``token`` in an ``Authorization: token …`` header, so it never appears in a URL or a page.
    ``base_path`` is the server's ``base_url`` (``/instances/<id>/lab/``): the console forwards paths unchanged."""

    token: str
    base_path: str
    socket: str = ""
    url: str = ""


class Backend(ABC):
    name = ""
    simulated = False
    # Whether its machines have the accelerator cards they reserve. A template whose model needs one is refused on a
    # backend without (the local backend runs every machine on the host's CPU), and a machine there charts its own
    # CPU and memory, from its cgroup, instead of cards.
    has_cards = True
    # Whether a scheduler of its own queues the machines it is given (Slurm): a machine asked for while the cards
    # are taken waits there, in its order, instead of in the console.
    has_scheduler = False

    @abstractmethod
    def submit(self, instance) -> str:
        """Start ``instance`` on ``instance.node`` with its cards and image (also used to start a stopped one).
        Returns the backend's job id; submitting an instance that already runs returns its job id."""

    @abstractmethod
    def stop(self, instance, *, grace_seconds: float) -> None:
        """Send the checkpoint signal (SIGUSR1) now and stop the machine after ``grace_seconds``."""

    def preempt(self, instance, *, notice_seconds: float) -> None:
        """The platform reclaims a spot instance's cards for an on-demand launch: the checkpoint signal now, the
        machine down after ``notice_seconds``. By default that is a stop with the notice as its grace period."""
        self.stop(instance, grace_seconds=notice_seconds)

    @abstractmethod
    def release(self, instance) -> None:
        """Delete the machine and its system disk. Data disks are never deleted here."""

    @abstractmethod
    def status(self, instance) -> BackendStatus: ...

    def status_many(self, instances) -> dict:
        """public_id → status for many instances; backends override this with one round trip."""
        return {instance.public_id: self.status(instance) for instance in instances}

    def sweep(self) -> int:
        """End what runs on the backend as the console's tenants and that no instance claims (a backend whose
        tenants can start work on it by themselves overrides this). Returns how many it ended."""
        return 0

    def one_listing(self):
        """A context in which :meth:`sweep` and :meth:`status_many` read one listing of what runs (reconcile's beat
        uses both); a backend whose listing is costly to its scheduler overrides this."""
        return nullcontext()

    @abstractmethod
    def metrics(self, instance, *, minutes: int = 30) -> list[MetricPoint]:
        """Card utilisation and memory per minute over the last ``minutes`` while running."""

    def training_curves(self, instance) -> dict[str, list[tuple[int, float]]]:
        """tag → [(step, value)]: the scalars the instance's workload logged, as its agent forwarded them."""
        from ..heartbeats import training_curves

        return training_curves(instance)

    @abstractmethod
    def attach_disk(self, instance, disk_id: str, size_gb: int | None = None, name: str = "") -> None:
        """Make the data disk ``disk_id`` of ``size_gb`` GB (grown when it is larger than before) available in
        the instance at ``/root/data/<folder>``: its name, the one its page shows, as ``core.attaching.disk_folder``
        gives it (``<name>-2`` when another disk of the machine has that folder; its id when the name is no folder
        name). A disk the machine had elsewhere before (under its id, another name) moves there. Idempotent."""

    @abstractmethod
    def detach_disk(self, instance, disk_id: str) -> None: ...

    def delete_disk(self, disk_id: str) -> None:  # noqa: B027 - optional: most backends keep no bytes of their own
        """The disk was deleted: its data goes. Nothing to do where the backend keeps no bytes of its own."""

    @abstractmethod
    def mount(self, instance, source: str, target: str) -> None:
        """Mount a hub item or the user's storage read-only at ``target`` (metadata, never a copy)."""

    @abstractmethod
    def unmount(self, instance, target: str) -> None: ...

    # Saving a stopped instance as an image. Not abstract: a backend that cannot snapshot yet refuses
    # with a clear message, and the marketplace shows it.

    def system_disk_usage(self, instance) -> int:
        """Bytes used on the stopped instance's system disk: the size an image saved from it will have."""
        raise BackendError(f"The {self.name} backend cannot save instances as images yet.")

    def snapshot_system_disk(self, instance) -> int:
        """Snapshot the stopped instance's system disk into an image; returns its size in bytes. Idempotent."""
        raise BackendError(f"The {self.name} backend cannot save instances as images yet.")

    def isolates_owners(self, zone) -> bool:
        """Whether each owner's machines in ``zone`` run apart from other owners' (their own user): only then does
        a machine get its owner's secrets. The simulated backend runs nothing; the others say."""
        return True

    # Host capacity: what a machine holds of CPU and memory while it holds its cards.

    def demand(self, spec) -> tuple[int, int]:
        """The CPU (thousandths of a vCPU) and memory (MB) a machine of ``spec`` holds: the spec's figures."""
        return spec.vcpus * 1000, spec.memory_gb * 1024

    def host_capacity(self) -> tuple[int, int] | None:
        """For a backend whose nodes all stand on one host: the CPU (thousandths of a vCPU) and memory (MB) its
        machines may hold together. None (the default): each node has its own (``Node.vcpus``, ``memory_gb``)."""
        return None

    # Entering the machine. Backends that run no real machine (simulated) keep these defaults.

    def listening_ports(self, instance) -> list[int] | None:
        """The TCP ports something listens on inside the running machine (what its port panel offers to open);
        None where this backend cannot tell."""
        return None

    def jupyter(self, instance) -> JupyterServer | None:
        """The running instance's Jupyter server, or None when it has none (yet)."""
        return None

    def model_socket(self, instance) -> str:
        """The Unix socket on the console's host where a running endpoint's model server answers ``/v1/…``, or ""
        when it has none there (its model server, if any, is at the address it reported in ``access``)."""
        return ""

    def enter_argv(self, instance, command: str | None) -> list[str]:
        """The argv that, run on the console's host, executes ``command`` (``/bin/sh -c`` semantics) inside the
        running instance, or a login shell when ``command`` is None. The SSH gateway runs it under a pty or with
        pipes. Raises BackendError when the instance cannot be entered."""
        raise BackendError(f"The {self.name} backend has no machine to enter.")

    def queue_entry(self, instance) -> dict | None:
        """The machine's job in the backend's own scheduler, as its operators name it: ``{"job_id", "state",
        "reason"}`` (Slurm's job id, state and pending reason); None where the backend has no scheduler of its own
        or knows no job of the instance."""
        return None

    def queue_entries(self, instances) -> dict:
        """public_id → :meth:`queue_entry` for many instances; backends with a scheduler read it in one round trip."""
        return {instance.public_id: self.queue_entry(instance) for instance in instances}

    def logs(self, instance, *, tail: int = 200) -> str:
        """The last ``tail`` lines of what the instance's start command wrote (stdout and stderr together)."""
        return ""
