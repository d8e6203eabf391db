// Tests for the local backend's split of the host's CPUs among the nodes it simulates: disjoint,
// contiguous, as equal as they can be, and no binding where there is nothing to split.
#include "backends/local/local_backend.h"

#include <gtest/gtest.h>

#include <vector>

namespace air::backends {
namespace {

using Parts = std::vector<std::vector<int>>;

TEST(SplitCpusAmongNodes, GivesEachNodeItsOwnContiguousShare) {
  EXPECT_EQ(SplitCpusAmongNodes({0, 1}, 2), (Parts{{0}, {1}}));
  EXPECT_EQ(SplitCpusAmongNodes({0, 1, 2, 3, 4, 5, 6, 7}, 2), (Parts{{0, 1, 2, 3}, {4, 5, 6, 7}}));
  // Uneven: no node gets more than one CPU more than another.
  EXPECT_EQ(SplitCpusAmongNodes({0, 1, 2, 3, 4}, 2), (Parts{{0, 1}, {2, 3, 4}}));
  EXPECT_EQ(SplitCpusAmongNodes({0, 1, 2, 3, 4, 5, 6}, 3), (Parts{{0, 1}, {2, 3}, {4, 5, 6}}));
  // The allowed CPUs need not start at 0 or be consecutive (taskset -c 2,5,7,9).
  EXPECT_EQ(SplitCpusAmongNodes({2, 5, 7, 9}, 2), (Parts{{2, 5}, {7, 9}}));
}

TEST(SplitCpusAmongNodes, BindsNothingWhenThereIsNothingToSplit) {
  EXPECT_TRUE(SplitCpusAmongNodes({0, 1, 2, 3}, 1).empty());  // one node keeps every CPU
  EXPECT_TRUE(SplitCpusAmongNodes({0, 1}, 3).empty());        // fewer CPUs than nodes
  EXPECT_TRUE(SplitCpusAmongNodes({}, 2).empty());            // the mask could not be read
}

}  // namespace
}  // namespace air::backends
