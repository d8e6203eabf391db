// Redactor throughput, for bench/redact/bench.py: streams a log file through secrets::Redactor in
// 4 KiB writes (as a node's log pump does), writes the redacted text, and prints one JSON line
// with the best of REPS timings.
//
//   air_redact_bench VALUES_FILE LOG_FILE OUT_FILE [REPS]
// VALUES_FILE holds the secret values separated by NUL bytes (a value may contain newlines).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "secrets/redactor.h"

namespace {

bool ReadAll(const char* path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s VALUES_FILE LOG_FILE OUT_FILE [REPS]\n", argv[0]);
    return 2;
  }
  std::string values_text, log;
  if (!ReadAll(argv[1], &values_text) || !ReadAll(argv[2], &log)) {
    std::fprintf(stderr, "cannot read %s or %s\n", argv[1], argv[2]);
    return 2;
  }
  std::vector<std::string> values;
  std::stringstream split(values_text);
  for (std::string value; std::getline(split, value, '\0');) {
    if (!value.empty()) values.push_back(value);
  }
  const int reps = argc > 4 ? std::atoi(argv[4]) : 3;
  constexpr size_t kWrite = 4096;
  double best = 1e300;
  std::string out;
  for (int rep = 0; rep < reps; ++rep) {
    out.clear();
    out.reserve(log.size());
    auto start = std::chrono::steady_clock::now();
    air::secrets::Redactor redactor(values);
    for (size_t pos = 0; pos < log.size(); pos += kWrite) {
      out += redactor.Feed(std::string_view(log).substr(pos, kWrite));
    }
    out += redactor.Flush();
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (seconds < best) best = seconds;
  }
  std::ofstream(argv[3], std::ios::binary) << out;
  std::printf("{\"bytes\": %zu, \"seconds\": %.6f, \"mib_per_s\": %.1f}\n", log.size(), best,
              static_cast<double>(log.size()) / (1 << 20) / best);
  return 0;
}
