// umask, core dump limits, the allowed CPUs.
#include "base/process_limits.h"

#include <fmt/format.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

namespace air {

void UsePrivateUmask() {
  mode_t previous = ::umask(077);
  if (std::getenv(kUserUmaskVar) == nullptr) {
    std::string text = fmt::format("{:04o}", static_cast<unsigned>(previous));
    ::setenv(kUserUmaskVar, text.c_str(), 0);
  }
}

std::optional<mode_t> UserUmask(Env* env) {
  auto v = env->GetEnv(kUserUmaskVar);
  if (!v || v->empty()) return std::nullopt;
  char* end = nullptr;
  long mask = std::strtol(v->c_str(), &end, 8);
  if (end == v->c_str() || *end != '\0' || mask < 0 || mask > 0777) return std::nullopt;
  return static_cast<mode_t>(mask);
}

void DisableCoreDumpLimit() {
  rlimit none{0, 0};
  ::setrlimit(RLIMIT_CORE, &none);
}

void DisableCoreDumps() {
  DisableCoreDumpLimit();
  ::prctl(PR_SET_DUMPABLE, 0);
}

std::vector<int> AllowedCpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

}  // namespace air
