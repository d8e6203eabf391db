// libcublasLt.so.13 loaded on first use (see cublaslt_api.h).
#include "engine/backend/cuda/cublaslt_api.h"

#include "base/shared_library.h"

namespace air::engine::cuda {

namespace {

Result<const CublasLtApi*> Load() {
  static CublasLtApi api;
  AIR_ASSIGN_OR_RETURN(
      SharedLibrary library,
      SharedLibrary::Open("libcublasLt.so.13",
                          "cuBLASLt, which the CUDA backend's matrix products run on",
                          "put the folder of the CUDA 13 toolkit's libcublasLt.so.13 on "
                          "LD_LIBRARY_PATH (e.g. /usr/local/cuda/lib64), or use the CPU "
                          "(device: cpu)"));
  library.Resolve("cublasLtCreate", &api.Create);
  library.Resolve("cublasLtDestroy", &api.Destroy);
  library.Resolve("cublasLtGetStatusString", &api.GetStatusString);
  library.Resolve("cublasLtMatmul", &api.Matmul);
  library.Resolve("cublasLtMatmulAlgoGetHeuristic", &api.MatmulAlgoGetHeuristic);
  library.Resolve("cublasLtMatmulDescCreate", &api.MatmulDescCreate);
  library.Resolve("cublasLtMatmulDescDestroy", &api.MatmulDescDestroy);
  library.Resolve("cublasLtMatmulDescSetAttribute", &api.MatmulDescSetAttribute);
  library.Resolve("cublasLtMatmulPreferenceCreate", &api.MatmulPreferenceCreate);
  library.Resolve("cublasLtMatmulPreferenceDestroy", &api.MatmulPreferenceDestroy);
  library.Resolve("cublasLtMatmulPreferenceSetAttribute", &api.MatmulPreferenceSetAttribute);
  library.Resolve("cublasLtMatrixLayoutCreate", &api.MatrixLayoutCreate);
  library.Resolve("cublasLtMatrixLayoutDestroy", &api.MatrixLayoutDestroy);
  AIR_RETURN_IF_ERROR(library.Complete(
      "it is not the CUDA 13 cuBLASLt this build needs; put the CUDA 13 toolkit's library "
      "folder first on LD_LIBRARY_PATH"));
  return &api;  // the library stays loaded for the process's life
}

}  // namespace

Result<const CublasLtApi*> LoadCublasLt() {
  static const Result<const CublasLtApi*> loaded = Load();
  return loaded;
}

}  // namespace air::engine::cuda
