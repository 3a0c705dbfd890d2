"""Adding a figure is one entry in the FIGURES table plus its drawer: a toy figure registered for one test
is drawn into the published snapshot, listed in its manifest, shown on the snapshot page with its data
file, and served by the snapshot route, with nothing else told about it."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from matplotlib.figure import Figure

from arena.app import create_app
from arena.publish.recompute import SliceSpec
from arena.publish.snapshots import publish_slices
from leaderboard.bt.request import FitRequest
from leaderboard.snapshot.figures import FIGURES, FigureSources, FigureSpec, plot_files
from leaderboard.snapshot.files import CSV_FILE
from leaderboard.snapshot.layout import new_figure
from tests.factories import make_settings
from votes.db import make_engine
from votes.imports.demo import load_demo
from votes.migrate import upgrade_database

TOY = "toy_top_three"


def draw_toy(sources: FigureSources) -> Figure:
    """The three best models' names, one per line: a figure drawn from the point ratings alone."""
    figure = new_figure(3.0, 2.0)
    figure.text(0.1, 0.5, "\n".join(sources.names[:3]))
    return figure


@pytest.fixture
def toy_figure() -> Iterator[FigureSpec]:
    """The toy figure in the table for one test, taken out again after it."""
    spec = FigureSpec(TOY, "Toy: the three best models", draw_toy, "point", CSV_FILE)
    FIGURES[spec.stem] = spec
    try:
        yield spec
    finally:
        del FIGURES[spec.stem]


def test_a_registered_figure_is_published_and_served(toy_figure: FigureSpec, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'arena.db'}"
    upgrade_database(url)
    engine = make_engine(url)
    load_demo(engine, n_votes=300, seed=4)
    (row,) = publish_slices(
        engine,
        snapshot_dir=tmp_path / "snapshots",
        request=FitRequest(n_rounds=10, random_state=1),
        slices=[SliceSpec()],
    )
    assert {f"{TOY}.svg", f"{TOY}.png"} <= set(plot_files())
    for name in (f"{TOY}.svg", f"{TOY}.png"):
        assert (Path(row.path) / name).stat().st_size > 0
        assert row.files[name] == hashlib.sha256((Path(row.path) / name).read_bytes()).hexdigest()
    app = create_app(make_settings(url, snapshot_dir=str(tmp_path / "snapshots")), engine=engine, seed=1)
    with TestClient(app, base_url="http://testserver") as client:
        page = client.get(f"/leaderboard/snapshots/{row.id}")
        assert page.status_code == 200
        shown = {f["stem"]: f for f in page.context["figures"]}  # type: ignore[attr-defined]
        assert list(shown) == list(FIGURES)  # every figure of the table, the toy last
        assert shown[TOY]["title"] == toy_figure.title and shown[TOY]["data_file"] == CSV_FILE
        assert f"files/{TOY}.png" in page.text and toy_figure.title in page.text
        svg = client.get(f"/leaderboard/snapshots/{row.id}/files/{TOY}.svg")
        assert svg.status_code == 200 and svg.headers["content-type"] == "image/svg+xml"
        assert hashlib.sha256(svg.content).hexdigest() == row.files[f"{TOY}.svg"]
    engine.dispose()


def test_the_table_is_back_to_the_snapshot_figures_without_the_toy() -> None:
    assert TOY not in FIGURES and not any(name.startswith(TOY) for name in plot_files())
    assert all(spec.stem == stem for stem, spec in FIGURES.items())
