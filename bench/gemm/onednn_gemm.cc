// oneDNN's bf16 matmul behind gemm_mixed.h's operands (see onednn_gemm.h).
#include "onednn_gemm.h"

#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>

#include "engine/dtype.h"

namespace air::bench {

using dt = dnnl::memory::data_type;

// Primitive key: m, n, k, stored row strides of A, B and C, transposes, C bf16, beta.
using Key =
    std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool, bool, bool, float>;

// One cached product: its memory descriptors (op(A), op(B) and C as strides over the stored
// matrices) and the primitive.
struct Product {
  dnnl::memory::desc a, b, c;
  dnnl::matmul matmul;
};

struct OneDnnGemm::State {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  std::map<Key, Product> products;
  std::vector<uint16_t> a_bf16, b_bf16;  // F32 operands rounded
};

OneDnnGemm::OneDnnGemm() : state_(std::make_unique<State>()) {}
OneDnnGemm::~OneDnnGemm() = default;

void OneDnnGemm::SetThreads(int threads) { omp_set_num_threads(threads); }

namespace {

// The operand as bf16 bits: its own, or its floats rounded into `buffer` (same layout).
const uint16_t* AsBf16(const engine::GemmOperand& x, int64_t stored_rows,
                       std::vector<uint16_t>& buffer) {
  if (x.bf16) return static_cast<const uint16_t*>(x.data);
  buffer.resize(static_cast<size_t>(stored_rows * x.ld));
  engine::EncodeFromF32(engine::DType::kBF16, static_cast<const float*>(x.data), buffer.size(),
                        buffer.data());
  return buffer.data();
}

// (rows, cols) of bf16 stored with row stride ld, or transposed (stored (cols, rows)).
dnnl::memory::desc Strided(int64_t rows, int64_t cols, dt type, int64_t ld, bool trans) {
  return dnnl::memory::desc({rows, cols}, type,
                            trans ? dnnl::memory::dims{1, ld} : dnnl::memory::dims{ld, 1});
}

}  // namespace

void OneDnnGemm::Gemm(int64_t m, int64_t n, int64_t k, const engine::GemmOperand& a,
                      const engine::GemmOperand& b, float beta, const engine::GemmResult& c) {
  State& s = *state_;
  const Key key{m, n, k, a.ld, b.ld, c.ld, a.trans, b.trans, c.bf16, beta};
  auto found = s.products.find(key);
  if (found == s.products.end()) {
    Product p{Strided(m, k, dt::bf16, a.ld, a.trans),
              Strided(k, n, dt::bf16, b.ld, b.trans),
              Strided(m, n, c.bf16 ? dt::bf16 : dt::f32, c.ld, false),
              {}};
    dnnl::primitive_attr attr;
    if (beta != 0.0f) {
      dnnl::post_ops ops;
      ops.append_sum(beta);
      attr.set_post_ops(ops);
    }
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(p.a, p.b, p.c), attr, s.engine);
    last_impl_ = pd.impl_info_str();
    p.matmul = dnnl::matmul(pd);
    found = s.products.emplace(key, std::move(p)).first;
  }
  const Product& p = found->second;
  const uint16_t* a_bits = AsBf16(a, a.trans ? k : m, s.a_bf16);
  const uint16_t* b_bits = AsBf16(b, b.trans ? n : k, s.b_bf16);
  dnnl::memory a_mem(p.a, s.engine, const_cast<uint16_t*>(a_bits));
  dnnl::memory b_mem(p.b, s.engine, const_cast<uint16_t*>(b_bits));
  dnnl::memory c_mem(p.c, s.engine, c.data);
  p.matmul.execute(s.stream,
                   {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}});
  s.stream.wait();
}

}  // namespace air::bench
