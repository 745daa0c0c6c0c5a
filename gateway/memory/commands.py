"""What ``ventana memory list`` and ``ventana memory forget`` do; ``cli.py`` only parses.

An owner is named as the gateway stores it: ``--caller C`` is the short hash of a caller's
key (``ventana logs`` shows it), ``--user U`` the requests' ``user`` field. A user only
exists inside its caller, so ``--user U --caller C`` names one owner and ``--user U`` alone
names that user under every caller.
"""

from __future__ import annotations

import orjson
from rich.console import Console
from rich.table import Table

from gateway.config import Settings
from gateway.memory.archive import archived_count
from gateway.memory.profile import ANY_CALLER, forget, list_facts
from gateway.store.commands import reading


def owner_name(user: str | None, caller: str | None) -> str | None:
    """The stored owner for ``--user``/``--caller``; None when neither is given."""
    if user and caller:
        return f"caller:{caller}/user:{user}"
    if user:
        return ANY_CALLER + "user:" + user
    return "caller:" + caller if caller else None


def run_memory_list(settings: Settings, console: Console, *, owner: str | None, as_json: bool) -> None:
    """Print the stored facts (of one owner, or everyone's) and how many passages are archived."""
    with reading(settings) as engine:
        facts = list_facts(engine, owner)
        passages = archived_count(engine, owner=owner)
    if as_json:
        console.print_json(orjson.dumps({"facts": [f.to_dict() for f in facts], "passages": passages}).decode())
        return
    table = Table("id", "owner", "slot", "fact", "from session", title=f"{len(facts)} fact(s), {passages} passage(s)")
    for f in facts:
        table.add_row(str(f.id), f.owner, f.slot, f.text, f.source_session)
    console.print(table)


def run_memory_forget(settings: Settings, console: Console, *, owner: str) -> None:
    """Delete every fact and archived passage of ``owner``."""
    with reading(settings) as engine:
        facts, passages = forget(engine, owner)
    console.print(f"forgot {facts} fact(s) and {passages} archived passage(s) of {owner}")
