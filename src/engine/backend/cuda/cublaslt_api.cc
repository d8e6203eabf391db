// libcublasLt.so.13 loaded on first use (see cublaslt_api.h).
#include "engine/backend/cuda/cublaslt_api.h"

#include <dlfcn.h>
#include <fmt/format.h>

namespace air::engine::cuda {

namespace {

constexpr const char* kLibrary = "libcublasLt.so.13";

template <typename Fn>
bool Resolve(void* library, const char* name, Fn* out, std::string* missing) {
  *out = reinterpret_cast<Fn>(dlsym(library, name));
  if (*out == nullptr && missing->empty()) *missing = name;
  return *out != nullptr;
}

Result<const CublasLtApi*> Load() {
  static CublasLtApi api;
  void* library = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    return FailedPrecondition(fmt::format(
        "cannot load {} (cuBLASLt, which the CUDA backend's matrix products run on): {}; put the "
        "folder of the CUDA 13 toolkit's libcublasLt.so.13 on LD_LIBRARY_PATH (e.g. "
        "/usr/local/cuda/lib64), or use the CPU (device: cpu)",
        kLibrary, why != nullptr ? why : "unknown error"));
  }
  std::string missing;
  Resolve(library, "cublasLtCreate", &api.Create, &missing);
  Resolve(library, "cublasLtDestroy", &api.Destroy, &missing);
  Resolve(library, "cublasLtGetStatusString", &api.GetStatusString, &missing);
  Resolve(library, "cublasLtMatmul", &api.Matmul, &missing);
  Resolve(library, "cublasLtMatmulAlgoGetHeuristic", &api.MatmulAlgoGetHeuristic, &missing);
  Resolve(library, "cublasLtMatmulDescCreate", &api.MatmulDescCreate, &missing);
  Resolve(library, "cublasLtMatmulDescDestroy", &api.MatmulDescDestroy, &missing);
  Resolve(library, "cublasLtMatmulDescSetAttribute", &api.MatmulDescSetAttribute, &missing);
  Resolve(library, "cublasLtMatmulPreferenceCreate", &api.MatmulPreferenceCreate, &missing);
  Resolve(library, "cublasLtMatmulPreferenceDestroy", &api.MatmulPreferenceDestroy, &missing);
  Resolve(library, "cublasLtMatmulPreferenceSetAttribute", &api.MatmulPreferenceSetAttribute,
          &missing);
  Resolve(library, "cublasLtMatrixLayoutCreate", &api.MatrixLayoutCreate, &missing);
  Resolve(library, "cublasLtMatrixLayoutDestroy", &api.MatrixLayoutDestroy, &missing);
  if (!missing.empty()) {
    return FailedPrecondition(fmt::format(
        "{} has no {}: it is not the CUDA 13 cuBLASLt this build needs; put the CUDA 13 "
        "toolkit's library folder first on LD_LIBRARY_PATH",
        kLibrary, missing));
  }
  return &api;  // the library stays loaded for the process's life
}

}  // namespace

Result<const CublasLtApi*> LoadCublasLt() {
  static const Result<const CublasLtApi*> loaded = Load();
  return loaded;
}

}  // namespace air::engine::cuda
