// `air ui [--url-only] [--no-browser]`: makes sure AIR_HOME's server runs (starting it detached)
// and writes a private login file (runtime/ui_login.h): a page that logs a browser in once,
// within 10 minutes, and leaves the session in that browser's storage for the server's origin
// alone (server/access.h). The one-time code lives only in that file, so what is printed or
// given to a browser's command line is the file's file:// URL, useless to another user. Opens it
// in a browser ($BROWSER, else xdg-open on a display) unless --no-browser, --url-only or -o json;
// --url-only prints the file:// URL alone, for scripts (`chromium "$(air ui --url-only)"`);
// -o json gives {"url", "login_file", "login_file_url", "expires_in_s", "opened_with"}.
#include <fmt/format.h>

#include <memory>

#include "cli/commands.h"
#include "runtime/ui_login.h"

namespace air::cli {

void RegisterUiCommand(CLI::App& root, CliContext& ctx) {
  auto* cmd = root.add_subcommand(
      "ui", "open the web UI: a private file that logs a browser in once (starts the air server)");
  auto url_only = std::make_shared<bool>(false);
  auto no_browser = std::make_shared<bool>(false);
  cmd->add_flag("--url-only", *url_only,
                "print the login file's file:// URL alone and open nothing (for scripts)");
  cmd->add_flag("--no-browser", *no_browser, "print the login file's URL, open no browser");
  cmd->callback([&ctx, url_only, no_browser] {
    auto air_home = AirHome(ctx);
    if (!air_home.ok()) return EmitError(ctx, air_home.status());
    auto login = runtime::NewUiLogin(*air_home, ctx.env);
    if (!login.ok()) return EmitError(ctx, login.status());
    std::string opened_with;
    if (!*url_only && !*no_browser && !ctx.json()) {
      auto opened = runtime::OpenInBrowser(login->login_file_url, ctx.env);
      if (!opened.ok()) return EmitError(ctx, opened.status());
      opened_with = *opened;
    }
    const std::string text =
        *url_only
            ? login->login_file_url
            : fmt::format(
                  "Open the web UI: {}\n{}(a private file: it logs a browser on this machine in "
                  "once, within {} minutes; run `air ui` again for another. A browser elsewhere, "
                  "through an ssh tunnel to {}, opens the address written in that file.)",
                  login->login_file_url,
                  opened_with.empty() ? "" : "(opened with " + opened_with + ")\n",
                  login->expires_in_s / 60, login->url);
    EmitData(ctx,
             {{"url", login->url + "/"},
              {"login_file", login->login_file},
              {"login_file_url", login->login_file_url},
              {"expires_in_s", login->expires_in_s},
              {"opened_with", opened_with}},
             text);
  });
}

}  // namespace air::cli
