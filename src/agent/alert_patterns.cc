// The alert table. Each entry cites the real message it matches; tests/unit/runtime/
// alert_patterns_test.cc holds a real line for each (and lines that must not match).
// To add a pattern: a real line first (from the library's source or a user's report), then the
// narrowest key and expression that take it, then a test with that line.
#include "agent/alert_patterns.h"

#include <cctype>
#include <regex>

namespace air::agent {
namespace {

// torch's format_size: "512 bytes", "20.00 MiB", "2.00 GiB".
#define AIR_SIZE "([0-9.]+ (?:bytes|[KMGTP]iB))"

struct Pattern {
  const char* alert_class;
  const char* title;
  const char* key;                  // must appear in the line (case-sensitive)
  const char* regex;                // ECMAScript, searched in the line without its launcher prefix
  std::vector<const char*> groups;  // a name per capture group; "rank" sets the rank
  bool warning = false;             // telling but often harmless (AlertMatch::fatal false)
};

const std::vector<Pattern>& Table() {
  static const std::vector<Pattern> table = {
      // --- CUDA out of memory (c10/cuda/CUDACachingAllocator.cpp) ---
      // "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a
      //  total capacity of 79.10 GiB of which 1.06 GiB is free. Process 12447 has ..."
      // and before torch 2.1: "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB
      //  (GPU 0; 15.78 GiB total capacity; 14.56 GiB already allocated; 3.56 MiB free; ...)".
      {"cuda_oom",
       "CUDA out of memory",
       "CUDA out of memory. Tried to allocate ",
       "CUDA out of memory\\. Tried to allocate " AIR_SIZE
       "(?:\\. GPU (\\d+) has a total capacity of " AIR_SIZE " of which " AIR_SIZE " is free"
       "| \\(GPU (\\d+); " AIR_SIZE " total capacity; [^;]*; " AIR_SIZE " free)?",
       {"tried", "gpu", "total", "free", "gpu", "total", "free"}},
      // "torch.cuda.OutOfMemoryError: CUDA out of memory." (no sizes)
      {"cuda_oom",
       "CUDA out of memory",
       "OutOfMemoryError: CUDA out of memory",
       "OutOfMemoryError: CUDA out of memory",
       {}},
      // A CUDA call that failed to allocate: "RuntimeError: CUDA error: out of memory", and
      // NCCL's "Cuda failure 'out of memory'" / "Cuda failure 2 'out of memory'".
      {"cuda_oom",
       "CUDA out of memory",
       "CUDA error: out of memory",
       "^(?:[\\w.]+Error: )?CUDA error: out of memory",
       {}},
      {"cuda_oom",
       "CUDA out of memory",
       "'out of memory'",
       "Cuda failure (?:\\d+ )?'out of memory'",
       {}},

      // --- NCCL watchdog (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp) ---
      // "[rank0]:[E1218 20:27:21.426415540 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog caught
      //  collective operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST, NumelIn=131072000,
      //  NumelOut=131072000, Timeout(ms)=600000) ran for 600081 milliseconds before timing out."
      {"nccl_timeout",
       "NCCL collective timed out",
       "Watchdog caught collective operation timeout",
       "Watchdog caught collective operation timeout: WorkNCCL\\(SeqNum=(\\d+), OpType=(\\w+)"
       "(?:, NumelIn=(\\d+), NumelOut=(\\d+))?.*?Timeout\\(ms\\)=(\\d+)\\) ran for (\\d+) "
       "milliseconds",
       {"seq", "collective", "numel_in", "numel_out", "timeout_ms", "ran_ms"}},
      // air train's own watchdog (engine/parallel/nccl_data_group.cc): "NCCL ReduceScatter #341
      // of 12582912 BF16 elements on rank 1 did not finish within 1800 s (ddp_timeout): ..."
      {"nccl_timeout",
       "NCCL collective timed out",
       "(ddp_timeout)",
       "NCCL (\\w+) #(\\d+)(?: of (.*?))? on rank (\\d+) did not finish within (\\d+) s "
       "\\(ddp_timeout\\)",
       {"collective", "seq", "size", "rank", "timeout_s"}},

      // --- hung collectives and their watchdogs ---
      // ProcessGroupNCCL's heartbeat monitor: "[PG ID 0 PG GUID 0(default_pg) Rank 1]
      // ProcessGroupNCCL's watchdog got stuck for 480 seconds without making progress in
      // monitoring enqueued collectives. This typically indicates a NCCL/CUDA API (e.g.,
      // CudaEventDestroy) hang blocking the watchdog, ..."
      {"collective_hang",
       "a collective or its watchdog hung",
       "watchdog got stuck for",
       "ProcessGroup(\\w+)'s watchdog got stuck for (\\d+) seconds",
       {"backend", "seconds"}},
      // "... Heartbeat monitor timed out! Process will be terminated after dumping debug info.
      // workMetaList_.size()=1"
      {"collective_hang",
       "a collective or its watchdog hung",
       "Heartbeat monitor timed out",
       "Heartbeat monitor timed out!",
       {}},
      // Gloo (third_party/gloo/gloo/transport/tcp/unbound_buffer.cc), from torch 2.x:
      // "[rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/
      //  unbound_buffer.cc:78] Timed out waiting 2000ms for recv operation to complete"
      {"collective_hang",
       "a collective or its watchdog hung",
       "operation to complete",
       "Timed out waiting (\\d+)ms for (\\w+) operation to complete",
       {"timeout_ms", "operation"}},
      // ProcessGroupGloo::monitoredBarrier: "[rank0]: RuntimeError: [Rank 0]: Rank 1 failed to
      // pass monitoredBarrier in 2000 ms"
      {"collective_hang",
       "a collective or its watchdog hung",
       "failed to pass monitoredBarrier",
       "Ranks? ([\\d, ]+?) failed to pass monitoredBarrier in (\\d+) ms",
       {"missing_ranks", "timeout_ms"}},

      // --- rendezvous and TCPStore (torch/csrc/distributed/c10d/socket.cpp, TCPStore.cpp) ---
      // "torch.distributed.DistNetworkError: The client socket has timed out after 600000ms while
      //  trying to connect to (10.10.12.11, 25000)."
      {"rendezvous_timeout",
       "rendezvous / TCPStore timed out",
       "The client socket has timed out after",
       "The client socket has timed out after (\\S+) while trying to connect to \\(([^,()]+), "
       "(\\d+)\\)",
       {"timeout", "host", "port"}},
      // "torch.distributed.DistStoreError: Timed out after 301 seconds waiting for clients. 1/2
      //  clients joined."
      {"rendezvous_timeout",
       "rendezvous / TCPStore timed out",
       "waiting for clients",
       "Timed out after (\\d+) seconds waiting for clients\\. (\\d+)/(\\d+) clients joined",
       {"timeout_s", "joined", "expected"}},
      // "torch.distributed.DistStoreError: wait timeout after 2000ms, keys:
      //  //default_pg/0//cuda//0"
      {"rendezvous_timeout",
       "rendezvous / TCPStore timed out",
       "wait timeout after",
       "DistStoreError: wait timeout after (\\d+)ms, keys: (.*)",
       {"timeout_ms", "keys"}},
      // torchrun's dynamic rendezvous (torch/distributed/elastic/rendezvous/
      // dynamic_rendezvous.py raises it without a message):
      // "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError"
      {"rendezvous_timeout",
       "rendezvous / TCPStore timed out",
       "RendezvousTimeoutError",
       "^(?:[\\w.]+\\.)?RendezvousTimeoutError(?::\\s*(.*))?$",
       {"detail"}},

      // --- InfiniBand (NCCL's net_ib transport, ibverbs) ---
      // "node-2:5776:5902 [0] transport/net_ib.cc:1296 NCCL WARN NET/IB : Got completion from
      //  peer 10.2.0.5<33092> with error 12, opcode 0, len 0, vendor err 129 (Recv)"
      {"ib_error",
       "InfiniBand error",
       "Got completion from peer",
       "Got completion from peer ([^\\s<]+)(?:<\\d+>)? with (?:error |status=)([\\w()]+)",
       {"peer", "error"}},
      // "NCCL WARN Call to ibv_create_qp failed with error Cannot allocate memory"
      {"ib_error",
       "InfiniBand error",
       "ibv_",
       "(?:Call to )?(ibv_\\w+) failed(?: with (?:error )?(.*))?",
       {"call", "error"}},

      // --- NCCL errors (torch's NCCLUtils / ProcessGroupNCCL) ---
      // "[rank13]: torch.distributed.DistBackendError: NCCL error in:
      //  /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3780, unhandled system error
      //  (run with NCCL_DEBUG=INFO for details), NCCL version 2.28.9"
      {"nccl_error",
       "NCCL error",
       "NCCL error",
       "NCCL error(?: in: ?([^,]+),?|:)(?: ?([^(,]+?)(?: \\(run with NCCL_DEBUG=INFO for "
       "details\\))?(?:, NCCL version ([^\\s,]+)|$))?",
       {"where", "error", "nccl_version"}},
      // "[rank13]: ncclSystemError: System call (e.g. socket, malloc) or external library call
      //  failed or device error."
      {"nccl_error",
       "NCCL error",
       "nccl",
       "^(nccl(?:System|Remote|Internal|UnhandledCuda|"
       "InvalidUsage|InvalidArgument)Error): (.*)",
       {"error", "detail"}},
      // Any other NCCL warning, telling but often harmless, e.g. NCCL 2.26's RAS on a busy host:
      // "[2026-09-09 11:29:56] ubuntu2:321049:321049 [0] ras/client_support.cc:181 NCCL WARN Call
      //  to bind failed: Address already in use"
      {"nccl_warn",
       "NCCL warning",
       "NCCL WARN",
       "([^\\s:\\]]+):\\d+:\\d+ \\[(\\d+)\\] (?:\\S+ )?(?:\\(\\w+\\) )?NCCL WARN (.*)",
       {"host", "device", "message"},
       /*warning=*/true},

      // --- the GPU driver (NVRM: Xid) ---
      // "kernel: NVRM: Xid (PCI:0000:01:00): 79, pid=1122, GPU has fallen off the bus."
      {"xid",
       "GPU Xid error",
       "NVRM: Xid",
       "NVRM: Xid \\((?:PCI:)?([0-9a-fA-F:.]+)\\): (\\d+)(?:, (.*))?",
       {"pci", "xid", "detail"}},

      // Other CUDA errors: "RuntimeError: CUDA error: an illegal memory access was encountered",
      // "CUDA error: uncorrectable ECC error encountered" (after cuda_oom: out of memory is there).
      {"cuda_error",
       "CUDA error",
       "CUDA error: ",
       "^(?:[\\w.]+Error: )?CUDA error: ([^.]+)",
       {"error"}},

      // --- host memory ---
      // Python's own "MemoryError" (bytearray(1 << 62)) and numpy's
      // "numpy.core._exceptions._ArrayMemoryError: Unable to allocate 7.45 GiB for an array ..."
      {"memory_error",
       "Python MemoryError (host memory)",
       "MemoryError",
       "^(?:[\\w.]+\\.)?(_?(?:Array)?MemoryError)(?::\\s*(.*))?$",
       {"error", "detail"}},
      // The kernel's OOM killer (mm/oom_kill.c): "Out of memory: Killed process 3029 (python3)
      // total-vm:89573820kB, anon-rss:62948312kB, file-rss:0kB, ..." and "Memory cgroup out of
      // memory: Killed process ..."; before Linux 5.0 "Out of memory: Kill process 1234 (python)
      // score 900 or sacrifice child".
      {"oom_killer",
       "killed by the kernel's OOM killer",
       "ut of memory: Kill",
       "[Oo]ut of memory: Kill(?:ed)? process (\\d+) \\(([^)]*)\\)(?:.*?anon-rss:(\\d+kB))?",
       {"pid", "process", "anon_rss"}},
      // Slurm's cgroup plugin: "slurmstepd: error: Detected 1 oom_kill event in StepId=1234.0.
      // Some of the step tasks have been OOM Killed." (older: "oom-kill event(s) in step ...").
      {"oom_killer",
       "killed by the kernel's OOM killer",
       "oom_kill event",
       "Detected (\\d+) oom_kill event",
       {"count"}},
      {"oom_killer",
       "killed by the kernel's OOM killer",
       "oom-kill event",
       "Detected (\\d+) oom-kill event",
       {"count"}},
  };
  return table;
}

#undef AIR_SIZE

struct Compiled {
  std::vector<std::string_view> keys;
  std::vector<std::regex> regexes;
};

const Compiled& CompiledTable() {
  static const Compiled compiled = [] {
    Compiled c;
    for (const Pattern& p : Table()) {
      c.keys.emplace_back(p.key);
      c.regexes.emplace_back(p.regex, std::regex::ECMAScript);
    }
    return c;
  }();
  return compiled;
}

// A rank as printed (at most 7 digits, so it always fits an int).
std::optional<int> SmallNumber(std::string_view digits) {
  if (digits.empty() || digits.size() > 7) return std::nullopt;
  int value = 0;
  for (char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    value = value * 10 + (c - '0');
  }
  return value;
}

// "[rank3]:" / "[default0]:" (torch's and torchrun's per-rank prefixes): strips it and, for
// "rank", returns the rank.
std::string_view StripLauncherPrefix(std::string_view line, std::optional<int>* rank) {
  if (line.size() < 4 || line[0] != '[') return line;
  size_t close = line.find("]:");
  if (close == std::string_view::npos || close > 24) return line;
  std::string_view inside = line.substr(1, close - 1);
  size_t digits = inside.size();
  while (digits > 0 && std::isdigit(static_cast<unsigned char>(inside[digits - 1]))) --digits;
  if (digits == inside.size() || digits == 0) return line;
  for (size_t i = 0; i < digits; ++i) {
    if (!std::isalpha(static_cast<unsigned char>(inside[i]))) return line;
  }
  if (inside.substr(0, digits) == "rank") *rank = SmallNumber(inside.substr(digits));
  line.remove_prefix(close + 2);
  if (!line.empty() && line[0] == ' ') line.remove_prefix(1);
  return line;
}

// torch's "[Rank 3]" and "[PG ID 0 PG GUID 0(default_pg) Rank 3]": the number after "Rank "
// that a ']' closes.
std::optional<int> BracketedRank(std::string_view line) {
  for (size_t at = line.find("Rank "); at != std::string_view::npos;
       at = line.find("Rank ", at + 1)) {
    size_t i = at + 5;
    size_t start = i;
    while (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i]))) ++i;
    if (i < line.size() && line[i] == ']') {
      if (auto rank = SmallNumber(line.substr(start, i - start))) return rank;
    }
  }
  return std::nullopt;
}

constexpr size_t kMaxFieldBytes = 200;

}  // namespace

std::optional<AlertMatch> MatchAlertLine(std::string_view line) {
  if (line.size() > kMaxScanBytes) line = line.substr(0, kMaxScanBytes);
  const auto& table = Table();
  const Compiled& compiled = CompiledTable();
  for (size_t i = 0; i < table.size(); ++i) {
    const Pattern& pattern = table[i];
    if (line.find(compiled.keys[i]) == std::string_view::npos) continue;
    std::optional<int> rank;
    std::string_view text = StripLauncherPrefix(line, &rank);
    std::match_results<std::string_view::const_iterator> m;
    if (!std::regex_search(text.begin(), text.end(), m, compiled.regexes[i])) continue;
    AlertMatch match;
    match.alert_class = pattern.alert_class;
    match.title = pattern.title;
    match.fatal = !pattern.warning;
    for (size_t g = 0; g < pattern.groups.size() && g + 1 < m.size(); ++g) {
      if (!m[g + 1].matched || m[g + 1].length() == 0) continue;
      std::string name = pattern.groups[g];
      std::string value = m[g + 1].str().substr(0, kMaxFieldBytes);
      if (name == "rank") {
        if (auto said = SmallNumber(value)) rank = said;
        continue;
      }
      bool seen = false;  // a name used by two alternatives: the first that matched
      for (const auto& field : match.fields) seen = seen || field.first == name;
      if (!seen) match.fields.emplace_back(std::move(name), std::move(value));
    }
    match.rank = rank ? rank : BracketedRank(text);
    match.at = static_cast<size_t>(text.data() - line.data()) + static_cast<size_t>(m.position(0));
    return match;
  }
  return std::nullopt;
}

std::vector<AlertClassInfo> AlertClasses() {
  std::vector<AlertClassInfo> classes;
  for (const Pattern& p : Table()) {
    bool seen = false;
    for (const auto& c : classes) seen = seen || c.alert_class == p.alert_class;
    if (!seen) classes.push_back({p.alert_class, p.title});
  }
  return classes;
}

}  // namespace air::agent
