"""Reading ahead: the items in order, the next one made in a worker thread, a producer's error raised
when its item is due, and an early stop that does not run the source further."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from votes.imports.read_ahead import read_ahead


class Bad(Exception):
    pass


def test_items_come_in_order_each_next_one_made_in_another_thread() -> None:
    made_in: list[str] = []

    def source() -> Iterator[int]:
        for i in range(5):
            made_in.append(threading.current_thread().name)
            yield i

    assert list(read_ahead(source())) == [0, 1, 2, 3, 4]
    assert list(read_ahead([])) == []
    assert all(name.startswith("read-ahead") for name in made_in), made_in


def test_the_next_item_is_made_while_the_caller_works_on_this_one() -> None:
    second_started = threading.Event()

    def source() -> Iterator[int]:
        yield 1
        second_started.set()
        yield 2

    items = read_ahead(source())
    assert next(items) == 1
    assert second_started.wait(timeout=10)  # made meanwhile, not when asked for
    assert list(items) == [2]


def test_an_error_making_an_item_is_raised_when_that_item_is_due() -> None:
    def source() -> Iterator[int]:
        yield 1
        raise Bad("row 7")

    items = read_ahead(source())
    assert next(items) == 1
    with pytest.raises(Bad, match="row 7"):
        next(items)


def test_a_caller_stopping_early_leaves_the_rest_unread() -> None:
    made: list[int] = []

    def source() -> Iterator[int]:
        for i in range(100):
            made.append(i)
            yield i

    items = read_ahead(source())
    assert next(items) == 0
    items.close()  # what an error or Ctrl-C in the caller's loop does to it
    assert made == [0, 1]  # the item ahead was made (and dropped), nothing after it
