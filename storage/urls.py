from django.urls import path

from . import views

app_name = "storage"

urlpatterns = [
    path("storage/", views.index, name="index"),
    path("storage/folders/<uuid:public_id>/", views.folder, name="folder"),
    path("storage/folders/new/", views.create_folder, name="create-folder"),
    path("storage/entries/<uuid:public_id>/rename/", views.rename, name="rename"),
    path("storage/entries/<uuid:public_id>/move/", views.move, name="move"),
    path("storage/entries/<uuid:public_id>/delete/", views.delete, name="delete"),
    path("storage/entries/<uuid:public_id>/download/", views.download, name="download"),
]
