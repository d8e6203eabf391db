// MLflow's tracking REST API (/api/2.0/mlflow/...) over TrackingStore: the endpoints the
// mlflow Python client calls for experiments, runs, params, metrics, tags, search and metric
// history (docs/tracking.md lists them). Reads take their fields as a query string (GET) or a
// JSON body (POST); writes only as a JSON body (POST), read within MLflow's 1 MB request limit
// and parsed with a depth limit. Errors use MLflow's codes and messages.
#include <fmt/format.h>

#include <functional>
#include <set>

#include "base/strings.h"
#include "server/mlflow_json.h"
#include "server/server_internal.h"
#include "tracking/run_search.h"
#include "tracking/tracking_store.h"
#include "tracking/validation.h"

namespace air::server {
namespace {

using nlohmann::json;
using tracking::TrackingStore;

using Handler = std::function<Result<json>(const Fields&, TrackingStore&)>;

// The request's fields: its query parameters, overlaid by its JSON body (moved in, never
// copied: a body's values may be deep).
Result<json> RequestFields(const httplib::Request& req, const std::string& body) {
  json fields = json::object();
  for (const auto& [key, value] : req.params) {
    if (fields.contains(key)) {
      if (!fields[key].is_array()) fields[key] = json::array({fields[key]});
      fields[key].push_back(value);
    } else {
      fields[key] = value;
    }
  }
  if (Trim(body).empty()) return fields;
  AIR_ASSIGN_OR_RETURN(json parsed, ParseJsonObject(body));
  for (auto it = parsed.begin(); it != parsed.end(); ++it) fields[it.key()] = std::move(*it);
  return fields;
}

void Serve(ServerContext& ctx, const httplib::Request& req, const std::string& body,
           httplib::Response& res, const Handler& handler) {
  auto fields = RequestFields(req, body);
  if (!fields.ok()) {
    SendError(res, 400, "MALFORMED_REQUEST", fields.status().message());
    return;
  }
  auto lease = ctx.pool.Acquire();
  if (!lease.ok()) {
    SendError(res, lease.status());
    return;
  }
  TrackingStore store((*lease)->db(), ctx.env);
  auto out = handler(Fields(std::move(*fields)), store);
  if (!out.ok()) {
    SendError(res, out.status());
    return;
  }
  SendJson(res, *out);
}

// A POST or PATCH: the JSON body, read up to MLflow's request size limit.
void ServeWithBody(ServerContext& ctx, const httplib::Request& req, httplib::Response& res,
                   const httplib::ContentReader& reader, const Handler& handler) {
  auto body = ReadBody(reader, res, tracking::kMaxBatchRequestBytes);
  if (!body.ok()) {
    std::string message = body.status().code() == ErrorCode::kResourceExhausted
                              ? fmt::format("Batched logging API requests must be at most {} bytes",
                                            tracking::kMaxBatchRequestBytes)
                              : body.status().message();
    SendError(res, 400, "MALFORMED_REQUEST", message);
    return;
  }
  Serve(ctx, req, *body, res, handler);
}

Result<std::vector<tracking::KeyValue>> KeyValuesField(const Fields& f, const char* name) {
  std::vector<tracking::KeyValue> out;
  auto it = f.json().find(name);
  if (it == f.json().end() || it->is_null()) return out;
  if (!it->is_array()) {
    return InvalidArgument(fmt::format("Invalid value for parameter '{}': expected a list", name));
  }
  for (size_t i = 0; i < it->size(); ++i) {
    AIR_ASSIGN_OR_RETURN(tracking::KeyValue kv,
                         KeyValueFromJson((*it)[i], fmt::format("{}[{}]", name, i)));
    out.push_back(std::move(kv));
  }
  return out;
}

Result<std::vector<std::string>> StringList(const Fields& f, const char* name) {
  std::vector<std::string> out;
  auto it = f.json().find(name);
  if (it == f.json().end() || it->is_null()) return out;
  if (it->is_string()) return std::vector<std::string>{it->get<std::string>()};
  if (!it->is_array()) {
    return InvalidArgument(fmt::format("Invalid value for parameter '{}': expected a list", name));
  }
  for (const json& v : *it) {
    if (!v.is_string()) {
      return InvalidArgument(
          fmt::format("Invalid value for parameter '{}': expected a list of strings", name));
    }
    out.push_back(v.get<std::string>());
  }
  return out;
}

Result<int> MaxResults(const Fields& f, int fallback) {
  AIR_ASSIGN_OR_RETURN(std::optional<int64_t> max, f.OptionalInt("max_results"));
  if (!max) return fallback;
  if (*max <= 0 || *max > 50000) {
    return InvalidArgument(fmt::format(
        "Invalid value {} for parameter 'max_results' supplied. It must be between 1 and 50000.",
        *max));
  }
  return static_cast<int>(*max);
}

// --- experiments ---

Result<json> CreateExperiment(const Fields& f, TrackingStore& store) {
  AIR_ASSIGN_OR_RETURN(std::string name, f.RequiredString("name"));
  if (auto location = f.OptionalString("artifact_location"); location && !location->empty()) {
    return InvalidArgument(
        "air keeps artifacts in its own store: artifact_location cannot be set (docs/tracking.md)");
  }
  AIR_ASSIGN_OR_RETURN(auto tags, KeyValuesField(f, "tags"));
  AIR_ASSIGN_OR_RETURN(tracking::Experiment e, store.CreateExperiment(name, tags));
  return json{{"experiment_id", e.experiment_id}};
}

Result<json> GetExperiment(const Fields& f, TrackingStore& store) {
  AIR_ASSIGN_OR_RETURN(std::string id, f.RequiredString("experiment_id"));
  AIR_ASSIGN_OR_RETURN(tracking::Experiment e, store.GetExperiment(id));
  return json{{"experiment", ExperimentJson(e)}};
}

Result<json> GetExperimentByName(const Fields& f, TrackingStore& store) {
  AIR_ASSIGN_OR_RETURN(std::string name, f.RequiredString("experiment_name"));
  AIR_ASSIGN_OR_RETURN(tracking::Experiment e, store.GetExperimentByName(name));
  return json{{"experiment", ExperimentJson(e)}};
}

// The filter of experiments/search: "" or `name = '...'` / `name LIKE '...'` / ILIKE.
Result<std::function<bool(const std::string&)>> ExperimentNameFilter(const std::string& filter) {
  std::string_view text = Trim(filter);
  if (text.empty())
    return std::function<bool(const std::string&)>([](const std::string&) { return true; });
  // Reuse the run filter's parser and matcher on a run whose name is the experiment's.
  std::string as_run = std::string(text);
  for (const char* prefix : {"name", "attribute.name", "attributes.name"}) {
    if (StartsWith(as_run, prefix)) {
      as_run = "attributes.run_name" + as_run.substr(std::char_traits<char>::length(prefix));
      break;
    }
  }
  if (!StartsWith(as_run, "attributes.run_name")) {
    return InvalidArgument(fmt::format(
        "Invalid filter '{}': air's experiments/search filters by name only (name = '...', name "
        "LIKE '...')",
        filter));
  }
  tracking::SearchRequest probe;
  probe.filter = as_run;
  AIR_RETURN_IF_ERROR(tracking::SearchRuns({}, probe).status());
  return std::function<bool(const std::string&)>([as_run](const std::string& name) {
    tracking::Run run;
    run.info.run_name = name;
    tracking::SearchRequest request;
    request.filter = as_run;
    auto page = tracking::SearchRuns({run}, request);
    return page.ok() && !page->runs.empty();
  });
}

Result<json> SearchExperiments(const Fields& f, TrackingStore& store) {
  AIR_ASSIGN_OR_RETURN(tracking::ViewType view,
                       tracking::ParseViewType(f.OptionalString("view_type").value_or("")));
  AIR_ASSIGN_OR_RETURN(int max_results, MaxResults(f, 1000));
  AIR_ASSIGN_OR_RETURN(auto matches, ExperimentNameFilter(f.OptionalString("filter").value_or("")));
  AIR_ASSIGN_OR_RETURN(std::vector<tracking::Experiment> all, store.ListExperiments(view));
  size_t offset = 0;
  if (auto token = f.OptionalString("page_token"); token && !token->empty()) {
    offset = std::strtoull(token->c_str(), nullptr, 10);
  }
  json out = json::array();
  size_t matched = 0;
  std::string next;
  for (const auto& e : all) {
    if (!matches(e.name)) continue;
    if (matched++ < offset) continue;
    if (out.size() == static_cast<size_t>(max_results)) {
      next = std::to_string(offset + out.size());
      break;
    }
    out.push_back(ExperimentJson(e));
  }
  json body = {{"experiments", out}};
  if (!next.empty()) body["next_page_token"] = next;
  return body;
}

Result<json> SetExperimentStage(const Fields& f, TrackingStore& store, const char* stage) {
  AIR_ASSIGN_OR_RETURN(std::string id, f.RequiredString("experiment_id"));
  AIR_RETURN_IF_ERROR(store.SetExperimentLifecycle(id, stage));
  return json::object();
}

Result<json> UpdateExperiment(const Fields& f, TrackingStore& store) {
  AIR_ASSIGN_OR_RETURN(std::string id, f.RequiredString("experiment_id"));
  if (auto name = f.OptionalString("new_name"); name && !name->empty()) {
    AIR_RETURN_IF_ERROR(store.RenameExperiment(id, *name));
  }
  return json::object();
}

Result<json> SetExperimentTag(const Fields& f, TrackingStore& store) {
  AIR_ASSIGN_OR_RETURN(std::string id, f.RequiredString("experiment_id"));
  AIR_ASSIGN_OR_RETURN(std::string key, f.RequiredString("key"));
  AIR_RETURN_IF_ERROR(store.SetExperimentTag(id, {key, f.OptionalString("value").value_or("")}));
  return json::object();
}

// --- runs ---

Result<json> CreateRun(const Fields& f, TrackingStore& store) {
  tracking::NewRun run;
  run.experiment_id = f.OptionalString("experiment_id").value_or("0");
  run.user_id = f.OptionalString("user_id").value_or("");
  run.run_name = f.OptionalString("run_name").value_or("");
  AIR_ASSIGN_OR_RETURN(run.start_time, f.OptionalInt("start_time"));
  AIR_ASSIGN_OR_RETURN(run.tags, KeyValuesField(f, "tags"));
  AIR_ASSIGN_OR_RETURN(tracking::RunInfo info, store.CreateRun(run));
  AIR_ASSIGN_OR_RETURN(tracking::Run created, store.GetRun(info.run_id));
  return json{{"run", RunJson(created)}};
}

Result<json> GetRun(const Fields& f, TrackingStore& store) {
  AIR_ASSIGN_OR_RETURN(std::string id, f.RunId());
  AIR_ASSIGN_OR_RETURN(tracking::Run run, store.GetRun(id));
  return json{{"run", RunJson(run)}};
}

Result<json> UpdateRun(const Fields& f, TrackingStore& store) {
  AIR_ASSIGN_OR_RETURN(std::string id, f.RunId());
  tracking::RunUpdate update;
  update.status = f.OptionalString("status");
  AIR_ASSIGN_OR_RETURN(update.end_time, f.OptionalInt("end_time"));
  update.run_name = f.OptionalString("run_name");
  AIR_ASSIGN_OR_RETURN(tracking::RunInfo info, store.UpdateRun(id, update));
  return json{{"run_info", RunInfoJson(info)}};
}

Result<json> SetRunStage(const Fields& f, TrackingStore& store, const char* stage) {
  AIR_ASSIGN_OR_RETURN(std::string id, f.RunId());
  AIR_RETURN_IF_ERROR(store.SetRunLifecycle(id, stage));
  return json::object();
}

Result<json> LogMetric(const Fields& f, TrackingStore& store) {
  AIR_ASSIGN_OR_RETURN(std::string id, f.RunId());
  AIR_ASSIGN_OR_RETURN(tracking::Metric metric, MetricFromJson(f.json(), ""));
  tracking::Batch batch;
  batch.metrics.push_back(std::move(metric));
  AIR_RETURN_IF_ERROR(store.LogBatch(id, batch));
  return json::object();
}

Result<json> LogParam(const Fields& f, TrackingStore& store) {
  AIR_ASSIGN_OR_RETURN(std::string id, f.RunId());
  AIR_ASSIGN_OR_RETURN(tracking::KeyValue param, KeyValueFromJson(f.json(), ""));
  tracking::Batch batch;
  batch.params.push_back(std::move(param));
  AIR_RETURN_IF_ERROR(store.LogBatch(id, batch));
  return json::object();
}

Result<json> SetTag(const Fields& f, TrackingStore& store) {
  AIR_ASSIGN_OR_RETURN(std::string id, f.RunId());
  AIR_ASSIGN_OR_RETURN(tracking::KeyValue tag, KeyValueFromJson(f.json(), ""));
  tracking::Batch batch;
  batch.tags.push_back(std::move(tag));
  AIR_RETURN_IF_ERROR(store.LogBatch(id, batch));
  return json::object();
}

Result<json> DeleteTag(const Fields& f, TrackingStore& store) {
  AIR_ASSIGN_OR_RETURN(std::string id, f.RunId());
  AIR_ASSIGN_OR_RETURN(std::string key, f.RequiredString("key"));
  AIR_RETURN_IF_ERROR(store.DeleteTag(id, key));
  return json::object();
}

Result<json> LogBatch(const Fields& f, TrackingStore& store) {
  AIR_ASSIGN_OR_RETURN(std::string id, f.RunId());
  tracking::Batch batch;
  if (auto it = f.json().find("metrics"); it != f.json().end() && !it->is_null()) {
    if (!it->is_array()) {
      return InvalidArgument("Invalid value for parameter 'metrics': expected a list");
    }
    for (size_t i = 0; i < it->size(); ++i) {
      AIR_ASSIGN_OR_RETURN(tracking::Metric m,
                           MetricFromJson((*it)[i], fmt::format("metrics[{}]", i)));
      batch.metrics.push_back(std::move(m));
    }
  }
  AIR_ASSIGN_OR_RETURN(batch.params, KeyValuesField(f, "params"));
  AIR_ASSIGN_OR_RETURN(batch.tags, KeyValuesField(f, "tags"));
  AIR_RETURN_IF_ERROR(store.LogBatch(id, batch));
  return json::object();
}

Result<json> SearchRuns(const Fields& f, TrackingStore& store) {
  AIR_ASSIGN_OR_RETURN(std::vector<std::string> experiment_ids, StringList(f, "experiment_ids"));
  AIR_ASSIGN_OR_RETURN(tracking::ViewType view,
                       tracking::ParseViewType(f.OptionalString("run_view_type").value_or("")));
  tracking::SearchRequest request;
  request.filter = f.OptionalString("filter").value_or("");
  AIR_ASSIGN_OR_RETURN(request.order_by, StringList(f, "order_by"));
  AIR_ASSIGN_OR_RETURN(request.max_results, MaxResults(f, 1000));
  request.page_token = f.OptionalString("page_token").value_or("");
  AIR_ASSIGN_OR_RETURN(std::vector<tracking::Run> runs, store.ListRuns(experiment_ids, view));
  AIR_ASSIGN_OR_RETURN(tracking::SearchPage page, tracking::SearchRuns(std::move(runs), request));
  json out = json::array();
  for (const auto& run : page.runs) out.push_back(RunJson(run));
  json body = json::object();
  if (!out.empty()) body["runs"] = out;
  if (!page.next_page_token.empty()) body["next_page_token"] = page.next_page_token;
  return body;
}

Result<json> GetMetricHistory(const Fields& f, TrackingStore& store) {
  AIR_ASSIGN_OR_RETURN(std::string id, f.RunId());
  AIR_ASSIGN_OR_RETURN(std::string key, f.RequiredString("metric_key"));
  AIR_ASSIGN_OR_RETURN(int max_results, MaxResults(f, 50000));
  AIR_ASSIGN_OR_RETURN(std::vector<tracking::Metric> history, store.GetMetricHistory(id, key));
  size_t offset = 0;
  if (auto token = f.OptionalString("page_token"); token && !token->empty()) {
    offset = std::strtoull(token->c_str(), nullptr, 10);
  }
  bool paged = f.json().contains("max_results") || offset > 0;
  size_t end =
      paged ? std::min(history.size(), offset + static_cast<size_t>(max_results)) : history.size();
  json metrics = json::array();
  for (size_t i = offset; i < end; ++i) metrics.push_back(MetricJson(history[i]));
  json body = {{"metrics", metrics}};
  if (end < history.size()) body["next_page_token"] = std::to_string(end);
  return body;
}

}  // namespace

void RegisterMlflowRoutes(httplib::Server& http, ServerContext& ctx) {
  const std::vector<std::pair<std::string, Handler>> routes = {
      {"experiments/create", CreateExperiment},
      {"experiments/get", GetExperiment},
      {"experiments/get-by-name", GetExperimentByName},
      {"experiments/search", SearchExperiments},
      {"experiments/list", SearchExperiments},
      {"experiments/delete",
       [](const Fields& f, TrackingStore& s) { return SetExperimentStage(f, s, "deleted"); }},
      {"experiments/restore",
       [](const Fields& f, TrackingStore& s) { return SetExperimentStage(f, s, "active"); }},
      {"experiments/update", UpdateExperiment},
      {"experiments/set-experiment-tag", SetExperimentTag},
      {"runs/create", CreateRun},
      {"runs/get", GetRun},
      {"runs/update", UpdateRun},
      {"runs/delete",
       [](const Fields& f, TrackingStore& s) { return SetRunStage(f, s, "deleted"); }},
      {"runs/restore",
       [](const Fields& f, TrackingStore& s) { return SetRunStage(f, s, "active"); }},
      {"runs/log-metric", LogMetric},
      {"runs/log-parameter", LogParam},
      {"runs/log-batch", LogBatch},
      {"runs/set-tag", SetTag},
      {"runs/delete-tag", DeleteTag},
      {"runs/search", SearchRuns},
      {"metrics/get-history", GetMetricHistory},
      // air stores no logged models (MLflow 3's model entities): every search finds none.
      {"logged-models/search",
       [](const Fields&, TrackingStore&) -> Result<json> {
         return json{{"models", json::array()}};
       }},
  };
  // Reads answer GET (the mlflow client's choice) and POST; everything that changes state is
  // POST (or PATCH) with a JSON body only, never a GET a page could trigger with a link.
  const std::set<std::string> reads = {"experiments/get",
                                       "experiments/get-by-name",
                                       "experiments/search",
                                       "experiments/list",
                                       "runs/get",
                                       "runs/search",
                                       "metrics/get-history",
                                       "logged-models/search"};
  for (const auto& [path, handler] : routes) {
    const bool read = reads.count(path) != 0;
    for (const char* prefix : {"/api/2.0/mlflow/", "/ajax-api/2.0/mlflow/"}) {
      auto with_body = [&ctx, handler](const httplib::Request& req, httplib::Response& res,
                                       const httplib::ContentReader& reader) {
        ServeWithBody(ctx, req, res, reader, handler);
      };
      http.Post(prefix + path, with_body);
      if (read) {
        http.Get(prefix + path,
                 [&ctx, handler](const httplib::Request& req, httplib::Response& res) {
                   Serve(ctx, req, "", res, handler);
                 });
      } else {
        http.Patch(prefix + path, with_body);
        http.Get(prefix + path, [path](const httplib::Request&, httplib::Response& res) {
          SendError(res, 405, "BAD_REQUEST",
                    fmt::format("{} changes data: send it as POST with Content-Type: "
                                "application/json",
                                path));
        });
      }
    }
  }
  // MLflow 3's client asks what the server supports before downloading artifacts.
  http.Get("/api/3.0/mlflow/server-info", [](const httplib::Request&, httplib::Response& res) {
    SendJson(res, {{"store_type", "air"},
                   {"workspaces_enabled", false},
                   {"trace_archival_enabled", false},
                   {"multipart_uploads_enabled", false},
                   {"multipart_downloads_enabled", false}});
  });
}

}  // namespace air::server
