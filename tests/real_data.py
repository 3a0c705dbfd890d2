"""The real files the tests read, carried in ``tests/data/`` (their source and licence are in its README)."""

from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
#: The 80 Vicuna questions, each answered by five real LLMs of 2023 (a catalog file).
VICUNA_CATALOG = DATA / "vicuna80-catalog.jsonl.gz"
#: 6,560 verdicts of four LLM judges on those answers (a Chatbot Arena battles file with a judge column).
VICUNA_JUDGES = DATA / "vicuna80-llm-judge-battles.jsonl.gz"
