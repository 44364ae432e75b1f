#include "reality/pg_client.hpp"

#include <libpq-fe.h>

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

namespace locksim::reality {

namespace {

/// Serialization failures retried within one acquire or release before it gives up (DbLeaseClient's).
constexpr int kSerializationRetries = 8;

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

PgLeaseCalls::PgLeaseCalls(std::string conninfo, std::int64_t tx_timeout_ns, Note note)
    : conninfo_(std::move(conninfo)), tx_timeout_ns_(tx_timeout_ns), note_(std::move(note)) {}

PgLeaseCalls::~PgLeaseCalls() {
  drop();
}

void PgLeaseCalls::drop() {
  if (conn_) PQfinish(conn_);
  conn_ = nullptr;
}

PGconn* PgLeaseCalls::conn() {
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

template <class Body>
PgLeaseCalls::Outcome PgLeaseCalls::with_retries(const std::string& name, Body&& body) {
  for (int i = 0; i <= kSerializationRetries; ++i) {
    if (i > 0) note_("serialization-retry", name);
    PGconn* c = conn();
    if (!c) return Outcome::failed;
    std::string sqlstate;
    const Outcome o = body(c, sqlstate);
    if (o == Outcome::done || o == Outcome::refused) return o;
    // A statement failed: the transaction is aborted (or the connection is gone).
    if (PQstatus(c) != CONNECTION_OK) {
      drop();
      return Outcome::failed;
    }
    run(c, "ROLLBACK");
    if (!retryable(sqlstate)) return Outcome::failed;
  }
  return Outcome::failed;
}

std::optional<PgAcquired> PgLeaseCalls::acquire(const std::string& name, const std::string& owner,
                                                std::int64_t ttl_ns, std::uint64_t first_token) {
  PgAcquired got;
  const std::string ttl_us = std::to_string(std::max<std::int64_t>(1, ttl_ns / 1000));
  const std::string base = std::to_string(first_token > 0 ? first_token - 1 : 0);
  const Outcome o = with_retries(name, [&](PGconn* c, std::string& sqlstate) {
    auto fail = [&](Answer& a) {
      sqlstate = a.sqlstate;
      return Outcome::retry;
    };
    Answer b = run(c, "BEGIN ISOLATION LEVEL SERIALIZABLE");
    if (!b.ok()) return fail(b);
    // row := SELECT * FROM leases WHERE name = $name FOR UPDATE; now := tx.Now()
    Answer s = run(c, "SELECT owner, expires <= now() FROM leases WHERE name = $1 FOR UPDATE", {name});
    if (!s.ok()) return fail(s);
    bool free = true;
    if (s.count() == 0) {
      Answer i = run(c, "INSERT INTO leases (name, owner, token, expires) VALUES ($1, '', $2, '-infinity')",
                     {name, base});
      if (!i.ok()) return fail(i);
    } else {
      free = s.at(0, 0).empty() || s.at(0, 1) == "t";
    }
    if (!free) {
      run(c, "ROLLBACK");
      return Outcome::refused;
    }
    // row.Token++; row.Owner = owner; row.Expires = now + ttl
    Answer u =
        run(c,
            "UPDATE leases SET token = token + 1, owner = $2, expires = now() + $3 * interval '1 "
            "microsecond' WHERE name = $1 RETURNING token, (extract(epoch FROM expires) * 1000000)::bigint",
            {name, owner, ttl_us});
    if (!u.ok() || u.count() != 1) return fail(u);
    got.token = std::stoull(u.at(0, 0));
    got.expires_real_ns = std::stoll(u.at(0, 1)) * 1000;
    // The service's own record of the grant, in the same transaction (it exists iff the grant committed).
    Answer g =
        run(c,
            "INSERT INTO lease_grants (name, owner, token, expires, recorded) SELECT name, owner, token, "
            "expires, clock_timestamp() FROM leases WHERE name = $1",
            {name});
    if (!g.ok()) return fail(g);
    note_("acquire-sent", fmt::format("key={} owner={} token={}", name, owner, got.token));
    Answer k = run(c, "COMMIT");
    if (!k.ok()) return fail(k);  // no answer: it may have committed; the TTL settles it
    return Outcome::done;
  });
  if (o != Outcome::done) return std::nullopt;
  return got;
}

bool PgLeaseCalls::release(const std::string& name, const std::string& owner, std::uint64_t token) {
  const Outcome o = with_retries(name, [&](PGconn* c, std::string& sqlstate) {
    auto fail = [&](Answer& a) {
      sqlstate = a.sqlstate;
      return Outcome::retry;
    };
    Answer b = run(c, "BEGIN ISOLATION LEVEL SERIALIZABLE");
    if (!b.ok()) return fail(b);
    Answer s = run(c, "SELECT owner, token FROM leases WHERE name = $1 FOR UPDATE", {name});
    if (!s.ok()) return fail(s);
    if (s.count() != 1 || s.at(0, 0) != owner || s.at(0, 1) != std::to_string(token)) {
      run(c, "ROLLBACK");
      return Outcome::refused;
    }
    Answer u = run(c, "UPDATE leases SET owner = '', expires = now() WHERE name = $1", {name});
    if (!u.ok()) return fail(u);
    Answer k = run(c, "COMMIT");
    if (!k.ok()) return fail(k);
    return Outcome::done;
  });
  return o == Outcome::done;
}

std::string PgLeaseCalls::write(const std::string& key, const std::string& client, std::uint64_t write_id,
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
