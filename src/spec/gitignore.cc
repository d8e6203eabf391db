// .gitignore pattern parsing and matching (see gitignore.h).
#include "spec/gitignore.h"

#include "base/strings.h"

namespace air::spec {
namespace {

// Matches a bracket expression starting at pattern[0] == '['. On success sets *consumed to the
// length of the expression and *matched to whether `c` is in it; returns false when the
// bracket is not closed (then '[' is a literal).
bool MatchBracket(std::string_view pattern, char c, size_t* consumed, bool* matched) {
  size_t i = 1;
  bool negate = false;
  if (i < pattern.size() && (pattern[i] == '!' || pattern[i] == '^')) {
    negate = true;
    ++i;
  }
  bool found = false;
  bool first = true;
  while (i < pattern.size() && (pattern[i] != ']' || first)) {
    first = false;
    char lo = pattern[i];
    if (lo == '\\' && i + 1 < pattern.size()) lo = pattern[++i];
    char hi = lo;
    if (i + 2 < pattern.size() && pattern[i + 1] == '-' && pattern[i + 2] != ']') {
      hi = pattern[i + 2];
      if (hi == '\\' && i + 3 < pattern.size()) {
        hi = pattern[i + 3];
        ++i;
      }
      i += 2;
    }
    if (c >= lo && c <= hi) found = true;
    ++i;
  }
  if (i >= pattern.size()) return false;
  *consumed = i + 1;
  *matched = (found != negate) && c != '/';
  return true;
}

// The result of matching, as in git's wildmatch: besides yes and no, a failure that no retry
// of an enclosing '*' can fix (the path ran out: kAbortAll), or that only an enclosing "**" can
// fix (a '*' reached a '/': kAbortToDoubleStar). Propagating these keeps patterns with many
// stars, such as "*a*a*a*a*a*a*b", from backtracking exponentially over long names.
enum class Match { kYes, kNo, kAbortAll, kAbortToDoubleStar };

// `segment_start`: p begins a path segment (the pattern's start or just after a '/'), which
// is the only place where "**" means "any number of directories".
Match Wildmatch(std::string_view p, std::string_view s, bool segment_start) {
  while (!p.empty()) {
    char pc = p[0];
    if (pc == '*') {
      size_t stars = p.find_first_not_of('*');
      if (stars == std::string_view::npos) stars = p.size();
      std::string_view rest = p.substr(stars);
      if (stars >= 2 && segment_start && rest.empty()) return Match::kYes;  // trailing "**"
      if (stars >= 2 && segment_start && rest[0] == '/') {
        // "**/rest": zero or more directories, then rest.
        std::string_view after = rest.substr(1);
        for (size_t k = 0; k <= s.size(); ++k) {
          if (k > 0 && s[k - 1] != '/') continue;
          Match m = Wildmatch(after, s.substr(k), true);
          if (m == Match::kYes || m == Match::kAbortAll) return m;
        }
        return Match::kAbortAll;
      }
      // One '*' (or "**" inside a segment): anything within the segment.
      for (size_t k = 0; k <= s.size(); ++k) {
        Match m = Wildmatch(rest, s.substr(k), false);
        if (m != Match::kNo) return m;
        if (k < s.size() && s[k] == '/') return Match::kAbortToDoubleStar;
      }
      return Match::kAbortAll;
    }
    if (s.empty()) return Match::kAbortAll;
    if (pc == '?') {
      if (s[0] == '/') return Match::kNo;
      p.remove_prefix(1);
      s.remove_prefix(1);
      segment_start = false;
      continue;
    }
    if (pc == '[') {
      size_t consumed = 0;
      bool matched = false;
      if (MatchBracket(p, s[0], &consumed, &matched)) {
        if (!matched) return Match::kNo;
        p.remove_prefix(consumed);
        s.remove_prefix(1);
        segment_start = false;
        continue;
      }
    }
    if (pc == '\\' && p.size() >= 2) {
      p.remove_prefix(1);
      pc = p[0];
    }
    if (pc != s[0]) return Match::kNo;
    p.remove_prefix(1);
    s.remove_prefix(1);
    segment_start = pc == '/';
  }
  return s.empty() ? Match::kYes : Match::kNo;
}

}  // namespace

bool GitWildmatch(std::string_view pattern, std::string_view path) {
  return Wildmatch(pattern, path, true) == Match::kYes;
}

void GitignoreRules::AddFile(const std::string& dir, std::string_view content) {
  for (std::string line : Split(content, '\n')) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    // Trailing spaces are dropped unless escaped with a backslash.
    while (!line.empty() && line.back() == ' ' &&
           !(line.size() >= 2 && line[line.size() - 2] == '\\')) {
      line.pop_back();
    }
    if (line.empty()) continue;
    Rule rule;
    rule.base = dir;
    if (line[0] == '!') {
      rule.negated = true;
      line.erase(0, 1);
    } else if (line.size() >= 2 && (line.substr(0, 2) == "\\!" || line.substr(0, 2) == "\\#")) {
      line.erase(0, 1);
    }
    if (!line.empty() && line.back() == '/') {
      rule.dir_only = true;
      while (!line.empty() && line.back() == '/') line.pop_back();
    }
    if (line.empty()) continue;
    rule.anchored = line.find('/') != std::string::npos;
    while (!line.empty() && line[0] == '/') line.erase(0, 1);
    if (line.empty()) continue;
    rule.pattern = line;
    rules_.push_back(std::move(rule));
  }
}

bool GitignoreRules::IsIgnored(std::string_view path, bool is_dir) const {
  std::string_view name =
      path.substr(path.rfind('/') == std::string_view::npos ? 0 : path.rfind('/') + 1);
  bool ignored = false;
  for (const Rule& rule : rules_) {
    if (rule.dir_only && !is_dir) continue;
    std::string_view below = path;
    if (!rule.base.empty()) {
      if (path.size() <= rule.base.size() || path.substr(0, rule.base.size()) != rule.base ||
          path[rule.base.size()] != '/') {
        continue;
      }
      below = path.substr(rule.base.size() + 1);
    }
    bool matched =
        rule.anchored ? GitWildmatch(rule.pattern, below) : GitWildmatch(rule.pattern, name);
    if (matched) ignored = !rule.negated;
  }
  return ignored;
}

}  // namespace air::spec
