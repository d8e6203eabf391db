// Output helpers shared by all subcommands.
#include "cli/context.h"

#include <pwd.h>
#include <unistd.h>

#include <ctime>

#include "base/private_dir.h"
#include "base/process_limits.h"
#include "base/time_format.h"

namespace air::cli {
namespace {

std::string IsoTimestamp(Env* env) { return FormatUtcTimestamp(env->NowMicros(), 3); }

}  // namespace

namespace {

std::string ResolveAirHome(CliContext& ctx) {
  if (auto v = ctx.env->GetEnv("AIR_HOME"); v && !v->empty()) return *v;
  auto home = ctx.env->GetEnv("HOME");
  if (home && !home->empty()) return *home + "/.air";
  // No $HOME (cron, some containers): the account's home directory, never a shared /tmp.
  struct passwd pw;
  struct passwd* found = nullptr;
  char buf[4096];
  if (::getpwuid_r(::getuid(), &pw, buf, sizeof(buf), &found) == 0 && found != nullptr &&
      found->pw_dir != nullptr && found->pw_dir[0] != '\0') {
    return std::string(found->pw_dir) + "/.air";
  }
  return ".air";
}

}  // namespace

Result<std::string> AirHome(CliContext& ctx) {
  std::string home = ResolveAirHome(ctx);
  // Everything air writes under AIR_HOME is private to the user (0700 directories, 0600
  // files), also when AIR_HOME already existed with a looser mode (base/process_limits.h); an
  // AIR_HOME another user could have prepared is refused (base/private_dir.h). A missing one
  // is created, checked the same way, by the command that writes to it first.
  UsePrivateUmask();
  auto existing = ctx.env->GetPathInfo(home, /*follow_symlinks=*/false);
  if (existing.ok()) AIR_RETURN_IF_ERROR(MakePrivateDir(home, ctx.env, "AIR_HOME"));
  return home;
}

int ExitCodeFor(const Status& status) {
  if (status.ok()) return kExitOk;
  if (status.code() == ErrorCode::kInvalidArgument) return kExitInvalid;
  return kExitFailure;
}

std::string JsonLine(const nlohmann::ordered_json& value) {
  return value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

nlohmann::ordered_json Envelope(CliContext& ctx, const nlohmann::json& data) {
  nlohmann::ordered_json env;
  env["v"] = 1;
  env["ts"] = IsoTimestamp(ctx.env);
  env["data"] = data;
  return env;
}

void EmitData(CliContext& ctx, const nlohmann::json& data, const std::string& text) {
  ctx.exit_code = kExitOk;
  if (ctx.json()) {
    *ctx.out << JsonLine(Envelope(ctx, data)) << "\n";
    return;
  }
  if (text.empty()) return;
  *ctx.out << text;
  if (text.back() != '\n') *ctx.out << "\n";
}

void EmitError(CliContext& ctx, const Status& status, const nlohmann::json& extra) {
  ctx.exit_code = ExitCodeFor(status);
  if (ctx.json()) {
    nlohmann::json error = extra.is_object() ? extra : nlohmann::json::object();
    error["code"] = ErrorCodeName(status.code());
    error["message"] = status.message();
    nlohmann::ordered_json env;
    env["v"] = 1;
    env["ts"] = IsoTimestamp(ctx.env);
    env["error"] = error;
    *ctx.out << JsonLine(env) << "\n";
    return;
  }
  *ctx.err << "error: " << status.message() << "\n";
}

}  // namespace air::cli
