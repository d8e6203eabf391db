// `air tokenize`: a hidden, internal subcommand to look at what the engine's tokenizer and data
// pipeline produce, and the tool the parity tests drive (one process for thousands of lines).
//
//   air tokenize --tokenizer DIR TEXT...            ids of each TEXT (add special tokens unless
//                                                   --no-special-tokens)
//   air tokenize --tokenizer DIR --input F.jsonl    F: one JSON string per line; prints one
//                                                   {"ids":[...],"text":decode(ids)} per line
//   air tokenize --tokenizer DIR --input F --summary
//                                                   encodes every line and prints only
//                                                   {"lines","tokens","encode_seconds"} (the
//                                                   speed benchmark: bench/tokenize)
//   air tokenize --tokenizer DIR --input F --decode F: one JSON list of ids per line; prints
//                                                   {"text":...} (--skip-special-tokens)
//   air tokenize --tokenizer DIR --input F --chat   F: {"messages":[...],"add_generation_prompt":
//                                                   bool} per line; prints {"text","ids",
//                                                   "assistant_mask"} using the chat template
//                                                   (--render-only: just {"text"})
//   air tokenize --tokenizer DIR --dataset D --max-seq-len N [--train-on-prompt]
//                                                   the training examples of dataset D (file,
//                                                   directory or hub id): {"input_ids","labels"}
//                                                   per record, as the trainer gets them
#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <span>

#include "base/time_format.h"
#include "cli/commands.h"
#include "engine/data/chat_template.h"
#include "engine/data/dataset.h"
#include "engine/data/examples.h"
#include "engine/data/json_util.h"
#include "engine/data/tokenizer.h"

namespace air::cli {
namespace {

using engine::Tokenizer;
using nlohmann::json;

struct TokenizeOptions {
  std::string tokenizer_path;
  std::string input_path;
  std::string dataset;
  std::vector<std::string> texts;
  bool no_special_tokens = false;
  bool skip_special_tokens = false;
  bool decode = false;
  bool chat = false;
  bool render_only = false;
  bool summary = false;
  bool train_on_prompt = false;
  int max_seq_len = 2048;
};

// Calls `fn(line_number, parsed_json)` for each non-empty line of a JSONL file.
template <typename Fn>
Status ForEachJsonLine(Env* env, const std::string& path, Fn fn) {
  AIR_ASSIGN_OR_RETURN(std::string content, env->ReadFile(path));
  size_t line_no = 0, pos = 0;
  while (pos < content.size()) {
    size_t end = content.find('\n', pos);
    if (end == std::string::npos) end = content.size();
    std::string_view line(content.data() + pos, end - pos);
    ++line_no;
    pos = end + 1;
    if (line.empty()) continue;
    AIR_ASSIGN_OR_RETURN(json value, engine::ParseJson(line, path, line_no - 1));
    AIR_RETURN_IF_ERROR(fn(line_no, value));
  }
  return Status::Ok();
}

Status RunEncodeFile(CliContext& ctx, const Tokenizer& tok, const TokenizeOptions& o) {
  return ForEachJsonLine(ctx.env, o.input_path, [&](size_t line_no, const json& v) -> Status {
    if (o.decode) {
      std::vector<int32_t> ids;
      for (const json& id : v.is_array() ? v : json::array({v})) {
        if (!v.is_array() || !id.is_number_integer() || id.get<int64_t>() < INT32_MIN ||
            id.get<int64_t>() > INT32_MAX) {
          return InvalidArgument(fmt::format("{}:{}: expected a list of integer ids, got {}",
                                             o.input_path, line_no, engine::Excerpt(v.dump())));
        }
        ids.push_back(id.get<int32_t>());
      }
      *ctx.out << json{{"text", tok.Decode(ids, o.skip_special_tokens)}}.dump() << "\n";
      return Status::Ok();
    }
    if (!v.is_string()) {
      return InvalidArgument(fmt::format("{}:{}: expected a JSON string", o.input_path, line_no));
    }
    auto ids = tok.Encode(v.get_ref<const std::string&>(), !o.no_special_tokens);
    if (!ids.ok()) return ids.status().WithContext(fmt::format("{}:{}", o.input_path, line_no));
    *ctx.out << json{{"ids", *ids}, {"text", tok.Decode(*ids, o.skip_special_tokens)}}.dump()
             << "\n";
    return Status::Ok();
  });
}

// Encodes every line (parsed first, so only encoding is timed) and prints the totals.
Status RunEncodeSummary(CliContext& ctx, const Tokenizer& tok, const TokenizeOptions& o) {
  std::vector<std::string> texts;
  AIR_RETURN_IF_ERROR(
      ForEachJsonLine(ctx.env, o.input_path, [&](size_t line_no, const json& v) -> Status {
        if (!v.is_string()) {
          return InvalidArgument(
              fmt::format("{}:{}: expected a JSON string", o.input_path, line_no));
        }
        texts.push_back(v.get<std::string>());
        return Status::Ok();
      }));
  int64_t tokens = 0;
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < texts.size(); ++i) {
    auto ids = tok.Encode(texts[i], !o.no_special_tokens);
    if (!ids.ok()) return ids.status().WithContext(fmt::format("{}:{}", o.input_path, i + 1));
    tokens += static_cast<int64_t>(ids->size());
  }
  const double seconds = SecondsSince(start);
  *ctx.out << json{{"lines", texts.size()}, {"tokens", tokens}, {"encode_seconds", seconds}}.dump()
           << "\n";
  return Status::Ok();
}

Status RunChatFile(CliContext& ctx, const Tokenizer& tok, const TokenizeOptions& o) {
  AIR_ASSIGN_OR_RETURN(auto chat_template, engine::ChatTemplate::ForTokenizer(tok));
  return ForEachJsonLine(ctx.env, o.input_path, [&](size_t line_no, const json& v) -> Status {
    std::string where = fmt::format("{}:{}", o.input_path, line_no);
    AIR_ASSIGN_OR_RETURN(auto messages, engine::ParseChatMessages(v, where));
    bool generation_prompt = v.value("add_generation_prompt", false);
    if (o.render_only) {
      AIR_ASSIGN_OR_RETURN(std::string text,
                           chat_template.RenderChecked(messages, generation_prompt));
      *ctx.out << json{{"text", text}}.dump() << "\n";
      return Status::Ok();
    }
    AIR_ASSIGN_OR_RETURN(auto rendered, chat_template.Render(messages, generation_prompt));
    AIR_ASSIGN_OR_RETURN(auto tokens, engine::TokenizeRendered(tok, rendered));
    *ctx.out << json{{"text", rendered.text},
                     {"ids", tokens.input_ids},
                     {"assistant_mask", tokens.assistant_mask}}
                    .dump()
             << "\n";
    return Status::Ok();
  });
}

Status TokenizeDataset(CliContext& ctx, const Tokenizer& tok, const TokenizeOptions& o) {
  AIR_ASSIGN_OR_RETURN(auto files, engine::ResolveDataset(o.dataset, ctx.env));
  AIR_ASSIGN_OR_RETURN(auto records, engine::LoadRecords(files, ctx.env));
  engine::ExampleOptions options;
  options.max_seq_len = o.max_seq_len;
  options.train_on_prompt = o.train_on_prompt;
  AIR_ASSIGN_OR_RETURN(auto built, engine::BuildExamples(records, tok, options));
  for (const auto& ex : built.examples) {
    *ctx.out << json{{"input_ids", ex.input_ids}, {"labels", ex.labels}}.dump() << "\n";
  }
  return Status::Ok();
}

Status RunTokenize(CliContext& ctx, const TokenizeOptions& o) {
  if (o.summary && (o.input_path.empty() || o.decode || o.chat)) {
    return InvalidArgument(
        "--summary counts the tokens of --input's texts; it needs --input and goes with neither "
        "--decode nor --chat");
  }
  AIR_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::Load(o.tokenizer_path, ctx.env));
  if (!o.dataset.empty()) return TokenizeDataset(ctx, tok, o);
  if (!o.input_path.empty()) {
    if (o.chat) return RunChatFile(ctx, tok, o);
    return o.summary ? RunEncodeSummary(ctx, tok, o) : RunEncodeFile(ctx, tok, o);
  }
  json results = json::array();
  std::string text;
  for (const std::string& t : o.texts) {
    AIR_ASSIGN_OR_RETURN(auto ids, tok.Encode(t, !o.no_special_tokens));
    results.push_back({{"text", t}, {"ids", ids}});
    text += json(ids).dump() + "\n";
  }
  EmitData(ctx, json{{"results", results}}, text);
  return Status::Ok();
}

}  // namespace

void RegisterTokenizeCommand(CLI::App& root, CliContext& ctx) {
  auto opts = std::make_shared<TokenizeOptions>();
  auto* cmd = root.add_subcommand("tokenize", "internal: run the engine's tokenizer/data pipeline");
  cmd->group("");  // hidden from `air --help`
  cmd->add_option("--tokenizer", opts->tokenizer_path,
                  "model directory with tokenizer.json, or a tokenizer.json file")
      ->required();
  cmd->add_option("--input", opts->input_path, "JSON-lines input file");
  cmd->add_option("--dataset", opts->dataset, "dataset file, directory or hub id");
  cmd->add_option("--max-seq-len", opts->max_seq_len, "truncation length for --dataset");
  cmd->add_flag("--no-special-tokens", opts->no_special_tokens,
                "do not let the post-processor add tokens (e.g. BOS)");
  cmd->add_flag("--skip-special-tokens", opts->skip_special_tokens,
                "leave special tokens out when decoding");
  cmd->add_flag("--decode", opts->decode, "input lines are id lists to decode");
  cmd->add_flag("--chat", opts->chat, "input lines are chat conversations");
  cmd->add_flag("--render-only", opts->render_only, "with --chat: only the rendered text");
  cmd->add_flag("--train-on-prompt", opts->train_on_prompt,
                "with --dataset: labels on every token, not only the responses");
  cmd->add_flag("--summary", opts->summary,
                "with --input: print only line and token counts and the encoding time");
  cmd->add_option("text", opts->texts, "texts to encode");
  cmd->callback([&ctx, opts] {
    Status status = RunTokenize(ctx, *opts);
    if (!status.ok()) EmitError(ctx, status);
  });
}

}  // namespace air::cli
