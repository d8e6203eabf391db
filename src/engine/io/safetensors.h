// safetensors files: reading with full validation, and writing (REFERENCES.md §3).
//
// Layout: u64 little-endian header length N, N bytes of JSON {name: {"dtype", "shape",
// "data_offsets": [begin, end)}, "__metadata__": {str: str}}, then the data, offsets relative
// to its start. SafetensorsFile::Open maps the file read-only and validates everything before
// any tensor is handed out: the header length fits the file and a sane bound, the header is
// valid UTF-8 JSON object, every dtype is F32/BF16/F16 or U8 (others are named in the error), every
// shape is a list of non-negative integers, shape × dtype size equals the offset span, offsets
// are in range, sorted by begin they are contiguous from 0 without holes or overlaps, and the
// data ends exactly at the end of the file. Every error names the file and, where one is at
// fault, the tensor.
//
// U8 entries are raw bytes, not weights: GPT-OSS keeps its MXFP4 expert weights as U8 `*_blocks`
// and `*_scales` (io/mxfp4.h decodes them from RawData). ReadF32/ReadInto refuse them.
//
// Writing goes through base/atomic_file.h (a temporary file beside the target, fsynced and
// renamed, through the Env), so a reader sees the old file or the new one, never a torn one.
//
// Thread safety: a SafetensorsFile is immutable after Open; reads from several threads are fine.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/env.h"
#include "base/status.h"
#include "engine/dtype.h"
#include "engine/tensor.h"

namespace air::engine {

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::kF32;  // the float type, unless raw_u8
  bool raw_u8 = false;        // stored as U8 (packed bytes, e.g. MXFP4 blocks and scales)
  Shape shape;
  uint64_t begin = 0;  // byte offsets relative to the data section
  uint64_t end = 0;
};

// Header lengths above this are rejected as corrupt (real headers are kilobytes to a few MiB).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;

class SafetensorsFile {
 public:
  // Opens and validates `path`; see the file comment for what is checked.
  static Result<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  // Entries in the order of their data offsets.
  const std::vector<SafetensorsEntry>& entries() const { return entries_; }
  const SafetensorsEntry* Find(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // The tensor converted to fp32. NotFound naming the file when absent; InvalidArgument for a U8
  // entry (raw bytes are not a float weight).
  Result<Tensor> ReadF32(const std::string& name) const;
  // Reads into `out`, whose shape must equal the stored shape (else InvalidArgument naming the
  // tensor, the file, the expected and the stored shape).
  Status ReadInto(const std::string& name, Tensor& out) const;
  // Raw stored bytes of a tensor (valid while this object lives).
  const uint8_t* RawData(const SafetensorsEntry& entry) const;

 private:
  // Drops the entry's whole pages from this process's resident set once it was decoded.
  void ReleasePages(const SafetensorsEntry& entry) const;
  SafetensorsFile() = default;
  std::string path_;
  void* map_ = nullptr;
  uint64_t map_size_ = 0;
  uint64_t data_start_ = 0;
  std::vector<SafetensorsEntry> entries_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// One tensor to write: a name and an fp32 tensor (not owned; must outlive the call).
struct NamedTensorRef {
  std::string name;
  const Tensor* tensor = nullptr;
};

// Writes `tensors` to `path` in `dtype` (converted from fp32), in the given order, with the
// metadata (transformers expects {"format": "pt"}). Names must be unique and non-empty.
Status WriteSafetensors(const std::string& path, const std::vector<NamedTensorRef>& tensors,
                        DType dtype, const std::map<std::string, std::string>& metadata,
                        Env* env = DefaultEnv());

// Bytes WriteSafetensors would write for these tensors' data (header excluded).
uint64_t SafetensorsDataBytes(const std::vector<NamedTensorRef>& tensors, DType dtype);

}  // namespace air::engine
