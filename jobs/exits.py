"""How a job sees that its command ended, on each backend.

The agent's ``exited`` report (``AgentReport``) says the workload ended, with its status when the report carries
one (the simulated data centre's does). The local backend's machine outlives its start command (JupyterLab stays
up), so there the status is the line the machine's init writes to the instance's log when the start command ends
(``instances.backends.local.INIT_SCRIPT``). Either way the answer is the command's exit status, or ``UNKNOWN``
when it ended without one.
"""

import re
from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from instances import logs
from instances.backends import BackendError, get_backend
from instances.models import AgentReport, Instance

EXIT_LINE = re.compile(r"^== start command exited with status (\d+) ==$")
# How far back in the log the exit line is looked for: it is the machine's last word, but processes the command
# left in the background may still write after it.
EXIT_LINE_TAIL = 50


@dataclass(frozen=True)
class Exit:
    code: int | None  # None: it ended, status unknown
    at: datetime | None = None  # when, where the machine said so (its agent's report)


def workload_exit(instance: Instance) -> Exit | None:
    """The end of ``instance``'s start command, or None while it runs (or nothing can tell yet)."""
    report = (
        AgentReport.objects.filter(instance=instance, job_id=instance.backend_job_id, event=AgentReport.Event.EXITED)
        .order_by("-at", "-id")
        .first()
    )
    if report is not None:
        code = report.data.get("exit_code")
        return Exit(code if isinstance(code, int) else None, report.at)
    if get_backend(instance.backend_name).simulated:
        return None
    try:
        lines = get_backend(instance.backend_name).logs(instance, tail=EXIT_LINE_TAIL)
    except BackendError:
        return None
    for line in reversed(logs.as_lines(lines, EXIT_LINE_TAIL)):
        found = EXIT_LINE.match(line.strip())
        if found:
            return Exit(int(found.group(1)))
    return None


def report_exit(instance: Instance, code: int | None) -> AgentReport:
    """Record that the workload of ``instance`` ended with ``code``: what an agent's ``exited`` report with a status
    says (the simulated data centre has no agent, so its demos and tests say it here)."""

    return AgentReport.objects.create(
        instance=instance,
        job_id=instance.backend_job_id,
        event=AgentReport.Event.EXITED,
        at=timezone.now(),
        source="host",
        card_utilisation=0.0,
        memory_used=0.0,
        data={"exit_code": code},
    )
