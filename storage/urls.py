"""Cloud storage and cloud disks, under /storage/, with the instance page's disks-and-mounts panel's actions."""

from django.urls import path

from . import disk_views, views

app_name = "storage"

urlpatterns = [
    path("", views.index, name="index"),
    path("folders/<uuid:public_id>/", views.folder, name="folder"),
    path("folders/new/", views.create_folder, name="create-folder"),
    path("entries/<uuid:public_id>/rename/", views.rename, name="rename"),
    path("entries/<uuid:public_id>/move/", views.move, name="move"),
    path("entries/<uuid:public_id>/delete/", views.delete, name="delete"),
    path("entries/<uuid:public_id>/download/", views.download, name="download"),
    path("disks/", disk_views.disk_list, name="disks"),
    path("disks/new/", disk_views.disk_create, name="disk-create"),
    path("disks/<uuid:public_id>/grow/", disk_views.disk_grow, name="disk-grow"),
    path("disks/<uuid:public_id>/attach/", disk_views.disk_attach, name="disk-attach"),
    path("disks/<uuid:public_id>/detach/", disk_views.disk_detach, name="disk-detach"),
    path("disks/<uuid:public_id>/delete/", disk_views.disk_delete, name="disk-delete"),
    # The instance page's disks-and-mounts panel: storage's operations on an instance, so under storage's prefix.
    path("instances/<uuid:public_id>/mounts/add/", disk_views.instance_mount, name="instance-mount"),
    path("instances/<uuid:public_id>/mounts/remove/", disk_views.instance_unmount, name="instance-unmount"),
    path("instances/<uuid:public_id>/disks/attach/", disk_views.instance_attach, name="instance-attach"),
    path("instances/<uuid:public_id>/disks/detach/", disk_views.instance_detach, name="instance-detach"),
]
