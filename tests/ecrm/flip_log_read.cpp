// Test driver: read a flip log with resil::inject::read_log (the reader of ckpt-flip revert and
// replay, with all its checks: seq order, chained words, bits = the mask's set bits, the footer's
// count of changed words) and print what it found as JSON, for ec_train_scrub.sh to compare with
// Python's resil.results.read_flip_log of the same file. Usage: flip_log_read LOG
// Bad input: one line "flip_log_read: error: <message>" and exit code 4 (corrupt input).
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>

#include "resil/core/error.hpp"
#include "resil/inject/flip_log.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: flip_log_read LOG\n";
    return 2;
  }
  try {
    const auto log = resil::inject::read_log(argv[1]);
    nlohmann::json out{{"seed", log.header.seed}, {"model", log.header.model}, {"complete", log.complete}, {"records", nlohmann::json::array()}};
    for (const auto& r : log.records)
      out["records"].push_back({{"dataset", r.dataset},
                                {"index", r.index},
                                {"nd", r.nd},
                                {"dtype", std::string(resil::ckpt::dtype_name(r.dtype))},
                                {"anchor", r.anchor},
                                {"old", r.old_bits},
                                {"new", r.new_bits},
                                {"mask", r.mask()}});
    std::cout << out.dump() << "\n";
    return 0;
  } catch (const resil::Error& e) {
    std::cerr << "flip_log_read: error: " << e.what() << "\n";
    return 4;
  }
}
