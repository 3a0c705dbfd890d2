"""The pairing service: what choosing the next battle needs, cached per process (catalog, histories, texts).

:class:`PairingService` keeps :mod:`arena.voting.pairing`'s inputs in memory so that issuing a battle usually
touches no database; :meth:`PairingService.ready`, :meth:`~PairingService.prepare` and
:meth:`~PairingService.pick` are its entry points, used by :mod:`arena.voting.service`.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from datetime import timedelta

from sqlalchemy.engine import Engine
from sqlmodel import Session

from arena.settings import Settings
from arena.voting.checks import GoldChoice, RepeatChoice, draw_gold, draw_repeat
from arena.voting.histories import AddressReveals, AnnotatorHistory, kept, shown_vote
from arena.voting.pairing import Choice, PairingCatalog, choose_battle, choose_pair, optimal_design
from votes.db import read_session
from votes.models import Output, Prompt
from votes.review.gold_review import retire_golds
from votes.review.leak_review import LeakScanner
from votes.voting.annotators import (
    address_reveals_since,
    annotator_battles_since,
    annotator_golds_and_repeats,
)
from votes.voting.gold_items import GoldItem, gold_answers, load_gold_items, load_prompts
from votes.voting.live_battles import LIVE_SOURCE
from votes.voting.pairing_weights import model_shares, record_pairing_weights
from votes.voting.repeat_votes import REPEATABLE_SOURCES
from votes.voting.views import arena_ratings, load_pairing_catalog, pair_vote_counts

__all__ = ["PairingService"]

log = logging.getLogger(__name__)

#: The ledger's history records the policy's shares when one moved by more than half a point, and at
#: least hourly while the site pairs (:mod:`votes.voting.pairing_weights`).
WEIGHTS_MIN_CHANGE = 0.005
WEIGHTS_INTERVAL = timedelta(hours=1)
#: How often a worker's catalog refresh also retires the golds good annotators keep missing
#: (:func:`votes.review.gold_review.retire_golds`).
GOLD_REVIEW_INTERVAL_S = 600.0


class PairingService:
    """What pairing needs, cached per process, so that issuing a battle touches no database.

    The catalog (prompts, outputs, pair vote counts, live ratings) is reloaded every ``ttl_s`` seconds in
    the background (requests go on with the previous copy meanwhile). Each annotator's judged battles are
    kept in memory: a vote recorded by this process is added at once, votes recorded elsewhere (another
    worker, an import) are read incrementally from the store when the copy is older than ``history_ttl_s``.
    With one worker the history is therefore exact; with several, a battle voted through another worker
    in the last ``history_ttl_s`` seconds could be offered again. The answers revealed by votes from one
    address (its keyed hash, :meth:`arena.security.Signer.address_hash`) are kept the same way, so a
    visitor who drops the cookie is still not shown answers whose models they were told. A battle issued
    and not (yet) voted is remembered as judged too, so fetching tokens ahead never yields the same prompt
    and pair twice; the store refuses a second judgement anyway (:mod:`votes.voting.recording`). Prompt and
    answer texts never change in place except by a re-import, so they are cached for ``texts_ttl_s``
    seconds. Gold battles (:meth:`pick_gold`) and repeats of the annotator's own battles
    (:meth:`pick_repeat`) are chosen from memory too.
    """

    def __init__(
        self,
        engine: Engine,
        settings: Settings,
        *,
        rng: random.Random,
        ttl_s: float = 10.0,
        history_ttl_s: float = 2.0,
        texts_ttl_s: float = 300.0,
        max_histories: int = 50_000,
    ) -> None:
        self.engine = engine
        self.settings = settings
        self.rng = rng
        self.ttl_s = ttl_s
        self.history_ttl_s = history_ttl_s
        self.texts_ttl_s = texts_ttl_s
        self.max_histories = max_histories
        self._lock = threading.Lock()
        self._refresh_lock = threading.Lock()
        self._refreshing = False
        self._loaded_at = -float("inf")
        self._texts_loaded_at = time.monotonic()
        self._catalog = PairingCatalog(outputs={})
        self._catalog_version = 0  # counts catalog reloads: the annotators' exhausted pairs hold for one
        self._counts: dict[tuple[int, int], int] = {}
        self._ratings: dict[int, float] = {}
        self._design: dict[tuple[int, int], float] = {}
        self._recorded_shares: dict[int, float] = {}
        self._recorded_at = -float("inf")
        self._golds_reviewed_at = -float("inf")
        self._texts: dict[tuple[str, int], Prompt | Output] = {}
        self._histories: OrderedDict[int, AnnotatorHistory] = OrderedDict()
        self._addresses: OrderedDict[str, AddressReveals] = OrderedDict()
        self._golds: list[GoldItem] = []
        # Each gold's two answers, built once (as the live answers are cached): building them per battle
        # would make a gold slower to issue than a live battle.
        self._gold_answers: dict[int, tuple[Output, Output]] = {}
        # Answers that name their own model or maker are kept out of battles (``votes.review.leaks``).
        self.leaks = LeakScanner()

    # -- the catalog ------------------------------------------------------------------------------

    def refresh(self, *, force: bool = False) -> None:
        """Reload the catalog now if it is older than ``ttl_s`` (or always with ``force``)."""
        with self._refresh_lock:
            if not force and time.monotonic() - self._loaded_at < self.ttl_s:
                return
            clear_texts = force or time.monotonic() - self._texts_loaded_at > self.texts_ttl_s
            with read_session(self.engine) as session:
                leaking = self.leaks.leaking_output_ids(session.connection())
                rows = [r for r in load_pairing_catalog(session=session) if r.output_id not in leaking]
                catalog = PairingCatalog.from_rows(rows)
                counts = pair_vote_counts(session=session)
                ratings = arena_ratings(session=session)
                golds = load_gold_items(session)
                # Golds' prompts are held like the live battles' cached texts: a gold is served to each
                # annotator once, so reading its prompt on the first serve would make golds slower.
                wanted = {g.prompt_id for g in golds}
                held = set() if clear_texts else {k[1] for k in self._texts if k[0] == "prompt"}
                gold_prompts = load_prompts(session, wanted - held)
            design = self._optimal_design(catalog, counts, ratings)
            self._record_weights(design)
            golds = self._retire_golds(golds, force=force)
            # a gold whose reveal names a model no longer in the arena would stand out from every battle
            golds = [g for g in golds if {g.model_a_id, g.model_b_id} - {None} <= catalog.model_ids]
            answers = {g.gold_id: self._gold_answers.get(g.gold_id) or gold_answers(g) for g in golds}
            now = time.monotonic()
            with self._lock:
                self._catalog, self._counts, self._ratings = catalog, counts, ratings
                self._catalog_version += 1
                self._design = design
                self._golds, self._gold_answers = golds, answers
                if clear_texts:
                    self._texts.clear()
                    self._texts_loaded_at = now
                self._texts.update((("prompt", p.id or 0), p) for p in gold_prompts)
                if force:
                    for history in self._histories.values():
                        history.synced_at = -float("inf")
                self._loaded_at = now

    def _optimal_design(
        self, catalog: PairingCatalog, counts: dict[tuple[int, int], int], ratings: dict[int, float]
    ) -> dict[tuple[int, int], float]:
        """The optimal policy's pair probabilities over every model with answers or a live rating."""
        if self.settings.pairing_policy != "optimal":
            return {}
        return optimal_design(
            catalog.model_ids | set(ratings),
            counts=counts,
            ratings=ratings,
            system=self.settings.live_rating,
            floor=self.settings.pairing_floor,
        )

    def _record_weights(self, design: dict[tuple[int, int], float]) -> None:
        """Keep the design's per-model shares in the ledger's history (:mod:`votes.voting.pairing_weights`)
        when they moved or an hour passed; checked against this worker's last record first, so the database is
        read only when something may be written. A failure is logged and pairing goes on."""
        shares = model_shares(design)
        if not shares:
            return
        now = time.monotonic()
        moved = max(
            abs(shares.get(m, 0.0) - self._recorded_shares.get(m, 0.0))
            for m in set(shares) | set(self._recorded_shares)
        )
        if moved <= WEIGHTS_MIN_CHANGE and now - self._recorded_at < WEIGHTS_INTERVAL.total_seconds():
            return
        try:
            record_pairing_weights(
                self.engine,
                shares,
                policy=self.settings.pairing_policy,
                min_interval=WEIGHTS_INTERVAL,
                min_change=WEIGHTS_MIN_CHANGE,
            )
        except Exception:  # noqa: BLE001 - the ledger's history must never stop the battles
            log.exception("recording the pairing weights failed")
            return
        self._recorded_shares, self._recorded_at = shares, now

    def _retire_golds(self, golds: list[GoldItem], *, force: bool) -> list[GoldItem]:
        """Every :data:`GOLD_REVIEW_INTERVAL_S` (and on a forced refresh), retire the golds good annotators
        keep missing; returns ``golds`` without them. A failure is logged and pairing goes on."""
        now = time.monotonic()
        if not golds or (not force and now - self._golds_reviewed_at < GOLD_REVIEW_INTERVAL_S):
            return golds
        self._golds_reviewed_at = now
        try:
            retired = {gold for gold, _ in retire_golds(self.engine)}
        except Exception:  # noqa: BLE001 - the gold review must never stop the battles
            log.exception("retiring missed golds failed")
            return golds
        return [g for g in golds if g.gold_id not in retired]

    @property
    def design(self) -> dict[tuple[int, int], float]:
        """The optimal policy's pair probabilities in force (empty under another policy)."""
        return self._design

    def _refresh_in_background(self) -> None:
        with self._lock:
            if self._refreshing:
                return
            self._refreshing = True

        def run() -> None:
            try:
                self.refresh()
            except Exception:  # noqa: BLE001 - keep serving the previous catalog; try again next time
                log.exception("pairing catalog refresh failed")
            finally:
                self._refreshing = False

        threading.Thread(target=run, name="arena-pairing-refresh", daemon=True).start()

    @property
    def catalog(self) -> PairingCatalog:
        self.refresh()
        return self._catalog

    # -- annotators' histories --------------------------------------------------------------------

    def _history(self, annotator_id: int) -> AnnotatorHistory:
        return kept(self._histories, annotator_id, AnnotatorHistory, self.max_histories)

    def _sync_history(self, annotator_id: int) -> None:
        with self._lock:
            since = self._history(annotator_id).high_water
        with read_session(self.engine) as session:
            rows = annotator_battles_since(session=session, annotator_id=annotator_id, after_id=since)
            golds, repeated = annotator_golds_and_repeats(session=session, annotator_id=annotator_id)
        with self._lock:
            history = self._history(annotator_id)
            history.golds.update(golds)
            history.repeated.update(repeated)
            for battle_id, prompt_id, a, b, vote_id, out_a, out_b, source in rows:
                repeatable = vote_id if source in REPEATABLE_SOURCES else None
                shown = shown_vote(repeatable, prompt_id, a, b, out_a, out_b)
                key = (prompt_id, min(a, b), max(a, b))
                history.add(
                    battle_id, key, voted=vote_id is not None, outputs=(out_a, out_b), shown=shown,
                    catalog=source != LIVE_SOURCE,
                )  # fmt: skip
                history.high_water = max(history.high_water, battle_id)
            history.synced_at = time.monotonic()

    def _address(self, address_hash: str) -> AddressReveals:
        return kept(self._addresses, address_hash, AddressReveals, self.max_histories)

    def _sync_address(self, address_hash: str) -> None:
        with self._lock:
            since = self._address(address_hash).high_water
        with read_session(self.engine) as session:
            rows = address_reveals_since(session=session, address_hash=address_hash, after_vote_id=since)
        with self._lock:
            reveals = self._address(address_hash)
            for vote_id, out_a, out_b in rows:
                reveals.revealed.update(o for o in (out_a, out_b) if o is not None)
                reveals.high_water = max(reveals.high_water, vote_id)
            reveals.synced_at = time.monotonic()

    def _address_fresh(self, address_hash: str | None, now: float) -> bool:
        if address_hash is None:
            return True
        reveals = self._addresses.get(address_hash)
        return reveals is not None and now - reveals.synced_at < self.history_ttl_s

    def ready(self, annotator_id: int, address_hash: str | None = None) -> bool:
        """True when :meth:`pick` can run from memory (a stale catalog is refreshed in the background)."""
        now = time.monotonic()
        if self._loaded_at == -float("inf"):
            return False
        if now - self._loaded_at >= self.ttl_s:
            self._refresh_in_background()
        history = self._histories.get(annotator_id)
        fresh = history is not None and now - history.synced_at < self.history_ttl_s
        return fresh and self._address_fresh(address_hash, now)

    def prepare(self, annotator_id: int, address_hash: str | None = None) -> None:
        """Do the database reads :meth:`pick` needs (blocking: call it from a worker thread)."""
        if self._loaded_at == -float("inf"):
            self.refresh()
        now = time.monotonic()
        history = self._histories.get(annotator_id)
        if history is None or now - history.synced_at >= self.history_ttl_s:
            self._sync_history(annotator_id)
        if address_hash is not None and not self._address_fresh(address_hash, now):
            self._sync_address(address_hash)

    def pick(self, annotator_id: int, address_hash: str | None = None) -> Choice | None:
        """Choose the next battle from memory; call :meth:`prepare` first when not :meth:`ready`.

        With ``address_hash`` the answers revealed to that address count as revealed to this annotator.
        """
        with self._lock:
            history = self._history(annotator_id)
            revealed = history.revealed
            if address_hash is not None:
                revealed = revealed | self._address(address_hash).revealed
            valid_for = (self._catalog_version, address_hash)
            if history.exhausted_for != valid_for:
                history.exhausted, history.exhausted_for = set(), valid_for
            choice = choose_battle(
                self._catalog,
                policy=self.settings.pairing_policy,
                counts=self._counts,
                seen=history.keys.keys(),
                rng=self.rng,
                power=self.settings.pairing_balance_power,
                ratings=self._ratings,
                seen_per_pair=history.per_pair,
                design=self._design,
                revealed=revealed,
                exhausted=history.exhausted,
            )
            if choice is not None:
                a, b = choice.output_a.model_id, choice.output_b.model_id
                history.issue((choice.prompt_id, min(a, b), max(a, b)))
            return choice

    def release(self, annotator_id: int, choice: Choice) -> None:
        """Undo :meth:`pick`'s note of an issued battle that was not served (a gold took its place)."""
        a, b = choice.output_a.model_id, choice.output_b.model_id
        key = (choice.prompt_id, min(a, b), max(a, b))
        with self._lock:
            history = self._history(annotator_id)
            n = history.keys.get(key, 0)
            if n > 1:
                history.keys[key] = n - 1
            elif n == 1:
                del history.keys[key]
                pair = (key[1], key[2])
                left = history.per_pair.get(pair, 0) - 1
                if left > 0:
                    history.per_pair[pair] = left
                else:
                    history.per_pair.pop(pair, None)

    def pick_gold(self, annotator_id: int) -> GoldChoice | None:
        """A gold instead of the next battle, or None (:func:`arena.voting.checks.draw_gold`). Call
        :meth:`prepare` first when not :meth:`ready`."""
        with self._lock:
            history = self._history(annotator_id)
            return draw_gold(
                history, self._golds, self._gold_answers, self._catalog.model_ids, self.settings, self.rng
            )

    def pick_repeat(self, annotator_id: int) -> RepeatChoice | None:
        """One of the annotator's own counted battles again, sides swapped, instead of the next battle, or
        None (:func:`arena.voting.checks.draw_repeat`). Call :meth:`prepare` first when not :meth:`ready`."""
        with self._lock:
            history = self._history(annotator_id)
            n_models = len(self._catalog.model_ids)
            return draw_repeat(history, self.settings.repeat_rate, n_models, self.rng)

    def pick_pair(
        self, model_ids: Sequence[int], with_model: int | None = None
    ) -> tuple[int, int, float] | None:
        """Two of ``model_ids`` for a live battle, drawn by the pairing policy from the cached vote counts
        and ratings, sides by a fair coin: ``(left, right, probability of the unordered pair)``; with
        ``with_model``, only pairs with that model (a partner for it when its first one could not answer).
        None with no such pair. Call :meth:`prepare` (or :meth:`refresh`) first for fresh counts."""
        ids = sorted({*model_ids, *([] if with_model is None else [with_model])})
        pairs = [(lo, hi) for i, lo in enumerate(ids) for hi in ids[i + 1 :] if with_model in (None, lo, hi)]
        if not pairs:
            return None
        with self._lock:
            (lo, hi), probability = choose_pair(
                pairs,
                policy=self.settings.pairing_policy,
                counts=self._counts,
                rng=self.rng,
                power=self.settings.pairing_balance_power,
                ratings=self._ratings,
                design=self._design,
            )
            left, right = (lo, hi) if self.rng.random() < 0.5 else (hi, lo)
        return left, right, probability

    def n_votes(self, annotator_id: int) -> int:
        """Votes of this annotator as of the last :meth:`prepare` and this process's votes since."""
        with self._lock:
            return self._history(annotator_id).n_votes

    def adopt(self, provisional_id: int, annotator_id: int) -> None:
        """A session's first vote wrote its annotator: what was issued to its provisional id moves over."""
        with self._lock:
            old = self._histories.pop(provisional_id, None)
            if old is None:
                return
            history = self._history(annotator_id)
            for key in old.keys:
                if key not in history.keys:
                    history.issue(key)

    def note_vote(
        self,
        *,
        annotator_id: int,
        battle_id: int,
        vote_id: int | None = None,
        prompt_id: int,
        model_a_id: int,
        model_b_id: int,
        outputs: Sequence[int | None] = (),
        address_hash: str | None = None,
        catalog: bool = True,
    ) -> None:
        """A vote this process recorded: count its pair and add it (and its revealed answers, ``outputs``)
        to the annotator's history, and the answers to its address's reveals, at once; ``catalog`` false
        for a battle on a prompt outside the catalog (a live battle's). ``vote_id`` is the
        vote's id when it may be repeated later (a site battle's, :mod:`votes.voting.repeat_votes`)."""
        key = (min(model_a_id, model_b_id), max(model_a_id, model_b_id))
        with self._lock:
            self._counts[key] = self._counts.get(key, 0) + 1
            history = self._histories.get(annotator_id)
            if history is not None:
                out_a, out_b = (tuple(outputs) + (None, None))[:2]
                shown = shown_vote(vote_id, prompt_id, model_a_id, model_b_id, out_a, out_b)
                history.add(
                    battle_id, (prompt_id, *key), voted=True, outputs=outputs, shown=shown, catalog=catalog
                )
            if address_hash is not None:
                reveals = self._addresses.get(address_hash)
                if reveals is not None:
                    reveals.revealed.update(o for o in outputs if o is not None)

    # -- texts ------------------------------------------------------------------------------------

    def cached_prompt(self, prompt_id: int) -> Prompt | None:
        """A prompt from memory, or None when it must be read (:meth:`gold_prompt`)."""
        return self._texts.get(("prompt", prompt_id))  # type: ignore[return-value]

    def gold_prompt(self, prompt_id: int) -> Prompt:
        """A gold's prompt, from memory or the store (blocking on a miss)."""
        hit = self.cached_prompt(prompt_id)
        if hit is not None:
            return hit
        with read_session(self.engine) as session:
            return self._cached(session, Prompt, "prompt", prompt_id)  # type: ignore[return-value]

    def cached_texts(self, choice: Choice) -> tuple[Prompt, Output, Output] | None:
        """The prompt and both answers from memory, or None when one must be read."""
        texts = self._texts
        prompt = texts.get(("prompt", choice.prompt_id))
        out_a = texts.get(("output", choice.output_a.output_id))
        out_b = texts.get(("output", choice.output_b.output_id))
        if prompt is None or out_a is None or out_b is None:
            return None
        return prompt, out_a, out_b  # type: ignore[return-value]

    def load_texts(self, choice: Choice) -> tuple[Prompt, Output, Output]:
        """The prompt and both answers, read from the store when not cached (blocking)."""
        hit = self.cached_texts(choice)
        if hit is not None:
            return hit
        with read_session(self.engine) as session:
            prompt = self._cached(session, Prompt, "prompt", choice.prompt_id)
            out_a = self._cached(session, Output, "output", choice.output_a.output_id)
            out_b = self._cached(session, Output, "output", choice.output_b.output_id)
        return prompt, out_a, out_b  # type: ignore[return-value]

    def _cached(
        self, session: Session, table: type[Prompt] | type[Output], kind: str, key: int
    ) -> Prompt | Output:
        hit = self._texts.get((kind, key))
        if hit is not None:
            return hit
        row: Prompt | Output | None = session.get(table, key)  # type: ignore[assignment]
        if row is None:
            raise LookupError(f"{kind} {key} not found")
        session.expunge(row)
        self._texts[(kind, key)] = row
        return row
