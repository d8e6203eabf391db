// air_collectives_check: a test-only tool run as N real processes (by air launch, torchrun, srun
// or the tests themselves) to check the Gloo process group. It reads its rank from the launcher's
// environment (engine/parallel/dist_env.h), joins the group, and checks every collective's
// result bit for bit against values computed locally (f32, f64, i32, i64, and bf16/f16 with the
// fp32-accumulate-then-round-once contract of process_group.h; sum, max, min; counts
// 1, 7 and a large odd one; the trainer's global sums of global_sums.h), then prints "rank R/N:
// ok".
//
//   air_collectives_check [--count N] [--timeout-seconds S] [--join-timeout-seconds S]
//                         [--loop]     repeat all-reduces until an error (fault tests: kill a
//                                      rank from outside while the others are inside one)
//                         [--stall-rank R]  rank R joins, then never enters a collective (it
//                                      sleeps until killed) while the others all-reduce: a hang,
//                                      which their collective timeout must end naming rank R
//
// Exit 0 when every check passed; otherwise the error goes to stderr and the exit code is 1.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <vector>

#include "base/env.h"
#include "engine/dtype.h"
#include "engine/parallel/dist_env.h"
#include "engine/parallel/global_sums.h"
#include "engine/parallel/gloo_process_group.h"

namespace {

using air::Status;
using namespace air::engine::parallel;

// Rank r's element i: integers, so sums over any order are exact and results compare by bits.
template <typename T>
T Value(int r, size_t i) {
  return static_cast<T>((r + 1) * 1000 + static_cast<int64_t>(i % 997) - 500);
}

template <typename T>
Status Expect(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  if (got.size() != want.size() ||
      std::memcmp(got.data(), want.data(), got.size() * sizeof(T)) != 0) {
    for (size_t i = 0; i < std::min(got.size(), want.size()); ++i) {
      if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0) {
        return air::Internal(
            fmt::format("{}: element {} is {} where {} was expected", what, i, got[i], want[i]));
      }
    }
    return air::Internal(
        fmt::format("{}: {} elements where {} were expected", what, got.size(), want.size()));
  }
  return Status::Ok();
}

template <typename T>
Status CheckType(ProcessGroup& pg, CommDType dtype, size_t count) {
  const int n = pg.size();
  const int me = pg.rank();
  const std::string t = CommDTypeName(dtype);
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
    const char* name = op == ReduceOp::kSum ? "sum" : op == ReduceOp::kMax ? "max" : "min";
    std::vector<T> data(count), want(count);
    for (size_t i = 0; i < count; ++i) {
      data[i] = Value<T>(me, i);
      // Rank values grow with r, so max is rank n-1's and min rank 0's.
      if (op == ReduceOp::kSum) {
        T s = 0;
        for (int r = 0; r < n; ++r) s += Value<T>(r, i);
        want[i] = s;
      } else {
        want[i] = Value<T>(op == ReduceOp::kMax ? n - 1 : 0, i);
      }
    }
    AIR_RETURN_IF_ERROR(pg.AllReduce(data.data(), count, dtype, op));
    AIR_RETURN_IF_ERROR(Expect(data, want, fmt::format("all_reduce {} {}", name, t)));

    std::vector<T> full(count * static_cast<size_t>(n)), slot(count), want_slot(count);
    for (size_t i = 0; i < full.size(); ++i) full[i] = Value<T>(me, i);
    for (size_t i = 0; i < count; ++i) {
      const size_t g = static_cast<size_t>(me) * count + i;
      if (op == ReduceOp::kSum) {
        T s = 0;
        for (int r = 0; r < n; ++r) s += Value<T>(r, g);
        want_slot[i] = s;
      } else {
        want_slot[i] = Value<T>(op == ReduceOp::kMax ? n - 1 : 0, g);
      }
    }
    AIR_RETURN_IF_ERROR(pg.ReduceScatter(full.data(), slot.data(), count, dtype, op));
    AIR_RETURN_IF_ERROR(Expect(slot, want_slot, fmt::format("reduce_scatter {} {}", name, t)));
  }
  std::vector<T> mine(count), gathered(count * static_cast<size_t>(n)), want(gathered.size());
  for (size_t i = 0; i < count; ++i) mine[i] = Value<T>(me, i);
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) want[static_cast<size_t>(r) * count + i] = Value<T>(r, i);
  }
  AIR_RETURN_IF_ERROR(pg.AllGather(mine.data(), gathered.data(), count, dtype));
  AIR_RETURN_IF_ERROR(Expect(gathered, want, "all_gather " + t));
  // In place: the rank's own slot of the output is the input.
  std::vector<T> inplace(gathered.size(), T(0));
  std::memcpy(inplace.data() + static_cast<size_t>(me) * count, mine.data(), count * sizeof(T));
  AIR_RETURN_IF_ERROR(
      pg.AllGather(inplace.data() + static_cast<size_t>(me) * count, inplace.data(), count, dtype));
  AIR_RETURN_IF_ERROR(Expect(inplace, want, "all_gather in place " + t));
  for (int root = 0; root < n; ++root) {
    std::vector<T> b(count), bw(count);
    for (size_t i = 0; i < count; ++i) {
      b[i] = Value<T>(me, i);
      bw[i] = Value<T>(root, i);
    }
    AIR_RETURN_IF_ERROR(pg.Broadcast(b.data(), count, dtype, root));
    AIR_RETURN_IF_ERROR(Expect(b, bw, fmt::format("broadcast from {} {}", root, t)));
  }
  return Status::Ok();
}

// bf16/f16 (FSDP's reduce_dtype): the all-gather and broadcast move bits; a reduction decodes
// every rank's values to fp32, combines them in rank order and rounds once. The values are not
// all representable (up to 4,500 in an 8-bit significand), so a reduction that rounded between
// partial sums, or summed in another order, would differ in some element.
Status CheckHalf(ProcessGroup& pg, CommDType dtype, size_t count) {
  const int n = pg.size();
  const int me = pg.rank();
  const air::engine::DType half =
      dtype == CommDType::kBF16 ? air::engine::DType::kBF16 : air::engine::DType::kF16;
  const std::string t = CommDTypeName(dtype);
  auto encoded = [&](int r, size_t offset, size_t len) {
    std::vector<float> f(len);
    for (size_t i = 0; i < len; ++i) f[i] = Value<float>(r, offset + i) + 0.25f * (r % 3);
    std::vector<uint16_t> h(len);
    air::engine::EncodeFromF32(half, f.data(), len, h.data());
    return h;
  };
  auto reduced = [&](ReduceOp op, size_t offset, size_t len) {
    std::vector<float> acc(len), part(len);
    air::engine::DecodeToF32(half, encoded(0, offset, len).data(), len, acc.data());
    for (int r = 1; r < n; ++r) {
      air::engine::DecodeToF32(half, encoded(r, offset, len).data(), len, part.data());
      for (size_t i = 0; i < len; ++i) {
        acc[i] = op == ReduceOp::kSum   ? acc[i] + part[i]
                 : op == ReduceOp::kMax ? std::max(acc[i], part[i])
                                        : std::min(acc[i], part[i]);
      }
    }
    std::vector<uint16_t> h(len);
    air::engine::EncodeFromF32(half, acc.data(), len, h.data());
    return h;
  };
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kMin}) {
    const char* name = op == ReduceOp::kSum ? "sum" : op == ReduceOp::kMax ? "max" : "min";
    std::vector<uint16_t> data = encoded(me, 0, count);
    AIR_RETURN_IF_ERROR(pg.AllReduce(data.data(), count, dtype, op));
    AIR_RETURN_IF_ERROR(
        Expect(data, reduced(op, 0, count), fmt::format("all_reduce {} {}", name, t)));
    std::vector<uint16_t> full = encoded(me, 0, count * static_cast<size_t>(n)), slot(count);
    AIR_RETURN_IF_ERROR(pg.ReduceScatter(full.data(), slot.data(), count, dtype, op));
    AIR_RETURN_IF_ERROR(Expect(slot, reduced(op, static_cast<size_t>(me) * count, count),
                               fmt::format("reduce_scatter {} {}", name, t)));
  }
  std::vector<uint16_t> mine = encoded(me, 0, count), gathered(count * static_cast<size_t>(n)),
                        want;
  for (int r = 0; r < n; ++r) {
    std::vector<uint16_t> theirs = encoded(r, 0, count);
    want.insert(want.end(), theirs.begin(), theirs.end());
  }
  AIR_RETURN_IF_ERROR(pg.AllGather(mine.data(), gathered.data(), count, dtype));
  AIR_RETURN_IF_ERROR(Expect(gathered, want, "all_gather " + t));
  for (int root = 0; root < n; ++root) {
    std::vector<uint16_t> b = encoded(me, 0, count);
    AIR_RETURN_IF_ERROR(pg.Broadcast(b.data(), count, dtype, root));
    AIR_RETURN_IF_ERROR(
        Expect(b, encoded(root, 0, count), fmt::format("broadcast from {} {}", root, t)));
  }
  return Status::Ok();
}

Status RunChecks(ProcessGroup& pg, size_t count) {
  AIR_RETURN_IF_ERROR(pg.Barrier());
  for (size_t c : {size_t{1}, size_t{7}, count}) {
    AIR_RETURN_IF_ERROR(CheckType<float>(pg, CommDType::kF32, c));
    AIR_RETURN_IF_ERROR(CheckType<int32_t>(pg, CommDType::kI32, c));
    AIR_RETURN_IF_ERROR(CheckType<int64_t>(pg, CommDType::kI64, c));
    AIR_RETURN_IF_ERROR(CheckType<double>(pg, CommDType::kF64, c));
    AIR_RETURN_IF_ERROR(CheckHalf(pg, CommDType::kBF16, c));
    AIR_RETURN_IF_ERROR(CheckHalf(pg, CommDType::kF16, c));
  }
  // The trainer's global sums: rank r contributes (r + 1) * 1000 + 7 tokens and r + 0.5.
  const int n = pg.size();
  AIR_ASSIGN_OR_RETURN(int64_t tokens, GlobalLossTokens(pg, (pg.rank() + 1) * 1000 + 7));
  if (tokens != 1000LL * n * (n + 1) / 2 + 7LL * n) {
    return air::Internal(fmt::format("GlobalLossTokens gave {}", tokens));
  }
  AIR_ASSIGN_OR_RETURN(double norm, GlobalSquaredNorm(pg, pg.rank() + 0.5));
  if (norm != n * (n - 1) / 2.0 + 0.5 * n) {
    return air::Internal(fmt::format("GlobalSquaredNorm gave {}", norm));
  }
  return pg.Barrier();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"air_collectives_check: checks the Gloo process group's collectives"};
  size_t count = 100003;
  double timeout_s = 60;
  double join_timeout_s = 60;
  bool loop = false;
  int stall_rank = -1;
  app.add_option("--count", count, "elements per rank in the large checks");
  app.add_option("--timeout-seconds", timeout_s, "collective timeout");
  app.add_option("--join-timeout-seconds", join_timeout_s, "rendezvous timeout");
  app.add_flag("--loop", loop, "repeat all-reduces until one fails");
  app.add_option("--stall-rank", stall_rank, "this rank never enters a collective (a hang)");
  CLI11_PARSE(app, argc, argv);

  auto dist = ReadDistEnv(air::DefaultEnv());
  if (!dist.ok()) {
    std::cerr << "error: " << dist.status().message() << "\n";
    return 1;
  }
  GlooOptions options;
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  options.join_timeout = std::chrono::milliseconds(static_cast<int64_t>(join_timeout_s * 1000));
  auto pg = CreateGlooProcessGroup(*dist, options);
  if (!pg.ok()) {
    std::cerr << "error: rank " << dist->rank << ": " << pg.status().message() << "\n";
    return 1;
  }
  const std::string who = fmt::format("rank {}/{}", dist->rank, dist->world_size);
  if (stall_rank >= 0) {
    if (dist->rank == stall_rank) {
      std::cout << who << ": stalling outside every collective" << std::endl;
      for (;;) ::pause();
    }
    std::vector<float> data(count, 1.0f);
    std::cout << who << ": entering all_reduce" << std::endl;
    Status s = (*pg)->AllReduce(data.data(), data.size(), CommDType::kF32, ReduceOp::kSum);
    if (!s.ok()) {
      std::cerr << "error: " << who << ": " << s.message() << "\n";
      return 1;
    }
    std::cout << who << ": all_reduce completed without rank " << stall_rank << std::endl;
    return 0;
  }
  if (loop) {
    std::vector<float> data(count, 1.0f);
    std::cout << who << ": looping" << std::endl;
    for (int64_t i = 0;; ++i) {
      Status s = (*pg)->AllReduce(data.data(), data.size(), CommDType::kF32, ReduceOp::kMax);
      if (!s.ok()) {
        std::cerr << "error: " << who << ": " << s.message() << "\n";
        return 1;
      }
    }
  }
  Status s = RunChecks(**pg, count);
  if (!s.ok()) {
    std::cerr << "error: " << who << ": " << s.message() << "\n";
    return 1;
  }
  std::cout << who << ": ok (" << DescribeDistEnv(*dist) << ")" << std::endl;
  return 0;
}
