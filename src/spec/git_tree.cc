// git subprocesses for code snapshots of a revision (see git_tree.h).
#include "spec/git_tree.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>

#include "base/strings.h"

extern char** environ;

namespace air::spec {
namespace {

// Reads both pipes to the end without blocking on either.
void DrainPipes(int out_fd, int err_fd, std::string* out, std::string* err) {
  pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
  std::string* sinks[2] = {out, err};
  int open_count = 2;
  char buf[1 << 16];
  while (open_count > 0) {
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t n = ::read(fds[i].fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        fds[i].fd = -1;
        --open_count;
        continue;
      }
      sinks[i]->append(buf, static_cast<size_t>(n));
    }
  }
}

std::string FirstLine(const std::string& text) {
  std::string_view t = Trim(text);
  return std::string(t.substr(0, t.find('\n')));
}

Result<std::string> Git(const std::string& root, std::vector<std::string> args) {
  std::vector<std::string> argv = {"git", "-C", root};
  argv.insert(argv.end(), args.begin(), args.end());
  std::string out, err;
  AIR_ASSIGN_OR_RETURN(int status, RunCapture(argv, &out, &err));
  if (status != 0) return FailedPrecondition(FirstLine(err.empty() ? out : err));
  return out;
}

}  // namespace

Result<int> RunCapture(const std::vector<std::string>& argv, std::string* out, std::string* err) {
  int out_pipe[2], err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return ErrnoStatus("pipe", errno);
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
    int e = errno;
    ::close(out_pipe[0]);
    ::close(out_pipe[1]);
    return ErrnoStatus("pipe", e);
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  if (rc != 0) {
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    return ErrnoStatus(fmt::format("cannot run {}", argv[0]), rc);
  }
  DrainPipes(out_pipe[0], err_pipe[0], out, err);
  ::close(out_pipe[0]);
  ::close(err_pipe[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return ErrnoStatus("waitpid", errno);
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

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
