"""The tests' own LLM server harness: tiny GGUF models, a bounded start-up, skip or fail under CI."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest

from tests.llm_servers import (
    N_VOCAB,
    SPECIAL_TOKENS,
    require_llama_server,
    skip_or_fail,
    start_llama_server,
    write_tiny_llama,
)


def test_a_tiny_model_is_half_a_megabyte_of_llama_with_a_byte_vocabulary(tmp_path: Path) -> None:
    path = write_tiny_llama(tmp_path / "m.gguf", seed=1)
    assert 300_000 < path.stat().st_size < 700_000
    reader = gguf.GGUFReader(path)
    arch = reader.fields["general.architecture"]
    assert bytes(arch.parts[arch.data[0]]).decode() == "llama"
    tokens = reader.fields["tokenizer.ggml.tokens"]
    names = [bytes(tokens.parts[i]).decode() for i in tokens.data]
    assert len(names) == N_VOCAB == len(SPECIAL_TOKENS) + 256
    assert names[len(SPECIAL_TOKENS)] == "<0x00>" and names[-1] == "<0xFF>"
    shapes = {t.name: tuple(int(d) for d in t.shape) for t in reader.tensors}
    assert shapes["token_embd.weight"] == (64, N_VOCAB)  # llama.cpp's order: {n_embd, n_vocab}
    assert shapes["blk.1.ffn_down.weight"] == (128, 64)
    assert not any(name.startswith("blk.2.") for name in shapes)


def test_seeds_give_different_weights_and_the_same_seed_the_same_file(tmp_path: Path) -> None:
    one = write_tiny_llama(tmp_path / "a.gguf", seed=1).read_bytes()
    again = write_tiny_llama(tmp_path / "b.gguf", seed=1).read_bytes()
    other = write_tiny_llama(tmp_path / "c.gguf", seed=2).read_bytes()
    assert one == again
    assert one != other and len(one) == len(other)
    differing = np.frombuffer(one, np.uint8) != np.frombuffer(other, np.uint8)
    assert differing.sum() > 100_000  # the weights, not a name in the header


def test_a_server_that_cannot_start_raises_with_its_log(tmp_path: Path) -> None:
    require_llama_server()
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a gguf file")
    with pytest.raises(RuntimeError, match="exited") as caught:
        with start_llama_server(broken, model_id="broken", log_dir=tmp_path, start_timeout_s=60):
            pass
    assert f"Failed to load model from file: {broken}" in str(caught.value)  # the end of the server's log


def test_an_unavailable_server_is_a_skip_outside_ci_and_a_failure_under_ci(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no llama here"):
        skip_or_fail("no llama here")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="under CI: no llama here"):
        skip_or_fail("no llama here")


def test_the_start_up_wait_is_bounded_and_the_server_is_killed_after_it(tmp_path: Path) -> None:
    require_llama_server()
    model = write_tiny_llama(tmp_path / "late-start.gguf", seed=4)
    with pytest.raises(RuntimeError, match="not ready in 0 s"):
        with start_llama_server(model, model_id="late", log_dir=tmp_path, start_timeout_s=0.05):
            pass
    assert [cmdline for cmdline in _command_lines() if str(model).encode() in cmdline] == []


def _command_lines() -> list[bytes]:
    """Every live process's command line (those that end while being read are left out)."""
    lines = []
    for path in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            lines.append(path.read_bytes())
        except OSError:
            continue
    return lines
