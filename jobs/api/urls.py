from rest_framework.routers import SimpleRouter

from .views import JobViewSet

router = SimpleRouter()
router.trailing_slash = "/?"
router.register("jobs", JobViewSet, basename="api-job")

urlpatterns = router.urls
