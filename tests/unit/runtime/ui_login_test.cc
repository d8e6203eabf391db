// Tests for `air ui`'s login file and browser start (runtime/ui_login.h): the page redirects to
// the login address and refuses one that could break out of its HTML; $BROWSER is a shell
// command line that gets the URL as an argument (never as command text), and without $BROWSER
// or a display nothing is started. The full flow (a real server, a real Chromium, another user
// watching command lines) is tests/python/test_ui_sessions.py.
#include "runtime/ui_login.h"

#include <gtest/gtest.h>

#include <map>

#include "base/env_wrapper.h"
#include "test_util.h"

namespace air::runtime {
namespace {

// The real Env with the variables the test sets (and no others of those it names).
class VariablesEnv : public EnvWrapper {
 public:
  VariablesEnv() : EnvWrapper(DefaultEnv()) {}
  std::optional<std::string> GetEnv(const std::string& name) override {
    auto it = variables.find(name);
    if (it != variables.end()) return it->second;
    if (name == "BROWSER" || name == "DISPLAY" || name == "WAYLAND_DISPLAY") return std::nullopt;
    return target()->GetEnv(name);
  }
  std::map<std::string, std::string> variables;
};

TEST(UiLoginTest, ThePageRedirectsToTheLoginAddressAlone) {
  const std::string url = "http://127.0.0.1:5005/login#code=" + std::string(64, 'a');
  auto page = UiLoginPage(url, 600);
  ASSERT_TRUE(page.ok()) << page.status().message();
  EXPECT_NE(page->find("<meta http-equiv=\"refresh\" content=\"0;url=" + url + "\">"),
            std::string::npos)
      << *page;
  EXPECT_NE(page->find("within 10 minutes"), std::string::npos);
  EXPECT_TRUE(UiLoginPage("http://[::1]:5005/login#code=ab", 600).ok());
  for (const char* bad : {"http://x\"><script>/login#code=a", "http://a b:1/login#code=a",
                          "http://h:1/login#code=a&x=<"}) {
    auto refused = UiLoginPage(bad, 600);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.status().message().find("http://<host>:<port>"), std::string::npos);
  }
}

TEST(UiLoginTest, BrowserGetsTheUrlAsAnArgumentAndNothingStartsWithoutOne) {
  testing::TempDir dir;
  VariablesEnv env;
  // No $BROWSER and no display (a login node over ssh): nothing to open.
  auto none = OpenInBrowser("file:///x.html", &env);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, "");

  // A URL with shell syntax in it stays one argument.
  // (A shell that parsed it would create the file before echo writes.)
  const std::string url = "file:///tmp/a$(touch " + dir.path() + "/injected)b.html";
  const std::string out = dir.path() + "/opened";
  env.variables["BROWSER"] = "echo >" + out;
  auto opened = OpenInBrowser(url, &env);
  ASSERT_TRUE(opened.ok()) << opened.status().message();
  EXPECT_EQ(*opened, "$BROWSER (echo >" + out + ")");
  // The browser runs detached: wait (bounded) for what it wrote.
  std::string got;
  for (int i = 0; i < 200 && got.empty(); ++i) {
    if (auto read = env.ReadFile(out); read.ok()) got = *read;
    if (got.empty()) env.SleepMicros(25'000);
  }
  EXPECT_EQ(got, url + "\n");
  EXPECT_FALSE(env.FileExists(dir.path() + "/injected"));

  // "%s" marks where the URL goes.
  env.variables["BROWSER"] = "echo %s and %s >" + out + ".2";
  ASSERT_TRUE(OpenInBrowser(url, &env).ok());
  got.clear();
  for (int i = 0; i < 200 && got.empty(); ++i) {
    if (auto read = env.ReadFile(out + ".2"); read.ok()) got = *read;
    if (got.empty()) env.SleepMicros(25'000);
  }
  EXPECT_EQ(got, url + " and " + url + "\n");
}

}  // namespace
}  // namespace air::runtime
