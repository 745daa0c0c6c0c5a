"""A long chat where the user states facts in prose among replies that each carry an incidental id.

The shape of issue 30's failing session: a user runs forty warehouse sites and, now and
then, states a site's locker code in a sentence of their own ("the locker code for site
12 is KV-4821D"); every other turn is small talk about the day with incidental numbers
(bays, pallets, times). The assistant's replies are whatever the provider answers: the
simulator's "Simulated answer <8 hex> to: <the user's words>" carries one random id per
turn, exactly the noise a summariser must not keep instead of the codes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

_NAMES = ["Marta", "Jonas", "Aiko", "Bruno", "Fatima", "Liam", "Chen", "Oksana", "Diego", "Priya"]
_TOWNS = ["Leeds", "Gdansk", "Tampere", "Bilbao", "Graz", "Lyon", "Aarhus", "Brno", "Porto", "Ghent"]
_CHATTER = [
    "Spent the morning with {name} walking the aisles; the forklift at bay {bay} is still making that noise.",
    "{name} says the {town} delivery slipped again, {pallets} pallets are sitting in the yard under a tarp.",
    "Long day. We moved {pallets} pallets before lunch and the scanner at bay {bay} died twice.",
    "I had coffee with {name} from {town}, who wants the night shift to start at {hour}:30 from now on.",
    "The heating in the {town} office is broken again, so {name} worked from the canteen all afternoon.",
    "Quick one: remind me later to call {name} about the rota, and that bay {bay} needs new labels.",
    "Nothing dramatic today, just {pallets} returns to sort and a very long meeting about parking.",
]
_CODE_SENTENCES = [
    "Oh, before I forget: the locker code for site {site} ({town}) is {code}.",
    "{name} changed it yesterday, so the locker code for site {site} is now {code}, please keep that.",
    "For the record, site {site} in {town} opens its key locker with {code}.",
    "The new locker code at site {site} is {code}; {name} is the only other person who knows it.",
]


@dataclass(frozen=True, slots=True)
class PlantedCode:
    turn: int
    site: int
    code: str
    sentence: str


def _code(rng: random.Random) -> str:
    letters = "ABCDEFGHJKLMNPQRSTUVWXYZ"
    return f"{rng.choice(letters)}{rng.choice(letters)}-{rng.randint(1000, 9999)}{rng.choice(letters)}"


def _fill(rng: random.Random, template: str, **extra: object) -> str:
    values = {
        "name": rng.choice(_NAMES),
        "town": rng.choice(_TOWNS),
        "bay": rng.randint(2, 60),
        "pallets": rng.randint(12, 240),
        "hour": rng.randint(17, 22),
        **extra,
    }
    return template.format(**values)


def locker_session(turns: int = 200, codes: int = 40, seed: int = 30) -> tuple[list[str], list[PlantedCode]]:
    """The user's message of every turn, and the codes planted (one every ``turns // codes`` turns)."""
    rng = random.Random(seed)
    every = max(1, turns // codes)
    planted: list[PlantedCode] = []
    users: list[str] = []
    for turn in range(turns):
        text = _fill(rng, rng.choice(_CHATTER))
        if turn % every == every // 2 and len(planted) < codes:
            site, code = len(planted) + 1, _code(rng)
            sentence = _fill(rng, _CODE_SENTENCES[len(planted) % len(_CODE_SENTENCES)], site=site, code=code)
            planted.append(PlantedCode(turn, site, code, sentence))
            text = f"{text} {sentence}" if rng.random() < 0.5 else f"{sentence} {text}"
        users.append(text)
    return users, planted


FINAL_QUESTION = "I'm at the depot now. Give me the locker code of every site, site by site."
SYSTEM = "You are a helpful assistant for a warehouse operations manager."


def codes_present(planted: list[PlantedCode], text: str) -> int:
    """How many planted codes appear literally in ``text``."""
    return sum(p.code in text for p in planted)
