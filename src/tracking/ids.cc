// Run ids and status names.
#include <sodium.h>

#include <cstdlib>

#include "tracking/entities.h"

namespace air::tracking {

std::string NewRunId() {
  unsigned char bytes[16];
  // Idempotent and thread-safe; -1 only when no entropy source exists.
  if (sodium_init() < 0) std::abort();
  randombytes_buf(bytes, sizeof(bytes));
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += kDigits[b >> 4];
    out += kDigits[b & 15];
  }
  return out;
}

}  // namespace air::tracking
