// The index arithmetic the CUDA grouped GEMM and MXFP4 kernels run (backend/cuda/grouped_tiles.h),
// checked without a GPU: for ragged offsets (empty groups, one-row groups, whole and partial
// 64-row tiles, rows before the first group and after the last, clamped out-of-contract values)
// the forward's slots, taken in launch order, cover every grouped row exactly once, each with its
// own group, and no other row; the launch sized from M and G alone has enough slots for the worst
// case and stays within CUDA's grid limits; and MXFP4 elements decoded through Mxfp4SourceOf and
// Mxfp4Value have the host decoder's bits (mxfp4_decode.h, transformers' layout).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "engine/backend/cuda/grouped_tiles.h"
#include "engine/mxfp4_decode.h"

namespace air::engine::cuda {
namespace {

struct Case {
  std::vector<int32_t> offsets;  // G + 1
  int64_t rows;
};

std::string Describe(const Case& c) {
  std::string s = "M" + std::to_string(c.rows) + " offsets";
  for (int32_t o : c.offsets) s += " " + std::to_string(o);
  return s;
}

std::vector<Case> Cases() {
  std::vector<Case> cases = {
      {{2, 5, 5, 75, 76}, 81},                            // rows around, an empty group
      {{0, 64, 129, 129, 130, 260, 267, 267, 300}, 300},  // whole tiles and ragged tails
      {{0, 200}, 200},                                    // one group
      {{0, 0, 0, 0}, 10},                                 // no rows in any group
      {{0, 1, 2, 3, 4, 5, 6, 7, 8}, 8},                   // one row each: a tile per row
      {{0, 65, 130, 195}, 195},                           // 65 rows each: a one-row tail each
      {{0, 64, 128}, 128},                                // exact tiles
      {{7, 7}, 7},                                        // the only group starts at the end
      {{0, 1}, 1},                                        // M = 1, G = 1
  };
  // Random ragged groups, a quarter of them empty, with rows left before and after.
  std::mt19937 rng(31);
  for (int round = 0; round < 50; ++round) {
    const int groups = 1 + static_cast<int>(rng() % 40);
    Case c;
    int32_t at = static_cast<int32_t>(rng() % 70);
    c.offsets.push_back(at);
    for (int g = 0; g < groups; ++g) {
      at += rng() % 4 == 0 ? 0 : static_cast<int32_t>(rng() % 200);
      c.offsets.push_back(at);
    }
    c.rows = at + static_cast<int64_t>(rng() % 70);
    cases.push_back(c);
  }
  return cases;
}

TEST(CudaGroupedTiles, SlotsCoverEveryGroupedRowOnceAndNoOtherRow) {
  for (const Case& c : Cases()) {
    const int64_t groups = static_cast<int64_t>(c.offsets.size()) - 1;
    const std::string what = Describe(c);
    const GroupedForwardGrid grid = GroupedGemmForwardGrid(c.rows, 64, groups);
    std::vector<int64_t> group_of_row(static_cast<size_t>(c.rows), -1);
    // Every slot of the launch, as the blocks of one column stride over them.
    for (int64_t block_y = 0; block_y < grid.y; ++block_y) {
      bool returned = false;  // the kernel returns at its block's first empty slot
      for (int64_t slot = block_y; slot < grid.slots; slot += grid.y) {
        const GroupedRowTile t = FindGroupedRowTile(c.offsets.data(), groups, c.rows, slot);
        if (returned) {
          ASSERT_LT(t.group, 0) << what << ": slot " << slot << " after its block returned";
          continue;
        }
        if (t.group < 0) {
          returned = true;
          continue;
        }
        ASSERT_LT(t.group, groups) << what;
        ASSERT_GE(t.begin, c.offsets[t.group]) << what << " slot " << slot;
        ASSERT_LE(t.end, c.offsets[t.group + 1]) << what << " slot " << slot;
        ASSERT_LT(t.begin, t.end) << what << " slot " << slot;
        ASSERT_LE(t.end - t.begin, kGroupedTileRows) << what;
        ASSERT_EQ((t.begin - c.offsets[t.group]) % kGroupedTileRows, 0) << what;
        for (int64_t r = t.begin; r < t.end; ++r) {
          ASSERT_EQ(group_of_row[r], -1) << what << ": row " << r << " in two tiles";
          group_of_row[r] = t.group;
        }
      }
    }
    // Each grouped row was computed, by its group; every other row left alone.
    for (int64_t r = 0; r < c.rows; ++r) {
      int64_t want = -1;
      for (int64_t g = 0; g < groups; ++g) {
        if (r >= c.offsets[g] && r < c.offsets[g + 1]) want = g;
      }
      ASSERT_EQ(group_of_row[r], want) << what << " row " << r;
    }
  }
}

TEST(CudaGroupedTiles, SlotsAfterTheLastTileAreEmpty) {
  for (const Case& c : Cases()) {
    const int64_t groups = static_cast<int64_t>(c.offsets.size()) - 1;
    int64_t tiles = 0;
    for (int64_t g = 0; g < groups; ++g) {
      tiles += (c.offsets[g + 1] - c.offsets[g] + kGroupedTileRows - 1) / kGroupedTileRows;
    }
    ASSERT_LE(tiles, GroupedRowTileSlots(c.rows, groups)) << Describe(c);
    for (int64_t slot = 0; slot < GroupedRowTileSlots(c.rows, groups) + 3; ++slot) {
      const GroupedRowTile t = FindGroupedRowTile(c.offsets.data(), groups, c.rows, slot);
      EXPECT_EQ(t.group >= 0, slot < tiles) << Describe(c) << " slot " << slot;
    }
  }
}

TEST(CudaGroupedTiles, OffsetsOutsideTheRowsAreClamped) {
  // Out of contract (a GPU does not check): no tile may address a row outside [0, M).
  const std::vector<int32_t> offsets = {-5, 10, 3, 500};
  const int64_t rows = 100, groups = 3;
  for (int64_t slot = 0; slot < GroupedRowTileSlots(rows, groups); ++slot) {
    const GroupedRowTile t = FindGroupedRowTile(offsets.data(), groups, rows, slot);
    if (t.group < 0) continue;
    EXPECT_GE(t.begin, 0);
    EXPECT_LE(t.end, rows);
    EXPECT_LE(t.begin, t.end);
  }
  const GroupRows r = GroupRowRange(offsets.data(), 1, rows);  // 10 .. 3: empty
  EXPECT_EQ(r.begin, r.end);
}

TEST(CudaGroupedTiles, TheForwardGridStaysWithinCudasLimitsAndHasEnoughSlots) {
  // GPT-OSS-120B's experts at a long batch, and sizes past 65535 row tiles.
  for (int64_t rows : {int64_t{1}, int64_t{8192}, int64_t{65536} * 64, int64_t{2147483647}}) {
    for (int64_t groups : {int64_t{1}, int64_t{128}, int64_t{70000}}) {
      const GroupedForwardGrid g = GroupedGemmForwardGrid(rows, 5760, groups);
      EXPECT_LE(g.y, 65535) << rows << " rows";
      EXPECT_GE(g.y, 1);
      EXPECT_EQ(g.x, 90);
      // The worst case: every group's last tile partial.
      EXPECT_GE(g.slots, (rows + 63) / 64 + groups - 1);
    }
  }
}

TEST(CudaGroupedTiles, Mxfp4ElementsHaveTheDecodersBits) {
  for (auto [experts, rows, groups] :
       std::vector<std::tuple<int64_t, int64_t, int64_t>>{{3, 5, 2}, {2, 67, 3}, {1, 256, 1}}) {
    const Mxfp4Layout layout{experts, rows, groups};
    const int64_t scale_count = experts * rows * groups;
    std::vector<uint8_t> blocks(static_cast<size_t>(scale_count * kMxfp4GroupBytes));
    std::vector<uint8_t> scales(static_cast<size_t>(scale_count));
    for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = static_cast<uint8_t>(i * 37 + 11);
    for (size_t i = 0; i < scales.size(); ++i) scales[i] = static_cast<uint8_t>(i * 53 + 7);
    std::vector<float> want(static_cast<size_t>(layout.numel()));
    DequantizeMxfp4F32(layout, blocks.data(), scales.data(), Mxfp4Orientation::kTransformers, 0,
                       experts, want.data());
    for (int64_t i = 0; i < layout.numel(); ++i) {
      const Mxfp4Source s = Mxfp4SourceOf(i, rows, groups);
      ASSERT_LT(s.byte, static_cast<int64_t>(blocks.size()));
      const uint8_t byte = blocks[s.byte];
      const auto nibble = static_cast<uint8_t>(s.high ? byte >> 4 : byte & 0x0F);
      const float got = Mxfp4Value(nibble, scales[s.group]);
      uint32_t got_bits, want_bits;
      std::memcpy(&got_bits, &got, 4);
      std::memcpy(&want_bits, &want[i], 4);
      ASSERT_EQ(got_bits, want_bits)
          << "E" << experts << " R" << rows << " G" << groups << " element " << i;
    }
  }
}

}  // namespace
}  // namespace air::engine::cuda
