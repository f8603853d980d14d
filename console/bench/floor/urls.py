from django.shortcuts import render
from django.urls import path

ROWS = [{"name": f"instance-{i}", "chip": "Ascend 910B", "status": "running", "price": f"¥{i % 7 + 1}.50"}
        for i in range(60)]  # fmt: skip


def page(request):
    return render(request, "floor.html", {"rows": ROWS, "title": "Floor"})


urlpatterns = [path("", page)]
