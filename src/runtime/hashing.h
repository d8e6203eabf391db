// SHA-256 digests as lowercase hex (libsodium), for content addressing: snapshot blobs and
// manifests, Python environment keys.
// Thread safety: stateless functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace air::runtime {

std::string Sha256Hex(std::string_view data);

// Bytes as lowercase hex, and back (nullopt for an odd length or a non-hex digit).
std::string HexEncode(std::string_view bytes);
std::optional<std::string> HexDecode(std::string_view hex);

// Incremental hashing of several pieces.
class Sha256 {
 public:
  Sha256();
  void Update(std::string_view data);
  std::string FinishHex();

 private:
  alignas(64) unsigned char state_[128];
};

}  // namespace air::runtime
