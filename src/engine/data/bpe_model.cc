// BPE model: vocabulary, merges and the merge loop (see bpe_model.h).
#include "engine/data/bpe_model.h"

#include <fmt/format.h>

#include <queue>

#include "engine/data/utf8.h"

namespace air::engine {
namespace {

// A queued merge candidate: the pair starting at symbol `pos`. Lower rank first, then leftmost.
struct Candidate {
  int32_t rank;
  int32_t pos;
  int32_t merged_id;
  bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  uint32_t begin;  // code points of the word covered: [begin, end)
  uint32_t end;
  bool alive;
};

}  // namespace

Result<BpeModel> BpeModel::FromParts(std::unordered_map<std::string, int32_t> vocab,
                                     const std::vector<std::pair<std::string, std::string>>& merges,
                                     bool ignore_merges, std::optional<std::string> unk_token) {
  BpeModel model;
  model.vocab_ = std::move(vocab);
  int32_t limit = 0;
  // Ids index arrays below; the largest real vocabularies have about 260,000 tokens.
  constexpr int32_t kMaxId = (1 << 24) - 1;
  for (const auto& [token, id] : model.vocab_) {
    if (id < 0) return InvalidArgument(fmt::format("vocab: token \"{}\" has negative id", token));
    if (id > kMaxId) {
      return InvalidArgument(fmt::format(
          "vocab: token \"{}\" has id {}; ids above {} are not supported", token, id, kMaxId));
    }
    limit = std::max(limit, id + 1);
  }
  model.id_to_token_.assign(limit, "");
  model.has_id_.assign(limit, false);
  for (const auto& [token, id] : model.vocab_) {
    model.id_to_token_[id] = token;
    model.has_id_[id] = true;
  }
  for (size_t i = 0; i < merges.size(); ++i) {
    AIR_RETURN_IF_ERROR(
        model.AddMerge(merges[i].first, merges[i].second, fmt::format("merges[{}]", i)));
  }
  model.ignore_merges_ = ignore_merges;
  if (unk_token.has_value()) {
    auto id = model.TokenToId(*unk_token);
    if (!id) {
      return InvalidArgument(fmt::format("unk_token: \"{}\" is not in the vocabulary", *unk_token));
    }
    model.unk_id_ = id;
  }
  return model;
}

Status BpeModel::AddMerge(const std::string& left, const std::string& right,
                          const std::string& where) {
  auto a = vocab_.find(left);
  auto b = vocab_.find(right);
  auto merged = vocab_.find(left + right);
  if (a == vocab_.end() || b == vocab_.end() || merged == vocab_.end()) {
    const std::string& missing =
        a == vocab_.end() ? left : (b == vocab_.end() ? right : left + right);
    return InvalidArgument(fmt::format("{}: \"{} {}\" uses \"{}\", which is not in the vocabulary",
                                       where, left, right, missing));
  }
  // The first occurrence of a pair wins, as in the reference library.
  merges_.try_emplace(PairKey(a->second, b->second),
                      MergeRule{static_cast<int32_t>(merges_.size()), merged->second});
  return Status::Ok();
}

Result<BpeModel> BpeModel::FromJson(const nlohmann::json& json, const std::string& where) {
  if (!json.is_object()) return InvalidArgument(where + ": expected an object");
  std::string type = json.value("type", "BPE");
  if (type != "BPE") {
    return InvalidArgument(fmt::format(
        "{}.type: \"{}\" is not supported; only byte-level BPE models are", where, type));
  }
  if (json.value("byte_fallback", false)) {
    return InvalidArgument(where +
                           ".byte_fallback: true is not supported (that is a "
                           "SentencePiece-style BPE; byte-level BPE needs no fallback)");
  }
  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (json.contains(affix) && !json[affix].is_null() && json[affix] != "") {
      return InvalidArgument(fmt::format("{}.{}: only null is supported", where, affix));
    }
  }
  if (!json.contains("vocab") || !json["vocab"].is_object()) {
    return InvalidArgument(where + ".vocab: expected an object {token: id}");
  }
  std::unordered_map<std::string, int32_t> vocab;
  vocab.reserve(json["vocab"].size());
  for (const auto& [token, id] : json["vocab"].items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      return InvalidArgument(
          fmt::format("{}.vocab[\"{}\"]: expected a non-negative integer id", where, token));
    }
    vocab.emplace(token, id.get<int32_t>());
  }
  std::vector<std::pair<std::string, std::string>> merges;
  const auto& merges_json = json.value("merges", nlohmann::json::array());
  if (!merges_json.is_array()) return InvalidArgument(where + ".merges: expected a list");
  merges.reserve(merges_json.size());
  for (size_t i = 0; i < merges_json.size(); ++i) {
    const auto& m = merges_json[i];
    if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      size_t space = s.find(' ', 1);
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        return InvalidArgument(fmt::format(
            "{}.merges[{}]: \"{}\" should be two tokens separated by one space", where, i, s));
      }
      merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      return InvalidArgument(fmt::format(
          "{}.merges[{}]: expected \"a b\" or [\"a\", \"b\"], got {}", where, i, m.dump()));
    }
  }
  std::optional<std::string> unk;
  if (json.contains("unk_token") && json["unk_token"].is_string()) unk = json["unk_token"];
  auto model = FromParts(std::move(vocab), merges, json.value("ignore_merges", false), unk);
  if (!model.ok()) return Status(model.status().code(), where + "." + model.status().message());
  return model;
}

std::optional<int32_t> BpeModel::TokenToId(std::string_view token) const {
  auto it = vocab_.find(std::string(token));
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::IdToToken(int32_t id) const {
  if (id < 0 || id >= id_limit() || !has_id_[id]) return nullptr;
  return &id_to_token_[id];
}

void BpeModel::MergeWord(std::string_view word, std::vector<Piece>* out) const {
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  size_t pos = 0;
  uint32_t char_index = 0;
  while (pos < word.size()) {
    size_t len = Utf8SequenceLength(word, pos);
    if (len == 0) len = 1;
    auto it = vocab_.find(std::string(word.substr(pos, len)));
    pos += len;
    ++char_index;
    int32_t id;
    if (it != vocab_.end()) {
      id = it->second;
    } else if (unk_id_.has_value()) {
      id = *unk_id_;
    } else {
      continue;  // dropped, as the reference library does without an unk token
    }
    auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, index - 1, index + 1, char_index - 1, char_index, true});
  }
  if (!symbols.empty()) symbols.back().next = -1;

  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  auto push_pair = [&](int32_t left) {
    int32_t right = symbols[left].next;
    if (right < 0) return;
    auto m = merges_.find(PairKey(symbols[left].id, symbols[right].id));
    if (m != merges_.end()) queue.push({m->second.rank, left, m->second.merged_id});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) push_pair(i);

  while (!queue.empty()) {
    Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[left.next];
    // A stale entry: the pair at this position no longer merges into the same token. (Like the
    // reference implementation, only the resulting token is compared, not the rank.)
    auto m = merges_.find(PairKey(left.id, right.id));
    if (m == merges_.end() || m->second.merged_id != top.merged_id) continue;
    left.id = top.merged_id;
    left.end = right.end;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (left.prev >= 0) push_pair(left.prev);
    push_pair(top.pos);
  }
  for (const Symbol& s : symbols) {
    if (s.alive) out->push_back({s.id, s.begin, s.end});
  }
}

void BpeModel::Tokenize(std::string_view word, std::vector<Piece>* out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    auto it = vocab_.find(std::string(word));
    if (it != vocab_.end()) {
      out->push_back({it->second, 0, static_cast<uint32_t>(CountCodePoints(word))});
      return;
    }
  }
  bool cacheable = word.size() <= kMaxCachedWordBytes;
  std::string key;
  if (cacheable) {
    key.assign(word);
    std::lock_guard<std::mutex> lock(cache_->mutex);
    auto it = cache_->words.find(key);
    if (it != cache_->words.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  size_t first = out->size();
  MergeWord(word, out);
  if (cacheable) {
    std::vector<Piece> result(out->begin() + static_cast<std::ptrdiff_t>(first), out->end());
    std::lock_guard<std::mutex> lock(cache_->mutex);
    if (cache_->words.size() >= kMaxCachedWords) cache_->words.clear();
    cache_->words.emplace(std::move(key), std::move(result));
  }
}

}  // namespace air::engine
