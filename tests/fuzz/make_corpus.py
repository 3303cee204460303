#!/usr/bin/env python3
"""Writes the seed corpus of the C API fuzzer (tests/fuzz/corpus/seed_*): valid and invalid
calls of every op in the input format that fuzz_c_api.cpp decodes (a 64-byte header of fixed
fields, then data bytes). Seeds give the fuzzer accepted plans of each op and layout to mutate
from; the fuzzer's own finds are merged in with -merge=1.

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


# the larger sizes a shape byte 232 + i selects
LARGE = [16, 17, 31, 32, 33, 63, 64, 65, 127, 129, 255, 1023, 2047, 2049, 4097]


def seed(op, shape, x_layout=DENSE, y_layout=None, alias=0, isa=0, path=0, chunk=0, misuse=0,
         eps=0, stores=0, pa=0, pb=0, pc=0, pd=0, axes=(), args=0, counter=0, data_mode=2,
         scale=0, offset=0, aux=0, specials=0, lay_args=(), data=b"", stage=FULL, records=0):
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
              59: offset, 60: aux, 61: specials, 62: records, 63: stage}
    for at, value in fields.items():
        h[at] = value
    for i, a in enumerate(axes):
        h[46 + i] = a
    return bytes(h) + data


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
    for name, data in seeds.items():
        with open(os.path.join(out, "seed_" + name), "wb") as f:
            f.write(data)
    print(f"make_corpus.py: {len(seeds)} seeds in {out}")


if __name__ == "__main__":
    main()
