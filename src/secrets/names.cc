// Name and value rules for secrets.
#include "secrets/names.h"

#include <fmt/format.h>

#include "base/strings.h"

namespace air::secrets {
namespace {

bool IsNameChar(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}

// Printable rendering of one byte for an error message: 'x', or \xNN for control/non-ASCII.
std::string DescribeByte(unsigned char c) {
  if (c == ' ') return "' ' (space)";
  if (c >= 0x21 && c < 0x7f) return fmt::format("'{}'", static_cast<char>(c));
  return fmt::format("byte 0x{:02x}", c);
}

constexpr const char* kNameRule = "use letters, digits, '-', '_' and '.' (1 to 128 characters)";

}  // namespace

Status ValidateName(std::string_view what, std::string_view name) {
  if (name.empty()) {
    return InvalidArgument(fmt::format("invalid {} name: it is empty; {}", what, kNameRule));
  }
  if (name.size() > kMaxNameLength) {
    return InvalidArgument(fmt::format("invalid {} name '{}...': it is {} characters long; {}",
                                       what, name.substr(0, 20), name.size(), kNameRule));
  }
  for (size_t i = 0; i < name.size(); ++i) {
    auto c = static_cast<unsigned char>(name[i]);
    if (!IsNameChar(c)) {
      // Do not echo names holding control or non-UTF-8 bytes verbatim.
      std::string shown = IsValidUtf8(name) && c >= 0x20 ? fmt::format("'{}'", name) : "";
      return InvalidArgument(
          fmt::format("invalid {} name{}{}: {} at position {} is not allowed; {}", what,
                      shown.empty() ? "" : " ", shown, DescribeByte(c), i + 1, kNameRule));
    }
  }
  return Status::Ok();
}

Status ValidateValue(std::string_view scope, std::string_view key, std::string_view value) {
  std::string path = SecretPath(scope, key);
  if (value.empty()) {
    return InvalidArgument(
        fmt::format("the value for {} is empty; a secret needs 1 to {} bytes (pipe it in, e.g. "
                    "printf '%s' \"$TOKEN\" | air secrets put-secret {} {})",
                    path, kMaxValueBytes, scope, key));
  }
  if (value.size() > kMaxValueBytes) {
    return InvalidArgument(
        fmt::format("the value for {} is {} bytes; at most {} bytes ({}) are allowed", path,
                    value.size(), kMaxValueBytes, HumanBytes(kMaxValueBytes)));
  }
  if (auto nul = value.find('\0'); nul != std::string_view::npos) {
    return InvalidArgument(fmt::format(
        "the value for {} holds a NUL byte at offset {}; secrets reach nodes as environment "
        "variables, which cannot hold NUL (store binary data base64-encoded)",
        path, nul));
  }
  return Status::Ok();
}

std::string SecretPath(std::string_view scope, std::string_view key) {
  std::string out(scope);
  out += '/';
  out += key;
  return out;
}

}  // namespace air::secrets
