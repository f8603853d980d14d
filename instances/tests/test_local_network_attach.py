"""Bringing a local machine's outbound interface up, without a sandbox: a machine that ended before its sandbox
appeared is not waited for."""

import uuid

import pytest

from instances.backends import local, local_network


def test_a_machine_that_ended_before_its_sandbox_appeared_is_not_waited_for(monkeypatch):
    # The agent's pid is gone (bwrap refused the machine at once): no process inside will ever appear.
    monkeypatch.setattr(local, "read_state", lambda public_id: {"pid": 2**22 + 1, "started": "0"})
    monkeypatch.setattr(local.time, "sleep", lambda seconds: pytest.fail("waited for a machine that had ended"))
    attached = []
    monkeypatch.setattr(local_network, "attach", lambda *args: attached.append(args))
    local.LocalBackend()._connect(uuid.uuid4(), "local-test")
    assert attached == []
