from accounts.api.routers import Router

from . import views

router = Router()
# The channels first: "notifications/channels" must not be read as a notification's id.
router.register("notifications/channels", views.ChannelViewSet, basename="api-notification-channel")
router.register("notifications", views.NotificationViewSet, basename="api-notification")

urlpatterns = router.urls
