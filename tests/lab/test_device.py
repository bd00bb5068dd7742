"""PRENORM_DEVICE: one setting moves training to a GPU; unset, everything stays on the CPU.

No GPU is lent to these tests: the CUDA and MPS branches are exercised with torch's own
availability checks patched, and a model is shown to move by sending it to the "meta"
device, which any torch build has. What runs on a real GPU is said in the README.
"""

from __future__ import annotations

import pytest
import torch

from prenorm_lib import RotaryPositionalEmbedding
from prenorm_lib.lab import data, experiments, train


@pytest.fixture(scope="module")
def corpus():
    return data.make_corpus(n_train_sentences=200, n_val_sentences=50)


@pytest.mark.parametrize("value", [None, "", "cpu", " CPU "])
def test_unset_or_cpu_means_the_cpu(monkeypatch, value):
    if value is None:
        monkeypatch.delenv(train.DEVICE_ENV, raising=False)
    else:
        monkeypatch.setenv(train.DEVICE_ENV, value)
    assert train.default_device() == torch.device("cpu")


@pytest.mark.parametrize("value", ["gpu", "cuda:x", "mps:0", "tpu"])
def test_an_unknown_device_is_named(monkeypatch, value):
    monkeypatch.setenv(train.DEVICE_ENV, value)
    with pytest.raises(ValueError, match=rf"PRENORM_DEVICE must be one of cpu, cuda, mps \(or cuda:N\), got '{value}'"):
        train.default_device()


def test_cuda_without_a_gpu_says_what_to_do(monkeypatch):
    monkeypatch.setenv(train.DEVICE_ENV, "cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="sees no CUDA GPU: install a CUDA build of torch, or unset PRENORM_DEVICE"):
        train.default_device()


def test_mps_off_a_mac_says_what_to_do(monkeypatch):
    monkeypatch.setenv(train.DEVICE_ENV, "mps")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="cannot use Apple's MPS"):
        train.default_device()


@pytest.mark.parametrize(("value", "available"), [("cuda", "cuda"), ("cuda:1", "cuda"), ("mps", "mps")])
def test_an_available_gpu_is_chosen(monkeypatch, value, available):
    monkeypatch.setenv(train.DEVICE_ENV, value)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: available == "cuda")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: available == "mps")
    assert train.default_device() == torch.device(value)


def test_build_model_goes_where_the_setting_says_with_the_same_weights(corpus, monkeypatch):
    on_cpu = train.build_model(corpus, seed=5)
    assert {p.device.type for p in on_cpu.parameters()} == {"cpu"}
    monkeypatch.setattr(train, "default_device", lambda: torch.device("meta"))  # stands in for a GPU
    moved = train.build_model(corpus, seed=5)
    assert {p.device.type for p in moved.parameters()} == {"meta"}
    # The weights are drawn on the CPU, then moved: the same model on every device.
    again = train.build_model(corpus, seed=5, device="cpu")
    assert all(torch.equal(a, b) for a, b in zip(on_cpu.parameters(), again.parameters(), strict=True))


def test_records_note_the_device_and_fingerprints_stay_on_the_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setenv(train.DEVICE_ENV, "cuda")
    assert experiments.environment(1)["device"] == "cuda"
    monkeypatch.delenv(train.DEVICE_ENV)
    assert experiments.environment(1)["device"] == "cpu"


def test_a_fingerprint_runs_on_the_cpu_whatever_the_setting(monkeypatch):
    import sys
    import types

    module = types.ModuleType("prenorm_lib.lab.experiments.toy")
    module.DESCRIPTION, module.CONFIG, module.FINGERPRINT = "where it ran", {"seeds": [0]}, {}
    module.run_seed = lambda config, seed: {"device": str(train.default_device())}
    monkeypatch.setitem(sys.modules, "prenorm_lib.lab.experiments.toy", module)
    monkeypatch.setattr(experiments, "available", lambda: ["toy"])
    monkeypatch.setenv(train.DEVICE_ENV, "mps")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert experiments.fingerprint("toy")["result"] == {"device": "cpu"}
    assert train.default_device() == torch.device("mps")  # the setting is back


def test_rope_on_mps_avoids_complex_numbers(monkeypatch):
    """On MPS, RoPE rotates with the real form (the same numbers as the complex product).

    No MPS tensor can be made here: a tensor that says it lives on MPS takes the branch.
    (Sinusoidal positions compute their float64 angles on the CPU there; not testable here.)
    """
    rope = RotaryPositionalEmbedding(10000.0, 8, 16)
    x = torch.randn(2, 16, 8)
    expected = rope(x)

    class MpsLike(torch.Tensor):
        @property
        def device(self):
            return torch.device("mps")

    complex_calls = []
    monkeypatch.setattr("prenorm_lib.rope.rotate_complex", lambda *a: complex_calls.append(a))
    assert torch.allclose(rope(x.as_subclass(MpsLike)).as_subclass(torch.Tensor), expected, atol=1e-6)
    assert complex_calls == []
