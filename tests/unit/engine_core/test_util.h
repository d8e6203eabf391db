// Helpers shared by the engine_core unit tests: seeded random tensors, a scratch directory,
// and file helpers for the corruption tests.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "engine/backend/registry.h"
#include "engine/check.h"
#include "engine/tensor.h"
#include "engine/view.h"

namespace air::engine::testing {

// The numbers of an F32 view of a CPU backend, in place (the CPU backends' device memory is host
// memory, so a test may read and poke it directly; model code never does).
inline std::span<float> Host(const View& v) {
  AIR_ENGINE_CHECK(v.device().type == DeviceType::kCpu, "Host() of a non-CPU view");
  return {v.f32(), static_cast<size_t>(v.numel())};
}
// A host copy of a CPU view as a Tensor.
inline Tensor HostTensor(const View& v) {
  auto span = Host(v);
  return Tensor(v.shape(), std::vector<float>(span.begin(), span.end()));
}

inline std::shared_ptr<Backend> MakeBackend(const std::string& kind, int threads = 2) {
  auto backend = CreateBackend({kind, threads});
  AIR_ENGINE_CHECK(backend.ok(), "unknown backend kind");
  return std::move(backend).value();
}

inline std::vector<float> RandomVector(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

inline Tensor RandomTensor(Shape shape, uint64_t seed, float scale = 1.0f) {
  const auto n = static_cast<size_t>(NumElements(shape));
  return Tensor(std::move(shape), RandomVector(n, seed, scale));
}

// A fresh directory under the system temp dir, removed when the object dies.
class ScratchDir {
 public:
  ScratchDir() {
    std::random_device random;
    path_ = std::filesystem::temp_directory_path() /
            ("air_engine_core_test_" + std::to_string(::getpid()) + "_" + std::to_string(random()) +
             std::to_string(random()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  std::string path() const { return path_.string(); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace air::engine::testing
