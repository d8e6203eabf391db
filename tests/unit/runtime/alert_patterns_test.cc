// The alert table (agent/alert_patterns.h), one test per pattern from a real line: torch's and
// NCCL's messages as users reported them, or as torch 2.15 (the project venv's, CPU build)
// printed them here (gloo, TCPStore, monitoredBarrier, MemoryError, numpy) — and lines that
// must not match. Then the scanner's bounds and the alerts file's records.
#include "agent/alert_patterns.h"

#include <gtest/gtest.h>

#include "agent/alert_scanner.h"
#include "base/strings.h"
#include "test_util.h"

namespace air::agent {
namespace {

using Fields = std::vector<std::pair<std::string, std::string>>;

AlertMatch MustMatch(std::string_view line, const std::string& alert_class) {
  auto match = MatchAlertLine(line);
  EXPECT_TRUE(match.has_value()) << line;
  if (!match) return {};
  EXPECT_EQ(match->alert_class, alert_class) << line;
  return *match;
}

std::string Field(const AlertMatch& match, const std::string& name) {
  for (const auto& [key, value] : match.fields) {
    if (key == name) return value;
  }
  return "<none>";
}

TEST(AlertPatternsTest, CudaOutOfMemoryWithTriedAndFreeSizes) {
  // torch >= 2.1 (c10/cuda/CUDACachingAllocator.cpp), as a user reported it.
  auto m = MustMatch(
      "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.22 GiB. GPU 0 "
      "has a total capacity of 15.77 GiB of which 959.44 MiB is free. Process 12447 has 14.83 "
      "GiB memory in use. Of the allocated memory 14.01 GiB is allocated by PyTorch, and 472.05 "
      "MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try "
      "setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
      "documentation for Memory Management  "
      "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
      "cuda_oom");
  EXPECT_EQ(m.rank, 1);
  EXPECT_TRUE(m.fatal);
  EXPECT_EQ(
      m.fields,
      (Fields{
          {"tried", "1.22 GiB"}, {"gpu", "0"}, {"total", "15.77 GiB"}, {"free", "959.44 MiB"}}));
  // torch < 2.1.
  m = MustMatch(
      "RuntimeError: CUDA out of memory. Tried to allocate 36.00 MiB (GPU 0; 7.93 GiB total "
      "capacity; 130.35 MiB already allocated; 47.06 MiB free; 188.00 MiB reserved in total by "
      "PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid "
      "fragmentation.",
      "cuda_oom");
  EXPECT_EQ(
      m.fields,
      (Fields{{"tried", "36.00 MiB"}, {"gpu", "0"}, {"total", "7.93 GiB"}, {"free", "47.06 MiB"}}));
  EXPECT_EQ(m.rank, std::nullopt);
  MustMatch("torch.cuda.OutOfMemoryError: CUDA out of memory.", "cuda_oom");
  MustMatch("RuntimeError: CUDA error: out of memory", "cuda_oom");
  // NCCL's last error under torch's DistBackendError.
  MustMatch("[rank0]: Cuda failure 2 'out of memory'", "cuda_oom");
}

TEST(AlertPatternsTest, NcclWatchdogTimeoutNamesCollectiveAndRank) {
  auto m = MustMatch(
      "[rank0]:[E1218 20:27:21.426415540 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog caught "
      "collective operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST, NumelIn=131072000, "
      "NumelOut=131072000, Timeout(ms)=600000) ran for 600081 milliseconds before timing out.",
      "nccl_timeout");
  EXPECT_EQ(m.rank, 0);
  EXPECT_EQ(m.fields, (Fields{{"seq", "1"},
                              {"collective", "BROADCAST"},
                              {"numel_in", "131072000"},
                              {"numel_out", "131072000"},
                              {"timeout_ms", "600000"},
                              {"ran_ms", "600081"}}));
  // Without the launcher prefix: the rank from torch's "[Rank N]".
  m = MustMatch(
      "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=668, "
      "OpType=ALLREDUCE, NumelIn=52, NumelOut=52, Timeout(ms)=600000) ran for 600097 "
      "milliseconds before timing out.",
      "nccl_timeout");
  EXPECT_EQ(m.rank, 1);
  EXPECT_EQ(Field(m, "collective"), "ALLREDUCE");
  // air train's own watchdog (engine/parallel/nccl_data_group.cc).
  m = MustMatch(
      "error: NCCL ReduceScatter #341 of 12582912 BF16 elements on rank 3 did not finish within "
      "1800 s (ddp_timeout): a rank stopped or the network failed; the communicator was aborted",
      "nccl_timeout");
  EXPECT_EQ(m.rank, 3);
  EXPECT_EQ(m.fields, (Fields{{"collective", "ReduceScatter"},
                              {"seq", "341"},
                              {"size", "12582912 BF16 elements"},
                              {"timeout_s", "1800"}}));
}

TEST(AlertPatternsTest, HungCollectivesAndWatchdogs) {
  // ProcessGroupNCCL's heartbeat monitor (its logPrefix, then the message).
  auto m = MustMatch(
      "[rank1]:[E1111 17:10:53.392071523 ProcessGroupNCCL.cpp:1421] [PG ID 0 PG GUID "
      "0(default_pg) Rank 1] ProcessGroupNCCL's watchdog got stuck for 480 seconds without making "
      "progress in monitoring enqueued collectives. This typically indicates a NCCL/CUDA API "
      "(e.g., CudaEventDestroy) hang blocking the watchdog, and could be triggered by another "
      "thread holding the GIL inside a CUDA api (for example, CudaEventDestroy), or other "
      "deadlock-prone behaviors.",
      "collective_hang");
  EXPECT_EQ(m.rank, 1);
  EXPECT_EQ(m.fields, (Fields{{"backend", "NCCL"}, {"seconds", "480"}}));
  m = MustMatch(
      "[PG ID 0 PG GUID 0(default_pg) Rank 2] Heartbeat monitor timed out! Process will be "
      "terminated after dumping debug info. workMetaList_.size()=1",
      "collective_hang");
  EXPECT_EQ(m.rank, 2);
  // Printed here by torch 2.15: an all_reduce over Gloo that one rank never joined.
  m = MustMatch(
      "[rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"
      "unbound_buffer.cc:78] Timed out waiting 2000ms for recv operation to complete",
      "collective_hang");
  EXPECT_EQ(m.rank, 0);
  EXPECT_EQ(m.fields, (Fields{{"timeout_ms", "2000"}, {"operation", "recv"}}));
  // And a monitored barrier rank 1 never reached.
  m = MustMatch(
      "[rank0]: RuntimeError: [Rank 0]: Rank 1 failed to pass monitoredBarrier in 2000 ms",
      "collective_hang");
  EXPECT_EQ(m.rank, 0);
  EXPECT_EQ(m.fields, (Fields{{"missing_ranks", "1"}, {"timeout_ms", "2000"}}));
}

TEST(AlertPatternsTest, RendezvousAndTcpStoreTimeouts) {
  // All printed here by torch 2.15.
  auto m = MustMatch(
      "torch.distributed.DistNetworkError: The client socket has timed out after 2000ms while "
      "trying to connect to (127.0.0.1, 29613).",
      "rendezvous_timeout");
  EXPECT_EQ(m.fields, (Fields{{"timeout", "2000ms"}, {"host", "127.0.0.1"}, {"port", "29613"}}));
  m = MustMatch(
      "[E1205 14:01:07.527554393 socket.cpp:1028] [c10d] The client socket has timed out after "
      "2000ms while trying to connect to (127.0.0.1, 29613).",
      "rendezvous_timeout");
  EXPECT_EQ(Field(m, "port"), "29613");
  m = MustMatch(
      "torch.distributed.DistStoreError: Timed out after 3 seconds waiting for clients. 1/2 "
      "clients joined.",
      "rendezvous_timeout");
  EXPECT_EQ(m.fields, (Fields{{"timeout_s", "3"}, {"joined", "1"}, {"expected", "2"}}));
  m = MustMatch(
      "torch.distributed.DistStoreError: wait timeout after 2000ms, keys: //default_pg/0//cuda//0",
      "rendezvous_timeout");
  EXPECT_EQ(Field(m, "keys"), "//default_pg/0//cuda//0");
  MustMatch("torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError",
            "rendezvous_timeout");
}

TEST(AlertPatternsTest, InfinibandErrors) {
  auto m = MustMatch(
      "node-2:5776:5902 [0] transport/net_ib.cc:1296 NCCL WARN NET/IB : Got completion from peer "
      "10.2.0.5<33092> with error 12, opcode 0, len 0, vendor err 129 (Recv)",
      "ib_error");
  EXPECT_EQ(m.fields, (Fields{{"peer", "10.2.0.5"}, {"error", "12"}}));
  m = MustMatch(
      "w1:412:418 [0] misc/ibvwrap.cc:203 NCCL WARN Call to ibv_create_cq failed with error "
      "Cannot allocate memory",
      "ib_error");
  EXPECT_EQ(m.fields, (Fields{{"call", "ibv_create_cq"}, {"error", "Cannot allocate memory"}}));
}

TEST(AlertPatternsTest, NcclErrorsAndWarnings) {
  auto m = MustMatch(
      "[rank13]: torch.distributed.DistBackendError: NCCL error in: "
      "/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3780, unhandled system error "
      "(run with NCCL_DEBUG=INFO for details), NCCL version 2.28.9",
      "nccl_error");
  EXPECT_EQ(m.rank, 13);
  EXPECT_EQ(m.fields,
            (Fields{{"where", "/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3780"},
                    {"error", "unhandled system error"},
                    {"nccl_version", "2.28.9"}}));
  m = MustMatch(
      "[rank13]: ncclSystemError: System call (e.g. socket, malloc) or external library call "
      "failed or device error.",
      "nccl_error");
  EXPECT_EQ(Field(m, "error"), "ncclSystemError");
  m = MustMatch("RuntimeError: NCCL error: remote process exited or there was a network error",
                "nccl_error");
  EXPECT_EQ(Field(m, "error"), "remote process exited or there was a network error");
  // NCCL 2.26's RAS on a busy host: a warning, never a failure's lead.
  m = MustMatch(
      "[2026-09-09 11:29:56] ubuntu2:321049:321049 [0] ras/client_support.cc:181 NCCL WARN Call "
      "to bind failed: Address already in use",
      "nccl_warn");
  EXPECT_FALSE(m.fatal);
  EXPECT_EQ(m.fields, (Fields{{"host", "ubuntu2"},
                              {"device", "0"},
                              {"message", "Call to bind failed: Address already in use"}}));
}

TEST(AlertPatternsTest, GpuXid) {
  auto m = MustMatch(
      "Okt 06 17:59:27 balrog kernel: NVRM: Xid (PCI:0000:01:00): 79, pid=1122, GPU has fallen "
      "off the bus.",
      "xid");
  EXPECT_EQ(m.fields, (Fields{{"pci", "0000:01:00"},
                              {"xid", "79"},
                              {"detail", "pid=1122, GPU has fallen off the bus."}}));
}

TEST(AlertPatternsTest, CudaErrors) {
  auto m =
      MustMatch("RuntimeError: CUDA error: an illegal memory access was encountered", "cuda_error");
  EXPECT_EQ(Field(m, "error"), "an illegal memory access was encountered");
}

TEST(AlertPatternsTest, HostMemory) {
  // Printed here: Python's own (bytearray(1 << 62)) and numpy 2.4's.
  auto m = MustMatch("MemoryError", "memory_error");
  EXPECT_EQ(Field(m, "error"), "MemoryError");
  MustMatch("[rank2]: MemoryError", "memory_error");
  m = MustMatch(
      "numpy._core._exceptions._ArrayMemoryError: Unable to allocate 256. TiB for an array with "
      "shape (35184372088832,) and data type float64",
      "memory_error");
  EXPECT_EQ(Field(m, "error"), "_ArrayMemoryError");
  // The kernel's OOM killer (dmesg), and the cgroup's.
  m = MustMatch(
      "[ 1171.795551] Out of memory: Killed process 1669 (xdg-desktop-por) total-vm:105068kB, "
      "anon-rss:9792kB, file-rss:10972kB, shmem-rss:0kB, UID:1000 pgtables:136kB "
      "oom_score_adj:200",
      "oom_killer");
  EXPECT_EQ(m.fields,
            (Fields{{"pid", "1669"}, {"process", "xdg-desktop-por"}, {"anon_rss", "9792kB"}}));
  m = MustMatch(
      "[18492.104] Memory cgroup out of memory: Killed process 4182 (order-worker) "
      "total-vm:812044kB, anon-rss:518420kB, file-rss:1240kB, shmem-rss:0kB",
      "oom_killer");
  EXPECT_EQ(Field(m, "pid"), "4182");
  m = MustMatch(
      "slurmstepd: error: Detected 1 oom_kill event in StepId=8538204.0. Some of the step tasks "
      "have been OOM Killed.",
      "oom_killer");
  EXPECT_EQ(Field(m, "count"), "1");
}

TEST(AlertPatternsTest, OrdinaryLinesDoNotMatch) {
  for (const char* line : {
           "epoch 3: avoided CUDA out of memory by halving the batch size",
           "print('CUDA out of memory. Tried to allocate') -- a docstring, no sizes",
           "MemoryError is raised when an operation runs out of memory",
           "handled torch.OutOfMemoryError gracefully, retrying with a smaller batch",
           "we measured NCCL error rates on the new fabric",
           "no CUDA error: all good",
           "gpu-1:77:90 [3] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>",
           "zoom into the room: bloom filter has 12 oom-free entries",
           "Timed out waiting for the pizza",
           "step 10 loss 2.31 Rank 0 is fine",
           "The Watchdog caught nothing today",
           "Xid values are listed in the NVIDIA docs",
       }) {
    EXPECT_EQ(MatchAlertLine(line), std::nullopt) << line;
  }
}

TEST(AlertPatternsTest, EveryClassIsListedOnce) {
  std::vector<std::string> names;
  for (const auto& c : AlertClasses()) names.push_back(c.alert_class);
  EXPECT_EQ(names,
            (std::vector<std::string>{"cuda_oom", "nccl_timeout", "collective_hang",
                                      "rendezvous_timeout", "ib_error", "nccl_error", "nccl_warn",
                                      "xid", "cuda_error", "memory_error", "oom_killer"}));
}

TEST(AlertPatternsTest, LongLinesAreScannedOnlyAtTheirStart) {
  const std::string oom =
      "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
      "capacity of 79.10 GiB of which 1.06 GiB is free.";
  // A progress bar before the message: found, and the kept line starts near the match.
  std::string bar(3000, '#');
  auto m = MatchAlertLine(bar + "\r" + oom);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->at, bar.size() + 1 + oom.find("CUDA out of memory"));
  std::string kept = BoundAlertLine(bar + "\r" + oom, m->at);
  EXPECT_LE(kept.size(), kMaxAlertLineBytes + 2 * std::string("…").size());
  EXPECT_TRUE(StartsWith(kept, "…"));
  EXPECT_NE(kept.find("Tried to allocate 2.00 GiB"), std::string::npos);
  // Past kMaxScanBytes, a line is not looked at.
  EXPECT_EQ(MatchAlertLine(std::string(kMaxScanBytes, ' ') + oom), std::nullopt);
}

TEST(AlertScannerTest, RecordsTheFirstOfEachClassWithinBounds) {
  air::testing::TempDir dir;
  const std::string path = dir.path() + "/node_1.alerts";
  AlertScanner scanner(path, DefaultEnv());
  scanner.OnLine("out", "step 1 loss 2.0", 100);
  for (int i = 0; i < 100; ++i) {
    scanner.OnLine("err",
                   "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 "
                   "GiB. GPU 0 has a total capacity of 79.10 GiB of which 1.06 GiB is free.",
                   1000 + i);
  }
  scanner.OnLine("err", "MemoryError", 5000);
  EXPECT_EQ(scanner.recorded(), kMaxAlertsPerClass + 1);
  EXPECT_EQ(scanner.dropped(), 100 - kMaxAlertsPerClass);
  auto text = DefaultEnv()->ReadFile(path);
  ASSERT_TRUE(text.ok());
  std::vector<AlertRecord> records;
  for (const std::string& line : Split(*text, '\n')) {
    if (line.empty()) continue;
    auto record = AlertRecordFromJson(line);
    ASSERT_TRUE(record.ok()) << line;
    records.push_back(*record);
  }
  ASSERT_EQ(records.size(), static_cast<size_t>(kMaxAlertsPerClass + 1));
  EXPECT_EQ(records[0].alert_class, "cuda_oom");
  EXPECT_EQ(records[0].rank, 3);
  EXPECT_EQ(records[0].time_us, 1000);
  EXPECT_EQ(records[0].stream, "err");
  EXPECT_EQ(records[0].fields[0], (std::pair<std::string, std::string>{"tried", "2.00 GiB"}));
  EXPECT_EQ(records.back().alert_class, "memory_error");
  EXPECT_EQ(records.back().rank, std::nullopt);

  // A flood of every class stops at the node's bound.
  AlertScanner flood(dir.path() + "/flood.alerts", DefaultEnv());
  for (int i = 0; i < 20; ++i) {
    for (const char* line :
         {"MemoryError", "torch.cuda.OutOfMemoryError: CUDA out of memory.",
          "torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError",
          "RuntimeError: CUDA error: an illegal memory access was encountered",
          "kernel: NVRM: Xid (PCI:0000:01:00): 79, pid=1122, GPU has fallen off the bus.",
          "Heartbeat monitor timed out!", "RuntimeError: NCCL error: unhandled system error",
          "slurmstepd: error: Detected 1 oom_kill event in StepId=1.0.",
          "h:1:2 [0] NCCL WARN Call to bind failed: Address already in use"}) {
      flood.OnLine("err", line, i);
    }
  }
  EXPECT_EQ(flood.recorded(), kMaxAlertsPerNode);
}

TEST(AlertScannerTest, RecordsSurviveInvalidUtf8) {
  AlertRecord record;
  record.alert_class = "memory_error";
  record.time_us = 7;
  record.line = std::string("MemoryError \xff\xfe");
  auto back = AlertRecordFromJson(AlertRecordToJson(record));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->alert_class, "memory_error");
  EXPECT_TRUE(StartsWith(back->line, "MemoryError "));
}

}  // namespace
}  // namespace air::agent
