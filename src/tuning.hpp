// Internal: the tuning numbers of the plans (how work is cut into tasks, phases and waves) and
// the kernel internals the plans size their work by, each named once. Changing one changes
// the task partition, and for the statistics partitions the bits of the results (the golden
// hashes), never the correctness.
#pragma once
#include <cstddef>

namespace simdnorm::detail {

/// Fuzz builds (tests/fuzz defines SIMDNORM_SMALL_SCHEDULES) shrink the sizes at which the plans
/// change schedule, so that the fuzzer's small tensors (at most 2^15 elements) reach every
/// schedule: calls of many tasks, rows cut into pieces across tasks, units split into parts,
/// several waves, rows of several chunks and pieces. With the normal sizes none of these is
/// reached below 2^17 elements. Kernel tiles do not change. The bits of results differ from a
/// normal build's (chunk and piece sizes are part of the numerics); the error bounds only
/// tighten, as chains get shorter.
#ifdef SIMDNORM_SMALL_SCHEDULES
inline constexpr bool kSmallSchedules = true;
#else
inline constexpr bool kSmallSchedules = false;
#endif

// ---- task sizing (row and channel plans) -----------------------------------------------------

/// Elements of x per task (64 KiB of floats). Trades the cost of a task switch (larger tasks
/// amortize it) against load balance (smaller tasks keep two to sixteen threads busy on 1 MiB).
/// Measured on: 2-core cloud guests (Zen 4 / Sapphire Rapids), bench/simdnorm_bench.
inline constexpr std::size_t kTaskElements = kSmallSchedules ? 256 : 16384;

/// A row-op or BatchNorm inference call over fewer elements of x than this is one task, so it
/// runs inline on the calling thread: waking a pool thread costs about as much as the whole
/// call. Trades the second core against the wake-up.
/// Measured on: a 2-core AMD EPYC (Zen 5) guest, oneTBB pool, quiet machine, simdnorm_bench
/// few_rows/{layer,rms}_norm, medians of 9, 1 vs 2 threads when split into kTaskElements
/// tasks: 8 x 4096 (32Ki) 3.2 vs 4.6 us (LayerNorm), 2.8 vs 5.2 us (RMSNorm); 4 x 16384
/// (64Ki) 5.2 vs 5.6 us and 6.3 vs 6.3 us; 8 x 16384 (128Ki) 15.2 vs 8.6 us and 17.4 vs 9.1 us.
inline constexpr std::size_t kInlineElements = kSmallSchedules ? 512 : std::size_t(1) << 17;

/// Rows longer than kPieceElements are spread over tasks piece by piece when whole rows make
/// fewer tasks than this (a few long rows: LLM decode at hidden sizes beyond a piece, a
/// LayerNorm over a whole image): pieces' statistics in one phase, fold and normalize in the
/// next. Trades the second phase (a barrier, and a piece's re-read possibly from another
/// core's cache) against threads left idle by too few rows. Does not change a bit.
/// Not settled by measurement yet: on a 2-core AMD EPYC (Zen 5) guest, always-split against
/// never-split (simdnorm_bench few_rows/layer_norm, rows 2 to 32 of D = 65536, 1 and 2
/// threads) stayed within the noise of the shared machine; 16 feeds a 16-thread pool.
inline constexpr std::size_t kSplitRowTasksBelow = 16;

// ---- channel plan: planes schedule -----------------------------------------------------------

/// Below this many units the planes schedule cuts each unit into parts spread over tasks (the
/// split schedule, two phases per wave), so that a few large units (C = 1..15) still feed the
/// threads. Trades the extra phase and the re-read of the wave from cache against idle threads.
/// Measured on: 2-core cloud guests (Zen 4 / Sapphire Rapids), bench/simdnorm_bench.
inline constexpr std::size_t kMinUnits = 16;

/// At most this many bytes of x per wave of split units. Trades fewer phases (larger waves)
/// against phase B finding the wave still in cache.
/// Measured on: 2-core cloud guests (Zen 4 / Sapphire Rapids), bench/simdnorm_bench.
inline constexpr std::size_t kWaveBytes = std::size_t(16) << (kSmallSchedules ? 10 : 20);

/// A wave also takes at most 1 / kWaveCacheDivisor of the last-level cache, leaving the rest
/// to y, the workspace and other threads' data. Trades fewer phases against cache hits in
/// phase B.
/// Measured on: 2-core cloud guests (Zen 4 / Sapphire Rapids), bench/simdnorm_bench.
inline constexpr std::size_t kWaveCacheDivisor = 4;

/// Shortest piece, in elements, a segment (or an inference plane) is cut into when a unit or a
/// plane is spread over tasks. Trades more, smaller tasks (balance) against per-piece overhead
/// and the chunk tails of the statistics kernel.
/// Measured on: 2-core cloud guests (Zen 4 / Sapphire Rapids), bench/simdnorm_bench.
inline constexpr std::size_t kMinPieceElements = kSmallSchedules ? 64 : 1024;

/// Segments shorter than this (such as 14x14 planes) count as short: units made of them go
/// through the interleaved statistics kernel even when they hold up to kTaskElements values,
/// as the per-chunk scalar chains dominate there and overlap across units. Longer segments go
/// one unit at a time. Trades overlapped scalar chains against interleaving long units
/// (BatchNorm training, 1 thread: 32x256x14x14 channels 0.43 -> 0.52 of copy interleaved,
/// while 1x64x112x112 channels, one 12544-value plane, drop 0.66 -> 0.58).
/// Measured on: 2-core cloud guests (Zen 4 / Sapphire Rapids), bench/simdnorm_bench.
inline constexpr std::size_t kShortSegmentElements = 1024;

// ---- channel plan: columns schedule ----------------------------------------------------------

/// Tasks the partial-moments phase aims at over the batch, to feed the threads. They are
/// channel ranges first (each a multiple of kColumnRangeChannels: a channel's moments do not
/// depend on its neighbours, so ranges change no bit, and each channel is still walked down
/// all rows in one stride stream), then row splits (each split's moments merged in the finish
/// phase: a different merge tree, so other bits, and a shorter walk). Trades parallelism in
/// the partial phase against workspace and the merge work of the finish phase.
/// Measured on: 2-core cloud guests (Zen 4 / Sapphire Rapids), bench/simdnorm_bench; channel
/// ranges before splits on a 2-core AMD EPYC (Zen 5) guest (docs/performance.md, "Channel
/// ranges instead of row splits").
inline constexpr std::size_t kColumnPartialTasks = 16;

/// Channels per range of the partial-moments phase, at least: one block of the widest ISA's
/// column kernel (4 vectors of 16 lanes), so that no range ends in a partial vector but the
/// last.
inline constexpr std::size_t kColumnRangeChannels = 64;

/// Partial moments (channels times splits) a task of the finish phase merges. Trades task
/// count against per-task overhead; the phase is small next to the two passes over x.
/// Measured on: 2-core cloud guests (Zen 4 / Sapphire Rapids), bench/simdnorm_bench.
inline constexpr std::size_t kColumnFinishMoments = kSmallSchedules ? 64 : 4096;

/// Units the finish phase merges side by side, so that their dependent chains of Chan steps
/// overlap. Trades latency hiding against registers and stack (two doubles per unit).
/// Measured on: 2-core cloud guests (Zen 4 / Sapphire Rapids), bench/simdnorm_bench.
inline constexpr std::size_t kMergeSideBySide = 32;

/// Units the fold of the columns path (kernels/channel/fold_units-inl.hpp) computes as one
/// block of double vectors. Trades overlap of the units' division and square-root chains
/// against stack (five arrays of this many doubles).
/// Measured on: 2-core cloud guest (Zen 5), NHWC BatchNorm's stats_stage::apply at [8, 2048]
/// (docs/performance.md, "What the columns path spends").
inline constexpr std::size_t kFoldBlock = 32;

// ---- kernel tiles: how many rows, units or columns a kernel takes at once -------------------
// The kernels (src/kernels, included by every ISA unit) and the plans both read these: a plan
// sizes its tasks in whole tiles, so that no task ends in a partial tile.

/// Long rows (more than kShortCols) are taken kRowGroup at a time: their statistics are
/// interleaved (the rows' dependent per-chunk reductions overlap) and the normalize pass loads
/// each gamma/beta vector once for the group (row/normalize-inl.hpp).
inline constexpr std::size_t kRowGroup = 4;

/// Rows of at most this many elements are short: V::size of them at a time, one row per vector
/// lane in the statistics (row/stats_short-inl.hpp); longer rows amortize a row's reductions
/// over enough vectors to go one row at a time. Set with the first row kernels; not measured
/// again since (simdnorm_kernel_bench layer_norm D = 200, 768 straddle it).
inline constexpr std::size_t kShortCols = 256;

/// Rows per chunk of the column statistics kernel (channel/column_moments-inl.hpp): each lane
/// sums at most this many terms in float before the chunk's moments go to double; a row split
/// of the columns schedule shorter than this wastes the chunk.
inline constexpr std::size_t kColumnChunkRows = 64;

/// Vectors of parameters (of each kind: center, scale, shift) the NHWC normalize pass
/// (channel/row_affine-inl.hpp) holds in registers when dense rows repeat their parameters
/// within this many vectors (lcm(C, W) / W: C = 64 and 128 on AVX-512): 3 x 8 of the 32
/// AVX-512 registers, leaving 8 for the data (AVX2 spills some, which costs L1 loads only).
/// Measured on: a 2-core AMD EPYC (Zen 5) guest, BatchNorm inference NHWC 8x64x56x56 in cache,
/// 0.55 -> 0.97 of copy (bench/simdnorm_bench; docs/performance.md).
inline constexpr std::size_t kPeriodVectors = 8;

/// Rows the NHWC normalize pass takes at once when their parameters do not fit in registers,
/// loading each parameter vector once for the group; only for rows of at most
/// kRowAffineGroupMaxCols floats, since longer rows lost with the group's interleaved store
/// streams. Measured on: a 2-core AMD EPYC (Zen 5) guest, BatchNorm inference NHWC in cache,
/// 1 / 2 threads: C = 256 0.75 / 0.65 -> 0.80 / 0.80 of copy, C = 2048 0.87 -> 0.81; C = 512
/// (32x512x7x7) first measured 0.96 / 0.94 -> 0.90 / 0.87, then (2026-12-06, same guest kind)
/// row by row 0.82-0.93 / 0.57-0.63 -> grouped 0.88-0.93 / 0.82-0.83: the row walk's three
/// loads per vector limit the second thread, as the loads are this core's narrow resource
/// (bench/simdnorm_bench; docs/performance.md).
inline constexpr std::size_t kRowAffineGroup = 4;
inline constexpr std::size_t kRowAffineGroupMaxCols = 512;

/// Units the segment statistics kernel interleaves (channel/segment_moments-inl.hpp): short
/// units are given to tasks in multiples of this.
inline constexpr std::size_t kInterleavedUnits = 4;

/// Short units the fused schedule normalizes in one walk after their statistics (at most a
/// task's units, so at most about kTaskElements values or kInterleavedUnits units stay in L2):
/// the walk's runs of adjacent NCHW channels are longer, so fewer of its vectors are scalar
/// heads and tails or plane boundaries. Measured on: a 2-core Zen 5 guest, NCHW 32x512x7x7
/// BatchNorm training, 1 thread, blocks of 16 against 4: 0.35-0.36 of copy against 0.28-0.33
/// (a program timing the public API; with the walk of segment_moments, bench/simdnorm_bench
/// 0.26-0.28 -> 0.32-0.37; docs/performance.md).
inline constexpr std::size_t kFusedBlockUnits = 16;
static_assert(kFusedBlockUnits % kInterleavedUnits == 0);

/// Elements per statistics chunk (common/moments-inl.hpp): sums within a chunk are float, the
/// chunks are merged in double. Longer chunks lose accuracy (about u * chunk / lanes); shorter
/// ones cost more merges. Part of the numerics: changing it changes the bits of every result.
inline constexpr std::size_t kMomentChunk = kSmallSchedules ? 256 : 2048;

/// Elements per row piece: a long row's statistics are its pieces' moments folded in order
/// (row/stats_long-inl.hpp), so a plan can give the pieces of one row to different tasks, or
/// a caller to different processes, without changing a bit. A multiple of kMomentChunk. Longer
/// pieces leave fewer tasks for a long row; shorter ones cost more folds. Part of the
/// numerics: changing it changes the bits of rows longer than it.
inline constexpr std::size_t kPieceElements = kSmallSchedules ? 512 : 16384;
static_assert(kPieceElements % kMomentChunk == 0);
static_assert(kMomentChunk >= kShortCols);  // a short row is one chunk (row/stats_short-inl.hpp)

// ---- kernel thresholds -----------------------------------------------------------------------

/// A group of rows is normalized right after its statistics while its x stays in L2: groups
/// hold at most this many bytes of x (row/normalize-inl.hpp), so x is read from memory once.
/// Measured on: 2-core cloud guests (Zen 4 / Sapphire Rapids), bench/simdnorm_bench.
inline constexpr std::size_t kGroupBytes = std::size_t(kSmallSchedules ? 4 : 256) << 10;

/// With regular stores, the normalize pass runs rows of kShortCols < n <= this one by one (one
/// sequential store stream, which the hardware prefetcher follows) rather than kRowGroup
/// interleaved. Measured on: a 2-core Intel guest, in cache, 1 thread, row by row 0.04-0.07 of
/// copy ahead at D = 64-1024 (bench/simdnorm_bench; docs/performance.md, kernel notes).
inline constexpr std::size_t kRowsTogetherMinCols = 1024;

/// Distance (floats) of the software prefetch in streaming channel passes: a single core's DRAM
/// read bandwidth is bound by misses in flight, and the hardware prefetchers alone keep too
/// few. Measured on: a 2-core Xeon guest, beyond the LLC (bench/simdnorm_bench batch_norm;
/// docs/performance.md, channel kernels).
inline constexpr std::size_t kStreamPrefetch = 1024;

/// AMD's L3 belongs to one CCX (32 MiB on Zen 2 to Zen 5; 96 MiB with 3D V-Cache), and a core
/// reaches only its own. A guest with no sysfs cache entries may report, through CPUID
/// 0x80000006, the L3 of the whole package instead (508 MiB on a 2-core Zen 5 guest): a figure
/// above kAmdLargestL3 is taken for that and replaced by kAmdCcxL3, so that the store policy
/// streams beyond one CCX's cache. Measured on: that guest, LayerNorm f32 D = 768, 1 thread,
/// x of 32-128 MiB: 0.45-0.47 of copy with the regular stores the 508 MiB figure chose, 0.69-0.85
/// streaming (docs/design.md, "Store policy").
inline constexpr std::size_t kAmdLargestL3 = std::size_t(96) << 20;
inline constexpr std::size_t kAmdCcxL3 = std::size_t(32) << 20;

/// Pieces of a segment start at multiples of this many floats (one 64-byte cache line), so
/// that no line is shared by two tasks' pieces. Not measured: the line size.
inline constexpr std::size_t kLineFloats = 64 / sizeof(float);

}  // namespace simdnorm::detail
