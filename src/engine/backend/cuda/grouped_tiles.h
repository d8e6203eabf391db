// The index arithmetic of the CUDA grouped GEMM (cuda_grouped_gemm.cu) and MXFP4 dequantisation
// (cuda_mxfp4.cu), as functions both nvcc (__host__ __device__: the kernels call them) and g++
// compile, so a CPU test (tests/unit/engine_core/cuda_grouped_tiles_test.cc) runs the logic the
// GPU runs: which group's rows a block's slot covers given the device offsets (ragged and empty
// groups, rows before the first group and after the last), how many slots a launch sized from
// M and G alone needs, the launch's grid within CUDA's limits, and which byte, nibble and scale
// an element of MXFP4's (E, C, R) output comes from.
// Plain structs, no CUDA headers; thread safety: pure functions.
#pragma once

#include <cstdint>

#include "engine/backend/cuda/gemm_layout.h"  // kMaxGridY
#include "engine/ops/op_semantics.h"          // AIR_HD

namespace air::engine::cuda {

// The forward's output tile: kGroupedTileRows rows of one group by kGroupedTileCols columns.
inline constexpr int kGroupedTileRows = 64, kGroupedTileCols = 64;

// Group g's rows [begin, end) from offsets (G + 1), clamped into [0, rows] so that offsets that
// break ops.h's contract (unchecked on a GPU) never address outside x and y.
struct GroupRows {
  int64_t begin = 0, end = 0;
};
AIR_HD inline GroupRows GroupRowRange(const int32_t* offsets, int64_t g, int64_t rows) {
  const int64_t lo = offsets[g], hi = offsets[g + 1];
  const int64_t begin = lo < 0 ? 0 : (lo > rows ? rows : lo);
  const int64_t end = hi < begin ? begin : (hi > rows ? rows : hi);
  return {begin, end};
}

// The row-tile slots a forward launch covers: the most 64-row tiles that G groups holding at
// most M rows in all can need (each group's last tile may be partial: one extra per group).
AIR_HD inline int64_t GroupedRowTileSlots(int64_t rows, int64_t groups) {
  return (rows + kGroupedTileRows - 1) / kGroupedTileRows + groups;
}

// Slot `slot`'s tile: the groups' tiles numbered in group order, each group's from its first
// row. group < 0: past the last tile (so is every later slot).
struct GroupedRowTile {
  int64_t group = -1;
  int64_t begin = 0, end = 0;  // rows [begin, end), at most kGroupedTileRows
};
AIR_HD inline GroupedRowTile FindGroupedRowTile(const int32_t* offsets, int64_t groups,
                                                int64_t rows, int64_t slot) {
  int64_t before = 0;  // tiles of the groups before g
  for (int64_t g = 0; g < groups; ++g) {
    const GroupRows r = GroupRowRange(offsets, g, rows);
    const int64_t tiles = (r.end - r.begin + kGroupedTileRows - 1) / kGroupedTileRows;
    if (slot < before + tiles) {
      const int64_t begin = r.begin + (slot - before) * kGroupedTileRows;
      const int64_t end = begin + kGroupedTileRows < r.end ? begin + kGroupedTileRows : r.end;
      return {g, begin, end};
    }
    before += tiles;
  }
  return {};
}

// The forward's grid: x over the column tiles, y over the row-tile slots, capped at CUDA's
// 65535 (the kernel strides over the rest).
struct GroupedForwardGrid {
  int64_t x = 0, y = 0, slots = 0;
};
inline GroupedForwardGrid GroupedGemmForwardGrid(int64_t rows, int64_t n, int64_t groups) {
  GroupedForwardGrid grid;
  grid.slots = GroupedRowTileSlots(rows, groups);
  grid.x = (n + kGroupedTileCols - 1) / kGroupedTileCols;
  grid.y = grid.slots < kMaxGridY ? grid.slots : kMaxGridY;
  return grid;
}

// Where element i of DequantizeMxfp4's out (E, C, R) (C = G * 32, R fastest) comes from: value
// c of stored row r of expert e, which is nibble c % 2 (0 low, 1 high) of byte (c % 32) / 2 of
// group (e, r, c / 32), whose scale is scales[group] and whose bytes start at blocks[group * 16].
struct Mxfp4Source {
  int64_t group = 0;  // index into scales (E, R, G)
  int64_t byte = 0;   // index into blocks (E, R, G, 16)
  bool high = false;  // the byte's high nibble
};
AIR_HD inline Mxfp4Source Mxfp4SourceOf(int64_t i, int64_t rows, int64_t groups) {
  const int64_t cols = groups * 32;
  const int64_t r = i % rows, c = (i / rows) % cols, e = i / (rows * cols);
  const int64_t group = (e * rows + r) * groups + c / 32;
  return {group, group * 16 + (c % 32) / 2, c % 2 != 0};
}

}  // namespace air::engine::cuda
