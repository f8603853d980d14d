"""What instance agents report (the Slurm backend's jobs): heartbeats, card metrics, checkpoint markers and where
the job's JupyterLab answers.

An agent authenticates with its instance's own token (``backends.slurm.agent_token``), never with a user's API
token or session. A report for a missing instance, a released one or with the wrong token is the same 404, so a
token for one instance tells nothing about another.
"""

import uuid
from datetime import timedelta

from django.db.models import F, Window
from django.db.models.functions import RowNumber
from django.utils import timezone
from django.utils.translation import gettext as _

from core.errors import NotFound

from .backends.base import MetricPoint
from .backends.slurm import check_agent_token
from .choices import Status
from .models import AgentReport, Instance, TrainingScalar


def authenticate(public_id, token: str) -> Instance:
    """The instance ``token`` belongs to, or NotFound."""
    try:
        key = uuid.UUID(str(public_id))
    except ValueError:
        key = None
    instance = None
    if key is not None and check_agent_token(key, token):
        instance = Instance.objects.filter(public_id=key).exclude(status=Status.RELEASED).first()
    if instance is None:
        raise NotFound(_("No such instance."))
    return instance


# Reports older than this are dropped as new ones arrive: the page charts the last 30 minutes.
KEEP = timedelta(days=1)


def record(instance: Instance, report: dict) -> AgentReport:
    """Store one report; the instance counts as healthy once its current job's agent has reported."""
    metrics = report.get("metrics") or {}
    now = timezone.now()
    AgentReport.objects.filter(instance=instance, at__lt=now - KEEP).delete()
    return AgentReport.objects.create(
        instance=instance,
        job_id=str(report.get("job_id", ""))[:64],
        event=report["event"],
        at=now,
        source=metrics.get("source", "")[:16],
        card_utilisation=metrics.get("card_utilisation", 0.0),
        memory_used=metrics.get("memory_used", 0.0),
        data={
            "restart_count": report.get("restart_count", 0),
            "cards": report.get("cards", []),
            "per_card": metrics.get("cards", []),
            "checkpoint": report.get("checkpoint"),
            "jupyter": report.get("jupyter"),  # {"url": …} while the job's JupyterLab answers
            **_exit_code(report),
        },
    )


def _exit_code(report: dict) -> dict:
    """An ``exited`` report's workload status, stored as the jobs read it (``data["exit_code"]``); nothing when the
    agent did not say."""
    code = report.get("exit_code")
    return {"exit_code": code} if report["event"] == "exited" and code is not None else {}


MAX_POINTS_PER_TAG = 2000


def record_scalars(instance: Instance, scalars: list[dict]) -> None:
    """Store the training scalars of a report; a step sent twice (a retried report) is kept once."""
    if not scalars:
        return
    now = timezone.now()
    rows = [
        TrainingScalar(instance=instance, tag=s["tag"], step=s["step"], value=s["value"], at=s.get("time") or now)
        for s in scalars
    ]
    TrainingScalar.objects.bulk_create(rows, ignore_conflicts=True)


def training_curves(instance: Instance) -> dict[str, list[tuple[int, float]]]:
    """tag → [(step, value)], oldest first, the last ``MAX_POINTS_PER_TAG`` points of each tag, tags sorted. One
    query, capped in the database (a row number per tag, newest step first), so a long run costs the page poll no
    more than a short one."""
    newest_first = Window(RowNumber(), partition_by=[F("tag")], order_by=F("step").desc())
    rows = (
        TrainingScalar.objects.filter(instance=instance)
        .annotate(newest=newest_first)
        .filter(newest__lte=MAX_POINTS_PER_TAG)
        .order_by("tag", "step")
        .values_list("tag", "step", "value")
    )
    curves: dict[str, list[tuple[int, float]]] = {}
    for tag, step, value in rows:
        curves.setdefault(tag, []).append((step, value))
    return curves


def latest(instance: Instance) -> AgentReport | None:
    return AgentReport.objects.filter(instance=instance).order_by("-at", "-id").first()


def metric_points(instance: Instance, *, minutes: int = 30) -> list:
    """The card utilisation and memory the agent reported, one point per minute (the minute's last report)."""
    since = timezone.now() - timedelta(minutes=minutes)
    rows = AgentReport.objects.filter(instance__public_id=instance.public_id, at__gte=since).order_by("at")
    points: dict = {}
    for row in rows.only("at", "card_utilisation", "memory_used"):
        points[row.at.replace(second=0, microsecond=0)] = row
    return [
        MetricPoint(at=at, card_utilisation=row.card_utilisation, memory_used=row.memory_used)
        for at, row in points.items()
    ]
