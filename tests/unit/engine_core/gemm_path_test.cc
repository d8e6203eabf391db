// The choice of the bf16 GEMM's path (gemm_path.h): the rule's pick runs here, AIR_CPU_PATH and
// BackendOptions::cpu_gemm_path force a path, and a path that is unknown or that this CPU cannot
// run is an error naming the paths it runs. ctest runs this file again under
// ONEDNN_MAX_CPU_ISA=AVX2 (engine_core_onednn_unavailable), where oneDNN has no bf16 matmul:
// forcing onednn must then fail with oneDNN's reason. Every path is printed with whether it runs.
#include "engine/backend/cpu/gemm_path.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "engine/backend/cpu/amx_tiles.h"
#include "engine/backend/cpu/fast_ops.h"
#include "engine/backend/cpu/onednn_gemm.h"
#include "engine/backend/registry.h"

namespace air::engine {
namespace {

// Sets an environment variable for one test and restores it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    setenv(name, value, 1);
  }
  ~ScopedEnv() { had_ ? setenv(name_, old_.c_str(), 1) : unsetenv(name_); }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

bool OneDnnCapped() {
  const char* isa = std::getenv("ONEDNN_MAX_CPU_ISA");
  return isa != nullptr && std::strcmp(isa, "AVX2") == 0;
}

TEST(GemmPath, EveryPathIsPrintedWithWhetherThisCpuRunsIt) {
  int runnable = 0;
  for (GemmBf16Path path : AllGemmBf16Paths()) {
    std::string why;
    const bool runs = GemmBf16PathRuns(path, &why);
    runnable += runs;
    const std::string line = runs ? DescribeGemmBf16Path(path) : "not run here: " + why;
    std::printf("[gemm path] %-10s %s\n", GemmBf16PathName(path), line.c_str());
    if (!runs) {
      EXPECT_FALSE(why.empty());
    }
  }
  std::printf("[gemm path] AMX-BF16: %s\n",
              AmxBf16Support().usable ? "usable" : AmxBf16Support().why.c_str());
  EXPECT_GE(runnable, 1);  // generic always runs
  EXPECT_TRUE(GemmBf16PathRuns(GemmBf16Path::kGeneric, nullptr));
  if (OneDnnCapped()) {
    EXPECT_FALSE(GemmBf16PathRuns(GemmBf16Path::kOneDnn, nullptr));
  }
}

TEST(GemmPath, TheRulePicksARunnablePathAndOneDnnExactlyWhereAmxIsUsable) {
  if (std::getenv("AIR_CPU_PATH") != nullptr) GTEST_SKIP() << "AIR_CPU_PATH is set";
  const Result<GemmPathChoice> chosen = ChooseGemmBf16Path();
  ASSERT_TRUE(chosen.ok()) << chosen.status().message();
  std::printf("[gemm path] chosen: %s (%s)%s%s\n", DescribeGemmBf16Path(chosen->path).c_str(),
              chosen->reason.c_str(),
              chosen->fp32_math_note.empty() ? "" : "; note: ", chosen->fp32_math_note.c_str());
  EXPECT_TRUE(GemmBf16PathRuns(chosen->path, nullptr));
  const bool amx = AmxBf16Support().usable && OneDnnMatmul().usable &&
                   SelectedCpuKernels() >= CpuKernels::kAvx512Bf16;
  const bool intel_bf16 = CpuIsIntel() && SelectedCpuKernels() >= CpuKernels::kAvx512Bf16;
  std::printf("[gemm path] vendor: %s\n", CpuIsIntel() ? "Intel" : "not Intel");
  EXPECT_EQ(chosen->path, amx          ? GemmBf16Path::kOneDnn
                          : intel_bf16 ? GemmBf16Path::kAvx512
                                       : SelectedGemmBf16Path());
  // bf16 computed in fp32 is said exactly where the path has no bf16 dot products.
  const bool native =
      chosen->path == GemmBf16Path::kOneDnn || chosen->path == GemmBf16Path::kAvx512Bf16;
  EXPECT_EQ(chosen->fp32_math_note.empty(), native) << chosen->fp32_math_note;
}

// The rule on the CPUs it was written for, from their facts (none of them need be this one).
GemmPathFacts Facts(CpuKernels level, bool intel, bool amx, bool onednn) {
  GemmPathFacts f;
  f.selected = f.detected = level;
  f.intel = intel;
  f.amx_usable = amx;
  f.amx_why = amx ? "" : "the CPU has no AMX-BF16 tiles";
  f.onednn_usable = onednn;
  f.onednn_why = onednn ? "" : "libdnnl.so.2 not found";
  return f;
}

TEST(GemmPath, TheRuleTakesVdpbf16psOnlyWhereItOutrunsTheFp32Fma) {
  // AMD Zen 4/5: vdpbf16ps at twice the fp32 FMA's multiply-adds.
  GemmPathChoice zen = GemmPathByRule(Facts(CpuKernels::kAvx512Bf16, false, false, true));
  EXPECT_EQ(zen.path, GemmBf16Path::kAvx512Bf16);
  EXPECT_TRUE(zen.fp32_math_note.empty()) << zen.fp32_math_note;
  EXPECT_NE(zen.reason.find("no AMX-BF16"), std::string::npos) << zen.reason;
  // Intel with its AMX tiles and oneDNN: the AMX matmul.
  EXPECT_EQ(GemmPathByRule(Facts(CpuKernels::kAvx512Bf16, true, true, true)).path,
            GemmBf16Path::kOneDnn);
  // Intel without usable tiles (a guest whose hypervisor hides them, Cooper Lake), or with them
  // but no oneDNN: vdpbf16ps runs at half the FMA's rate, so the conversion path, said in the
  // plan's note with the reason.
  for (const bool amx : {false, true}) {
    const GemmPathChoice intel = GemmPathByRule(Facts(CpuKernels::kAvx512Bf16, true, amx, !amx));
    EXPECT_EQ(intel.path, GemmBf16Path::kAvx512) << amx;
    EXPECT_NE(intel.reason.find("Intel"), std::string::npos) << intel.reason;
    EXPECT_NE(intel.reason.find(amx ? "libdnnl.so.2 not found" : "no AMX-BF16"), std::string::npos)
        << intel.reason;
    EXPECT_NE(intel.fp32_math_note.find("half its fp32 FMA rate"), std::string::npos)
        << intel.fp32_math_note;
  }
  // No AVX512_BF16, or the kernels capped below it: the level's conversion path, on any vendor.
  for (const bool intel : {false, true}) {
    const GemmPathChoice avx512 = GemmPathByRule(Facts(CpuKernels::kAvx512, intel, false, true));
    EXPECT_EQ(avx512.path, GemmBf16Path::kAvx512);
    EXPECT_EQ(avx512.reason, "this CPU has no AVX512_BF16");
    EXPECT_NE(avx512.fp32_math_note.find("no bf16 dot-product"), std::string::npos);
    GemmPathFacts capped = Facts(CpuKernels::kAvx2, intel, true, true);
    capped.detected = CpuKernels::kAvx512Bf16;
    const GemmPathChoice avx2 = GemmPathByRule(capped);
    EXPECT_EQ(avx2.path, GemmBf16Path::kAvx2);
    EXPECT_EQ(avx2.reason, "AIR_CPU_KERNELS caps the kernels at avx2");
  }
  EXPECT_EQ(GemmPathByRule(Facts(CpuKernels::kGeneric, false, false, false)).path,
            GemmBf16Path::kGeneric);
}

TEST(GemmPath, TheKernelsAroundTheGemmFollowAConversionPath) {
  // onednn takes the step's GEMMs only: attention takes the rule's path without oneDNN; a
  // conversion path (the rule's on Intel, or forced) covers attention's products too.
  for (GemmBf16Path path : AllGemmBf16Paths()) {
    if (!GemmBf16PathRuns(path, nullptr)) continue;
    const FastOps ops(1, path);
    EXPECT_EQ(ops.native_bf16_path(), path == GemmBf16Path::kOneDnn ? PathBesideOneDnn() : path)
        << GemmBf16PathName(path);
  }
  EXPECT_EQ(PathBesideOneDnn(), PathBesideOneDnn(ThisCpuGemmPathFacts()));
}

TEST(GemmPath, BesideOneDnnAttentionTakesTheFmaOnIntelAndVdpbf16psOnZen) {
  // Intel with AMX and oneDNN (the GEMM's path onednn): vdpbf16ps at half the FMA's rate, so
  // attention's products take the avx512 conversion path.
  EXPECT_EQ(PathBesideOneDnn(Facts(CpuKernels::kAvx512Bf16, true, true, true)),
            GemmBf16Path::kAvx512);
  // Zen 4/5 with oneDNN forced: the native vdpbf16ps kernels.
  EXPECT_EQ(PathBesideOneDnn(Facts(CpuKernels::kAvx512Bf16, false, false, true)),
            GemmBf16Path::kAvx512Bf16);
  // The kernels capped: the capped level's conversion path.
  GemmPathFacts capped = Facts(CpuKernels::kAvx2, true, true, true);
  capped.detected = CpuKernels::kAvx512Bf16;
  EXPECT_EQ(PathBesideOneDnn(capped), GemmBf16Path::kAvx2);
}

TEST(GemmPath, AirCpuPathForcesEveryPathThisCpuRuns) {
  for (GemmBf16Path path : AllGemmBf16Paths()) {
    if (!GemmBf16PathRuns(path, nullptr)) continue;
    const ScopedEnv env("AIR_CPU_PATH", GemmBf16PathName(path));
    const Result<GemmPathChoice> chosen = ChooseGemmBf16Path();
    ASSERT_TRUE(chosen.ok()) << chosen.status().message();
    EXPECT_EQ(chosen->path, path);
    EXPECT_EQ(chosen->reason, std::string("AIR_CPU_PATH=") + GemmBf16PathName(path));
    // The backend takes it, and says so.
    const Result<std::shared_ptr<Backend>> backend = CreateBackend({"fast", 1});
    ASSERT_TRUE(backend.ok()) << backend.status().message();
    EXPECT_EQ(static_cast<const FastOps&>(**backend).bf16_path(), path);
    EXPECT_NE((*backend)->Describe().find(std::string("bf16 GEMM ") + GemmBf16PathName(path)),
              std::string::npos)
        << (*backend)->Describe();
  }
}

TEST(GemmPath, AnUnknownPathIsAnErrorListingThePaths) {
  const ScopedEnv env("AIR_CPU_PATH", "amx");
  const Result<GemmPathChoice> chosen = ChooseGemmBf16Path();
  ASSERT_FALSE(chosen.ok());
  EXPECT_EQ(chosen.status().code(), ErrorCode::kInvalidArgument);
  const std::string message = chosen.status().message();
  EXPECT_NE(message.find("AIR_CPU_PATH=amx"), std::string::npos) << message;
  EXPECT_NE(message.find("valid paths are onednn, avx512bf16, avx512, avx2, generic"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("this CPU runs "), std::string::npos) << message;
  // CreateBackend refuses it too (and a forced option the same way).
  EXPECT_FALSE(CreateBackend({"fast", 1}).ok());
  BackendOptions options{"fast", 1};
  options.cpu_gemm_path = "avx1024";
  const Status forced = CreateBackend(options).status();
  EXPECT_EQ(forced.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(forced.message().find("forced=avx1024"), std::string::npos) << forced.message();
}

TEST(GemmPath, APathThisCpuCannotRunIsAnErrorNamingWhyAndThePathsItRuns) {
  int tried = 0;
  for (GemmBf16Path path : AllGemmBf16Paths()) {
    std::string why;
    if (GemmBf16PathRuns(path, &why)) continue;
    ++tried;
    const ScopedEnv env("AIR_CPU_PATH", GemmBf16PathName(path));
    const Result<GemmPathChoice> chosen = ChooseGemmBf16Path();
    ASSERT_FALSE(chosen.ok());
    EXPECT_EQ(chosen.status().code(), ErrorCode::kFailedPrecondition);
    const std::string message = chosen.status().message();
    std::printf("[gemm path] AIR_CPU_PATH=%s: %s\n", GemmBf16PathName(path), message.c_str());
    EXPECT_NE(message.find(why), std::string::npos) << message;
    EXPECT_NE(message.find("this CPU runs "), std::string::npos) << message;
    EXPECT_NE(message.find("generic"), std::string::npos) << message;
  }
  if (OneDnnCapped()) {
    EXPECT_GE(tried, 1);
  }
  if (tried == 0) std::printf("[gemm path] this CPU runs every path: no refusal to check here\n");
}

}  // namespace
}  // namespace air::engine
