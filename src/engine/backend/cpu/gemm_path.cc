// The bf16 GEMM's path: AIR_CPU_PATH or the rule (see gemm_path.h).
#include "engine/backend/cpu/gemm_path.h"

#include <cstdlib>

#include "engine/backend/cpu/amx_tiles.h"
#include "engine/backend/cpu/cpu_features.h"
#include "engine/backend/cpu/onednn_gemm.h"

namespace air::engine {
namespace {

std::string PathNames() {
  std::string names;
  for (GemmBf16Path p : AllGemmBf16Paths()) {
    names += (names.empty() ? "" : ", ") + std::string(GemmBf16PathName(p));
  }
  return names;
}

// "this CPU runs avx512bf16, avx512, avx2, generic[; not onednn (why)]": for the errors of a
// forced path (the reasons only where the forced path's own is not already given).
std::string WhatThisCpuRuns(bool with_reasons = true) {
  std::string runs, cannot;
  for (GemmBf16Path p : AllGemmBf16Paths()) {
    std::string why;
    if (GemmBf16PathRuns(p, &why)) {
      runs += (runs.empty() ? "" : ", ") + std::string(GemmBf16PathName(p));
    } else if (with_reasons) {
      cannot += std::string("; not ") + GemmBf16PathName(p) + " (" + why + ")";
    }
  }
  return "this CPU runs " + runs + cannot;
}

std::string Fp32MathNote(GemmBf16Path path, const std::string& why) {
  if (path == GemmBf16Path::kOneDnn || path == GemmBf16Path::kAvx512Bf16) return "";
  return std::string("bf16: the ") + GemmBf16PathName(path) + " GEMM path (" + why +
         ") has no bf16 dot-product instructions (AVX512-BF16), so bf16 products run by "
         "converting bf16 to fp32 on load: the same results as native bf16, at fp32 speed";
}

}  // namespace

GemmPathFacts ThisCpuGemmPathFacts() {
  GemmPathFacts facts;
  facts.selected = SelectedCpuKernels();
  facts.detected = DetectedCpuKernels();
  facts.intel = CpuIsIntel();
  facts.amx_usable = AmxBf16Support().usable;
  facts.amx_why = AmxBf16Support().why;
  facts.onednn_usable = OneDnnMatmul().usable;
  facts.onednn_why = OneDnnMatmul().why;
  return facts;
}

GemmPathChoice GemmPathByRule(const GemmPathFacts& facts) {
  const CpuKernels level = facts.selected;
  const GemmBf16Path native = NativeGemmBf16Path(level);
  if (level < CpuKernels::kAvx512Bf16) {
    const std::string why =
        level < facts.detected
            ? std::string("AIR_CPU_KERNELS caps the kernels at ") + CpuKernelsName(level)
            : "this CPU has no AVX512_BF16";
    return {native, why, Fp32MathNote(native, why)};
  }
  if (facts.amx_usable && facts.onednn_usable) {
    return {GemmBf16Path::kOneDnn, "AMX-BF16 tiles", ""};
  }
  const std::string no_amx =
      facts.amx_usable ? "AMX usable but " + facts.onednn_why : facts.amx_why;
  if (facts.intel) {
    const std::string why = "AVX512_BF16 on an Intel CPU, " + no_amx;
    return {GemmBf16Path::kAvx512, why,
            "bf16: this Intel CPU runs vdpbf16ps (AVX512-BF16) at half its fp32 FMA rate and " +
                std::string(facts.amx_usable ? "oneDNN's AMX matmul is not available"
                                             : "has no AMX tiles usable") +
                ", so bf16 products run on the avx512 GEMM path, converting bf16 to fp32 on "
                "load: bf16 products summed in fp32, as native bf16, at fp32 speed"};
  }
  return {native, "AVX512_BF16; " + no_amx, ""};
}

GemmBf16Path PathBesideOneDnn(GemmPathFacts facts) {
  facts.onednn_usable = false;
  facts.onednn_why = "oneDNN takes only the GEMM";
  return GemmPathByRule(facts).path;
}

GemmBf16Path PathBesideOneDnn() {
  static const GemmBf16Path path = PathBesideOneDnn(ThisCpuGemmPathFacts());
  return path;
}

const std::vector<GemmBf16Path>& AllGemmBf16Paths() {
  static const std::vector<GemmBf16Path> all = {GemmBf16Path::kOneDnn, GemmBf16Path::kAvx512Bf16,
                                                GemmBf16Path::kAvx512, GemmBf16Path::kAvx2,
                                                GemmBf16Path::kGeneric};
  return all;
}

Result<GemmBf16Path> ParseGemmBf16Path(const std::string& name) {
  for (GemmBf16Path p : AllGemmBf16Paths()) {
    if (name == GemmBf16PathName(p)) return p;
  }
  return InvalidArgument("unknown CPU GEMM path '" + name + "': valid paths are " + PathNames());
}

Result<GemmPathChoice> ChooseGemmBf16Path(const std::string& forced) {
  std::string name = forced, source = "forced";
  if (name.empty()) {
    const char* env = std::getenv("AIR_CPU_PATH");
    if (env == nullptr || *env == '\0') return GemmPathByRule(ThisCpuGemmPathFacts());
    name = env;
    source = "AIR_CPU_PATH";
  }
  Result<GemmBf16Path> path = ParseGemmBf16Path(name);
  if (!path.ok()) {
    return InvalidArgument(source + "=" + name + ": " + path.status().message() + "; " +
                           WhatThisCpuRuns());
  }
  std::string why;
  if (!GemmBf16PathRuns(*path, &why)) {
    return FailedPrecondition(source + "=" + name + ": this CPU cannot run the " + name +
                              " GEMM path (" + why + "); " + WhatThisCpuRuns(false));
  }
  const std::string reason = source + "=" + name;
  return GemmPathChoice{*path, reason, Fp32MathNote(*path, reason)};
}

std::string DescribeGemmBf16Path(GemmBf16Path path) {
  if (path != GemmBf16Path::kOneDnn) return GemmBf16PathName(path);
  return std::string("onednn (") + OneDnnMatmul().isa + ")";
}

}  // namespace air::engine
