"""Core `Table` handles of the SQLModel tables, for bulk SQL (typed columns via ``.c``)."""

from __future__ import annotations

from sqlmodel import SQLModel

import votes.models  # noqa: F401  (registers the tables)

__all__ = [
    "annotator_t",
    "battle_t",
    "generation_t",
    "goldbattle_t",
    "goldvote_t",
    "import_created_t",
    "import_row_t",
    "import_run_t",
    "judgment_t",
    "liverating_t",
    "liveusage_t",
    "pairingweight_t",
    "model_t",
    "output_t",
    "prompt_t",
    "repeatvote_t",
    "vote_t",
]

annotator_t = SQLModel.metadata.tables["annotator"]
battle_t = SQLModel.metadata.tables["battle"]
generation_t = SQLModel.metadata.tables["generation"]
goldbattle_t = SQLModel.metadata.tables["goldbattle"]
goldvote_t = SQLModel.metadata.tables["goldvote"]
import_created_t = SQLModel.metadata.tables["importcreated"]
import_row_t = SQLModel.metadata.tables["importrow"]
import_run_t = SQLModel.metadata.tables["importrun"]
judgment_t = SQLModel.metadata.tables["judgment"]
liverating_t = SQLModel.metadata.tables["liverating"]
liveusage_t = SQLModel.metadata.tables["liveusage"]
pairingweight_t = SQLModel.metadata.tables["pairingweight"]
model_t = SQLModel.metadata.tables["model"]
output_t = SQLModel.metadata.tables["output"]
prompt_t = SQLModel.metadata.tables["prompt"]
repeatvote_t = SQLModel.metadata.tables["repeatvote"]
vote_t = SQLModel.metadata.tables["vote"]
