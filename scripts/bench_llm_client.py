"""Benchmark arena.llm's EndpointClient: many short completions against one endpoint, a few in flight.

Usage::

    python scripts/bench_llm_client.py --base-url http://127.0.0.1:8000/v1 --model tiny -n 1000

Any OpenAI-compatible server works; the figure in docs/llm-endpoints.md is the tests' tiny llama model
under llama-cpp-python's server (see that page for how to start one by hand). Every request is the same
short prompt, greedy, ``--max-tokens`` long. The last line of output is a JSON object with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import time

import numpy as np
from _bench_common import emit_json_line, machine_info, print_table

from arena.llm import Completion, EndpointClient, EndpointConfig, Message


async def _run(config: EndpointConfig, n_requests: int) -> tuple[float, list[Completion]]:
    async with EndpointClient(config) as client:
        start = time.perf_counter()
        prompts = [[Message(role="user", content=f"Say something ({i}).")] for i in range(n_requests)]
        done = await asyncio.gather(*(client.complete(prompt) for prompt in prompts))
        return time.perf_counter() - start, list(done)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("-n", "--requests", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=8)
    args = parser.parse_args(argv)

    config = EndpointConfig(
        name="bench",
        base_url=args.base_url,
        model=args.model,
        temperature=0.0,
        max_tokens=args.max_tokens,
        max_concurrency=args.concurrency,
        json_schema_mode="json_object",
    )
    wall, done = asyncio.run(_run(config, args.requests))
    latencies = np.array([c.latency_s for c in done])
    n_tokens = sum(c.completion_tokens or 0 for c in done)
    figures = {
        "requests": args.requests,
        "concurrency": args.concurrency,
        "max_tokens": args.max_tokens,
        "wall_s": round(wall, 2),
        "requests_per_s": round(args.requests / wall, 1),
        "completion_tokens_per_s": round(n_tokens / wall, 1),
        "latency_p50_ms": round(float(np.percentile(latencies, 50)) * 1000, 1),
        "latency_p99_ms": round(float(np.percentile(latencies, 99)) * 1000, 1),
        **machine_info(),
    }
    print_table(["figure", "value"], list(figures.items()))
    emit_json_line(figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
