// The AMX probe and the Linux tile-state request (see amx_tiles.h).
#include "engine/backend/cpu/amx_tiles.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace air::engine {
namespace {

constexpr unsigned kAmxBf16Bit = 1u << 22, kAmxTileBit = 1u << 24;               // CPUID 7.0 EDX
constexpr uint64_t kXtileStateBits = (uint64_t{1} << 17) | (uint64_t{1} << 18);  // XCR0
constexpr int kArchReqXcompPerm = 0x1023;  // asm/prctl.h's ARCH_REQ_XCOMP_PERM
constexpr int kXfeatureXtileData = 18;

uint64_t ReadXcr0() {
  uint32_t eax = 0, edx = 0;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (uint64_t{edx} << 32) | eax;
}

AmxSupport Probe() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0 ||
      (edx & (kAmxBf16Bit | kAmxTileBit)) != (kAmxBf16Bit | kAmxTileBit)) {
    return {false, "the CPU has no AMX-BF16 tiles"};
  }
  // OSXSAVE (CPUID 1 ECX bit 27) says XGETBV may be executed.
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0 || (ecx & (1u << 27)) == 0 ||
      (ReadXcr0() & kXtileStateBits) != kXtileStateBits) {
    return {false, "the CPU has AMX-BF16 but the OS does not enable the tile state (XCR0)"};
  }
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtileData) != 0) {
    return {false, std::string("the CPU has AMX-BF16 but Linux refused the tile state "
                               "(arch_prctl(ARCH_REQ_XCOMP_PERM): ") +
                       std::strerror(errno) + "; Linux 5.16 or later grants it)"};
  }
  return {true, ""};
}

}  // namespace

const AmxSupport& AmxBf16Support() {
  static const AmxSupport support = Probe();
  return support;
}

}  // namespace air::engine
