// Built instead of pg_client.cpp and pg_server.cpp when pkg-config finds no libpq: `locksim reality` runs
// without PostgreSQL, and says why db-lease and db-lease+fence are skipped.
#include "reality/pg_client.hpp"
#include "reality/pg_server.hpp"

namespace locksim::reality {

namespace {
constexpr const char* kWhy =
    "locksim was built without libpq, which the database lease's client needs (apt-get install libpq-dev, "
    "then "
    "build again)";
}

std::string pg_missing() {
  return kWhy;
}

PgLink::PgLink(std::string, std::int64_t, std::string, std::int64_t, Note) {}
PgLink::~PgLink() = default;
Time PgLink::now() {
  return {};
}
Time PgLink::wall() {
  return {};
}
void PgLink::note(std::string_view, std::string) {}
std::optional<dblease::SqlReply> PgLink::exec(dblease::SqlRequest, Time, std::string_view) {
  return std::nullopt;
}
std::string PgLink::write(const std::string&, const std::string&, std::uint64_t,
                          const std::optional<std::uint64_t>&, const std::string&) {
  return {};
}

PgServer::PgServer(std::string name, std::string dir) : name_(std::move(name)), dir_(std::move(dir)) {}
PgServer::~PgServer() = default;
void PgServer::start() {
  throw StartError(kWhy);
}
void PgServer::kill() {}
std::string PgServer::conninfo(std::uint16_t) const {
  return {};
}
std::vector<PgGrant> PgServer::grants() const {
  return {};
}
std::vector<PgWrite> PgServer::writes() const {
  return {};
}

}  // namespace locksim::reality
