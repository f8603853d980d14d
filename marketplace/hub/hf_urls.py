"""The Hugging Face Hub API's addresses at the console's root (see ``hfapi``)."""

from django.urls import re_path

from . import hfapi

PART = r"[A-Za-z0-9](?:[A-Za-z0-9._-]{0,98}[A-Za-z0-9])?"
REPO = rf"(?P<repo>{PART}/{PART})"
KIND = r"(?P<kind>models|datasets)"
REV = r"(?P<revision>[^/]+)"

urlpatterns = [
    re_path(r"^api/whoami-v2/?$", hfapi.whoami, name="hub-api-whoami"),
    re_path(r"^api/repos/create/?$", hfapi.create_repo, name="hub-api-create"),
    re_path(r"^api/repos/delete/?$", hfapi.delete_repo, name="hub-api-delete"),
    re_path(rf"^api/{KIND}/?$", hfapi.list_repos, name="hub-api-list"),
    re_path(rf"^api/{KIND}/{REPO}/settings/?$", hfapi.repo_settings, name="hub-api-settings"),
    re_path(r"^api/validate-yaml/?$", hfapi.validate_yaml, name="hub-api-validate-yaml"),
    re_path(rf"^api/{KIND}/{REPO}/?$", hfapi.repo_info, name="hub-api-info"),
    re_path(rf"^api/{KIND}/{REPO}/revision/{REV}/?$", hfapi.repo_info, name="hub-api-revision"),
    re_path(rf"^api/{KIND}/{REPO}/tree/{REV}(?:/(?P<path>.*))?$", hfapi.repo_tree, name="hub-api-tree"),
    re_path(rf"^api/{KIND}/{REPO}/preupload/{REV}/?$", hfapi.preupload, name="hub-api-preupload"),
    re_path(rf"^api/{KIND}/{REPO}/commit/{REV}/?$", hfapi.commit, name="hub-api-commit"),
    re_path(rf"^api/{KIND}/{REPO}/xet-write-token/{REV}/?$", hfapi.xet_write_token, name="hub-xet-write-token"),
    # The Xet CAS that token names (marketplace.hub.xet).
    re_path(r"^hub-xet/$", hfapi.xet_not_offered, name="hub-xet-root"),
    re_path(r"^hub-xet/v1/xorbs/(?P<prefix>[a-z-]+)/(?P<xorb>[0-9a-f]{64})$", hfapi.xet_xorb, name="hub-xet-xorb"),
    re_path(r"^hub-xet/v1/shards/?$", hfapi.xet_shard, name="hub-xet-shard"),
    re_path(
        r"^hub-xet/v1/(?:chunks|xorb-grants|xorb-commits|reconstructions)/",
        hfapi.xet_not_offered,
        name="hub-xet-not-offered",
    ),
    re_path(rf"^(?P<prefix>datasets/)?{REPO}\.git/info/lfs/objects/batch$", hfapi.lfs_batch, name="hub-lfs-batch"),
    re_path(r"^hub-lfs/(?P<oid>[0-9a-f]{64})$", hfapi.lfs_upload, name="hub-lfs-upload"),
    re_path(r"^hub-lfs/(?P<oid>[0-9a-f]{64})/verify$", hfapi.lfs_verify, name="hub-lfs-verify"),
    re_path(
        rf"^datasets/{REPO}/resolve/{REV}/(?P<path>.+)$",
        hfapi.resolve,
        {"kind": "datasets"},
        name="hub-resolve-dataset",
    ),
    re_path(rf"^{REPO}/resolve/{REV}/(?P<path>.+)$", hfapi.resolve, name="hub-resolve"),
    # A repository's address as the Hub gives it (``create_repo`` returns it): its page in the marketplace.
    re_path(rf"^(?P<prefix>datasets/)?{REPO}/?$", hfapi.repo_page, name="hub-repo-page"),
]
