// The output filter factory: secrets::Redactor behind the OutputFilter seam.
#include "agent/output_filter.h"

#include "secrets/redactor.h"

namespace air::agent {
namespace {

class RedactingFilter final : public OutputFilter {
 public:
  explicit RedactingFilter(const std::vector<std::string>& values) : redactor_(values) {}
  std::string Feed(std::string_view chunk) override { return redactor_.Feed(chunk); }
  std::string Flush() override { return redactor_.Flush(); }

 private:
  secrets::Redactor redactor_;
};

}  // namespace

std::unique_ptr<OutputFilter> MakeOutputFilter(const std::vector<std::string>& secret_values) {
  if (secret_values.empty()) return std::make_unique<PassThroughFilter>();
  return std::make_unique<RedactingFilter>(secret_values);
}

}  // namespace air::agent
