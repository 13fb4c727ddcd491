// --raw: faults anywhere in a file's bytes (HDF5 metadata included) to emulate storage corruption.
// Sites are uniform over the file's bits; records are byte records (FlipRecord::raw).
#pragma once

#include <string>
#include <vector>

#include "resil/inject/flip_log.hpp"
#include "resil/inject/plan.hpp"

namespace resil::inject {

/// Plan raw faults over the bytes of `file` (read-only). The fault model acts on 8-bit words.
std::vector<FlipRecord> plan_raw(const std::string& file, const PlanOptions& opt);

}  // namespace resil::inject
