"""On PostgreSQL: placement passes that overlap start a waiting launch once, and a cancel that races a pass either
wins (nothing starts) or loses with a 409 (the machine it became is kept and recorded)."""

import threading

import pytest
from django.db import connection

from catalog.models import Node
from instances import launching, waiting
from instances import lifecycle as machines
from instances.models import Instance, WaitingLaunch
from instances.tests.fixtures import settle
from jobs import running

from .helpers import fresh

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _waiting_for_the_one_card(owner) -> WaitingLaunch:
    Node.objects.filter(chip__slug="dcu-z100").exclude(name="xc-dcu-01").update(drained=True)
    Node.objects.filter(name="xc-dcu-01").update(cards=1, cards_reserved=0)
    request = launching.LaunchRequest(name="notebook", image="pytorch-2.2-dtk24", chip="dcu-z100")
    holder = launching.launch(owner, launching.LaunchRequest(name="holder", image="pytorch-2.2-dtk24", chip="dcu-z100"))
    entry = waiting.launch_or_wait(owner, request, wait=True)
    machines.release(fresh(holder))
    settle()  # the holder's card is free again
    return entry


def _at_once(*targets) -> list:
    barrier = threading.Barrier(len(targets))
    results, errors = [], []

    def run(target):
        try:
            barrier.wait()
            results.append(target())
        except Exception as exc:  # noqa: BLE001 (the test reads what each thread came to)
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(t,)) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results + errors


def test_eight_overlapping_passes_start_a_waiting_launch_once(owner, lifecycle):
    entry = _waiting_for_the_one_card(owner)
    outcomes = _at_once(*[running.place_queued] * 8)
    assert sorted(outcomes) == [0] * 7 + [1]  # no pass failed, one started it
    assert Instance.objects.filter(name="notebook").count() == 1
    assert fresh(entry).state == WaitingLaunch.State.STARTED
    assert fresh(entry).instance == Instance.objects.get(name="notebook")


def test_a_cancel_racing_a_pass_either_wins_or_is_told_it_started(owner, lifecycle):
    entry = _waiting_for_the_one_card(owner)
    outcomes = _at_once(running.place_queued, lambda: waiting.cancel(fresh(entry)))
    entry = fresh(entry)
    started = Instance.objects.filter(name="notebook")
    if entry.state == WaitingLaunch.State.LEFT:
        assert not started.exists()
    else:
        assert entry.state == WaitingLaunch.State.STARTED and started.count() == 1 and entry.instance == started.get()
        assert any(getattr(o, "code", "") == "invalid_transition" for o in outcomes)
