// ec-train's flip log as a relaunch reads it back: the records of the earlier launch, and a last
// line that a kill cut short removed from the file so that the relaunch's records start on a line
// of their own.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>

#include "engine_impl.hpp"

namespace fs = std::filesystem;
using resil::ecrm::FlipLogTally;

namespace {
std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
}  // namespace

TEST_CASE("a relaunch reads the whole records and cuts off a line a kill left unfinished", "[ec][unit]") {
  const fs::path dir = fs::temp_directory_path() / ("resil-flip-log-tally-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path log = dir / "flips.jsonl";
  const std::string whole =
      "{\"type\":\"header\",\"format\":\"resil-flip-log/1\",\"tool\":\"ec-train\"}\n"
      "{\"type\":\"flip\",\"seq\":0,\"dataset\":\"/embedding/table0/weight\",\"index\":5,\"old\":\"0x3f800000\",\"new\":\"0x3f800001\"}\n"
      "{\"type\":\"flip\",\"seq\":1,\"dataset\":\"/embedding/table0/weight\",\"index\":5,\"old\":\"0x3f800001\",\"new\":\"0x3f800000\"}\n";
  {
    std::ofstream(log, std::ios::binary) << whole << "{\"type\":\"flip\",\"seq\":2,\"dataset\":\"/emb";
  }
  FlipLogTally t;
  t.read(log);
  CHECK(t.records == 2);
  CHECK(t.words_changed() == 0);  // the second record undid the first
  CHECK(slurp(log) == whole);

  FlipLogTally again;  // a log of whole lines is left as it is
  again.read(log);
  CHECK(again.records == 2);
  CHECK(slurp(log) == whole);
  fs::remove_all(dir);
}
