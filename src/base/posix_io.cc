// POSIX helpers: full writes and child environments.
#include "base/posix_io.h"

#include <unistd.h>

#include <cerrno>
#include <map>

extern char** environ;

namespace air {

Status WriteFully(int fd, std::string_view data, const std::string& what) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("write " + what, errno);
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

std::vector<std::string> MergedEnvironment(
    const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::map<std::string, size_t> index;
  std::vector<std::string> entries;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry = *e;
    index[entry.substr(0, entry.find('='))] = entries.size();
    entries.push_back(std::move(entry));
  }
  for (const auto& [name, value] : overrides) {
    std::string entry = name + "=" + value;
    if (auto it = index.find(name); it != index.end()) {
      entries[it->second] = std::move(entry);
    } else {
      index[name] = entries.size();
      entries.push_back(std::move(entry));
    }
  }
  return entries;
}

std::vector<char*> EnvironmentPointers(std::vector<std::string>& entries) {
  std::vector<char*> pointers;
  pointers.reserve(entries.size() + 1);
  for (auto& e : entries) pointers.push_back(e.data());
  pointers.push_back(nullptr);
  return pointers;
}

}  // namespace air
