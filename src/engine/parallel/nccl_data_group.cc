// NCCL's data group (see nccl_data_group.h). Compiled to a refusal in builds without CUDA.
#include "engine/parallel/nccl_data_group.h"

#include <fmt/format.h>

#ifndef AIR_HAVE_CUDA
#define AIR_HAVE_CUDA 0
#endif

#if AIR_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "base/shared_library.h"
#include "engine/backend/cuda/cuda_backend.h"
#include "engine/parallel/tcp_store.h"
#endif

namespace air::engine::parallel {

#if !AIR_HAVE_CUDA

Result<std::unique_ptr<DataGroup>> NcclDataGroup(const DistEnv&, const Backend&,
                                                 std::shared_ptr<Backend>, const NcclOptions&) {
  return FailedPrecondition(
      "NCCL needs the CUDA backend, which this air was built without (nvcc was not found when it "
      "was configured); use ddp_backend: gloo on the CPU");
}

#else

namespace {

// The NCCL functions the group calls, typed from nccl.h, resolved from libnccl.so.2 once.
struct NcclApi {
  decltype(&ncclGetVersion) GetVersion = nullptr;
  decltype(&ncclGetUniqueId) GetUniqueId = nullptr;
  decltype(&ncclCommInitRank) CommInitRank = nullptr;
  decltype(&ncclCommDestroy) CommDestroy = nullptr;
  decltype(&ncclCommAbort) CommAbort = nullptr;
  decltype(&ncclCommGetAsyncError) CommGetAsyncError = nullptr;
  decltype(&ncclGetErrorString) GetErrorString = nullptr;
  decltype(&ncclAllGather) AllGather = nullptr;
  decltype(&ncclReduceScatter) ReduceScatter = nullptr;
  decltype(&ncclAllReduce) AllReduce = nullptr;
};

Result<const NcclApi*> LoadNccl() {
  static const Result<const NcclApi*> loaded = []() -> Result<const NcclApi*> {
    static NcclApi api;
    AIR_ASSIGN_OR_RETURN(
        SharedLibrary library,
        SharedLibrary::Open("libnccl.so.2", "NCCL, which the GPUs' collectives run on",
                            "put the folder of the machine's libnccl.so.2 on LD_LIBRARY_PATH, or "
                            "use ddp_backend: gloo (collectives staged through the host)"));
    library.Resolve("ncclGetVersion", &api.GetVersion);
    library.Resolve("ncclGetUniqueId", &api.GetUniqueId);
    library.Resolve("ncclCommInitRank", &api.CommInitRank);
    library.Resolve("ncclCommDestroy", &api.CommDestroy);
    library.Resolve("ncclCommAbort", &api.CommAbort);
    library.Resolve("ncclCommGetAsyncError", &api.CommGetAsyncError);
    library.Resolve("ncclGetErrorString", &api.GetErrorString);
    library.Resolve("ncclAllGather", &api.AllGather);
    library.Resolve("ncclReduceScatter", &api.ReduceScatter);
    library.Resolve("ncclAllReduce", &api.AllReduce);
    AIR_RETURN_IF_ERROR(library.Complete("an NCCL older than the 2.x this build needs"));
    return &api;
  }();
  return loaded;
}

ncclDataType_t NcclType(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return ncclBfloat16;
    case DType::kF16:
      return ncclFloat16;
    case DType::kF64:
      return ncclFloat64;
    case DType::kI32:
      return ncclInt32;
    case DType::kF32:
      return ncclFloat32;
    case DType::kU8:
      return ncclUint8;
  }
  return ncclFloat32;
}

// The group's shared state: the communicator, its first error, and the collectives in flight
// that the watchdog watches.
class NcclGroup : public DataGroup {
 public:
  NcclGroup(const NcclApi& api, ncclComm_t comm, const DistEnv& dist, const Backend& compute,
            std::shared_ptr<Backend> comm_backend, cudaStream_t stream, NcclOptions options)
      : api_(api),
        comm_(comm),
        rank_(dist.rank),
        size_(dist.world_size),
        compute_(compute),
        comm_backend_(std::move(comm_backend)),
        stream_(stream),
        options_(std::move(options)),
        watchdog_([this] { Watch(); }) {}

  ~NcclGroup() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    wake_.notify_all();
    watchdog_.join();
    if (aborted_) {
      // the watchdog aborted it
    } else if (broken()) {
      api_.CommAbort(comm_);
    } else {
      comm_backend_->Synchronize();
      api_.CommDestroy(comm_);
    }
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const char* name() const override { return "nccl"; }

  std::unique_ptr<CollectiveWork> AllGather(const View& send, const View& recv) override {
    const size_t n = static_cast<size_t>(send.numel());
    return Launch("AllGather", send, [&] {
      return api_.AllGather(send.raw(), recv.raw(), n, NcclType(send.dtype()), comm_, stream_);
    });
  }
  std::unique_ptr<CollectiveWork> ReduceScatter(const View& send, const View& recv) override {
    const size_t n = static_cast<size_t>(recv.numel());
    return Launch("ReduceScatter", send, [&] {
      return api_.ReduceScatter(send.raw(), recv.raw(), n, NcclType(send.dtype()), ncclSum, comm_,
                                stream_);
    });
  }
  std::unique_ptr<CollectiveWork> AllReduce(const View& data) override {
    const size_t n = static_cast<size_t>(data.numel());
    return Launch("AllReduce", data, [&] {
      return api_.AllReduce(data.raw(), data.raw(), n, NcclType(data.dtype()), ncclSum, comm_,
                            stream_);
    });
  }
  double busy_seconds() const override { return 0.0; }  // on the GPU: no host-side figure
  double wait_seconds() const override { return 0.0; }  // the compute thread never blocks

 private:
  struct InFlight {
    std::shared_ptr<Event> done;
    std::chrono::steady_clock::time_point deadline;
    std::string what;  // "ReduceScatter #341 of 12582912 BF16 elements"
  };

  class Work : public CollectiveWork {
   public:
    Work(NcclGroup& group, std::shared_ptr<Event> done) : group_(group), done_(std::move(done)) {}
    Status Wait() override {
      AIR_RETURN_IF_ERROR(group_.error());
      if (done_ != nullptr) group_.compute_.WaitEvent(*done_);
      return Status::Ok();
    }

   private:
    NcclGroup& group_;
    std::shared_ptr<Event> done_;
  };

  template <typename Call>
  std::unique_ptr<CollectiveWork> Launch(const char* op, const View& data, Call call) {
    if (Status s = error(); !s.ok()) return std::make_unique<Work>(*this, nullptr);
    // After the compute work that produced the inputs (and last read the outputs).
    comm_backend_->WaitEvent(*compute_.RecordEvent());
    const ncclResult_t result = call();
    const int64_t number = ++launched_;
    const std::string what =
        fmt::format("{} #{} of {} {} elements", op, number, data.numel(), DTypeName(data.dtype()));
    if (result != ncclSuccess) {
      Break(fmt::format("NCCL {} on rank {} failed: {}", what, rank_, api_.GetErrorString(result)));
      return std::make_unique<Work>(*this, nullptr);
    }
    std::shared_ptr<Event> done = comm_backend_->RecordEvent();
    {
      std::lock_guard<std::mutex> lock(mu_);
      in_flight_.push_back({done, std::chrono::steady_clock::now() + options_.timeout, what});
    }
    return std::make_unique<Work>(*this, std::move(done));
  }

  // The watchdog: collectives past their deadline, or an asynchronous NCCL error, break the
  // group and abort the communicator (which releases every stream waiting on it).
  void Watch() {
    // This thread's CUDA calls (the events it queries, NCCL's abort) on the rank's GPU, not on
    // GPU 0, where a thread that never chose a device would open a context of its own.
    cudaSetDevice(compute_.device().index);
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      wake_.wait_for(lock, std::chrono::milliseconds(50));
      while (!in_flight_.empty() && in_flight_.front().done->Done()) in_flight_.pop_front();
      ncclResult_t async = ncclSuccess;
      api_.CommGetAsyncError(comm_, &async);
      std::string failure;
      if (async != ncclSuccess && async != ncclInProgress) {
        failure = fmt::format("NCCL reported an asynchronous error on rank {}: {}", rank_,
                              api_.GetErrorString(async));
      } else if (!in_flight_.empty() &&
                 std::chrono::steady_clock::now() > in_flight_.front().deadline) {
        failure = fmt::format(
            "NCCL {} on rank {} did not finish within {} s (ddp_timeout): a rank stopped or the "
            "network failed; the communicator was aborted",
            in_flight_.front().what, rank_,
            std::chrono::duration_cast<std::chrono::seconds>(options_.timeout).count());
      }
      if (failure.empty()) continue;
      if (first_error_.ok()) first_error_ = Unavailable(failure);
      in_flight_.clear();
      lock.unlock();
      api_.CommAbort(comm_);
      aborted_ = true;
      lock.lock();
      return;
    }
  }

  void Break(const std::string& message) {
    std::lock_guard<std::mutex> lock(mu_);
    if (first_error_.ok()) first_error_ = Internal(message);
  }
  Status error() const {
    std::lock_guard<std::mutex> lock(mu_);
    return first_error_;
  }
  bool broken() const { return !error().ok(); }

  const NcclApi& api_;
  ncclComm_t comm_;
  const int rank_, size_;
  const Backend& compute_;
  std::shared_ptr<Backend> comm_backend_;
  cudaStream_t stream_;
  const NcclOptions options_;
  int64_t launched_ = 0;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<InFlight> in_flight_;
  Status first_error_;
  bool stopping_ = false;
  std::atomic<bool> aborted_{false};
  std::thread watchdog_;  // last: started once every member is ready
};

}  // namespace

Result<std::unique_ptr<DataGroup>> NcclDataGroup(const DistEnv& dist, const Backend& compute,
                                                 std::shared_ptr<Backend> comm,
                                                 const NcclOptions& options) {
  AIR_ASSIGN_OR_RETURN(const NcclApi* api, LoadNccl());
  auto* stream_owner = dynamic_cast<cuda::CudaBackend*>(comm.get());
  if (stream_owner == nullptr || compute.device() != comm->device() ||
      compute.device().type != DeviceType::kCuda) {
    return InvalidArgument(fmt::format(
        "NCCL runs between GPUs: the compute backend is on {} and the communication one on {}",
        compute.device().ToString(), comm->device().ToString()));
  }
  // The unique id, through the rendezvous store the control group joined.
  AIR_ASSIGN_OR_RETURN(std::unique_ptr<TcpStoreClient> store,
                       TcpStoreClient::Connect(dist.master_addr, dist.master_port, options.timeout,
                                               options.timeout));
  const std::string key = fmt::format("air/nccl/{}/{}/unique_id", dist.restart_count, options.name);
  ncclUniqueId id{};
  if (dist.rank == 0) {
    const ncclResult_t made = api->GetUniqueId(&id);
    if (made != ncclSuccess) {
      return Internal(fmt::format("ncclGetUniqueId: {}", api->GetErrorString(made)));
    }
    AIR_RETURN_IF_ERROR(store->Set(key, std::string(id.internal, sizeof id.internal)));
  } else {
    AIR_ASSIGN_OR_RETURN(const std::string bytes, store->Get(key));
    if (bytes.size() != sizeof id.internal) {
      return Internal(
          fmt::format("{} in the store holds {} bytes, not an NCCL unique id", key, bytes.size()));
    }
    std::memcpy(id.internal, bytes.data(), sizeof id.internal);
  }
  const cudaError_t set = cudaSetDevice(compute.device().index);
  if (set != cudaSuccess) {
    return Internal(
        fmt::format("cudaSetDevice({}): {}", compute.device().index, cudaGetErrorString(set)));
  }
  ncclComm_t communicator = nullptr;
  const ncclResult_t joined = api->CommInitRank(&communicator, dist.world_size, id, dist.rank);
  if (joined != ncclSuccess) {
    return Unavailable(fmt::format(
        "rank {} could not join the NCCL group of {} ranks: {} (NCCL_DEBUG=INFO says why; "
        "NCCL_SOCKET_IFNAME picks the network interface)",
        dist.rank, dist.world_size, api->GetErrorString(joined)));
  }
  return std::unique_ptr<DataGroup>(std::make_unique<NcclGroup>(
      *api, communicator, dist, compute, std::move(comm), stream_owner->stream(), options));
}

#endif

}  // namespace air::engine::parallel
