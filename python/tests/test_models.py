"""convert() on real models: converted against original outputs, eval and training mode.

Models use random weights (no download) and small inputs (batch 2, 3x64x64) to stay fast.
Outputs are compared as max abs diff over the output's scale (max |y|): float32 rounding of
different summation orders, compounded over dozens of layers, stays well below 1e-4 in eval
mode. Training-mode BatchNorm normalizes over as few as 8 values per channel in the last stages
(batch 2, 2x2), which amplifies those differences, hence 1e-3 there.
"""
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
        mask = torch.full((t, t), float("-inf")).triu(1)
        x = self.tok(idx) + self.pos(torch.arange(t))
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.norm(x))


def test_gpt_decoder():
    model = Decoder()
    for p in model.parameters():  # non-trivial norm weights
        if p.dim() == 1:
            nn.init.normal_(p, 1.0, 0.2)
    model.eval()
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


# ---- module behaviour ------------------------------------------------------------------------

def test_grad_mode_falls_back_to_torch():
    m = nn.LayerNorm(16)
    simdnorm_torch.convert(m)
    x = torch.randn(4, 16, requires_grad=True)
    before = simdnorm_torch.fallback_counts().get("layer_norm: autograd", 0)
    m(x).sum().backward()
    assert x.grad is not None and m.weight.grad is not None
    assert simdnorm_torch.fallback_counts()["layer_norm: autograd"] == before + 1


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
