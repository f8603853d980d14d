from django.urls import re_path
from rest_framework.routers import SimpleRouter

from . import views
from .agent import AgentReportView
from .daily_power import InstanceDailyPowerView
from .instances import InstanceViewSet
from .secrets import SecretViewSet
from .ssh import InstanceSSHView
from .waiting import WaitingLaunchListView, WaitingLaunchView

router = SimpleRouter()
# DRF's constructor takes only True/False; the attribute accepts a pattern, so both /chips and /chips/ work.
router.trailing_slash = "/?"
router.register("chips", views.ChipViewSet, basename="api-chip")
router.register("zones", views.ZoneViewSet, basename="api-zone")
router.register("specs", views.InstanceSpecViewSet, basename="api-spec")
router.register("instances", InstanceViewSet, basename="api-instance")
router.register("secrets", SecretViewSet, basename="api-secret")

urlpatterns = [
    re_path(r"^estimate/training/?$", views.TrainingEstimateView.as_view(), name="api-estimate-training"),
    re_path(r"^agent/instances/(?P<id>[^/]+)/reports/?$", AgentReportView.as_view(), name="api-agent-reports"),
    re_path(r"^instances/waiting/?$", WaitingLaunchListView.as_view(), name="api-instance-waiting-list"),
    re_path(r"^instances/waiting/(?P<id>[^/]+)/?$", WaitingLaunchView.as_view(), name="api-instance-waiting"),
    re_path(r"^instances/(?P<id>[^/]+)/ssh/?$", InstanceSSHView.as_view(), name="api-instance-ssh"),
    re_path(
        r"^instances/(?P<id>[^/]+)/daily-power/?$", InstanceDailyPowerView.as_view(), name="api-instance-daily-power"
    ),
    *router.urls,
]
