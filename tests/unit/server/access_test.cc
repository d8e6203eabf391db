// Tests for the server's admission rules (server/access.h): Host headers, the token and session
// cookies, one-time login codes (expiry through a clock the test moves), and the browser rules
// for state-changing requests. tests/python/test_server_security.py checks the same against a
// running server, from another local user and from a real browser.
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

std::string CookieValue(const std::string& set_cookie) {
  std::string first = set_cookie.substr(0, set_cookie.find(';'));
  return first.substr(first.find('=') + 1);
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

TEST(AccessTest, EveryRouteNeedsTheTokenOrASession) {
  ClockEnv env;
  Access access(kToken, {}, false, &env);
  for (const char* path : {"/health", "/", "/api/air/runs", "/api/2.0/mlflow/runs/get"}) {
    auto refused = access.Admit(Make("GET", path));
    ASSERT_TRUE(refused) << path;
    EXPECT_EQ(refused->status, 401);
    EXPECT_EQ(refused->message.find(kToken), std::string::npos);
  }
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

TEST(AccessTest, LoginCodesWorkOnceAndSessionsExpire) {
  ClockEnv env;
  Access access(kToken, {}, false, &env);
  std::string code = access.NewLoginCode();
  EXPECT_EQ(code.size(), 64u);
  auto cookie = access.RedeemLoginCode(code);
  ASSERT_TRUE(cookie);
  for (const char* attribute : {"air_session=", "; Path=/", "; HttpOnly", "; SameSite=Strict"}) {
    EXPECT_NE(cookie->find(attribute), std::string::npos) << *cookie;
  }
  EXPECT_FALSE(access.RedeemLoginCode(code));  // once
  EXPECT_FALSE(access.RedeemLoginCode(""));
  EXPECT_FALSE(access.RedeemLoginCode(std::string(64, '0')));

  httplib::Request browser = Make("GET", "/");
  browser.set_header("Cookie", "other=1; air_session=" + CookieValue(*cookie));
  EXPECT_FALSE(access.Admit(browser));
  // A forged or altered cookie, or one signed with another token, is worth nothing.
  std::string value = CookieValue(*cookie);
  std::string altered = value;
  altered[3] = altered[3] == '9' ? '8' : '9';  // the expiry
  EXPECT_FALSE(access.ValidSession(altered));
  Access other(std::string(64, 'c'), {}, false, &env);
  EXPECT_FALSE(other.ValidSession(value));
  EXPECT_FALSE(access.ValidSession("v1.99999999999.x.y"));

  std::string late = access.NewLoginCode();
  env.skip_us = (kLoginCodeSeconds + 1) * 1'000'000;
  EXPECT_FALSE(access.RedeemLoginCode(late));
  EXPECT_TRUE(access.ValidSession(value));
  env.skip_us = (kSessionSeconds + 1) * 1'000'000;
  EXPECT_FALSE(access.ValidSession(value));
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
