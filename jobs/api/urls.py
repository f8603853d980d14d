from rest_framework.routers import SimpleRouter

from .schedules import ScheduleViewSet
from .views import JobViewSet

router = SimpleRouter()
router.trailing_slash = "/?"
# Before the jobs, whose detail route would take "schedules" for a job's id.
router.register("jobs/schedules", ScheduleViewSet, basename="api-job-schedule")
router.register("jobs", JobViewSet, basename="api-job")

urlpatterns = router.urls
