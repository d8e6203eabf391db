// Parsing and evaluating MLflow's search filter and order_by over runs.
#include "tracking/run_search.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>

#include "base/strings.h"

namespace air::tracking {
namespace {

enum class Kind { kMetric, kParam, kTag, kAttribute };

struct Key {
  Kind kind = Kind::kAttribute;
  std::string name;
};

struct Clause {
  Key key;
  std::string op;  // = != > >= < <= LIKE ILIKE IN NOT IN
  std::vector<std::string> strings;
  std::optional<double> number;
};

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Status BadFilter(const std::string& filter, const std::string& why) {
  return InvalidArgument(fmt::format("Invalid filter '{}': {}", filter, why));
}

// A small tokenizer: identifiers (with dots), quoted strings, numbers, operators, parens, commas.
class Lexer {
 public:
  explicit Lexer(const std::string& text) : text_(text) {}

  void SkipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool AtEnd() {
    SkipSpace();
    return pos_ >= text_.size();
  }
  char Peek() {
    SkipSpace();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  bool Consume(char c) {
    if (Peek() != c) return false;
    ++pos_;
    return true;
  }
  // A quoted string ('...', "..." or `...`) without its quotes.
  std::optional<std::string> Quoted() {
    char q = Peek();
    if (q != '\'' && q != '"' && q != '`') return std::nullopt;
    size_t end = text_.find(q, pos_ + 1);
    if (end == std::string::npos) return std::nullopt;
    std::string out = text_.substr(pos_ + 1, end - pos_ - 1);
    pos_ = end + 1;
    return out;
  }
  std::string Word() {
    SkipSpace();
    size_t start = pos_;
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' ||
          c == '+') {
        ++pos_;
      } else {
        break;
      }
    }
    return text_.substr(start, pos_ - start);
  }
  std::string Operator() {
    SkipSpace();
    for (const char* op : {"!=", ">=", "<=", "=", ">", "<"}) {
      if (text_.compare(pos_, std::char_traits<char>::length(op), op) == 0) {
        pos_ += std::char_traits<char>::length(op);
        return op;
      }
    }
    std::string word = Lower(Word());
    if (word == "not") {
      if (Lower(Word()) == "in") return "NOT IN";
      return "";
    }
    if (word == "like") return "LIKE";
    if (word == "ilike") return "ILIKE";
    if (word == "in") return "IN";
    return "";
  }

 private:
  const std::string& text_;
  size_t pos_ = 0;
};

Result<Key> ParseKey(Lexer& lex, const std::string& filter) {
  Key key;
  std::string word;
  if (auto quoted = lex.Quoted()) {
    word = *quoted;  // a quoted attribute name
    key.name = word;
    return key;
  }
  word = lex.Word();
  if (word.empty()) return BadFilter(filter, "expected an identifier such as metrics.loss");
  std::string prefix;
  std::string rest;
  size_t dot = word.find('.');
  if (dot == std::string::npos) {
    rest = word;
  } else {
    prefix = Lower(word.substr(0, dot));
    rest = word.substr(dot + 1);
  }
  if (prefix.empty()) {
    key.kind = Kind::kAttribute;
  } else if (prefix == "metric" || prefix == "metrics") {
    key.kind = Kind::kMetric;
  } else if (prefix == "param" || prefix == "params" || prefix == "parameter" ||
             prefix == "parameters") {
    key.kind = Kind::kParam;
  } else if (prefix == "tag" || prefix == "tags") {
    key.kind = Kind::kTag;
  } else if (prefix == "attribute" || prefix == "attributes" || prefix == "attr" ||
             prefix == "run") {
    key.kind = Kind::kAttribute;
  } else {
    return BadFilter(filter, fmt::format("invalid entity type '{}': use metrics, params, tags or "
                                         "attributes",
                                         prefix));
  }
  if (rest.empty()) {
    auto quoted = lex.Quoted();
    if (!quoted) return BadFilter(filter, "expected a key after '" + word + "'");
    rest = *quoted;
  }
  key.name = rest;
  if (key.kind == Kind::kAttribute) {
    static const std::vector<std::string> kAttributes = {
        "run_id",  "run_name",     "status",          "start_time", "end_time",
        "user_id", "artifact_uri", "lifecycle_stage", "created",    "Created"};
    if (std::find(kAttributes.begin(), kAttributes.end(), key.name) == kAttributes.end()) {
      return BadFilter(filter, fmt::format("invalid attribute key '{}'{}", key.name,
                                           DidYouMeanSuffix(key.name, kAttributes)));
    }
    if (key.name == "created" || key.name == "Created") key.name = "start_time";
  }
  return key;
}

Result<std::vector<Clause>> ParseFilter(const std::string& filter) {
  std::vector<Clause> clauses;
  if (Trim(filter).empty()) return clauses;
  Lexer lex(filter);
  while (true) {
    Clause clause;
    AIR_ASSIGN_OR_RETURN(clause.key, ParseKey(lex, filter));
    clause.op = lex.Operator();
    if (clause.op.empty()) return BadFilter(filter, "expected a comparator (=, !=, >, LIKE, ...)");
    if (clause.op == "IN" || clause.op == "NOT IN") {
      if (!lex.Consume('(')) return BadFilter(filter, "expected '(' after IN");
      do {
        auto value = lex.Quoted();
        if (!value) return BadFilter(filter, "IN takes a list of quoted strings");
        clause.strings.push_back(*value);
      } while (lex.Consume(','));
      if (!lex.Consume(')')) return BadFilter(filter, "expected ')' to close the IN list");
    } else if (auto quoted = lex.Quoted()) {
      clause.strings.push_back(*quoted);
    } else {
      std::string word = lex.Word();
      char* end = nullptr;
      double value = std::strtod(word.c_str(), &end);
      if (word.empty() || *end != '\0') {
        return BadFilter(filter,
                         fmt::format("expected a number or a quoted string, got '{}'", word));
      }
      clause.number = value;
    }
    bool numeric_key = clause.key.kind == Kind::kMetric ||
                       (clause.key.kind == Kind::kAttribute &&
                        (clause.key.name == "start_time" || clause.key.name == "end_time"));
    if (numeric_key && !clause.number) {
      return BadFilter(filter, fmt::format("'{}' compares with a number", clause.key.name));
    }
    if (!numeric_key && clause.number) {
      return BadFilter(filter, fmt::format("'{}' compares with a quoted string", clause.key.name));
    }
    clauses.push_back(std::move(clause));
    if (lex.AtEnd()) break;
    if (Lower(lex.Word()) != "and") return BadFilter(filter, "clauses are joined by AND");
  }
  return clauses;
}

bool Like(const std::string& text, const std::string& pattern, bool fold) {
  // SQL LIKE: % any run, _ one character.
  std::string t = fold ? Lower(text) : text;
  std::string p = fold ? Lower(pattern) : pattern;
  size_t ti = 0, pi = 0, star = std::string::npos, mark = 0;
  while (ti < t.size()) {
    if (pi < p.size() && (p[pi] == '_' || p[pi] == t[ti])) {
      ++ti;
      ++pi;
    } else if (pi < p.size() && p[pi] == '%') {
      star = pi++;
      mark = ti;
    } else if (star != std::string::npos) {
      pi = star + 1;
      ti = ++mark;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '%') ++pi;
  return pi == p.size();
}

std::optional<std::string> FindValue(const std::vector<KeyValue>& entries, const std::string& key) {
  for (const KeyValue& kv : entries) {
    if (kv.key == key) return kv.value;
  }
  return std::nullopt;
}

std::optional<double> MetricValue(const Run& run, const std::string& key) {
  for (const Metric& m : run.metrics) {
    if (m.key == key) return m.value;
  }
  return std::nullopt;
}

std::optional<std::string> StringAttribute(const Run& run, const std::string& name) {
  if (name == "run_id") return run.info.run_id;
  if (name == "run_name") return run.info.run_name;
  if (name == "status") return run.info.status;
  if (name == "user_id") return run.info.user_id;
  if (name == "artifact_uri") return run.info.artifact_uri;
  if (name == "lifecycle_stage") return run.info.lifecycle_stage;
  return std::nullopt;
}

std::optional<double> NumberAttribute(const Run& run, const std::string& name) {
  if (name == "start_time") return static_cast<double>(run.info.start_time);
  if (name == "end_time" && run.info.end_time) return static_cast<double>(*run.info.end_time);
  return std::nullopt;
}

bool CompareNumber(double a, const std::string& op, double b) {
  if (op == "=") return a == b;
  if (op == "!=") return a != b;
  if (op == ">") return a > b;
  if (op == ">=") return a >= b;
  if (op == "<") return a < b;
  if (op == "<=") return a <= b;
  return false;
}

bool CompareString(const std::string& a, const Clause& c) {
  if (c.op == "=") return a == c.strings[0];
  if (c.op == "!=") return a != c.strings[0];
  if (c.op == "LIKE") return Like(a, c.strings[0], false);
  if (c.op == "ILIKE") return Like(a, c.strings[0], true);
  bool in = std::find(c.strings.begin(), c.strings.end(), a) != c.strings.end();
  if (c.op == "IN") return in;
  if (c.op == "NOT IN") return !in;
  return false;
}

bool Matches(const Run& run, const Clause& c) {
  std::optional<double> number;
  std::optional<std::string> text;
  switch (c.key.kind) {
    case Kind::kMetric:
      number = MetricValue(run, c.key.name);
      break;
    case Kind::kParam:
      text = FindValue(run.params, c.key.name);
      break;
    case Kind::kTag:
      text = FindValue(run.tags, c.key.name);
      break;
    case Kind::kAttribute:
      number = NumberAttribute(run, c.key.name);
      text = StringAttribute(run, c.key.name);
      break;
  }
  if (c.number) return number && CompareNumber(*number, c.op, *c.number);
  return text && CompareString(*text, c);
}

struct OrderKey {
  Key key;
  bool ascending = true;
};

Result<OrderKey> ParseOrderBy(const std::string& text) {
  std::string body(Trim(text));
  OrderKey order;
  std::string lower = Lower(body);
  if (EndsWith(lower, " desc")) {
    order.ascending = false;
    body = std::string(Trim(body.substr(0, body.size() - 5)));
  } else if (EndsWith(lower, " asc")) {
    body = std::string(Trim(body.substr(0, body.size() - 4)));
  }
  Lexer lex(body);
  AIR_ASSIGN_OR_RETURN(order.key, ParseKey(lex, body));
  if (!lex.AtEnd()) return InvalidArgument(fmt::format("Invalid order_by clause '{}'", text));
  return order;
}

// -1, 0, 1; a run without the value sorts last either way.
int CompareRuns(const Run& a, const Run& b, const OrderKey& order) {
  std::optional<double> na, nb;
  std::optional<std::string> sa, sb;
  switch (order.key.kind) {
    case Kind::kMetric:
      na = MetricValue(a, order.key.name);
      nb = MetricValue(b, order.key.name);
      break;
    case Kind::kParam:
      sa = FindValue(a.params, order.key.name);
      sb = FindValue(b.params, order.key.name);
      break;
    case Kind::kTag:
      sa = FindValue(a.tags, order.key.name);
      sb = FindValue(b.tags, order.key.name);
      break;
    case Kind::kAttribute:
      na = NumberAttribute(a, order.key.name);
      nb = NumberAttribute(b, order.key.name);
      sa = StringAttribute(a, order.key.name);
      sb = StringAttribute(b, order.key.name);
      break;
  }
  bool has_a = na || sa, has_b = nb || sb;
  if (!has_a || !has_b) return has_a == has_b ? 0 : (has_a ? -1 : 1);
  int cmp = 0;
  if (na && nb) {
    cmp = *na < *nb ? -1 : *na > *nb ? 1 : 0;
  } else if (sa && sb) {
    cmp = sa->compare(*sb) < 0 ? -1 : sa->compare(*sb) > 0 ? 1 : 0;
  }
  return order.ascending ? cmp : -cmp;
}

}  // namespace

Result<SearchPage> SearchRuns(std::vector<Run> runs, const SearchRequest& request) {
  AIR_ASSIGN_OR_RETURN(std::vector<Clause> clauses, ParseFilter(request.filter));
  std::vector<OrderKey> order;
  for (const std::string& text : request.order_by) {
    AIR_ASSIGN_OR_RETURN(OrderKey key, ParseOrderBy(text));
    order.push_back(std::move(key));
  }
  if (request.max_results <= 0 || request.max_results > 50000) {
    return InvalidArgument(fmt::format(
        "Invalid value {} for parameter 'max_results' supplied. It must be at most 50000.",
        request.max_results));
  }
  size_t offset = 0;
  if (!request.page_token.empty()) {
    char* end = nullptr;
    unsigned long long value = std::strtoull(request.page_token.c_str(), &end, 10);
    if (*end != '\0') {
      return InvalidArgument(fmt::format("Invalid page token '{}'", request.page_token));
    }
    offset = static_cast<size_t>(value);
  }
  std::vector<Run> kept;
  for (Run& run : runs) {
    bool ok = true;
    for (const Clause& c : clauses) ok = ok && Matches(run, c);
    if (ok) kept.push_back(std::move(run));
  }
  // The default order (start_time DESC, then run id) is the listing's order; stable sort keeps
  // it as the final tie-break.
  std::stable_sort(kept.begin(), kept.end(), [&](const Run& a, const Run& b) {
    for (const OrderKey& key : order) {
      int cmp = CompareRuns(a, b, key);
      if (cmp != 0) return cmp < 0;
    }
    return false;
  });
  SearchPage page;
  size_t end = std::min(kept.size(), offset + static_cast<size_t>(request.max_results));
  for (size_t i = offset; i < end; ++i) page.runs.push_back(std::move(kept[i]));
  if (end < kept.size()) page.next_page_token = std::to_string(end);
  return page;
}

}  // namespace air::tracking
