"""Reading a job back as the tests see it: fresh from the database."""

from jobs.models import Job


def fresh(job: Job) -> Job:
    return Job.objects.select_related("instance", "chip").get(pk=job.pk)
