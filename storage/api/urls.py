from django.urls import re_path

from accounts.api.routers import Router

from . import disks, views

router = Router()
router.register("storage/entries", views.EntryViewSet, basename="api-storage-entry")
router.register("disks", disks.DiskViewSet, basename="api-disk")

UUID = r"(?P<public_id>[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"

urlpatterns = [
    re_path(r"^storage/folders/?$", views.FolderView.as_view(), name="api-storage-folders"),
    re_path(r"^storage/usage/?$", views.UsageView.as_view(), name="api-storage-usage"),
    re_path(r"^storage/uploads/?$", views.UploadCollectionView.as_view(), name="api-storage-uploads"),
    re_path(rf"^storage/uploads/{UUID}/?$", views.UploadView.as_view(), name="api-storage-upload"),
    re_path(r"^instances/(?P<id>[^/]+)/mounts/?$", disks.InstanceMountsView.as_view(), name="api-instance-mounts"),
    re_path(
        r"^instances/(?P<id>[^/]+)/mounts/(?P<org>[^/]+)/(?P<name>[^/]+?)/?$",
        disks.InstanceMountView.as_view(),
        name="api-instance-mount",
    ),
    *router.urls,
]
