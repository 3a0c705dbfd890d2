"""What pairing remembers of each annotator and each address, kept per process and synced from the store.

An :class:`AnnotatorHistory` holds one annotator's judged battles as pairing needs them (the prompt and
pair of each, how many prompts of each pair were judged, the answers whose models a vote revealed, the
golds served, the counted votes a repeat may show again); an :class:`AddressReveals` the answers revealed
by votes cast from one address. :class:`arena.voting.pairing_service.PairingService` keeps them, under its
lock, and syncs them from the store.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TypeVar

__all__ = ["AddressReveals", "AnnotatorHistory", "ShownVote", "kept", "shown_vote"]

_K = TypeVar("_K")
_V = TypeVar("_V")

#: A counted vote as a repeat needs it: (vote, prompt, model a, model b, output a, output b), as shown.
ShownVote = tuple[int, int, int, int, int, int]


def kept(records: OrderedDict[_K, _V], key: _K, make: Callable[[], _V], limit: int) -> _V:
    """The record of ``key`` (made by ``make`` when there is none), now the most recently used; beyond
    ``limit`` records the least recently used are forgotten (they are synced again from the store)."""
    record = records.get(key)
    if record is None:
        record = records[key] = make()
        while len(records) > limit:
            records.popitem(last=False)
    else:
        records.move_to_end(key)
    return record


class AnnotatorHistory:
    """One annotator's judged battles, as pairing needs them (kept per process, synced from the store)."""

    __slots__ = (
        "battles",
        "exhausted",
        "exhausted_for",
        "golds",
        "high_water",
        "keys",
        "n_votes",
        "per_pair",
        "repeated",
        "revealed",
        "synced_at",
        "voted",
    )

    def __init__(self) -> None:
        self.battles: dict[int, tuple[int, int, int]] = {}  # battle id -> (prompt, lower, higher model)
        self.keys: dict[tuple[int, int, int], int] = {}  # (prompt, lower, higher) -> battles
        self.per_pair: dict[tuple[int, int], int] = {}  # (lower, higher) -> distinct prompts judged
        self.revealed: set[int] = set()  # output ids of voted battles: the reveal named their models
        self.golds: set[int] = set()  # golds served (voted or not): never served to this annotator again
        # Counted votes in voting order, as shown: (vote, prompt, model a, model b, output a, output b); and
        # the votes already repeated (served, voted or not): each is repeated once.
        self.voted: list[ShownVote] = []
        self.repeated: set[int] = set()
        # Pairs with no unjudged prompt free of revealed answers, valid for one catalog and address
        # (:func:`arena.voting.pairing.choose_battle`'s ``exhausted``): what was seen and revealed only grows.
        self.exhausted: set[tuple[int, int]] = set()
        self.exhausted_for: tuple[int, str | None] | None = None
        self.n_votes = 0
        self.high_water = 0  # highest battle id read from the store
        self.synced_at = -float("inf")

    def issue(self, key: tuple[int, int, int]) -> None:
        """A battle issued to this annotator: not offered again, voted or not (a token fetched ahead)."""
        n = self.keys.get(key, 0)
        self.keys[key] = n + 1
        if n == 0:
            pair = (key[1], key[2])
            self.per_pair[pair] = self.per_pair.get(pair, 0) + 1

    def add(
        self,
        battle_id: int,
        key: tuple[int, int, int],
        *,
        voted: bool,
        outputs: Sequence[int | None] = (),
        shown: ShownVote | None = None,
        catalog: bool = True,
    ) -> None:
        """A battle of this annotator; ``shown`` is its vote as a repeat needs it (vote, prompt, models and
        outputs as shown), when it has a vote and both answers are stored outputs. A battle on a prompt
        outside the catalog (``catalog`` false: a live battle's own prompt) counts a vote but no judged
        prompt of its pair: counted, it made a pair look judged through before the catalog's new prompts
        were shown."""
        if voted:
            self.revealed.update(o for o in outputs if o is not None)
        if battle_id in self.battles:
            return
        if shown is not None:
            self.voted.append(shown)
        self.battles[battle_id] = key
        if not catalog:
            self.n_votes += voted
            return
        n = self.keys.get(key, 0)
        self.keys[key] = n + 1
        if n == 0:
            pair = (key[1], key[2])
            self.per_pair[pair] = self.per_pair.get(pair, 0) + 1
        self.n_votes += voted


class AddressReveals:
    """The outputs revealed by votes cast from one address hash (kept per process, synced from the store)."""

    __slots__ = ("high_water", "revealed", "synced_at")

    def __init__(self) -> None:
        self.revealed: set[int] = set()
        self.high_water = 0  # highest vote id read from the store
        self.synced_at = -float("inf")


def shown_vote(
    vote_id: int | None, prompt_id: int, model_a: int, model_b: int, out_a: int | None, out_b: int | None
) -> ShownVote | None:
    """A vote as a repeat needs it, or None when there is no vote or an answer is not a stored output."""
    if vote_id is None or not out_a or not out_b:
        return None
    return (vote_id, prompt_id, model_a, model_b, out_a, out_b)
