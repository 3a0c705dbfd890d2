"""The sampling weights in force, over time: the history half of the fairness ledger.

The public arenas were criticised for sampling models unequally without saying so. A snapshot already
publishes each model's share of the battles; this module keeps what the pairing policy *meant* to give
each model and when: the live site records the per-model shares of its design whenever they move by
more than ``min_change`` or ``min_interval`` has passed, and a snapshot publishes the last recorded
share per model and UTC day (its newest day: the shares in force when it was published). Rows are few
(models times changes), so the table needs no pruning for years of hourly records at a few hundred models.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, insert, select
from sqlalchemy.engine import Engine

from votes.tables import model_t, pairingweight_t

__all__ = ["model_shares", "pairing_weight_history", "record_pairing_weights"]


def model_shares(design: Mapping[tuple[int, int], float]) -> dict[int, float]:
    """Each model's share of the battles under a pair design (a battle counts half for each side)."""
    total = sum(p for p in design.values() if p > 0)
    shares: dict[int, float] = {}
    if total <= 0:
        return shares
    for (a, b), p in design.items():
        if p > 0:
            shares[a] = shares.get(a, 0.0) + p / (2.0 * total)
            shares[b] = shares.get(b, 0.0) + p / (2.0 * total)
    return shares


def _latest(conn: Any) -> tuple[datetime | None, dict[int, float]]:
    """The newest recorded set of shares and its time (every row written together shares one time)."""
    newest = conn.execute(select(func.max(pairingweight_t.c.recorded_at))).scalar()
    if newest is None:
        return None, {}
    rows = conn.execute(
        select(pairingweight_t.c.model_id, pairingweight_t.c.share).where(
            pairingweight_t.c.recorded_at == newest
        )
    )
    when = newest if newest.tzinfo is not None else newest.replace(tzinfo=UTC)
    return when, {int(m): float(s) for m, s in rows}


def record_pairing_weights(
    engine: Engine,
    shares: Mapping[int, float],
    *,
    policy: str,
    now: datetime | None = None,
    min_interval: timedelta = timedelta(hours=1),
    min_change: float = 0.005,
) -> bool:
    """Write ``shares`` (model id to share) as the weights in force at ``now`` when they differ from the
    last record by more than ``min_change`` for some model, or the last record is older than
    ``min_interval``. True when a record was written. Several workers may call it at once: at worst two
    near-identical records, which the history's one-per-day reading absorbs."""
    if not shares:
        return False
    moment = now or datetime.now(UTC)
    with engine.begin() as conn:
        last_at, last = _latest(conn)
        if last_at is not None and moment - last_at < min_interval:
            moved = max(abs(shares.get(m, 0.0) - last.get(m, 0.0)) for m in set(shares) | set(last))
            if moved <= min_change:
                return False
        conn.execute(
            insert(pairingweight_t),
            [
                {"recorded_at": moment, "model_id": int(m), "share": float(s), "policy": policy[:20]}
                for m, s in sorted(shares.items())
            ],
        )
    return True


def pairing_weight_history(engine: Engine) -> dict[str, dict[str, float]]:
    """Per UTC day (ISO date), each model's share in the last record of that day. Models absent from a
    day's last record had no pairs in force (share 0) and are left out; days without records are absent."""
    stmt = select(
        pairingweight_t.c.recorded_at, pairingweight_t.c.model_id, pairingweight_t.c.share
    ).order_by(pairingweight_t.c.recorded_at)
    days: dict[str, tuple[datetime, dict[int, float]]] = {}
    with engine.connect() as conn:
        names = {int(i): str(n) for i, n in conn.execute(select(model_t.c.id, model_t.c.name))}
        for recorded_at, model_id, share in conn.execution_options(yield_per=5000).execute(stmt):
            day = recorded_at.date().isoformat()
            held = days.get(day)
            if held is None or recorded_at > held[0]:
                days[day] = (recorded_at, {})
                held = days[day]
            held[1][int(model_id)] = float(share)
    return {
        day: {
            names.get(m, str(m)): round(s, 6)
            for m, s in sorted(shares.items(), key=lambda x: names.get(x[0], ""))
        }
        for day, (_, shares) in sorted(days.items())
    }
