// `air ui [--url-only]`: makes sure AIR_HOME's server runs (starting it detached) and prints a
// login link for the web UI: it works once, within 10 minutes, and leaves the browser with an
// HttpOnly, SameSite=Strict session cookie (Jupyter-style; server/access.h). --url-only prints
// the link alone, for scripts; -o json gives {"url", "login_url", "expires_in_s"}.
#include <fmt/format.h>

#include <memory>

#include "cli/commands.h"
#include "runtime/tracking_link.h"

namespace air::cli {

void RegisterUiCommand(CLI::App& root, CliContext& ctx) {
  auto* cmd =
      root.add_subcommand("ui", "print a login link for the web UI (starts the air server)");
  auto url_only = std::make_shared<bool>(false);
  cmd->add_flag("--url-only", *url_only, "print the login link alone (for scripts)");
  cmd->callback([&ctx, url_only] {
    auto air_home = AirHome(ctx);
    if (!air_home.ok()) return EmitError(ctx, air_home.status());
    auto login = runtime::NewUiLogin(*air_home, ctx.env);
    if (!login.ok()) return EmitError(ctx, login.status());
    const std::string text =
        *url_only ? login->login_url
                  : fmt::format(
                        "Open the web UI: {}\n(the link logs a browser in once, within {} "
                        "minutes; run `air ui` again for another)",
                        login->login_url, login->expires_in_s / 60);
    EmitData(ctx,
             {{"url", login->url + "/"},
              {"login_url", login->login_url},
              {"expires_in_s", login->expires_in_s}},
             text);
  });
}

}  // namespace air::cli
