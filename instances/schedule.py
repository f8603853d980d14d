"""Beat entries of the instances app; config/settings.py merges them into CELERY_BEAT_SCHEDULE.

Kept free of Django imports so the settings module can import it.
"""

import os

BEAT_SCHEDULE = {
    # Compare wanted and actual state of every live instance and repair drift (lost tasks, dead workers).
    "instances-reconcile": {
        "task": "instances.tasks.reconcile",
        "schedule": float(os.environ.get("INSTANCES_RECONCILE_SECONDS", "15")),
    },
    # Auto-shutdown, prepaid terms that end, the release countdown and its reminders.
    "instances-housekeeping": {"task": "instances.tasks.housekeeping", "schedule": 60.0},
}
