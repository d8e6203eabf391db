// Streaming redaction over a SecretMatcher.
#include "secrets/redactor.h"

#include <algorithm>

namespace air::secrets {

Redactor::Redactor(std::shared_ptr<const SecretMatcher> matcher) : matcher_(std::move(matcher)) {}

Redactor::Redactor(const std::vector<std::string>& values)
    : Redactor(SecretMatcher::Build(values)) {}

void Redactor::AddOccurrence(uint64_t begin, uint64_t end) {
  bool marker_emitted = false;
  while (!regions_.empty() && regions_.back().end > begin) {
    begin = std::min(begin, regions_.back().begin);
    end = std::max(end, regions_.back().end);
    marker_emitted = marker_emitted || regions_.back().marker_emitted;
    regions_.pop_back();
  }
  regions_.push_back({begin, end, marker_emitted});
}

void Redactor::EmitUpTo(uint64_t limit, std::string& out) {
  uint64_t pos = pending_begin_;
  auto copy = [&](uint64_t from, uint64_t to) {
    if (to > from) out.append(pending_, from - pending_begin_, to - from);
  };
  while (!regions_.empty()) {
    Region& r = regions_.front();
    if (r.begin >= limit) break;
    // No later occurrence can start before `limit`, so r.begin is final: its marker can go out.
    if (!r.marker_emitted) {
      copy(pos, r.begin);
      out.append(kRedactedMarker);
      r.marker_emitted = true;
    }
    if (r.end <= limit) {  // nothing later can overlap it any more
      pos = std::max(pos, r.end);
      regions_.pop_front();
      continue;
    }
    pos = limit;  // the region swallows everything up to limit and may still grow
    break;
  }
  copy(pos, limit);
  pending_.erase(0, limit - pending_begin_);
  pending_begin_ = limit;
}

std::string Redactor::Feed(std::string_view chunk) {
  std::string out;
  if (matcher_->empty()) {
    out.assign(chunk);
    return out;
  }
  pending_.append(chunk);
  const SecretMatcher& m = *matcher_;
  SecretMatcher::State state = state_;
  uint64_t consumed = consumed_;
  for (char c : chunk) {
    state = m.Next(state, static_cast<uint8_t>(c));
    ++consumed;
    if (uint32_t len = m.MatchLength(state); len != 0) AddOccurrence(consumed - len, consumed);
  }
  state_ = state;
  consumed_ = consumed;
  out.reserve(chunk.size());
  EmitUpTo(consumed_ - m.Pending(state_), out);
  return out;
}

std::string Redactor::Flush() {
  std::string out;
  EmitUpTo(consumed_, out);
  state_ = SecretMatcher::kRoot;
  return out;
}

std::string RedactAll(const SecretMatcher& matcher, std::string_view text) {
  // A non-owning shared_ptr: the matcher outlives this call.
  Redactor redactor(std::shared_ptr<const SecretMatcher>(&matcher, [](const SecretMatcher*) {}));
  std::string out = redactor.Feed(text);
  out += redactor.Flush();
  return out;
}

std::string RedactAll(const std::vector<std::string>& values, std::string_view text) {
  return RedactAll(*SecretMatcher::Build(values), text);
}

}  // namespace air::secrets
