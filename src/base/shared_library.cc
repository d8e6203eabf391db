// dlopen/dlsym behind SharedLibrary (see shared_library.h).
#include "base/shared_library.h"

#include <dlfcn.h>
#include <fmt/format.h>

namespace air {

Result<SharedLibrary> SharedLibrary::Open(std::string soname, std::string_view needed_for,
                                          std::string_view remedy) {
  void* handle = dlopen(soname.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return FailedPrecondition(fmt::format("cannot load {} ({}): {}; {}", soname, needed_for,
                                          why != nullptr ? why : "unknown error", remedy));
  }
  return SharedLibrary(std::move(soname), handle);
}

void* SharedLibrary::Symbol(const char* name) {
  void* symbol = dlsym(handle_, name);
  if (symbol == nullptr && first_missing_.empty()) first_missing_ = name;
  return symbol;
}

Status SharedLibrary::Complete(std::string_view remedy) const {
  if (first_missing_.empty()) return Status::Ok();
  return FailedPrecondition(fmt::format("{} has no {}: {}", soname_, first_missing_, remedy));
}

}  // namespace air
