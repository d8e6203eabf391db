// Tests for the server's admission rules (server/access.h): Host headers, the token and session
// headers (never cookies), the UI's page files open to all, one-time login codes (expiry through
// a clock the test moves), and the browser rules for state-changing requests.
// tests/python/test_server_security.py checks the same against a running server, from another local
// user and from a real browser.
#include "server/access.h"

#include <gtest/gtest.h>

#include "base/env_wrapper.h"

namespace air::server {
namespace {

// The real Env with both clocks moved forward by `skip_us`.
class ClockEnv : public EnvWrapper {
 public:
  ClockEnv() : EnvWrapper(DefaultEnv()) {}
  int64_t NowMicros() override { return target()->NowMicros() + skip_us; }
  int64_t MonotonicMicros() override { return target()->MonotonicMicros() + skip_us; }
  int64_t skip_us = 0;
};

const std::string kToken(64, 'a');

httplib::Request Make(const std::string& method, const std::string& path,
                      const std::string& host = "127.0.0.1:5000") {
  httplib::Request req;
  req.method = method;
  req.path = path;
  if (!host.empty()) req.set_header("Host", host);
  return req;
}

TEST(AccessTest, HostHeaderMustNameTheServer) {
  EXPECT_EQ(HostOfHostHeader("127.0.0.1:5000"), "127.0.0.1");
  EXPECT_EQ(HostOfHostHeader("[::1]:80"), "::1");
  EXPECT_EQ(HostOfHostHeader("Login1.Example:5005"), "login1.example");
  EXPECT_EQ(HostOfHostHeader("a b:1"), "");
  EXPECT_EQ(HostOfHostHeader("x:1:2"), "");
  EXPECT_EQ(HostOfHostHeader("x:port"), "");

  ClockEnv env;
  Access loopback(kToken, {"127.0.0.1", ""}, /*any_ip_literal=*/false, &env);
  for (const char* host :
       {"127.0.0.1:5000", "localhost:5000", "LOCALHOST", "[::1]:5000", "127.0.0.2:5000"}) {
    EXPECT_FALSE(loopback.CheckHost(Make("GET", "/", host))) << host;
  }
  for (const char* host : {"evil.example:5000", "10.0.0.5:5000", "localhost.evil.example"}) {
    auto refused = loopback.CheckHost(Make("GET", "/", host));
    ASSERT_TRUE(refused) << host;
    EXPECT_EQ(refused->status, 403);
  }
  EXPECT_EQ(loopback.CheckHost(Make("GET", "/", ""))->status, 400);
  httplib::Request twice = Make("GET", "/");
  twice.set_header("Host", "evil.example");
  EXPECT_EQ(loopback.CheckHost(twice)->status, 400);

  Access shared(kToken, {"0.0.0.0", "login1"}, /*any_ip_literal=*/true, &env);
  EXPECT_FALSE(shared.CheckHost(Make("GET", "/", "login1:5005")));
  EXPECT_FALSE(shared.CheckHost(Make("GET", "/", "10.0.0.5:5005")));
  EXPECT_TRUE(shared.CheckHost(Make("GET", "/", "evil.example:5005")));
}

TEST(AccessTest, EveryRouteButTheUiFilesNeedsTheTokenOrASession) {
  ClockEnv env;
  Access access(kToken, {}, false, &env);
  for (const char* path : {"/health", "/api/air/runs", "/api/2.0/mlflow/runs/get", "/runs/1/x",
                           "/runs/", "/runs/1a", "/static/a/b", "/login/x", "/favicon.ico"}) {
    auto refused = access.Admit(Make("GET", path));
    ASSERT_TRUE(refused) << path;
    EXPECT_EQ(refused->status, 401);
    EXPECT_FALSE(refused->page) << path;  // a program: JSON
    EXPECT_EQ(refused->message.find(kToken), std::string::npos);
  }
  // The UI's pages (the same files for everyone, no data) load without a session; the data
  // they ask for does not. POST /login is the only write without one.
  for (const char* path : {"/", "/login", "/runs/12", "/static/app.js", "/static/chart.js"}) {
    EXPECT_FALSE(access.Admit(Make("GET", path))) << path;
    EXPECT_FALSE(access.Admit(Make("HEAD", path))) << path;
    EXPECT_EQ(access.Admit(Make("DELETE", path))->status, 401) << path;
  }
  httplib::Request login = Make("POST", "/login");
  login.set_header("Content-Type", "application/json");
  EXPECT_FALSE(access.Admit(login));
  EXPECT_EQ(access.Admit(Make("POST", "/"))->status, 401);
  login.set_header("Origin", "http://127.0.0.1:5001");  // another port's page
  EXPECT_EQ(access.Admit(login)->status, 403);
  // A browser navigating to an API address is answered with a page (how to log in).
  httplib::Request navigation = Make("GET", "/api/air/runs");
  navigation.set_header("Sec-Fetch-Mode", "navigate");
  EXPECT_TRUE(access.Admit(navigation)->page);
  httplib::Request old_browser = Make("GET", "/api/air/runs");
  old_browser.set_header("Accept", "text/html,application/xhtml+xml");
  EXPECT_TRUE(access.Admit(old_browser)->page);
  httplib::Request script = Make("GET", "/api/air/runs");
  script.set_header("Accept", "text/html");
  script.set_header("Sec-Fetch-Mode", "cors");
  EXPECT_FALSE(access.Admit(script)->page);
  httplib::Request bearer = Make("GET", "/api/air/runs");
  bearer.set_header("Authorization", "Bearer " + kToken);
  EXPECT_FALSE(access.Admit(bearer));
  httplib::Request wrong = Make("GET", "/api/air/runs");
  wrong.set_header("Authorization", "Bearer " + std::string(64, 'b'));
  EXPECT_TRUE(access.Admit(wrong));
  httplib::Request basic = Make("GET", "/api/air/runs");
  basic.set_header("Authorization",
                   "Basic dXNlcjphYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFh"
                   "YWFhYWFhYWFhYWFhYWFhYWFhYWFhYWFh");  // user:a*64
  EXPECT_FALSE(access.Admit(basic));
  // A token in the query string is not accepted (it would sit in logs and history).
  httplib::Request query = Make("GET", "/api/air/runs");
  query.params.emplace("token", kToken);
  EXPECT_TRUE(access.Admit(query));
}

TEST(AccessTest, LoginCodesWorkOnceAndSessionsAreHeadersThatDieWithTheServer) {
  ClockEnv env;
  Access access(kToken, {}, false, &env);
  std::string code = access.NewLoginCode();
  EXPECT_EQ(code.size(), 64u);
  auto session = access.RedeemLoginCode(code);
  ASSERT_TRUE(session);
  EXPECT_EQ(session->find(kToken), std::string::npos);
  EXPECT_FALSE(access.RedeemLoginCode(code));  // once
  EXPECT_FALSE(access.RedeemLoginCode(""));
  EXPECT_FALSE(access.RedeemLoginCode(std::string(64, '0')));

  httplib::Request browser = Make("GET", "/api/air/runs");
  browser.set_header(kSessionHeader, *session);
  EXPECT_FALSE(access.Admit(browser));
  EXPECT_TRUE(access.Authenticated(browser));
  EXPECT_FALSE(access.HasToken(browser));  // a session cannot mint login codes
  // Never as a cookie (a cookie of 127.0.0.1 goes to every port), nor as a bearer token.
  httplib::Request cookie = Make("GET", "/api/air/runs");
  cookie.set_header("Cookie", "air_session=" + *session);
  EXPECT_EQ(access.Admit(cookie)->status, 401);
  httplib::Request bearer = Make("GET", "/api/air/runs");
  bearer.set_header("Authorization", "Bearer " + *session);
  EXPECT_EQ(access.Admit(bearer)->status, 401);
  // A forged or altered session, or one of another server process (even with the same token:
  // a server that stopped and started again, or another that took its port), is worth nothing.
  std::string altered = *session;
  altered[3] = altered[3] == '9' ? '8' : '9';  // the expiry
  EXPECT_FALSE(access.ValidSession(altered));
  Access restarted(kToken, {}, false, &env);
  EXPECT_FALSE(restarted.ValidSession(*session));
  EXPECT_FALSE(access.ValidSession("v1.99999999999.x.y"));
  httplib::Request twice = browser;
  twice.set_header(kSessionHeader, *session);
  EXPECT_FALSE(access.Authenticated(twice));

  std::string late = access.NewLoginCode();
  env.skip_us = (kLoginCodeSeconds + 1) * 1'000'000;
  EXPECT_FALSE(access.RedeemLoginCode(late));
  EXPECT_TRUE(access.ValidSession(*session));
  env.skip_us = (kSessionSeconds + 1) * 1'000'000;
  EXPECT_FALSE(access.ValidSession(*session));
}

TEST(AccessTest, BrowsersCannotWriteFromOtherOrigins) {
  ClockEnv env;
  Access access(kToken, {}, false, &env);
  auto with = [](httplib::Request req,
                 std::initializer_list<std::pair<const char*, const char*>> headers) {
    req.set_header("Authorization", "Bearer " + kToken);
    for (const auto& [k, v] : headers) req.set_header(k, v);
    return req;
  };
  const char* create = "/api/2.0/mlflow/experiments/create";
  EXPECT_FALSE(access.Admit(with(Make("POST", create), {{"Content-Type", "application/json"}})));
  EXPECT_FALSE(access.Admit(with(Make("POST", create), {{"Content-Type",
                                                         "application/json; "
                                                         "charset=utf-8"},
                                                        {"Origin", "http://127.0.0.1:5000"},
                                                        {"Sec-Fetch-Site", "same-origin"}})));
  struct Case {
    const char* method;
    std::initializer_list<std::pair<const char*, const char*>> headers;
    int status;
  };
  for (const Case& c : {
           Case{"POST", {{"Content-Type", "text/plain"}}, 415},
           Case{"POST", {{"Content-Type", "application/x-www-form-urlencoded"}}, 415},
           Case{"POST", {}, 415},
           Case{"POST",
                {{"Content-Type", "application/json"}, {"Origin", "http://evil.example"}},
                403},
           Case{"POST", {{"Content-Type", "application/json"}, {"Origin", "null"}}, 403},
           Case{"PUT", {{"Origin", "http://127.0.0.1:5001"}}, 403},
           Case{"DELETE", {{"Sec-Fetch-Site", "cross-site"}}, 403},
           Case{"POST",
                {{"Content-Type", "application/json"}, {"Sec-Fetch-Site", "same-site"}},
                403},
           Case{"OPTIONS", {{"Origin", "http://evil.example"}}, 405},
           Case{"TRACE", {}, 405},
           Case{"GET", {{"Content-Length", "10"}}, 400},
           Case{"DELETE", {{"Transfer-Encoding", "chunked"}}, 400},
       }) {
    auto refused = access.Admit(with(Make(c.method, create), c.headers));
    ASSERT_TRUE(refused) << c.method;
    EXPECT_EQ(refused->status, c.status) << c.method << " " << refused->message;
  }
}

}  // namespace
}  // namespace air::server
