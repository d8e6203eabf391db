// GlooProcessGroup: rendezvous through TcpStore, Gloo's TCP full mesh, collectives with a
// timeout, and naming the rank a failed collective lost.
#include "engine/parallel/gloo_process_group.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/alltoall.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <map>
#include <thread>
#include <vector>

#include "base/strings.h"
#include "engine/check.h"
#include "engine/dtype.h"
#include "engine/parallel/gloo_pair_sockets.h"
#include "engine/parallel/tcp_store.h"

namespace air::engine::parallel {

size_t CommDTypeSize(CommDType dtype) {
  switch (dtype) {
    case CommDType::kF32:
    case CommDType::kI32:
      return 4;
    case CommDType::kBF16:
    case CommDType::kF16:
      return 2;
    case CommDType::kF64:
    case CommDType::kI64:
      return 8;
  }
  return 0;
}

CommDType CommDTypeOf(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return CommDType::kBF16;
    case DType::kF16:
      return CommDType::kF16;
    case DType::kF64:
      return CommDType::kF64;
    case DType::kI32:
      return CommDType::kI32;
    case DType::kF32:
      return CommDType::kF32;
    case DType::kU8:
      break;  // packed bytes (MXFP4 blocks) are loaded by each rank, never communicated
  }
  AIR_ENGINE_CHECK(false, "no collective carries U8 views");
  return CommDType::kF32;
}

const char* CommDTypeName(CommDType dtype) {
  switch (dtype) {
    case CommDType::kF32:
      return "f32";
    case CommDType::kBF16:
      return "bf16";
    case CommDType::kF16:
      return "f16";
    case CommDType::kF64:
      return "f64";
    case CommDType::kI32:
      return "i32";
    case CommDType::kI64:
      return "i64";
  }
  return "?";
}

namespace {

// Gloo's rendezvous Store over a TcpStoreClient, under a key prefix. Gloo wants exceptions.
class GlooStore : public gloo::rendezvous::Store {
 public:
  GlooStore(TcpStoreClient* client, std::string prefix)
      : client_(client), prefix_(std::move(prefix)) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    Throw(client_->Set(prefix_ + key, std::string(data.begin(), data.end())));
  }
  std::vector<char> get(const std::string& key) override {
    Result<std::string> v = client_->Get(prefix_ + key);
    Throw(v.status());
    return std::vector<char>(v->begin(), v->end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, client_->timeout()); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    std::vector<std::string> full;
    for (const auto& k : keys) full.push_back(prefix_ + k);
    Throw(client_->Wait(full, timeout));
  }

 private:
  static void Throw(const Status& s) {
    if (!s.ok()) throw std::runtime_error(s.message());
  }
  TcpStoreClient* client_;
  std::string prefix_;
};

// The local address this host uses to reach `host` (no packet is sent: a UDP connect only
// picks the route), so Gloo listens where peers can reach it.
Result<std::string> LocalAddressToward(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), "9", &hints, &res); rc != 0) {
    return InvalidArgument(
        fmt::format("MASTER_ADDR={:?} cannot be resolved: {}", host, ::gai_strerror(rc)));
  }
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  std::string local = "127.0.0.1";
  if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
    sockaddr_in addr{};
    socklen_t len = sizeof(addr);
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
      char buf[INET_ADDRSTRLEN];
      if (::inet_ntop(AF_INET, &addr.sin_addr, buf, sizeof(buf))) local = buf;
    }
  }
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(res);
  return local;
}

std::string Hostname() {
  char buf[256] = {};
  ::gethostname(buf, sizeof(buf) - 1);
  return buf;
}

template <typename T>
gloo::AllreduceOptions::Func ReduceFunc(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<T>);
    case ReduceOp::kMax:
      return static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::max<T>);
    case ReduceOp::kMin:
      return static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::min<T>);
  }
  return nullptr;
}

// Calls fn.template operator()<T>() with T the C++ type of dtype.
template <typename Fn>
Status WithType(CommDType dtype, Fn&& fn) {
  switch (dtype) {
    case CommDType::kF32:
      return fn.template operator()<float>();
    case CommDType::kF64:
      return fn.template operator()<double>();
    case CommDType::kI32:
      return fn.template operator()<int32_t>();
    case CommDType::kI64:
      return fn.template operator()<int64_t>();
    case CommDType::kBF16:
    case CommDType::kF16:
      return fn.template operator()<uint16_t>();  // moved as bits; sums take the half path
  }
  return Unimplemented(
      fmt::format("{} collectives are not supported by the Gloo group", CommDTypeName(dtype)));
}

class GlooProcessGroup : public ProcessGroup {
 public:
  GlooProcessGroup(const DistEnv& dist, const GlooOptions& options)
      : dist_(dist), options_(options) {}

  Status Join();

  int rank() const override { return dist_.rank; }
  int size() const override { return dist_.world_size; }
  const char* backend() const override { return "gloo"; }

  Status AllReduce(void* data, size_t count, CommDType dtype, ReduceOp op) override {
    if (IsHalf(dtype)) return HalfAllReduce(data, count, dtype, op);
    return Run("all_reduce", count, dtype, [&]<typename T>() {
      gloo::AllreduceOptions opts(context_);
      opts.setOutput(static_cast<T*>(data), count);
      opts.setReduceFunction(ReduceFunc<T>(op));
      opts.setTag(NextTag());
      opts.setTimeout(options_.timeout);
      gloo::allreduce(opts);
    });
  }

  Status AllGather(const void* send, void* recv, size_t count, CommDType dtype) override {
    return Run("all_gather", count, dtype, [&]<typename T>() {
      T* out = static_cast<T*>(recv);
      const T* in = static_cast<const T*>(send);
      T* slot = out + static_cast<size_t>(dist_.rank) * count;
      if (in != slot) std::memcpy(slot, in, count * sizeof(T));
      gloo::AllgatherOptions opts(context_);
      opts.setOutput(out, count * static_cast<size_t>(dist_.world_size));
      opts.setTag(NextTag());
      opts.setTimeout(options_.timeout);
      gloo::allgather(opts);
    });
  }

  // Gloo has no reduce-scatter over unbound buffers (its halving-doubling one is wrong for
  // world sizes that are not powers of two), so this all-reduces a copy and keeps the rank's
  // slot: correct and deterministic, at twice the traffic of a ring reduce-scatter.
  Status ReduceScatter(const void* send, void* recv, size_t count, CommDType dtype,
                       ReduceOp op) override {
    if (IsHalf(dtype)) return HalfReduceScatter(send, recv, count, dtype, op);
    const size_t total = count * static_cast<size_t>(dist_.world_size);
    return Run("reduce_scatter", count, dtype, [&]<typename T>() {
      std::vector<T> work(static_cast<const T*>(send), static_cast<const T*>(send) + total);
      gloo::AllreduceOptions opts(context_);
      opts.setOutput(work.data(), total);
      opts.setReduceFunction(ReduceFunc<T>(op));
      opts.setTag(NextTag());
      opts.setTimeout(options_.timeout);
      gloo::allreduce(opts);
      std::memcpy(recv, work.data() + static_cast<size_t>(dist_.rank) * count, count * sizeof(T));
    });
  }

  Status Broadcast(void* data, size_t count, CommDType dtype, int root) override {
    if (root < 0 || root >= dist_.world_size) {
      return InvalidArgument(
          fmt::format("broadcast root {} is not a rank of a group of {}", root, dist_.world_size));
    }
    return Run("broadcast", count, dtype, [&]<typename T>() {
      gloo::BroadcastOptions opts(context_);
      opts.setOutput(static_cast<T*>(data), count);
      opts.setRoot(root);
      opts.setTag(NextTag());
      opts.setTimeout(options_.timeout);
      gloo::broadcast(opts);
    });
  }

  Status Barrier() override {
    return Run("barrier", 0, CommDType::kF32, [&]<typename T>() {
      gloo::BarrierOptions opts(context_);
      opts.setTag(NextTag());
      opts.setTimeout(options_.timeout);
      gloo::barrier(opts);
    });
  }

 private:
  uint32_t NextTag() { return tag_++; }

  static bool IsHalf(CommDType dtype) {
    return dtype == CommDType::kBF16 || dtype == CommDType::kF16;
  }
  // bf16/f16 reductions: every rank sends each rank the chunk it owns (all-to-all, in the half
  // dtype: half the bytes of f32), and each rank reduces the W chunks it received in fp32, in
  // rank order, rounding the result once — deterministic, and no rounding between partial sums
  // (a ring would round at every hop).
  Status HalfReduceScatter(const void* send, void* recv, size_t count, CommDType dtype,
                           ReduceOp op);
  // ReduceScatter over the count padded to a multiple of the world size, then an all-gather.
  Status HalfAllReduce(void* data, size_t count, CommDType dtype, ReduceOp op);

  template <typename Body>
  Status Run(const char* op, size_t count, CommDType dtype, Body&& body) {
    if (!broken_.ok()) return broken_;
    std::string what = fmt::format("{} of {} {}", op, count, CommDTypeName(dtype));
    try {
      return WithType(dtype, [&]<typename T>() {
        body.template operator()<T>();
        return Status::Ok();
      });
    } catch (const std::exception& e) {
      broken_ = Failure(what, e.what());
      return broken_;
    }
  }

  Status WaitForAll(const std::vector<std::string>& keys, const std::string& store_at);
  Status Failure(const std::string& what, const std::string& error);
  // After a collective timed out with no peer known lost (a hang): records in the store which
  // collective this rank waited in, reads what the others record within kHangWindow, and names
  // the ranks that did not wait in the same one ("rank 1 (host H, pid P) never entered it",
  // "rank 2 (...) waits in barrier #7 instead"). "" when every rank waited in it, or no store.
  std::string RanksMissingFrom(const std::string& collective);
  static constexpr std::chrono::milliseconds kHangWindow{2000};
  // When the error names no address we know: the rank that must be (or provably is) gone, else -1.
  int DeadPeer() const;
  // Whether rank r ran on this host and its process is gone.
  bool PeerProcessGone(int r) const;
  std::string DescribeRank(int r) const {
    auto it = peers_.find(r);
    return it == peers_.end() ? fmt::format("rank {}", r)
                              : fmt::format("rank {} ({})", r, it->second);
  }

  DistEnv dist_;
  GlooOptions options_;
  std::string prefix_;
  std::unique_ptr<TcpStoreServer> server_;
  std::unique_ptr<TcpStoreClient> store_;
  std::unique_ptr<GlooStore> gloo_store_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::rendezvous::Context> context_;
  std::map<int, std::string> peers_;  // rank -> "host H, pid P"
  GlooPairSockets pair_sockets_;      // peer rank -> the socket under its Gloo pair
  uint32_t tag_ = 1;
  Status broken_;
  // Polls the store's "lost" key while the group lives, so a rank whose collective fails only
  // after the store's host has gone still names the rank the first survivor recorded. Each
  // watcher that sees the key counts itself in "lost_seen"; a broken group's store host waits
  // (up to kLingerForWatchers) for every survivor's count before it goes, so the name outlives
  // it even when its own failure came first and it exits at once.
  static constexpr std::chrono::milliseconds kLingerForWatchers{3000};
  void LingerUntilTheLostRankIsSeen();
  std::atomic<int> seen_lost_{-1};
  std::atomic<bool> counted_lost_{false};
  std::atomic<bool> stop_watch_{false};
  std::thread watcher_;

 public:
  ~GlooProcessGroup() override {
    stop_watch_ = true;
    if (watcher_.joinable()) watcher_.join();
    LingerUntilTheLostRankIsSeen();
  }
};

void GlooProcessGroup::LingerUntilTheLostRankIsSeen() {
  if (!server_ || !store_ || broken_.ok()) return;
  Result<std::optional<std::string>> lost = store_->TryGet(prefix_ + "lost");
  if (!lost.ok() || !*lost) return;
  if (!counted_lost_) (void)store_->Add(prefix_ + "lost_seen", 1);  // this rank, as its watcher
  const auto deadline = std::chrono::steady_clock::now() + kLingerForWatchers;
  while (std::chrono::steady_clock::now() < deadline) {
    Result<int64_t> seen = store_->Add(prefix_ + "lost_seen", 0);
    if (!seen.ok() || *seen >= dist_.world_size - 1) return;  // every rank but the lost one
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

Status GlooProcessGroup::HalfReduceScatter(const void* send, void* recv, size_t count,
                                           CommDType dtype, ReduceOp op) {
  const size_t world = static_cast<size_t>(dist_.world_size);
  const DType half = dtype == CommDType::kBF16 ? DType::kBF16 : DType::kF16;
  std::vector<uint16_t> in(static_cast<const uint16_t*>(send),
                           static_cast<const uint16_t*>(send) + count * world);
  std::vector<uint16_t> chunks(count * world);
  Status moved = Run("reduce_scatter", count, dtype, [&]<typename T>() {
    gloo::AlltoallOptions opts(context_);
    opts.setInput(in.data(), in.size());
    opts.setOutput(chunks.data(), chunks.size());
    opts.setTag(NextTag());
    opts.setTimeout(options_.timeout);
    gloo::alltoall(opts);
  });
  AIR_RETURN_IF_ERROR(moved);
  std::vector<float> acc(count), part(count);
  DecodeToF32(half, chunks.data(), count, acc.data());
  for (size_t r = 1; r < world; ++r) {
    DecodeToF32(half, chunks.data() + r * count, count, part.data());
    for (size_t i = 0; i < count; ++i) {
      switch (op) {
        case ReduceOp::kSum:
          acc[i] += part[i];
          break;
        case ReduceOp::kMax:
          acc[i] = std::max(acc[i], part[i]);
          break;
        case ReduceOp::kMin:
          acc[i] = std::min(acc[i], part[i]);
          break;
      }
    }
  }
  EncodeFromF32(half, acc.data(), count, recv);
  return Status::Ok();
}

Status GlooProcessGroup::HalfAllReduce(void* data, size_t count, CommDType dtype, ReduceOp op) {
  const size_t world = static_cast<size_t>(dist_.world_size);
  const size_t shard = (count + world - 1) / world;
  std::vector<uint16_t> padded(shard * world, 0), mine(shard);
  std::memcpy(padded.data(), data, count * sizeof(uint16_t));
  AIR_RETURN_IF_ERROR(HalfReduceScatter(padded.data(), mine.data(), shard, dtype, op));
  AIR_RETURN_IF_ERROR(AllGather(mine.data(), padded.data(), shard, dtype));
  std::memcpy(data, padded.data(), count * sizeof(uint16_t));
  return Status::Ok();
}

// Waits for every rank's join key. On timeout the store's host publishes the missing ranks and
// stays up until the ranks that did join have read them, so every rank names the same ones.
Status GlooProcessGroup::WaitForAll(const std::vector<std::string>& keys,
                                    const std::string& store_at) {
  const std::string failed_key = prefix_ + "join_failed";
  const auto deadline = std::chrono::steady_clock::now() + options_.join_timeout;
  while (true) {
    AIR_ASSIGN_OR_RETURN(bool ready, store_->Check(keys));
    if (ready) return Status::Ok();
    AIR_ASSIGN_OR_RETURN(std::optional<std::string> failed, store_->TryGet(failed_key));
    if (failed) {
      (void)store_->Add(failed_key + "_seen", 1);
      return DeadlineExceeded(*failed);
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  std::vector<std::string> missing;
  for (size_t r = 0; r < keys.size(); ++r) {
    AIR_ASSIGN_OR_RETURN(bool joined, store_->Check({keys[r]}));
    if (!joined) missing.push_back(std::to_string(r));
  }
  const std::string message = fmt::format(
      "ranks {} of {} did not join within {} s (store at {}); each rank must be started with "
      "the same MASTER_ADDR, MASTER_PORT and WORLD_SIZE",
      ::air::Join(missing, ", "), keys.size(), options_.join_timeout.count() / 1000.0, store_at);
  Result<std::string> first = store_->CompareSet(failed_key, "", message);
  if (server_) {
    const int64_t others = static_cast<int64_t>(keys.size() - missing.size()) - 1;
    for (int i = 0; i < 100; ++i) {
      Result<int64_t> seen = store_->Add(failed_key + "_seen", 0);
      if (!seen.ok() || *seen >= others) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  return DeadlineExceeded(first.ok() ? *first : message);
}

Status GlooProcessGroup::Join() {
  const int n = dist_.world_size;
  context_ = std::make_shared<gloo::rendezvous::Context>(dist_.rank, n);
  context_->setTimeout(options_.timeout);
  if (n == 1) {
    gloo::rendezvous::HashStore local;
    device_ = gloo::transport::tcp::CreateDevice("127.0.0.1");
    context_->connectFullMesh(local, device_);
    return Status::Ok();
  }
  const std::string store_at = fmt::format("{}:{}", dist_.master_addr, dist_.master_port);
  if (!dist_.agent_store && dist_.rank == 0 && options_.sub_group.empty()) {
    auto server = TcpStoreServer::Start(dist_.master_port);
    if (!server.ok()) {
      return server.status().WithContext(
          fmt::format("rank 0 hosts the rendezvous store at {}", store_at));
    }
    server_ = std::move(*server);
  }
  auto client = TcpStoreClient::Connect(dist_.master_addr, dist_.master_port, options_.join_timeout,
                                        options_.timeout);
  if (!client.ok()) {
    if (dist_.agent_store) return client.status();
    return DeadlineExceeded(
        fmt::format("rank 0 did not join: {} (rank 0 hosts the store; missing ranks: 0)",
                    client.status().message()));
  }
  store_ = std::move(*client);
  prefix_ = dist_.agent_store ? fmt::format("/worker/attempt_{}/air/", dist_.restart_count)
                              : std::string("air/");
  if (!options_.sub_group.empty()) prefix_ += "sub/" + options_.sub_group + "/";
  const std::string me = fmt::format("host {}, pid {}", Hostname(), ::getpid());
  AIR_RETURN_IF_ERROR(store_->Set(prefix_ + "join/" + std::to_string(dist_.rank), me));
  std::vector<std::string> keys;
  for (int r = 0; r < n; ++r) keys.push_back(prefix_ + "join/" + std::to_string(r));
  AIR_RETURN_IF_ERROR(WaitForAll(keys, store_at));
  for (int r = 0; r < n; ++r) {
    AIR_ASSIGN_OR_RETURN(peers_[r], store_->Get(keys[static_cast<size_t>(r)]));
  }
  AIR_ASSIGN_OR_RETURN(std::string local, LocalAddressToward(dist_.master_addr));
  gloo_store_ = std::make_unique<GlooStore>(store_.get(), prefix_ + "gloo/");
  try {
    device_ = gloo::transport::tcp::CreateDevice(local.c_str());
    context_->connectFullMesh(*gloo_store_, device_);
  } catch (const std::exception& e) {
    return Unavailable(fmt::format("rank {} could not connect to its peers over Gloo ({}): {}",
                                   dist_.rank, local, e.what()));
  }
  // Each pair's socket (its local end is the pair's address once connected), so a failed
  // collective can tell which peer it lost.
  std::map<int, std::string> pair_address;
  for (int r = 0; r < n; ++r) {
    if (r != dist_.rank) pair_address[r] = context_->getPair(r)->address().str();
  }
  pair_sockets_ = GlooPairSockets::Find(pair_address);
  watcher_ = std::thread([this] {
    const std::string key = prefix_ + "lost";
    while (!stop_watch_ && seen_lost_ < 0) {
      Result<std::optional<std::string>> v = store_->TryGet(key);
      if (!v.ok()) return;
      if (*v) {
        seen_lost_ = std::stoi(**v);
        counted_lost_ = store_->Add(prefix_ + "lost_seen", 1).ok();  // the host may be gone
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  return Status::Ok();
}

bool GlooProcessGroup::PeerProcessGone(int r) const {
  // Only a peer on this host can be checked (peers_ holds "host H, pid P").
  auto it = peers_.find(r);
  if (r == dist_.rank || it == peers_.end()) return false;
  const std::string& where = it->second;
  if (where.rfind(fmt::format("host {},", Hostname()), 0) != 0) return false;
  const size_t at = where.rfind("pid ");
  if (at == std::string::npos) return false;
  const pid_t pid = static_cast<pid_t>(std::atol(where.c_str() + at + 4));
  return pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH;
}

int GlooProcessGroup::DeadPeer() const {
  // With two ranks the lost one can only be the other.
  if (dist_.world_size == 2) return 1 - dist_.rank;
  for (const auto& [r, where] : peers_) {
    if (PeerProcessGone(r)) return r;
  }
  return -1;
}

Status GlooProcessGroup::Failure(const std::string& what, const std::string& error) {
  // The peer this rank saw fail: the one Gloo's error names, else the only broken pair socket.
  const int observed = pair_sockets_.LostRank(error);
  // The first rank to see a failure records whom it lost; a rank that failed only because a
  // survivor gave up (and whose own evidence may name that survivor) then names the original.
  int lost = -1;
  const std::string key = prefix_ + "lost";
  if (store_) {
    if (observed >= 0) {
      Result<std::string> first = store_->CompareSet(key, "", std::to_string(observed));
      if (first.ok()) lost = first->empty() ? observed : std::stoi(*first);
    }
    for (int i = 0; i < 20 && lost < 0 && observed < 0; ++i) {
      Result<std::optional<std::string>> v = store_->TryGet(key);
      if (!v.ok()) break;
      if (*v) lost = std::stoi(**v);
      if (lost < 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  if (lost < 0) lost = seen_lost_;  // the store's host is gone: what its key said, if seen
  if (lost < 0) lost = observed;
  const bool timed_out = error.find("imed out") != std::string::npos;
  if (lost < 0 && timed_out) {
    // Every peer may be alive: a hang. Name the collective and who never reached it.
    const std::string collective = fmt::format("{} (collective #{})", what, tag_ - 1);
    if (std::string missing = RanksMissingFrom(collective); !missing.empty()) {
      return DeadlineExceeded(
          fmt::format("{} on rank {} did not complete within {} s: {} (gloo: {})", collective,
                      dist_.rank, options_.timeout.count() / 1000.0, missing, error));
    }
  }
  if (lost < 0) lost = DeadPeer();
  if (lost >= 0) {
    return Unavailable(fmt::format(
        "{} failed on rank {}: lost {}{} (gloo: {})", what, dist_.rank, DescribeRank(lost),
        timed_out ? fmt::format(", no answer within {} s", options_.timeout.count() / 1000.0)
                  : std::string(": it exited or its connection broke"),
        error));
  }
  return Unavailable(fmt::format("{} failed on rank {}{}: {}", what, dist_.rank,
                                 timed_out ? fmt::format(" after {} s (a peer stopped answering)",
                                                         options_.timeout.count() / 1000.0)
                                           : std::string(),
                                 error));
}

std::string GlooProcessGroup::RanksMissingFrom(const std::string& collective) {
  if (!store_) return "";
  const std::string key = prefix_ + "waits_in/";
  if (!store_->Set(key + std::to_string(dist_.rank), collective).ok()) return "";
  std::map<int, std::string> elsewhere;  // rank -> the collective it waits in, "" : none known
  const auto deadline = std::chrono::steady_clock::now() + kHangWindow;
  while (true) {
    elsewhere.clear();
    for (int r = 0; r < dist_.world_size; ++r) {
      if (r == dist_.rank) continue;
      Result<std::optional<std::string>> v = store_->TryGet(key + std::to_string(r));
      if (!v.ok()) return "";
      if (!*v) {
        elsewhere[r] = "";
      } else if (**v != collective) {
        elsewhere[r] = **v;
      }
    }
    if (elsewhere.empty() || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::vector<std::string> named;
  for (const auto& [r, other] : elsewhere) {
    named.push_back(!other.empty() ? fmt::format("{} waits in {} instead", DescribeRank(r), other)
                    : PeerProcessGone(r)
                        ? fmt::format("{} exited before entering it", DescribeRank(r))
                        : fmt::format("{} never entered it", DescribeRank(r)));
  }
  return ::air::Join(named, "; ");
}

}  // namespace

Result<std::unique_ptr<ProcessGroup>> CreateGlooProcessGroup(const DistEnv& dist,
                                                             const GlooOptions& options) {
  if (dist.world_size == 1) return SingleProcessGroup();
  // Gloo writes to its sockets without MSG_NOSIGNAL: a dead peer would kill this process with
  // SIGPIPE before the collective could report it. (Process-wide; Python runs so by default.)
  ::signal(SIGPIPE, SIG_IGN);
  auto group = std::make_unique<GlooProcessGroup>(dist, options);
  AIR_RETURN_IF_ERROR(group->Join());
  return std::unique_ptr<ProcessGroup>(std::move(group));
}

}  // namespace air::engine::parallel
