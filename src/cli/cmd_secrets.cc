// `air secrets create-scope|put-secret|list-scopes|list-secrets|delete-secret|delete-scope`:
// manage the encrypted secret store under AIR_HOME (src/secrets, docs/secrets.md). Values are
// read from stdin or a hidden prompt only — there is deliberately no flag that takes a value —
// and no subcommand ever prints one.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>

#include "base/strings.h"
#include "base/time_format.h"
#include "cli/commands.h"
#include "cli/text_table.h"
#include "secrets/names.h"
#include "secrets/secret_matcher.h"
#include "secrets/secret_store.h"
#include "secrets/value_input.h"

namespace air::cli {
namespace {

std::string FormatTime(int64_t micros) { return FormatUtcTimestamp(micros, 0); }

constexpr char kValueNeverInArgv[] =
    "secret values are never taken from the command line (any user can read a process's "
    "arguments in /proc, and shells keep history); nothing was stored. Pipe the value in — "
    "printf '%s' \"$VALUE\" | air secrets put-secret SCOPE KEY — or run the command in a "
    "terminal to be prompted. If that value is real, consider it exposed and rotate it.";

struct SecretsArgs {
  std::string scope;
  std::string key;
  bool keep_trailing_newline = false;
  // Set only when someone passes a value on the command line, which is refused (not stored,
  // never printed): --value/--string-value, or words after SCOPE KEY.
  std::string refused_argv_value;
  CLI::Option* refused_value_option = nullptr;
  std::vector<std::string> refused_extra_words;
};

void CreateScope(CliContext& ctx, const SecretsArgs& args) {
  auto air_home = AirHome(ctx);
  if (!air_home.ok()) return EmitError(ctx, air_home.status());
  secrets::SecretStore store(ctx.env, *air_home);
  if (Status st = store.CreateScope(args.scope); !st.ok()) return EmitError(ctx, st);
  EmitData(ctx, {{"scope", args.scope}, {"created", true}}, "Created secret scope " + args.scope);
}

void DeleteScope(CliContext& ctx, const SecretsArgs& args) {
  auto air_home = AirHome(ctx);
  if (!air_home.ok()) return EmitError(ctx, air_home.status());
  secrets::SecretStore store(ctx.env, *air_home);
  if (Status st = store.DeleteScope(args.scope); !st.ok()) return EmitError(ctx, st);
  EmitData(ctx, {{"scope", args.scope}, {"deleted", true}},
           "Deleted secret scope " + args.scope + " and every secret in it");
}

void PutSecret(CliContext& ctx, const SecretsArgs& args) {
  bool value_option =
      args.refused_value_option != nullptr && args.refused_value_option->count() > 0;
  if (value_option || !args.refused_extra_words.empty()) {
    // The words themselves are never echoed: one of them may be the value.
    std::string message;
    if (size_t extra = args.refused_extra_words.size(); extra > 0) {
      message = fmt::format(
          "put-secret takes only SCOPE and KEY, and got {} more argument{} "
          "(not shown); ",
          extra, extra == 1 ? "" : "s");
    }
    return EmitError(ctx, InvalidArgument(message + kValueNeverInArgv));
  }
  // Check the names before asking for a value the user would have to type again.
  for (auto [what, name] : {std::pair{"scope", &args.scope}, std::pair{"key", &args.key}}) {
    if (Status st = secrets::ValidateName(what, *name); !st.ok()) return EmitError(ctx, st);
  }
  auto air_home = AirHome(ctx);
  if (!air_home.ok()) return EmitError(ctx, air_home.status());
  secrets::SecretStore store(ctx.env, *air_home);
  {
    auto snapshot = store.Read();
    if (!snapshot.ok()) return EmitError(ctx, snapshot.status());
    if (Status st = snapshot->CheckScopeExists(args.scope); !st.ok()) return EmitError(ctx, st);
  }
  secrets::ValueInputOptions options;
  options.keep_trailing_newline = args.keep_trailing_newline;
  options.prompt = "Value for " + secrets::SecretPath(args.scope, args.key) + " (input hidden): ";
  auto value = secrets::ReadSecretValue(STDIN_FILENO, STDERR_FILENO, options);
  if (!value.ok()) return EmitError(ctx, value.status());
  auto outcome = store.PutSecret(args.scope, args.key, *value);
  size_t bytes = value->size();
  std::fill(value->begin(), value->end(), '\0');
  if (!outcome.ok()) return EmitError(ctx, outcome.status());

  std::string path = secrets::SecretPath(args.scope, args.key);
  nlohmann::json warnings = nlohmann::json::array();
  if (bytes < secrets::kMinRedactedLength) {
    warnings.push_back(fmt::format(
        "the value of {} is {} bytes; values shorter than {} bytes are not redacted from logs "
        "(see docs/secrets.md)",
        path, bytes, secrets::kMinRedactedLength));
  }
  nlohmann::json data = {{"scope", args.scope},
                         {"key", args.key},
                         {"bytes", bytes},
                         {"replaced", outcome->replaced},
                         {"updated_at", FormatTime(outcome->updated_us)},
                         {"warnings", warnings}};
  if (!ctx.json()) {
    for (const auto& w : warnings) *ctx.err << "warning: " << w.get<std::string>() << "\n";
  }
  EmitData(ctx, data,
           fmt::format("{} secret {} ({} bytes)", outcome->replaced ? "Updated" : "Stored", path,
                       bytes));
}

void DeleteSecret(CliContext& ctx, const SecretsArgs& args) {
  auto air_home = AirHome(ctx);
  if (!air_home.ok()) return EmitError(ctx, air_home.status());
  secrets::SecretStore store(ctx.env, *air_home);
  if (Status st = store.DeleteSecret(args.scope, args.key); !st.ok()) return EmitError(ctx, st);
  EmitData(ctx, {{"scope", args.scope}, {"key", args.key}, {"deleted", true}},
           "Deleted secret " + secrets::SecretPath(args.scope, args.key));
}

void ListScopes(CliContext& ctx) {
  auto air_home = AirHome(ctx);
  if (!air_home.ok()) return EmitError(ctx, air_home.status());
  secrets::SecretStore store(ctx.env, *air_home);
  auto scopes = store.ListScopes();
  if (!scopes.ok()) return EmitError(ctx, scopes.status());
  nlohmann::json list = nlohmann::json::array();
  std::vector<std::vector<std::string>> rows = {{"SCOPE", "SECRETS", "CREATED"}};
  for (const auto& s : *scopes) {
    list.push_back({{"name", s.name},
                    {"secret_count", s.secret_count},
                    {"created_at", FormatTime(s.created_us)}});
    rows.push_back({s.name, std::to_string(s.secret_count), FormatTime(s.created_us)});
  }
  EmitData(ctx, {{"scopes", list}},
           scopes->empty() ? "No secret scopes (create one with: air secrets create-scope SCOPE)"
                           : Table(rows));
}

void ListSecrets(CliContext& ctx, const SecretsArgs& args) {
  auto air_home = AirHome(ctx);
  if (!air_home.ok()) return EmitError(ctx, air_home.status());
  secrets::SecretStore store(ctx.env, *air_home);
  auto secrets = store.ListSecrets(args.scope);
  if (!secrets.ok()) return EmitError(ctx, secrets.status());
  nlohmann::json list = nlohmann::json::array();
  std::vector<std::vector<std::string>> rows = {{"KEY", "UPDATED"}};
  for (const auto& s : *secrets) {
    list.push_back({{"key", s.key}, {"updated_at", FormatTime(s.updated_us)}});
    rows.push_back({s.key, FormatTime(s.updated_us)});
  }
  EmitData(ctx, {{"scope", args.scope}, {"secrets", list}},
           secrets->empty() ? "Scope " + args.scope + " holds no secrets" : Table(rows));
}

}  // namespace

void RegisterSecretsCommand(CLI::App& root, CliContext& ctx) {
  auto* group = root.add_subcommand(
      "secrets", "manage secret scopes and values (encrypted at rest, injected into nodes)");
  group->require_subcommand(1);
  group->fallthrough();
  auto args = std::make_shared<SecretsArgs>();

  auto* create = group->add_subcommand("create-scope", "create a secret scope");
  create->add_option("SCOPE", args->scope, "scope name")->required();
  create->fallthrough();
  create->callback([&ctx, args] { CreateScope(ctx, *args); });

  auto* put = group->add_subcommand(
      "put-secret",
      "store a secret: the value is read from stdin when piped, else from a hidden prompt");
  put->add_option("SCOPE", args->scope, "scope name")->required();
  put->add_option("KEY", args->key, "key name")->required();
  put->add_flag("--keep-trailing-newline", args->keep_trailing_newline,
                "store piped input byte for byte (by default one trailing newline is removed)");
  // Hidden: exists only to refuse a value given in argv with an explanation.
  args->refused_value_option =
      put->add_option("--value,--string-value,--bytes-value", args->refused_argv_value)->group("");
  put->add_option("VALUE", args->refused_extra_words)->group("");  // refused, never echoed
  put->fallthrough();
  put->callback([&ctx, args] { PutSecret(ctx, *args); });

  auto* list_scopes = group->add_subcommand("list-scopes", "list secret scopes");
  list_scopes->fallthrough();
  list_scopes->callback([&ctx] { ListScopes(ctx); });

  auto* list_secrets =
      group->add_subcommand("list-secrets", "list the keys of a scope (names and times only)");
  list_secrets->add_option("SCOPE", args->scope, "scope name")->required();
  list_secrets->fallthrough();
  list_secrets->callback([&ctx, args] { ListSecrets(ctx, *args); });

  auto* delete_secret = group->add_subcommand("delete-secret", "delete one secret");
  delete_secret->add_option("SCOPE", args->scope, "scope name")->required();
  delete_secret->add_option("KEY", args->key, "key name")->required();
  delete_secret->fallthrough();
  delete_secret->callback([&ctx, args] { DeleteSecret(ctx, *args); });

  auto* delete_scope =
      group->add_subcommand("delete-scope", "delete a scope and every secret in it");
  delete_scope->add_option("SCOPE", args->scope, "scope name")->required();
  delete_scope->fallthrough();
  delete_scope->callback([&ctx, args] { DeleteScope(ctx, *args); });
}

}  // namespace air::cli
