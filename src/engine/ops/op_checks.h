// The argument checks of the ops (ops.h's roles: data, stat, master, index, scalar), run once per
// call by the public Ops methods (ops_checked.cc) in front of every backend's kernels: a view of
// a dtype its role does not allow, or too small for what the op addresses, is a broken invariant
// — the program aborts naming the op, the argument and what is wrong (engine/check.h).
// Model code never gets here with a bad combination: it asks Ops::Supports first
// (CheckOpsSupport) and reports the error as a Status.
// Thread safety: pure functions.
#pragma once

#include <cstdint>

#include "engine/ops/ops.h"

namespace air::engine {

// A data argument: a float dtype `ops` supports for `op`.
void CheckData(const Ops& ops, OpKind op, const View& v, const char* arg);
// Stat and master arguments: F32. Index arguments: I32. Scalars: one F64.
void CheckF32(OpKind op, const View& v, const char* arg);
void CheckIndex(OpKind op, const View& v, const char* arg);
void CheckScalar(OpKind op, const View& v, const char* arg);
// The view holds at least `elements` elements.
void CheckSize(OpKind op, const View& v, int64_t elements, const char* arg);
// Both views hold the same number of elements.
void CheckSameSize(OpKind op, const View& a, const View& b, const char* what);

// Elements a row-major matrix of `rows` x `cols` with row stride `ld` spans.
inline int64_t MatrixSpan(int64_t rows, int64_t cols, int64_t ld) {
  return rows > 0 && cols > 0 ? (rows - 1) * ld + cols : 0;
}

}  // namespace air::engine
