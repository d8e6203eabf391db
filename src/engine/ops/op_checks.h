// The argument checks of the ops (ops.h's roles: data, stat, master, index, packed, scalar), run
// once per call by the public Ops methods (ops_checked.cc) in front of every backend's kernels: a
// view of a dtype its role does not allow, or too small for what the op addresses, is a broken
// invariant — the program aborts naming the op, the argument and what is wrong (engine/check.h).
// Model code never gets here with a bad combination: it asks Ops::Supports first
// (CheckOpsSupport) and reports the error as a Status.
// Thread safety: pure functions.
#pragma once

#include <cstdint>

#include "engine/ops/ops.h"

namespace air::engine {

// Every check of an argument with memory also checks that the memory is on `ops`' device: a
// view of another device's memory (a cuda:0 view reaching a CPU backend, or one of cuda:1
// reaching cuda:0) aborts naming both devices, never dereferences a pointer it cannot.
// A data argument: a float dtype `ops` supports for `op`.
void CheckData(const Ops& ops, OpKind op, const View& v, const char* arg);
// Stat and master arguments: F32. Index arguments: I32. Packed arguments: U8. Scalars: one F64.
void CheckF32(const Ops& ops, OpKind op, const View& v, const char* arg);
void CheckIndex(const Ops& ops, OpKind op, const View& v, const char* arg);
void CheckPacked(const Ops& ops, OpKind op, const View& v, const char* arg);
void CheckScalar(const Ops& ops, OpKind op, const View& v, const char* arg);
// The view holds at least `elements` elements.
void CheckSize(OpKind op, const View& v, int64_t elements, const char* arg);
// Both views hold the same number of elements.
void CheckSameSize(OpKind op, const View& a, const View& b, const char* what);

// Elements a row-major matrix of `rows` x `cols` with row stride `ld` spans.
inline int64_t MatrixSpan(int64_t rows, int64_t cols, int64_t ld) {
  return rows > 0 && cols > 0 ? (rows - 1) * ld + cols : 0;
}

}  // namespace air::engine
