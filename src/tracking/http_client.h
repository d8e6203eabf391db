// Outgoing HTTP for tracking (libcurl): air's health checks of its own server, runs created and
// ended on an external MLflow server, and `air train`'s metric batches. MlflowRest wraps the
// few MLflow REST calls air makes, turning MLflow's {"error_code", "message"} into a Status.
// Thread safety: an HttpClient (one curl easy handle, kept alive between requests) is used by
// one thread at a time; curl_global_init runs once per process (std::call_once).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"

namespace air::tracking {

// What air sends to authenticate to a tracking server, as the mlflow client does from
// MLFLOW_TRACKING_TOKEN (Authorization: Bearer) or MLFLOW_TRACKING_USERNAME and
// MLFLOW_TRACKING_PASSWORD (basic auth). Values only ever go in a request header.
struct Credentials {
  std::string token;
  std::string username;
  std::string password;
  bool empty() const { return token.empty() && username.empty() && password.empty(); }
};

struct HttpResponse {
  long status = 0;
  std::string body;
};

class HttpClient {
 public:
  HttpClient();
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // kUnavailable when the server cannot be reached or does not answer within `timeout_ms`.
  // `credentials`, when set, go in an Authorization header (never in the URL or a log).
  Result<HttpResponse> Request(const std::string& method, const std::string& url,
                               const std::string& body, const Credentials& credentials,
                               long timeout_ms);

 private:
  void* curl_;  // CURL*
};

// The MLflow REST calls air makes to a tracking server (air's own or an external one).
class MlflowRest {
 public:
  MlflowRest(std::string base_url, Credentials credentials, long timeout_ms = 10000)
      : base_(std::move(base_url)), credentials_(std::move(credentials)), timeout_ms_(timeout_ms) {
    while (!base_.empty() && base_.back() == '/') base_.pop_back();
  }

  // POST/GET /api/2.0/mlflow/<endpoint>; the response object, or the server's error as a
  // Status (RESOURCE_DOES_NOT_EXIST -> kNotFound, other 4xx -> kInvalidArgument, else
  // kUnavailable; 401/403 -> kPermissionDenied) naming the server.
  Result<nlohmann::json> Call(const std::string& method, const std::string& endpoint,
                              const nlohmann::json& body);

  // The id of the experiment named `name`, created when missing.
  Result<std::string> GetOrCreateExperiment(const std::string& name);
  const std::string& base_url() const { return base_; }

 private:
  std::string base_;
  Credentials credentials_;
  long timeout_ms_;
  HttpClient http_;
};

}  // namespace air::tracking
