// Internal: the tuning numbers of the plans (how work is cut into tasks, phases and waves) and
// the kernel internals the plans size their work by, each named once. Changing one changes
// the task partition, and for the statistics partitions the bits of the results (the golden
// hashes), never the correctness.
#pragma once
#include <cstddef>

namespace simdnorm::detail {

// ---- task sizing (row and channel plans) -----------------------------------------------------

/// Elements of x per task (64 KiB of floats). Trades the cost of a task switch (larger tasks
/// amortize it) against load balance (smaller tasks keep two to sixteen threads busy on 1 MiB).
/// Measured on: 2-core cloud guests (Zen 4 / Sapphire Rapids), bench/simdnorm_bench.
inline constexpr std::size_t kTaskElements = 16384;

// ---- channel plan: planes schedule -----------------------------------------------------------

/// Below this many units the planes schedule cuts each unit into parts spread over tasks (the
/// split schedule, two phases per wave), so that a few large units (C = 1..15) still feed the
/// threads. Trades the extra phase and the re-read of the wave from cache against idle threads.
/// Measured on: 2-core cloud guests (Zen 4 / Sapphire Rapids), bench/simdnorm_bench.
inline constexpr std::size_t kMinUnits = 16;

/// At most this many bytes of x per wave of split units. Trades fewer phases (larger waves)
/// against phase B finding the wave still in cache.
/// Measured on: 2-core cloud guests (Zen 4 / Sapphire Rapids), bench/simdnorm_bench.
inline constexpr std::size_t kWaveBytes = std::size_t(16) << 20;

/// A wave also takes at most 1 / kWaveCacheDivisor of the last-level cache, leaving the rest
/// to y, the workspace and other threads' data. Trades fewer phases against cache hits in
/// phase B.
/// Measured on: 2-core cloud guests (Zen 4 / Sapphire Rapids), bench/simdnorm_bench.
inline constexpr std::size_t kWaveCacheDivisor = 4;

/// Shortest piece, in elements, a segment (or an inference plane) is cut into when a unit or a
/// plane is spread over tasks. Trades more, smaller tasks (balance) against per-piece overhead
/// and the chunk tails of the statistics kernel.
/// Measured on: 2-core cloud guests (Zen 4 / Sapphire Rapids), bench/simdnorm_bench.
inline constexpr std::size_t kMinPieceElements = 1024;

/// Segments shorter than this (such as 14x14 planes) count as short: units made of them go
/// through the interleaved statistics kernel even when they hold up to kTaskElements values,
/// as the per-chunk scalar chains dominate there and overlap across units. Longer segments go
/// one unit at a time. Trades overlapped scalar chains against interleaving long units
/// (BatchNorm training, 1 thread: 32x256x14x14 channels 0.43 -> 0.52 of copy interleaved,
/// while 1x64x112x112 channels, one 12544-value plane, drop 0.66 -> 0.58).
/// Measured on: 2-core cloud guests (Zen 4 / Sapphire Rapids), bench/simdnorm_bench.
inline constexpr std::size_t kShortSegmentElements = 1024;

// ---- channel plan: columns schedule ----------------------------------------------------------

/// At most this many row splits per problem (the partial-moments phase), and the number of
/// splits aimed at over the batch, to feed the threads. Trades parallelism in the partial
/// phase against workspace and the merge work of the finish phase.
/// Measured on: 2-core cloud guests (Zen 4 / Sapphire Rapids), bench/simdnorm_bench.
inline constexpr std::size_t kMaxColumnSplits = 16;

/// Partial moments (channels times splits) a task of the finish phase merges. Trades task
/// count against per-task overhead; the phase is small next to the two passes over x.
/// Measured on: 2-core cloud guests (Zen 4 / Sapphire Rapids), bench/simdnorm_bench.
inline constexpr std::size_t kColumnFinishMoments = 4096;

/// Units the finish phase merges side by side, so that their dependent chains of Chan steps
/// overlap. Trades latency hiding against registers and stack (two doubles per unit).
/// Measured on: 2-core cloud guests (Zen 4 / Sapphire Rapids), bench/simdnorm_bench.
inline constexpr std::size_t kMergeSideBySide = 32;

// ---- kernel internals the plans size their work by -------------------------------------------
// Not tuning choices of the plans: they repeat constants of the kernels (which the plans do not
// include, as those headers need xsimd) and must change together with them.

/// Rows per chunk of the column statistics kernel (kColumnChunkRows in
/// kernels/channel_moments-inl.hpp): a row split shorter than this wastes the chunk.
inline constexpr std::size_t kKernelColumnChunkRows = 64;

/// Units the segment statistics kernel interleaves (segment_moments in
/// kernels/channel_moments-inl.hpp takes them 4 at a time): short units are given to tasks in
/// multiples of this.
inline constexpr std::size_t kKernelInterleavedUnits = 4;

/// Pieces of a segment start at multiples of this many floats (one 64-byte cache line), so
/// that no line is shared by two tasks' pieces. Not measured: the line size.
inline constexpr std::size_t kPieceAlignElements = 16;

}  // namespace simdnorm::detail
