"""Alembic migrations of the store; ``upgrade_database(url)`` applies them (see :mod:`votes.migrate`)."""

from votes.migrate import upgrade_database

__all__ = ["upgrade_database"]
