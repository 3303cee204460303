"""torch.ops.simdnorm.* against the PyTorch ops.

Tolerance: both sides compute in float32 with different summation orders (simdnorm: Welford in
SIMD lanes merged with Chan's formula; PyTorch: its own vectorized reductions), so outputs differ
by a few float32 roundings of the statistics, amplified by gamma / std. For the sizes here
(<= 4096 elements per statistic) that stays below 2e-5 of the output's scale (max |y|); the
running statistics below 1e-5 relative (the unbiased variance is rounded once more).
"""
import pytest
import torch
import torch.nn.functional as F

import simdnorm_torch

ops = torch.ops.simdnorm
RTOL = 2e-5


def assert_close(got, want, rtol=RTOL):
    scale = max(want.abs().max().item(), 1.0)
    err = (got - want).abs().max().item()
    assert err <= rtol * scale, f"max abs diff {err:.3g} > {rtol:.1g} * {scale:.3g}"


def layouts(x, channels_last=True):
    """The tensor contiguous, channels_last (4D / 5D) and with padded rows (a batch slice)."""
    out = {"contiguous": x}
    if x.dim() == 4 and channels_last:
        out["channels_last"] = x.contiguous(memory_format=torch.channels_last)
    if x.dim() == 5 and channels_last:
        out["channels_last_3d"] = x.contiguous(memory_format=torch.channels_last_3d)
    padded = torch.zeros((2 * x.shape[0],) + tuple(x.shape[1:]))
    padded[::2] = x
    out["batch_slice"] = padded[::2]
    return out


@pytest.mark.parametrize("shape,norm_ndim", [((3, 7), 1), ((2, 5, 64), 1), ((2, 3, 8, 8), 2),
                                             ((4, 1000), 1), ((1, 4096), 1)])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(shape, norm_ndim, affine):
    x = torch.randn(shape) * 3 + 2
    ns = list(shape[-norm_ndim:])
    w = torch.randn(ns) if affine else None
    b = torch.randn(ns) if affine else None
    want = F.layer_norm(x, ns, w, b, 1e-5)
    for name, xl in layouts(x, channels_last=False).items():
        got = ops.layer_norm(xl, ns, w, b, 1e-5)
        assert got.shape == x.shape, name
        assert_close(got, want)


def rms_reference(x, ns, w, eps):
    dims = tuple(range(-len(ns), 0))
    y = x * torch.rsqrt(x.double().pow(2).mean(dims, keepdim=True) + eps).float()
    return y if w is None else y * w


@pytest.mark.parametrize("shape", [(3, 7), (2, 5, 64), (4, 4096)])
def test_rms_norm(shape):
    x = torch.randn(shape)
    w = torch.randn(shape[-1])
    assert_close(ops.rms_norm(x, [shape[-1]], w, 1e-6), rms_reference(x, [shape[-1]], w, 1e-6))
    assert_close(ops.rms_norm(x, [shape[-1]], None, 1e-6),
                 rms_reference(x, [shape[-1]], None, 1e-6))


BN_SHAPES = [(8, 5), (4, 6, 10), (2, 16, 7, 9), (2, 4, 3, 5, 6)]


@pytest.mark.parametrize("shape", BN_SHAPES)
def test_batch_norm_inference(shape):
    c = shape[1]
    x = torch.randn(shape)
    rm, rv = torch.randn(c), torch.rand(c) + 0.1
    w, b = torch.randn(c), torch.randn(c)
    want = F.batch_norm(x, rm, rv, w, b, False, 0.1, 1e-5)
    for name, xl in layouts(x).items():
        got = ops.batch_norm(xl, w, b, rm, rv, None, False, 0.1, False, 1e-5)
        assert_close(got, want)
        if name.startswith("channels_last"):
            assert got.is_contiguous(memory_format=torch.channels_last if x.dim() == 4
                                     else torch.channels_last_3d)


@pytest.mark.parametrize("shape", BN_SHAPES)
@pytest.mark.parametrize("momentum", [0.1, None])
def test_batch_norm_training(shape, momentum):
    c = shape[1]
    for name, xl in layouts(torch.randn(shape)).items():
        ref_m, ref_v = torch.randn(c), torch.rand(c) + 0.5
        m, v, n = ref_m.clone(), ref_v.clone(), torch.tensor(3)
        ref_n = 3
        w, b = torch.randn(c), torch.randn(c)
        for step in range(3):
            x = torch.randn(shape) + step
            x = layouts(x)[name]
            ref_n += 1
            factor = 1.0 / ref_n if momentum is None else momentum
            want = F.batch_norm(x, ref_m, ref_v, w, b, True, factor, 1e-5)
            got = ops.batch_norm(x, w, b, m, v, n, True, momentum or 0.0, momentum is None, 1e-5)
            assert_close(got, want)
            assert_close(m, ref_m, 1e-5)
            assert_close(v, ref_v, 1e-5)
            assert n.item() == ref_n
    assert m._version > 0 and n._version > 0  # in-place updates are visible to autograd


def test_batch_norm_training_without_running_stats():
    x = torch.randn(4, 6, 5, 5)
    want = F.batch_norm(x, None, None, None, None, True, 0.1, 1e-3)
    assert_close(ops.batch_norm(x, None, None, None, None, None, True, 0.1, False, 1e-3), want)


@pytest.mark.parametrize("shape,groups", [((2, 6, 5), 3), ((2, 32, 8, 8), 8), ((1, 8, 4, 4, 4), 2),
                                          ((3, 4), 2)])
def test_group_norm(shape, groups):
    c = shape[1]
    x = torch.randn(shape) * 2 - 1
    w, b = torch.randn(c), torch.randn(c)
    want = F.group_norm(x, groups, w, b, 1e-5)
    for xl in layouts(x).values():
        assert_close(ops.group_norm(xl, groups, w, b, 1e-5), want)
    assert_close(ops.group_norm(x, groups, None, None, 1e-5), F.group_norm(x, groups))


@pytest.mark.parametrize("shape", [(2, 6, 5), (2, 4, 8, 8), (1, 3, 4, 4, 4)])
def test_instance_norm(shape):
    c = shape[1]
    x = torch.randn(shape) + 5
    w, b = torch.randn(c), torch.randn(c)
    want = F.instance_norm(x, weight=w, bias=b, eps=1e-5)
    for xl in layouts(x).values():
        assert_close(ops.instance_norm(xl, w, b, 1e-5), want)
    assert_close(ops.instance_norm(x, None, None, 1e-5), F.instance_norm(x, eps=1e-5))


def test_threads_give_identical_bits():
    x = torch.randn(64, 256, 8, 8)
    w, b = torch.randn(256), torch.randn(256)
    results = []
    for threads in (1, 2):
        torch.set_num_threads(threads)
        results.append((ops.group_norm(x, 32, w, b, 1e-5),
                        ops.layer_norm(x, [8, 8], None, None, 1e-5),
                        ops.batch_norm(x, w, b, None, None, None, True, 0.1, False, 1e-5)))
    for a, b in zip(*results):
        assert torch.equal(a, b)


def test_batch_norm_inference_cache_sees_updates():
    """BatchNorm inference folds its running stats into the cached plan: any change to them,
    even one that bypasses the version counter (.data), must give a new plan."""
    simdnorm_torch.clear_cache()
    x = torch.randn(2, 4, 3, 3)
    rm, rv, w, b = torch.zeros(4), torch.ones(4), torch.ones(4), torch.zeros(4)
    for update in (lambda: None, lambda: rm.add_(1), lambda: rv.data.mul_(4),
                   lambda: w.data.fill_(2), lambda: b.copy_(torch.arange(4.0))):
        update()
        got = ops.batch_norm(x, w, b, rm, rv, None, False, 0.1, False, 1e-5)
        assert_close(got, F.batch_norm(x, rm, rv, w, b, False, 0.1, 1e-5))
    info = simdnorm_torch.cache_info()
    assert info["stale"] == 4 and info["size"] == 1


def test_cache_capacity():
    simdnorm_torch.clear_cache()
    simdnorm_torch.set_cache_capacity(2)
    try:
        for n in range(1, 6):
            ops.layer_norm(torch.randn(n, 8), [8], None, None, 1e-5)
        assert simdnorm_torch.cache_info()["size"] == 2
        ops.layer_norm(torch.randn(5, 8), [8], None, None, 1e-5)
        assert simdnorm_torch.cache_info()["hits"] == 1
    finally:
        simdnorm_torch.set_cache_capacity(256)


def test_errors_name_the_problem():
    x = torch.randn(2, 4, 8)
    with pytest.raises(RuntimeError, match="float32"):
        ops.layer_norm(x.double(), [8], None, None, 1e-5)
    with pytest.raises(RuntimeError, match="float32"):
        ops.batch_norm(x.half(), None, None, None, None, None, True, 0.1, False, 1e-5)
    with pytest.raises(RuntimeError, match="unsupported_layout"):
        ops.layer_norm(x.transpose(1, 2), [4], None, None, 1e-5)
    with pytest.raises(RuntimeError, match="weight has 7 elements, expected 8"):
        ops.layer_norm(x, [8], torch.ones(7), None, 1e-5)
    with pytest.raises(RuntimeError, match="normalized_shape"):
        ops.rms_norm(x, [4], None, 1e-5)
    with pytest.raises(RuntimeError, match="num_groups"):
        ops.group_norm(x, 0, None, None, 1e-5)
    with pytest.raises(RuntimeError, match="running_mean and running_var"):
        ops.batch_norm(x, None, None, torch.zeros(4), None, None, False, 0.1, False, 1e-5)
    with pytest.raises(RuntimeError, match="more than one value|1 value"):
        ops.batch_norm(torch.randn(1, 4), None, None, None, None, None, True, 0.1, False, 1e-5)
    with pytest.raises(RuntimeError, match="strided"):
        ops.layer_norm(torch.eye(3).to_sparse(), [3], None, None, 1e-5)


def test_no_silent_autograd():
    x = torch.randn(2, 8, requires_grad=True)
    with pytest.raises(RuntimeError, match="no autograd formula"):
        ops.layer_norm(x, [8], None, None, 1e-5)
    w = torch.ones(4, requires_grad=True)
    with pytest.raises(RuntimeError, match="no autograd formula"):
        ops.group_norm(torch.randn(2, 4, 3), 2, w, None, 1e-5)
    with torch.no_grad():
        assert_close(ops.layer_norm(x, [8], None, None, 1e-5), F.layer_norm(x, [8]))


def test_empty_inputs():
    assert ops.layer_norm(torch.randn(0, 8), [8], None, None, 1e-5).shape == (0, 8)
    assert ops.group_norm(torch.randn(2, 4, 0), 2, None, None, 1e-5).shape == (2, 4, 0)
    rm = torch.zeros(4)
    y = ops.batch_norm(torch.randn(0, 4, 3), None, None, rm, torch.ones(4), None, True, 0.1,
                       False, 1e-5)
    assert y.shape == (0, 4, 3) and torch.equal(rm, torch.zeros(4))
