// A shared library opened at run time (dlopen) and its functions resolved by name, for the
// libraries air uses only where the hardware has them (cuBLASLt, NCCL): linked, they would load
// into every `air` process, GPU or not; opened, they cost nothing until a GPU run asks.
// One library handle per call to Open, kept for the process's life (never dlclose'd: the
// resolved pointers are stored in statics). Thread safety: Open and Resolve are safe to call
// from any thread; one SharedLibrary object is used by one thread at a time.
#pragma once

#include <string>
#include <string_view>

#include "base/status.h"

namespace air {

class SharedLibrary {
 public:
  // Opens `soname` (the dynamic loader's search: LD_LIBRARY_PATH, the cache). On failure the
  // error names the library, what air needs it for (`needed_for`), the loader's reason, and
  // `remedy` (what the user can do).
  static Result<SharedLibrary> Open(std::string soname, std::string_view needed_for,
                                    std::string_view remedy);

  // Sets *function to the symbol `name`, typed as the caller's pointer; a missing symbol is
  // remembered (the first one) for Complete.
  template <typename Fn>
  void Resolve(const char* name, Fn* function) {
    *function = reinterpret_cast<Fn>(Symbol(name));
  }

  // OK when every Resolve found its symbol; otherwise an error naming the library, the first
  // missing function and `remedy` (usually: which version air needs).
  Status Complete(std::string_view remedy) const;

  const std::string& soname() const { return soname_; }

 private:
  SharedLibrary(std::string soname, void* handle) : soname_(std::move(soname)), handle_(handle) {}
  void* Symbol(const char* name);

  std::string soname_;
  void* handle_ = nullptr;
  std::string first_missing_;
};

}  // namespace air
