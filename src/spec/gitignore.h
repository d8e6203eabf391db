// GitignoreRules: decides which paths of a code snapshot .gitignore files exclude, following
// git's rules that matter in practice: a file's patterns apply below its own directory; later
// and deeper patterns win; `!pattern` re-includes; a trailing `/` matches directories only; a
// pattern with a `/` at its start or middle is anchored to its .gitignore's directory, one
// without matches a name at any depth; `*`, `?`, `[a-z]`/`[!a-z]`, `\` escapes, and `**`
// (leading `**/`, trailing `/**`, inner `/**/`). As in git, a file inside an excluded
// directory cannot be re-included (the scanner never descends into one).
// Thread safety: immutable after AddFile calls; const methods may be called concurrently.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace air::spec {

class GitignoreRules {
 public:
  // Adds the patterns of the .gitignore in directory `dir` (relative to the snapshot root,
  // "" for the root itself, no trailing '/'). Call parents before children.
  void AddFile(const std::string& dir, std::string_view content);

  // Whether `path` (relative to the root, '/'-separated) is excluded; `is_dir` tells whether it
  // names a directory. Only the path's own name is tested, not its parents.
  bool IsIgnored(std::string_view path, bool is_dir) const;

  size_t size() const { return rules_.size(); }

 private:
  struct Rule {
    std::string base;     // directory of the .gitignore, "" or "a/b"
    std::string pattern;  // without '!', leading '/' and trailing '/'
    bool negated = false;
    bool dir_only = false;
    bool anchored = false;  // match against the path below base, else against the name
  };
  std::vector<Rule> rules_;
};

// Glob matching with git's wildmatch semantics ('*' and '?' do not cross '/', '**' does).
bool GitWildmatch(std::string_view pattern, std::string_view path);

}  // namespace air::spec
