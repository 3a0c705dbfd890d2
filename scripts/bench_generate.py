"""Benchmark `arena generate` against the bare client: the same answers, side by side.

Usage::

    python scripts/bench_generate.py --endpoint tiny-a=http://127.0.0.1:8000/v1 \\
        --endpoint tiny-b=http://127.0.0.1:8001/v1 -n 500

Each endpoint is ``NAME=BASE_URL`` (the served model id is NAME unless given as ``NAME=BASE_URL@MODEL``).
``-n`` prompts are imported into a fresh SQLite store and `arena generate` answers all of them with
every endpoint (in this process: planning, requests, group commits, costs; not the interpreter's
start); then as many completions of the same prompts go through `EndpointClient` alone, with the same
per-endpoint limits. The ratio of the two walls is what the store and the command cost on top of the
servers. The last line of output is a JSON object with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import tempfile
import time
from pathlib import Path

from _bench_common import emit_json_line, machine_info, print_table

from arena.llm import EndpointClient, EndpointConfig, Message


def _endpoint(text: str) -> tuple[str, str, str]:
    name, sep, rest = text.partition("=")
    if not sep or not name or not rest:
        raise argparse.ArgumentTypeError(f"--endpoint takes NAME=BASE_URL[@MODEL], got {text!r}")
    base_url, _, model = rest.partition("@")
    return name, base_url, model or name


def _arena(*args: str) -> str:
    """Run an `arena` command in this process (interpreter start-up is not what is measured)."""
    from arena.cli.main import app

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            app(list(args), standalone_mode=False)
        except SystemExit as exc:  # typer.Exit is turned into SystemExit outside standalone mode
            if exc.code:
                raise SystemExit(f"arena {args[0]} failed ({exc.code}):\n{out.getvalue()}") from None
    return out.getvalue()


async def _bare(endpoints: list[tuple[str, str, str]], n: int, max_tokens: int, per_endpoint: int) -> float:
    configs = [
        EndpointConfig(
            name=name, base_url=url, model=model, max_tokens=max_tokens, max_concurrency=per_endpoint
        )
        for name, url, model in endpoints
    ]
    clients = [EndpointClient(c) for c in configs]
    try:
        start = time.perf_counter()
        await asyncio.gather(
            *(
                client.complete([Message(role="user", content=f"Question {i}: why?")])
                for i in range(n)
                for client in clients
            )
        )
        return time.perf_counter() - start
    finally:
        for client in clients:
            await client.aclose()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--endpoint", type=_endpoint, action="append", required=True)
    parser.add_argument("-n", "--prompts", type=int, default=500)
    parser.add_argument("--max-tokens", type=int, default=8)
    parser.add_argument("--per-endpoint", type=int, default=4, help="max_concurrency of each endpoint")
    parser.add_argument("--concurrency", type=int, default=8, help="arena generate --concurrency")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/bench.db"
        prompts = Path(tmp) / "prompts.jsonl"
        prompts.write_text(
            "".join(
                json.dumps({"prompt_id": f"p{i}", "prompt": f"Question {i}: why?"}) + "\n"
                for i in range(args.prompts)
            )
        )
        _arena("import", str(prompts), "--database-url", url)
        for name, base_url, model in args.endpoint:
            _arena(
                "models", "add", name, "--base-url", base_url, "--model", model,
                "--param", f"max_tokens={args.max_tokens}", "--param", f"max_concurrency={args.per_endpoint}",
                "--database-url", url,
            )  # fmt: skip
        start = time.perf_counter()
        out = _arena("generate", "--quiet", "--concurrency", str(args.concurrency), "--database-url", url)
        generate_s = time.perf_counter() - start
    n_answers = args.prompts * len(args.endpoint)
    if f"{n_answers} stored" not in out:
        raise SystemExit(f"arena generate did not store {n_answers} answers:\n{out}")
    bare_s = asyncio.run(_bare(args.endpoint, args.prompts, args.max_tokens, args.per_endpoint))
    figures = {
        "answers": n_answers,
        "endpoints": len(args.endpoint),
        "max_tokens": args.max_tokens,
        "generate_s": round(generate_s, 4),
        "bare_client_s": round(bare_s, 4),
        "generate_over_bare": round(generate_s / bare_s, 2),
        "answers_per_s": round(n_answers / generate_s, 1),
        **machine_info(),
    }
    print_table(
        ["what", "answers", "wall s", "answers/s"],
        [
            [
                "arena generate (store, commits, costs)",
                n_answers,
                figures["generate_s"],
                figures["answers_per_s"],
            ],
            ["EndpointClient alone", n_answers, figures["bare_client_s"], round(n_answers / bare_s, 1)],
        ],
    )
    emit_json_line(figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
