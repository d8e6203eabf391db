// MXFP4 decoding on the host (see mxfp4_decode.h).
#include "engine/mxfp4_decode.h"

#include <algorithm>
#include <array>

#include "engine/check.h"
#include "engine/dtype.h"
#include "engine/ops/op_semantics.h"

namespace air::engine {

namespace {

// Every (scale, nibble) value, in the output type: 256 rows of 16.
template <typename T>
struct ValueTable {
  std::array<std::array<T, 16>, 256> values;
};

template <typename T>
T Encode(float value);
template <>
float Encode<float>(float value) {
  return value;
}
template <>
uint16_t Encode<uint16_t>(float value) {
  return F32ToBf16(value);  // exact: every MXFP4 value is a bf16 value (or ±inf)
}

template <typename T>
ValueTable<T> MakeTable() {
  ValueTable<T> table;
  for (int s = 0; s < 256; ++s) {
    for (int n = 0; n < 16; ++n) {
      table.values[s][n] = Encode<T>(Mxfp4Value(static_cast<uint8_t>(n), static_cast<uint8_t>(s)));
    }
  }
  return table;
}

template <typename T>
const ValueTable<T>& Table() {
  static const ValueTable<T> table = MakeTable<T>();  // immutable once built
  return table;
}

// Rows per tile when transposing: the tile's writes to one output row are contiguous.
constexpr int64_t kRowTile = 64;

template <typename T>
void Decode(const Mxfp4Layout& layout, const uint8_t* blocks, const uint8_t* scales,
            Mxfp4Orientation orientation, int64_t expert_begin, int64_t expert_end, T* out) {
  AIR_ENGINE_CHECK(0 <= expert_begin && expert_begin <= expert_end && expert_end <= layout.experts,
                   "MXFP4 expert range out of bounds");
  const ValueTable<T>& table = Table<T>();
  const int64_t rows = layout.rows, groups = layout.groups, cols = layout.cols();
  for (int64_t e = expert_begin; e < expert_end; ++e) {
    const uint8_t* eb = blocks + e * rows * groups * kMxfp4GroupBytes;
    const uint8_t* es = scales + e * rows * groups;
    T* eo = out + (e - expert_begin) * rows * cols;
    if (orientation == Mxfp4Orientation::kStored) {
      // out[r][c]: each group is 32 consecutive values.
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t g = 0; g < groups; ++g) {
          const uint8_t* b = eb + (r * groups + g) * kMxfp4GroupBytes;
          const auto& row = table.values[es[r * groups + g]];
          T* o = eo + r * cols + g * kMxfp4GroupSize;
          for (int64_t j = 0; j < kMxfp4GroupBytes; ++j) {
            o[2 * j] = row[b[j] & 0x0F];
            o[2 * j + 1] = row[b[j] >> 4];
          }
        }
      }
      continue;
    }
    // out[c][r] (transposed): a tile of rows at a time; the innermost loop runs along r, so
    // each output row gets a contiguous run of writes while the tile's input stays in cache.
    for (int64_t r0 = 0; r0 < rows; r0 += kRowTile) {
      const int64_t r1 = std::min(rows, r0 + kRowTile);
      for (int64_t g = 0; g < groups; ++g) {
        const std::array<T, 16>* value_rows[kRowTile];
        const uint8_t* bytes[kRowTile];
        for (int64_t r = r0; r < r1; ++r) {
          value_rows[r - r0] = &table.values[es[r * groups + g]];
          bytes[r - r0] = eb + (r * groups + g) * kMxfp4GroupBytes;
        }
        for (int64_t j = 0; j < kMxfp4GroupBytes; ++j) {
          T* lo = eo + (g * kMxfp4GroupSize + 2 * j) * rows;
          T* hi = lo + rows;
          for (int64_t r = r0; r < r1; ++r) {
            const uint8_t byte = bytes[r - r0][j];
            lo[r] = (*value_rows[r - r0])[byte & 0x0F];
            hi[r] = (*value_rows[r - r0])[byte >> 4];
          }
        }
      }
    }
  }
}

}  // namespace

Shape Mxfp4DecodedShape(const Mxfp4Layout& layout, Mxfp4Orientation orientation) {
  if (orientation == Mxfp4Orientation::kStored) return {layout.experts, layout.rows, layout.cols()};
  return {layout.experts, layout.cols(), layout.rows};
}

void DequantizeMxfp4F32(const Mxfp4Layout& layout, const uint8_t* blocks, const uint8_t* scales,
                        Mxfp4Orientation orientation, int64_t expert_begin, int64_t expert_end,
                        float* out) {
  Decode<float>(layout, blocks, scales, orientation, expert_begin, expert_end, out);
}

void DequantizeMxfp4Bf16(const Mxfp4Layout& layout, const uint8_t* blocks, const uint8_t* scales,
                         Mxfp4Orientation orientation, int64_t expert_begin, int64_t expert_end,
                         uint16_t* out) {
  Decode<uint16_t>(layout, blocks, scales, orientation, expert_begin, expert_end, out);
}

}  // namespace air::engine
