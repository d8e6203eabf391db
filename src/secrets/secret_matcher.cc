// Aho–Corasick construction (trie, BFS failure links, output lengths, dense table).
#include "secrets/secret_matcher.h"

#include <algorithm>
#include <map>
#include <set>
#include <string_view>

namespace air::secrets {
namespace {

// Dense transition tables up to this many states (4096 * 256 * 4 bytes = 4 MiB).
constexpr size_t kMaxDenseStates = 4096;

}  // namespace

std::shared_ptr<const SecretMatcher> SecretMatcher::Build(const std::vector<std::string>& values,
                                                          size_t min_length) {
  std::shared_ptr<SecretMatcher> m(new SecretMatcher());
  std::set<std::string_view> distinct;
  for (const auto& v : values) {
    if (v.empty()) continue;
    if (v.size() < std::max<size_t>(min_length, 1)) {
      if (distinct.insert(v).second) ++m->short_ignored_;
      continue;
    }
    distinct.insert(v);
  }

  // 1. Trie with ordered children (construction only).
  std::vector<std::map<uint8_t, State>> children(1);
  std::vector<uint32_t> depth(1, 0);
  std::vector<uint32_t> own_len(1, 0);
  for (std::string_view v : distinct) {
    if (v.size() < std::max<size_t>(min_length, 1)) continue;
    ++m->pattern_count_;
    m->longest_ = std::max(m->longest_, v.size());
    State s = kRoot;
    for (char c : v) {
      auto b = static_cast<uint8_t>(c);
      auto it = children[s].find(b);
      if (it == children[s].end()) {
        State next = static_cast<State>(children.size());
        children[s][b] = next;
        children.emplace_back();
        depth.push_back(depth[s] + 1);
        own_len.push_back(0);
        s = next;
      } else {
        s = it->second;
      }
    }
    own_len[s] = static_cast<uint32_t>(v.size());
  }
  size_t n = children.size();

  // 2. Flatten the edges.
  m->edge_begin_.assign(n + 1, 0);
  for (size_t s = 0; s < n; ++s) {
    m->edge_begin_[s + 1] = m->edge_begin_[s] + static_cast<uint32_t>(children[s].size());
    for (auto [b, to] : children[s]) {
      m->edge_byte_.push_back(b);
      m->edge_to_.push_back(to);
    }
  }

  // 3. Root row, then failure links and output lengths in BFS order.
  m->root_next_.assign(256, kRoot);
  for (auto [b, to] : children[kRoot]) m->root_next_[b] = to;
  m->fail_.assign(n, kRoot);
  m->match_len_.assign(n, 0);
  m->pending_.assign(n, 0);
  std::vector<State> order;
  order.reserve(n);
  order.push_back(kRoot);
  for (size_t i = 0; i < order.size(); ++i) {
    State s = order[i];
    m->match_len_[s] = std::max(own_len[s], s == kRoot ? 0u : m->match_len_[m->fail_[s]]);
    uint32_t longest_minus_one = m->longest_ == 0 ? 0 : static_cast<uint32_t>(m->longest_ - 1);
    m->pending_[s] = std::min(depth[s], longest_minus_one);
    for (auto [b, child] : children[s]) {
      m->fail_[child] = s == kRoot ? kRoot : m->SparseNext(m->fail_[s], b);
      order.push_back(child);
    }
  }

  // 4. Dense table for small automata: row(s)[b] = Next(s, b).
  if (n <= kMaxDenseStates) {
    m->dense_.assign(n * 256, kRoot);
    for (State s : order) {  // BFS order: a state's failure row is filled before its own
      for (int b = 0; b < 256; ++b) {
        int64_t child = m->Child(s, static_cast<uint8_t>(b));
        State next;
        if (child >= 0) {
          next = static_cast<State>(child);
        } else if (s == kRoot) {
          next = kRoot;
        } else {
          next = m->dense_[static_cast<size_t>(m->fail_[s]) * 256 + b];
        }
        m->dense_[static_cast<size_t>(s) * 256 + b] = next;
      }
    }
  }
  return m;
}

int64_t SecretMatcher::Child(State state, uint8_t byte) const {
  auto first = edge_byte_.begin() + edge_begin_[state];
  auto last = edge_byte_.begin() + edge_begin_[state + 1];
  auto it = std::lower_bound(first, last, byte);
  if (it == last || *it != byte) return -1;
  return edge_to_[static_cast<size_t>(it - edge_byte_.begin())];
}

SecretMatcher::State SecretMatcher::SparseNext(State state, uint8_t byte) const {
  while (state != kRoot) {
    int64_t child = Child(state, byte);
    if (child >= 0) return static_cast<State>(child);
    state = fail_[state];
  }
  return root_next_[byte];
}

}  // namespace air::secrets
