// Output helpers shared by all subcommands.
#include "cli/context.h"

#include <ctime>

namespace air::cli {
namespace {

std::string IsoTimestamp(Env* env) {
  int64_t us = env->NowMicros();
  time_t secs = static_cast<time_t>(us / 1000000);
  tm utc;
  gmtime_r(&secs, &utc);
  char buf[40];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &utc);
  char out[48];
  std::snprintf(out, sizeof(out), "%s.%03dZ", buf, static_cast<int>((us / 1000) % 1000));
  return out;
}

}  // namespace

std::string AirHome(CliContext& ctx) {
  if (auto v = ctx.env->GetEnv("AIR_HOME"); v && !v->empty()) return *v;
  auto home = ctx.env->GetEnv("HOME");
  return (home ? *home : std::string("/tmp")) + "/.air";
}

int ExitCodeFor(const Status& status) {
  if (status.ok()) return kExitOk;
  if (status.code() == ErrorCode::kInvalidArgument) return kExitInvalid;
  return kExitFailure;
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
    *ctx.out << Envelope(ctx, data).dump() << "\n";
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
    *ctx.out << env.dump() << "\n";
    return;
  }
  *ctx.err << "error: " << status.message() << "\n";
}

}  // namespace air::cli
