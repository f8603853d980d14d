from django.urls import re_path

from . import images, views

REPO = r"(?P<org>[^/]+)/(?P<name>[^/]+?)"

urlpatterns = [
    re_path(r"^hub/?$", views.HubListView.as_view(), name="api-hub"),
    re_path(rf"^hub/{REPO}/like/?$", views.HubLikeView.as_view(), name="api-hub-like"),
    re_path(rf"^hub/{REPO}/?$", views.HubItemView.as_view(), name="api-hub-item"),
    # The image marketplace: {key} is an image's id or slug.
    re_path(r"^images/?$", images.ImageListView.as_view(), name="api-images"),
    re_path(r"^images/import/?$", images.ImageImportView.as_view(), name="api-images-import"),
    re_path(r"^images/import-archive/?$", images.ImageArchiveImportView.as_view(), name="api-images-import-archive"),
    re_path(r"^images/(?P<key>[^/]+)/clone/?$", images.ImageCloneView.as_view(), name="api-image-clone"),
    re_path(r"^images/(?P<key>[^/]+)/publish/?$", images.ImagePublishView.as_view(), name="api-image-publish"),
    re_path(r"^images/(?P<key>[^/]+)/ratings/?$", images.ImageRatingView.as_view(), name="api-image-ratings"),
    re_path(r"^images/(?P<key>[^/]+)/review/?$", images.ImageReviewView.as_view(), name="api-image-review"),
    re_path(r"^images/(?P<key>[^/]+)/?$", images.ImageDetailView.as_view(), name="api-image"),
]
