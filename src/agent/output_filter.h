// OutputFilter: the hook every byte of a node's output passes through before it is stored.
//
// The agent keeps one filter per stream (stdout, stderr). Feed() receives raw chunks exactly as
// the worker wrote them and returns what may be stored now; a filter may hold back a tail (e.g.
// the start of what could be a secret value continued in the next write) and must release it on
// Flush() at end of stream. The secrets module's Redactor implements this interface to replace
// secret values with [REDACTED], including values split across writes.
// Thread safety: one filter per stream, used by one thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace air::agent {

class OutputFilter {
 public:
  virtual ~OutputFilter() = default;
  virtual std::string Feed(std::string_view chunk) = 0;
  virtual std::string Flush() = 0;
};

// Stores output unchanged (used when a node has no secrets).
class PassThroughFilter final : public OutputFilter {
 public:
  std::string Feed(std::string_view chunk) override { return std::string(chunk); }
  std::string Flush() override { return ""; }
};

// The filter for one stream of a node whose environment holds `secret_values`: a redactor when
// there are values to hide, else a pass-through.
std::unique_ptr<OutputFilter> MakeOutputFilter(const std::vector<std::string>& secret_values);

}  // namespace air::agent
