// oneDNN's bf16 matmul behind GemmOperand/GemmResult, opened at run time (see onednn_gemm.h).
#include "engine/backend/cpu/onednn_gemm.h"

#include <stdlib.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include "base/shared_library.h"
#include "engine/backend/cpu/amx_tiles.h"
#include "engine/backend/cpu/convert.h"

#if __has_include(<oneapi/dnnl/dnnl.h>)
#include <oneapi/dnnl/dnnl.h>
#define AIR_HAVE_ONEDNN 1
#else
#define AIR_HAVE_ONEDNN 0
#endif

namespace air::engine {

#if AIR_HAVE_ONEDNN

namespace {

// The C functions used, resolved from libdnnl.so.2 (and libgomp, which it loads).
struct Api {
  decltype(&dnnl_version) version;
  decltype(&dnnl_engine_create) engine_create;
  decltype(&dnnl_engine_destroy) engine_destroy;
  decltype(&dnnl_stream_create) stream_create;
  decltype(&dnnl_stream_destroy) stream_destroy;
  decltype(&dnnl_stream_wait) stream_wait;
  decltype(&dnnl_memory_desc_init_by_strides) md_init;
  decltype(&dnnl_matmul_desc_init) matmul_desc_init;
  decltype(&dnnl_primitive_attr_create) attr_create;
  decltype(&dnnl_primitive_attr_destroy) attr_destroy;
  decltype(&dnnl_primitive_attr_set_post_ops) attr_set_post_ops;
  decltype(&dnnl_post_ops_create) post_ops_create;
  decltype(&dnnl_post_ops_destroy) post_ops_destroy;
  decltype(&dnnl_post_ops_append_sum) post_ops_append_sum;
  decltype(&dnnl_primitive_desc_create) pd_create;
  decltype(&dnnl_primitive_desc_destroy) pd_destroy;
  decltype(&dnnl_primitive_desc_query) pd_query;
  decltype(&dnnl_primitive_create) primitive_create;
  decltype(&dnnl_primitive_destroy) primitive_destroy;
  decltype(&dnnl_primitive_execute) execute;
  decltype(&dnnl_memory_create) memory_create;
  decltype(&dnnl_memory_destroy) memory_destroy;
  decltype(&dnnl_memory_set_data_handle) memory_set_handle;
  void (*omp_set_num_threads)(int);
};

constexpr const char* kRemedy =
    "install oneDNN 2.x (Debian/Ubuntu: apt install libdnnl2), or choose another CPU path "
    "(AIR_CPU_PATH)";

Result<Api> LoadApi() {
  // libgomp's threads spin after each parallel region by default, and spinning they took the
  // cores from air's pool between two GEMMs: bench/train_step's 4 x 512 bf16 step ran at 0.58x
  // the avx512bf16 path's speed on 2 threads, 0.95x with passive waits. libgomp reads this
  // once, when it loads (here, with libdnnl: air does not link OpenMP); a user's setting wins.
  setenv("OMP_WAIT_POLICY", "PASSIVE", /*overwrite=*/0);
  AIR_ASSIGN_OR_RETURN(SharedLibrary dnnl,
                       SharedLibrary::Open("libdnnl.so.2", "the onednn bf16 GEMM path", kRemedy));
  Api api{};
  dnnl.Resolve("dnnl_version", &api.version);
  dnnl.Resolve("dnnl_engine_create", &api.engine_create);
  dnnl.Resolve("dnnl_engine_destroy", &api.engine_destroy);
  dnnl.Resolve("dnnl_stream_create", &api.stream_create);
  dnnl.Resolve("dnnl_stream_destroy", &api.stream_destroy);
  dnnl.Resolve("dnnl_stream_wait", &api.stream_wait);
  dnnl.Resolve("dnnl_memory_desc_init_by_strides", &api.md_init);
  dnnl.Resolve("dnnl_matmul_desc_init", &api.matmul_desc_init);
  dnnl.Resolve("dnnl_primitive_attr_create", &api.attr_create);
  dnnl.Resolve("dnnl_primitive_attr_destroy", &api.attr_destroy);
  dnnl.Resolve("dnnl_primitive_attr_set_post_ops", &api.attr_set_post_ops);
  dnnl.Resolve("dnnl_post_ops_create", &api.post_ops_create);
  dnnl.Resolve("dnnl_post_ops_destroy", &api.post_ops_destroy);
  dnnl.Resolve("dnnl_post_ops_append_sum", &api.post_ops_append_sum);
  dnnl.Resolve("dnnl_primitive_desc_create", &api.pd_create);
  dnnl.Resolve("dnnl_primitive_desc_destroy", &api.pd_destroy);
  dnnl.Resolve("dnnl_primitive_desc_query", &api.pd_query);
  dnnl.Resolve("dnnl_primitive_create", &api.primitive_create);
  dnnl.Resolve("dnnl_primitive_destroy", &api.primitive_destroy);
  dnnl.Resolve("dnnl_primitive_execute", &api.execute);
  dnnl.Resolve("dnnl_memory_create", &api.memory_create);
  dnnl.Resolve("dnnl_memory_destroy", &api.memory_destroy);
  dnnl.Resolve("dnnl_memory_set_data_handle", &api.memory_set_handle);
  AIR_RETURN_IF_ERROR(dnnl.Complete("air needs oneDNN 2.x (the 2.x C API: dnnl_matmul_desc_init)"));
  // Debian's oneDNN runs on OpenMP (libgomp, loaded with it): its team size is set per call.
  AIR_ASSIGN_OR_RETURN(SharedLibrary gomp,
                       SharedLibrary::Open("libgomp.so.1", "oneDNN's OpenMP threads", kRemedy));
  gomp.Resolve("omp_set_num_threads", &api.omp_set_num_threads);
  AIR_RETURN_IF_ERROR(gomp.Complete(kRemedy));
  if (api.version()->major != 2) {
    return FailedPrecondition("libdnnl.so.2 reports oneDNN " +
                              std::to_string(api.version()->major) + "; air needs 2.x");
  }
  return api;
}

// Loaded once per process (never unloaded: SharedLibrary keeps the handles).
const Result<Api>& TheApi() {
  static const Result<Api>* api = new Result<Api>(LoadApi());
  return *api;
}

using Dims = dnnl_dims_t;

// (rows, cols) of `type`, stored with row stride ld, or transposed (stored (cols, rows)).
dnnl_memory_desc_t Strided(const Api& api, int64_t rows, int64_t cols, dnnl_data_type_t type,
                           int64_t ld, bool trans) {
  dnnl_memory_desc_t md;
  const Dims dims = {rows, cols};
  Dims strides = {ld, 1};
  if (trans) strides[0] = 1, strides[1] = ld;
  api.md_init(&md, 2, dims, type, strides);
  return md;
}

}  // namespace

// Primitive key: m, n, k, the row strides of A, B and C as oneDNN reads them, transposes,
// C bf16, beta.
using Key =
    std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, bool, bool, float>;

// One cached product: the primitive and its three memories (their data set per call); null
// primitive: oneDNN has no matmul for this layout.
struct Product {
  dnnl_primitive_t matmul = nullptr;
  dnnl_memory_t a = nullptr, b = nullptr, c = nullptr;
};

struct OneDnnGemm::State {
  const Api& api;
  dnnl_engine_t engine = nullptr;
  dnnl_stream_t stream = nullptr;
  std::map<Key, Product> products;
  std::vector<uint16_t> a_bf16, b_bf16;  // F32 operands rounded

  explicit State(const Api& a) : api(a) {
    api.engine_create(&engine, dnnl_cpu, 0);
    api.stream_create(&stream, engine, dnnl_stream_default_flags);
  }
  ~State() {
    Clear();
    api.stream_destroy(stream);
    api.engine_destroy(engine);
  }
  void Clear() {
    for (auto& [key, p] : products) {
      if (p.matmul == nullptr) continue;
      api.primitive_destroy(p.matmul);
      api.memory_destroy(p.a);
      api.memory_destroy(p.b);
      api.memory_destroy(p.c);
    }
    products.clear();
  }
  // Creates the product; its impl name into *impl. Product{} when oneDNN has none.
  Product Create(int64_t m, int64_t n, int64_t k, const GemmOperand& a, const GemmOperand& b,
                 float beta, const GemmResult& c, std::string* impl) {
    const dnnl_memory_desc_t a_md = Strided(api, m, k, dnnl_bf16, a.ld, a.trans);
    const dnnl_memory_desc_t b_md = Strided(api, k, n, dnnl_bf16, b.ld, b.trans);
    const dnnl_memory_desc_t c_md = Strided(api, m, n, c.bf16 ? dnnl_bf16 : dnnl_f32, c.ld, false);
    dnnl_matmul_desc_t desc;
    if (api.matmul_desc_init(&desc, &a_md, &b_md, nullptr, &c_md) != dnnl_success) return {};
    dnnl_primitive_attr_t attr = nullptr;
    api.attr_create(&attr);
    if (beta != 0.0f) {
      dnnl_post_ops_t ops = nullptr;
      api.post_ops_create(&ops);
      api.post_ops_append_sum(ops, beta);
      api.attr_set_post_ops(attr, ops);
      api.post_ops_destroy(ops);
    }
    dnnl_primitive_desc_t pd = nullptr;
    const dnnl_status_t made = api.pd_create(&pd, &desc, attr, engine, nullptr);
    api.attr_destroy(attr);
    if (made != dnnl_success) return {};
    const char* name = nullptr;
    api.pd_query(pd, dnnl_query_impl_info_str, 0, &name);
    if (name != nullptr) *impl = name;
    Product p;
    const dnnl_status_t created = api.primitive_create(&p.matmul, pd);
    api.pd_destroy(pd);
    if (created != dnnl_success) return {};
    api.memory_create(&p.a, &a_md, engine, DNNL_MEMORY_NONE);
    api.memory_create(&p.b, &b_md, engine, DNNL_MEMORY_NONE);
    api.memory_create(&p.c, &c_md, engine, DNNL_MEMORY_NONE);
    return p;
  }
};

namespace {

constexpr size_t kMaxProducts = 256;

// The operand as bf16 oneDNN reads it: its own bits, or its floats rounded into `buffer`
// packed (ld = the stored row length), on the pool.
GemmOperand AsBf16(ThreadPool* pool, const GemmOperand& x, int64_t stored_rows, int64_t stored_cols,
                   std::vector<uint16_t>& buffer) {
  if (x.bf16) return x;
  buffer.resize(static_cast<size_t>(stored_rows * stored_cols));
  const auto* src = static_cast<const float*>(x.data);
  const auto convert = [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) {
      RoundToBf16(src + r * x.ld, buffer.data() + r * stored_cols, stored_cols);
    }
  };
  const int64_t min_rows = std::max<int64_t>(1, 16384 / stored_cols);
  if (pool != nullptr) {
    pool->ParallelFor(stored_rows, min_rows, convert);
  } else {
    convert(0, stored_rows, 0);
  }
  return {buffer.data(), true, stored_cols, x.trans};
}

}  // namespace

const OneDnnStatus& OneDnnMatmul() {
  static const OneDnnStatus status = [] {
    const Result<Api>& loaded = TheApi();
    if (!loaded.ok()) return OneDnnStatus{false, loaded.status().message(), ""};
    AmxBf16Support();  // request the tile state before oneDNN looks for it
    // One small product, F32 C: does oneDNN have a bf16 matmul here, and with what kernels?
    OneDnnGemm probe;
    std::vector<uint16_t> a(64 * 64, 0x3f80), b(64 * 64, 0x3f80);
    std::vector<float> c(64 * 64);
    if (!probe.Gemm(nullptr, 64, 64, 64, {a.data(), true, 64, false}, {b.data(), true, 64, true},
                    0.0f, {c.data(), false, 64}) ||
        c[0] != 64.0f) {
      return OneDnnStatus{false,
                          "oneDNN has no bf16 matmul on this CPU (it needs AVX-512: "
                          "avx512_core; ONEDNN_MAX_CPU_ISA may cap it)",
                          ""};
    }
    return OneDnnStatus{true, "", probe.last_impl()};
  }();
  return status;
}

OneDnnGemm::OneDnnGemm() : state_(std::make_unique<State>(*TheApi())) {}
OneDnnGemm::~OneDnnGemm() = default;

bool OneDnnGemm::Gemm(ThreadPool* pool, int64_t m, int64_t n, int64_t k, const GemmOperand& a,
                      const GemmOperand& b, float beta, const GemmResult& c) {
  State& s = *state_;
  // Stored shapes: A (M, K) or (K, M); B (K, N) or (N, K). An F32 operand is read as its
  // bf16 copy, packed: its row stride is its stored row length.
  const int64_t a_rows = a.trans ? k : m, a_cols = a.trans ? m : k;
  const int64_t b_rows = b.trans ? n : k, b_cols = b.trans ? k : n;
  const int64_t lda = a.bf16 ? a.ld : a_cols, ldb = b.bf16 ? b.ld : b_cols;
  const Key key{m, n, k, lda, ldb, c.ld, a.trans, b.trans, c.bf16, beta};
  auto found = s.products.find(key);
  if (found == s.products.end()) {
    if (s.products.size() >= kMaxProducts) s.Clear();
    const GemmOperand a_layout{nullptr, true, lda, a.trans}, b_layout{nullptr, true, ldb, b.trans};
    found =
        s.products.emplace(key, s.Create(m, n, k, a_layout, b_layout, beta, c, &last_impl_)).first;
  }
  const Product& p = found->second;
  if (p.matmul == nullptr) return false;
  const GemmOperand a16 = AsBf16(pool, a, a_rows, a_cols, s.a_bf16);
  const GemmOperand b16 = AsBf16(pool, b, b_rows, b_cols, s.b_bf16);
  s.api.memory_set_handle(p.a, const_cast<void*>(a16.data));
  s.api.memory_set_handle(p.b, const_cast<void*>(b16.data));
  s.api.memory_set_handle(p.c, c.data);
  s.api.omp_set_num_threads(pool != nullptr ? pool->num_threads() : 1);
  const dnnl_exec_arg_t args[] = {
      {DNNL_ARG_SRC, p.a}, {DNNL_ARG_WEIGHTS, p.b}, {DNNL_ARG_DST, p.c}};
  const bool ran = s.api.execute(p.matmul, s.stream, 3, args) == dnnl_success;
  s.api.stream_wait(s.stream);
  return ran;
}

#else  // built without oneDNN's headers

struct OneDnnGemm::State {};

const OneDnnStatus& OneDnnMatmul() {
  static const OneDnnStatus status{
      false,
      "this air was built without oneDNN (its headers, libdnnl-dev, were not found when it was "
      "compiled)",
      ""};
  return status;
}

OneDnnGemm::OneDnnGemm() = default;
OneDnnGemm::~OneDnnGemm() = default;
bool OneDnnGemm::Gemm(ThreadPool*, int64_t, int64_t, int64_t, const GemmOperand&,
                      const GemmOperand&, float, const GemmResult&) {
  return false;
}

#endif

}  // namespace air::engine
