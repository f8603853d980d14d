from django.urls import path

from . import views

app_name = "instances"

urlpatterns = [
    path("chips/", views.chips, name="chips"),
    path("estimator/", views.estimator_page, name="estimator"),
]
