// MXFP4 decoding against transformers: tests/data/gpt_oss/tiny_mxfp4/ is a sharded GPT-OSS
// checkpoint whose experts are stored as U8 blocks/scales (layer 0: every E8M0 scale value,
// every byte value), and expected.safetensors holds the parameters transformers'
// from_pretrained(..., Mxfp4Config(dequantize=True)) loaded from it in float32 and bfloat16.
// air's decoding must equal them bit for bit: in transformers' layout, in the stored layout,
// for a range of experts, through WeightReader (the index finds each shard), and through every
// registered backend's DequantizeMxfp4 op (the path the model's loader takes).
#include "engine/io/mxfp4.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/backend/registry.h"
#include "engine/check.h"
#include "gpt_oss_fixture.h"
#include "op_test_util.h"

namespace air::engine {
namespace {

using testing::GptOssFixture;
using ::testing::HasSubstr;

struct Case {
  int layer;
  std::string proj;  // gate_up_proj or down_proj
};

class Mxfp4Reference : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    auto reader = WeightReader::Open(GptOssFixture("tiny_mxfp4"));
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    reader_ = std::move(*reader);
    auto expected = SafetensorsFile::Open(GptOssFixture("tiny_mxfp4/expected.safetensors"));
    ASSERT_TRUE(expected.ok()) << expected.status().ToString();
    expected_ = std::move(*expected);
    name_ = "model.layers." + std::to_string(GetParam().layer) + ".mlp.experts." + GetParam().proj;
    auto layout = FindMxfp4(*reader_, name_);
    ASSERT_TRUE(layout.ok()) << layout.status().ToString();
    layout_ = *layout;
    blocks_ = Bytes(name_ + "_blocks");
    scales_ = Bytes(name_ + "_scales");
  }

  const uint8_t* Bytes(const std::string& name) const {
    const SafetensorsFile* file = nullptr;
    const SafetensorsEntry* entry = reader_->Find(name, &file);
    AIR_ENGINE_CHECK(entry != nullptr && entry->raw_u8, "fixture lacks a U8 tensor");
    return file->RawData(*entry);
  }

  // The expected parameter ("float32" or "bfloat16"), or nullptr when the fixture has none.
  const SafetensorsEntry* Expected(const std::string& dtype) const {
    return expected_->Find(name_ + "." + dtype);
  }

  std::unique_ptr<WeightReader> reader_;
  std::unique_ptr<SafetensorsFile> expected_;
  std::string name_;
  Mxfp4Layout layout_;
  const uint8_t* blocks_ = nullptr;
  const uint8_t* scales_ = nullptr;
};

TEST_P(Mxfp4Reference, Float32EqualsTransformersBitForBit) {
  const SafetensorsEntry* want = Expected("float32");
  ASSERT_NE(want, nullptr);
  EXPECT_EQ(Mxfp4DecodedShape(layout_, Mxfp4Orientation::kTransformers), want->shape);
  std::vector<float> got(static_cast<size_t>(layout_.numel()));
  DequantizeMxfp4F32(layout_, blocks_, scales_, Mxfp4Orientation::kTransformers, 0, layout_.experts,
                     got.data());
  ASSERT_EQ(got.size() * 4, want->end - want->begin);
  const uint8_t* ref = expected_->RawData(*want);
  for (size_t i = 0; i < got.size(); ++i) {
    uint32_t bits, ref_bits;
    std::memcpy(&bits, &got[i], 4);
    std::memcpy(&ref_bits, ref + 4 * i, 4);
    ASSERT_EQ(bits, ref_bits) << name_ << " element " << i << ": " << got[i];
  }
}

// The fixture keeps bfloat16 parameters for layer 0 (the one with every scale value) only.
class Mxfp4ReferenceBf16 : public Mxfp4Reference {};

TEST_P(Mxfp4ReferenceBf16, Bfloat16EqualsTransformersBitForBit) {
  const SafetensorsEntry* want = Expected("bfloat16");
  ASSERT_NE(want, nullptr);
  std::vector<uint16_t> got(static_cast<size_t>(layout_.numel()));
  DequantizeMxfp4Bf16(layout_, blocks_, scales_, Mxfp4Orientation::kTransformers, 0,
                      layout_.experts, got.data());
  ASSERT_EQ(got.size() * 2, want->end - want->begin);
  const uint8_t* ref = expected_->RawData(*want);
  size_t infinities = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    uint16_t ref_bits;
    std::memcpy(&ref_bits, ref + 2 * i, 2);
    ASSERT_EQ(got[i], ref_bits) << name_ << " element " << i;
    infinities += (got[i] & 0x7fff) == 0x7f80;
  }
  EXPECT_GT(infinities, 0u) << "layer 0 holds overflowing scales";
}

// Ops::DequantizeMxfp4 on every backend this machine runs (the CUDA kernel where a GPU is),
// from the blocks and scales uploaded as stored, gives transformers' float32 and bfloat16 bits.
TEST_P(Mxfp4Reference, EveryBackendsDequantizeOpEqualsTransformersBitForBit) {
  const int64_t scale_count = layout_.experts * layout_.rows * layout_.groups;
  for (const RegisteredBackend& r : RegisteredBackends(2)) {
    auto backend = CreateBackend(r.options);
    ASSERT_TRUE(backend.ok()) << r.name;
    ::air::engine::testing::DeviceArrays d(**backend);
    const View blocks = d.U8({blocks_, blocks_ + scale_count * kMxfp4GroupBytes});
    const View scales = d.U8({scales_, scales_ + scale_count});
    for (const char* dtype : {"float32", "bfloat16"}) {
      const SafetensorsEntry* want = Expected(dtype);
      if (want == nullptr) continue;  // layer 1 has no bfloat16 parameters in the fixture
      const bool bf16 = std::string(dtype) == "bfloat16";
      View out;
      auto buffer = (*backend)->AllocateView(
          bf16 ? DType::kBF16 : DType::kF32,
          Mxfp4DecodedShape(layout_, Mxfp4Orientation::kTransformers), &out);
      ASSERT_TRUE(buffer.ok());
      (*backend)->DequantizeMxfp4(layout_.experts, layout_.rows, layout_.groups, blocks, scales,
                                  out);
      std::vector<uint8_t> got(out.bytes());
      (*backend)->CopyToHost(got.data(), out);
      ASSERT_EQ(got.size(), want->end - want->begin) << r.name << " " << dtype;
      EXPECT_EQ(std::memcmp(got.data(), expected_->RawData(*want), got.size()), 0)
          << r.name << " " << name_ << " " << dtype;
    }
  }
}

TEST_P(Mxfp4Reference, StoredOrientationIsTheTransposeAndRangesDecodeOneExpert) {
  const SafetensorsEntry* want = Expected("float32");
  ASSERT_NE(want, nullptr);
  const uint8_t* ref = expected_->RawData(*want);
  const int64_t rows = layout_.rows, cols = layout_.cols();
  EXPECT_EQ(Mxfp4DecodedShape(layout_, Mxfp4Orientation::kStored),
            (Shape{layout_.experts, rows, cols}));
  const int64_t e = layout_.experts - 1;  // the last expert only, [rows, cols]
  std::vector<float> got(static_cast<size_t>(rows * cols), -1.0f);
  DequantizeMxfp4F32(layout_, blocks_, scales_, Mxfp4Orientation::kStored, e, e + 1, got.data());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      ASSERT_EQ(std::memcmp(&got[r * cols + c], ref + 4 * ((e * cols + c) * rows + r), 4), 0)
          << "row " << r << " col " << c;
    }
  }
}

TEST_P(Mxfp4Reference, ReadMxfp4F32DecodesThroughTheWeightReader) {
  auto tensor = ReadMxfp4F32(*reader_, name_);
  ASSERT_TRUE(tensor.ok()) << tensor.status().ToString();
  const SafetensorsEntry* want = Expected("float32");
  ASSERT_NE(want, nullptr);
  EXPECT_EQ(tensor->shape(), want->shape);
  EXPECT_EQ(std::memcmp(tensor->data(), expected_->RawData(*want), want->end - want->begin), 0);
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  return "layer" + std::to_string(info.param.layer) + "_" + info.param.proj;
}

INSTANTIATE_TEST_SUITE_P(Experts, Mxfp4Reference,
                         ::testing::Values(Case{0, "gate_up_proj"}, Case{0, "down_proj"},
                                           Case{1, "gate_up_proj"}, Case{1, "down_proj"}),
                         CaseName);
INSTANTIATE_TEST_SUITE_P(Experts, Mxfp4ReferenceBf16,
                         ::testing::Values(Case{0, "gate_up_proj"}, Case{0, "down_proj"}),
                         CaseName);

TEST(Mxfp4, ValuesAreLdexpOfE2m1) {
  EXPECT_EQ(Mxfp4Value(0x1, 127), 0.5f);
  EXPECT_EQ(Mxfp4Value(0x7, 128), 12.0f);
  EXPECT_EQ(Mxfp4Value(0xF, 126), -3.0f);
  EXPECT_TRUE(std::signbit(Mxfp4Value(0x8, 127)) && Mxfp4Value(0x8, 127) == 0.0f);  // -0
  EXPECT_EQ(Mxfp4Value(0x0, 255), 0.0f);  // ldexp: zero stays zero, never 0 * inf
  EXPECT_EQ(Mxfp4Value(0x1, 255), std::ldexp(1.0f, 127));
  EXPECT_TRUE(std::isinf(Mxfp4Value(0x4, 255)));
  EXPECT_EQ(Mxfp4Value(0x1, 0), std::ldexp(1.0f, -128));  // subnormal, exact
}

TEST(Mxfp4, InconsistentShapesAreAnErrorNamingBoth) {
  auto bad = Mxfp4LayoutOf({2, 64, 2, 16}, {2, 64, 3}, "experts.down_proj");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("experts.down_proj"));
  EXPECT_THAT(bad.status().message(), HasSubstr("[2, 64, 3]"));
  EXPECT_FALSE(Mxfp4LayoutOf({2, 64, 2, 8}, {2, 64, 2}, "x").ok());  // 16 bytes per group
}

TEST(Mxfp4, MissingTensorsAndFloatReadsOfBytesAreErrors) {
  auto reader = WeightReader::Open(GptOssFixture("tiny_mxfp4"));
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  auto missing = ReadMxfp4F32(**reader, "model.layers.7.mlp.experts.gate_up_proj");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  EXPECT_THAT(missing.status().message(),
              HasSubstr("model.layers.7.mlp.experts.gate_up_proj_blocks"));
  // A U8 entry is not a weight: reading it as floats is refused, naming it.
  Tensor out({2, 64, 2});
  Status read = (*reader)->ReadInto("model.layers.0.mlp.experts.gate_up_proj_scales", out);
  ASSERT_FALSE(read.ok());
  EXPECT_THAT(read.message(), HasSubstr("U8"));
  EXPECT_THAT(read.message(), HasSubstr("gate_up_proj_scales"));
}

}  // namespace
}  // namespace air::engine
