#!/usr/bin/env python3
"""Writes the seed corpus of the C API fuzzer (tests/fuzz/corpus/seed_*): valid and invalid
calls of every op in the input format that fuzz_c_api.cpp decodes (a 64-byte header of fixed
fields, then data bytes), with f32, bf16 and f16 x and y (decode_types), and of the row ops'
fused operands (residual add, post-norm residual, gate, adaLN modulation, weight offset, 8-bit
y; decode_fused). Seeds give the fuzzer accepted plans of each op and layout to mutate from;
the fuzzer's own finds are merged in with -merge=1.

  tests/fuzz/make_corpus.py [OUT_DIR]        default: tests/fuzz/corpus
"""
import os
import random
import sys

OPS = ["layer_norm", "rms_norm", "lp_norm", "batch_norm", "group_norm", "instance_norm",
       "mean_variance_norm"]
# layout modes of decode_strides
DENSE, PADDED, PERMUTED, CHANNELS_LAST, ZERO, OVERLAP, HUGE, ARBITRARY = range(8)
# stats_stage byte values (decode_stage: code % 8 in 0-3 full, 4-5 moments, 6-7 apply; 240 on:
# not a stage)
FULL, MOMENTS, APPLY, NOT_A_STAGE = 0, 4, 6, 240
# records byte: bits 0-1 = 3 leave the stage's records out, bits 2-4 from 4 on corrupt one of
# apply's (4 another kind, 5 not a kind, 6 count < 1, 7 count below the op's minimum), bits 5-7
# = 1 give a stage the records it does not take, bits 6-7 = 3 also merge random records
NO_RECORDS, STRAY_RECORDS, MERGE = 3, 0x20, 0xC0


def corrupt(k):
    return k << 2


# x's and y's types (decode_types: bits 3-7 of header byte 61 index its table of pairs)
TYPES = {("f32", "f32"): 0, ("bf16", "bf16"): 1, ("f16", "f16"): 2, ("bf16", "f32"): 4,
         ("f16", "f32"): 5, ("f32", "bf16"): 6, ("f32", "f16"): 7, ("bf16", "f16"): 8,
         ("f16", "bf16"): 9}

# the larger sizes a shape byte 232 + i selects
LARGE = [16, 17, 31, 32, 33, 63, 64, 65, 127, 129, 255, 1023, 2047, 2049, 4097]


def seed(op, shape, x_layout=DENSE, y_layout=None, alias=0, isa=0, path=0, chunk=0, misuse=0,
         eps=0, stores=0, pa=0, pb=0, pc=0, pd=0, axes=(), args=0, counter=0, data_mode=2,
         scale=0, offset=0, aux=0, specials=0, lay_args=(), data=b"", stage=FULL, records=0,
         fuse=None, types=("f32", "f32")):
    h = bytearray(64)
    h[0] = OPS.index(op)
    h[1] = len(shape) - 1  # ranks 1..5
    for i, s in enumerate(shape):
        h[2 + i] = s - 1 if s <= 9 else 232 + LARGE.index(s)
    h[10] = x_layout
    for i, a in enumerate(lay_args):
        h[11 + i] = a
    if y_layout is None:
        h[20] = 0  # y strides = x strides
    else:
        h[20] = 128 + y_layout
    fields = {30: alias, 32: isa, 33: path, 34: chunk, 35: misuse, 36: eps, 41: stores,
              42: pa, 43: pb, 44: pc, 45: pd, 54: args, 55: counter, 57: data_mode, 58: scale,
              59: offset, 60: aux, 61: specials | TYPES[types] << 3, 62: records, 63: stage}
    for at, value in fields.items():
        h[at] = value
    for i, a in enumerate(axes):
        h[46 + i] = a
    for at, value in (fuse or {}).items():
        h[at] = value
    return bytes(h) + data


# Fused operands of the row ops (decode_fused): header byte 44 (FUSED: the op's args struct)
RESIDUAL, BIAS, GATE, MODULATION, OFFSET, QUANT, ROW_AMAX = 1, 2, 4, 8, 0x10, 0x20, 0x40
FUSED = 0x80
# byte 45, low nibble: where residual_out goes (a value of kResidualModes)
R_APART, R_OVER_RESIDUAL, R_OVER_X, R_OVER_Y, R_PARTLY_X, R_PARTLY_RESIDUAL = 0, 3, 5, 7, 8, 9
R_NO_OUT, R_NO_IN, R_IS_X, R_IS_Y = 10, 11, 12, 13
# byte 45, high nibble: gate_mode
G_APART, G_IS_Y, G_IS_H, G_PARTLY_Y, G_IS_X, G_BEFORE, G_BEFORE_IS_Y, G_BEFORE_NONE = range(8)
# byte 46: modulation_tokens (bits 0-2), stride (3-5), placement (6-7); byte 47 picks T's divisor
T_ALL, T_ONE, T_DIVISOR, T_NOT_DIVIDING, T_NEGATIVE, T_HUGE, T_NONE = range(7)
S_ZERO, S_COLS, S_PADDED, S_CHUNKED, S_SHORT, S_NEGATIVE, S_HUGE, S_NULL = range(8)
SHIFT_OVER_Y, SCALE_OVER_H = 2, 3
# byte 49: y type (bits 0-2: index into kYTypes) and scaling (bits 3-5: index into kScalings)
Y_I8, Y_U8, Y_F8, Y_F32, X_I8, Y_NOT_A_TYPE = 0, 2, 3, 5, 6, 7
DYNAMIC, ASYMMETRIC, PER_TENSOR, PER_CHANNEL, NOT_A_SCALING = 0, 2 << 3, 3 << 3, 6 << 3, 7 << 3
# byte 50: index into kBlocks; byte 51: static scale (index, low nibble) and zero point (high)
BLOCK = {0: 0, 32: 3, 64: 4, 128: 5, 256: 6, "cols": 7, 16: 8, 48: 9}
# byte 52: quantized outputs (4 y_scale, 5 y_zero_point, 6 amax wrong), CROSS_OP: another
# row op's args struct
SCALE_WRONG, ZERO_POINT_WRONG, AMAX_WRONG, CROSS_OP = 4, 5, 6, 7 << 3


# byte 53 bit 7: the residual is added after the norm (residual_after_norm); byte 45's low
# nibble then places it: R_APART (or R_NO_OUT) apart, R_OVER_Y y itself, R_IS_X x itself,
# R_PARTLY_X partly over x, R_PARTLY_RESIDUAL partly over y, R_NO_IN none, R_OVER_RESIDUAL and
# R_OVER_X with a residual_out
POST_NORM = 0x80


def fused(flags=0, residual=R_APART, gate=G_APART, tokens=T_ALL, stride=S_ZERO, place=0,
          divisor=0, offset=0, quant=Y_I8 | DYNAMIC, block=0, static=0, outputs=0, values=0,
          post_norm=False):
    """Header bytes 44-53 of a fused row-op call."""
    return {44: FUSED | flags, 45: residual | gate << 4, 46: tokens | stride << 3 | place << 6,
            47: divisor, 48: offset, 49: quant, 50: BLOCK[block], 51: static, 52: outputs,
            53: values | (POST_NORM if post_norm else 0)}


def axis_code(a, nd):
    """MVN axis byte for axis a (in [-nd, nd))."""
    return a + nd


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus")
    os.makedirs(out, exist_ok=True)
    rnd = random.Random(1)
    seeds = {}
    # Row ops: dense, padded rows, in place, gamma/beta/mean/rstd, every ISA slot and path.
    seeds["ln_dense"] = seed("layer_norm", [4, 9], args=0x0F, path=0)
    seeds["ln_padded_inplace"] = seed("layer_norm", [3, 5, 7], x_layout=PADDED, alias=1,
                                      lay_args=(0, 2, 0), pa=1, args=0x03, isa=1, path=2)
    seeds["ln_two_dims_raw"] = seed("layer_norm", [2, 3, 4], pa=1, data_mode=0, args=0x0C,
                                    data=bytes(rnd.randrange(256) for _ in range(96)))
    seeds["ln_big_mean"] = seed("layer_norm", [5, 8], data_mode=1, scale=1, offset=7, pb=0,
                                isa=2, path=1, chunk=0x23)
    seeds["ln_eps_nan"] = seed("layer_norm", [2, 4], eps=5)
    seeds["rms_dense"] = seed("rms_norm", [6, 8], args=0x09, isa=3, path=3)
    seeds["rms_beta_refused"] = seed("rms_norm", [2, 8], args=0x02)
    seeds["lp2_rows"] = seed("lp_norm", [7, 5], pb=1, args=0x08, path=2)
    seeds["lp1_axis0"] = seed("lp_norm", [6, 1], pa=128 + 0, pb=0, args=0x08)
    seeds["lp_zero_rows_eps0"] = seed("lp_norm", [3, 4], pb=1, eps=4, data_mode=3, args=0x08)
    # BatchNorm: inference (dense, channels-last, NHWC), training with running statistics.
    seeds["bn_infer_nchw"] = seed("batch_norm", [2, 3, 4, 5], pb=0, axes=(0x18,))
    seeds["bn_infer_cl_relu"] = seed("batch_norm", [2, 4, 3, 3], x_layout=CHANNELS_LAST,
                                     pb=2, axes=(0x18,), isa=1)
    seeds["bn_infer_nhwc"] = seed("batch_norm", [3, 2, 2, 5], pa=1, axes=(0x08,), path=1,
                                  chunk=0x31)
    seeds["bn_train_pytorch"] = seed("batch_norm", [4, 3, 2, 2], pb=1, args=0x5F, counter=1)
    seeds["bn_train_onnx_cumulative"] = seed("batch_norm", [5, 2, 3], pb=5, pd=1, pc=1,
                                             args=0x7C, counter=2, path=2)
    seeds["bn_train_nhwc_inplace"] = seed("batch_norm", [3, 4, 4], pa=1, pb=1, alias=1,
                                          args=0x1C, path=3)
    seeds["bn_train_split"] = seed("batch_norm", [8, 1, 8, 8, 8], pb=1, args=0x0C, path=2)
    seeds["bn_train_columns"] = seed("batch_norm", [2, 129, 16], pa=1, pb=1, args=0x5C)
    seeds["ln_long_rows"] = seed("layer_norm", [3, 4097], args=0x0C, data_mode=1, offset=7)
    seeds["gn_long_group"] = seed("group_norm", [1, 2, 2047, 8], pc=0, args=0x0C, path=1,
                                  chunk=0x21)
    seeds["bn_infer_bad_var"] = seed("batch_norm", [2, 3], axes=(0x18, 1, 2))
    # GroupNorm, InstanceNorm: NCHW, NHWC, channels-last, per-group affine, groups.
    seeds["gn_nchw"] = seed("group_norm", [2, 6, 3, 3], pc=2, args=0x0F)
    seeds["gn_nhwc_per_group"] = seed("group_norm", [2, 4, 4, 8], pa=1, pc=3, pb=1, args=0x0F,
                                      path=2)
    seeds["gn_cl"] = seed("group_norm", [3, 6, 2, 5], x_layout=CHANNELS_LAST, pc=1, args=0x03)
    seeds["gn_2d"] = seed("group_norm", [5, 8], pc=2, args=0x0C, isa=2)
    seeds["gn_bad_groups"] = seed("group_norm", [2, 6, 3], pc=232)
    seeds["in_nchw"] = seed("instance_norm", [2, 3, 4, 4], args=0x0F, isa=3)
    seeds["in_nhwc_padded"] = seed("instance_norm", [3, 5, 5, 2], x_layout=PADDED, pa=1,
                                   lay_args=(0, 2, 0, 0), args=0x03, path=1, chunk=0x45)
    seeds["in_2d_refused"] = seed("instance_norm", [3, 4])
    # MeanVarianceNormalization: the documented axes of an NCHW tensor.
    for name, axes in [("023", (0, 2, 3)), ("23", (2, 3)), ("123", (1, 2, 3)), ("0", (0,)),
                       ("1", (1,)), ("0123", (0, 1, 2, 3))]:
        seeds["mvn_axes_" + name] = seed("mean_variance_norm", [2, 3, 4, 5],
                                         pa=len(axes) - 1,
                                         axes=tuple(axis_code(a, 4) for a in axes))
    # Layouts and aliasing that must be refused or handled: zero, overlapping, huge strides,
    # partial overlap, adjacent buffers, y strides different from x's.
    seeds["ln_y_zero_stride"] = seed("layer_norm", [4, 3], y_layout=ZERO, lay_args=(0,))
    seeds["bn_overlap"] = seed("batch_norm", [3, 4, 5], pb=1, x_layout=OVERLAP, lay_args=(0, 0))
    seeds["rms_huge_stride"] = seed("rms_norm", [2, 3], x_layout=HUGE, lay_args=(0, 0))
    seeds["ln_partial_overlap"] = seed("layer_norm", [3, 4], alias=3)
    seeds["ln_adjacent"] = seed("layer_norm", [3, 4], alias=4)
    seeds["gn_permuted"] = seed("group_norm", [2, 4, 3, 2], x_layout=PERMUTED,
                                lay_args=(0, 1, 0, 2), pc=1)
    seeds["mvn_arbitrary"] = seed("mean_variance_norm", [3, 4, 2], x_layout=ARBITRARY,
                                  lay_args=(40, 7, 2, 0, 0, 0, 0, 0, 1), pa=0, axes=(5,))
    # Split statistics: the moments stage (records out, y untouched), apply from exact records,
    # records left out or corrupted (refused), stages a plan refuses, and merge_moments.
    seeds["ln_moments"] = seed("layer_norm", [4, 9], stage=MOMENTS, args=0x0F)
    seeds["ln_moments_split_rows"] = seed("layer_norm", [2, 4097], stage=MOMENTS, path=2,
                                          data_mode=1, offset=7)
    seeds["ln_apply"] = seed("layer_norm", [3, 5, 7], stage=APPLY, args=0x0F, path=1, chunk=0x21)
    seeds["ln_apply_no_records"] = seed("layer_norm", [4, 9], stage=APPLY, records=NO_RECORDS)
    seeds["ln_apply_wrong_kind"] = seed("layer_norm", [4, 9], stage=APPLY, records=corrupt(4))
    seeds["ln_moments_no_records"] = seed("layer_norm", [4, 9], stage=MOMENTS,
                                          records=NO_RECORDS)
    seeds["ln_not_a_stage"] = seed("layer_norm", [4, 9], stage=NOT_A_STAGE)
    seeds["rms_moments"] = seed("rms_norm", [6, 8], stage=MOMENTS, isa=1, path=3)
    seeds["rms_apply"] = seed("rms_norm", [6, 8], stage=APPLY, args=0x09, path=2)
    seeds["lp1_apply"] = seed("lp_norm", [7, 5], pb=0, stage=APPLY, args=0x08)
    seeds["lp2_moments"] = seed("lp_norm", [7, 5], pb=1, stage=MOMENTS, records=STRAY_RECORDS)
    seeds["bn_infer_moments_refused"] = seed("batch_norm", [2, 3, 4, 5], pb=0, axes=(0x18,),
                                             stage=MOMENTS)
    seeds["bn_train_moments"] = seed("batch_norm", [4, 3, 2, 2], pb=1, args=0x5F, counter=1,
                                     stage=MOMENTS)
    seeds["bn_train_apply"] = seed("batch_norm", [4, 3, 2, 2], pb=1, args=0x5F, counter=1,
                                   stage=APPLY, path=2)
    seeds["bn_train_apply_count1"] = seed("batch_norm", [4, 3, 2, 2], pb=1, args=0x1C,
                                          stage=APPLY, records=corrupt(7))
    seeds["bn_train_moments_one_value"] = seed("batch_norm", [1, 3], pb=1, stage=MOMENTS)
    seeds["bn_train_columns_apply"] = seed("batch_norm", [2, 129, 16], pa=1, pb=1, args=0x5C,
                                           stage=APPLY)
    seeds["gn_moments"] = seed("group_norm", [2, 6, 3, 3], pc=2, stage=MOMENTS, path=1,
                               chunk=0x23)
    seeds["gn_apply"] = seed("group_norm", [2, 4, 4, 8], pa=1, pc=3, pb=1, args=0x0F,
                             stage=APPLY)
    seeds["in_apply_count0"] = seed("instance_norm", [2, 3, 4, 4], args=0x0F, stage=APPLY,
                                    records=corrupt(6))
    seeds["in_moments"] = seed("instance_norm", [3, 5, 5, 2], x_layout=PADDED, pa=1,
                               lay_args=(0, 2, 0, 0), stage=MOMENTS)
    seeds["merge_moments"] = seed("rms_norm", [2, 8], records=MERGE)
    seeds["merge_moments_2"] = seed("layer_norm", [3, 4], records=MERGE, data=b"merge")
    fused_seeds(seeds)
    dtype_seeds(seeds, rnd)
    post_norm_seeds(seeds)
    for name, data in seeds.items():
        with open(os.path.join(out, "seed_" + name), "wb") as f:
            f.write(data)
    print(f"make_corpus.py: {len(seeds)} seeds in {out}")


def fused_seeds(seeds):
    """The row ops' fused operands: each placement, parameter and output, accepted and refused."""
    def ln(name, shape=(4, 33), args=0x03, **kw):
        seeds["ln_" + name] = seed("layer_norm", list(shape), args=args, **kw)

    def rms(name, shape=(6, 16), args=0x01, **kw):
        seeds["rms_" + name] = seed("rms_norm", list(shape), args=args, **kw)

    # residual add: h = (x + residual) + bias, where h may go, and the refused placements
    ln("res_bias", fuse=fused(RESIDUAL | BIAS), args=0x0F)
    rms("res_vllm_in_place", alias=1, fuse=fused(RESIDUAL, R_OVER_RESIDUAL), args=0x09)
    ln("res_over_x", shape=(3, 9), fuse=fused(RESIDUAL | BIAS, R_OVER_X))
    ln("res_padded", shape=(3, 5, 7), x_layout=PADDED, lay_args=(0, 2, 0),
       fuse=fused(RESIDUAL, R_OVER_RESIDUAL, values=1))
    ln("res_over_y", fuse=fused(RESIDUAL, R_OVER_Y))
    ln("res_partly_over_x", fuse=fused(RESIDUAL, R_PARTLY_X))
    rms("res_partly_over_residual", fuse=fused(RESIDUAL, R_PARTLY_RESIDUAL))
    ln("res_no_out", fuse=fused(RESIDUAL, R_NO_OUT))
    ln("res_no_in", fuse=fused(RESIDUAL, R_NO_IN))
    ln("bias_alone", fuse=fused(BIAS))
    ln("res_is_x", fuse=fused(RESIDUAL, R_IS_X))
    rms("res_is_y", fuse=fused(RESIDUAL | BIAS, R_IS_Y))
    ln("res_moments", stage=MOMENTS, fuse=fused(RESIDUAL | BIAS))
    ln("res_apply", stage=APPLY, fuse=fused(RESIDUAL))
    seeds["lp_res_bias"] = seed("lp_norm", [5, 7], pb=1, fuse=fused(RESIDUAL | BIAS))
    seeds["lp1_res_over_x"] = seed("lp_norm", [4, 9], pb=0, fuse=fused(RESIDUAL, R_OVER_X))
    # gated RMSNorm, after and before the norm
    rms("gate", fuse=fused(GATE, values=2))
    rms("gate_is_y", fuse=fused(GATE, gate=G_IS_Y))
    rms("gate_over_h", fuse=fused(RESIDUAL | GATE, gate=G_IS_H))
    rms("gate_partly_over_y", fuse=fused(GATE, gate=G_PARTLY_Y))
    rms("gate_is_x", fuse=fused(GATE, gate=G_IS_X))
    rms("gate_residual", shape=(3, 33), fuse=fused(RESIDUAL | BIAS | GATE, R_OVER_RESIDUAL))
    rms("gate_before", fuse=fused(GATE, gate=G_BEFORE), args=0x09)
    rms("gate_before_is_y", fuse=fused(GATE, gate=G_BEFORE_IS_Y))
    rms("gate_before_in_place", alias=1, fuse=fused(GATE, gate=G_BEFORE))
    rms("gate_before_none", fuse=fused(GATE, gate=G_BEFORE_NONE))
    rms("gate_before_residual", fuse=fused(RESIDUAL | GATE, gate=G_BEFORE))
    rms("gate_apply", stage=APPLY, fuse=fused(GATE))
    rms("gate_moments", stage=MOMENTS, fuse=fused(GATE))
    # adaLN modulation: T (rows 6: divisors 1, 2, 3, 6), strides, placements
    ln("adaln_dit", shape=(2, 3, 16), args=0, fuse=fused(MODULATION, tokens=T_DIVISOR,
                                                          divisor=2, stride=S_CHUNKED))
    rms("adaln_one_row", shape=(4, 8), fuse=fused(MODULATION))
    ln("adaln_affine_offset", shape=(6, 8), fuse=fused(MODULATION | OFFSET, tokens=T_ONE,
                                                        stride=S_PADDED, divisor=0x40))
    ln("adaln_residual", shape=(6, 8), fuse=fused(RESIDUAL | MODULATION, tokens=T_DIVISOR,
                                                   divisor=1, stride=S_COLS))
    ln("adaln_short_stride", shape=(6, 8), fuse=fused(MODULATION, tokens=T_ONE, stride=S_SHORT))
    ln("adaln_negative_stride", shape=(6, 8), fuse=fused(MODULATION, stride=S_NEGATIVE))
    ln("adaln_huge_stride_one_batch", shape=(6, 8), fuse=fused(MODULATION, stride=S_HUGE))
    ln("adaln_huge_stride_overflow", shape=(6, 8),
       fuse=fused(MODULATION, tokens=T_ONE, stride=S_HUGE))
    ln("adaln_no_shift", shape=(6, 8), fuse=fused(MODULATION, tokens=T_ONE, stride=S_NULL))
    ln("adaln_shift_over_y", shape=(6, 8), fuse=fused(MODULATION, place=SHIFT_OVER_Y))
    ln("adaln_scale_over_h", shape=(6, 8), fuse=fused(RESIDUAL | MODULATION, place=SCALE_OVER_H))
    ln("adaln_not_dividing", shape=(6, 8), fuse=fused(MODULATION, tokens=T_NOT_DIVIDING))
    ln("adaln_negative_tokens", shape=(6, 8), fuse=fused(MODULATION, tokens=T_NEGATIVE))
    ln("adaln_moments", shape=(6, 8), stage=MOMENTS, fuse=fused(MODULATION))
    ln("adaln_operands_without_tokens", shape=(6, 8), fuse=fused(MODULATION, tokens=T_NONE,
                                                                  stride=S_COLS))
    rms("adaln_apply", shape=(6, 8), stage=APPLY, fuse=fused(MODULATION, tokens=T_ONE,
                                                             stride=S_COLS))
    rms("adaln_gate", shape=(6, 8), fuse=fused(GATE | MODULATION))
    # weight offset (index into kOffsets: 0 is 1, 5 NaN)
    ln("offset", fuse=fused(OFFSET))
    rms("offset_gemma", fuse=fused(OFFSET), args=0x09)
    rms("offset_no_gamma", args=0, fuse=fused(OFFSET))
    ln("offset_nan", fuse=fused(OFFSET, offset=5))
    ln("offset_apply", stage=APPLY, fuse=fused(OFFSET, offset=2))
    # 8-bit y: dynamic (per row, per block), asymmetric, static; amax; what is refused
    rms("i8_dynamic", shape=(4, 64), fuse=fused(QUANT))
    ln("i8_block32", shape=(4, 64), fuse=fused(QUANT, block=32))
    rms("f8_block128", shape=(2, 4, 64), pa=1, fuse=fused(QUANT, quant=Y_F8, block=128))
    ln("u8_asymmetric", shape=(5, 33), fuse=fused(QUANT, quant=Y_U8 | ASYMMETRIC))
    rms("i8_asymmetric_block64", shape=(3, 2, 64), pa=1,
        fuse=fused(QUANT, quant=Y_I8 | ASYMMETRIC, block=64))
    ln("i8_per_tensor", shape=(4, 17), fuse=fused(QUANT, quant=Y_I8 | PER_TENSOR, static=0x21))
    rms("u8_per_tensor", shape=(4, 17), fuse=fused(QUANT, quant=Y_U8 | PER_TENSOR, static=0x31))
    ln("f8_per_tensor", shape=(4, 17), fuse=fused(QUANT, quant=Y_F8 | PER_TENSOR, static=0x02))
    rms("i8_block_row", shape=(3, 127), fuse=fused(QUANT, block="cols"))
    rms("u8_symmetric", fuse=fused(QUANT, quant=Y_U8))
    ln("f8_asymmetric", fuse=fused(QUANT, quant=Y_F8 | ASYMMETRIC))
    rms("i8_block16", shape=(4, 64), fuse=fused(QUANT, block=16))
    ln("i8_block48", shape=(4, 64), fuse=fused(QUANT, block=48))
    ln("i8_scale_zero", fuse=fused(QUANT, quant=Y_I8 | PER_TENSOR, static=0x04))
    ln("u8_zero_point_256", fuse=fused(QUANT, quant=Y_U8 | PER_TENSOR, static=0x60))
    ln("per_channel", fuse=fused(QUANT, quant=Y_I8 | PER_CHANNEL))
    ln("not_a_scaling", fuse=fused(QUANT, quant=Y_I8 | NOT_A_SCALING))
    rms("f32_block", fuse=fused(QUANT, quant=Y_F32, block=32))
    rms("x_i8", fuse=fused(QUANT, quant=X_I8))
    rms("y_not_a_type", fuse=fused(QUANT, quant=Y_NOT_A_TYPE))
    rms("i8_no_scale", shape=(4, 64), fuse=fused(QUANT, outputs=SCALE_WRONG))
    ln("i8_stray_zero_point", shape=(4, 64), fuse=fused(QUANT, outputs=ZERO_POINT_WRONG))
    ln("u8_no_zero_point", fuse=fused(QUANT, quant=Y_U8 | ASYMMETRIC, outputs=ZERO_POINT_WRONG))
    rms("amax_f32", fuse=fused(ROW_AMAX))
    ln("amax_i8", shape=(4, 64), fuse=fused(QUANT | ROW_AMAX))
    rms("amax_missing", fuse=fused(ROW_AMAX, outputs=AMAX_WRONG))
    rms("amax_stray", fuse=fused(0, outputs=AMAX_WRONG))
    rms("i8_apply", stage=APPLY, fuse=fused(QUANT))
    rms("i8_moments", stage=MOMENTS, fuse=fused(QUANT, outputs=SCALE_WRONG))
    rms("i8_y_is_x", alias=2, fuse=fused(QUANT))
    rms("i8_y_adjacent", alias=4, fuse=fused(QUANT, quant=Y_I8 | ASYMMETRIC))
    seeds["lp_i8"] = seed("lp_norm", [5, 7], pb=1, fuse=fused(QUANT))
    # everything at once, another op's args struct, and the args struct with nothing fused
    ln("everything", shape=(2, 2, 64), fuse=fused(
        RESIDUAL | BIAS | MODULATION | OFFSET | QUANT | ROW_AMAX, R_OVER_RESIDUAL,
        tokens=T_DIVISOR, divisor=1, stride=S_CHUNKED, block=32), args=0x0F)
    rms("gate_f8_amax", shape=(3, 64), fuse=fused(GATE | QUANT | ROW_AMAX, quant=Y_F8))
    ln("cross_op", path=0, fuse=fused(RESIDUAL, outputs=CROSS_OP))
    # a few rows longer than a piece: the plan cuts them into pieces across tasks (reached by
    # the fuzz build's small schedules, src/tuning.hpp), with the fused operands
    rms("split_res_vllm", shape=(2, 2049), alias=1, fuse=fused(RESIDUAL, R_OVER_RESIDUAL),
        args=0x09, path=1)
    ln("split_res_bias", shape=(2, 2047), fuse=fused(RESIDUAL | BIAS), args=0x0F, path=2)
    ln("split_adaln_offset", shape=(3, 1023), fuse=fused(MODULATION | OFFSET, tokens=T_ONE,
                                                         stride=S_COLS), path=3)
    rms("split_gate", shape=(3, 1023), fuse=fused(RESIDUAL | GATE, values=2), path=1)
    rms("split_gate_before", shape=(2, 2047), fuse=fused(GATE, gate=G_BEFORE), args=0x09,
        path=2)
    seeds["lp_split_res"] = seed("lp_norm", [2, 1023], pb=1, fuse=fused(RESIDUAL), path=1)
    rms("cross_op_run", path=2, fuse=fused(GATE, outputs=CROSS_OP))
    seeds["lp_cross_op"] = seed("lp_norm", [5, 7], pb=1, path=1, fuse=fused(outputs=CROSS_OP))
    ln("fused_nothing", fuse=fused())



def dtype_seeds(seeds, rnd):
    """bf16 and f16 x and y on every op: raw 16-bit data, type pairs, in place, the fusions."""
    BF, H, F = "bf16", "f16", "f32"

    def raw(n):
        return bytes(rnd.randrange(256) for _ in range(n))

    seeds["ln_bf16_raw"] = seed("layer_norm", [4, 33], args=0x0F, data_mode=0, data=raw(264),
                                types=(BF, BF))
    seeds["ln_f16_to_f32"] = seed("layer_norm", [3, 5, 7], x_layout=PADDED, lay_args=(0, 2, 0),
                                  pa=1, args=0x03, types=(H, F), path=2)
    seeds["ln_f32_to_bf16_long"] = seed("layer_norm", [3, 2049], args=0x0C, data_mode=1,
                                        offset=7, types=(F, BF))
    seeds["rms_f16_in_place"] = seed("rms_norm", [6, 16], alias=1, args=0x09, types=(H, H),
                                     isa=1, path=1, chunk=0x23)
    seeds["rms_bf16_split_res_gate"] = seed("rms_norm", [2, 2049], alias=1, args=0x01,
                                            fuse=fused(RESIDUAL | GATE, R_OVER_RESIDUAL),
                                            types=(BF, BF), path=1)
    seeds["rms_f16_raw"] = seed("rms_norm", [2, 64], data_mode=0, data=raw(256), types=(H, H))
    seeds["rms_bf16_to_f16"] = seed("rms_norm", [5, 9], args=0x09, types=(BF, H), isa=3)
    seeds["lp2_f16"] = seed("lp_norm", [7, 5], pb=1, args=0x08, types=(H, H))
    seeds["lp1_bf16_to_f32"] = seed("lp_norm", [6, 9], pb=0, types=(BF, F), path=3)
    seeds["bn_infer_bf16"] = seed("batch_norm", [2, 3, 4, 5], pb=0, axes=(0x18,), types=(BF, BF))
    seeds["bn_infer_f16_overflow"] = seed("batch_norm", [2, 3, 4, 5], pb=0, axes=(0x18,), aux=0,
                                          data_mode=1, scale=12, types=(F, H))
    seeds["bn_train_nhwc_f16"] = seed("batch_norm", [3, 4, 4], pa=1, pb=1, args=0x1C,
                                      types=(H, H), path=2)
    seeds["bn_train_moments_bf16"] = seed("batch_norm", [4, 3, 2, 2], pb=1, args=0x5F, counter=1,
                                          stage=MOMENTS, types=(BF, F))
    seeds["gn_bf16_to_f16"] = seed("group_norm", [2, 6, 3, 3], pc=2, args=0x0F, types=(BF, H))
    seeds["gn_cl_f16_apply"] = seed("group_norm", [3, 6, 2, 5], x_layout=CHANNELS_LAST, pc=1,
                                    args=0x03, stage=APPLY, types=(H, F))
    seeds["in_f16_to_bf16"] = seed("instance_norm", [2, 3, 4, 4], args=0x0F, types=(H, BF))
    seeds["mvn_bf16"] = seed("mean_variance_norm", [2, 3, 4, 5], pa=2,
                             axes=tuple(axis_code(a, 4) for a in (0, 2, 3)), types=(BF, BF))
    seeds["ln_f16_overflow"] = seed("layer_norm", [4, 33], args=0x0F, aux=2, data_mode=2,
                                    types=(F, H))
    # x and y in one buffer: in place needs equal types; overlaps and adjacency by bytes
    seeds["ln_in_place_bf16_f16"] = seed("layer_norm", [3, 8], alias=1, types=(BF, H))
    seeds["ln_overlap_bf16_f32"] = seed("layer_norm", [3, 8], alias=3, types=(BF, F))
    seeds["ln_adjacent_f16_f32"] = seed("layer_norm", [3, 7], alias=4, types=(H, F))
    # the fused operands take x's type
    def ln(name, shape=(4, 33), args=0x03, **kw):
        seeds["ln_" + name] = seed("layer_norm", list(shape), args=args, **kw)

    def rms(name, shape=(6, 16), args=0x01, **kw):
        seeds["rms_" + name] = seed("rms_norm", list(shape), args=args, **kw)

    ln("res_bias_bf16", fuse=fused(RESIDUAL | BIAS), args=0x0F, types=(BF, BF))
    rms("res_in_place_f16", alias=1, fuse=fused(RESIDUAL, R_OVER_RESIDUAL), types=(H, H))
    rms("res_f16_to_f32_amax", fuse=fused(RESIDUAL | ROW_AMAX, R_OVER_X), types=(H, F))
    ln("res_is_y_bf16", fuse=fused(RESIDUAL, R_IS_Y), types=(BF, BF))
    rms("gate_f16", fuse=fused(GATE, values=2), types=(H, H))
    rms("gate_is_y_bf16", fuse=fused(GATE, gate=G_IS_Y), types=(BF, BF))
    rms("gate_before_bf16_to_f16", fuse=fused(GATE, gate=G_BEFORE), args=0x09, types=(BF, H))
    rms("amax_bf16", fuse=fused(ROW_AMAX), types=(F, BF))
    rms("i8_from_bf16", shape=(4, 64), fuse=fused(QUANT), types=(BF, BF))
    ln("u8_asymmetric_from_f16", shape=(5, 33), fuse=fused(QUANT, quant=Y_U8 | ASYMMETRIC),
       types=(H, F))
    ln("adaln_f16", shape=(2, 3, 16), args=0x0F, fuse=fused(
        MODULATION | OFFSET, tokens=T_DIVISOR, divisor=2, stride=S_CHUNKED), types=(H, H))
    seeds["lp_res_bf16"] = seed("lp_norm", [5, 7], pb=1, fuse=fused(RESIDUAL | BIAS),
                                types=(BF, F))


def post_norm_seeds(seeds):
    """The post-norm residual, y = norm(x) + residual: placements, types and what is refused."""
    BF, H, F = "bf16", "f16", "f32"

    def ln(name, shape=(4, 33), args=0x0F, **kw):
        seeds["ln_post_norm_" + name] = seed("layer_norm", list(shape), args=args, **kw)

    def rms(name, shape=(6, 16), args=0x01, **kw):
        seeds["rms_post_norm_" + name] = seed("rms_norm", list(shape), args=args, **kw)

    ln("apart", fuse=fused(RESIDUAL, post_norm=True))
    rms("y_is_residual", fuse=fused(RESIDUAL, R_OVER_Y, post_norm=True), path=2)
    rms("y_is_x", alias=1, fuse=fused(RESIDUAL, post_norm=True), path=1, chunk=0x31)
    ln("residual_is_x", fuse=fused(RESIDUAL, R_IS_X, post_norm=True))
    ln("bf16_in_place", fuse=fused(RESIDUAL, R_OVER_Y, post_norm=True), types=(BF, BF))
    rms("f16_to_f32", fuse=fused(RESIDUAL | OFFSET, post_norm=True), types=(H, F), args=0x09)
    ln("f32_to_f16_values", fuse=fused(RESIDUAL, post_norm=True, values=1), types=(F, H))
    ln("padded", shape=(3, 5, 7), x_layout=PADDED, lay_args=(0, 2, 0), pa=1,
       fuse=fused(RESIDUAL, R_OVER_Y, post_norm=True))
    ln("long_rows", shape=(2, 2049), fuse=fused(RESIDUAL, post_norm=True), path=2)
    rms("apply", stage=APPLY, fuse=fused(RESIDUAL, post_norm=True), args=0x09)
    # refused: the moments stage, residual_out, bias, gate, adaLN, 8-bit y, row_amax, no
    # residual, partial overlaps, y over the residual with another type
    ln("moments", stage=MOMENTS, fuse=fused(RESIDUAL, post_norm=True))
    ln("with_out", fuse=fused(RESIDUAL, R_OVER_RESIDUAL, post_norm=True))
    rms("out_over_x", fuse=fused(RESIDUAL, R_OVER_X, post_norm=True))
    ln("bias", fuse=fused(RESIDUAL | BIAS, post_norm=True))
    rms("gate", fuse=fused(RESIDUAL | GATE, post_norm=True))
    rms("gate_before", fuse=fused(RESIDUAL | GATE, gate=G_BEFORE, post_norm=True))
    ln("adaln", shape=(6, 8), fuse=fused(RESIDUAL | MODULATION, tokens=T_ONE, stride=S_COLS,
                                          post_norm=True))
    rms("i8", shape=(4, 64), fuse=fused(RESIDUAL | QUANT, post_norm=True))
    ln("amax", fuse=fused(RESIDUAL | ROW_AMAX, post_norm=True))
    rms("no_residual", fuse=fused(0, post_norm=True))
    ln("partly_over_x", fuse=fused(RESIDUAL, R_PARTLY_X, post_norm=True))
    ln("partly_over_y", fuse=fused(RESIDUAL, R_PARTLY_RESIDUAL, post_norm=True))
    ln("y_is_residual_other_type", fuse=fused(RESIDUAL, R_OVER_Y, post_norm=True),
       types=(F, BF))


if __name__ == "__main__":
    main()
