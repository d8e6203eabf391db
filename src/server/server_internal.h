// What the server's route files share: the context every handler reads (store connections,
// AIR_HOME layout, options, access control, artifact uploads in flight), the helpers that answer
// in MLflow's JSON error format ({"error_code": ..., "message": ...} with MLflow's HTTP status for
// the code), and reading a request body within a size limit.
// Thread safety: ServerContext is shared by the handler threads; DbPool, Access and
// ArtifactReservations are internally locked.
#pragma once

#include <httplib.h>

#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/env.h"
#include "base/status.h"
#include "server/access.h"
#include "server/server.h"
#include "store/store.h"
#include "tracking/server_files.h"

namespace air::server {

// Store connections for the handler threads: Acquire() lends one (opening a new one when all
// are lent), its destructor returns it.
class DbPool {
 public:
  DbPool(std::string db_path, Env* env) : db_path_(std::move(db_path)), env_(env) {}

  class Lease {
   public:
    Lease(DbPool* pool, std::unique_ptr<store::Store> store)
        : pool_(pool), store_(std::move(store)) {}
    Lease(Lease&&) = default;
    ~Lease() {
      if (store_) pool_->Return(std::move(store_));
    }
    store::Store* operator->() { return store_.get(); }
    store::Store* get() { return store_.get(); }

   private:
    DbPool* pool_;
    std::unique_ptr<store::Store> store_;
  };

  Result<Lease> Acquire();

 private:
  void Return(std::unique_ptr<store::Store> store);

  std::string db_path_;
  Env* env_;
  std::mutex mu_;
  std::vector<std::unique_ptr<store::Store>> idle_;
};

// Bytes of artifact uploads in flight, per run ("<experiment_id>/<run_id>"), so that
// concurrent uploads to one run cannot each fit its quota and together exceed it.
class ArtifactReservations {
 public:
  std::mutex& mutex() { return mu_; }
  // Both with mutex() held.
  uint64_t InFlight(const std::string& run) const;
  void Add(const std::string& run, int64_t bytes);

 private:
  std::mutex mu_;
  std::map<std::string, uint64_t> bytes_;
};

struct ServerContext {
  ServerOptions options;
  Env* env = nullptr;
  std::string air_home;
  tracking::ServerFiles files;
  DbPool pool;
  std::string web_dir;       // the UI's files (web/)
  std::string chartjs_path;  // Debian libjs-chart.js
  Access access;
  ArtifactReservations reservations;
};

// MLflow's error_code for a Status, and its HTTP status.
const char* MlflowErrorCode(const Status& status);
int HttpStatusFor(const Status& status);

void SendJson(httplib::Response& res, const nlohmann::json& body, int status = 200);
// {"error_code": ..., "message": ...}
void SendError(httplib::Response& res, const Status& status);
void SendError(httplib::Response& res, int http_status, const std::string& error_code,
               const std::string& message);

// Marks the response as the connection's last: after a refusal the request's body may still be
// unread on the socket.
void CloseAfter(httplib::Response& res);

// The request body, read through `reader` up to `max_bytes`. kResourceExhausted (and
// CloseAfter) past the limit; kInvalidArgument when it cannot be read.
Result<std::string> ReadBody(const httplib::ContentReader& reader, httplib::Response& res,
                             size_t max_bytes);

void RegisterMlflowRoutes(httplib::Server& server, ServerContext& ctx);
void RegisterArtifactRoutes(httplib::Server& server, ServerContext& ctx);
void RegisterAirRoutes(httplib::Server& server, ServerContext& ctx);
void RegisterWebRoutes(httplib::Server& server, ServerContext& ctx);
// A refusal as a browser's page (Refusal::page: a navigation that needs a login).
void SendLoginNeededPage(httplib::Response& res, const Refusal& refusal);

}  // namespace air::server
