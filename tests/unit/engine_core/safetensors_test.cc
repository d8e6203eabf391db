// safetensors: round trips in F32/BF16/F16 and one test per corruption the reader must turn
// into a clear error (naming the file and, where one is at fault, the tensor) instead of a crash.
#include "engine/io/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "test_util.h"

namespace air::engine {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::ReadBytes;
using testing::ScratchDir;
using testing::WriteBytes;

// A file made of a raw header string and `data_bytes` bytes of data.
std::string MakeFile(const std::string& header, size_t data_bytes, bool pad = true) {
  std::string h = header;
  while (pad && h.size() % 8 != 0) h.push_back(' ');
  const uint64_t len = h.size();
  std::string out(8, '\0');
  std::memcpy(out.data(), &len, 8);
  return out + h + std::string(data_bytes, '\x01');
}

Status OpenStatus(const std::string& path) { return SafetensorsFile::Open(path).status(); }

TEST(Safetensors, RoundTripF32KeepsNamesShapesValuesAndMetadata) {
  ScratchDir dir;
  Tensor a = testing::RandomTensor({3, 4}, 1), b = testing::RandomTensor({5}, 2);
  Tensor scalar({}, {42.0f});
  const std::string path = dir / "m.safetensors";
  ASSERT_TRUE(WriteSafetensors(path, {{"a", &a}, {"b.weight", &b}, {"s", &scalar}}, DType::kF32,
                               {{"format", "pt"}})
                  .ok());
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ((*file)->metadata().at("format"), "pt");
  ASSERT_EQ((*file)->entries().size(), 3u);
  auto read_a = (*file)->ReadF32("a");
  ASSERT_TRUE(read_a.ok());
  EXPECT_EQ(read_a->shape(), a.shape());
  EXPECT_EQ(MaxAbsDiff(*read_a, a), 0.0f);
  Tensor into({5});
  ASSERT_TRUE((*file)->ReadInto("b.weight", into).ok());
  EXPECT_EQ(MaxAbsDiff(into, b), 0.0f);
  EXPECT_EQ((*file)->ReadF32("s")->shape(), Shape{});
  EXPECT_EQ((*(*file)->ReadF32("s"))[0], 42.0f);
  // The header is padded so the data starts 8-aligned.
  uint64_t header_len;
  std::memcpy(&header_len, ReadBytes(path).data(), 8);
  EXPECT_EQ(header_len % 8, 0u);
}

TEST(Safetensors, RoundTripBf16AndF16RoundToNearest) {
  ScratchDir dir;
  Tensor t({6}, {1.0f, -2.5f, 3.14159265f, 1e-3f, 65504.0f, 0.0f});
  for (DType dtype : {DType::kBF16, DType::kF16}) {
    const std::string path = dir / (std::string(DTypeName(dtype)) + ".safetensors");
    ASSERT_TRUE(WriteSafetensors(path, {{"t", &t}}, dtype, {}).ok());
    EXPECT_EQ(ReadBytes(path).size() % 2, 0u);
    auto file = SafetensorsFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    EXPECT_EQ((*file)->Find("t")->dtype, dtype);
    Tensor back = *(*file)->ReadF32("t");
    for (int64_t i = 0; i < t.numel(); ++i) {
      const float rel = dtype == DType::kBF16 ? 1.0f / 256 : 1.0f / 2048;
      EXPECT_NEAR(back[i], t[i], std::fabs(t[i]) * rel) << DTypeName(dtype) << " " << i;
    }
    EXPECT_EQ(back[0], 1.0f);
    EXPECT_EQ(back[1], -2.5f);
  }
}

TEST(Safetensors, ConversionsMatchTorchOnEdgeValues) {
  EXPECT_EQ(F32ToBf16(1.0f), 0x3f80);
  EXPECT_EQ(F32ToBf16(1.00390625f), 0x3f80);  // tie: rounds to even (down)
  EXPECT_EQ(F32ToBf16(1.01171875f), 0x3f82);  // tie: rounds to even (up)
  EXPECT_TRUE(std::isnan(Bf16ToF32(F32ToBf16(NAN))));
  EXPECT_EQ(F32ToF16(65504.0f), 0x7bff);
  EXPECT_EQ(F32ToF16(65520.0f), 0x7c00);       // overflows to infinity, as torch
  EXPECT_EQ(F32ToF16(5.9604645e-8f), 0x0001);  // smallest subnormal
  EXPECT_EQ(F16ToF32(0x0001), 5.9604645e-8f);
  EXPECT_EQ(F16ToF32(0xc000), -2.0f);
  EXPECT_TRUE(std::isinf(F16ToF32(0x7c00)));
  EXPECT_TRUE(std::isnan(F16ToF32(F32ToF16(NAN))));
  for (uint32_t bits = 0; bits < 0x7c00; bits += 7) {  // every finite half survives a round trip
    ASSERT_EQ(F32ToF16(F16ToF32(static_cast<uint16_t>(bits))), bits);
  }
}

TEST(Safetensors, WriterRejectsDuplicateNames) {
  ScratchDir dir;
  Tensor t({1});
  Status s = WriteSafetensors(dir / "d.safetensors", {{"x", &t}, {"x", &t}}, DType::kF32, {});
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("'x'"));
}

struct CorruptCase {
  const char* name;
  std::string bytes;
  const char* expected;  // a substring of the error
  const char* tensor;    // the tensor the error must name, or ""
};

class SafetensorsCorruption : public ::testing::TestWithParam<CorruptCase> {};

TEST_P(SafetensorsCorruption, IsAClearErrorNamingFileAndTensor) {
  const CorruptCase& c = GetParam();
  ScratchDir dir;
  const std::string path = dir / "bad.safetensors";
  WriteBytes(path, c.bytes);
  Status s = OpenStatus(path);
  ASSERT_FALSE(s.ok()) << c.name;
  EXPECT_THAT(s.message(), AllOf(HasSubstr(path), HasSubstr(c.expected))) << c.name;
  if (*c.tensor) {
    EXPECT_THAT(s.message(), HasSubstr(std::string("'") + c.tensor + "'"));
  }
}

const std::string kGood = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";

std::string HeaderLength(uint64_t len) {
  std::string out(8, '\0');
  std::memcpy(out.data(), &len, 8);
  return out;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, SafetensorsCorruption,
    ::testing::Values(
        CorruptCase{"empty", "", "too short", ""}, CorruptCase{"short", "abc", "too short", ""},
        CorruptCase{"huge_header_len", HeaderLength(1ull << 40) + "{}", "over the", ""},
        CorruptCase{"header_past_eof", HeaderLength(64) + "{}", "runs past the end", ""},
        CorruptCase{"truncated_data", MakeFile(kGood, 5), "truncated", "a"},
        CorruptCase{"trailing_garbage", MakeFile(kGood, 12), "trailing", ""},
        CorruptCase{"not_json", MakeFile("{\"a\": [1, 2", 0), "not valid JSON", ""},
        CorruptCase{"not_utf8", MakeFile("{\"\xff\xfe\": 1}", 0), "UTF-8", ""},
        CorruptCase{"not_object", MakeFile("[1, 2]", 0), "JSON object", ""},
        CorruptCase{"unknown_dtype",
                    MakeFile(R"({"a":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", 8), "F64",
                    "a"},
        CorruptCase{"missing_dtype", MakeFile(R"({"a":{"shape":[1],"data_offsets":[0,4]}})", 4),
                    "dtype", "a"},
        CorruptCase{"negative_dim",
                    MakeFile(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4),
                    "non-negative", "a"},
        CorruptCase{"size_mismatch",
                    MakeFile(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
                    "needs 12 bytes", "a"},
        CorruptCase{"bf16_size_mismatch",
                    MakeFile(R"({"a":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,16]}})", 16),
                    "needs 8 bytes", "a"},
        CorruptCase{"reversed_offsets",
                    MakeFile(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8),
                    "end before they begin", "a"},
        CorruptCase{"bad_offsets_type",
                    MakeFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":"0-4"}})", 4),
                    "data_offsets", "a"},
        CorruptCase{"hole",
                    MakeFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                             R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                             12),
                    "hole", "b"},
        CorruptCase{"overlap",
                    MakeFile(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                             8),
                    "overlap", "b"},
        CorruptCase{"not_from_zero",
                    MakeFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8),
                    "must begin at 0", "a"},
        CorruptCase{"duplicate_name",
                    MakeFile(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                             R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                             8),
                    "twice", "a"},
        CorruptCase{"metadata_not_string",
                    MakeFile(R"({"__metadata__":{"format":1},)" + kGood.substr(1), 8),
                    "__metadata__", ""}),
    [](const ::testing::TestParamInfo<CorruptCase>& info) { return info.param.name; });

TEST(Safetensors, TruncatingAValidFileAnywhereIsAnError) {
  ScratchDir dir;
  Tensor a = testing::RandomTensor({4, 4}, 3), b = testing::RandomTensor({7}, 4);
  const std::string good = dir / "good.safetensors";
  ASSERT_TRUE(WriteSafetensors(good, {{"a", &a}, {"b", &b}}, DType::kF32, {}).ok());
  const std::string bytes = ReadBytes(good);
  for (size_t cut = 0; cut < bytes.size(); cut += 3) {
    const std::string path = dir / "cut.safetensors";
    WriteBytes(path, bytes.substr(0, cut));
    Status s = OpenStatus(path);
    ASSERT_FALSE(s.ok()) << "a file cut at byte " << cut << " opened";
    EXPECT_THAT(s.message(), HasSubstr(path));
  }
}

TEST(Safetensors, ShapeMismatchOnReadNamesBothShapes) {
  ScratchDir dir;
  Tensor a({2, 3});
  const std::string path = dir / "m.safetensors";
  ASSERT_TRUE(WriteSafetensors(path, {{"w", &a}}, DType::kF32, {}).ok());
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok());
  Tensor wrong({3, 2});
  Status s = (*file)->ReadInto("w", wrong);
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr(path), HasSubstr("'w'"), HasSubstr("[2, 3]"), HasSubstr("[3, 2]")));
  EXPECT_EQ((*file)->ReadF32("nope").status().code(), ErrorCode::kNotFound);
}

TEST(Safetensors, MissingFileIsNotFound) {
  Status s = OpenStatus("/nonexistent/dir/model.safetensors");
  EXPECT_EQ(s.code(), ErrorCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("/nonexistent/dir/model.safetensors"));
}

}  // namespace
}  // namespace air::engine
