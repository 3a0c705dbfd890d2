"""Real OpenAI-compatible inference servers for the tests: tiny random llama models under llama.cpp.

A model is written here, not downloaded: `write_tiny_llama` lays out a GGUF file for llama.cpp's
``llama`` architecture with a byte-level SentencePiece vocabulary (three SentencePiece specials, the two
ChatML markers and the 256 ``<0xXX>`` byte tokens), 2 layers of width 64, random weights drawn from one
seed. Different seeds are different "models". `start_llama_server` runs
``python -m llama_cpp.server --chat_format chatml`` on one of them in its own process group, waits a
bounded time for ``/v1/models`` to answer, and kills the whole group at the end.

The weights reserve one residual dimension (`_CONSTANT_DIM`): every token embedding holds a positive
constant there and no layer writes to it, so the final hidden state is always positive in that
dimension, and the output rows of the tokens it must never write point the other way: the special
tokens and every byte that is not printable ASCII or a newline. The model therefore never ends its own
turn (answers run until ``max_tokens`` or until a grammar closes them, so tests can count tokens and
stream chunks exactly) and its text is always valid UTF-8.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import gguf
import numpy as np
import numpy.typing as npt
import pytest

from tests.script_modules import load_script

__all__ = [
    "LlamaServer",
    "LlamaServers",
    "llama_server_missing",
    "require_llama_server",
    "skip_or_fail",
    "start_llama_server",
    "write_tiny_llama",
]

_BENCH = load_script("_bench_common")  # its free_port

#: SentencePiece's own specials, then the ChatML turn markers; the 256 byte tokens follow them.
SPECIAL_TOKENS: tuple[str, ...] = ("<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>")
N_VOCAB = len(SPECIAL_TOKENS) + 256
N_EMBD = 64
N_LAYER = 2
N_HEAD = 4
N_FF = 128
CONTEXT_LENGTH = 4096
_CONSTANT_DIM = 0  # the residual dimension no layer writes to (see the module docstring)
_CONSTANT_VALUE = 8.0
_NEVER_LOGIT_WEIGHT = -10.0
#: The bytes the model writes: printable ASCII and the newline (no broken UTF-8, no control bytes).
_WRITTEN_BYTES = (0x0A, *range(0x20, 0x7F))

#: Seconds a server may take from launch to answering ``/v1/models``.
START_TIMEOUT_S = 60.0


def _tensor_name(kind: gguf.MODEL_TENSOR, layer: int | None = None) -> str:
    name = gguf.TENSOR_NAMES[kind]
    return (name.format(bid=layer) if layer is not None else name) + ".weight"


def _tiny_llama_tensors(
    seed: int, n_embd: int = N_EMBD, n_layer: int = N_LAYER
) -> dict[str, npt.NDArray[np.float32]]:
    """The weights by GGUF tensor name, numpy shapes as (out, in) like a torch ``Linear``.

    gguf reverses the numpy shape when it writes, which gives llama.cpp's ``{in, out}`` order.
    """
    rng = np.random.default_rng(seed)
    n_ff = N_FF * n_embd // N_EMBD  # the default model's ratio
    scale = 1.0 / np.sqrt(n_embd)

    def normal(shape: tuple[int, ...], std: float) -> npt.NDArray[np.float32]:
        return rng.normal(0.0, std, size=shape).astype(np.float32)

    def writes_residual(shape: tuple[int, ...], std: float) -> npt.NDArray[np.float32]:
        weight = normal(shape, std)
        weight[_CONSTANT_DIM, :] = 0.0  # nothing is added to the reserved dimension
        return weight

    embedding = normal((N_VOCAB, n_embd), 1.0)
    embedding[:, _CONSTANT_DIM] = _CONSTANT_VALUE
    output = normal((N_VOCAB, n_embd), 0.3)
    never = np.ones(N_VOCAB, dtype=bool)
    never[[len(SPECIAL_TOKENS) + b for b in _WRITTEN_BYTES]] = False
    output[never, :] = 0.0
    output[never, _CONSTANT_DIM] = _NEVER_LOGIT_WEIGHT
    ones = np.ones(n_embd, dtype=np.float32)

    T = gguf.MODEL_TENSOR
    tensors = {
        _tensor_name(T.TOKEN_EMBD): embedding,
        _tensor_name(T.OUTPUT_NORM): ones,
        _tensor_name(T.OUTPUT): output,
    }
    for layer in range(n_layer):
        tensors |= {
            _tensor_name(T.ATTN_NORM, layer): ones,
            _tensor_name(T.ATTN_Q, layer): normal((n_embd, n_embd), scale),
            _tensor_name(T.ATTN_K, layer): normal((n_embd, n_embd), scale),
            _tensor_name(T.ATTN_V, layer): normal((n_embd, n_embd), scale),
            _tensor_name(T.ATTN_OUT, layer): writes_residual((n_embd, n_embd), scale),
            _tensor_name(T.FFN_NORM, layer): ones,
            _tensor_name(T.FFN_GATE, layer): normal((n_ff, n_embd), scale),
            _tensor_name(T.FFN_UP, layer): normal((n_ff, n_embd), scale),
            _tensor_name(T.FFN_DOWN, layer): writes_residual((n_embd, n_ff), 1.0 / np.sqrt(n_ff)),
        }
    return tensors


def write_tiny_llama(path: Path, *, seed: int, n_embd: int = N_EMBD, n_layer: int = N_LAYER) -> Path:
    """Write a random byte-vocabulary llama model for llama.cpp to ``path`` (about half a megabyte).

    ``n_embd`` and ``n_layer`` make it wider and deeper, so slower per token: a slow model of its own,
    for tests where speed must differ."""
    writer = gguf.GGUFWriter(path, gguf.MODEL_ARCH_NAMES[gguf.MODEL_ARCH.LLAMA])
    writer.add_name(f"arena-tiny-llama-seed-{seed}")
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_context_length(CONTEXT_LENGTH)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(N_FF * n_embd // N_EMBD)
    writer.add_head_count(N_HEAD)
    writer.add_head_count_kv(N_HEAD)
    writer.add_rope_dimension_count(n_embd // N_HEAD)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(N_VOCAB)

    writer.add_tokenizer_model("llama")  # SentencePiece; unknown text falls back to the byte tokens
    writer.add_token_list([*SPECIAL_TOKENS, *(f"<0x{b:02X}>" for b in range(256))])
    writer.add_token_scores([0.0] * N_VOCAB)
    writer.add_token_types(
        [gguf.TokenType.UNKNOWN]
        + [gguf.TokenType.CONTROL] * (len(SPECIAL_TOKENS) - 1)
        + [gguf.TokenType.BYTE] * 256
    )
    writer.add_unk_token_id(0)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(SPECIAL_TOKENS.index("<|im_end|>"))
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)
    writer.add_add_space_prefix(False)

    for name, tensor in _tiny_llama_tensors(seed, n_embd, n_layer).items():
        writer.add_tensor(name, tensor)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def llama_server_missing() -> str | None:
    """Why no llama.cpp server can run here, or None when ``llama_cpp.server`` is importable."""
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed (./dev test installs it from the wheel cache)"
    for module in ("sse_starlette", "starlette_context"):
        if importlib.util.find_spec(module) is None:
            return f"llama-cpp-python's [server] extra is missing ({module})"
    return None


@dataclass
class LlamaServer:
    """A running ``llama_cpp.server``: its OpenAI base URL (``.../v1``), served model id and process."""

    base_url: str
    model_id: str
    process: subprocess.Popen[bytes]
    log_path: Path

    def log_tail(self, n_chars: int = 2000) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")[-n_chars:]

    def kill(self) -> None:
        """A crash: SIGKILL to the whole process group, no chance to finish what it is sending."""
        _signal_group(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=5)

    def stop(self) -> None:
        """Kill the server's whole process group (TERM, then KILL after 5 s) and reap it."""
        if self.process.poll() is None:
            _signal_group(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                _signal_group(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=5)
        _signal_group(self.process.pid, signal.SIGKILL)  # anything the server left behind in its group


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:  # noqa: S310 - a loopback URL
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@contextmanager
def start_llama_server(
    model_path: Path,
    *,
    model_id: str,
    log_dir: Path,
    start_timeout_s: float = START_TIMEOUT_S,
) -> Iterator[LlamaServer]:
    """Serve ``model_path`` on a free loopback port; yield it once ``/v1/models`` answers.

    Raises ``RuntimeError`` (with the end of the server's log) when the process exits or does not
    answer within ``start_timeout_s``. The process group is killed on exit in every case.
    """
    port = _BENCH.free_port()
    log_path = log_dir / f"{model_id}-{port}.log"
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model_path),
        "--model_alias",
        model_id,
        "--chat_format",
        "chatml",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(CONTEXT_LENGTH),
        "--n_threads",
        "1",
        "--verbose",
        "False",
    ]
    with log_path.open("wb") as log:
        process = subprocess.Popen(  # noqa: S603 - our own interpreter and arguments
            command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
        )
    server = LlamaServer(f"http://127.0.0.1:{port}/v1", model_id, process, log_path)
    try:
        deadline = time.monotonic() + start_timeout_s
        while not _answers(f"{server.base_url}/models"):
            if process.poll() is not None:
                raise RuntimeError(f"llama.cpp server exited with {process.returncode}:\n{server.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"llama.cpp server not ready in {start_timeout_s:.0f} s:\n{server.log_tail()}"
                )
            time.sleep(0.1)
        yield server
    finally:
        server.stop()


def skip_or_fail(reason: str) -> None:
    """A skip that says why on a developer machine; under ``CI=true`` a failure."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"LLM test server unavailable under CI: {reason}")
    pytest.skip(f"LLM test server unavailable: {reason}")


def require_llama_server() -> None:
    """Skip (or under CI fail) the calling test when llama.cpp's server cannot run here."""
    missing = llama_server_missing()
    if missing is not None:
        skip_or_fail(missing)


@dataclass
class LlamaServers:
    """Servers started on demand, one per model, all stopped by `close` (a session fixture holds it)."""

    folder: Path
    _running: dict[tuple[int, int, int], LlamaServer] = field(default_factory=dict)
    _stack: ExitStack = field(default_factory=ExitStack)

    def get(self, seed: int, *, n_embd: int = N_EMBD, n_layer: int = N_LAYER) -> LlamaServer:
        """The server of the tiny model with ``seed`` (wider and deeper with ``n_embd`` and ``n_layer``;
        started on first use; a skip or CI failure)."""
        key = (seed, n_embd, n_layer)
        if key not in self._running:
            require_llama_server()
            size = "" if (n_embd, n_layer) == (N_EMBD, N_LAYER) else f"-{n_embd}x{n_layer}"
            name = f"tiny-llama-{seed}{size}"
            model = write_tiny_llama(self.folder / f"{name}.gguf", seed=seed, n_embd=n_embd, n_layer=n_layer)
            try:
                self._running[key] = self._stack.enter_context(
                    start_llama_server(model, model_id=name, log_dir=self.folder)
                )
            except RuntimeError as exc:
                skip_or_fail(str(exc))
        return self._running[key]

    def close(self) -> None:
        self._running.clear()
        self._stack.close()
