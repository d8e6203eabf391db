// The server's lifecycle: one instance per AIR_HOME (flock), bind, server.json, admission of
// every request (server/access.h) on connections and request heads bounded per client and in
// all (server/connections.h), shutdown on SIGTERM/SIGINT; and the shared JSON/error/body helpers.
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <thread>

#include "base/log.h"
#include "base/private_dir.h"
#include "base/strings.h"
#include "server/connections.h"
#include "server/server_internal.h"

namespace air::server {

Result<DbPool::Lease> DbPool::Acquire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      auto store = std::move(idle_.back());
      idle_.pop_back();
      return Lease(this, std::move(store));
    }
  }
  AIR_ASSIGN_OR_RETURN(auto store, store::Store::Open(db_path_, env_));
  return Lease(this, std::move(store));
}

void DbPool::Return(std::unique_ptr<store::Store> store) {
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(std::move(store));
}

const char* MlflowErrorCode(const Status& status) {
  switch (status.code()) {
    case ErrorCode::kNotFound:
      return "RESOURCE_DOES_NOT_EXIST";
    case ErrorCode::kAlreadyExists:
      return "RESOURCE_ALREADY_EXISTS";
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kFailedPrecondition:
      return "INVALID_PARAMETER_VALUE";
    case ErrorCode::kPermissionDenied:
      return "PERMISSION_DENIED";
    case ErrorCode::kUnavailable:
      return "TEMPORARILY_UNAVAILABLE";
    case ErrorCode::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    default:
      return "INTERNAL_ERROR";
  }
}

int HttpStatusFor(const Status& status) {
  switch (status.code()) {
    case ErrorCode::kNotFound:
      return 404;
    case ErrorCode::kAlreadyExists:
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kFailedPrecondition:
      return 400;
    case ErrorCode::kPermissionDenied:
      return 403;
    case ErrorCode::kUnavailable:
      return 503;
    case ErrorCode::kResourceExhausted:
      return 429;
    default:
      return 500;
  }
}

void SendJson(httplib::Response& res, const nlohmann::json& body, int status) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                  "application/json");
}

void SendError(httplib::Response& res, int http_status, const std::string& error_code,
               const std::string& message) {
  SendJson(res, {{"error_code", error_code}, {"message", message}}, http_status);
}

void SendError(httplib::Response& res, const Status& status) {
  SendError(res, HttpStatusFor(status), MlflowErrorCode(status), status.message());
}

void CloseAfter(httplib::Response& res) { res.set_header("Connection", "close"); }

Result<std::string> ReadBody(const httplib::ContentReader& reader, httplib::Response& res,
                             size_t max_bytes) {
  std::string body;
  bool too_large = false;
  const bool read = reader([&](const char* data, size_t size) {
    if (body.size() + size > max_bytes) {
      too_large = true;
      return false;
    }
    body.append(data, size);
    return true;
  });
  if (too_large) {
    CloseAfter(res);
    return ResourceExhausted(fmt::format("the request body is over {} bytes", max_bytes));
  }
  if (!read) {
    CloseAfter(res);
    return InvalidArgument("the request body could not be read in full");
  }
  return body;
}

namespace {

// The names a Host header may carry besides loopback ones: the bound address, config.yaml's
// advertise_host, and this machine's name (what nodes are given when it is bound to every
// address).
std::vector<std::string> ServerHostNames(const ServerOptions& options) {
  std::vector<std::string> names = {options.host, options.advertise_host};
  if (!tracking::IsLoopbackHost(options.host)) {
    char name[256] = {};
    if (::gethostname(name, sizeof(name) - 1) == 0 && name[0] != '\0') {
      names.emplace_back(name);
      std::string short_name(name);
      if (size_t dot = short_name.find('.'); dot != std::string::npos) {
        names.push_back(short_name.substr(0, dot));
      }
    }
  }
  return names;
}

void SendRefusal(httplib::Response& res, const Refusal& refusal) {
  CloseAfter(res);
  if (refusal.page) return SendLoginNeededPage(res, refusal);
  SendError(res, refusal.status, refusal.error_code, refusal.message);
}

// Holds AIR_HOME/tracking/server.lock for the server's lifetime (the one FileLock, through the
// Env): tried once, never waited for.
Result<FileLock> LockServer(const tracking::ServerFiles& files, Env* env) {
  auto lock = env->LockFile(files.LockPath(), FileLock::Mode::kExclusive, [] { return true; });
  if (!lock.ok() && lock.status().code() == ErrorCode::kCancelled) {
    return AlreadyExists(
        fmt::format("another air server already serves this AIR_HOME ({})", files.LockPath()));
  }
  return lock;
}

// The UI's files: $AIR_WEB_DIR, else an installed air's <prefix>/share/air/web beside its
// bin/ (pip install ./python), else the source tree's web/ (compiled in).
std::string FindWebDir(Env* env) {
  if (auto dir = env->GetEnv("AIR_WEB_DIR"); dir && !dir->empty()) return *dir;
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    const std::string path(exe, static_cast<size_t>(n));
    const std::string installed = path.substr(0, path.rfind('/')) + "/../share/air/web";
    if (env->IsDirectory(installed)) return installed;
  }
  return AIR_SOURCE_WEB_DIR;
}

}  // namespace

Status RunServer(const ServerOptions& options, Env* env,
                 const std::function<void(const std::string& url)>& on_listening) {
  if (options.air_home.empty()) return InvalidArgument("AIR_HOME is empty");
  if (options.token.empty()) {
    return InvalidArgument(
        "air server needs an access token (AIR_HOME/tracking/server.token; `air server` creates "
        "it)");
  }
  tracking::ServerFiles files(options.air_home);
  AIR_RETURN_IF_ERROR(MakePrivateDir(options.air_home, env, "AIR_HOME"));
  AIR_RETURN_IF_ERROR(MakePrivateDir(files.dir, env));
  AIR_RETURN_IF_ERROR(MakePrivateDir(files.ArtifactsDir(), env));
  AIR_ASSIGN_OR_RETURN(FileLock lock, LockServer(files, env));  // released on every return

  ServerContext ctx{
      options,
      env,
      options.air_home,
      files,
      DbPool(options.air_home + "/air.db", env),
      FindWebDir(env),
      "/usr/share/javascript/chart.js/chart.min.js",
      Access(options.token, ServerHostNames(options), !tracking::IsLoopbackHost(options.host), env),
      {}};
  {
    // Creates and migrates the store before the first request.
    AIR_ASSIGN_OR_RETURN(auto lease, ctx.pool.Acquire());
  }

  LimitedServer http(options.limits);
  std::atomic<int64_t> last_request_us{env->MonotonicMicros()};
  const int threads = options.limits.max_connections + kRefusalThreads;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http.set_keep_alive_max_count(100000);
  // One small request per metric (log_metric): without TCP_NODELAY, Nagle's algorithm and the
  // client's delayed ACK add ~40 ms to each.
  http.set_tcp_nodelay(true);
  // Every request is admitted (Host, token or session, browser rules) before its body is read;
  // a client that sends "Expect: 100-continue" hears the refusal before sending the body.
  http.set_pre_routing_handler(
      [&ctx, &last_request_us](const httplib::Request& req, httplib::Response& res) {
        if (auto refusal = ctx.access.Admit(req)) {
          SendRefusal(res, *refusal);
          return httplib::Server::HandlerResponse::Handled;
        }
        // Only admitted requests keep an on-demand server from retiring.
        last_request_us.store(ctx.env->MonotonicMicros());
        return httplib::Server::HandlerResponse::Unhandled;
      });
  http.set_expect_100_continue_handler([&ctx](const httplib::Request& req, httplib::Response& res) {
    if (auto refusal = ctx.access.Admit(req)) {
      SendRefusal(res, *refusal);
      return refusal->status;
    }
    return 100;
  });
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404) {
      SendError(res, 404, "ENDPOINT_NOT_FOUND",
                fmt::format("No API endpoint {} {} (docs/tracking.md lists what air serves)",
                            req.method, req.path));
    } else {
      SendError(res, res.status, "BAD_REQUEST", fmt::format("HTTP {}", res.status));
    }
  });
  http.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        SendError(res, 500, "INTERNAL_ERROR", "air server: " + what);
      });
  http.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("OK", "text/plain");
  });
  RegisterMlflowRoutes(http, ctx);
  RegisterArtifactRoutes(http, ctx);
  RegisterAirRoutes(http, ctx);
  RegisterWebRoutes(http, ctx);
  // Any other request with a body is answered without reading it (httplib would otherwise read
  // it whole into memory before finding no route).
  auto no_route = [](const httplib::Request& req, httplib::Response& res,
                     const httplib::ContentReader&) {
    CloseAfter(res);
    SendError(res, 404, "ENDPOINT_NOT_FOUND",
              fmt::format("No API endpoint {} {} (docs/tracking.md lists what air serves)",
                          req.method, req.path));
  };
  http.Post(".*", no_route);
  http.Put(".*", no_route);
  http.Patch(".*", no_route);
  http.Delete(".*", no_route);

  int port = options.port;
  if (port == 0) {
    // The port of the last run keeps MLFLOW_TRACKING_URI of running nodes valid across a
    // restart; any free port otherwise.
    if (auto previous = tracking::ReadServerInfo(files, env);
        previous && previous->host == options.host &&
        http.bind_to_port(options.host, previous->port)) {
      port = previous->port;
    } else {
      port = http.bind_to_any_port(options.host);
    }
  } else if (!http.bind_to_port(options.host, port)) {
    port = -1;
  }
  if (port <= 0) {
    return Unavailable(
        fmt::format("air server: cannot listen on {}:{}", options.host, options.port));
  }
  tracking::ServerInfo info;
  info.pid = ::getpid();
  info.host = options.host;
  info.port = port;
  std::string url_host =
      options.host.find(':') != std::string::npos ? "[" + options.host + "]" : options.host;
  if (url_host == "0.0.0.0") url_host = "127.0.0.1";
  info.url = fmt::format("http://{}:{}", url_host, port);
  info.token_required = true;
  AIR_RETURN_IF_ERROR(tracking::WriteServerInfo(files, info, env));

  // SIGTERM/SIGINT/SIGHUP stop the server; a thread waits for them, and checks once a second
  // whether the daemon should retire (idle_exit_seconds, server.json gone).
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::atomic<bool> done{false};
  std::thread waiter([&http, &ctx, &done, set, &last_request_us, pid = info.pid] {
    const timespec tick{1, 0};
    while (!done.load()) {
      if (sigtimedwait(&set, nullptr, &tick) > 0) break;
      auto current = tracking::ReadServerInfo(ctx.files, ctx.env);
      if (!current || current->pid != pid) break;
      int idle = ctx.options.idle_exit_seconds;
      if (idle > 0 && ctx.env->MonotonicMicros() - last_request_us.load() > idle * 1'000'000LL) {
        auto lease = ctx.pool.Acquire();
        store::RunFilter live;
        live.include_terminal = false;
        live.limit = 1;
        auto runs = lease.ok() ? (*lease)->ListRuns(live)
                               : Result<std::vector<store::RunRecord>>(lease.status());
        if (runs.ok() && runs->empty()) break;
        last_request_us.store(ctx.env->MonotonicMicros());
      }
    }
    http.stop();
  });
  AIR_INFO("air server for {} listening on {}", options.air_home, info.url);
  if (on_listening) on_listening(info.url);
  bool ok = http.ListenAfterBind();
  done.store(true);
  waiter.join();
  if (!ok) return Unavailable("air server: the listening socket failed");
  return Status::Ok();
}

}  // namespace air::server
