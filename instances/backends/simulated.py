"""The simulated backend: an in-process data centre for development, demos and tests.

Its state lives in the database (``SimulatedJob``) so the web, worker and beat processes agree on it. Timings are
realistic but configurable (``INSTANCES_SIM_PULL_SECONDS``, ``INSTANCES_SIM_BOOT_SECONDS``; 0 in tests): a job's
phase follows from its timestamps and the clock, so nothing has to run in the background. Access details and
metrics are invented and every page that shows them says "simulated".

Fault injection for tests and demos: :func:`fail_next_submit`, :func:`hang_next_submit`, :func:`crash_node`,
:func:`preempt` and :func:`set_idle`.
"""

import hashlib
import hmac
import math
from datetime import timedelta

from django.conf import settings
from django.db.models import F, Max
from django.utils import timezone

from .. import conf
from ..models import SimulatedFault, SimulatedJob
from .base import Backend, BackendError, BackendStatus, MetricPoint, Phase


def _digest(*parts) -> str:
    message = "|".join(str(p) for p in parts).encode()
    return hmac.new(settings.SECRET_KEY.encode(), message, hashlib.sha256).hexdigest()


def _take_fault(kind: str) -> bool:
    """Consume one injected fault of ``kind``, if any (compare-and-set: concurrent submits take one each)."""
    for fault in SimulatedFault.objects.filter(kind=kind, remaining__gt=0).order_by("pk"):
        if SimulatedFault.objects.filter(pk=fault.pk, remaining__gt=0).update(remaining=F("remaining") - 1):
            return True
    return False


def _phase(job: SimulatedJob, now) -> BackendStatus:
    if job.released_at:
        return BackendStatus(Phase.RELEASED, since=job.released_at)
    if job.crashed_at:
        return BackendStatus(Phase.FAILED, since=job.crashed_at, message="node crashed (simulated)")
    if job.preempted_at:
        # ready_in: seconds of notice window left; at 0 the machine is down and its cards are free again.
        left = max((job.stop_at - now).total_seconds(), 0) if job.stop_at else 0
        return BackendStatus(Phase.PREEMPTED, since=job.preempted_at, ready_in=left)
    if job.stop_at and now >= job.stop_at:
        return BackendStatus(Phase.STOPPED, since=job.stop_at)
    if job.signalled_at:
        return BackendStatus(Phase.STOPPING, since=job.signalled_at, ready_in=(job.stop_at - now).total_seconds())
    if job.ready_at is None:
        return BackendStatus(Phase.BOOTING, since=job.submitted_at)
    if now < job.ready_at:
        return BackendStatus(Phase.BOOTING, since=job.submitted_at, ready_in=(job.ready_at - now).total_seconds())
    return BackendStatus(Phase.RUNNING, since=job.ready_at, access=_access(job))


def _access(job: SimulatedJob) -> dict:
    """A simulated machine has no address, no SSH and no JupyterLab: nothing is made up for a user to try."""
    return {"simulated": True, "node": job.node.name if job.node_id else ""}


SIM_MAX_STEPS = 600  # the quick-start script's length


class SimulatedBackend(Backend):
    name = "simulated"
    simulated = True

    def submit(self, instance) -> str:
        now = timezone.now()
        job = SimulatedJob.objects.filter(instance_id=instance.public_id).first()
        phase = _phase(job, now).phase if job else Phase.ABSENT
        if phase in (Phase.BOOTING, Phase.RUNNING) and job.node_id == instance.node_id:
            return job.job_id  # already submitted: retries and reconcile land here
        if _take_fault(SimulatedFault.Kind.FAIL_SUBMIT):
            raise BackendError("the simulated scheduler refused the job (injected fault)")
        hang = _take_fault(SimulatedFault.Kind.HANG)
        # A node that already has the image skips the pull (a restart on the same node).
        pull = 0 if job and job.node_id == instance.node_id and job.image == instance.image else conf.sim_pull_seconds()
        ready_at = None if hang else now + timedelta(seconds=pull + conf.sim_boot_seconds())
        # Cards reclaimed from spot instances on this node are free once their notice window ends: boot after it.
        reclaimed_until = (
            SimulatedJob.objects.filter(node_id=instance.node_id, preempted_at__isnull=False, stop_at__gt=now)
            .exclude(instance_id=instance.public_id)
            .aggregate(until=Max("stop_at"))["until"]
        )
        if ready_at and reclaimed_until:
            ready_at = max(ready_at, reclaimed_until + timedelta(seconds=conf.sim_boot_seconds()))
        fields = {
            "node_id": instance.node_id,
            "cards": instance.cards,
            "image": instance.image,
            "submitted_at": now,
            "ready_at": ready_at,
            "signalled_at": None,
            "stop_at": None,
            "preempted_at": None,
            "crashed_at": None,
            "released_at": None,
        }
        if job is None:
            job_id = f"sim-{instance.public_id.hex[:12]}"
            job, _created = SimulatedJob.objects.get_or_create(
                instance_id=instance.public_id, defaults={"job_id": job_id, **fields}
            )
            return job.job_id
        SimulatedJob.objects.filter(pk=job.pk).update(**fields)
        return job.job_id

    def stop(self, instance, *, grace_seconds: float) -> None:
        now = timezone.now()
        SimulatedJob.objects.filter(instance_id=instance.public_id, signalled_at__isnull=True).update(
            signalled_at=now, stop_at=now + timedelta(seconds=grace_seconds)
        )

    def preempt(self, instance, *, notice_seconds: float) -> None:
        preempt(instance, notice_seconds=notice_seconds)

    def release(self, instance) -> None:
        # The system disk goes with the machine; data disks are detached first and survive.
        SimulatedJob.objects.filter(instance_id=instance.public_id, released_at__isnull=True).update(
            released_at=timezone.now(), disks=[], mounts=[]
        )

    def status(self, instance) -> BackendStatus:
        return self.status_many([instance])[instance.public_id]

    def status_many(self, instances) -> dict:
        now = timezone.now()
        ids = [i.public_id for i in instances]
        jobs = {j.instance_id: j for j in SimulatedJob.objects.filter(instance_id__in=ids).select_related("node")}
        return {i: (_phase(jobs[i], now) if i in jobs else BackendStatus(Phase.ABSENT)) for i in ids}

    def metrics(self, instance, *, minutes: int = 30) -> list[MetricPoint]:
        job = SimulatedJob.objects.filter(instance_id=instance.public_id).first()
        now = timezone.now()
        if job is None or _phase(job, now).phase != Phase.RUNNING:
            return []
        start = max(job.ready_at, now - timedelta(minutes=minutes)).replace(second=0, microsecond=0)
        points, at = [], start
        while at <= now:
            points.append(_point(job, at))
            at += timedelta(minutes=1)
        return points

    def training_curves(self, instance) -> dict[str, list[tuple[int, float]]]:
        """The quick-start script's curves, as a simulated machine would log them: a step every
        ``INSTANCES_SIM_STEP_SECONDS`` (5) since it became ready, loss falling towards a floor and accuracy rising, with
        deterministic noise. Nothing before the machine ran; the curve stops where the machine stopped."""
        job = SimulatedJob.objects.filter(instance_id=instance.public_id).first()
        if job is None or job.ready_at is None:
            return {}
        now = timezone.now()
        end = min(t for t in (now, job.stop_at, job.crashed_at, job.released_at) if t is not None)
        steps = min(int((end - job.ready_at).total_seconds() // conf.sim_step_seconds()), SIM_MAX_STEPS)
        if steps < 1:
            return {}
        loss, accuracy = [], []
        for step in range(1, steps + 1):
            noise = (int(_digest("scalar", job.job_id, str(step))[:6], 16) / 0xFFFFFF - 0.5) * 0.08
            loss.append((step, round(0.15 + 2.2 * math.exp(-step / 40) + noise, 4)))
            accuracy.append((step, round(min(0.99, 0.97 - 0.85 * math.exp(-step / 35) + noise / 4), 4)))
        return {"accuracy": accuracy, "loss": loss}

    def attach_disk(self, instance, disk_id: str, size_gb: int | None = None, name: str = "") -> None:
        self._add(instance, "disks", disk_id)

    def detach_disk(self, instance, disk_id: str) -> None:
        self._remove(instance, "disks", disk_id)

    def mount(self, instance, source: str, target: str) -> None:
        self._add(instance, "mounts", f"{source}:{target}")

    def unmount(self, instance, target: str) -> None:
        job = SimulatedJob.objects.filter(instance_id=instance.public_id).first()
        if job:
            job.mounts = [m for m in job.mounts if not m.endswith(f":{target}")]
            job.save(update_fields=["mounts"])

    def system_disk_usage(self, instance) -> int:
        """Simulated: a stable figure between 8 GB and the system disk's size, derived from the instance's id."""
        job = SimulatedJob.objects.filter(instance_id=instance.public_id).first()
        if job is not None and job.released_at:
            raise BackendError("the system disk was released with the instance (simulated)")
        disk_gb = max(instance.spec.system_disk_gb, 9)
        used_gb = 8 + int(_digest("disk", instance.public_id)[:6], 16) % (min(disk_gb, 64) - 8)
        return used_gb * 10**9 + int(_digest("bytes", instance.public_id)[:6], 16)

    def snapshot_system_disk(self, instance) -> int:
        """Simulated: nothing is copied; the snapshot has the size :meth:`system_disk_usage` showed."""
        return self.system_disk_usage(instance)

    def _add(self, instance, field, value):
        job = SimulatedJob.objects.filter(instance_id=instance.public_id).first()
        if job is None:
            raise BackendError("no such simulated machine")
        if value not in getattr(job, field):
            setattr(job, field, [*getattr(job, field), value])
            job.save(update_fields=[field])

    def _remove(self, instance, field, value):
        job = SimulatedJob.objects.filter(instance_id=instance.public_id).first()
        if job and value in getattr(job, field):
            setattr(job, field, [v for v in getattr(job, field) if v != value])
            job.save(update_fields=[field])


def _point(job: SimulatedJob, at) -> MetricPoint:
    if job.idle:
        util = int(_digest("u", job.job_id, at.isoformat())[:2], 16) % 3
    else:
        minute = at.timestamp() / 60
        noise = int(_digest("u", job.job_id, at.isoformat())[:2], 16) / 255 * 10
        util = 60 + 25 * math.sin(minute / 7) + noise
    memory = 30 + (util * 0.6 if not job.idle else 2)
    return MetricPoint(at=at, card_utilisation=round(min(util, 100), 1), memory_used=round(min(memory, 100), 1))


# Fault injection ---------------------------------------------------------------------------------------------


def fail_next_submit(times: int = 1) -> None:
    SimulatedFault.objects.create(kind=SimulatedFault.Kind.FAIL_SUBMIT, remaining=times)


def hang_next_submit(times: int = 1) -> None:
    SimulatedFault.objects.create(kind=SimulatedFault.Kind.HANG, remaining=times)


def crash_node(node) -> int:
    """Every machine on ``node`` dies now; returns how many."""
    return SimulatedJob.objects.filter(node=node, released_at__isnull=True, crashed_at__isnull=True).update(
        crashed_at=timezone.now()
    )


def preempt(instance, *, notice_seconds: float | None = None) -> None:
    """Reclaim a spot instance: the checkpoint signal now, the machine stops after the notice window."""
    now = timezone.now()
    notice = conf.spot_notice_seconds() if notice_seconds is None else notice_seconds
    SimulatedJob.objects.filter(instance_id=instance.public_id, preempted_at__isnull=True).update(
        preempted_at=now, signalled_at=now, stop_at=now + timedelta(seconds=notice)
    )


def set_idle(instance, idle: bool = True) -> None:
    SimulatedJob.objects.filter(instance_id=instance.public_id).update(idle=idle)
