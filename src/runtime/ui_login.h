// `air ui`'s login for the web UI (docs/tracking.md, "The web UI"). The server (started if
// needed) issues a one-time code, and the code goes into one private file and nowhere else —
// never a command line (another user can read every process's /proc/<pid>/cmdline), never the
// terminal: AIR_HOME/tracking/ui-login-<pid>.html, mode 0600 in the 0700 tracking directory, a
// page that redirects to <server>/login#code=<code>, as Jupyter's jpserver-<pid>-open.html does.
// A browser is handed the file's file:// URL; the UI's /login page trades the code for a session
// (web/session.js). Files older than a code's lifetime are removed when `air ui` writes another.
// OpenInBrowser starts $BROWSER, else xdg-open where there is a display, on that URL.
// Thread safety: stateless functions; OpenInBrowser forks.
#pragma once

#include <cstdint>
#include <string>

#include "base/env.h"
#include "base/status.h"

namespace air::runtime {

struct UiLogin {
  std::string url;             // the server, http://host:port
  std::string login_file;      // AIR_HOME/tracking/ui-login-<pid>.html (absolute)
  std::string login_file_url;  // file://<login_file>
  int64_t expires_in_s = 0;    // how long the code in the file works (once)
};
Result<UiLogin> NewUiLogin(const std::string& air_home, Env* env);

// The login file's page for `login_url` (<server>/login#code=<code>).
Result<std::string> UiLoginPage(const std::string& login_url, int64_t expires_in_s);

// Opens `file_url` in a browser, detached: $BROWSER (a command line run by /bin/sh, the URL
// given as its argument "$1": in place of each "%s", else at the end), else xdg-open when
// $DISPLAY or $WAYLAND_DISPLAY is set.
// Returns the command it started, "" when there is no browser to start.
Result<std::string> OpenInBrowser(const std::string& file_url, Env* env);

}  // namespace air::runtime
