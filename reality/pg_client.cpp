#include "reality/pg_client.hpp"

#include <libpq-fe.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include <poll.h>

#include "reality/children.hpp"

namespace locksim::reality {

namespace {

using Result = std::unique_ptr<PGresult, decltype(&PQclear)>;

/// A statement's answer: the rows, or the error's SQLSTATE (empty: no answer at all).
struct Answer {
  Result rows{nullptr, &PQclear};
  std::string sqlstate;
  bool ok() const { return rows != nullptr; }
  std::string at(int row, int col) const { return PQgetvalue(rows.get(), row, col); }
  int count() const { return PQntuples(rows.get()); }
};

Answer run(PGconn* c, const char* sql, const std::vector<std::string>& params = {}) {
  std::vector<const char*> values;
  for (const std::string& p : params) values.push_back(p.c_str());
  Answer a;
  Result r(PQexecParams(c, sql, static_cast<int>(values.size()), nullptr, values.data(), nullptr, nullptr, 0),
           &PQclear);
  const ExecStatusType st = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
  if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
    a.rows = std::move(r);
  } else if (r) {
    const char* s = PQresultErrorField(r.get(), PG_DIAG_SQLSTATE);
    a.sqlstate = s ? s : "";
  }
  return a;
}

/// 40001 serialization_failure, 40P01 deadlock_detected, 23505 unique_violation (two transactions inserted
/// the absent lease row at once): the transaction runs again.
bool retryable(const std::string& sqlstate) {
  return sqlstate == "40001" || sqlstate == "40P01" || sqlstate == "23505";
}

}  // namespace

PgLink::PgLink(std::string conninfo, std::int64_t tx_timeout_ns, std::string name, std::int64_t t0, Note note)
    : conninfo_(std::move(conninfo)),
      tx_timeout_ns_(tx_timeout_ns),
      name_(std::move(name)),
      t0_(t0),
      note_(std::move(note)) {}

PgLink::~PgLink() {
  drop();
}

Time PgLink::now() {
  return Time{mono_ns() - t0_};
}
Time PgLink::wall() {
  return Time{real_ns()};
}
void PgLink::note(std::string_view label, std::string detail) {
  note_(std::string(label), detail);
}

void PgLink::drop() {
  if (conn_) PQfinish(conn_);
  conn_ = nullptr;
}

PGconn* PgLink::conn() {
  if (conn_ && PQstatus(conn_) != CONNECTION_OK) drop();
  if (conn_) return conn_;
  conn_ = PQconnectdb(conninfo_.c_str());
  if (PQstatus(conn_) != CONNECTION_OK) {
    drop();
    return nullptr;
  }
  const std::int64_t ms = std::max<std::int64_t>(1, tx_timeout_ns_ / 1'000'000);
  if (!run(conn_, fmt::format("SET statement_timeout = {}", ms).c_str()).ok()) {
    drop();
    return nullptr;
  }
  return conn_;
}

std::optional<dblease::SqlReply> PgLink::exec(dblease::SqlRequest rq, Time deadline, std::string_view note) {
  using dblease::SqlOp;
  if (deadline - now() <= 0ns) return std::nullopt;
  PGconn* c = conn();
  if (!c) return std::nullopt;
  dblease::SqlReply reply;
  if (rq.op == SqlOp::begin) {
    // A transaction the algorithm gave up on (an error, a timeout) is still open here: end it first.
    if (PQtransactionStatus(c) != PQTRANS_IDLE) run(c, "ROLLBACK");
    if (Answer b = run(c, "BEGIN ISOLATION LEVEL SERIALIZABLE"); !b.ok()) {
      if (PQstatus(c) != CONNECTION_OK) drop();
      return std::nullopt;
    }
  }
  const char* sql = "";
  std::vector<std::string> params;
  switch (rq.op) {
    case SqlOp::begin:
      sql = "SELECT (extract(epoch FROM now()) * 1000000)::bigint";  // tx.Now()
      break;
    case SqlOp::select_for_update:
      sql =
          "SELECT owner, token, (extract(epoch FROM expires) * 1000000)::bigint FROM leases WHERE name = $1 "
          "FOR UPDATE";
      params = {rq.key};
      break;
    case SqlOp::update:
      sql =
          "INSERT INTO leases (name, owner, token, expires) VALUES ($1, $2, $3, 'epoch'::timestamptz + $4 * "
          "interval '1 microsecond') ON CONFLICT (name) DO UPDATE SET owner = EXCLUDED.owner, token = "
          "EXCLUDED.token, expires = EXCLUDED.expires";
      params = {rq.key, rq.row.owner, std::to_string(rq.row.token),
                std::to_string(rq.row.expires.count() / 1000)};
      break;
    case SqlOp::commit:
      sql = "COMMIT";
      break;
    case SqlOp::rollback:
      sql = "ROLLBACK";
      break;
  }
  std::vector<const char*> values;
  for (const std::string& p : params) values.push_back(p.c_str());
  if (!PQsendQueryParams(c, sql, static_cast<int>(values.size()), nullptr, values.data(), nullptr, nullptr,
                         0)) {
    drop();
    return std::nullopt;
  }
  if (!note.empty()) this->note(note, {});
  // The answer, until the deadline; one that is already waiting (read after a pause) is always taken.
  for (;;) {
    if (!PQconsumeInput(c)) {
      drop();
      return std::nullopt;
    }
    if (!PQisBusy(c)) break;
    const std::int64_t left = (deadline - now()).count();
    if (left <= 0) {
      drop();  // no answer in time: the driver gives the connection up (its transaction rolls back)
      return std::nullopt;
    }
    pollfd pf{PQsocket(c), POLLIN, 0};
    ::poll(&pf, 1, static_cast<int>(std::min<std::int64_t>(left / 1'000'000 + 1, 1000)));
  }
  Answer a;
  for (PGresult* r = PQgetResult(c); r != nullptr; r = PQgetResult(c)) {
    Result res(r, &PQclear);
    const ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
      a.rows = std::move(res);
    } else {
      const char* code = PQresultErrorField(r, PG_DIAG_SQLSTATE);
      a.sqlstate = code ? code : "?";
    }
  }
  if (!a.ok()) {
    if (PQstatus(c) != CONNECTION_OK || a.sqlstate == "57014") {  // gone, or statement_timeout: no answer
      drop();
      return std::nullopt;
    }
    reply.error = retryable(a.sqlstate) ? dblease::kSerializationFailure : "sqlstate " + a.sqlstate;
    return reply;
  }
  reply.ok = true;
  if (rq.op == SqlOp::begin) reply.now = Time{std::stoll(a.at(0, 0)) * 1000};
  if (rq.op == SqlOp::select_for_update && a.count() == 1)
    reply.row = dblease::Row{.token = std::stoull(a.at(0, 1)),
                             .owner = a.at(0, 0),
                             .expires = Time{std::stoll(a.at(0, 2)) * 1000},
                             .value = {}};
  return reply;
}

std::string PgLink::write(const std::string& key, const std::string& client, std::uint64_t write_id,
                          const std::optional<std::uint64_t>& token, const std::string& value) {
  PGconn* c = conn();
  if (!c) return {};
  const std::string t = token ? std::to_string(*token) : std::string();
  const std::string id = std::to_string(write_id);
  const char* values[5] = {key.c_str(), client.c_str(), id.c_str(), token ? t.c_str() : nullptr,
                           value.c_str()};
  Result r(
      PQexecParams(c, "SELECT write_with_fence($1, $2, $3, $4, $5)", 5, nullptr, values, nullptr, nullptr, 0),
      &PQclear);
  if (!r || PQresultStatus(r.get()) != PGRES_TUPLES_OK || PQntuples(r.get()) != 1) {
    if (PQstatus(c) != CONNECTION_OK) drop();
    return {};
  }
  return PQgetvalue(r.get(), 0, 0);
}

}  // namespace locksim::reality
