"""The embedded broker publishes whole messages only."""

import os

from kombu import Connection

from config.broker import AtomicTransport, filesystem_transport_options


def test_a_message_appears_in_the_queue_folder_only_once_it_is_complete(tmp_path, monkeypatch):
    options = filesystem_transport_options(tmp_path)
    queue_dir = options["data_folder_in"]
    seen_before_rename = []
    real_replace = os.replace

    def replace(src, dst):
        # Just before the rename, a consumer listing the folder must not find a message for the queue.
        seen_before_rename.append([name for name in os.listdir(queue_dir) if name.endswith(".celery.msg")])
        with open(src, "rb") as partial:
            assert partial.read().startswith(b"{")  # the whole payload is written before it is published
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with Connection("filesystem://", transport_options=options) as conn:
        assert isinstance(conn.transport, AtomicTransport)
        channel = conn.default_channel
        channel._put("celery", {"task": "probe", "n": 1})
        assert channel._get("celery") == {"task": "probe", "n": 1}
    assert seen_before_rename == [[]]
    assert not [name for name in os.listdir(queue_dir) if name.endswith(".partial")]
