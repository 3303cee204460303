"""convert() on real models: converted against original outputs, eval and training mode.

Models use random weights (no download) and small inputs (batch 2, 3x64x64) to stay fast.
Outputs are compared as max abs diff over the output's scale (max |y|): float32 rounding of
different summation orders, compounded over dozens of layers, stays well below 1e-4 in eval
mode. Training-mode BatchNorm normalizes over as few as 8 values per channel in the last stages
(batch 2, 2x2), which amplifies those differences, hence 1e-3 there.
"""
import contextlib
import copy

import pytest
import torch
import torch.nn.functional as F
import torchvision
from torch import nn

import simdnorm_torch
from simdnorm_torch.modules import _BatchNorm


def rel_diff(a, b):
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()


def assert_top1_agrees(got, want):
    """Same argmax wherever the reference's top-2 margin exceeds the difference seen."""
    diff = (got - want).abs().max()
    top2 = want.topk(2, dim=-1).values
    clear = (top2[..., 0] - top2[..., 1]) > 4 * diff
    assert torch.equal(got.argmax(-1)[clear], want.argmax(-1)[clear])


def converted_pair(model):
    model.eval()
    conv = copy.deepcopy(model)
    report = simdnorm_torch.convert(conv)
    assert conv.state_dict().keys() == model.state_dict().keys()
    return conv, report


def check_model(model, x, expect_converted, eval_tol=1e-4, train_tol=1e-3):
    conv, report = converted_pair(model)
    assert report.num_converted == expect_converted, str(report)
    before = simdnorm_torch.fallback_counts()
    with torch.inference_mode():
        want, got = model(x), conv(x)
    assert rel_diff(got, want) < eval_tol
    assert_top1_agrees(got, want)
    assert simdnorm_torch.fallback_counts() == before, "converted modules fell back to torch"

    # One training-mode forward: batch statistics and the running-statistics update.
    model.train()
    conv.train()
    with torch.no_grad():  # the same dropout / stochastic-depth draws on both sides
        torch.manual_seed(1)
        want = model(x)
        torch.manual_seed(1)
        got = conv(x)
    assert rel_diff(got, want) < train_tol
    bns = [(n, m) for n, m in model.named_modules() if isinstance(m, _BatchNorm)]
    conv_modules = dict(conv.named_modules())
    for name, m in bns:
        c = conv_modules[name]
        # Relative to the layer's scale (the running std; batch means can be ~0): deep layers
        # see inputs that already differ slightly.
        std = m.running_var.max().sqrt()
        assert (c.running_mean - m.running_mean).abs().max() < 1e-4 * std, name
        assert rel_diff(c.running_var, m.running_var) < 1e-4, name
        assert c.num_batches_tracked.item() == m.num_batches_tracked.item() == 1, name
    return report


IMAGE = (2, 3, 64, 64)


def test_resnet50():
    report = check_model(torchvision.models.resnet50(weights=None), torch.randn(IMAGE), 53)
    assert report.skipped == []


def test_resnet50_channels_last():
    model = torchvision.models.resnet50(weights=None).to(memory_format=torch.channels_last)
    x = torch.randn(IMAGE).contiguous(memory_format=torch.channels_last)
    check_model(model, x, 53)


def test_mobilenet_v3_large():
    check_model(torchvision.models.mobilenet_v3_large(weights=None), torch.randn(IMAGE), 46)


def test_convnext_tiny():
    # Its LayerNorm2d (an nn.LayerNorm subclass over the channels of NCHW) stays with PyTorch.
    report = check_model(torchvision.models.convnext_tiny(weights=None), torch.randn(IMAGE), 18)
    assert {cls for _, cls, _ in report.skipped} == {"LayerNorm2d"}
    assert len(report.skipped) == 5


# ---- a small GPT-style decoder -------------------------------------------------------------

class RMSNorm(nn.Module):
    """The usual LLM RMSNorm, as user code writes it."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Block(nn.Module):
    def __init__(self, dim, heads, norm):
        super().__init__()
        self.norm1, self.norm2 = norm(dim), norm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x, mask):
        h = self.norm1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class Decoder(nn.Module):
    def __init__(self, vocab=512, dim=128, heads=4, layers=4, ctx=64):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(ctx, dim)
        norms = [nn.LayerNorm, RMSNorm]
        self.blocks = nn.ModuleList(Block(dim, heads, norms[i % 2]) for i in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        t = idx.shape[1]
        mask = torch.full((t, t), float("-inf"), dtype=self.head.weight.dtype).triu(1)
        x = self.tok(idx) + self.pos(torch.arange(t))
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.norm(x))


def gpt_decoder():
    model = Decoder()
    for p in model.parameters():  # non-trivial norm weights
        if p.dim() == 1:
            nn.init.normal_(p, 1.0, 0.2)
    return model.eval()


def test_gpt_decoder():
    model = gpt_decoder()
    conv = copy.deepcopy(model)
    report = simdnorm_torch.convert(conv, rms_norm_classes=(RMSNorm,))
    assert report.converted == {"LayerNorm": 5, "RMSNorm": 4} and not report.skipped
    assert isinstance(conv.blocks[1].norm1, RMSNorm)
    assert conv.state_dict().keys() == model.state_dict().keys()
    conv.load_state_dict(model.state_dict())  # the same checkpoints load
    idx = torch.randint(0, 512, (2, 64))
    with torch.inference_mode():
        want, got = model(idx), conv(idx)
    assert rel_diff(got, want) < 1e-4
    assert_top1_agrees(got, want)


def test_gpt_decoder_bf16():
    """The decoder in bfloat16: the converted norms run simdnorm (no fallback) and the logits
    stay as close to the float32 model's as PyTorch's own bfloat16 run does. No error bound
    carries through the whole model, so this compares the two bfloat16 runs' distances to the
    float32 logits: simdnorm's norms round once, PyTorch's bfloat16 LayerNorm and the user
    RMSNorm (x.pow(2).mean in bfloat16) several times, hence 1.25 times PyTorch's distance."""
    model = gpt_decoder()
    ref32 = copy.deepcopy(model)
    model = model.to(torch.bfloat16)
    conv = copy.deepcopy(model)
    report = simdnorm_torch.convert(conv, rms_norm_classes=(RMSNorm,))
    assert report.converted == {"LayerNorm": 5, "RMSNorm": 4} and not report.skipped
    idx = torch.randint(0, 512, (2, 64))
    before = simdnorm_torch.fallback_counts()
    with torch.inference_mode():
        want32, want, got = ref32(idx), model(idx), conv(idx)
    assert simdnorm_torch.fallback_counts() == before, "converted modules fell back to torch"
    assert got.dtype == want.dtype == torch.bfloat16
    assert rel_diff(got.float(), want32) <= 1.25 * rel_diff(want.float(), want32)


def test_resnet50_bf16():
    """ResNet-50 in bfloat16, eval and one training-mode forward: its 53 BatchNorms run simdnorm
    (no fallback, running statistics updated in bfloat16) and the logits stay as close to the
    float32 model's as PyTorch's own bfloat16 run does (the measure of test_gpt_decoder_bf16)."""
    model = torchvision.models.resnet50(weights=None).eval()
    ref32 = copy.deepcopy(model)
    model = model.to(torch.bfloat16)
    conv = copy.deepcopy(model)
    report = simdnorm_torch.convert(conv)
    assert report.num_converted == 53 and not report.skipped
    x = torch.randn(IMAGE)
    before = simdnorm_torch.fallback_counts()
    with torch.inference_mode():
        want32, want, got = ref32(x), model(x.bfloat16()), conv(x.bfloat16())
    assert simdnorm_torch.fallback_counts() == before, "converted modules fell back to torch"
    assert got.dtype == want.dtype == torch.bfloat16
    assert rel_diff(got.float(), want32) <= 1.25 * rel_diff(want.float(), want32)
    for m in (ref32, model, conv):
        m.train()
    with torch.no_grad():
        want32, want, got = ref32(x), model(x.bfloat16()), conv(x.bfloat16())
    assert simdnorm_torch.fallback_counts() == before
    assert rel_diff(got.float(), want32) <= 1.25 * rel_diff(want.float(), want32)
    rm = dict(conv.named_buffers())["bn1.running_mean"]
    assert rm.dtype == torch.bfloat16
    assert rel_diff(rm.float(), dict(ref32.named_buffers())["bn1.running_mean"]) <= 2.0 ** -7


class GemmaRMSNorm(nn.Module):
    """Gemma's RMSNorm: float32 statistics, scale 1 + weight (weights stored around 0)."""

    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * (1.0 + self.weight.float())).type_as(x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_gemma_rms_norm_weight_offset(dtype):
    m = GemmaRMSNorm(64).to(dtype)
    with torch.no_grad():
        m.weight.normal_(0.0, 0.2)
    ref = copy.deepcopy(m)
    report = simdnorm_torch.convert(m, rms_norm_classes=[(GemmaRMSNorm, 1.0)])
    assert report.converted == {"GemmaRMSNorm": 1}
    x = torch.randn(3, 5, 64).to(dtype)
    before = simdnorm_torch.fallback_counts()
    with torch.inference_mode():
        got, want = m(x), ref(x)
        assert torch.equal(got, torch.ops.simdnorm.rms_norm(x, [64], m.weight.float() + 1, 1e-6))
    assert simdnorm_torch.fallback_counts() == before
    assert got.dtype == dtype
    # Both compute in float32 (within 2e-5 of the scale, test_ops.py) and round once into the
    # dtype (u: 0, 2^-8, 2^-11), each within 2e-5 + u of the exact value.
    u = {torch.float32: 0.0, torch.bfloat16: 2.0 ** -8, torch.float16: 2.0 ** -11}[dtype]
    assert rel_diff(got.float(), want.float()) <= 2 * (2e-5 + u)
    with pytest.raises(ValueError, match="weight offsets"):
        simdnorm_torch.convert(GemmaRMSNorm(4), rms_norm_classes=[GemmaRMSNorm,
                                                                  (GemmaRMSNorm, 1.0)])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_row_modules_run_half_inputs(dtype):
    """Converted LayerNorm and RMSNorm modules in bfloat16 / float16 run simdnorm; an input whose
    dtype differs from the parameters' runs PyTorch (its result dtype, or its error)."""
    ln, rms = nn.LayerNorm(32).to(dtype), RMSNorm(32).to(dtype)
    with torch.no_grad():
        for p in list(ln.parameters()) + list(rms.parameters()):
            p.normal_()
    ln_ref = copy.deepcopy(ln)
    report = simdnorm_torch.convert(nn.ModuleList([ln, rms]), rms_norm_classes=(RMSNorm,))
    assert report.num_converted == 2 and not report.skipped
    x = torch.randn(4, 32).to(dtype)
    before = simdnorm_torch.fallback_counts()
    with torch.no_grad():
        y_ln, y_rms = ln(x), rms(x)
    assert simdnorm_torch.fallback_counts() == before
    assert y_ln.dtype == y_rms.dtype == dtype
    want = F.layer_norm(x.double(), [32], ln.weight.double(), ln.bias.double(), 1e-5)
    u = 2.0 ** -8 if dtype == torch.bfloat16 else 2.0 ** -11
    assert rel_diff(y_ln.double(), want) <= 2e-5 + u
    if dtype == torch.bfloat16:  # PyTorch 1.13 has no float16 LayerNorm on the CPU
        with torch.no_grad():
            assert rel_diff(y_ln.float(), ln_ref(x).float()) <= 2e-5 + 7 * u
    key = "rms_norm: dtype"
    n = simdnorm_torch.fallback_counts().get(key, 0)
    with torch.no_grad():
        y = rms(x.float())  # float32 input, low-precision weight: PyTorch promotes
    assert y.dtype == torch.float32
    assert simdnorm_torch.fallback_counts()[key] == n + 1


# ---- module behaviour ------------------------------------------------------------------------

def test_grad_mode_falls_back_to_torch():
    m = nn.LayerNorm(16)
    simdnorm_torch.convert(m)
    x = torch.randn(4, 16, requires_grad=True)
    before = simdnorm_torch.fallback_counts().get("layer_norm: autograd", 0)
    m(x).sum().backward()
    assert x.grad is not None and m.weight.grad is not None
    assert simdnorm_torch.fallback_counts()["layer_norm: autograd"] == before + 1


# Each converted module class with an input it runs on simdnorm, [N, C, H, W] with C = 8 (the row
# modules normalize the last dim, 8 as well).
_MODULES = {
    "layer_norm": lambda: nn.LayerNorm(8),
    "rms_norm": lambda: simdnorm_torch.RMSNorm(8),
    "rms_norm_gated": lambda: simdnorm_torch.RMSNormGated(8),
    "group_norm": lambda: nn.GroupNorm(2, 8),
    "instance_norm": lambda: nn.InstanceNorm2d(8, affine=True),
    "batch_norm": lambda: nn.BatchNorm2d(8).eval(),
    "batch_norm train": lambda: nn.BatchNorm2d(8).train(),
}
# What the module's call cannot take, as a change of a dense float32 input.
_OBSTACLES = {
    "dtype": lambda x: x.double(),
    "device": lambda x: x.to("meta"),
    "autograd": lambda x: x.clone().requires_grad_(),
    "layout": lambda x: torch.cat([x, x], -1)[..., ::2],  # the last dim strided
}


@pytest.mark.parametrize("name,reason", [
    (name, reason) for name in _MODULES for reason in _OBSTACLES
    if (name, reason) != ("instance_norm", "layout")])  # its plans take every strided layout
def test_module_fallback_reasons(name, reason):
    """A converted module runs PyTorch's forward on what simdnorm cannot take, with PyTorch's
    result, and counts the reason; the same module runs simdnorm on a dense float32 input."""
    torch.manual_seed(0)
    ref = _MODULES[name]()
    with torch.no_grad():
        for p in ref.parameters():
            p.normal_()
    m = copy.deepcopy(ref)
    simdnorm_torch.convert(m)
    x = torch.randn(2, 8, 3, 8)
    gate = torch.randn(2, 8, 3, 8)
    call = (lambda m, x: m(x, gate)) if name == "rms_norm_gated" else (lambda m, x: m(x))
    before = simdnorm_torch.fallback_counts()
    with torch.no_grad():
        assert rel_diff(call(m, x), call(ref, x)) < 1e-5
    assert simdnorm_torch.fallback_counts() == before
    x = _OBSTACLES[reason](x)
    if reason in ("dtype", "device"):  # the parameters follow, so that PyTorch can run
        to = (lambda t: t.double()) if reason == "dtype" else (lambda t: t.to("meta"))
        ref, m, gate = to(ref), to(m), to(gate)
    key = f"{name.split()[0]}: {reason}"
    with contextlib.nullcontext() if reason == "autograd" else torch.no_grad():
        n = simdnorm_torch.fallback_counts().get(key, 0)
        got = call(m, x)
        assert simdnorm_torch.fallback_counts()[key] == n + 1
        want = call(copy.deepcopy(ref), x)  # (simdnorm's RMSNorm modules fall back too)
    assert got.dtype == want.dtype and got.shape == want.shape
    if reason != "device":
        assert torch.equal(got.detach(), want.detach())


def test_unsupported_configurations_are_reported():
    model = nn.Sequential(nn.InstanceNorm2d(4, track_running_stats=True),
                          nn.InstanceNorm2d(4, affine=True), nn.GroupNorm(2, 4),
                          nn.BatchNorm2d(4).double(), nn.BatchNorm1d(4, momentum=None))
    report = simdnorm_torch.convert(model)
    assert report.converted == {"InstanceNorm2d": 1, "GroupNorm": 1, "BatchNorm1d": 1}
    assert [name for name, _, _ in report.skipped] == ["0", "3"]
    assert "track_running_stats" in report.skipped[0][2]
    assert "float32" in report.skipped[1][2]
    assert "InstanceNorm2d x1" in str(report)


@pytest.mark.parametrize("cls,shape", [(nn.BatchNorm1d, (6, 4)), (nn.BatchNorm1d, (3, 4, 5)),
                                       (nn.BatchNorm2d, (3, 4, 5, 5)),
                                       (nn.BatchNorm3d, (2, 4, 3, 3, 3))])
@pytest.mark.parametrize("momentum,track", [(0.1, True), (None, True), (0.1, False)])
def test_batch_norm_modules(cls, shape, momentum, track):
    ref = cls(4, momentum=momentum, track_running_stats=track)
    conv = copy.deepcopy(ref)
    simdnorm_torch.convert(conv)
    with torch.no_grad():
        for p in ref.parameters():
            p.normal_()
        conv.load_state_dict(ref.state_dict())
        for step in range(3):  # train, train, eval, alternating shapes of the stats' use
            x = torch.randn(shape) * 2 + step
            for m in (ref, conv):
                m.train(step < 2)
            assert rel_diff(conv(x), ref(x)) < 1e-5
            for key, value in ref.state_dict().items():
                assert torch.allclose(conv.state_dict()[key], value, rtol=1e-5, atol=1e-6), key


def test_instance_norm_unbatched_and_group_norm():
    m = nn.InstanceNorm1d(4, affine=True)
    g = nn.GroupNorm(2, 4)
    ref_m, ref_g = copy.deepcopy(m), copy.deepcopy(g)
    simdnorm_torch.convert(m)
    simdnorm_torch.convert(g)
    x = torch.randn(4, 9)
    with torch.no_grad():
        assert rel_diff(m(x), ref_m(x)) < 1e-5
        assert rel_diff(g(x[None]), ref_g(x[None])) < 1e-5
        assert rel_diff(F.group_norm(x[None], 2), g(x[None])) < 1e-5


def test_layer_norm_on_permuted_input_falls_back_without_error():
    m = nn.LayerNorm(8)
    ref = copy.deepcopy(m)
    simdnorm_torch.convert(m)
    x = torch.randn(2, 8, 3, 3).permute(0, 2, 3, 1)  # channels of NCHW, as swin_t's first norm
    before = simdnorm_torch.fallback_counts().get("layer_norm: layout", 0)
    with torch.no_grad():
        assert torch.equal(m(x), ref(x))
    assert simdnorm_torch.fallback_counts()["layer_norm: layout"] == before + 1
