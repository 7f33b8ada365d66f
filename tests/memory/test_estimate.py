"""estimate_memory against real steps on the CPU: the exact cases, the rules, the API contract."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from trainspeed import estimate_memory
from trainspeed.memory import EstimateError, measure_memory
from trainspeed.memory.result import CATEGORIES
from trainspeed.workloads import ZOO


def _inputs(name: str):  # type: ignore[no-untyped-def]
    e = ZOO[name]
    if e.input_dtype.is_floating_point:
        return lambda b: torch.randn(b, *e.input_shape)
    return lambda b: torch.randint(0, e.input_high, (b, *e.input_shape))


# Cases where every byte is visible to the replay: the prediction is exact to the byte or nearly.
EXACT = [("iris-mlp", "sgd", None, 8), ("gpt", "adam", None, 8), ("gpt", "sgd", "bf16", 8),
         ("inplace-mlp", "adam", None, 16), ("shared-layer", "sgd-momentum", None, 8),
         ("resnet-cnn", "adam", "bf16", 8), ("digits-cnn", "sgd", "bf16", 8)]


@pytest.mark.parametrize(("name", "opt", "amp", "batch"), EXACT)
def test_prediction_matches_the_measured_peak(name: str, opt: str, amp: str | None, batch: int) -> None:
    est = estimate_memory(ZOO[name].factory, _inputs(name), batch, optimizer=opt, amp=amp)
    real = measure_memory(ZOO[name].factory, _inputs(name), batch, optimizer=opt, amp=amp)
    assert est.total_bytes == pytest.approx(real.peak_bytes, rel=0.01)


@pytest.mark.parametrize(("name", "batch"), [("resnet-cnn", 1), ("resnet-cnn", 64), ("digits-cnn", 8)])
def test_fp32_onednn_convolutions_are_exact(name: str, batch: int) -> None:
    # oneDNN's reorder buffers around an fp32 convolution come from asking the real kernel
    est = estimate_memory(ZOO[name].factory, _inputs(name), batch, optimizer="sgd")
    real = measure_memory(ZOO[name].factory, _inputs(name), batch, optimizer="sgd")
    assert est.total_bytes == pytest.approx(real.peak_bytes, rel=0.01)


def test_checkpointing_saves_activations_and_stays_exact() -> None:
    plain = estimate_memory(ZOO["gpt"].factory, _inputs("gpt"), 16, optimizer="sgd")
    ckpt = estimate_memory(ZOO["gpt"].factory, _inputs("gpt"), 16, optimizer="sgd", checkpointing=True)
    real = measure_memory(ZOO["gpt"].factory, _inputs("gpt"), 16, optimizer="sgd", checkpointing=True)
    assert ckpt.total_bytes < plain.total_bytes
    assert ckpt.total_bytes == pytest.approx(real.peak_bytes, rel=0.01)


def test_breakdown_sums_to_total_and_linear_model_reproduces_it() -> None:
    est = estimate_memory(ZOO["resnet-cnn"].factory, (3, 32, 32), 8, optimizer="adam")
    assert set(est.breakdown) == set(CATEGORIES)
    assert sum(est.breakdown.values()) == est.total_bytes
    assert est.predict(8) == pytest.approx(est.total_bytes, abs=2)
    assert est.per_sample_bytes > 0 and est.fixed_bytes > 0


@pytest.mark.parametrize(("opt", "state_per_param_byte"), [("sgd", 0), ("sgd-momentum", 1), ("adam", 2), ("rmsprop", 1)])
def test_optimizer_state_as_the_optimizer_lays_it_out(opt: str, state_per_param_byte: int) -> None:
    est = estimate_memory(lambda: nn.Linear(512, 512), (512,), 4, optimizer=opt)
    params = est.breakdown["params"]
    scalars = est.breakdown["optimizer"] - state_per_param_byte * params  # Adam's step counters
    assert 0 <= scalars <= 2 * 8


def test_weight_tying_counts_the_shared_tensor_once() -> None:
    est = estimate_memory(ZOO["gpt"].factory, _inputs("gpt"), 1, optimizer="sgd")
    model = ZOO["gpt"].factory()
    unique = {p.data_ptr(): p.numel() for p in model.parameters()}
    assert est.param_count == sum(unique.values())
    assert est.breakdown["params"] == 4 * sum(unique.values())


def test_a_layer_used_twice_has_two_rows() -> None:
    est = estimate_memory(ZOO["shared-layer"].factory, (128,), 4, optimizer="sgd")
    names = [row.name for row in est.layers]
    assert "shared" in names and "shared (call 2)" in names
    first = next(r for r in est.layers if r.name == "shared")
    assert first.params == 256 * 256 + 256 and first.output_shape == [4, 256]


def test_a_huge_model_is_estimated_without_allocating_it() -> None:
    # 40 GB of fp32 weights: only a fake-tensor replay can do this on the CI machine
    est = estimate_memory(lambda: nn.Linear(100_000, 100_000), (100_000,), 2, optimizer="sgd")
    assert est.breakdown["params"] == 4 * (100_000 * 100_000 + 100_000)
    assert est.total_bytes > 2 * est.breakdown["params"]


def test_a_module_instance_is_left_untouched() -> None:
    model = nn.Linear(8, 4)
    before = [p.detach().clone() for p in model.parameters()]
    estimate_memory(model, (8,), 4, optimizer="adam")
    measure_memory(model, (8,), 4, optimizer="adam")
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert all(p.grad is None for p in model.parameters())


def test_cuda_target_rounds_to_allocator_blocks_even_without_cuda() -> None:
    cpu = estimate_memory(ZOO["iris-mlp"].factory, (4,), 3, optimizer="sgd")
    cuda = estimate_memory(ZOO["iris-mlp"].factory, (4,), 3, optimizer="sgd", device="cuda")
    assert cuda.total_bytes % 512 == 0 and cuda.total_bytes > cpu.total_bytes
    assert cuda.breakdown["workspace"] >= 8 * 2**20  # cuBLAS's, held from the first matmul on
    assert cpu.breakdown["workspace"] == 0
    if not torch.cuda.is_available():
        assert any("no CUDA here" in n for n in cuda.notes)


class ReadsValues(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = float(x.abs().max())  # data-dependent: meta tensors have no values
        return self.fc(x) * scale


def test_a_forward_that_needs_values_names_the_failing_op() -> None:
    with pytest.raises(EstimateError, match=r"at aten\.\w+"):
        estimate_memory(ReadsValues, (4,), 2)


def test_an_initialiser_that_reads_values_does_not_stop_the_build(monkeypatch: pytest.MonkeyPatch) -> None:
    def resampling_normal_(tensor: torch.Tensor, *args: object, **kwargs: object) -> torch.Tensor:
        if not (tensor.abs() < 10).all():  # as torch 2.14's trunc_normal_ tests its samples
            tensor.zero_()
        return tensor

    def build() -> nn.Module:
        model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
        for layer in (model[0], model[2]):
            nn.init.normal_(layer.weight)  # looked up at call time, as torchvision's models do
        return model

    plain = estimate_memory(build, (16,), 8).total_bytes
    monkeypatch.setattr(nn.init, "normal_", resampling_normal_)
    assert estimate_memory(build, (16,), 8).total_bytes == plain
    assert nn.init.normal_ is resampling_normal_ and nn.init.kaiming_uniform_.__name__ == "kaiming_uniform_"


def test_a_factory_that_reads_values_itself_is_built_for_real_and_says_so() -> None:
    def build() -> nn.Module:
        model = nn.Linear(4, 4)
        if float(model.weight.sum()) > 100:  # the user's own code, not an initialiser
            model.weight.data.zero_()
        return model

    est = estimate_memory(build, (4,), 2)
    assert est.total_bytes == estimate_memory(lambda: nn.Linear(4, 4), (4,), 2).total_bytes
    assert any("built for real on the CPU (80 B of parameters" in n for n in est.notes)


@pytest.mark.parametrize("batch, opt", [(8, "sgd"), (64, "adam")])
def test_lstm_workspace_is_sized_by_the_real_kernel(batch: int, opt: str) -> None:
    # oneDNN's LSTM keeps a training workspace the meta function reports as empty (half the peak here)
    est = estimate_memory(ZOO["rnn"].factory, (32, 16), batch, optimizer=opt)
    real = measure_memory(ZOO["rnn"].factory, (32, 16), batch, optimizer=opt)
    assert est.total_bytes == pytest.approx(real.peak_bytes, rel=0.01)
    assert not any("oneDNN" in n for n in est.notes)


def test_lstm_workspace_that_cannot_be_probed_is_flagged(monkeypatch: pytest.MonkeyPatch) -> None:
    from trainspeed.memory import kernel_probe

    monkeypatch.setattr(kernel_probe, "PROBE_LIMIT_BYTES", 0)
    monkeypatch.setattr(kernel_probe, "_probed", {})
    est = estimate_memory(ZOO["rnn"].factory, (32, 16), 2, optimizer="sgd")
    assert any("oneDNN" in n for n in est.notes)


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        estimate_memory(ZOO["iris-mlp"].factory, (4,), 0)
    with pytest.raises(ValueError, match="unknown optimizer"):
        estimate_memory(ZOO["iris-mlp"].factory, (4,), 1, optimizer="lion")
    with pytest.raises(ValueError, match="amp"):
        estimate_memory(ZOO["iris-mlp"].factory, (4,), 1, amp="fp8")
    with pytest.raises(TypeError, match="not an nn.Module"):
        estimate_memory(lambda: 42, (4,), 1)  # type: ignore[arg-type, return-value]


def test_no_warning_of_the_estimators_own_machinery_reaches_the_user() -> None:
    # nn.TransformerEncoder deep-copies its layer while the factory builds it under FakeTensorMode: torch warned
    # "Accessing the data pointer of FakeTensor is deprecated" on the user's terminal during every such estimate
    import warnings

    def encoder() -> nn.Module:
        layer = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)
        return nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        est = estimate_memory(encoder, lambda b: torch.randn(b, 16, 32), 4, optimizer="adamw")
    assert est.total_bytes > 0
    assert [str(w.message) for w in seen if "FakeTensor" in str(w.message)] == []


def test_deep_copied_fake_parameters_share_storage_with_their_views_again() -> None:
    import copy
    import warnings

    from torch._subclasses.fake_tensor import FakeTensorMode

    from trainspeed.memory.estimate import _renew_unshared, _shares_its_storage

    with warnings.catch_warnings(), FakeTensorMode(allow_non_fake_inputs=True):
        warnings.simplefilter("ignore")
        layer = nn.Linear(4, 4)
        model = nn.Sequential(copy.deepcopy(layer), copy.deepcopy(layer))  # nn.TransformerEncoder does this
        model.append(model[0])  # one module twice: its parameters stay one
        assert not _shares_its_storage(model[0].weight)  # torch's deepcopy of a fake tensor
        _renew_unshared(model)
        assert all(_shares_its_storage(p) for p in model.parameters())
        assert model[2].weight is model[0].weight and isinstance(model[0].weight, nn.Parameter)


def test_an_attention_too_large_to_probe_is_said_to_be_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    from trainspeed.memory import kernel_probe

    class Attention(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.scaled_dot_product_attention(x, x, x)

    monkeypatch.setattr(kernel_probe, "PROBE_LIMIT_MACS", 0)
    monkeypatch.setattr(kernel_probe, "_probed", {})
    est = estimate_memory(lambda: nn.Sequential(nn.Linear(16, 16), Attention()), (2, 32, 16), 2)
    assert any("flash-attention" in note for note in est.notes)


class _ReadsAValue(nn.Module):
    """A model whose construction reads a tensor's value (as Hugging Face's ViT initialisation does): neither fake
    nor meta tensors can give it."""

    def __init__(self, scale: float | None = None) -> None:
        super().__init__()
        self.fc = nn.Linear(64, 256)
        self.out = nn.Linear(256, 10)
        self.scale = float(torch.linspace(0.5, 2.0, 4).mean().item()) if scale is None else scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.fc(x))) * self.scale


def test_a_model_whose_construction_reads_a_value_is_built_for_real_and_estimated_the_same() -> None:
    est = estimate_memory(_ReadsAValue, [64], batch_size=32)
    plain = estimate_memory(lambda: _ReadsAValue(scale=1.25), [64], batch_size=32)
    assert est.total_bytes == plain.total_bytes and est.breakdown == plain.breakdown
    assert any("built for real on the CPU" in n for n in est.notes)
    assert not any("built" in n for n in plain.notes)


def test_a_value_reading_model_too_large_for_memory_is_not_built(monkeypatch: pytest.MonkeyPatch) -> None:
    import trainspeed.memory.estimate as estimate_module

    monkeypatch.setattr(estimate_module, "REAL_BUILD_SHARE", 1e-12)
    with pytest.raises(EstimateError, match="not built for real"):
        estimate_memory(_ReadsAValue, [64], batch_size=32)
