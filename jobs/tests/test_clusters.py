"""The rules of a job on a cluster's scheduler that need no cluster: its time limit and when its end waits for the
cluster's word."""

from datetime import timedelta

from django.utils import timezone

from jobs.clusters import time_limit_minutes, undecided
from jobs.exits import Exit
from jobs.models import Job


def test_the_clusters_time_limit_is_the_timeout_in_whole_minutes_never_shorter():
    assert [time_limit_minutes(Job(timeout_seconds=s)) for s in (60, 61, 3600, 5400)] == [1, 2, 60, 90]


def test_a_sigterm_exit_waits_for_the_clusters_final_state_a_few_minutes_at_most():
    running = Job(cluster_job={"job_id": "7", "state": "RUNNING", "reason": "None"})
    now = timezone.now()
    assert undecided(running, Exit(143, now))  # time limit, preemption or cancel: the cluster will say
    assert not undecided(running, Exit(143, now - timedelta(minutes=6)))  # Slurm has forgotten it by now
    assert not undecided(running, Exit(3, now))  # the command's own status
    assert not undecided(Job(cluster_job={"job_id": "7", "state": "TIMEOUT"}), Exit(143, now))
    assert not undecided(Job(), Exit(143, now))  # not on a cluster: the agent's word is all there is
