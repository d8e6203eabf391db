// safetensors reading (validated, memory-mapped) and writing (atomic) — see safetensors.h.
#include "engine/io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "base/atomic_file.h"
#include "base/strings.h"

namespace air::engine {

namespace {

using nlohmann::json;

// Parses the header JSON, rejecting duplicate top-level names (nlohmann would keep the last).
Result<json> ParseHeader(const std::string& path, std::string_view text) {
  size_t bad = 0;
  if (!IsValidUtf8(text, &bad)) {
    return DataLoss(path + ": safetensors header is not valid UTF-8 (byte " + std::to_string(bad) +
                    " of the header) — the file is corrupt");
  }
  std::set<std::string> seen;
  std::string duplicate;
  json::parser_callback_t cb = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key && parsed.is_string()) {
      if (!seen.insert(parsed.get<std::string>()).second && duplicate.empty()) {
        duplicate = parsed.get<std::string>();
      }
    }
    return true;
  };
  json header;
  try {
    header = json::parse(text.begin(), text.end(), cb);
  } catch (const json::parse_error& e) {
    return DataLoss(path + ": safetensors header is not valid JSON (" + e.what() +
                    ") — the file is corrupt or truncated");
  }
  if (!duplicate.empty()) {
    return DataLoss(path + ": safetensors header names tensor '" + duplicate + "' twice");
  }
  if (!header.is_object()) {
    return DataLoss(path + ": safetensors header must be a JSON object, got " +
                    std::string(header.type_name()));
  }
  return header;
}

Result<SafetensorsEntry> ParseEntry(const std::string& path, const std::string& name,
                                    const json& e) {
  const std::string where = path + ": tensor '" + name + "'";
  if (!e.is_object()) return DataLoss(where + ": header entry must be an object");
  auto dtype_it = e.find("dtype");
  if (dtype_it == e.end() || !dtype_it->is_string()) {
    return DataLoss(where + ": missing or non-string 'dtype'");
  }
  SafetensorsEntry entry;
  entry.name = name;
  const std::string dtype = dtype_it->get<std::string>();
  auto parsed = ParseDType(dtype);
  entry.raw_u8 = dtype == "U8";
  if (!parsed && !entry.raw_u8) {
    return InvalidArgument(where + ": dtype '" + dtype + "' is not supported (supported: " +
                           SupportedDTypeNames() + ", and U8 for packed MXFP4 blocks/scales)");
  }
  if (parsed) entry.dtype = *parsed;
  const uint64_t element_bytes = entry.raw_u8 ? 1 : DTypeSize(entry.dtype);
  auto shape_it = e.find("shape");
  if (shape_it == e.end() || !shape_it->is_array()) {
    return DataLoss(where + ": missing 'shape' list");
  }
  uint64_t numel = 1;
  for (const json& d : *shape_it) {
    if (!d.is_number_unsigned()) {
      return DataLoss(where + ": shape " + shape_it->dump() + " must hold non-negative integers");
    }
    const uint64_t dim = d.get<uint64_t>();
    if (dim != 0 && numel > std::numeric_limits<uint64_t>::max() / 8 / dim) {
      return DataLoss(where + ": shape " + shape_it->dump() + " is impossibly large");
    }
    numel *= dim;
    entry.shape.push_back(static_cast<int64_t>(dim));
  }
  auto off_it = e.find("data_offsets");
  if (off_it == e.end() || !off_it->is_array() || off_it->size() != 2 ||
      !(*off_it)[0].is_number_unsigned() || !(*off_it)[1].is_number_unsigned()) {
    return DataLoss(where + ": 'data_offsets' must be [begin, end] with non-negative integers");
  }
  entry.begin = (*off_it)[0].get<uint64_t>();
  entry.end = (*off_it)[1].get<uint64_t>();
  if (entry.end < entry.begin) {
    return DataLoss(where + ": data_offsets [" + std::to_string(entry.begin) + ", " +
                    std::to_string(entry.end) + "] end before they begin");
  }
  const uint64_t expected = numel * element_bytes;
  if (entry.end - entry.begin != expected) {
    return DataLoss(where + ": shape " + ShapeToString(entry.shape) + " of " + dtype + " needs " +
                    std::to_string(expected) + " bytes but data_offsets span " +
                    std::to_string(entry.end - entry.begin));
  }
  return entry;
}

}  // namespace

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) ::munmap(map_, map_size_);
}

Result<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cannot open safetensors file " + path, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoStatus("cannot stat " + path, err);
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < 8) {
    ::close(fd);
    return DataLoss(path + ": file is " + std::to_string(size) +
                    " bytes, too short for a safetensors header (truncated?)");
  }
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_err = errno;
  ::close(fd);
  if (map == MAP_FAILED) return ErrnoStatus("cannot map " + path, map_err);
  file->map_ = map;
  file->map_size_ = size;
  const auto* bytes = static_cast<const uint8_t*>(map);

  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes, 8);  // little-endian host
  if (header_len > kMaxSafetensorsHeaderBytes) {
    return DataLoss(path + ": header length " + std::to_string(header_len) + " is over the " +
                    HumanBytes(kMaxSafetensorsHeaderBytes) +
                    " limit — not a safetensors file or corrupt");
  }
  if (header_len > size - 8) {
    return DataLoss(path + ": header length " + std::to_string(header_len) +
                    " runs past the end of the " + std::to_string(size) +
                    "-byte file (truncated?)");
  }
  file->data_start_ = 8 + header_len;
  const uint64_t data_len = size - file->data_start_;
  AIR_ASSIGN_OR_RETURN(
      json header,
      ParseHeader(path, std::string_view(reinterpret_cast<const char*>(bytes + 8), header_len)));

  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return DataLoss(path + ": '__metadata__' must be an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) {
          return DataLoss(path + ": '__metadata__." + m.key() + "' must be a string");
        }
        file->metadata_[m.key()] = m->get<std::string>();
      }
      continue;
    }
    AIR_ASSIGN_OR_RETURN(SafetensorsEntry entry, ParseEntry(path, it.key(), *it));
    file->entries_.push_back(std::move(entry));
  }
  // Offsets: sorted by begin they must tile [0, data_len) exactly.
  std::sort(file->entries_.begin(), file->entries_.end(),
            [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
              return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
            });
  uint64_t expected_begin = 0;
  const SafetensorsEntry* previous = nullptr;
  for (const SafetensorsEntry& e : file->entries_) {
    if (e.begin != expected_begin) {
      const std::string before = previous ? "the end of tensor '" + previous->name + "' (" +
                                                std::to_string(expected_begin) + ")"
                                          : "0";
      return DataLoss(path + ": tensor '" + e.name + "' data begins at " + std::to_string(e.begin) +
                      " but must begin at " + before +
                      (e.begin < expected_begin ? " (overlap)" : " (hole)"));
    }
    if (e.end > data_len) {
      return DataLoss(path + ": tensor '" + e.name + "' data_offsets end at " +
                      std::to_string(e.end) + " but the file holds only " +
                      std::to_string(data_len) + " data bytes (truncated?)");
    }
    expected_begin = e.end;
    previous = &e;
  }
  if (expected_begin != data_len) {
    return DataLoss(path + ": the tensors end at data byte " + std::to_string(expected_begin) +
                    " but the file has " + std::to_string(data_len) +
                    " data bytes (trailing garbage or a wrong header)");
  }
  for (size_t i = 0; i < file->entries_.size(); ++i) file->index_[file->entries_[i].name] = i;
  return file;
}

const SafetensorsEntry* SafetensorsFile::Find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

const uint8_t* SafetensorsFile::RawData(const SafetensorsEntry& entry) const {
  return static_cast<const uint8_t*>(map_) + data_start_ + entry.begin;
}

namespace {

Status RawU8NotAWeight(const std::string& path, const std::string& name) {
  return InvalidArgument(path + ": tensor '" + name +
                         "' is stored as U8 (packed bytes such as MXFP4 blocks or scales), not "
                         "as a float weight (F32, BF16, F16)");
}

}  // namespace

Result<Tensor> SafetensorsFile::ReadF32(const std::string& name) const {
  const SafetensorsEntry* e = Find(name);
  if (e == nullptr) return NotFound(path_ + ": no tensor named '" + name + "'");
  if (e->raw_u8) return RawU8NotAWeight(path_, name);
  Tensor t(e->shape);
  DecodeToF32(e->dtype, RawData(*e), static_cast<size_t>(t.numel()), t.data());
  ReleasePages(*e);
  return t;
}

Status SafetensorsFile::ReadInto(const std::string& name, Tensor& out) const {
  const SafetensorsEntry* e = Find(name);
  if (e == nullptr) return NotFound(path_ + ": no tensor named '" + name + "'");
  if (e->raw_u8) return RawU8NotAWeight(path_, name);
  if (e->shape != out.shape()) {
    return InvalidArgument(path_ + ": tensor '" + name + "' has shape " + ShapeToString(e->shape) +
                           " but the model expects " + out.ShapeString());
  }
  DecodeToF32(e->dtype, RawData(*e), static_cast<size_t>(out.numel()), out.data());
  ReleasePages(*e);
  return Status::Ok();
}

void SafetensorsFile::ReleasePages(const SafetensorsEntry& entry) const {
  // The decoded copy is what the caller keeps: drop the whole pages of the entry from this
  // process's resident set, so reading a model costs its decoded size, not that plus the file
  // (the page cache keeps them for the other ranks on this host; a later read maps them again).
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(RawData(entry));
  const uintptr_t end = begin + (entry.end - entry.begin);
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

uint64_t SafetensorsDataBytes(const std::vector<NamedTensorRef>& tensors, DType dtype) {
  uint64_t total = 0;
  for (const auto& t : tensors)
    total += static_cast<uint64_t>(t.tensor->numel()) * DTypeSize(dtype);
  return total;
}

Status WriteSafetensors(const std::string& path, const std::vector<NamedTensorRef>& tensors,
                        DType dtype, const std::map<std::string, std::string>& metadata, Env* env) {
  nlohmann::ordered_json header;
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) meta[k] = v;
    header["__metadata__"] = meta;
  }
  uint64_t offset = 0;
  std::set<std::string> names;
  for (const auto& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__" || !names.insert(t.name).second) {
      return InvalidArgument("cannot write " + path + ": tensor name '" + t.name +
                             "' is empty, reserved or repeated");
    }
    const uint64_t bytes = static_cast<uint64_t>(t.tensor->numel()) * DTypeSize(dtype);
    header[t.name] = {{"dtype", DTypeName(dtype)},
                      {"shape", t.tensor->shape()},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.empty() ? "{}" : header.dump();
  while (text.size() % 8 != 0) text.push_back(' ');  // pad so the data starts 8-aligned

  AtomicFileWriter writer(env, path);
  AIR_RETURN_IF_ERROR(writer.Open());
  const uint64_t header_len = text.size();
  AIR_RETURN_IF_ERROR(writer.Append(&header_len, 8));
  AIR_RETURN_IF_ERROR(writer.Append(text.data(), text.size()));
  std::vector<uint8_t> buffer;
  for (const auto& t : tensors) {
    if (dtype == DType::kF32) {
      AIR_RETURN_IF_ERROR(writer.Append(t.tensor->data(), t.tensor->numel() * sizeof(float)));
      continue;
    }
    // Convert in chunks of 1 Mi elements to bound the extra memory.
    const int64_t chunk = 1 << 20;
    for (int64_t start = 0; start < t.tensor->numel(); start += chunk) {
      const int64_t count = std::min(chunk, t.tensor->numel() - start);
      buffer.resize(static_cast<size_t>(count) * DTypeSize(dtype));
      EncodeFromF32(dtype, t.tensor->data() + start, static_cast<size_t>(count), buffer.data());
      AIR_RETURN_IF_ERROR(writer.Append(buffer.data(), buffer.size()));
    }
  }
  return writer.Commit();
}

}  // namespace air::engine
