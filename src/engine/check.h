// AIR_ENGINE_CHECK: aborts on a broken invariant inside the engine (a caller passed tensors of
// mismatched shapes, an index out of range that validation should have caught). Never used for
// user input: files, configs and batches are validated and reported as Status values.
// Thread safety: stateless.
#pragma once

#include <cstdio>
#include <cstdlib>

#define AIR_ENGINE_CHECK(cond, msg)                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      std::fprintf(stderr, "%s:%d: engine invariant failed: %s (%s)\n", __FILE__, __LINE__, #cond, \
                   msg);                                                                           \
      std::abort();                                                                                \
    }                                                                                              \
  } while (0)
