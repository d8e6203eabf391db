// Jinja lexer: segments and tag tokens (see jinja_lexer.h).
#include "engine/data/jinja_lexer.h"

#include <fmt/format.h>

#include <cctype>

namespace air::engine::jinja {
namespace {

// The line number of a position, for positions asked in increasing order (the lexer moves
// forward), so the whole template is scanned once rather than once per tag.
class LineCounter {
 public:
  explicit LineCounter(std::string_view s) : s_(s) {}
  int At(size_t pos) {
    for (; scanned_ < pos && scanned_ < s_.size(); ++scanned_) line_ += s_[scanned_] == '\n';
    return line_;
  }

 private:
  std::string_view s_;
  size_t scanned_ = 0;
  int line_ = 1;
};

// The end of a tag opened at `start` (index of its closing "}}", "%}" or "#}"), skipping string
// literals; npos if unclosed.
size_t FindTagEnd(std::string_view src, size_t start, char kind) {
  const std::string close = std::string(1, kind == '{' ? '}' : kind) + "}";
  if (kind == '#') return src.find("#}", start);
  char quote = 0;
  for (size_t i = start; i + 1 < src.size(); ++i) {
    char c = src[i];
    if (quote) {
      if (c == '\\') {
        ++i;
      } else if (c == quote) {
        quote = 0;
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (src.compare(i, 2, close) == 0) {
      return i;
    }
  }
  return std::string_view::npos;
}

bool IsSpaceOrTab(char c) { return c == ' ' || c == '\t'; }
bool IsWhite(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

}  // namespace

Result<std::vector<Segment>> Lex(std::string_view src) {
  std::vector<Segment> out;
  LineCounter lines(src);
  size_t pos = 0;
  bool strip_next = false;    // previous tag ended with "-"
  bool trim_newline = false;  // previous block/comment tag: drop one newline (trim_blocks)
  bool line_starting = true;  // lstrip_blocks applies to a tag at the start of the template
  while (pos <= src.size()) {
    size_t open = pos;
    while (true) {
      open = src.find('{', open);
      if (open == std::string_view::npos || open + 1 >= src.size()) {
        open = std::string_view::npos;
        break;
      }
      char k = src[open + 1];
      if (k == '{' || k == '%' || k == '#') break;
      ++open;
    }
    std::string text(src.substr(pos, (open == std::string_view::npos ? src.size() : open) - pos));
    if (strip_next) {
      size_t i = 0;
      while (i < text.size() && IsWhite(text[i])) ++i;
      text.erase(0, i);
    } else if (trim_newline) {
      if (text.starts_with("\r\n")) {
        text.erase(0, 2);
      } else if (text.starts_with("\n")) {
        text.erase(0, 1);
      }
    }
    if (open == std::string_view::npos) {
      if (!text.empty()) out.push_back({Segment::Kind::kText, text, lines.At(pos)});
      break;
    }
    char kind = src[open + 1];
    size_t inner = open + 2;
    char modifier = inner < src.size() ? src[inner] : 0;
    if (modifier == '-') {
      while (!text.empty() && IsWhite(text.back())) text.pop_back();
    } else if (kind != '{' && modifier != '+') {  // lstrip_blocks
      size_t line_start = text.rfind('\n');
      size_t from = line_start == std::string::npos ? 0 : line_start + 1;
      if (line_start != std::string::npos || line_starting) {
        bool blank = true;
        for (size_t i = from; i < text.size(); ++i) blank &= IsSpaceOrTab(text[i]);
        if (blank) text.erase(from);
      }
    }
    if (modifier == '-' || modifier == '+') ++inner;
    if (!text.empty()) out.push_back({Segment::Kind::kText, text, lines.At(pos)});
    size_t close = FindTagEnd(src, inner, kind);
    if (close == std::string_view::npos) {
      return InvalidArgument(fmt::format("line {}: unclosed tag", lines.At(open)));
    }
    size_t body_end = close;
    char end_modifier = close > inner ? src[close - 1] : 0;
    if (end_modifier == '-' || end_modifier == '+') --body_end;
    std::string body(src.substr(inner, body_end - inner));
    int line = lines.At(open);
    if (kind == '{') out.push_back({Segment::Kind::kOutput, body, line});
    if (kind == '%') out.push_back({Segment::Kind::kStatement, body, line});
    pos = close + 2;
    strip_next = end_modifier == '-';
    trim_newline = kind != '{' && end_modifier != '+' && end_modifier != '-';
    line_starting = trim_newline && pos < src.size() && src[pos] == '\n';
    if (pos >= src.size()) break;
  }
  return out;
}

Result<std::vector<Token>> Tokenize(const std::string& s, int line) {
  std::vector<Token> tokens;
  size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (IsWhite(c)) {
      ++i;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      tokens.push_back({Token::Kind::kName, s.substr(i, j - i), {}});
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      bool is_float =
          j + 1 < s.size() && s[j] == '.' && std::isdigit(static_cast<unsigned char>(s[j + 1]));
      if (is_float) {
        ++j;
        while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      }
      std::string digits;
      for (size_t k = i; k < j; ++k) {
        if (s[k] != '_') digits += s[k];
      }
      tokens.push_back(
          {is_float ? Token::Kind::kFloat : Token::Kind::kInt, digits,
           is_float ? Value::Float(std::stod(digits)) : Value::Int(std::stoll(digits))});
      i = j;
    } else if (c == '\'' || c == '"') {
      std::string value;
      size_t j = i + 1;
      for (; j < s.size() && s[j] != c; ++j) {
        if (s[j] != '\\' || j + 1 >= s.size()) {
          value += s[j];
          continue;
        }
        char e = s[++j];
        switch (e) {
          case 'n':
            value += '\n';
            break;
          case 't':
            value += '\t';
            break;
          case 'r':
            value += '\r';
            break;
          case '0':
            value += '\0';
            break;
          case '\\':
            value += '\\';
            break;
          case '\'':
            value += '\'';
            break;
          case '"':
            value += '"';
            break;
          default:
            value += '\\';
            value += e;
        }
      }
      if (j >= s.size()) return InvalidArgument(fmt::format("line {}: unterminated string", line));
      tokens.push_back({Token::Kind::kString, "", Value::Str(value)});
      i = j + 1;
    } else {
      static const char* kOps[] = {"//", "**", "==", "!=", "<=", ">=", "(", ")", "[",
                                   "]",  "{",  "}",  ",",  ":",  ".",  "|", "+", "-",
                                   "*",  "/",  "%",  "~",  "<",  ">",  "="};
      bool found = false;
      for (const char* op : kOps) {
        size_t n = std::char_traits<char>::length(op);
        if (s.compare(i, n, op) == 0) {
          tokens.push_back({Token::Kind::kOp, op, {}});
          i += n;
          found = true;
          break;
        }
      }
      if (!found)
        return InvalidArgument(fmt::format("line {}: unexpected character '{}'", line, c));
    }
  }
  tokens.push_back({Token::Kind::kEnd, "", {}});
  return tokens;
}

}  // namespace air::engine::jinja
