"""Cloud storage and cloud disks, under /storage/, with the instance page's disks-and-mounts panel's actions."""

from django.urls import path

from .views import disks, files

app_name = "storage"

urlpatterns = [
    path("", files.index, name="index"),
    path("folders/<uuid:public_id>/", files.folder, name="folder"),
    path("folders/new/", files.create_folder, name="create-folder"),
    path("entries/<uuid:public_id>/rename/", files.rename, name="rename"),
    path("entries/<uuid:public_id>/move/", files.move, name="move"),
    path("entries/<uuid:public_id>/delete/", files.delete, name="delete"),
    path("entries/<uuid:public_id>/download/", files.download, name="download"),
    path("disks/", disks.disk_list, name="disks"),
    path("disks/new/", disks.disk_create, name="disk-create"),
    path("disks/<uuid:public_id>/grow/", disks.disk_grow, name="disk-grow"),
    path("disks/<uuid:public_id>/attach/", disks.disk_attach, name="disk-attach"),
    path("disks/<uuid:public_id>/detach/", disks.disk_detach, name="disk-detach"),
    path("disks/<uuid:public_id>/delete/", disks.disk_delete, name="disk-delete"),
    # The instance page's disks-and-mounts panel: storage's operations on an instance, so under storage's prefix.
    path("instances/<uuid:public_id>/attachments/", disks.instance_panel, name="instance-panel"),
    path("instances/<uuid:public_id>/mounts/add/", disks.instance_mount, name="instance-mount"),
    path("instances/<uuid:public_id>/mounts/remove/", disks.instance_unmount, name="instance-unmount"),
    path("instances/<uuid:public_id>/disks/attach/", disks.instance_attach, name="instance-attach"),
    path("instances/<uuid:public_id>/disks/detach/", disks.instance_detach, name="instance-detach"),
]
