// Harmony message parsing: messages are found by their markers, authors and channels read from
// the header, and the assistant spans cover the assistant's messages whole (<|start|> through
// <|end|>, <|return|> or <|call|>), merging a turn's analysis and final messages, leaving the
// user's, the system's and tools' messages and a trailing generation prompt out.
#include "engine/data/harmony.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace air::engine {
namespace {

std::string Msg(const std::string& header, const std::string& content,
                const std::string& end = "<|end|>") {
  return "<|start|>" + header + "<|message|>" + content + end;
}

TEST(Harmony, ParsesAuthorsChannelsAndBounds) {
  const std::string user = Msg("user", "Weather?");
  const std::string call =
      Msg("assistant to=functions.get_weather<|channel|>commentary json", "{}", "<|call|>");
  const std::string tool = Msg("functions.get_weather to=assistant<|channel|>commentary", "21");
  const std::string text = user + call + tool + "<|start|>assistant";
  auto messages = ParseHarmonyMessages(text);
  ASSERT_EQ(messages.size(), 3u);
  EXPECT_EQ(messages[0].author, "user");
  EXPECT_EQ(messages[0].channel, "");
  EXPECT_EQ(messages[1].author, "assistant");
  EXPECT_EQ(messages[1].channel, "commentary");
  EXPECT_EQ(text.substr(messages[1].begin, messages[1].end - messages[1].begin), call);
  EXPECT_EQ(messages[2].author, "functions.get_weather");
}

TEST(Harmony, AssistantSpansCoverEachTurnWhole) {
  const std::string system = Msg("system", "You are ChatGPT.");
  const std::string first = Msg("assistant<|channel|>final", "4");
  const std::string analysis = Msg("assistant<|channel|>analysis", "Think <|channel|> twice.");
  const std::string final = Msg("assistant<|channel|>final", "9", "<|return|>");
  const std::string text =
      system + Msg("user", "2+2?") + first + Msg("user", "3*3?") + analysis + final;
  const auto spans = HarmonyAssistantSpans(text);
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(text.substr(spans[0].first, spans[0].second - spans[0].first), first);
  EXPECT_EQ(text.substr(spans[1].first, spans[1].second - spans[1].first), analysis + final);
}

TEST(Harmony, RecognizesHarmonyTemplates) {
  EXPECT_TRUE(IsHarmonyTemplate("{{ '<|start|>assistant<|channel|>final<|message|>' }}"));
  EXPECT_FALSE(IsHarmonyTemplate("{{ '<|im_start|>assistant\\n' }}"));
  EXPECT_TRUE(ParseHarmonyMessages("no markers at all").empty());
  EXPECT_TRUE(ParseHarmonyMessages("<|start|>user<|message|>never ends").empty());
}

}  // namespace
}  // namespace air::engine
