// libcurl easy-handle client and the MLflow REST wrapper.
#include "tracking/http_client.h"

#include <curl/curl.h>
#include <fmt/format.h>

#include <mutex>

namespace air::tracking {
namespace {

size_t Collect(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

std::string UrlEncode(CURL* curl, const std::string& text) {
  char* escaped = curl_easy_escape(curl, text.c_str(), static_cast<int>(text.size()));
  std::string out = escaped != nullptr ? escaped : "";
  curl_free(escaped);
  return out;
}

}  // namespace

HttpClient::HttpClient() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
  curl_ = curl_easy_init();
}

HttpClient::~HttpClient() {
  if (curl_ != nullptr) curl_easy_cleanup(static_cast<CURL*>(curl_));
}

Result<HttpResponse> HttpClient::Request(const std::string& method, const std::string& url,
                                         const std::string& body, const Credentials& credentials,
                                         long timeout_ms) {
  CURL* curl = static_cast<CURL*>(curl_);
  if (curl == nullptr) return Internal("curl_easy_init failed");
  curl_easy_reset(curl);
  HttpResponse response;
  struct curl_slist* headers = nullptr;
  headers = curl_slist_append(headers, "Content-Type: application/json");
  std::string auth;
  if (!credentials.token.empty()) {
    auth = "Authorization: Bearer " + credentials.token;
    headers = curl_slist_append(headers, auth.c_str());
  } else if (!credentials.username.empty() || !credentials.password.empty()) {
    curl_easy_setopt(curl, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
    curl_easy_setopt(curl, CURLOPT_USERNAME, credentials.username.c_str());
    curl_easy_setopt(curl, CURLOPT_PASSWORD, credentials.password.c_str());
  }
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
  if (method != "GET") {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  }
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, Collect);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response.body);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, std::min(timeout_ms, 5000L));
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  // Proxies are for the outside world; tracking servers are reached directly.
  curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
  CURLcode rc = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  if (rc != CURLE_OK) {
    return Unavailable(fmt::format("{} {}: {}", method, url, curl_easy_strerror(rc)));
  }
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

Result<nlohmann::json> MlflowRest::Call(const std::string& method, const std::string& endpoint,
                                        const nlohmann::json& body) {
  std::string url = base_ + "/api/2.0/mlflow/" + endpoint;
  std::string payload;
  if (method == "GET") {
    std::string query;
    for (auto& [key, value] : body.items()) {
      CURL* curl = curl_easy_init();
      std::string text = value.is_string() ? value.get<std::string>() : value.dump();
      query += (query.empty() ? "?" : "&") + key + "=" + UrlEncode(curl, text);
      curl_easy_cleanup(curl);
    }
    url += query;
  } else {
    payload = body.dump();
  }
  AIR_ASSIGN_OR_RETURN(HttpResponse response,
                       http_.Request(method, url, payload, credentials_, timeout_ms_));
  auto parsed = nlohmann::json::parse(response.body, nullptr, false);
  if (response.status == 200 && parsed.is_object()) return parsed;
  std::string code = parsed.is_object() ? parsed.value("error_code", "") : "";
  std::string message = parsed.is_object() ? parsed.value("message", response.body) : response.body;
  std::string text =
      fmt::format("MLflow server {} answered {} to {} {}: {}{}", base_, response.status, method,
                  endpoint, code.empty() ? "" : code + ": ", message.substr(0, 500));
  if (code == "RESOURCE_DOES_NOT_EXIST") return NotFound(text);
  if (response.status == 401 || response.status == 403) return PermissionDenied(text);
  if (response.status >= 400 && response.status < 500) return InvalidArgument(text);
  return Unavailable(text);
}

Result<std::string> MlflowRest::GetOrCreateExperiment(const std::string& name) {
  auto found = Call("GET", "experiments/get-by-name", {{"experiment_name", name}});
  if (found.ok()) return (*found)["experiment"].value("experiment_id", "");
  if (found.status().code() != ErrorCode::kNotFound) return found.status();
  auto created = Call("POST", "experiments/create", {{"name", name}});
  if (created.ok()) return created->value("experiment_id", "");
  // Created concurrently by someone else: read it back.
  auto again = Call("GET", "experiments/get-by-name", {{"experiment_name", name}});
  if (again.ok()) return (*again)["experiment"].value("experiment_id", "");
  return created.status();
}

}  // namespace air::tracking
