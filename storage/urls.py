from django.urls import path

from . import disk_views, views

app_name = "storage"

urlpatterns = [
    path("storage/", views.index, name="index"),
    path("storage/folders/<uuid:public_id>/", views.folder, name="folder"),
    path("storage/folders/new/", views.create_folder, name="create-folder"),
    path("storage/entries/<uuid:public_id>/rename/", views.rename, name="rename"),
    path("storage/entries/<uuid:public_id>/move/", views.move, name="move"),
    path("storage/entries/<uuid:public_id>/delete/", views.delete, name="delete"),
    path("storage/entries/<uuid:public_id>/download/", views.download, name="download"),
    path("storage/disks/", disk_views.disk_list, name="disks"),
    path("storage/disks/new/", disk_views.disk_create, name="disk-create"),
    path("storage/disks/<uuid:public_id>/grow/", disk_views.disk_grow, name="disk-grow"),
    path("storage/disks/<uuid:public_id>/attach/", disk_views.disk_attach, name="disk-attach"),
    path("storage/disks/<uuid:public_id>/detach/", disk_views.disk_detach, name="disk-detach"),
    path("storage/disks/<uuid:public_id>/delete/", disk_views.disk_delete, name="disk-delete"),
    # The instance page's disks-and-mounts panel (instances/<id>/ itself belongs to the instances app).
    path("instances/<uuid:public_id>/mounts/add/", disk_views.instance_mount, name="instance-mount"),
    path("instances/<uuid:public_id>/mounts/remove/", disk_views.instance_unmount, name="instance-unmount"),
    path("instances/<uuid:public_id>/disks/attach/", disk_views.instance_attach, name="instance-attach"),
    path("instances/<uuid:public_id>/disks/detach/", disk_views.instance_detach, name="instance-detach"),
]
