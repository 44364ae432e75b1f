// The client side of a database connection: one round trip per statement, reconnecting (and failing over to
// the next server) after a connection is lost.
#include <fmt/format.h>

#include <algorithm>

#include "locksim/protocols/dblease/sql.hpp"

namespace locksim::dblease {

namespace {
const char* statement_name(SqlOp op) {
  switch (op) {
    case SqlOp::begin:
      return "sql-begin";
    case SqlOp::select_for_update:
      return "sql-select-for-update";
    case SqlOp::update:
      return "sql-update";
    case SqlOp::commit:
      return "sql-commit";
    case SqlOp::rollback:
      return "sql-rollback";
  }
  return "sql";
}
}  // namespace

SqlConnection::SqlConnection(std::vector<ProcId> servers, std::shared_ptr<Connections> connections)
    : servers_(std::move(servers)), connections_(std::move(connections)) {}

SqlConnection::~SqlConnection() {
  drop();
}

void SqlConnection::drop() {
  if (session_ != 0) connections_->close(session_);
  session_ = 0;
}

std::optional<SqlReply> SqlConnection::exec(Context& ctx, SqlRequest rq, Time deadline,
                                            std::string_view note) {
  if (servers_.empty()) return std::nullopt;
  if (session_ == 0) {
    session_ = connections_->open();
    seq_ = 0;
    rq.connect = true;
  }
  rq.session = session_;
  rq.seq = ++seq_;
  const Duration left = deadline - ctx.now();
  if (left <= 0ns) return std::nullopt;
  std::string detail = rq.key.empty() ? std::string() : fmt::format("{}/{}", rq.table, rq.key);
  std::optional<Message> rep;
  if (note.empty()) {
    rep = ctx.call(servers_[target_], Message::of(statement_name(rq.op), std::move(rq), std::move(detail)),
                   left);
  } else {
    const std::uint64_t id =
        ctx.send(servers_[target_], Message::of(statement_name(rq.op), std::move(rq), std::move(detail)));
    ctx.note(note);
    rep = ctx.receive(std::max<Duration>(deadline - ctx.now(), Duration{0}),
                      [id](const Message& r) { return r.reply_to == id; });
  }
  const SqlReply* r = rep ? rep->as<SqlReply>() : nullptr;
  if (!r) {
    // No answer in time (or the host refused): the driver gives the connection up; with a replica, the
    // next connection goes to the other server.
    drop();
    target_ = (target_ + 1) % servers_.size();
    return std::nullopt;
  }
  if (!r->ok && (r->error == kSessionTerminated || r->error == kReadOnly)) {
    drop();
    if (r->error == kReadOnly) target_ = (target_ + 1) % servers_.size();
  }
  return *r;
}

}  // namespace locksim::dblease
