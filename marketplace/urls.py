"""Marketplace pages, under /marketplace/: the image marketplace, and the model and dataset hub under hub/."""

from django.urls import path

from . import views
from .images import views as images

app_name = "marketplace"

urlpatterns = [
    # The image marketplace
    path("", images.image_list, name="list"),
    path("mine/", images.my_images, name="my-images"),
    path("earnings/", images.earnings, name="earnings"),
    path("review/", images.review_queue, name="review"),
    path("review/<str:slug>/", images.review_decide, name="review-decide"),
    path("save/<str:instance_id>/", images.save_instance, name="save-instance"),
    path("import/", images.import_image, name="import-image"),
    path("images/<str:slug>/", images.image_detail, name="image"),
    path("images/<str:slug>/clone/", images.image_clone, name="image-clone"),
    path("images/<str:slug>/publish/", images.image_publish, name="image-publish"),
    path("images/<str:slug>/rate/", images.image_rate, name="image-rate"),
    path("images/<str:slug>/family/", images.image_family, name="image-family"),
    # The hub
    path("hub/", views.hub_list, name="hub"),
    # The mount pickers (instance panel, launch wizard) search the hub here.
    path("hub/search/", views.hub_mount_search, name="hub-mount-search"),
    path("hub/new/", views.hub_new, name="hub-new"),
    path("hub/<str:org>/<str:name>", views.hub_detail, name="hub-item"),
    path("hub/<str:org>/<str:name>/upload", views.hub_upload, name="hub-upload"),
    path("hub/<str:org>/<str:name>/card", views.hub_card, name="hub-card"),
    path("hub/<str:org>/<str:name>/from-storage", views.hub_from_storage, name="hub-from-storage"),
    path("hub/<str:org>/<str:name>/like", views.hub_like, name="hub-like"),
    path("hub/<str:org>/<str:name>/visibility", views.hub_visibility, name="hub-visibility"),
]
