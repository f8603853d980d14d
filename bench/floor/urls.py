from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.urls import path

ROWS = [
    {"name": f"instance-{i}", "chip": "Ascend 910B", "status": "running", "price": f"¥{i % 7 + 1}.50"}
    for i in range(2000)
]
ROW_BYTES, FRAME_BYTES = 148, 200  # one row of floor.html as rendered, and the page around the rows
DEFAULT_ROWS = 60  # about 9 KB


def page(request):
    """The list page; ``?bytes=N`` makes it about N bytes long (more rows), to stand beside a page of that size."""
    try:
        wanted = int(request.GET.get("bytes", "0"))
    except ValueError:
        wanted = 0
    count = min(len(ROWS), max(DEFAULT_ROWS, (wanted - FRAME_BYTES) // ROW_BYTES))
    return render(request, "floor.html", {"rows": ROWS[:count], "title": "Floor"})


# The same page behind a login: what any logged-in page pays before its own work (the session and the user read).
urlpatterns = [path("", page), path("in/", login_required(page))]
