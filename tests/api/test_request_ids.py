"""Request ids: 80 random bits each, cut from one read of the kernel's generator, never repeated."""

from __future__ import annotations

import os
import re

from gateway.api.request_ids import IDS_PER_READ, new_request_id

ID = re.compile(r"req-[0-9a-f]{20}")


def test_ids_are_unique_across_reads_and_shaped_as_before() -> None:
    ids = [new_request_id() for _ in range(3 * IDS_PER_READ + 7)]  # past several reads' ends
    assert len(set(ids)) == len(ids)
    assert all(ID.fullmatch(i) for i in ids), ids[:3]


def test_a_forked_child_never_hands_out_its_parents_ids() -> None:
    """A child that kept the parent's unread bytes would name its requests as the parent names its next ones."""
    new_request_id()  # the parent holds unread bytes
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its ids, then gone
        os.close(read)
        os.write(write, " ".join(new_request_id() for _ in range(8)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = set(pipe.read().split())
    os.waitpid(pid, 0)
    parent = {new_request_id() for _ in range(8)}
    assert len(child) == 8 and not child & parent
