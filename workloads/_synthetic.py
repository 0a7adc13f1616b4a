"""Synthetic prompts whose length is exact under a tokenizer.

Text is drawn either as seeded random words from a fixed English vocabulary (`words`: it
tokenizes like prose, not like random ids) or as running natural text from the bundled corpus
(`corpus`: `workloads/data/corpus.txt`, prose written for this project and dedicated to the public
domain (CC0), about 2,000 words; from a seeded paragraph on, wrapping around with the paragraphs
in a seeded order, so a 30K-token context reads naturally sentence by sentence although its
paragraphs recur). Either is cut to the target length in tokens and checked by re-encoding:
the realized count is returned and recorded, so a prompt that could not be made exact is visible
in the request set rather than hidden. With the approximate `none` tokenizer a "token" is a word.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Literal

import numpy as np

from workloads._tokenizer import Tokenizer

__all__ = ["synthesize_prompt", "VOCABULARY", "TextSource", "corpus_text"]

TextSource = Literal["words", "corpus"]
_CORPUS_PATH = Path(__file__).resolve().parent / "data" / "corpus.txt"

VOCABULARY: tuple[str, ...] = tuple(
    """the of and to in is was that for on as with by he it at from his an were are which this be
    or had not first one their its new after but who they have her she two been other when there
    all during into school time may years more most only over city some world would where later up
    such used many can state about national out known university united then made these people
    through year being part well century war under three before between long government both game
    american early also while team number them film since named house life work area called around
    high however several same music country because each river began season family group place
    several day did county public second north south east west system own light night water river
    market garden window letter morning evening story history record station village island road
    mountain forest valley ocean harbor bridge tower church castle library museum theatre painting
    poem novel song voice silence memory question answer reason purpose result method theory
    practice measure number figure value signal engine machine server model token stream request
    response latency window budget schedule careful patient quiet bright heavy simple gentle ancient
    modern distant golden silver narrow broad sudden steady rapid""".split()
)

_MAX_ADJUSTMENTS = 8


@cache
def corpus_text() -> str:
    """The bundled natural-text corpus, one paragraph a line."""
    return _CORPUS_PATH.read_text(encoding="utf-8")


@cache
def _paragraphs() -> tuple[str, ...]:
    return tuple(line.strip() for line in corpus_text().splitlines() if line.strip())


def _draw_words(rng: np.random.Generator, n_words: int) -> str:
    picks = rng.integers(0, len(VOCABULARY), size=n_words)
    return " ".join(VOCABULARY[i] for i in picks)


def _draw_corpus(rng: np.random.Generator, n_words: int) -> str:
    paragraphs = _paragraphs()
    order = rng.permutation(len(paragraphs))
    out: list[str] = []
    words = 0
    i = 0
    while words < n_words:
        paragraph = paragraphs[int(order[i % len(order)])]
        out.append(paragraph)
        words += paragraph.count(" ") + 1
        i += 1
    return "\n".join(out)


def synthesize_prompt(
    tokenizer: Tokenizer, rng: np.random.Generator, target_tokens: int, source: TextSource = "words"
) -> tuple[str, int]:
    """A prompt of `target_tokens` tokens under `tokenizer`: (text, realized token count).

    The realized count equals the target unless the tokenizer merges across the cut in a way no
    nearby cut avoids (not seen with Gemma's tokenizer); callers record it either way.
    """
    draw = _draw_words if source == "words" else _draw_corpus
    n_words = max(8, int(target_tokens * 1.3) + 8)
    text = draw(rng, n_words)
    ids = tokenizer.encode(text)
    while len(ids) < target_tokens:
        text = text + ("\n" if source == "corpus" else " ") + draw(rng, n_words)
        ids = tokenizer.encode(text)
    cut = target_tokens
    best_text, best_count = text, len(ids)
    for _ in range(_MAX_ADJUSTMENTS):
        candidate = tokenizer.decode(ids[:cut]).strip()
        count = len(tokenizer.encode(candidate))
        if abs(count - target_tokens) < abs(best_count - target_tokens):
            best_text, best_count = candidate, count
        if count == target_tokens:
            break
        cut += target_tokens - count
        if cut < 1 or cut > len(ids):
            break
    return best_text, best_count
