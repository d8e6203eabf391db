// Describing command-line usage errors (see usage_error.h).
#include "cli/usage_error.h"

#include <algorithm>
#include <cctype>
#include <vector>

#include "base/strings.h"

namespace air::cli {
namespace {

// The subcommands of `app`: all of them, or only those --help lists (hidden ones have no group).
std::vector<CLI::App*> Subcommands(CLI::App* app, bool visible_only) {
  return app->get_subcommands(
      [visible_only](CLI::App* sub) { return !visible_only || !sub->get_group().empty(); });
}

std::vector<std::string> Names(const std::vector<CLI::App*>& apps) {
  std::vector<std::string> names;
  for (const CLI::App* app : apps) names.push_back(app->get_name());
  return names;
}

// "-1", "-0.5": values, not options.
bool LooksLikeNegativeNumber(const std::string& arg) {
  return arg.size() > 1 && arg[0] == '-' &&
         (isdigit(static_cast<unsigned char>(arg[1])) || arg[1] == '.');
}

// The option spellings of `app` ("--file", "-f", ...), without the help flag.
std::vector<std::string> OptionSpellings(const CLI::App* app, bool first_only) {
  std::vector<std::string> out;
  for (const CLI::Option* opt : app->get_options()) {
    if (opt == app->get_help_ptr()) continue;  // positionals have no spelling: skipped below
    std::vector<std::string> spellings;
    for (const std::string& l : opt->get_lnames()) spellings.push_back("--" + l);
    for (const std::string& s : opt->get_snames()) spellings.push_back("-" + s);
    if (spellings.empty()) continue;
    if (first_only) spellings.resize(1);
    out.insert(out.end(), spellings.begin(), spellings.end());
  }
  return out;
}

bool TakesPositionals(const CLI::App* app) {
  std::vector<const CLI::Option*> options = app->get_options();
  return std::any_of(options.begin(), options.end(),
                     [](const CLI::Option* opt) { return opt->get_positional(); });
}

std::string CommandPath(const std::vector<CLI::App*>& chain) {
  std::string path = "air";
  for (size_t i = 1; i < chain.size(); ++i) path += " " + chain[i]->get_name();
  return path;
}

std::string HelpFor(const std::vector<CLI::App*>& chain) { return CommandPath(chain) + " --help"; }

// Walks argv like CLI11 does (subcommands, options with their values, positionals) and
// describes the first unknown option or command; sets *chain to the commands it entered.
std::string FindUnknownArgument(CLI::App& root, int argc, char** argv,
                                std::vector<CLI::App*>* chain) {
  chain->assign(1, &root);
  bool only_positionals = false;
  std::vector<const CLI::Option*> given;  // the options seen so far
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    CLI::App* current = chain->back();
    if (!only_positionals && arg == "--") {
      only_positionals = true;
      continue;
    }
    if (!only_positionals && arg.size() > 1 && arg[0] == '-' && !LooksLikeNegativeNumber(arg)) {
      // --name=value, -fVALUE (or -abc flags) carry their value in the same argument.
      bool long_form = arg.compare(0, 2, "--") == 0;
      size_t eq = arg.find('=');
      std::string name = long_form ? arg.substr(0, eq) : arg.substr(0, 2);
      bool value_attached = long_form ? eq != std::string::npos : arg.size() > 2;
      const CLI::Option* option = nullptr;
      for (auto app = chain->rbegin(); app != chain->rend() && !option; ++app) {
        option = (*app)->get_option_no_throw(name);
      }
      if (!option) {
        std::vector<std::string> known;  // long spellings: any two short ones are close
        for (const CLI::App* app : *chain) {
          for (const std::string& spelling : OptionSpellings(app, false)) {
            if (long_form && spelling.compare(0, 2, "--") == 0) known.push_back(spelling);
          }
        }
        std::vector<std::string> listed = OptionSpellings(current, true);
        return "unknown option '" + name + "' for '" + CommandPath(*chain) + "'" +
               DidYouMeanSuffix(name, known) +
               (listed.empty() ? "" : "; its options: " + Join(listed, ", "));
      }
      given.push_back(option);
      if (!value_attached && option->get_type_size_min() > 0) ++i;  // skip the option's value
      continue;
    }
    std::vector<CLI::App*> all = Subcommands(current, false);
    auto sub = std::find_if(all.begin(), all.end(),
                            [&](const CLI::App* s) { return s->get_name() == arg; });
    if (sub != all.end()) {
      chain->push_back(*sub);
      continue;
    }
    if (!all.empty() && current->get_require_subcommand_min() > 0) {
      std::vector<std::string> names = Names(Subcommands(current, true));
      std::string where = chain->size() == 1 ? "" : " for '" + CommandPath(*chain) + "'";
      return "unknown command '" + arg + "'" + where + DidYouMeanSuffix(arg, names) +
             "; commands: " + Join(names, ", ");
    }
    if (all.empty() && !TakesPositionals(current)) {
      std::string message = "unexpected argument '" + arg + "' for '" + CommandPath(*chain) + "'";
      const CLI::Option* file = current->get_option_no_throw("--file");
      if (file && std::find(given.begin(), given.end(), file) == given.end()) {
        message += "; give the workload file with -f: " + CommandPath(*chain) + " -f " + arg;
      }
      return message;
    }
    // Otherwise a positional argument of the current command; CLI11 judges its count.
  }
  return "";
}

}  // namespace

UsageError DescribeUsageError(CLI::App& root, int argc, char** argv, const CLI::ParseError& e) {
  std::vector<CLI::App*> chain;
  std::string unknown = FindUnknownArgument(root, argc, argv, &chain);
  UsageError error{unknown, HelpFor(chain)};
  if (!error.message.empty()) return error;
  CLI::App* current = chain.back();
  std::vector<std::string> names = Names(Subcommands(current, true));
  bool needs_command = std::string(e.what()).find("subcommand is required") != std::string::npos;
  if (needs_command && !names.empty()) {
    error.message = chain.size() == 1
                        ? "a command is required; commands: " + Join(names, ", ")
                        : "'" + CommandPath(chain) + "' needs a command: " + Join(names, ", ");
    return error;
  }
  error.message = e.what();
  return error;
}

}  // namespace air::cli
