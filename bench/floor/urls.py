from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.urls import path

ROWS = [
    {"name": f"instance-{i}", "chip": "Ascend 910B", "status": "running", "price": f"¥{i % 7 + 1}.50"}
    for i in range(60)
]


def page(request):
    return render(request, "floor.html", {"rows": ROWS, "title": "Floor"})


# The same page behind a login: what any logged-in page pays before its own work (the session and the user read).
urlpatterns = [path("", page), path("in/", login_required(page))]
