from django.urls import path

from . import real_name, ssh_keys, student, verification, views
from .routers import Router

router = Router()
router.register("tokens", views.ApiTokenViewSet, basename="api-token")
router.register("ssh-keys", ssh_keys.SSHKeyViewSet, basename="api-ssh-key")

urlpatterns = [
    path("me", views.MeView.as_view(), name="api-me"),
    path("real-name", real_name.RealNameView.as_view(), name="api-real-name"),
    path("student", student.StudentView.as_view(), name="api-student"),
    path("student/confirm", student.StudentConfirmView.as_view(), name="api-student-confirm"),
    path(
        "enterprise-verification", verification.EnterpriseVerificationView.as_view(), name="api-enterprise-verification"
    ),
    *router.urls,
]
