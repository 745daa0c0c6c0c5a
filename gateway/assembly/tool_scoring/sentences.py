"""Split the turn's text into sentences, so each request a turn makes can be matched on its own.

Users often ask for two things in one turn ("What's the weather in Oslo? Also suggest a
hotel there."). One embedding of the whole text averages both requests, and the tool for
the weaker one can fall out of the kept set. Embedding each sentence as well lets a tool
score high when it fits any one sentence (see ``embedding.score_embedding_sentences``).

Only the start of the text is split (``MAX_CHARS``, about the 256 tokens the encoder reads
of the whole text anyway), and at most ``MAX_SENTENCES`` sentences, so the extra encoder
work stays bounded however long the tool results in the turn are.
"""

from __future__ import annotations

import re

MAX_CHARS = 1_000
MAX_SENTENCES = 6
MIN_WORDS = 2  # "Thanks." or "OK" carry no request
_BOUNDARY = re.compile(r"(?<=[.!?])\s+|\n+")
_TRIM = " \t\"'`"


def split_sentences(text: str) -> list[str]:
    """The sentences of the start of ``text`` with at least ``MIN_WORDS`` words, in order.

    >>> split_sentences('"Will it rain in Oslo? Also, book me a hotel there."')
    ['Will it rain in Oslo?', 'Also, book me a hotel there.']
    """
    sentences: list[str] = []
    for piece in _BOUNDARY.split(text[:MAX_CHARS]):
        sentence = piece.strip(_TRIM)
        if len(sentence.split()) >= MIN_WORDS:
            sentences.append(sentence)
            if len(sentences) == MAX_SENTENCES:
                break
    return sentences
