// git subprocesses for code snapshots of a revision (see git_tree.h).
#include "spec/git_tree.h"

#include <fmt/format.h>

#include <charconv>

#include "base/strings.h"
#include "base/subprocess.h"

namespace air::spec {
namespace {

std::string FirstLine(const std::string& text) {
  std::string_view t = Trim(text);
  return std::string(t.substr(0, t.find('\n')));
}

Result<std::string> Git(const std::string& root, std::vector<std::string> args) {
  std::vector<std::string> argv = {"git", "-C", root};
  argv.insert(argv.end(), args.begin(), args.end());
  SubprocessOptions git;
  git.argv = std::move(argv);
  git.separate_stderr = true;
  AIR_ASSIGN_OR_RETURN(SubprocessResult ran, RunSubprocess(git));
  if (!ran.succeeded()) {
    return FailedPrecondition(FirstLine(ran.error_output.empty() ? ran.output : ran.error_output));
  }
  return std::move(ran.output);
}

}  // namespace

Result<std::string> ResolveGitRevision(const std::string& root, const GitRefSpec& git) {
  if (Result<std::string> inside = Git(root, {"rev-parse", "--git-dir"}); !inside.ok()) {
    return InvalidArgument(
        fmt::format("root_path {} is not inside a git repository, so git: cannot be used (git: {})",
                    root, inside.status().message()));
  }
  if (git.commit) {
    Result<std::string> sha =
        Git(root, {"rev-parse", "--verify", "--quiet", *git.commit + "^{commit}"});
    if (!sha.ok()) {
      return InvalidArgument(fmt::format(
          "unknown revision: no commit '{}' in the repository at {} (is it pushed or fetched "
          "here? an abbreviated hash must be unique)",
          *git.commit, root));
    }
    return std::string(Trim(*sha));
  }
  const std::string& branch = git.branch.value_or("");
  for (const std::string& ref : {"refs/heads/" + branch, "refs/remotes/" + branch}) {
    Result<std::string> sha = Git(root, {"rev-parse", "--verify", "--quiet", ref + "^{commit}"});
    if (sha.ok()) return std::string(Trim(*sha));
  }
  std::vector<std::string> branches;
  if (Result<std::string> list =
          Git(root, {"for-each-ref", "--format=%(refname:short)", "refs/heads"});
      list.ok()) {
    for (const auto& line : Split(*list, '\n')) {
      if (!Trim(line).empty()) branches.emplace_back(Trim(line));
    }
  }
  return InvalidArgument(
      fmt::format("unknown revision: no branch '{}' in the repository at {}{}; local branches: {}",
                  branch, root, DidYouMeanSuffix(branch, branches),
                  branches.empty() ? "(none)" : Join(branches, ", ")));
}

Result<std::vector<SnapshotFile>> ListGitTree(const std::string& root, const std::string& commit) {
  Result<std::string> listing = Git(root, {"ls-tree", "-r", "-l", "-z", commit});
  if (!listing.ok()) {
    return Internal(
        fmt::format("git ls-tree {} in {} failed: {}", commit, root, listing.status().message()));
  }
  std::vector<SnapshotFile> files;
  for (const std::string& record : Split(*listing, '\0')) {
    if (record.empty()) continue;
    // "<mode> <type> <object> <size>\t<path>", size right-aligned.
    size_t tab = record.find('\t');
    if (tab == std::string::npos) return Internal("unexpected git ls-tree output: " + record);
    std::vector<std::string> head;
    for (const auto& part : Split(record.substr(0, tab), ' ')) {
      if (!part.empty()) head.push_back(part);
    }
    if (head.size() != 4) return Internal("unexpected git ls-tree output: " + record);
    if (head[1] != "blob") continue;  // submodules ("commit")
    SnapshotFile file;
    file.path = record.substr(tab + 1);
    if (!IsContainedRelativePath(file.path)) {
      return InvalidArgument(fmt::format(
          "revision {} holds the path '{}', which would leave the snapshot's directory (an "
          "empty, '.' or '..' component); refusing to snapshot it",
          commit.substr(0, 12), file.path));
    }
    unsigned mode = 0;
    std::from_chars(head[0].data(), head[0].data() + head[0].size(), mode, 8);
    file.is_symlink = (mode & 0170000) == 0120000;
    file.mode = file.is_symlink ? 0777 : ((mode & 0111) ? 0755 : 0644);
    std::from_chars(head[3].data(), head[3].data() + head[3].size(), file.size);
    files.push_back(std::move(file));
  }
  return files;
}

}  // namespace air::spec
