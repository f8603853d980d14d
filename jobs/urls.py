"""Job pages, under /jobs/."""

from django.urls import path

from . import schedule_views, views

app_name = "jobs"

urlpatterns = [
    path("", views.job_list, name="list"),
    path("new/", views.submit, name="submit"),
    path("schedules/", schedule_views.schedule_list, name="schedules"),
    path("schedules/new/", schedule_views.schedule_create, name="schedule-create"),
    path("schedules/<uuid:public_id>/", schedule_views.schedule_detail, name="schedule"),
    path("schedules/<uuid:public_id>/suspend/", schedule_views.schedule_suspend, name="schedule-suspend"),
    path("schedules/<uuid:public_id>/resume/", schedule_views.schedule_resume, name="schedule-resume"),
    path("schedules/<uuid:public_id>/delete/", schedule_views.schedule_delete, name="schedule-delete"),
    path("<str:public_id>/", views.detail, name="detail"),
    path("<str:public_id>/cancel/", views.cancel, name="cancel"),
    path("<str:public_id>/rerun/", views.rerun, name="rerun"),
]
