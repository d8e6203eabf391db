// MakePrivateDir: the one way air creates or reuses a directory that holds its own state
// (AIR_HOME and what air keeps in it, a cluster's shared_root, the tracking server's and the
// secret store's folders; docs/security.md, "Directories").
//
// Another local user must not be able to prepare such a directory in advance (a planted
// server.token, a symlink where a node log goes), so a directory is used only when it is
//   - a directory (through a symlink only when the link itself is the user's or root's),
//   - owned by this process's effective user,
//   - not writable by group or others (it is then tightened to 0700 when it was readable).
// A missing directory is created 0700 (with its missing parents) and checked the same way
// afterwards, so one created by someone else in between is refused too. Every refusal names
// the path, its owner and mode, and what would be valid. All file system access goes through
// the Env (GetPathInfo, CreateDirs, ChangeMode), so tests can put a fault at that seam.
// Thread safety: as the Env; two processes making the same directory both succeed.
#pragma once

#include <string>

#include "base/env.h"
#include "base/status.h"

namespace air {

// Creates `dir` private to this user, or checks and tightens the existing one (above).
// `what` names the directory in errors ("AIR_HOME", "shared_root"; "" for the path alone).
Status MakePrivateDir(const std::string& dir, Env* env, const std::string& what = "");

}  // namespace air
