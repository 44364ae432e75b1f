#include "reality/pg_server.hpp"

#include <libpq-fe.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "reality/children.hpp"

namespace locksim::reality {

namespace {

constexpr const char* kBinDir = "/usr/lib/postgresql/15/bin";
constexpr std::int64_t kStartDeadlineNs = 10'000'000'000;
constexpr std::int64_t kStopDeadlineNs = 5'000'000'000;

/// The binary's path: $LOCKSIM_PG_BINDIR (tests) or Debian's PostgreSQL 15 folder.
std::string pg_binary(const char* name) {
  const char* env = std::getenv("LOCKSIM_PG_BINDIR");
  const std::string path = fmt::format("{}/{}", env ? env : kBinDir, name);
  return ::access(path.c_str(), X_OK) == 0 ? path : std::string();
}

using Conn = std::unique_ptr<PGconn, decltype(&PQfinish)>;
using Result = std::unique_ptr<PGresult, decltype(&PQclear)>;

Conn connect(const std::string& conninfo) {
  return Conn(PQconnectdb(conninfo.c_str()), &PQfinish);
}

Result exec(PGconn* c, const std::string& sql) {
  Result r(PQexec(c, sql.c_str()), &PQclear);
  const auto st = PQresultStatus(r.get());
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
    throw std::runtime_error(fmt::format("PostgreSQL: {}", PQerrorMessage(c)));
  return r;
}

constexpr const char* kSchema = R"SQL(
CREATE TABLE leases (name text PRIMARY KEY, owner text NOT NULL, token bigint NOT NULL,
                     expires timestamptz NOT NULL);
CREATE TABLE lease_grants (seq bigserial PRIMARY KEY, name text NOT NULL, owner text NOT NULL,
                           token bigint NOT NULL, expires timestamptz NOT NULL, recorded timestamptz NOT NULL);
CREATE TABLE fence (key text PRIMARY KEY, value text, highest bigint NOT NULL DEFAULT 0);
CREATE TABLE resource_log (seq bigserial PRIMARY KEY, key text NOT NULL, client text NOT NULL,
                           write_id bigint NOT NULL, token bigint, accepted boolean NOT NULL, value text NOT NULL,
                           reason text NOT NULL, at timestamptz NOT NULL);
CREATE FUNCTION record_grant() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.owner <> '' AND (TG_OP = 'INSERT' OR NEW.owner IS DISTINCT FROM OLD.owner
                          OR NEW.token IS DISTINCT FROM OLD.token) THEN
    INSERT INTO lease_grants (name, owner, token, expires, recorded)
      VALUES (NEW.name, NEW.owner, NEW.token, NEW.expires, clock_timestamp());
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER lease_grants_record AFTER INSERT OR UPDATE ON leases FOR EACH ROW EXECUTE FUNCTION record_grant();
CREATE FUNCTION write_with_fence(k text, c text, w bigint, t bigint, v text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
  h bigint;
  ok boolean := true;
  why text := '';
BEGIN
  INSERT INTO fence (key, value) VALUES (k, NULL) ON CONFLICT DO NOTHING;
  SELECT highest INTO h FROM fence WHERE key = k FOR UPDATE;
  IF t IS NOT NULL AND t < h THEN
    ok := false;
    why := format('token %s < highest %s', t, h);
  ELSE
    UPDATE fence SET value = v, highest = greatest(highest, coalesce(t, 0)) WHERE key = k;
  END IF;
  INSERT INTO resource_log (key, client, write_id, token, accepted, value, reason, at)
    VALUES (k, c, w, t, ok, v, why, clock_timestamp());
  RETURN CASE WHEN ok THEN 'A' ELSE 'R ' || why END;
END $$;
)SQL";

/// The owner PostgreSQL must run as: nobody to change to when not root; root: the user `postgres`.
struct RunAs {
  bool change = false;
  uid_t uid = 0;
  gid_t gid = 0;
};

RunAs run_as() {
  RunAs r;
  if (::geteuid() != 0) return r;
  const passwd* pw = ::getpwnam("postgres");
  if (pw == nullptr)
    throw StartError(
        "PostgreSQL refuses to run as root and there is no user `postgres` to run it as (the Debian package "
        "postgresql-15 creates it)");
  r.change = true;
  r.uid = pw->pw_uid;
  r.gid = pw->pw_gid;
  return r;
}

}  // namespace

std::string pg_missing() {
  if (pg_binary("initdb").empty() || pg_binary("postgres").empty())
    return fmt::format(
        "PostgreSQL 15 is not installed ({}/initdb and postgres; Debian: apt-get install postgresql)",
        std::getenv("LOCKSIM_PG_BINDIR") ? std::getenv("LOCKSIM_PG_BINDIR") : kBinDir);
  return {};
}

PgServer::PgServer(std::string name, std::string dir) : name_(std::move(name)), dir_(std::move(dir)) {
  ::mkdir(dir_.c_str(), 0700);
  port_ = free_loopback_port();
}

PgServer::~PgServer() {
  stop();
}

std::string PgServer::conninfo(std::uint16_t port) const {
  return fmt::format("host=127.0.0.1 port={} dbname=postgres user=locksim connect_timeout=2", port);
}

pid_t PgServer::spawn(const std::vector<std::string>& args, const std::string& log) {
  const RunAs as = run_as();
  if (as.change) {
    // The run's folder (made 0700 by root) must be crossed by `postgres`; this folder is its own.
    const std::string parent = std::filesystem::path(dir_).parent_path().string();
    ::chmod(parent.c_str(), 0711);
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir_))
      (void)!::chown(e.path().c_str(), as.uid, as.gid);
    (void)!::chown(dir_.c_str(), as.uid, as.gid);
  }
  return spawn_server(args,
                      {.dir = dir_, .log = log, .change_user = as.change, .uid = as.uid, .gid = as.gid});
}

void PgServer::start() {
  if (const std::string why = pg_missing(); !why.empty()) throw StartError(why);
  const std::string log = dir_ + "/postgres.log";
  if (!initialized_) {
    const pid_t p = spawn({pg_binary("initdb"), "-D", dir_ + "/data", "-U", "locksim", "--auth=trust",
                           "--no-sync", "--encoding=UTF8", "--locale=C", "--no-instructions"},
                          dir_ + "/initdb.log");
    int st = 0;
    for (;;) {
      const pid_t w = ::waitpid(p, &st, WNOHANG);
      if (w == p) break;
      if (interrupted()) {
        kill_and_reap(p);
        check_interrupted();
      }
      ::usleep(10'000);
    }
    forget_child(p);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
      throw StartError(fmt::format("{}: initdb failed (exit {}):\n{}", name_,
                                   WIFEXITED(st) ? WEXITSTATUS(st) : -1, log_tail(dir_ + "/initdb.log", 8)));
    initialized_ = true;
  }
  pid_ = spawn({pg_binary("postgres"), "-D", dir_ + "/data", "-p", std::to_string(port_), "-c",
                "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=" + dir_, "-c",
                "max_connections=40", "-c", "shared_buffers=16MB", "-c", "log_min_messages=warning"},
               log);
  const std::int64_t deadline = mono_ns() + kStartDeadlineNs;
  for (;;) {
    int st = 0;
    if (::waitpid(pid_, &st, WNOHANG) == pid_) {
      forget_child(pid_);
      pid_ = -1;
      throw StartError(
          fmt::format("{}: postgres exited at start-up (port {}):\n{}", name_, port_, log_tail(log, 8)));
    }
    if (PQping(conninfo().c_str()) == PQPING_OK) {
      Conn c = connect(conninfo());
      if (PQstatus(c.get()) == CONNECTION_OK) {
        try {
          exec(c.get(), "SELECT 1");
          if (!schema_) {
            exec(c.get(), kSchema);
            schema_ = true;
          }
          return;
        } catch (const std::runtime_error& e) {
          stop();
          throw StartError(fmt::format("{}: {}", name_, e.what()));
        }
      }
    }
    if (interrupted()) {
      stop();
      check_interrupted();
    }
    if (mono_ns() > deadline) {
      stop();
      throw StartError(fmt::format("{}: postgres did not answer a query within {} s (port {}):\n{}", name_,
                                   kStartDeadlineNs / 1'000'000'000, port_, log_tail(log, 8)));
    }
    ::usleep(20'000);
  }
}

void PgServer::kill() {
  kill_and_reap(pid_);
  pid_ = -1;
  reap_adopted();  // the backends it left
}

void PgServer::stop() {
  if (pid_ <= 0) return;
  // Immediate shutdown: the postmaster stops its backends and exits once they are gone.
  ::kill(pid_, SIGQUIT);
  const std::int64_t deadline = mono_ns() + kStopDeadlineNs;
  while (mono_ns() < deadline) {
    int st = 0;
    if (::waitpid(pid_, &st, WNOHANG) == pid_) {
      forget_child(pid_);
      pid_ = -1;
      reap_adopted();  // none after a shutdown; a postmaster SIGKILLed by Ctrl-C left its backends
      return;
    }
    ::usleep(5'000);
  }
  kill();
}

std::vector<PgGrant> PgServer::grants() const {
  Conn c = connect(conninfo());
  if (PQstatus(c.get()) != CONNECTION_OK)
    throw std::runtime_error(fmt::format("{}: cannot read lease_grants: {}", name_, PQerrorMessage(c.get())));
  Result r =
      exec(c.get(),
           "SELECT (extract(epoch FROM recorded) * 1000000)::bigint, name, owner, token FROM lease_grants "
           "ORDER BY seq");
  std::vector<PgGrant> out;
  for (int i = 0; i < PQntuples(r.get()); ++i)
    out.push_back({std::stoll(PQgetvalue(r.get(), i, 0)) * 1000, PQgetvalue(r.get(), i, 1),
                   PQgetvalue(r.get(), i, 2), std::stoull(PQgetvalue(r.get(), i, 3))});
  return out;
}

std::vector<PgWrite> PgServer::writes() const {
  Conn c = connect(conninfo());
  if (PQstatus(c.get()) != CONNECTION_OK)
    throw std::runtime_error(fmt::format("{}: cannot read resource_log: {}", name_, PQerrorMessage(c.get())));
  Result r =
      exec(c.get(),
           "SELECT (extract(epoch FROM at) * 1000000)::bigint, key, client, value, reason, write_id, token, "
           "accepted FROM resource_log ORDER BY seq");
  std::vector<PgWrite> out;
  for (int i = 0; i < PQntuples(r.get()); ++i) {
    PgWrite w;
    w.real_ns = std::stoll(PQgetvalue(r.get(), i, 0)) * 1000;
    w.key = PQgetvalue(r.get(), i, 1);
    w.client = PQgetvalue(r.get(), i, 2);
    w.value = PQgetvalue(r.get(), i, 3);
    w.reason = PQgetvalue(r.get(), i, 4);
    w.write = std::stoull(PQgetvalue(r.get(), i, 5));
    if (!PQgetisnull(r.get(), i, 6)) w.token = std::stoull(PQgetvalue(r.get(), i, 6));
    w.accepted = PQgetvalue(r.get(), i, 7)[0] == 't';
    out.push_back(std::move(w));
  }
  return out;
}

}  // namespace locksim::reality
